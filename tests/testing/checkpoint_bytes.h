// The bytes of the checkpoint formats common/script_checkpoints.h judges, for tests: a zip
// archive (what torch.save writes) and a .safetensors file, whole; a test cuts them short.
#pragma once

#include <cstdint>
#include <string>

namespace cohort::testing {

inline void PutLe(std::string* out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A zip file holding `name` (stored, not compressed) with `payload`, and an archive comment.
inline std::string Zip(const std::string& name, const std::string& payload,
                       const std::string& comment = "") {
  std::string local = "PK\x03\x04";
  PutLe(&local, 20, 2);  // version needed
  PutLe(&local, 0, 2);   // flags
  PutLe(&local, 0, 2);   // stored
  PutLe(&local, 0, 4);   // time, date
  PutLe(&local, 0, 4);   // crc-32 (not checked here)
  PutLe(&local, payload.size(), 4);
  PutLe(&local, payload.size(), 4);
  PutLe(&local, name.size(), 2);
  PutLe(&local, 0, 2);
  local += name + payload;
  std::string central = "PK\x01\x02";
  PutLe(&central, 20, 2);
  PutLe(&central, 20, 2);
  PutLe(&central, 0, 2);
  PutLe(&central, 0, 2);
  PutLe(&central, 0, 4);
  PutLe(&central, 0, 4);
  PutLe(&central, payload.size(), 4);
  PutLe(&central, payload.size(), 4);
  PutLe(&central, name.size(), 2);
  PutLe(&central, 0, 2);
  PutLe(&central, 0, 2);
  PutLe(&central, 0, 2);
  PutLe(&central, 0, 2);
  PutLe(&central, 0, 4);
  PutLe(&central, 0, 4);  // offset of the local header
  central += name;
  std::string end = "PK\x05\x06";
  PutLe(&end, 0, 4);
  PutLe(&end, 1, 2);
  PutLe(&end, 1, 2);
  PutLe(&end, central.size(), 4);
  PutLe(&end, local.size(), 4);
  PutLe(&end, comment.size(), 2);
  return local + central + end + comment;
}

// A .safetensors file with one float32 tensor of `count` elements.
inline std::string Safetensors(int count) {
  std::string header = R"({"w":{"dtype":"F32","shape":[)" + std::to_string(count) +
                       R"(],"data_offsets":[0,)" + std::to_string(4 * count) +
                       R"(]},"__metadata__":{"format":"pt"}})";
  std::string out;
  PutLe(&out, header.size(), 8);
  return out + header + std::string(4 * count, '\1');
}

}  // namespace cohort::testing
