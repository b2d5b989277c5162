// cohort-bench: Cohort's benchmarks. `cohort-bench allreduce ...` (see allreduce_bench.h);
// `ps` belongs to the parameter server and is not built here yet.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cohort_bench/allreduce_bench.h"

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::printf("usage: cohort-bench allreduce [options]   (cohort-bench allreduce --help)\n");
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
  std::fprintf(stderr, "cohort-bench: unknown benchmark '%s' (have: allreduce)\n", verb.c_str());
  return 2;
}
