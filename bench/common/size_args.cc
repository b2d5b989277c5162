#include "bench/common/size_args.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

namespace cohort::bench {
namespace {

std::vector<std::string> Split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, sep)) parts.push_back(part);
  return parts;
}

}  // namespace

std::optional<size_t> ParseByteSize(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(value) || value < 0) return std::nullopt;
  const std::string unit(end);
  double multiplier = 1;
  if (unit == "K" || unit == "k" || unit == "KB" || unit == "KiB") {
    multiplier = 1024.0;
  } else if (unit == "M" || unit == "m" || unit == "MB" || unit == "MiB") {
    multiplier = 1024.0 * 1024;
  } else if (unit == "G" || unit == "g" || unit == "GB" || unit == "GiB") {
    multiplier = 1024.0 * 1024 * 1024;
  } else if (!unit.empty() && unit != "B") {
    return std::nullopt;
  }
  return static_cast<size_t>(value * multiplier);
}

std::optional<std::string> ParseSizeSweep(const std::string& spec, std::vector<size_t>* sizes) {
  sizes->clear();
  auto fail = [&](std::string message) -> std::optional<std::string> {
    sizes->clear();
    return message;
  };
  if (spec.find(':') != std::string::npos) {
    const std::vector<std::string> parts = Split(spec, ':');
    if (parts.size() < 2 || parts.size() > 3) return fail("size range must be MIN:MAX[:FACTOR]");
    const std::optional<size_t> lo = ParseByteSize(parts[0]);
    const std::optional<size_t> hi = ParseByteSize(parts[1]);
    size_t factor = 2;
    if (parts.size() == 3) {
      const std::optional<size_t> f = ParseByteSize(parts[2]);
      if (!f || *f < 2) return fail("size factor must be an integer >= 2");
      factor = *f;
    }
    if (!lo || !hi || *lo == 0 || *lo > *hi) return fail("bad size range '" + spec + "'");
    for (size_t s = *lo; s <= *hi; s *= factor) sizes->push_back(s);
  } else {
    for (const std::string& part : Split(spec, ',')) {
      const std::optional<size_t> s = ParseByteSize(part);
      if (!s || *s == 0) return fail("bad size '" + part + "'");
      sizes->push_back(*s);
    }
  }
  if (sizes->empty()) return fail("no sizes in '" + spec + "'");
  return std::nullopt;
}

}  // namespace cohort::bench
