// StoreBootstrap: the Bootstrap that processes use. A tiny key-value store served over ZeroMQ by
// a StoreServer that the chief (rank 0) hosts at COHORT_BOOTSTRAP_ADDR; every other rank and
// every reducer connects as a client. Clients retry (resending lost requests, polling for missing
// keys) until their deadline, so processes may start in any order, and a server that starts late
// or restarts is simply reached later.
//
// Wire: a client DEALER sends [request id, "PUT"|"GET", key, value?]; the server's ROUTER answers
// [request id, "OK", value?] or [request id, "MISSING"]. Replies to stale request ids are
// dropped.
//
// Addresses: "host:port" (the environment contract; the server binds every interface on that
// port) or a full ZeroMQ endpoint ("tcp://127.0.0.1:5555", "ipc:///tmp/x.sock").
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collective/bootstrap.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace cohort::collective {

// Serves the store on a background thread until destroyed; an ipc:// endpoint's socket file goes
// with it (ZeroMQ leaves it behind).
// Thread safety: the public methods are thread-safe.
class StoreServer {
 public:
  // Binds `address` (see above; port 0 picks a free port, see endpoint()).
  static StatusOr<std::unique_ptr<StoreServer>> Start(const std::string& address);
  ~StoreServer();
  // The bound endpoint, e.g. "tcp://0.0.0.0:41234".
  const std::string& endpoint() const { return endpoint_; }
  // "host:port" clients can use for a server bound by TCP on this host (host given by caller).
  int port() const;

 private:
  StoreServer() = default;
  void Loop();

  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::map<std::string, std::string> values_;  // owned by the server thread
};

// Client side. One ZeroMQ socket guarded by a mutex.
class StoreBootstrap final : public Bootstrap {
 public:
  // Does not block: the server may not exist yet.
  static StatusOr<std::unique_ptr<StoreBootstrap>> Connect(
      const std::string& address,
      std::chrono::milliseconds put_timeout = std::chrono::milliseconds(60000));
  ~StoreBootstrap() override;
  Status Put(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override;
  StatusOr<std::optional<std::string>> Lookup(const std::string& key, Deadline deadline) override;

 private:
  StoreBootstrap() = default;
  // Sends one request and waits for its reply, resending on silence, until `deadline`.
  // Returns (found, value).
  StatusOr<std::pair<bool, std::string>> Call(const std::string& verb, const std::string& key,
                                              const std::string& value, Deadline deadline);

  std::mutex mu_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> socket_;  // guarded by mu_
  std::string endpoint_;
  std::chrono::milliseconds put_timeout_{60000};
  uint64_t next_id_ = 1;  // guarded by mu_
};

// The bootstrap of a process of a Cohort job: the store at COHORT_BOOTSTRAP_ADDR (the environment
// contract, communicator.h). The chief (worker 0) passes serve_store and hosts the StoreServer
// there for its lifetime; every process, the chief included, talks to it through `client`, whose
// puts wait up to `timeout`. kInvalidArgument when the variable is not set; an error when the
// address cannot be bound or connected.
struct JobBootstrap {
  std::unique_ptr<StoreServer> server;  // serve_store only; destroy after the client's users
  std::unique_ptr<StoreBootstrap> client;
};
StatusOr<JobBootstrap> BootstrapFromEnvironment(bool serve_store,
                                                std::chrono::milliseconds timeout);

// "host:port" -> "tcp://host:port"; full endpoints unchanged. For binding, host becomes "*".
std::string ClientEndpoint(const std::string& address);
std::string BindEndpoint(const std::string& address);

}  // namespace cohort::collective
