#include "common/env.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>

namespace cohort {

StatusOr<int> IntFromEnvironment(const char* name, std::optional<int> fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    if (fallback) return *fallback;
    return InvalidArgument(std::string("environment variable ") + name + " is not set");
  }
  const std::string_view text(value);
  int parsed = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
  if (ec != std::errc() || end != text.data() + text.size() || parsed < 0) {
    return InvalidArgument(std::string("environment variable ") + name + "='" + value +
                           "' is not a non-negative integer");
  }
  return parsed;
}

}  // namespace cohort
