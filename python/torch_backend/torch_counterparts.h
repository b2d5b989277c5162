// Torch's enums (dtypes, reduce ops) beside their names and the collective library's
// counterparts: one table per enum, read for the name (messages), for the library's value (calls),
// and for the list of what the library supports (the error that refuses the rest).
//
// Contract: a table lists each torch value at most once; `library` is empty where the library has
// no counterpart. Lookups are linear (a dozen rows at most).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace cohort::torch_backend {

template <typename Torch, typename Library>
struct Counterpart {
  Torch torch;
  const char* name;
  std::optional<Library> library;
};

// The row of `value` in `table`, or nullptr when the table lacks it.
template <typename Torch, typename Library, size_t N>
constexpr const Counterpart<Torch, Library>* RowOf(const Counterpart<Torch, Library> (&table)[N],
                                                   Torch value) {
  for (const auto& row : table) {
    if (row.torch == value) return &row;
  }
  return nullptr;
}

// The names of the rows that have a library counterpart, in table order: "a, b, c".
template <typename Torch, typename Library, size_t N>
std::string SupportedNames(const Counterpart<Torch, Library> (&table)[N]) {
  std::string out;
  for (const auto& row : table) {
    if (!row.library) continue;
    if (!out.empty()) out += ", ";
    out += row.name;
  }
  return out;
}

}  // namespace cohort::torch_backend
