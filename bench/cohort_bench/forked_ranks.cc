#include "bench/cohort_bench/forked_ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <vector>

#include "common/logging.h"

namespace cohort::bench {
namespace {

// A TCP port on 127.0.0.1 that was free a moment ago.
int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

int RunRank(const std::string& role, int index, bool worker, const std::string& address,
            std::chrono::milliseconds timeout,
            const std::function<int(collective::StoreBootstrap& bootstrap)>& body) {
  // The store lives as long as the rank that hosts it.
  std::unique_ptr<collective::StoreServer> store;
  if (worker && index == 0) {
    auto started = collective::StoreServer::Start(address);
    if (!started.ok()) return RankExitCode(role, index, started.status());
    store = std::move(*started);
  }
  auto bootstrap = collective::StoreBootstrap::Connect(address, timeout);
  if (!bootstrap.ok()) return RankExitCode(role, index, bootstrap.status());
  return body(**bootstrap);
}

int RankExitCode(const std::string& role, int index, const Status& status) {
  if (status.ok()) return 0;
  spdlog::error("{} {}: {}", role, index, status.ToString());
  return 1;
}

int RunForkedJob(
    int workers, int others,
    const std::function<int(bool worker, int index, const std::string& address)>& rank_main) {
  const std::string address = "127.0.0.1:" + std::to_string(FreeLoopbackPort());
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int i = 0; i < workers + others; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const bool worker = i < workers;
      const int code = rank_main(worker, worker ? i : i - workers, address);
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  int rc = 0;
  for (pid_t p : pids) {
    int status = 0;
    waitpid(p, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

int RunJob(
    const std::string& command, int rank, const std::string& role, const std::string& bootstrap,
    int workers, int others, bool inproc, const std::function<int()>& run_threads,
    const std::function<int(bool worker, int index, const std::string& address)>& rank_main) {
  if (rank >= 0) {
    const bool worker = role == "worker";
    const int limit = worker ? workers : others;
    if (rank >= limit) {
      std::fprintf(stderr, "%s: --rank %d is out of range for %d %ss\n", command.c_str(), rank,
                   limit, role.c_str());
      return 2;
    }
    return rank_main(worker, rank, bootstrap);
  }
  if (inproc) return run_threads();
  return RunForkedJob(workers, others, rank_main);
}

}  // namespace cohort::bench
