// cohort-bench: Cohort's benchmarks. `cohort-bench allreduce ...` (see allreduce_bench.h);
// `cohort-bench ps ...` (see ps_bench.h).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cohort_bench/allreduce_bench.h"
#include "bench/cohort_bench/ps_bench.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::printf(
        "usage: cohort-bench allreduce|ps [options]   (cohort-bench allreduce --help, cohort-bench "
        "ps --help)\n");
    return argc < 2 ? 2 : 0;
  }
  const std::string verb = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (verb == "allreduce") {
    cohort::bench::AllreduceBenchOptions options;
    bool help = false;
    if (!cohort::bench::ParseAllreduceArgs(args, &options, &help)) return 2;
    if (help) {
      cohort::bench::PrintAllreduceUsage();
      return 0;
    }
    return cohort::bench::RunAllreduceBench(options);
  }
  if (verb == "ps") {
    cohort::bench::PsBenchOptions options;
    bool help = false;
    if (!cohort::bench::ParsePsArgs(args, &options, &help)) return 2;
    if (help) {
      cohort::bench::PrintPsUsage();
      return 0;
    }
    return cohort::bench::RunPsBench(options);
  }
  std::fprintf(stderr, "cohort-bench: unknown benchmark '%s' (have: allreduce, ps)\n",
               verb.c_str());
  return 2;
}
