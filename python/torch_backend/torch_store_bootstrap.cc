#include "python/torch_backend/torch_store_bootstrap.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace cohort::torch_backend {
namespace {

using collective::Deadline;
using collective::SteadyClock;

// How long a failed store call waits before it reports, so that a caller polling a store whose
// server is gone does not spin.
constexpr auto kFailurePause = std::chrono::milliseconds(200);

Status StoreFailure(const std::string& what, const std::exception& e, Deadline deadline) {
  std::this_thread::sleep_until(std::min(deadline, SteadyClock::now() + kFailurePause));
  std::string message = e.what();
  // c10::Error appends a C++ backtrace after the first line: keep the message only.
  if (const auto eol = message.find('\n'); eol != std::string::npos) message.resize(eol);
  return Unavailable("torch store: " + what + ": " + message);
}

}  // namespace

TorchStoreBootstrap::TorchStoreBootstrap(c10::intrusive_ptr<c10d::Store> store)
    : store_(std::move(store)) {}

Status TorchStoreBootstrap::Put(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    store_->set(key, std::vector<uint8_t>(value.begin(), value.end()));
    return Status::Ok();
  } catch (const std::exception& e) {
    return StoreFailure("set " + key, e, SteadyClock::now() + kFailurePause);
  }
}

StatusOr<std::string> TorchStoreBootstrap::Get(const std::string& key, Deadline deadline) {
  auto backoff = std::chrono::milliseconds(1);
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      try {
        if (store_->check({key})) {
          const std::vector<uint8_t> value = store_->get(key);
          return std::string(value.begin(), value.end());
        }
      } catch (const std::exception& e) {
        return StoreFailure("get " + key, e, deadline);
      }
    }
    if (SteadyClock::now() + backoff >= deadline) {
      return DeadlineExceeded("bootstrap key '" + key + "' was never published");
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
  }
}

StatusOr<std::optional<std::string>> TorchStoreBootstrap::Lookup(const std::string& key,
                                                                 Deadline deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    if (!store_->check({key})) return std::optional<std::string>();
    const std::vector<uint8_t> value = store_->get(key);
    return std::optional<std::string>(std::string(value.begin(), value.end()));
  } catch (const std::exception& e) {
    return StoreFailure("lookup " + key, e, deadline);
  }
}

StatusOr<int64_t> TorchStoreBootstrap::Add(const std::string& key, int64_t delta) {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    return store_->add(key, delta);
  } catch (const std::exception& e) {
    return StoreFailure("add " + key, e, SteadyClock::now() + kFailurePause);
  }
}

std::string SessionPrefix(const std::string& session) { return "cohort/" + session; }

std::string SessionKey() { return "cohort/session"; }

StatusOr<std::string> JoinSession(collective::Bootstrap& group_store, int rank, Deadline deadline) {
  static std::mutex joined_mu;
  static std::set<std::string> joined;  // sessions this process has joined
  if (rank == 0) {
    std::random_device rd;
    char id[24];
    std::snprintf(id, sizeof(id), "%08x%08x", rd(), rd());
    COHORT_RETURN_IF_ERROR(group_store.Put(SessionKey(), id).WithContext("publishing the session"));
    std::lock_guard<std::mutex> lock(joined_mu);
    joined.insert(id);
    return std::string(id);
  }
  while (true) {
    auto session = group_store.Get(SessionKey(), deadline);
    if (!session.ok()) {
      if (session.status().code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceeded("rank 0 never started the process group's session (no " +
                                SessionKey() + ")");
      }
      return session.status();
    }
    {
      std::lock_guard<std::mutex> lock(joined_mu);
      if (joined.insert(*session).second) return *session;
    }
    if (SteadyClock::now() >= deadline) {
      return DeadlineExceeded("rank 0 never started a new session (" + SessionKey() +
                              " still names " + *session + ", which this process joined before)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status PublishSession(collective::Bootstrap& store, const std::string& session, int num_workers,
                      int num_reducers) {
  const std::string prefix = SessionPrefix(session) + "/";
  COHORT_RETURN_IF_ERROR(store.Put(prefix + "num_workers", std::to_string(num_workers)));
  COHORT_RETURN_IF_ERROR(store.Put(prefix + "num_reducers", std::to_string(num_reducers)));
  return store.Put(SessionKey(), session).WithContext("publishing the session for reducers");
}

c10::intrusive_ptr<c10d::Store> InnermostStore(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefix = dynamic_cast<c10d::PrefixStore*>(store.get()))
    store = prefix->getUnderlyingStore();
  return store;
}

StatusOr<std::string> WhereReducersJoin(const c10::intrusive_ptr<c10d::Store>& store) {
  const c10::intrusive_ptr<c10d::Store> innermost = InnermostStore(store);
  const char* kind = dynamic_cast<c10d::FileStore*>(innermost.get())   ? "a FileStore (file://)"
                     : dynamic_cast<c10d::HashStore*>(innermost.get()) ? "a HashStore"
                                                                       : nullptr;
  if (kind != nullptr) {
    return InvalidArgument(
        std::string("reducers were asked for (COHORT_NUM_REDUCERS or Options.num_reducers), but "
                    "this group's store is ") +
        kind +
        ", which `python3 -m cohort.torch.reducer` cannot join: reducers join a TCPStore "
        "(init_method env:// or tcp://, torchrun); without reducers the all-reduce runs as a "
        "ring, halving-doubling or recursive-doubling");
  }
  std::string address;
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(innermost.get())) {
    address = tcp->getHost() + ":" + std::to_string(tcp->getPort());
  } else {
    const char* host = std::getenv("MASTER_ADDR");
    const char* port = std::getenv("MASTER_PORT");
    address = std::string(host != nullptr ? host : "MASTER_ADDR") + ":" +
              (port != nullptr ? port : "MASTER_PORT");
  }
  std::string text =
      "its reducers join with `python3 -m cohort.torch.reducer --store " + address + "`";
  const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agent_store != nullptr && std::string_view(agent_store) == "False") {
    text +=
        " (this store is rank 0's, at a port torchrun's c10d rendezvous picks anew for each "
        "attempt: for reducers that follow restarts, start torchrun with --master_addr and "
        "--master_port, its static rendezvous, whose store is the agent's and stays)";
  }
  return text;
}

}  // namespace cohort::torch_backend
