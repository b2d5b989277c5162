// ReplicaEnv: the agent's part of preparing a replica attempt: what a LaunchReplica asks it to
// start, where it runs, where its log goes, what its environment is, which binary a built-in
// replica runs, and which checkpoint it restores.
//
// Environment = PATH, HOME and LANG from the agent's own environment, overridden by the
// LaunchReplica env (the coordinator's rendering of the cluster plus the pool's env), plus what
// only the agent knows at (re)start: COHORT_RESTART_COUNT (= the attempt),
// COHORT_RESTORE_CHECKPOINT (newest valid checkpoint under the launch's checkpoint_dir; empty on a
// first start or when none) and the GPU pinning of the launch's GPUs (common/gpu_visibility.h:
// CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER); and, for the hang watchdog,
// where the replica keeps its flight recorder (COHORT_FLIGHT_RECORDER=<attempt
// dir>/flight-recorder, common/flight_recorder.h; a pool's env may set it, "off" included) and
// where and on which signal its Python stacks are dumped (COHORT_STACK_DUMP_DIR=<attempt
// dir>/stacks, COHORT_STACK_DUMP_SIGNAL; agent/stack_dump.h), with the agent's sitecustomize
// first on PYTHONPATH so that every Python process registers for it (agent/python_site.h); and
// where torch's `@record` writes
// the exception that ended it (TORCHELASTIC_ERROR_FILE=<attempt dir>/torchelastic-error.json, as
// torchrun gives each worker a file of its own; agent/failure_excerpt.h). A pool's env may set that
// variable too: the agent then reads no error file (the replica's path may be on storage the loop
// must not wait for).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/launcher.h"
#include "common/flight_recorder.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::agent {

// Job and replica names become path components: refuse anything that could escape work_dir.
Status CheckPathComponent(const std::string& what, const std::string& name);

// <work_dir>/<job>/<replica>/attempt-<n>
std::string AttemptWorkingDir(const std::string& work_dir, const std::string& job,
                              const std::string& replica, int attempt);
// <work_dir>/<job>/<replica>/attempt-<n>.log: stdout and stderr of the attempt.
std::string AttemptLogPath(const std::string& work_dir, const std::string& job,
                           const std::string& replica, int attempt);
// Appends "cohort-agent: <line>" to an attempt's log (why it never ran, where it restores from),
// so `cohort logs` shows it. Best effort: a log that cannot be opened is left alone.
void AppendAgentNote(const std::string& log_path, const std::string& line);

// The agent's own entries in an attempt's working directory, which the script's files are not
// (agent/working_files.h): its stack dumps, TORCHELASTIC_ERROR_FILE, flight recorder, a
// container's OCI bundle and the work directory of its WORKDIR overlay (agent/oci_launcher.h).
inline constexpr char kStackDumpEntry[] = "stacks";
inline constexpr char kErrorFileEntry[] = "torchelastic-error.json";
inline constexpr char kFlightRecorderEntry[] = "flight-recorder";
inline constexpr char kBundleEntry[] = "bundle";
inline constexpr char kOverlayWorkEntry[] = ".overlay-work";
bool IsAgentAttemptEntry(std::string_view name);
// What a container wrote in its image's WORKDIR (the overlay's upper directory): the script's.
inline constexpr char kImageWorkdirEntry[] = "image-workdir";

// <attempt dir>/stacks: where a replica's Python stacks are dumped.
std::string StackDumpDir(const std::string& attempt_dir);
// <attempt dir>/torchelastic-error.json: TORCHELASTIC_ERROR_FILE (named so that no file of the
// script's own in its working directory, an error.json say, is taken for it).
std::string ErrorFilePath(const std::string& attempt_dir);
inline constexpr char kErrorFileEnv[] = "TORCHELASTIC_ERROR_FILE";

// The replica's environment: the agent's PATH, HOME and LANG (a process replica's; a container's
// are its image's, which the container launcher lays under all of this), the launch's variables
// (which win), the attempt's files (flight recorder, stack dumps, TORCHELASTIC_ERROR_FILE: the
// launch may name others), COHORT_RESTART_COUNT, COHORT_RESTORE_CHECKPOINT and the GPUs'
// visibility. Also PYTHONUNBUFFERED=1 unless the launch sets it (to "" for buffered output): a
// script's print()s go to a log file, which Python would buffer 8 KiB at a time, so `cohort logs
// -f`, the watchdog's log progress and the failure's cause would see them late, and a lost node
// would take the last ones with it.
struct ReplicaEnvInput {
  std::map<std::string, std::string> launch_env;  // from LaunchReplica
  std::string attempt_dir;                        // empty: no recorder or stack dump variables
  int attempt = 0;
  std::vector<int> gpus;
  std::vector<std::string> visible_gpus;  // LaunchRequest::visible_gpus; empty: `gpus`
  std::string restore_checkpoint;
  // The agent's sitecustomize directory (agent/python_site.h), put first on PYTHONPATH unless the
  // launch env says COHORT_PYTHON_STACKS=0; empty: none (containers).
  std::string python_site;
  // A container replica: the agent's own PATH, HOME and LANG are not its (its image's ENV is).
  bool container = false;
  // AgentConfig::socket_interface: GLOO_SOCKET_IFNAME and TP_SOCKET_IFNAME (torch's gloo and
  // tensorpipe), unless the launch env sets them; "": neither.
  std::string socket_interface;
};
std::map<std::string, std::string> BuildReplicaEnv(const ReplicaEnvInput& input);

// What one LaunchReplica asks this node to start, before the restore lookup and the rendering of
// the environment.
struct LaunchPlan {
  LaunchRequest request;  // everything but env
  ReplicaEnvInput env;    // what env is rendered from (restore_checkpoint comes later)
  bool chief = false;     // role "chief": its metric file is followed
  bool container = false;
  std::string checkpoint_dir;
  // Nothing of the job's earlier attempts still runs: torn checkpoints may be set aside
  // (agent/torn_checkpoints.h).
  bool others_stopped = false;
};
// Fills `plan` from `launch`: the argv (a builtin's binary from `builtin_dir`, then the command),
// GPUs, CPU and memory limits, the container image, the launch env, the role, the checkpoint
// dir and others_stopped; the caller has set the request's job, replica, attempt, working_dir
// and log_path. kInvalidArgument for an unknown builtin or a launch with neither a command nor a
// container, kNotFound when a builtin's binary is nowhere (FindBuiltinBinary).
Status PlanLaunch(const wire::LaunchReplica& launch, const std::string& builtin_dir,
                  LaunchPlan* plan);

// Where a replica attempt restores from: the newest checkpoint under its checkpoint dir whose
// MANIFEST verifies (common/checkpoint.h: torn and corrupted ones are skipped), or "" when there
// is none or the directory does not exist; `notes` says what was skipped and why, for the
// attempt's log. Reads every file of the candidate to check its checksums.
struct RestorePoint {
  std::string checkpoint;
  std::vector<std::string> notes;
};
RestorePoint FindRestoreCheckpoint(const std::string& checkpoint_dir);

// Where the built-in binary `program` (cohort-reducer, cohort-ps, cohort-replica-init) is: the
// one lookup for all of them. In order: `builtin_dir` (the agent's --builtin-dir; skipped when
// empty), where an operator's explicit choice wins; beside the agent's own executable
// (/proc/self/exe), where an install or a build tree keeps the binaries of the agent's own
// version; then the agent's PATH (unset: /usr/local/bin:/usr/bin:/bin), read as execvp reads
// it, an empty entry being the current directory (ExecCandidates, agent/replica_exec.h). The
// first regular file this process may execute wins, returned as an absolute path (a replica runs
// in another working directory). kNotFound names `program` and every place it looked.
StatusOr<std::string> FindBuiltinBinary(const std::string& program, const std::string& builtin_dir);

// The program a built-in replica runs: "reducer" -> cohort-reducer, "parameter_server" ->
// cohort-ps, found by FindBuiltinBinary. kInvalidArgument for an unknown builtin, kNotFound when
// the binary is nowhere.
StatusOr<std::string> ResolveBuiltinBinary(const std::string& builtin,
                                           const std::string& builtin_dir);

// mkdir -p.
Status MakeDirs(const std::string& path);

// Removes the working dirs and logs of attempts (<work_dir>/<job>/<replica>/attempt-<n>[.log])
// untouched for longer than `retention` and not `live(job, replica, attempt)`, then the replica
// and job dirs left empty. Other files are never touched. Returns how many attempts it removed.
int SweepAttemptDirs(const std::string& work_dir, std::chrono::milliseconds retention,
                     const std::function<bool(const std::string& job, const std::string& replica,
                                              int attempt)>& live);

// The variables naming output directories (CLOUD_ML_HP_METRIC_FILE names a file: its directory).
inline constexpr const char* kOutputDirVars[] = {
    "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLOUD_ML_HP_METRIC_FILE"};
// Creates the output directories a replica's environment names (kOutputDirVars), so
// a trainer can write to them at once, as it can to Vertex's bucket paths. With `run_as`, those
// created at or below the job's output dir (the parent of AIP_MODEL_DIR) are that account's.
// These directories live on the job's output storage, typically an NFS export that can hang:
// the agent calls this off its loop (agent/replica_manager.h).
Status MakeOutputDirs(const std::map<std::string, std::string>& env,
                      const std::optional<RunAs>& run_as = std::nullopt);
// Whether `env` names any of those directories (MakeOutputDirs has something to do).
bool NamesOutputDirs(const std::map<std::string, std::string>& env);
// Test seam: `hook` is called with the env at the start of every MakeOutputDirs, on the thread
// that runs it; a test holds it there, standing in for a hung output storage. Empty: none.
void SetMakeOutputDirsHookForTesting(
    std::function<void(const std::map<std::string, std::string>& env)> hook);

}  // namespace cohort::agent
