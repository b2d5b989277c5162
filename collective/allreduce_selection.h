// Which all-reduce algorithm runs: one free function over what the workers' placement made
// available, the configured algorithm and the buffer size, with its size thresholds in one table,
// as UCC keeps a score table of message-size ranges per algorithm. The Communicator asks it for
// every Allreduce(kAuto); every worker evaluates it on the same inputs, so all pick the same.
//
// The rules, first match wins (AllreduceSelectionTable; the last one always matches):
//   needs                         buffer       runs
//   workers' shared memory        any          kSharedMemory: no network in the path at all
//   one host, shared memory lost  any          kRing: no link for the Reduction Server to halve,
//                                              and its reducers' copies compete for the cores
//   every host's shared memory    any          kHierarchical: each host's link carries the buffer
//                                              about twice, not once per worker
//   nothing                       <= 8 KiB     kRecursiveDoubling: a few latencies, log2(n) steps
//                                              of the whole buffer (two more for n not a power
//                                              of two), the fewest of any
//   a power-of-two of workers     <= 64 KiB    kHalvingDoubling: latency-bound, 2 log2(n) steps
//                                              beat the ring's 2(n-1) and the Reduction Server
//   reducers                      any          kReductionServer: each byte crosses a worker's link
//                                              once each way, the ring's 2(n-1)/n times
//   nothing                       any          kRing
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "collective/types.h"

namespace cohort::collective {

// Buffers up to this size go by recursive doubling across hosts: there a call is a few link
// latencies and recursive doubling takes half halving-doubling's steps; above it the whole buffer
// that recursive doubling sends at every step costs more than the steps it saves.
constexpr size_t kRecursiveDoublingAllreduceMaxBytes = size_t{8} << 10;
// Buffers up to this size go by halving-doubling across hosts: at 1-64 KiB a call is a few
// latencies long, and halving-doubling takes the fewest steps; from 128 KiB the bytes dominate and
// the Reduction Server's halved traffic wins.
constexpr size_t kHalvingDoublingMaxBytes = size_t{64} << 10;

// What the placement made available to the all-reduce, as the Communicator found it at Create.
struct AllreduceSupport {
  int num_workers = 1;
  int num_reducers = 0;
  bool one_host = false;       // every rank, reducers too, on one host with shared memory allowed
  bool shared_memory = false;  // the workers' shared-memory group is up (kSharedMemory can run)
  bool host_groups = false;    // every host's group is up (kHierarchical can run)
};

// What a rule needs besides the buffer size.
enum class SelectionNeed : uint8_t {
  kNothing,
  kSharedMemory,
  kOneHost,
  kHostGroups,
  kPowerOfTwoWorkers,
  kReducers,
};

struct SelectionRule {
  SelectionNeed need;
  size_t max_bytes;  // applies to buffers up to this many bytes
  Algorithm algorithm;
};

// kAuto's rules, in the order they are tried.
std::span<const SelectionRule> AllreduceSelectionTable();

// True when `support` has what `need` asks for.
bool Meets(const AllreduceSupport& support, SelectionNeed need);

// What Allreduce(kAuto) runs for a buffer of `bytes`: `configured` (CommunicatorOptions::
// algorithm) when it names one (kRing, kHalvingDoubling and kRecursiveDoubling as they are;
// kSharedMemory, kHierarchical and kReductionServer when `support` has what they need, else
// kRing); for kAuto the first rule of AllreduceSelectionTable that `support` and `bytes` meet.
Algorithm SelectAllreduceAlgorithm(const AllreduceSupport& support, Algorithm configured,
                                   size_t bytes);

// What Allreduce(kAuto) chooses from, fixed once a Communicator is made: what its placement made
// available and the algorithm its options configure. A copy answers after the communicator is
// gone (the torch backend reads it when a call is issued, and a group shut down has none).
struct AllreduceChoice {
  AllreduceSupport support;
  Algorithm configured = Algorithm::kAuto;

  // What kAuto runs for a buffer of `bytes` (default: a large one): SelectAllreduceAlgorithm.
  Algorithm For(size_t bytes = SIZE_MAX) const {
    return SelectAllreduceAlgorithm(support, configured, bytes);
  }
};

}  // namespace cohort::collective
