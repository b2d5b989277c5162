#include "common/spec_limit.h"

#include <cctype>
#include <cstdio>
#include <limits>

namespace cohort {

StatusOr<uint64_t> ParseByteSize(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) {
    ++digits;
  }
  if (digits == 0 || digits > 18) {
    return InvalidArgument("expected a size such as 1048576, 512KiB or 1MiB, got '" +
                           std::string(text) + "'");
  }
  uint64_t value = std::stoull(std::string(text.substr(0, digits)));
  std::string unit(text.substr(digits));
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (unit.empty() || unit == "B") {
    shift = 0;
  } else if (unit == "K" || unit == "KIB") {
    shift = 10;
  } else if (unit == "M" || unit == "MIB") {
    shift = 20;
  } else if (unit == "G" || unit == "GIB") {
    shift = 30;
  } else {
    return InvalidArgument("unknown size unit '" + std::string(text.substr(digits)) + "' in '" +
                           std::string(text) + "' (use KiB, MiB or GiB)");
  }
  if (value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return InvalidArgument("size '" + std::string(text) + "' is too large");
  }
  value <<= shift;
  if (value == 0)
    return InvalidArgument("size must be at least 1 byte, got '" + std::string(text) + "'");
  return value;
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB"};
  if (bytes < 1024) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 2) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (value == static_cast<double>(static_cast<uint64_t>(value))) {
    std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  }
  return text;
}

Status CheckSpecSize(std::string_view what, uint64_t bytes, uint64_t limit,
                     std::string_view limit_name) {
  if (bytes <= limit) return Status::Ok();
  return InvalidArgument(std::string(what) + " is " + FormatBytes(bytes) + " (" +
                         std::to_string(bytes) + " bytes), over the limit of " +
                         FormatBytes(limit) + " (" + std::string(limit_name) + ")");
}

}  // namespace cohort
