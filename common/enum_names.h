// Names of enum values as one table per enum, read both ways: value to name (for messages, logs
// and the wire's text forms) and name to value (for flags and specs). One list of the values
// replaces a switch for the name plus a second list of the values for the parse.
//
// Contract: a table lists each value at most once and each name at most once; lookups are linear
// (the tables are a handful of entries) and constexpr.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace cohort {

template <typename E>
struct EnumName {
  E value;
  std::string_view name;
};

// The name of `value` in `names`, or `unknown` when the table lacks it.
template <typename E, size_t N>
constexpr std::string_view NameIn(const EnumName<E> (&names)[N], E value,
                                  std::string_view unknown) {
  for (const auto& n : names) {
    if (n.value == value) return n.name;
  }
  return unknown;
}

// The value named `name` in `names`; nullopt when no entry has that name.
template <typename E, size_t N>
constexpr std::optional<E> ValueIn(const EnumName<E> (&names)[N], std::string_view name) {
  for (const auto& n : names) {
    if (n.name == name) return n.value;
  }
  return std::nullopt;
}

// The table's names as a choice for a message, in table order: "a, b or c".
template <typename E, size_t N>
std::string ChoiceOf(const EnumName<E> (&names)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += names[i].name;
  }
  return out;
}

}  // namespace cohort
