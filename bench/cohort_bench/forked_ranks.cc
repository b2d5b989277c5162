#include "bench/cohort_bench/forked_ranks.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

namespace cohort::bench {

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

StatusOr<RankBootstrap> JoinBootstrap(const std::string& address, bool host_store,
                                      std::chrono::milliseconds timeout) {
  RankBootstrap rank;
  if (host_store) {
    COHORT_ASSIGN_OR_RETURN(rank.store, collective::StoreServer::Start(address));
  }
  COHORT_ASSIGN_OR_RETURN(rank.bootstrap, collective::StoreBootstrap::Connect(address, timeout));
  return rank;
}

int RunForkedRanks(int ranks, const std::function<int(int rank_index)>& rank_main) {
  std::vector<pid_t> pids;
  std::fflush(nullptr);
  for (int i = 0; i < ranks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      const int code = rank_main(i);
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

}  // namespace cohort::bench
