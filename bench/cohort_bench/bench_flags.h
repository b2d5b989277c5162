// The flag reader of `cohort-bench allreduce` and `cohort-bench ps`: a table of flags, each a
// switch or a "--name VALUE" (also "--name=VALUE") with the function that checks and stores its
// value; --help / -h ask for the usage.
//
// Contract: ParseBenchFlags reads every argument, stops at the first wrong one and prints what is
// wrong on stderr, prefixed by `program`: an unknown flag, a flag without its value, a value the
// flag's function refuses ("bad value for --workers: '0'").
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace cohort::bench {

struct BenchFlag {
  std::string name;  // "--workers"
  // A switch: run with an empty value and never given one.
  bool is_switch = false;
  // Checks and stores the value; false when it is not a good value for this flag.
  std::function<bool(const std::string& value)> set;
};

// Returns false after printing the first wrong argument; true otherwise, with *help set when
// --help or -h came (the arguments after it are not read).
bool ParseBenchFlags(const std::vector<std::string>& args, const char* program,
                     const std::vector<BenchFlag>& flags, bool* help);

// The checks both benchmarks make once the flags are read: `sizes` is a size sweep (stored in
// *sweep), and --rank comes with --bootstrap (rank >= 0 exactly when bootstrap is not empty).
// Prints what is wrong and returns false otherwise.
bool CheckSweepAndRank(const char* program, const std::string& sizes, std::vector<size_t>* sweep,
                       int rank, const std::string& bootstrap);

// A flag's function storing a whole number >= `min` in *out.
std::function<bool(const std::string&)> IntAtLeast(int* out, int min);

// A flag's function storing the value in *out when it is one of `allowed` (any value when empty).
std::function<bool(const std::string&)> OneOf(std::string* out, std::vector<std::string> allowed);

// The flags both benchmarks take, bound to the fields of `o` of the same names (--sizes to
// *sizes, read by CheckSweepAndRank): --check, --json, --workers, --sizes, --transport ucx|inproc,
// --iters, --warmup, --max-seconds-per-size, --timeout-ms, --rank, --bootstrap.
template <typename Options>
std::vector<BenchFlag> SharedFlags(Options* o, std::string* sizes) {
  return {
      {"--check", true, [o](const std::string&) { return o->check = true; }},
      {"--json", true, [o](const std::string&) { return o->json = true; }},
      {"--workers", false, IntAtLeast(&o->workers, 1)},
      {"--sizes", false, OneOf(sizes, {})},
      {"--transport", false, OneOf(&o->transport, {"ucx", "inproc"})},
      {"--iters", false, IntAtLeast(&o->iters, 1)},
      {"--warmup", false, IntAtLeast(&o->warmup, 0)},
      {"--max-seconds-per-size", false,
       [o](const std::string& v) {
         return (o->max_seconds_per_size = std::atof(v.c_str()), true);
       }},
      {"--timeout-ms", false, IntAtLeast(&o->timeout_ms, 1)},
      {"--rank", false, IntAtLeast(&o->rank, 0)},
      {"--bootstrap", false, OneOf(&o->bootstrap, {})},
  };
}

}  // namespace cohort::bench
