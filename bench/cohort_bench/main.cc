// cohort-bench: Cohort's benchmarks. `cohort-bench allreduce ...` (see allreduce_bench.h);
// `cohort-bench ps ...` (see ps_bench.h).
#include <cstdio>
#include <string>
#include <vector>

#include "bench/cohort_bench/allreduce_bench.h"
#include "bench/cohort_bench/ps_bench.h"
#include "common/build_version.h"

namespace {

// One benchmark's command line: its usage for --help, else its run; 2 on bad flags.
template <typename Options>
int RunBenchmark(const std::vector<std::string>& args,
                 bool (*parse)(const std::vector<std::string>&, Options*, bool*), void (*usage)(),
                 int (*run)(const Options&)) {
  Options options;
  bool help = false;
  if (!parse(args, &options, &help)) return 2;
  if (help) {
    usage();
    return 0;
  }
  return run(options);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(
        "usage: cohort-bench allreduce|ps [options]\n"
        "Cohort's benchmarks: all-reduce algorithms and transports (allreduce), parameter servers\n"
        "(ps). `cohort-bench allreduce --help` and `cohort-bench ps --help` list their options.\n"
        "\n"
        "Options:\n"
        "  -h [ --help ]         show this help and exit\n"
        "  --version             print the version and exit\n",
        argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::puts(("cohort-bench " + std::string(cohort::CohortBuildVersion())).c_str());
    return 0;
  }
  const std::string verb = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (verb == "allreduce") {
    return RunBenchmark(args, cohort::bench::ParseAllreduceArgs, cohort::bench::PrintAllreduceUsage,
                        cohort::bench::RunAllreduceBench);
  }
  if (verb == "ps") {
    return RunBenchmark(args, cohort::bench::ParsePsArgs, cohort::bench::PrintPsUsage,
                        cohort::bench::RunPsBench);
  }
  std::fprintf(stderr, "cohort-bench: unknown benchmark '%s' (have: allreduce, ps)\n",
               verb.c_str());
  return 2;
}
