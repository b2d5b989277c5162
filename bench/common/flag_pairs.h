// Command lines of "--name VALUE" pairs for the control-plane and recovery benchmarks: each flag
// is bound to a string or an int field of the caller's arguments struct.
#ifndef COHORT_BENCH_COMMON_FLAG_PAIRS_H_
#define COHORT_BENCH_COMMON_FLAG_PAIRS_H_

#include <map>
#include <string>
#include <variant>

namespace cohort::bench {

using FlagTarget = std::variant<std::string*, int*>;

// Reads argv[first], argv[first + 1], ... as "--name VALUE" pairs into the targets `flags` binds
// them to. Returns an empty string, or what is wrong (an unknown flag, a flag without its value, a
// value that is not a whole number for an int flag), naming the flag.
std::string ParseFlagPairs(int argc, char** argv, int first,
                           const std::map<std::string, FlagTarget>& flags);

// True when argv[first], argv[first + 1], ... hold --help or -h: the caller prints its usage on
// stdout and exits 0.
bool AsksForHelp(int argc, char** argv, int first);

}  // namespace cohort::bench

#endif  // COHORT_BENCH_COMMON_FLAG_PAIRS_H_
