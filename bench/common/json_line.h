// JSON output of the benchmarks: one object per line on stdout (--json), keys in the order they
// were added, so bench/peers/join_results.py and median_runs.py read every benchmark alike.
#ifndef COHORT_BENCH_COMMON_JSON_LINE_H_
#define COHORT_BENCH_COMMON_JSON_LINE_H_

#include <nlohmann/json.hpp>

namespace cohort::bench {

using JsonLine = nlohmann::ordered_json;

// `value` rounded to `digits` decimals: a figure carries the digits the text columns show.
double RoundTo(double value, int digits);

// Writes `line` and a newline to stdout and flushes it.
void PrintJsonLine(const JsonLine& line);

}  // namespace cohort::bench

#endif  // COHORT_BENCH_COMMON_JSON_LINE_H_
