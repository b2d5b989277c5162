// The bounds of `cohort exec` (wire::ExecInReplica), shared by the client, the coordinator
// (coordinator/exec_relay.h) and the agent (agent/exec_in_replica.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace cohort {

// The largest command run: its arguments, and their bytes with a NUL each.
inline constexpr size_t kMaxExecArgs = 1024;
inline constexpr size_t kMaxExecArgBytes = 64 << 10;
// The command's timeout when none is given, and the longest one (ms).
inline constexpr int64_t kDefaultExecTimeoutMs = 60'000;
inline constexpr int64_t kMaxExecTimeoutMs = 3'600'000;
// How much longer than the command's timeout the coordinator waits for its agent's answer: the
// agent's loop, its kill (within 100 ms) and the way back.
inline constexpr int64_t kExecAnswerSlackMs = 10'000;
// The output (stdout and stderr together) that comes back; the rest is read and dropped.
inline constexpr size_t kMaxExecOutputBytes = 1 << 20;

// Interactive sessions (wire::ExecSessionIo): the input or output one step carries at most, how
// long an agent holds a step with nothing to answer, how long a session waits for its next step
// before it is killed, how many run on one node at once, and how much output an agent keeps for
// a session before it stops reading the command's (which then blocks writing).
inline constexpr size_t kMaxExecStepBytes = 64 << 10;
inline constexpr int64_t kExecStepHoldMs = 50;
inline constexpr int64_t kExecSessionIdleMs = 30'000;
inline constexpr size_t kMaxExecSessions = 8;
inline constexpr size_t kExecSessionBufferBytes = 1 << 20;

}  // namespace cohort
