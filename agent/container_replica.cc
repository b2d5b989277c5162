#include "agent/container_replica.h"

#include <signal.h>

#include <nlohmann/json.hpp>

#include "common/logging.h"

namespace cohort::agent {

ContainerReplica::ContainerReplica(std::unique_ptr<ReplicaProcess> runtime_process, std::string id,
                                   std::vector<std::string> runtime, bool cli,
                                   std::shared_ptr<RuntimeCommands> commands)
    : inner_(std::move(runtime_process)),
      shared_(std::make_shared<Shared>()),
      runtime_(std::move(runtime)),
      cli_(cli),
      commands_(std::move(commands)) {
  shared_->id = std::move(id);
}

std::vector<std::string> ContainerReplica::Argv(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = runtime_;
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> ContainerReplica::ExecPrefix(ExecStdio stdio) const {
  // runc and crun pass their stdin on unless told otherwise and make a terminal with -t; the
  // docker CLI passes it only with -i.
  std::vector<std::string> args = {"exec"};
  if (cli_ && stdio != ExecStdio::kNone) args.push_back("-i");
  if (stdio == ExecStdio::kTerminal) args.push_back("-t");
  args.push_back(shared_->id);
  return Argv(args);
}

void ContainerReplica::Queue(const std::vector<std::string>& args, const std::string& what) {
  commands_->Enqueue(shared_->id, Argv(args), [shared = shared_, what](const CapturedCommand& run) {
    if (run.exit_code == 0 || RuntimeSaysGone(run.output)) return;
    spdlog::warn("container {}: {}: {}", shared->id, what,
                 run.timed_out ? "timed out: " + run.output
                 : run.cancelled
                     ? run.output.empty() ? "killed: the agent is shutting down" : run.output
                     : run.output);
  });
}

void ContainerReplica::Signal(int sig) {
  const std::string signal = std::to_string(sig);
  if (cli_) {
    Queue({"kill", "--signal", signal, shared_->id}, "kill --signal " + signal);
  } else {
    Queue({"kill", "--all", shared_->id, signal}, "kill " + signal);
  }
  inner_->Signal(sig);
}

void ContainerReplica::KillAll() {
  Signal(SIGKILL);
  inner_->KillAll();
}

bool ContainerReplica::AnyAlive() {
  if (inner_->AnyAlive()) return true;
  if (cli_) return false;
  if (shared_->gone) return false;
  if (shared_->state_queued.exchange(true)) return true;  // its answer is awaited
  const bool queued = commands_->Enqueue(
      shared_->id, Argv({"state", shared_->id}), [shared = shared_](const CapturedCommand& state) {
        if (state.timed_out || state.cancelled) {
          spdlog::warn("container {}: state: {}", shared->id,
                       state.timed_out ? "timed out" : "cancelled");
        } else if (state.exit_code != 0) {
          shared->gone = true;  // no such container
        } else {
          auto parsed = nlohmann::json::parse(state.output, nullptr, /*allow_exceptions=*/false);
          // Compared, not read as a string: a status of another type is not "running" either.
          const auto status = parsed.find("status");
          shared->gone = !parsed.is_object() || status == parsed.end() || *status != "running";
        }
        shared->state_queued = false;
      });
  if (!queued) shared_->state_queued = false;
  return true;
}

void ContainerReplica::Release() {
  if (!released_) {
    released_ = true;
    Queue(cli_ ? std::vector<std::string>{"rm", "-f", shared_->id}
               : std::vector<std::string>{"delete", "--force", shared_->id},
          "delete");
  }
  inner_->Release();
}

Status ContainerReplica::HandOver(HandedOverAttempt* out) {
  COHORT_RETURN_IF_ERROR(inner_->HandOver(out));
  out->container = true;
  out->container_id = shared_->id;
  return Status::Ok();
}

}  // namespace cohort::agent
