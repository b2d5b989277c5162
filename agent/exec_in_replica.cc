#include "agent/exec_in_replica.h"

#include <sys/stat.h>

#include <utility>
#include <variant>

#include "agent/captured_command.h"
#include "agent/replica_exec.h"

namespace cohort::agent {
namespace {

constexpr char kDefaultPath[] = "/usr/local/bin:/usr/bin:/bin";

// Where argv[0] is for a process replica, by an absolute path, or the result that says why
// nowhere (127 not found, 126 not executable).
std::variant<std::string, ExecResult> FindCommand(const ExecTarget& target,
                                                  const std::string& name) {
  auto path = target.env.find("PATH");
  bool not_executable = false;
  std::string found_not_executable;
  for (const std::string& candidate :
       ExecCandidates(name, path != target.env.end() ? path->second : kDefaultPath)) {
    std::string absolute =
        candidate.front() == '/' ? candidate : target.working_dir + "/" + candidate;
    struct stat st {};
    if (::stat(absolute.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if ((st.st_mode & 0111) != 0) return absolute;
    if (!not_executable) found_not_executable = absolute;
    not_executable = true;
  }
  ExecResult result;
  if (not_executable) {
    result.exit_code = 126;
    result.output = "cohort: " + found_not_executable + ": not executable\n";
  } else {
    result.exit_code = 127;
    result.output = "cohort: " + name + ": not found" +
                    (name.find('/') == std::string::npos ? " on the replica's PATH" : "") + "\n";
  }
  return result;
}

}  // namespace

CaptureOptions PreparedExec::Options() const {
  CaptureOptions options = base;
  if (!env.empty()) options.env = &env;
  return options;
}

std::variant<PreparedExec, ExecResult> PrepareExec(const ExecTarget& target, pid_t replica_pid,
                                                   const std::vector<std::string>& argv,
                                                   ExecStdio stdio) {
  PreparedExec prepared;
  prepared.base.hidden_from_reaper = true;
  const std::vector<std::string>& container =
      stdio == ExecStdio::kTerminal ? target.container_exec_terminal
      : stdio == ExecStdio::kStream ? target.container_exec_stream
                                    : target.container_exec;
  if (!container.empty()) {
    prepared.command = container;
    prepared.command.insert(prepared.command.end(), argv.begin(), argv.end());
    return prepared;
  }
  auto found = FindCommand(target, argv.at(0));
  if (auto* failed = std::get_if<ExecResult>(&found)) return std::move(*failed);
  prepared.command = argv;
  prepared.command[0] = std::get<std::string>(found);
  for (const auto& [name, value] : target.env) {
    if (name != "COHORT_REPLICA_PID") prepared.env.push_back(name + "=" + value);
  }
  prepared.env.push_back("COHORT_REPLICA_PID=" + std::to_string(replica_pid));
  prepared.base.working_dir = target.working_dir;
  prepared.base.cgroup = target.cgroup;
  if (target.run_as) {
    prepared.base.account =
        CaptureOptions::Account{target.run_as->uid, target.run_as->gid, target.run_as->groups};
  }
  return prepared;
}

ExecResult RunInReplica(const ExecTarget& target, pid_t replica_pid,
                        const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                        const std::atomic<bool>* cancel) {
  auto prepared = PrepareExec(target, replica_pid, argv, ExecStdio::kNone);
  if (auto* failed = std::get_if<ExecResult>(&prepared)) return std::move(*failed);
  const PreparedExec& exec = std::get<PreparedExec>(prepared);
  CaptureOptions options = exec.Options();
  options.timeout = timeout;
  options.max_output = kMaxExecOutputBytes + 1;
  options.cancel = cancel;
  CapturedCommand run = RunCaptured(exec.command, options);
  ExecResult result;
  result.exit_code = run.exit_code;
  result.timed_out = run.timed_out;
  result.output = std::move(run.output);
  if (result.output.size() > kMaxExecOutputBytes) {
    result.output.resize(kMaxExecOutputBytes);
    result.truncated = true;
  }
  return result;
}

ExecRunner::~ExecRunner() {
  for (Running& run : running_) run.cancel->store(true);
  running_.clear();  // each future waits for its thread
}

void ExecRunner::KillAll(const std::string& why) {
  for (Running& run : running_) {
    run.cancel->store(true);
    run.header.killed_because = why;
  }
}

Status ExecRunner::Start(wire::ExecOutputT header, ExecTarget target, pid_t replica_pid,
                         std::vector<std::string> argv, std::chrono::milliseconds timeout) {
  if (argv.empty()) return InvalidArgument("no command to run");
  if (running_.size() >= max_running_) {
    return ResourceExhausted(std::to_string(running_.size()) +
                             " commands already run on this node; try again when one has ended");
  }
  Running run;
  run.header = std::move(header);
  run.result =
      std::async(std::launch::async, [target = std::move(target), replica_pid,
                                      argv = std::move(argv), timeout, cancel = run.cancel] {
        return RunInReplica(target, replica_pid, argv, timeout, cancel.get());
      });
  running_.push_back(std::move(run));
  return Status::Ok();
}

std::vector<wire::ExecOutputT> ExecRunner::TakeFinished() {
  std::vector<wire::ExecOutputT> finished;
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      ++it;
      continue;
    }
    ExecResult result = it->result.get();
    wire::ExecOutputT output = std::move(it->header);
    output.exit_code = result.exit_code;
    output.output.assign(result.output.begin(), result.output.end());
    output.truncated = result.truncated;
    output.timed_out = result.timed_out;
    finished.push_back(std::move(output));
    it = running_.erase(it);
  }
  return finished;
}

}  // namespace cohort::agent
