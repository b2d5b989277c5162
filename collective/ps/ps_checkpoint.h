// Shard checkpoints of the parameter server, in common/checkpoint.h's directories: checkpoint
// `step` of a server is dir/ckpt-<step> with two files.
//   meta:  u32 magic "CPSM", u32 version 1, i32 server index, i32 number of servers, the
//          OptimizerConfig as on the wire, i64 applied clock, u64 asynchronous pushes, i64 step,
//          then the ModelLayout's encoding (ps_layout.h).
//   shard: Shard::SaveState (ps_shard.h): per part, update count, values, optimizer state.
// Native byte order, like the protocol: checkpoints move between servers of one architecture.
//
// Thread safety: free functions; concurrent writes of one directory must use different steps.
#pragma once

#include <cstdint>
#include <string>

#include "collective/ps/ps_layout.h"
#include "collective/ps/ps_optimizer.h"
#include "common/status.h"

namespace cohort::collective::ps {

struct ShardCheckpoint {
  int32_t server_index = 0;
  int32_t num_servers = 1;
  OptimizerConfig optimizer;
  int64_t applied_clock = 0;  // SSP: every clock below it is in the values
  uint64_t async_pushes = 0;  // asynchronous pushes applied
  int64_t step = 0;
  ModelLayout layout;
  std::string state;  // Shard::SaveState
  std::string path;   // where it was read from (ReadShardCheckpoint)
};

// Commits `checkpoint` as dir/ckpt-<step> (replacing an earlier one of that step); returns its
// path.
StatusOr<std::string> WriteShardCheckpoint(const std::string& dir,
                                           const ShardCheckpoint& checkpoint);

// Reads checkpoint `path` (a ckpt-<step> directory, verified against its MANIFEST) or, when
// `path` holds checkpoints, the newest valid one in it. kNotFound when there is none; kDataLoss
// for a file that verifies but does not parse.
StatusOr<ShardCheckpoint> ReadShardCheckpoint(const std::string& path);

}  // namespace cohort::collective::ps
