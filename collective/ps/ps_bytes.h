// Fixed-size values as their bytes in host order: appended to a string, taken off the front of a
// view. The serialised layout (ps_layout) and the shard checkpoint file (ps_checkpoint) are made of
// them; both are read only on hosts of the same byte order as the writer (the job's servers).
#pragma once

#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

namespace cohort::collective::ps {

template <typename T>
void AppendBytes(std::string* out, const T& v) {
  static_assert(std::is_trivially_copyable_v<T>);
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// False, taking nothing, when `in` is shorter than a T.
template <typename T>
bool TakeBytes(std::string_view* in, T* v) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

}  // namespace cohort::collective::ps
