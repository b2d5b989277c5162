#include "bench/common/json_line.h"

#include <cmath>
#include <cstdio>
#include <string>

namespace cohort::bench {

double RoundTo(double value, int digits) {
  const double scale = std::pow(10.0, digits);
  return std::round(value * scale) / scale;
}

void PrintJsonLine(const JsonLine& line) {
  const std::string text = line.dump();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace cohort::bench
