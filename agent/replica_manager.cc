#include "agent/replica_manager.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "agent/agent.h"
#include "agent/cgroup.h"
#include "agent/flight_recorder_poller.h"
#include "agent/metric_file_reader.h"
#include "agent/replica_env.h"
#include "agent/torn_checkpoints.h"
#include "agent/working_files.h"
#include "common/env_references.h"
#include "common/flight_recorder.h"
#include "common/logging.h"
#include "common/wire_string.h"

namespace cohort::agent {
namespace {

// With --insecure nobody is verified, so an owner mapped to root may run as root
// (agent/replica_user.h).
ReplicaUserOptions UserOptions(const AgentConfig& config) {
  ReplicaUserOptions options = config.users;
  if (config.security.insecure) options.allow_root = true;
  return options;
}

// The $(VAR) references of the request's command and args, expanded from its environment as it
// will run (common/env_references.h).
void ExpandCommand(LaunchRequest& request) {
  ExpandEnvReferences(request.argv, request.env);
  if (request.container_command) {
    ExpandEnvReferences(request.container_command->command, request.env);
    ExpandEnvReferences(request.container_command->args, request.env);
  }
}

}  // namespace

ReplicaManager::ReplicaManager(const AgentConfig& config, Clock& clock, Outbox& outbox,
                               std::unique_ptr<Launcher> process_launcher, Report report)
    : config_(config),
      clock_(clock),
      outbox_(outbox),
      report_(std::move(report)),
      process_launcher_(std::move(process_launcher)),
      users_(UserOptions(config), config.node_id, ::geteuid() == 0) {}

ReplicaManager::~ReplicaManager() {
  KillAll();
  // The preparations under way (image unpacks) end soon once cancelled; destroying the attempts
  // and abandoned_ then waits for them (a checkpoint lookup, which cannot be cancelled, reads
  // one checkpoint's files at most).
  if (process_launcher_) process_launcher_->CancelPrepares();
  if (container_launcher_) container_launcher_->CancelPrepares();
}

void ReplicaManager::KillAll() {
  for (auto& [key, a] : attempts_) {
    if (a.process && (!a.process->exit_info() || a.process->AnyAlive())) a.process->KillAll();
  }
}

void ReplicaManager::SetContainerLauncher(std::unique_ptr<Launcher> launcher) {
  container_launcher_ = std::move(launcher);
}

Attempt* ReplicaManager::Find(const std::string& key) {
  auto it = attempts_.find(key);
  return it == attempts_.end() ? nullptr : &it->second;
}

void ReplicaManager::SetState(Attempt& a, wire::ReplicaState state, std::string message) {
  a.state = state;
  a.message = std::move(message);
  a.version++;
  if (a.final) ++ends_changed_;
  report_(a);
}

// ---- launching ------------------------------------------------------------------------------

void ReplicaManager::Launch(const wire::LaunchReplica& launch) {
  std::string job = Str(launch.job());
  std::string replica = Str(launch.replica());
  // One attempt of a replica at a time on a node: an older one still running is replaced.
  for (auto& [other_key, other] : attempts_) {
    if (other.job == job && other.replica == replica && other.live() &&
        other.stop == StopCause::kNone) {
      spdlog::warn("{}/{}: attempt {} replaces attempt {} still running here; stopping it", job,
                   replica, launch.attempt(), other.attempt);
      other.RequestStop(StopCause::kReplaced,
                        "replaced by attempt " + std::to_string(launch.attempt()),
                        config_.grace_period, Now());
    }
  }
  const std::string key = AttemptKey(job, replica, launch.attempt());
  if (std::erase_if(ended_, [&](const wire::ReplicaStatusT& s) {
        return AttemptKey(s.job, s.replica, s.attempt) == key;
      }) > 0) {
    ++ends_changed_;
  }
  Attempt& a = attempts_[key];
  a.job = job;
  a.job_created_ms = launch.job_created_ms();
  a.replica = replica;
  a.attempt = launch.attempt();
  StartAttempt(a, launch);
}

void ReplicaManager::StartAttempt(Attempt& a, const wire::LaunchReplica& launch) {
  ++attempts_started_;
  if (launch.gpus()) a.gpus.assign(launch.gpus()->begin(), launch.gpus()->end());
  if (Status s = CheckPathComponent("job", a.job); !s.ok()) return FailBeforeLaunch(a, s, -1);
  if (Status s = CheckPathComponent("replica", a.replica); !s.ok()) {
    return FailBeforeLaunch(a, s, -1);
  }
  if (a.attempt < 0) return FailBeforeLaunch(a, InvalidArgument("negative attempt number"), -1);
  auto pending = std::make_unique<PendingLaunch>();
  LaunchRequest& request = pending->plan.request;
  request.job = a.job;
  request.replica = a.replica;
  request.attempt = a.attempt;
  request.working_dir = AttemptWorkingDir(config_.work_dir, a.job, a.replica, a.attempt);
  request.log_path = AttemptLogPath(config_.work_dir, a.job, a.replica, a.attempt);
  a.log =
      std::make_unique<LogShipper>(outbox_, a.key(), a.job, a.replica, a.attempt, request.log_path,
                                   config_.log_chunk_bytes, 2 * config_.resend_interval);
  if (Status s = MakeDirs(request.working_dir); !s.ok()) return FailBeforeLaunch(a, s, -1);
  // The job owner's account (agent/replica_user.h); its working dir is that account's.
  auto run_as = users_.Resolve(Str(launch.owner()));
  if (!run_as.ok()) return FailBeforeLaunch(a, run_as.status(), -1);
  if (*run_as && ::chown(request.working_dir.c_str(), (*run_as)->uid, (*run_as)->gid) != 0) {
    return FailBeforeLaunch(
        a, ErrnoStatus("chown " + request.working_dir + " to " + (*run_as)->account, errno), -1);
  }
  request.run_as = std::move(*run_as);
  SetState(a, wire::ReplicaState::STARTING, "");

  if (Status s = PlanLaunch(launch, config_.builtin_dir, &pending->plan); !s.ok()) {
    return FailBeforeLaunch(a, s, s.code() == StatusCode::kNotFound ? 127 : 2);
  }
  // The attempt's files (flight recorder, stack dumps, error file) are in its working directory,
  // which a container sees at the same path (agent/oci_launcher.h); the sitecustomize is put on a
  // process's PYTHONPATH here, on a container's by its launcher, above the image's.
  pending->plan.env.attempt_dir = request.working_dir;
  pending->plan.env.socket_interface = config_.socket_interface;
  if (pending->plan.container) {
    request.python_site = config_.python_site;
  } else {
    pending->plan.env.python_site = config_.python_site;
  }
  pending->launcher = process_launcher_.get();
  if (pending->plan.container) {
    pending->launcher = container_launcher_.get();
    if (pending->launcher == nullptr) {
      return FailBeforeLaunch(
          a,
          FailedPrecondition("this agent has no container launcher (image " + request.image + ")"),
          -1);
    }
  }
  // A first start begins from scratch; a restart resumes from the newest valid checkpoint, and
  // one that nothing else of its job runs beside first sets aside the checkpoints a crash left
  // torn (agent/torn_checkpoints.h); a restart also carries what an earlier attempt here left in
  // its working directory into its own (agent/working_files.h) and sets aside what of that is
  // torn (only this replica writes there). Those passes and the lookup, the output
  // dirs (on the job's output storage, an NFS export that may hang) and a container launcher's
  // Prepare (an image unpack) may take minutes: they run, in that order, on a thread of their own,
  // and StartPending() launches the attempt once they are done. A first process launch naming no
  // output dirs has nothing to wait for.
  // Prepare gets Launch's request, its environment rendered with the restore point (a container
  // launcher writes it into the container's config).
  request.cpu_quota = config_.cpu_quota;
  request.visible_gpus = VisibleGpuNames(config_.inventory.gpus, request.gpus);
  request.gpu_device_nodes = GpuDeviceNodes(config_.inventory.gpus, request.gpus);
  pending->plan.env.visible_gpus = request.visible_gpus;
  if (config_.bind_cpus_to_gpus) {
    request.cpu_affinity = GpuLocalCpus(config_.inventory.gpus, request.gpus, request.cpus);
    if (!request.cpu_affinity.empty()) {
      spdlog::info("{}/{} attempt {}: runs on CPUs {}, those near its GPUs", a.job, a.replica,
                   a.attempt, CpuListText(request.cpu_affinity));
    }
  }
  std::string restore_dir = a.attempt > 0 ? pending->plan.checkpoint_dir : "";
  request.env = BuildReplicaEnv(pending->plan.env);
  if (a.attempt == 0 && !pending->plan.container && !NamesOutputDirs(request.env)) {
    return FinishLaunch(a, *pending);
  }
  const std::string torn_dir = pending->plan.others_stopped ? restore_dir : "";
  pending->ready = std::async(std::launch::async, [launcher = pending->launcher, request,
                                                   env = pending->plan.env, restore_dir, torn_dir,
                                                   work_dir = config_.work_dir] {
    PreparedLaunch ready;
    TornCheckpoints torn = SetAsideTornCheckpoints(torn_dir, request.attempt, request.run_as);
    ready.start_note = TornCheckpointsSummary(torn);
    ready.restore = FindRestoreCheckpoint(restore_dir);
    ready.restore.notes.insert(ready.restore.notes.begin(), torn.notes.begin(), torn.notes.end());
    // What the script left in an earlier attempt's working directory here (its own checkpoints
    // among it: agent/working_files.h), and what of them a crash left torn.
    if (request.attempt > 0) {
      const CarriedFiles carried =
          CarryWorkingFiles(work_dir, request.job, request.replica, request.attempt);
      const std::string note = CarriedFilesNote(carried);
      if (!note.empty()) {
        ready.restore.notes.push_back(note);
        ready.start_note += (ready.start_note.empty() ? "" : "; ") + note;
      }
      if (!carried.moved.empty()) {
        TornCheckpoints torn_here =
            SetAsideTornCheckpoints(request.working_dir, request.attempt, request.run_as);
        const std::string summary = TornCheckpointsSummary(torn_here);
        if (!summary.empty()) {
          ready.start_note += (ready.start_note.empty() ? "" : "; ") + summary + " (working dir)";
        }
        ready.restore.notes.insert(ready.restore.notes.end(), torn_here.notes.begin(),
                                   torn_here.notes.end());
      }
    }
    ReplicaEnvInput restored = env;
    restored.restore_checkpoint = ready.restore.checkpoint;
    ready.env = BuildReplicaEnv(restored);
    // Before the command runs and before a container's bind mounts are written.
    ready.prepared = MakeOutputDirs(ready.env, request.run_as);
    if (!ready.prepared.ok()) return ready;
    LaunchRequest prepared = request;
    prepared.env = ready.env;
    ExpandCommand(prepared);  // a container launcher writes the command into its config
    ready.prepared = launcher->Prepare(prepared);
    return ready;
  });
  a.pending = std::move(pending);
}

void ReplicaManager::StartPending() {
  auto done = [](const PendingLaunch& pending) {
    return pending.ready.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  };
  for (auto& [key, a] : attempts_) {
    if (!a.pending) continue;
    const bool ready = done(*a.pending);
    if (!ready && a.stop == StopCause::kNone) continue;
    std::unique_ptr<PendingLaunch> pending = std::move(a.pending);
    if (a.stop != StopCause::kNone) {
      // Stopped (or preempted) before it started: it never will, and it ends now. A lookup or
      // unpack still under way goes on in the background (an unpacked image stays cached); the
      // launcher forgets what it prepared once it is done.
      if (ready) {
        pending->launcher->Forget(pending->plan.request);
      } else {
        abandoned_.push_back(std::move(pending));
      }
      a.final = true;
      a.gone = true;
      SetState(a, a.FinalState(wire::ReplicaState::STOPPED),
               a.stop_reason.empty() ? "stopped before it started"
                                     : a.stop_reason + "; stopped before it started");
      continue;
    }
    PreparedLaunch prepared = pending->ready.get();
    // The attempt's log says where it restores from and what was skipped (`cohort logs`).
    for (const std::string& note : prepared.restore.notes) {
      AppendAgentNote(pending->plan.request.log_path, note);
    }
    if (!prepared.prepared.ok()) {
      FailBeforeLaunch(a, prepared.prepared, -1);
      continue;
    }
    pending->plan.env.restore_checkpoint = prepared.restore.checkpoint;
    a.start_note = std::move(prepared.start_note);
    pending->plan.request.env = std::move(prepared.env);
    FinishLaunch(a, *pending);
  }
  std::erase_if(abandoned_, [&](const auto& pending) {
    if (!done(*pending)) return false;
    pending->launcher->Forget(pending->plan.request);
    return true;
  });
}

void ReplicaManager::FinishLaunch(Attempt& a, PendingLaunch& pending) {
  const ReplicaEnvInput& env = pending.plan.env;
  if (!env.restore_checkpoint.empty()) {
    spdlog::info("{}/{} attempt {}: restoring from {}", a.job, a.replica, a.attempt,
                 env.restore_checkpoint);
  }
  LaunchRequest& request = pending.plan.request;  // its env rendered, its output dirs made
  ExpandCommand(request);
  // A recorder file set up before this moment is not this attempt's
  // (agent/flight_recorder_poller.h).
  const int64_t launched_ns = FlightClockNs();
  // Launch returns before the command is executed: Reap() learns whether it was (RUNNING).
  auto process = pending.launcher->Launch(request);
  if (!process.ok()) return FailBeforeLaunch(a, process.status(), -1);
  a.chief = pending.plan.chief;
  a.launched_ns = launched_ns;
  Attach(a, std::move(*process), request, /*measurements_answered=*/0);
}

void ReplicaManager::Attach(Attempt& a, std::unique_ptr<ReplicaProcess> process,
                            const LaunchRequest& request, uint64_t measurements_answered) {
  a.process = std::move(process);
  a.exec_target.container_exec = a.process->ExecPrefix(ExecStdio::kNone);
  a.exec_target.container_exec_stream = a.process->ExecPrefix(ExecStdio::kStream);
  a.exec_target.container_exec_terminal = a.process->ExecPrefix(ExecStdio::kTerminal);
  a.exec_target.env = request.env;
  a.exec_target.working_dir = request.working_dir;
  a.exec_target.run_as = request.run_as;
  a.exec_target.cgroup = a.process->cgroup_path();
  // The error file is read at a failure only where the agent chose it: in the attempt's own dir.
  auto error_file = request.env.find(kErrorFileEnv);
  if (error_file != request.env.end() && error_file->second == ErrorFilePath(request.working_dir)) {
    a.error_file = error_file->second;
  }
  // The metric file is on the job's output storage: a reader's thread stats it for the progress
  // probe, and tails it for the chief's forwarder, never the loop (agent/metric_file_reader.h).
  std::shared_ptr<MetricFileReader> reader;
  auto metric_file = request.env.find("CLOUD_ML_HP_METRIC_FILE");
  if (metric_file != request.env.end() && !metric_file->second.empty()) {
    reader = std::make_shared<MetricFileReader>(metric_file->second, /*tail=*/a.chief);
    if (a.chief) {
      auto trial = request.env.find("CLOUD_ML_TRIAL_ID");
      a.metrics = std::make_unique<MetricForwarder>(
          outbox_, clock_, a.key(), reader, a.job, a.replica,
          trial == request.env.end() ? "" : trial->second, config_.metric_poll_interval,
          config_.resend_interval, measurements_answered);
    }
  }
  // The flight recorder may lie anywhere the job's env points it: a poller's thread reads it. A
  // relative path is the replica's, from its working directory; "off" records nothing.
  auto recorder = request.env.find(kFlightRecorderEnv);
  std::shared_ptr<FlightRecorderPoller> poller;
  if (recorder != request.env.end() && !recorder->second.empty() &&
      recorder->second != kFlightRecorderOff) {
    const std::string& path = recorder->second;
    poller = std::make_shared<FlightRecorderPoller>(
        path.front() == '/' ? path : request.working_dir + "/" + path, a.launched_ns);
  }
  probes_[a.key()] = std::make_unique<ProgressProbe>(request.log_path, std::move(reader),
                                                     std::move(poller), clock_.NowMs());
}

void ReplicaManager::FailBeforeLaunch(Attempt& a, const Status& status, int exit_code) {
  spdlog::warn("{}/{} attempt {}: cannot launch: {}", a.job, a.replica, a.attempt,
               status.ToString());
  if (a.log) AppendAgentNote(a.log->path(), status.message());
  a.exit.exit_code = exit_code;
  a.final = true;
  a.gone = true;
  SetState(a, a.FinalState(wire::ReplicaState::FAILED), status.message());
}

// ---- a live restart ------------------------------------------------------------------------

StatusOr<std::vector<HandedOverAttempt>> ReplicaManager::HandOver() {
  std::vector<HandedOverAttempt> out;
  for (auto& [key, a] : attempts_) {
    const std::string name = a.job + "/" + a.replica + " attempt " + std::to_string(a.attempt);
    if (a.final) return Unavailable(name + " has ended and its end is not yet delivered");
    if (a.stop != StopCause::kNone) return Unavailable(name + " is being stopped");
    if (!a.process || a.state != wire::ReplicaState::RUNNING || !a.launch_settled) {
      return Unavailable(name + " is starting");
    }
    HandedOverAttempt h;
    if (Status s = a.process->HandOver(&h); !s.ok()) return s.WithContext(name);
    h.job = a.job;
    h.job_created_ms = a.job_created_ms;
    h.replica = a.replica;
    h.attempt = a.attempt;
    h.gpus = a.gpus;
    h.working_dir = a.exec_target.working_dir;
    h.log_path = a.log->path();  // every launched attempt has one
    h.env = a.exec_target.env;
    h.run_as = a.exec_target.run_as;
    h.chief = a.chief;
    h.launched_ns = a.launched_ns;
    h.log_acked = a.log->acked();
    h.measurements_acked = a.metrics ? a.metrics->answered() : 0;
    out.push_back(std::move(h));
  }
  return out;
}

Status ReplicaManager::Adopt(const HandedOverAttempt& handed) {
  Status taken = TakeOver(handed);
  if (taken.ok()) return taken;
  // Not taken over, yet maybe still this process's child, running: it must not run on beside the
  // restart its coordinator will start (the start-up sweeps spared it).
  siginfo_t info{};
  if (handed.pid > 1 &&
      ::waitid(P_PID, static_cast<id_t>(handed.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
    if (::getpgid(handed.pid) == handed.pid) ::kill(-handed.pid, SIGKILL);
    ::kill(handed.pid, SIGKILL);
    const std::string& base = config_.cgroup_dir;
    if (!base.empty() && handed.cgroup.rfind(base + "/", 0) == 0)
      CgroupManager::Kill(handed.cgroup);
  }
  return taken;
}

Status ReplicaManager::TakeOver(const HandedOverAttempt& handed) {
  COHORT_RETURN_IF_ERROR(CheckPathComponent("job", handed.job));
  COHORT_RETURN_IF_ERROR(CheckPathComponent("replica", handed.replica));
  const std::string key = AttemptKey(handed.job, handed.replica, handed.attempt);
  if (attempts_.count(key) != 0) return AlreadyExists("attempt " + key + " is here already");
  Launcher* launcher = handed.container ? container_launcher_.get() : process_launcher_.get();
  if (launcher == nullptr) {
    return FailedPrecondition("it runs in a container, and this agent has no container launcher");
  }
  COHORT_ASSIGN_OR_RETURN(auto process, launcher->Adopt(handed));
  Attempt& a = attempts_[key];
  a.job = handed.job;
  a.job_created_ms = handed.job_created_ms;
  a.replica = handed.replica;
  a.attempt = handed.attempt;
  a.gpus = handed.gpus;
  a.chief = handed.chief;
  a.launched_ns = handed.launched_ns;
  a.launch_settled = true;
  a.log = std::make_unique<LogShipper>(outbox_, a.key(), a.job, a.replica, a.attempt,
                                       handed.log_path, config_.log_chunk_bytes,
                                       2 * config_.resend_interval, handed.log_acked);
  LaunchRequest request;
  request.working_dir = handed.working_dir;
  request.log_path = handed.log_path;
  request.env = handed.env;
  request.run_as = handed.run_as;
  Attach(a, std::move(process), request, handed.measurements_acked);
  SetState(a, wire::ReplicaState::RUNNING, "");
  return Status::Ok();
}

// ---- stopping -------------------------------------------------------------------------------

void ReplicaManager::Stop(const wire::StopReplica& stop) {
  std::string key = AttemptKey(Str(stop.job()), Str(stop.replica()), stop.attempt());
  auto it = attempts_.find(key);
  if (it == attempts_.end()) {
    // Not here (never launched, or already forgotten): report it stopped so the coordinator
    // can move on.
    Attempt& a = attempts_[key];
    a.job = Str(stop.job());
    a.replica = Str(stop.replica());
    a.attempt = stop.attempt();
    a.final = true;
    a.gone = true;
    SetState(a, wire::ReplicaState::STOPPED, "not running on this node");
    return;
  }
  Attempt& a = it->second;
  if (a.final) {
    a.version++;  // re-send the final status
    report_(a);
    return;
  }
  std::string reason = Str(stop.reason());
  spdlog::info("{}/{} attempt {}: stop requested{}{}", a.job, a.replica, a.attempt,
               reason.empty() ? "" : ": ", reason);
  a.RequestStop(StopCause::kCoordinator, reason, milliseconds(std::max(0, stop.grace_ms())), Now());
}

int ReplicaManager::StopAll(StopCause cause, const std::string& reason, milliseconds grace) {
  int stopped = 0;
  for (auto& [key, a] : attempts_) {
    if (!a.live()) continue;
    a.RequestStop(cause, reason, grace, Now());
    ++stopped;
  }
  return stopped;
}

int ReplicaManager::KillOnGpu(int gpu, const std::string& reason) {
  int killed = 0;
  for (auto& [key, a] : attempts_) {
    const bool pinned =
        gpu < 0 ? !a.gpus.empty() : std::find(a.gpus.begin(), a.gpus.end(), gpu) != a.gpus.end();
    // One still launching is left to fail on its own (it cannot start on that GPU): a stop
    // before its start would end it STOPPED, which no one asked for.
    if (!a.live() || a.pending || !pinned) continue;
    a.RequestStop(StopCause::kGpuFault, reason, milliseconds(0), Now());
    ++killed;
  }
  return killed;
}

bool ReplicaManager::AllGone() const {
  return std::all_of(attempts_.begin(), attempts_.end(),
                     [](const auto& entry) { return entry.second.gone; });
}

// ---- processes ------------------------------------------------------------------------------

void ReplicaManager::Reap() {
  // A replica's main process is peeked at (WNOWAIT) before it is reaped: while it is a zombie
  // its process-group id cannot be reused, so killing the group it leaves behind is safe.
  auto reap = [](ReplicaProcess& process) {
    process.KillAll();
    int wait_status = 0;
    if (::waitpid(process.pid(), &wait_status, WNOHANG) == process.pid()) {
      process.OnExited(wait_status);
    }
  };
  for (auto& [key, a] : attempts_) {
    if (!a.process || a.process->exit_info()) continue;
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(a.process->pid()), &info, WEXITED | WNOHANG | WNOWAIT) ==
            0 &&
        info.si_pid == a.process->pid()) {
      reap(*a.process);
    }
  }
  // As a subreaper the agent inherits orphans of its replicas: reap those too.
  while (config_.reap_all_children) {
    int wait_status = 0;
    pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
    if (pid <= 0) break;
    for (auto& [key, a] : attempts_) {
      if (a.process && a.process->pid() == pid && !a.process->exit_info()) {
        a.process->OnExited(wait_status);
        break;
      }
    }
  }
  // A launch settles before its exit is taken: OnExited reads what the child last reported.
  for (auto& [key, a] : attempts_) {
    if (auto start = a.TakeStart()) SetState(a, start->state, std::move(start->message));
    if (auto change = a.TakeExit()) SetState(a, change->state, std::move(change->message));
  }
  for (auto& [key, a] : attempts_) a.CollectLeftovers();
}

void ReplicaManager::EnforceDeadlines() {
  milliseconds now = Now();
  for (auto& [key, a] : attempts_) a.EnforceDeadline(now);
}

// ---- what the coordinator hears of them -----------------------------------------------------

CoordinatorSession::ReplicaReport ReplicaManager::Registration() const {
  CoordinatorSession::ReplicaReport report;
  for (const auto& [key, a] : attempts_) {
    report.statuses.push_back(a.ToStatus());
    if (!a.final || a.acked_version < a.version) report.versions[key] = a.version;
  }
  for (const wire::ReplicaStatusT& s : ended_) {
    if (attempts_.count(AttemptKey(s.job, s.replica, s.attempt)) == 0) report.statuses.push_back(s);
  }
  return report;
}

std::vector<wire::ReplicaStatusT> ReplicaManager::Ended() const {
  std::vector<wire::ReplicaStatusT> ended(ended_.begin(), ended_.end());
  for (const auto& [key, a] : attempts_) {
    if (!a.final) continue;
    ended.push_back(a.ToStatus());
    ended.back().pid = 0;
  }
  return ended;
}

void ReplicaManager::KeepEnded(const std::vector<wire::ReplicaStatusT>& ended) {
  for (const wire::ReplicaStatusT& s : ended) {
    if (attempts_.count(AttemptKey(s.job, s.replica, s.attempt)) == 0) RememberEnd(s);
  }
}

void ReplicaManager::RememberEnd(wire::ReplicaStatusT end) {
  end.pid = 0;  // the process is gone
  ended_.push_back(std::move(end));
  // A forgotten attempt's end was among Ended() already, and a kept one is in the ends file it
  // came from (agent/handoff.h): only one dropped for room changes what the file must hold.
  if (ended_.size() > kEndedKept) {
    ended_.pop_front();
    ++ends_changed_;
  }
}

namespace {

void AddUsage(const Attempt& a, const GpuSamples& gpus, wire::ReplicaProgressT* out) {
  const std::string cgroup = a.process ? a.process->cgroup_path() : "";
  if (!cgroup.empty()) {
    const CgroupUsage used = ReadCgroupUsage(cgroup);
    out->cpu_seconds = used.cpu_seconds;
    out->memory_bytes = used.memory_bytes < 0 ? -1 : static_cast<int64_t>(used.memory_bytes);
  }
  if (!gpus.ok()) return;
  for (int index : a.gpus) {
    for (const GpuSample& g : *gpus) {
      if (g.index != index || !g.read) continue;
      auto gpu = std::make_unique<wire::GpuUsageT>();
      gpu->index = g.index;
      gpu->utilization = g.utilization;
      gpu->memory_used_bytes = static_cast<int64_t>(g.memory_used_bytes);
      gpu->memory_total_bytes = static_cast<int64_t>(g.memory_total_bytes);
      out->gpus.push_back(std::move(gpu));
    }
  }
}

}  // namespace

std::vector<std::unique_ptr<wire::ReplicaProgressT>> ReplicaManager::SampleProgress(
    const GpuSamples& gpus) {
  std::vector<std::unique_ptr<wire::ReplicaProgressT>> out;
  for (auto& [key, a] : attempts_) {
    auto probe = probes_.find(key);
    if (probe == probes_.end() || a.final || a.state != wire::ReplicaState::RUNNING) continue;
    auto progress = std::make_unique<wire::ReplicaProgressT>();
    progress->job = a.job;
    progress->replica = a.replica;
    progress->attempt = a.attempt;
    probe->second->Sample(clock_.NowMs(), progress.get());
    AddUsage(a, gpus, progress.get());
    out.push_back(std::move(progress));
  }
  return out;
}

// ---- cleaning up ----------------------------------------------------------------------------

void ReplicaManager::SweepOldAttempts() {
  milliseconds now = Now();
  if (config_.attempt_retention.count() <= 0 || now < next_sweep_) return;
  next_sweep_ = now + config_.sweep_interval;
  int removed =
      SweepAttemptDirs(config_.work_dir, config_.attempt_retention,
                       [&](const std::string& job, const std::string& replica, int attempt) {
                         return attempts_.count(AttemptKey(job, replica, attempt)) > 0;
                       });
  if (removed > 0) {
    spdlog::info("removed {} ended attempt(s) older than {} s from {}", removed,
                 config_.attempt_retention.count() / 1000, config_.work_dir);
  }
}

void ReplicaManager::Forget() {
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    Attempt& a = it->second;
    if (a.forgettable()) {
      if (a.final) RememberEnd(a.ToStatus());
      if (a.process) a.process->Release();
      outbox_.Close(it->first);
      probes_.erase(it->first);
      it = attempts_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace cohort::agent
