// Byte-size arguments of the benchmarks (cohort-bench, cohort-bench-mpi, cohort-bench-gloo):
// "64M", "1.5K", "4096", and the size sweeps that --sizes takes.
//
// Units are binary: K/k/KB/KiB = 2^10, M/m/MB/MiB = 2^20, G/g/GB/GiB = 2^30, B or none = 1.
// A sweep is "LO:HI" (LO, 2 LO, 4 LO, ... up to HI), "LO:HI:F" (factor F), or a comma list
// "4K,64M". Every size in a sweep is positive.
//
// The peers link this and nothing else of the project (they measure other libraries).
#ifndef COHORT_BENCH_COMMON_SIZE_ARGS_H_
#define COHORT_BENCH_COMMON_SIZE_ARGS_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cohort::bench {

// One size in bytes, or nullopt when `text` is not a non-negative number with a known unit.
std::optional<size_t> ParseByteSize(const std::string& text);

// Fills *sizes with the sweep `spec` describes; returns an error message naming what is wrong
// instead (and leaves *sizes empty).
std::optional<std::string> ParseSizeSweep(const std::string& spec, std::vector<size_t>* sizes);

}  // namespace cohort::bench

#endif  // COHORT_BENCH_COMMON_SIZE_ARGS_H_
