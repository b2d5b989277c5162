// `cohort exec` on the agent: a command run beside one replica attempt as that attempt runs, for
// a user debugging it (`nvidia-smi`, `ls $AIP_CHECKPOINT_DIR`, `py-spy dump --pid
// $COHORT_REPLICA_PID`), as `kubectl exec`, Vertex's interactive shell and Slurm's `srun --jobid
// --overlap` do.
//
// How it runs (ExecTarget, taken from the attempt at its launch):
//  - a process replica: on the node, with the attempt's whole environment (its GPUs pinned by
//    CUDA_VISIBLE_DEVICES, its RANK, its AIP_* dirs) plus COHORT_REPLICA_PID (the replica's
//    command, by the node's pid: the command does not enter the replica's PID namespace), in the
//    attempt's working directory, as the attempt's account, inside the attempt's cgroup where it
//    has one (its memory counts there, and a stop of the attempt ends it too). argv[0] is looked
//    up on the replica's PATH, as the replica's own command is;
//  - a container replica: through the runtime's exec (`runc exec ID`, `docker exec ID`), which
//    gives it the container's environment, user, working directory and namespaces.
// stdin is /dev/null; stdout and stderr come back together, at most kMaxExecOutputBytes (the rest
// is read and dropped). The command is killed (SIGKILL, its process group) at its timeout, or when
// the ExecRunner is destroyed.
//
// ExecRunner runs each command on a thread of its own (RunCaptured, hidden from the agent's
// reaper), at most `max_running` at once; the agent loop collects what ended with TakeFinished.
// Thread safety: ExecRunner's methods run on the agent loop; the threads share nothing with it
// but their futures and the cancel flag.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/captured_command.h"
#include "agent/launcher.h"
#include "agent/replica_user.h"
#include "common/exec_limits.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::agent {

// What an attempt's command needs to run as the attempt runs.
struct ExecTarget {
  // Non-empty: the argv, to which the command is appended, that runs it inside the attempt's
  // container (the rest is then the container's): with stdin from /dev/null, streamed, or on a
  // terminal (ReplicaProcess::ExecPrefix).
  std::vector<std::string> container_exec;
  std::vector<std::string> container_exec_stream;
  std::vector<std::string> container_exec_terminal;
  // The attempt's environment, working dir, account and cgroup, which a command run beside a
  // process replica gets (a container's has the container's); also what a live restart hands
  // over of the attempt (agent/handoff.h).
  std::map<std::string, std::string> env;
  std::string working_dir;
  std::optional<RunAs> run_as;
  std::string cgroup;  // empty: none
};

struct ExecResult {
  int exit_code = -1;
  std::string output;
  bool truncated = false;
  bool timed_out = false;
};

// How a command runs at a target: its command line (the container runtime's exec with the
// command appended, or the command found on the replica's PATH) and its hidden child's options
// (agent/captured_command.h: the attempt's environment, working directory, cgroup, account).
struct PreparedExec {
  std::vector<std::string> command;
  std::vector<std::string> env;  // "NAME=value"; empty: the runtime's (a container)
  CaptureOptions base;           // hidden_from_reaper, and the above but env
  // `base` with its env pointing at `env` (valid while this lives).
  CaptureOptions Options() const;
};

// How `argv` runs at `target` with its stdin as `stdio` says, COHORT_REPLICA_PID `replica_pid`;
// or, for a process replica whose PATH has no such command, how it ends (see RunInReplica).
std::variant<PreparedExec, ExecResult> PrepareExec(const ExecTarget& target, pid_t replica_pid,
                                                   const std::vector<std::string>& argv,
                                                   ExecStdio stdio);

// Runs `argv` at `target` (see above); `replica_pid` is COHORT_REPLICA_PID. Blocks until it ends,
// its timeout passes or `cancel` is set. A command not found on the replica's PATH ends 127, one
// found but not executable 126, each with a line saying so, as a shell's would.
ExecResult RunInReplica(const ExecTarget& target, pid_t replica_pid,
                        const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                        const std::atomic<bool>* cancel = nullptr);

class ExecRunner {
 public:
  explicit ExecRunner(size_t max_running = 8) : max_running_(max_running) {}
  // Kills the commands still running (noticed within about 100 ms) and waits for their threads.
  ~ExecRunner();
  ExecRunner(const ExecRunner&) = delete;
  ExecRunner& operator=(const ExecRunner&) = delete;

  // Starts `argv` at `target`; `header` (its exec id, job, replica, attempt, node) becomes the
  // ExecOutput TakeFinished returns. RESOURCE_EXHAUSTED when max_running run already.
  Status Start(wire::ExecOutputT header, ExecTarget target, pid_t replica_pid,
               std::vector<std::string> argv, std::chrono::milliseconds timeout);
  // Kills every command running now (noticed within about 100 ms); each ends as it then does,
  // its ExecOutput's killed_because saying `why`. Commands started later are not touched.
  void KillAll(const std::string& why);
  // The commands that ended since the last call, as ExecOutput.
  std::vector<wire::ExecOutputT> TakeFinished();
  size_t running() const { return running_.size(); }

 private:
  struct Running {
    wire::ExecOutputT header;
    std::future<ExecResult> result;
    // Set to kill it; shared with its thread, which may outlive this entry's move.
    std::shared_ptr<std::atomic<bool>> cancel = std::make_shared<std::atomic<bool>>(false);
  };
  size_t max_running_;
  std::vector<Running> running_;
};

}  // namespace cohort::agent
