// Fuzz target: arbitrary text as an agent's stack dump (the coordinator reads the dumps agents
// send, whose paths and names come from the replica). StackWhere must return a line of at most
// kStackWhereMaxBytes, never crash or read past the text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/stack_where.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (cohort::StackWhere(text).size() > cohort::kStackWhereMaxBytes) std::abort();
  return 0;
}
