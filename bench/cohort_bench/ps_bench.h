// `cohort-bench ps`: parameter-server throughput (collective/ps). W workers and S servers
// (default 4 and 2); for each model size, the model is one f32 key (or keys of --key-bytes),
// sharded by bytes over the servers, and the optimizer is asynchronous SGD.
//
// Phases per size, each between two barriers of all workers (so the time is the slowest
// worker's):
//   push: every worker pushes the whole model `iters` times (after `warmup`);
//   pull: every worker pulls the whole model `iters` times;
// Printed per size: time_us per push / per pull, and push_GBps / pull_GBps = W x size / time
// (aggregate over the workers). Each worker's link carries its size once per push; the servers'
// links carry W x size / S each, so on a switch of equal links the bound is
// min(W, S) x link rate (2 x link for 4 workers and 2 servers); `links` prints min(W, S).
// --check: integer-valued pushes (lr 1), and every pulled value is compared with W x pushes.
//
// --update-rate: keys of --key-bytes (default 4 KiB), `--keys` of them; every worker keeps
// --window requests of --batch keys in flight, --updates key updates each; prints updates/s
// (key updates applied per second over all servers).
//
// Ways to run: --transport inproc (threads over the loopback transport), --transport ucx (this
// process forks every worker and server; UCX_TLS from the environment), or one rank of a job
// launched elsewhere: --rank R --role worker|server --bootstrap HOST:PORT (worker 0 serves the
// bootstrap store).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace cohort::bench {

struct PsBenchOptions {
  int workers = 4;
  int servers = 2;
  std::vector<size_t> sizes;
  size_t key_bytes = 0;  // 0: one key per model (push/pull phases)
  std::string transport = "ucx";
  int iters = 10;
  int warmup = 2;
  double max_seconds_per_size = 0;
  bool check = false;
  bool json = false;
  int timeout_ms = 120000;
  // Update-rate mode.
  bool update_rate = false;
  size_t keys = 4096;
  int batch = 1;
  int window = 16;
  int updates = 4000;
  // One rank launched externally.
  int rank = -1;
  std::string role = "worker";
  std::string bootstrap;
};

bool ParsePsArgs(const std::vector<std::string>& args, PsBenchOptions* options, bool* help);
void PrintPsUsage();
int RunPsBench(const PsBenchOptions& options);

}  // namespace cohort::bench
