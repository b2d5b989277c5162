// The plumbing of one benchmark job on this host or across hosts, shared by `cohort-bench
// allreduce` and `cohort-bench ps`: a job has `workers` workers and some ranks of another role
// (reducers, servers); worker 0 hosts the bootstrap store every rank joins.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "collective/store_bootstrap.h"
#include "common/status.h"

namespace cohort::bench {

// One rank of a job whose bootstrap store is (or will be, on worker 0) at `address`: joins the
// store and runs `body` over it. `role` ("worker", "reducer", "server") and `index` name the rank
// in the log line written when the store cannot be joined (then it returns 1). Returns what `body`
// returns, the process exit code.
int RunRank(const std::string& role, int index, bool worker, const std::string& address,
            std::chrono::milliseconds timeout,
            const std::function<int(collective::StoreBootstrap& bootstrap)>& body);

// Exit code of a rank that ended with `status`: 0 when it is ok, else 1 after logging it.
int RankExitCode(const std::string& role, int index, const Status& status);

// Forks `workers` + `others` processes around a bootstrap store on a free 127.0.0.1 port (what
// `--transport ucx` does when no --rank is given): process i < workers runs
// rank_main(true, i, address), the others rank_main(false, i - workers, address). Returns 0 when
// every process exited 0, else 1.
int RunForkedJob(
    int workers, int others,
    const std::function<int(bool worker, int index, const std::string& address)>& rank_main);

// How a job's options say to run it: one rank launched elsewhere when rank >= 0 (a worker when
// `role` is "worker", else one of the others; a rank beyond the count of its role is refused with
// exit code 2 and a line prefixed with `command`), else every rank on threads (inproc:
// run_threads()) or as forked processes (RunForkedJob). Returns the exit code.
int RunJob(const std::string& command, int rank, const std::string& role,
           const std::string& bootstrap, int workers, int others, bool inproc,
           const std::function<int()>& run_threads,
           const std::function<int(bool worker, int index, const std::string& address)>& rank_main);

}  // namespace cohort::bench
