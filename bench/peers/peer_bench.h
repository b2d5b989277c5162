// Shared pieces of the all-reduce peer benchmarks (cohort-bench-mpi, cohort-bench-gloo): flag
// parsing, the size sweep, the buffer pattern whose exact sum is known, and the nccl-tests
// columns / JSON lines that cohort-bench prints too, so bench/compare_allreduce.sh can join the
// three programs' output by size.
//
// The peers depend on nothing of Cohort's own but bench/common (not even common/): they measure
// other libraries.
//
// Thread safety: none needed; every function is called from the benchmark's main thread.
#ifndef COHORT_BENCH_PEERS_PEER_BENCH_H_
#define COHORT_BENCH_PEERS_PEER_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cohort::bench {

// Flags common to both peers. Program-specific flags (gloo's --rank, --store, ...) are returned
// in `extra` as name -> value pairs for the caller to interpret.
struct PeerOptions {
  std::vector<size_t> sizes;  // bytes, each a multiple of sizeof(float)
  int iters = 20;
  int warmup = 5;
  bool check = false;
  bool json = false;
  // Caps iterations so that one size takes about this long at most (0: no cap). Large sizes on
  // a 1 Gbit/s link take seconds per all-reduce; nccl-tests has no such flag, so it is opt-in.
  double max_seconds_per_size = 0;
  std::vector<std::pair<std::string, std::string>> extra;
};

// Parses argv. Flags: --sizes SPEC (bench/common/size_args.h; each a multiple of 4 bytes),
// --dtype f32 (the only type supported), --iters N, --warmup N, --check, --json,
// --max-seconds-per-size S, and, when listed in `extra_flags`, "--name VALUE" pairs. On error or
// --help prints usage to stderr and returns nullopt with *exit_code set (0 for --help, 2 for bad
// usage).
std::optional<PeerOptions> ParsePeerOptions(int argc, char** argv,
                                            const std::vector<std::string>& extra_flags,
                                            const std::string& usage_extra, int* exit_code);

// Element i of rank r holds (r + 1) * (1 + i % 7): small integers, so the float sum over n ranks,
// n(n+1)/2 * (1 + i % 7), is exact in any summation order for n up to a few thousand.
void FillPattern(float* data, size_t count, int rank);
// Number of elements of `data` that differ from the exact sum over `nranks` ranks.
int64_t CountWrong(const float* data, size_t count, int nranks);

// One line of results.
struct ResultRow {
  std::string impl;    // "mpi", "gloo"
  std::string algo;    // which algorithm produced it ("ring", "default", ...)
  size_t size = 0;     // bytes
  double time_us = 0;  // mean over iterations of the slowest rank
  int nranks = 1;
  std::optional<int64_t> wrong;  // empty when --check was not given
  int iters = 0;
};

// Header of the nccl-tests style table (text mode only).
void PrintHeader(const PeerOptions& options, const std::string& impl, int nranks);
// One row, as text columns or as one JSON object per line.
void PrintRow(const PeerOptions& options, const ResultRow& row);

// Iterations to run for `size` bytes given a timing estimate (seconds per all-reduce, the max
// over ranks, so that every rank computes the same count).
int ItersFor(const PeerOptions& options, double seconds_per_op);
// Warm-up calls still to run after the first one took `first_call_seconds` (max over ranks):
// options.warmup - 1, capped so the warm-up takes about a quarter of --max-seconds-per-size.
int MoreWarmupFor(const PeerOptions& options, double first_call_seconds);

}  // namespace cohort::bench

#endif  // COHORT_BENCH_PEERS_PEER_BENCH_H_
