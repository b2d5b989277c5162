#include "agent/replica_env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iterator>
#include <optional>

#include "agent/replica_exec.h"
#include "agent/stack_dump.h"
#include "agent/test_hook.h"
#include "common/checkpoint.h"
#include "common/gpu_visibility.h"
#include "common/logging.h"
#include "common/wire_string.h"

namespace cohort::agent {
namespace fs = std::filesystem;

Status CheckPathComponent(const std::string& what, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return InvalidArgument(what + " '" + name + "' cannot be used as a directory name");
  }
  return Status::Ok();
}

std::string AttemptWorkingDir(const std::string& work_dir, const std::string& job,
                              const std::string& replica, int attempt) {
  return work_dir + "/" + job + "/" + replica + "/attempt-" + std::to_string(attempt);
}

std::string AttemptLogPath(const std::string& work_dir, const std::string& job,
                           const std::string& replica, int attempt) {
  return AttemptWorkingDir(work_dir, job, replica, attempt) + ".log";
}

void AppendAgentNote(const std::string& log_path, const std::string& line) {
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  std::string text = "cohort-agent: " + line + "\n";
  (void)!::write(fd, text.data(), text.size());
  ::close(fd);
}

bool IsAgentAttemptEntry(std::string_view name) {
  return name == kStackDumpEntry || name == kErrorFileEntry || name == kFlightRecorderEntry ||
         name == kBundleEntry || name == kOverlayWorkEntry;
}

std::string StackDumpDir(const std::string& attempt_dir) {
  return attempt_dir + "/" + kStackDumpEntry;
}

std::string ErrorFilePath(const std::string& attempt_dir) {
  return attempt_dir + "/" + kErrorFileEntry;
}

std::map<std::string, std::string> BuildReplicaEnv(const ReplicaEnvInput& input) {
  std::map<std::string, std::string> env;
  if (!input.container) {
    for (const char* name : {"PATH", "HOME", "LANG"}) {
      if (const char* value = std::getenv(name)) env[name] = value;
    }
    if (env.find("PATH") == env.end()) env["PATH"] = "/usr/local/bin:/usr/bin:/bin";
  }
  for (const auto& [key, value] : input.launch_env) env[key] = value;
  env.try_emplace("PYTHONUNBUFFERED", "1");
  if (!input.socket_interface.empty()) {
    env.try_emplace("GLOO_SOCKET_IFNAME", input.socket_interface);
    env.try_emplace("TP_SOCKET_IFNAME", input.socket_interface);
  }
  if (!input.attempt_dir.empty()) {
    if (!env.count(kFlightRecorderEnv)) {
      env[kFlightRecorderEnv] = input.attempt_dir + "/" + kFlightRecorderEntry;
    }
    env["COHORT_STACK_DUMP_DIR"] = StackDumpDir(input.attempt_dir);
    env["COHORT_STACK_DUMP_SIGNAL"] = std::to_string(StackDumpSignal());
    auto opted_out = env.find("COHORT_PYTHON_STACKS");
    if (!input.python_site.empty() && (opted_out == env.end() || opted_out->second != "0")) {
      std::string& path = env["PYTHONPATH"];
      path = path.empty() ? input.python_site : input.python_site + ":" + path;
    }
    env.try_emplace(kErrorFileEnv, ErrorFilePath(input.attempt_dir));
  }
  env["COHORT_RESTART_COUNT"] = std::to_string(input.attempt);
  env["COHORT_RESTORE_CHECKPOINT"] = input.restore_checkpoint;
  if (input.visible_gpus.empty()) {
    SetGpuVisibility(input.gpus, &env);
  } else {
    SetGpuVisibility(input.visible_gpus, &env);
  }
  return env;
}

Status PlanLaunch(const wire::LaunchReplica& launch, const std::string& builtin_dir,
                  LaunchPlan* plan) {
  LaunchRequest& request = plan->request;
  std::string builtin = Str(launch.builtin());
  if (!builtin.empty()) {
    COHORT_ASSIGN_OR_RETURN(std::string binary, ResolveBuiltinBinary(builtin, builtin_dir));
    request.argv.push_back(std::move(binary));
  }
  if (launch.command()) {
    for (const auto* arg : *launch.command()) request.argv.push_back(Str(arg));
  }
  if (launch.gpus()) request.gpus.assign(launch.gpus()->begin(), launch.gpus()->end());
  request.cpus = launch.cpus();
  request.memory_mb = launch.memory_mb();
  if (launch.env()) {
    for (const auto* kv : *launch.env()) plan->env.launch_env[Str(kv->key())] = Str(kv->value());
  }
  plan->env.attempt = request.attempt;
  plan->env.gpus = request.gpus;
  plan->chief = launch.role() && launch.role()->str() == "chief";
  plan->container = launch.container() != nullptr;
  plan->env.container = plan->container;
  if (plan->container) {
    const wire::ContainerSpec& container = *launch.container();
    request.image = Str(container.image());
    LaunchRequest::ContainerCommand apart;
    if (container.command()) {
      for (const auto* arg : *container.command()) apart.command.push_back(Str(arg));
    }
    if (container.args()) {
      for (const auto* arg : *container.args()) apart.args.push_back(Str(arg));
    }
    if (!apart.command.empty() || !apart.args.empty()) {
      request.container_command = std::move(apart);
    }
  }
  if (request.argv.empty() && !plan->container) {
    return InvalidArgument("the launch has no command");
  }
  plan->checkpoint_dir = Str(launch.checkpoint_dir());
  plan->others_stopped = launch.others_stopped();
  return Status::Ok();
}

RestorePoint FindRestoreCheckpoint(const std::string& checkpoint_dir) {
  RestorePoint point;
  if (checkpoint_dir.empty()) return point;
  auto latest = FindLatestValidCheckpoint(checkpoint_dir);
  if (!latest.ok()) {
    // NotFound: no directory, no checkpoint yet, or none valid (the message lists the skipped).
    if (latest.status().code() != StatusCode::kNotFound ||
        latest.status().message().find("skipped") != std::string::npos) {
      spdlog::warn("checkpoint lookup in {}: {}", checkpoint_dir, latest.status().ToString());
      point.notes.push_back("no checkpoint restored: " + latest.status().message());
    }
    return point;
  }
  for (const std::string& why : latest->skipped)
    point.notes.push_back("skipped checkpoint: " + why);
  point.checkpoint = latest->path;
  point.notes.push_back("restoring from checkpoint " + latest->path);
  return point;
}

namespace {

bool IsExecutable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

StatusOr<std::string> FindBuiltinBinary(const std::string& program,
                                        const std::string& builtin_dir) {
  std::vector<std::string> looked;
  auto at = [&](const fs::path& dir, const std::string& what) -> std::optional<std::string> {
    const fs::path candidate = dir / program;
    if (IsExecutable(candidate.string())) return candidate.lexically_normal().string();
    looked.push_back("at " + candidate.string() + " (" + what + ")");
    return std::nullopt;
  };
  if (!builtin_dir.empty()) {
    if (auto found = at(fs::absolute(builtin_dir), "--builtin-dir")) return *found;
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    if (auto found = at(self.parent_path(), "beside this executable")) return *found;
  }
  const char* path = std::getenv("PATH");
  const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (const std::string& candidate : ExecCandidates(program, dirs)) {
    if (IsExecutable(candidate)) return fs::absolute(candidate).lexically_normal().string();
  }
  looked.push_back("on PATH (" + dirs + ")");
  std::string where;
  for (const std::string& place : looked) where += (where.empty() ? "" : ", nor ") + place;
  return NotFound(program + " is nowhere: not " + where);
}

StatusOr<std::string> ResolveBuiltinBinary(const std::string& builtin,
                                           const std::string& builtin_dir) {
  std::string program;
  if (builtin == "reducer") {
    program = "cohort-reducer";
  } else if (builtin == "parameter_server") {
    program = "cohort-ps";
  } else {
    return InvalidArgument("unknown builtin '" + builtin + "' (reducer | parameter_server)");
  }
  auto found = FindBuiltinBinary(program, builtin_dir);
  if (!found.ok()) return found.status().WithContext("builtin " + builtin);
  return found;
}

Status MakeDirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return Internal("mkdir -p " + path + ": " + ec.message());
  return Status::Ok();
}

namespace {

TestHook<std::map<std::string, std::string>> output_dirs_hook;

}  // namespace

void SetMakeOutputDirsHookForTesting(
    std::function<void(const std::map<std::string, std::string>& env)> hook) {
  output_dirs_hook.Set(std::move(hook));
}

bool NamesOutputDirs(const std::map<std::string, std::string>& env) {
  return std::any_of(std::begin(kOutputDirVars), std::end(kOutputDirVars), [&](const char* var) {
    auto it = env.find(var);
    return it != env.end() && !it->second.empty();
  });
}

Status MakeOutputDirs(const std::map<std::string, std::string>& env,
                      const std::optional<RunAs>& run_as) {
  output_dirs_hook.Run(env);
  std::string base;
  if (auto model = env.find("AIP_MODEL_DIR"); model != env.end() && !model->second.empty()) {
    fs::path dir(model->second);
    if (!dir.has_filename()) dir = dir.parent_path();
    base = dir.parent_path().string();
  }
  for (const char* var : kOutputDirVars) {
    auto it = env.find(var);
    if (it == env.end() || it->second.empty()) continue;
    fs::path dir(it->second);
    if (std::string_view(var) == "CLOUD_ML_HP_METRIC_FILE") dir = dir.parent_path();
    COHORT_RETURN_IF_ERROR(MakeDirsOwnedBy(dir.string(), run_as, base).WithContext(var));
  }
  return Status::Ok();
}

namespace {

// "attempt-<n>" or "attempt-<n>.log" -> n; -1 otherwise.
int AttemptNumber(const std::string& name) {
  constexpr std::string_view kPrefix = "attempt-";
  if (name.rfind(kPrefix, 0) != 0) return -1;
  std::string digits = name.substr(kPrefix.size());
  if (digits.size() > 4 && digits.compare(digits.size() - 4, 4, ".log") == 0) {
    digits.resize(digits.size() - 4);
  }
  if (digits.empty() || digits.size() > 9 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    return -1;
  }
  return std::stoi(digits);
}

}  // namespace

int SweepAttemptDirs(const std::string& work_dir, std::chrono::milliseconds retention,
                     const std::function<bool(const std::string& job, const std::string& replica,
                                              int attempt)>& live) {
  std::error_code ec;
  const auto cutoff = fs::file_time_type::clock::now() - retention;
  int removed = 0;
  auto children = [&](const fs::path& dir) {
    std::vector<fs::directory_entry> out;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      out.push_back(*it);
    }
    ec.clear();
    return out;
  };
  for (const auto& job : children(work_dir)) {
    if (!job.is_directory(ec) || job.is_symlink(ec)) continue;
    for (const auto& replica : children(job.path())) {
      if (!replica.is_directory(ec) || replica.is_symlink(ec)) continue;
      for (const auto& entry : children(replica.path())) {
        const std::string name = entry.path().filename().string();
        int attempt = AttemptNumber(name);
        if (attempt < 0 || entry.is_symlink(ec)) continue;
        if (live(job.path().filename().string(), replica.path().filename().string(), attempt)) {
          continue;
        }
        auto mtime = fs::last_write_time(entry.path(), ec);
        if (ec || mtime > cutoff) {
          ec.clear();
          continue;
        }
        if (fs::remove_all(entry.path(), ec) > 0 && !ec && !name.ends_with(".log")) ++removed;
        if (ec) spdlog::warn("removing {}: {}", entry.path().string(), ec.message());
        ec.clear();
      }
      fs::remove(replica.path(), ec);  // only when empty
      ec.clear();
    }
    fs::remove(job.path(), ec);
    ec.clear();
  }
  return removed;
}

}  // namespace cohort::agent
