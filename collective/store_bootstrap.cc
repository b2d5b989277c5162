#include "collective/store_bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "common/zmq_calls.h"

namespace cohort::collective {
namespace {

// A request unanswered this long is sent again: the server may have started or restarted since.
constexpr auto kResendInterval = std::chrono::milliseconds(300);

std::string ToString(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

std::string ClientEndpoint(const std::string& address) {
  if (address.find("://") != std::string::npos) return address;
  return "tcp://" + address;
}

std::string BindEndpoint(const std::string& address) {
  if (address.find("://") != std::string::npos) return address;
  const auto colon = address.rfind(':');
  const std::string port = colon == std::string::npos ? address : address.substr(colon + 1);
  return "tcp://*:" + port;
}

StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const std::string& address) {
  std::unique_ptr<StoreServer> server(new StoreServer());
  try {
    server->context_ = std::make_unique<zmq::context_t>(1);
    server->socket_ = std::make_unique<zmq::socket_t>(*server->context_, zmq::socket_type::router);
    server->socket_->set(zmq::sockopt::linger, 0);
    server->socket_->bind(BindEndpoint(address));
    server->endpoint_ = server->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Unavailable("bootstrap store: cannot bind " + BindEndpoint(address) + ": " + e.what());
  }
  server->thread_ = std::thread([s = server.get()] { s->Loop(); });
  return server;
}

StoreServer::~StoreServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  socket_.reset();
  context_.reset();
  // A named ipc endpoint ("ipc:///path"; "ipc://@name" is abstract, no file) is a file of ours.
  constexpr std::string_view kIpc = "ipc://";
  if (endpoint_.rfind(kIpc, 0) == 0 && endpoint_.size() > kIpc.size() &&
      endpoint_[kIpc.size()] != '@') {
    ::unlink(endpoint_.c_str() + kIpc.size());
  }
}

int StoreServer::port() const {
  const auto colon = endpoint_.rfind(':');
  if (colon == std::string::npos) return -1;
  return std::atoi(endpoint_.c_str() + colon + 1);
}

void StoreServer::Loop() {
  zmq::socket_t& sock = *socket_;
  while (!stop_.load()) {
    try {
      zmq::pollitem_t item{sock.handle(), 0, ZMQ_POLLIN, 0};
      PollFrames(&item, 1, std::chrono::milliseconds(50));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts = RecvMultipart(sock, zmq::recv_flags::dontwait);
      // [identity, id, verb, key, value?]
      if (parts.size() < 4) continue;
      const std::string verb = ToString(parts[2]);
      const std::string key = ToString(parts[3]);
      std::vector<zmq::message_t> reply;
      reply.emplace_back(parts[0].data(), parts[0].size());
      reply.emplace_back(parts[1].data(), parts[1].size());
      if (verb == "PUT" && parts.size() >= 5) {
        values_[key] = ToString(parts[4]);
        reply.emplace_back("OK", 2);
      } else if (verb == "GET") {
        auto it = values_.find(key);
        if (it == values_.end()) {
          reply.emplace_back("MISSING", 7);
        } else {
          reply.emplace_back("OK", 2);
          reply.emplace_back(it->second.data(), it->second.size());
        }
      } else {
        reply.emplace_back("BAD", 3);
      }
      for (size_t i = 0; i < reply.size(); ++i) {
        SendFrame(sock, reply[i],
                  i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    } catch (const zmq::error_t&) {
      // A send to a vanished peer or an interrupted poll: keep serving.
    }
  }
}

StatusOr<std::unique_ptr<StoreBootstrap>> StoreBootstrap::Connect(
    const std::string& address, std::chrono::milliseconds put_timeout) {
  std::unique_ptr<StoreBootstrap> b(new StoreBootstrap());
  b->endpoint_ = ClientEndpoint(address);
  b->put_timeout_ = put_timeout;
  try {
    b->context_ = std::make_unique<zmq::context_t>(1);
    b->socket_ = std::make_unique<zmq::socket_t>(*b->context_, zmq::socket_type::dealer);
    b->socket_->set(zmq::sockopt::linger, 0);
    b->socket_->set(zmq::sockopt::reconnect_ivl, 100);
    b->socket_->set(zmq::sockopt::reconnect_ivl_max, 1000);
    b->socket_->connect(b->endpoint_);
  } catch (const zmq::error_t& e) {
    return InvalidArgument("bootstrap store: cannot connect to " + b->endpoint_ + ": " + e.what());
  }
  return b;
}

StoreBootstrap::~StoreBootstrap() {
  socket_.reset();
  context_.reset();
}

StatusOr<std::pair<bool, std::string>> StoreBootstrap::Call(const std::string& verb,
                                                            const std::string& key,
                                                            const std::string& value,
                                                            Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    while (true) {
      const uint64_t id = next_id_++;
      SendFrame(*socket_, zmq::buffer(&id, sizeof(id)), zmq::send_flags::sndmore);
      SendFrame(*socket_, zmq::buffer(verb), zmq::send_flags::sndmore);
      if (verb == "PUT") {
        SendFrame(*socket_, zmq::buffer(key), zmq::send_flags::sndmore);
        SendFrame(*socket_, zmq::buffer(value), zmq::send_flags::none);
      } else {
        SendFrame(*socket_, zmq::buffer(key), zmq::send_flags::none);
      }
      const Deadline resend_at = std::min(deadline, SteadyClock::now() + kResendInterval);
      while (SteadyClock::now() < resend_at) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(resend_at - SteadyClock::now());
        zmq::pollitem_t item{socket_->handle(), 0, ZMQ_POLLIN, 0};
        PollFrames(&item, 1, std::max(left, std::chrono::milliseconds(1)));
        if (!(item.revents & ZMQ_POLLIN)) continue;
        std::vector<zmq::message_t> parts = RecvMultipart(*socket_, zmq::recv_flags::dontwait);
        if (parts.size() < 2 || parts[0].size() != sizeof(uint64_t)) continue;
        uint64_t got;
        std::memcpy(&got, parts[0].data(), sizeof(got));
        if (got != id) continue;  // reply to an earlier attempt
        const std::string status = ToString(parts[1]);
        if (status == "OK")
          return std::make_pair(true, parts.size() > 2 ? ToString(parts[2]) : std::string());
        if (status == "MISSING") return std::make_pair(false, std::string());
        return Internal("bootstrap store answered " + status + " to " + verb);
      }
      if (SteadyClock::now() >= deadline) {
        return DeadlineExceeded("bootstrap store at " + endpoint_ + " did not answer " + verb +
                                " " + key);
      }
    }
  } catch (const zmq::error_t& e) {
    return Unavailable("bootstrap store " + endpoint_ + ": " + e.what());
  }
}

Status StoreBootstrap::Put(const std::string& key, const std::string& value) {
  auto r = Call("PUT", key, value, SteadyClock::now() + put_timeout_);
  return r.status();
}

StatusOr<std::string> StoreBootstrap::Get(const std::string& key, Deadline deadline) {
  auto backoff = std::chrono::milliseconds(5);
  while (true) {
    auto r = Call("GET", key, "", deadline);
    if (!r.ok()) {
      if (r.status().code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceeded("bootstrap key '" + key + "' was never published (store " +
                                endpoint_ + " unreachable)");
      }
      return r.status();
    }
    if (r->first) return r->second;
    if (SteadyClock::now() + backoff >= deadline) {
      return DeadlineExceeded("bootstrap key '" + key + "' was never published");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

StatusOr<JobBootstrap> BootstrapFromEnvironment(bool serve_store,
                                                std::chrono::milliseconds timeout) {
  const char* addr = std::getenv("COHORT_BOOTSTRAP_ADDR");
  if (addr == nullptr || *addr == '\0') {
    return InvalidArgument("environment variable COHORT_BOOTSTRAP_ADDR is not set");
  }
  JobBootstrap job;
  if (serve_store) {
    COHORT_ASSIGN_OR_RETURN(job.server, StoreServer::Start(addr));
  }
  COHORT_ASSIGN_OR_RETURN(job.client, StoreBootstrap::Connect(addr, timeout));
  return job;
}

StatusOr<std::optional<std::string>> StoreBootstrap::Lookup(const std::string& key,
                                                            Deadline deadline) {
  auto r = Call("GET", key, "", deadline);
  if (!r.ok()) return r.status();
  if (!r->first) return std::optional<std::string>();
  return std::optional<std::string>(std::move(r->second));
}

}  // namespace cohort::collective
