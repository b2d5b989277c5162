#include "collective/ps/ps_checkpoint.h"

#include <cstring>
#include <filesystem>
#include <string_view>

#include "common/checkpoint.h"

namespace cohort::collective::ps {
namespace {

constexpr uint32_t kMetaMagic = 0x4d535043;  // "CPSM"
constexpr uint32_t kMetaVersion = 1;

template <typename T>
void Append(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

template <typename T>
bool Take(std::string_view* in, T* v) {
  if (in->size() < sizeof(T)) return false;
  std::memcpy(v, in->data(), sizeof(T));
  in->remove_prefix(sizeof(T));
  return true;
}

}  // namespace

StatusOr<std::string> WriteShardCheckpoint(const std::string& dir, const ShardCheckpoint& c) {
  std::string meta;
  Append(&meta, kMetaMagic);
  Append(&meta, kMetaVersion);
  Append(&meta, c.server_index);
  Append(&meta, c.num_servers);
  Append(&meta, c.optimizer);
  Append(&meta, c.applied_clock);
  Append(&meta, c.async_pushes);
  Append(&meta, c.step);
  meta += c.layout.Serialize();
  CheckpointWriter writer(dir, c.step);
  COHORT_RETURN_IF_ERROR(writer.AddFile("meta", meta));
  COHORT_RETURN_IF_ERROR(writer.AddFile("shard", c.state));
  COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, writer.Commit());
  return info.path;
}

StatusOr<ShardCheckpoint> ReadShardCheckpoint(const std::string& path) {
  ShardCheckpoint c;
  c.path = path;
  if (!std::filesystem::exists(std::filesystem::path(path) / "MANIFEST")) {
    COHORT_ASSIGN_OR_RETURN(CheckpointInfo info, FindLatestValidCheckpoint(path));
    c.path = info.path;
  } else {
    COHORT_RETURN_IF_ERROR(VerifyCheckpoint(path));
  }
  COHORT_ASSIGN_OR_RETURN(std::string meta, ReadCheckpointFile(c.path, "meta"));
  COHORT_ASSIGN_OR_RETURN(c.state, ReadCheckpointFile(c.path, "shard"));
  std::string_view in(meta);
  uint32_t magic = 0, version = 0;
  if (!Take(&in, &magic) || magic != kMetaMagic || !Take(&in, &version) ||
      version != kMetaVersion || !Take(&in, &c.server_index) || !Take(&in, &c.num_servers) ||
      !Take(&in, &c.optimizer) || !Take(&in, &c.applied_clock) || !Take(&in, &c.async_pushes) ||
      !Take(&in, &c.step)) {
    return DataLoss("parameter-server checkpoint " + c.path + ": bad meta file");
  }
  COHORT_ASSIGN_OR_RETURN(c.layout, ModelLayout::Parse(in));
  return c;
}

}  // namespace cohort::collective::ps
