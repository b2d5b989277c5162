#include "collective/ps/ps_checkpoint.h"

#include <filesystem>
#include <string_view>

#include "collective/ps/ps_bytes.h"
#include "common/checkpoint.h"

namespace cohort::collective::ps {
namespace {

constexpr uint32_t kMetaMagic = 0x4d535043;  // "CPSM"
constexpr uint32_t kMetaVersion = 1;

}  // namespace

StatusOr<std::string> WriteShardCheckpoint(const std::string& dir, const ShardCheckpoint& c) {
  std::string meta;
  AppendBytes(&meta, kMetaMagic);
  AppendBytes(&meta, kMetaVersion);
  AppendBytes(&meta, c.server_index);
  AppendBytes(&meta, c.num_servers);
  AppendBytes(&meta, c.optimizer);
  AppendBytes(&meta, c.applied_clock);
  AppendBytes(&meta, c.async_pushes);
  AppendBytes(&meta, c.step);
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
  if (!TakeBytes(&in, &magic) || magic != kMetaMagic || !TakeBytes(&in, &version) ||
      version != kMetaVersion || !TakeBytes(&in, &c.server_index) ||
      !TakeBytes(&in, &c.num_servers) || !TakeBytes(&in, &c.optimizer) ||
      !TakeBytes(&in, &c.applied_clock) || !TakeBytes(&in, &c.async_pushes) ||
      !TakeBytes(&in, &c.step)) {
    return DataLoss("parameter-server checkpoint " + c.path + ": bad meta file");
  }
  COHORT_ASSIGN_OR_RETURN(c.layout, ModelLayout::Parse(in));
  return c;
}

}  // namespace cohort::collective::ps
