// cohort-agent: parse flags, build the inventory and the launcher, run the loop until SIGTERM or
// SIGINT, then preempt the replicas (agent/agent.h) and exit 0. SIGHUP (systemctl reload) puts
// the GPUs that Xids took out of service back, once their admin has reset them. SIGUSR2 is a live
// restart: once the agent can hand its replicas over, it re-executes its binary (the file at the
// path it was started from: an upgraded package's; OwnExecutable) in place, same pid, with a
// handoff (agent/handoff.h), and the new image takes them over; they run on untouched. A new
// image that fails its start before it took them over goes back to the old one (GoBack).
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>
#include <string>

#include "agent/agent.h"
#include "agent/agent_options.h"
#include "agent/captured_command.h"
#include "agent/cgroup.h"
#include "agent/proc_scan.h"
#include "agent/work_dir_lock.h"
#include "common/build_version.h"
#include "common/file_util.h"
#include "common/logging.h"
#include "common/service_notify.h"

namespace {
std::atomic<bool> g_stop{false};
std::atomic<int> g_reloads{0};
std::atomic<int> g_restarts{0};
void OnStopSignal(int) { g_stop.store(true); }
void OnReloadSignal(int) { g_reloads.fetch_add(1); }
void OnRestartSignal(int) { g_restarts.fetch_add(1); }

// The path this process was started from, made absolute before anything could change the
// working directory: argv[0] where it names a path (systemd's ExecStart does), so that a symlink
// an upgrade re-points (an alternatives link, a versioned install dir) is followed anew at the
// live restart; else the file the kernel ran (/proc/self/exe, read now, before anything could
// replace the file there).
std::string OwnExecutable(const char* argv0) {
  std::error_code ec;
  if (argv0 != nullptr && std::strchr(argv0, '/') != nullptr) {
    std::string path = std::filesystem::absolute(argv0, ec).lexically_normal().string();
    if (!ec) return path;
  }
  std::string path = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  const std::string deleted = " (deleted)";
  if (path.size() > deleted.size() && path.ends_with(deleted)) {
    path.resize(path.size() - deleted.size());
  }
  return path;
}

// The signals main handles whose default action would end the agent.
sigset_t HandledSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR2}) sigaddset(&set, sig);
  return set;
}

// The descriptors open in this process.
std::set<int> OpenDescriptors() {
  std::set<int> open;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    open.insert(std::atoi(entry.path().filename().c_str()));
  }
  std::erase_if(open, [](int fd) { return ::fcntl(fd, F_GETFD) < 0; });  // the listing's own
  return open;
}

// Marks every descriptor above stderr but `kept` close-on-exec: what this image holds (the
// coordinator's socket, the HTTP listener, files) closes at the execve.
void CloseOnExecAllBut(const std::set<int>& kept) {
  for (int fd : OpenDescriptors()) {
    if (fd > 2 && kept.count(fd) == 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
}

// Runs `exec` (an execve, which returns only where it failed) with the handoff file at
// `handoff_path` announced (kHandoffVariable) and the signals main handles blocked: until the new
// image has its handlers (main's first lines), they wait, as their default action would end the
// agent and its replicas. A stop this image was asked for is raised again meanwhile, so that it
// waits across the execve too. Where `exec` returns, all that is undone (the handoff file removed)
// and its errno returned.
int ExecWithHandoff(const std::string& handoff_path, const std::function<void()>& exec) {
  ::setenv(cohort::agent::kHandoffVariable, "1", 1);
  spdlog::default_logger()->flush();
  const sigset_t handled = HandledSignals();
  sigset_t before;
  ::sigprocmask(SIG_BLOCK, &handled, &before);
  if (g_stop.load()) ::raise(SIGTERM);
  exec();
  const int err = errno;
  ::sigprocmask(SIG_SETMASK, &before, nullptr);
  ::unsetenv(cohort::agent::kHandoffVariable);
  ::unlink(handoff_path.c_str());
  return err;
}

// Re-executes `exe` with `argv` (`argc` of them) and the handoff, once `exe` proved it runs
// (--version) and takes argv's flags and config file (--check-config); returns only when that
// failed (the handoff file is removed then, and the agent runs on). The handoff holds the way
// back to this image (its executable, open across the execve, and argv), which a new image that
// fails its start takes (GoBack).
cohort::Status ReExecute(const std::string& exe, int argc, char** argv,
                         cohort::agent::Handoff handoff, const std::string& work_dir) {
  using namespace cohort;
  if (exe.empty()) return FailedPrecondition("the agent's own executable is unknown");
  // The new binary must at least run (its libraries load, it is an agent): once exec'd, one that
  // cannot would take the replicas down with it.
  agent::CaptureOptions check;
  check.timeout = std::chrono::seconds(10);
  check.max_output = 4096;
  auto ended = [](const agent::CapturedCommand& c) {
    return c.timed_out ? std::string("did not end within 10 s")
                       : "exited with " + std::to_string(c.exit_code);
  };
  const agent::CapturedCommand version = agent::RunCaptured({exe, "--version"}, check);
  if (version.exit_code != 0 || version.output.rfind("cohort-agent ", 0) != 0) {
    return FailedPrecondition(exe + " --version " + ended(version) +
                              " and said: " + version.output.substr(0, 200));
  }
  // And it must take this agent's flags and config file (the file may have been edited since this
  // image started): asked of a binary that knows --check-config.
  const agent::CapturedCommand help = agent::RunCaptured({exe, "--help"}, check);
  if (help.exit_code == 0 && help.output.find("--check-config") != std::string::npos) {
    std::vector<std::string> checked(argv, argv + argc);
    checked[0] = exe;
    checked.push_back("--check-config");
    check.max_output = 16384;
    const agent::CapturedCommand config = agent::RunCaptured(checked, check);
    if (config.exit_code != 0) {
      std::string said = config.output;
      while (!said.empty() && said.back() == '\n') said.pop_back();
      if (said.size() > 600) said = said.substr(said.size() - 600);
      return FailedPrecondition(exe + " refuses this agent's configuration (--check-config " +
                                ended(config) + "): " + said);
    }
  }
  // This image's executable, even where the upgrade replaced or removed its file.
  const int image_fd = ::open("/proc/self/exe", O_RDONLY);
  if (image_fd >= 0) {
    handoff.previous_image =
        agent::PreviousImage{image_fd, std::vector<std::string>(argv, argv + argc)};
  } else {
    spdlog::warn(
        "live restart: cannot open this image ({}): a new one that fails its start "
        "cannot go back to it",
        std::strerror(errno));
  }
  auto path = agent::WriteHandoff(work_dir, handoff);
  if (!path.ok()) {
    if (image_fd >= 0) ::close(image_fd);
    return path.status();
  }
  // The status pipes of the replicas' inits (ReplicaProcess::HandOver) and the way back stay open.
  std::set<int> kept;
  for (const agent::HandedOverAttempt& a : handoff.attempts) {
    if (a.status_fd >= 0) kept.insert(a.status_fd);
  }
  if (image_fd >= 0) kept.insert(image_fd);
  CloseOnExecAllBut(kept);
  spdlog::info("live restart: executing {}", exe);
  const int err = ExecWithHandoff(*path, [&] { ::execv(exe.c_str(), argv); });
  if (image_fd >= 0) ::close(image_fd);
  return ErrnoStatus("execv " + exe, err);
}

// Goes back to the image that handed over (`way_back`), same pid, with its handoff as it wrote it
// and `why` this image failed its start, which must come before this image took the replicas
// over: they are still that handoff's, their status pipes among `inherited` (the descriptors open
// when this image began), which stay open. A stop asked for meanwhile is asked of that image (the
// signal waits across the execve). Returns only where that failed.
cohort::Status GoBack(const cohort::agent::WayBack& way_back, const std::string& why,
                      const std::set<int>& inherited, const std::string& work_dir) {
  using namespace cohort;
  spdlog::error(
      "live restart: this image (cohort-agent {}) failed its start: {}; going back to the image "
      "it replaced, which takes the replicas over again",
      CohortBuildVersion(), why);
  const std::string path = agent::HandoffPath(work_dir);
  const std::string told =
      "cohort-agent " + std::string(CohortBuildVersion()) + " failed its start: " + why;
  COHORT_RETURN_IF_ERROR(ReplaceFile(path, agent::HandoffGoingBack(way_back, told), 0600));
  std::set<int> kept = inherited;
  kept.erase(way_back.image.fd);  // an ELF image runs from a descriptor closed on exec
  CloseOnExecAllBut(kept);
  ::fcntl(way_back.image.fd, F_SETFD, FD_CLOEXEC);
  std::vector<char*> argv;
  for (const std::string& arg : way_back.image.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const int err =
      ExecWithHandoff(path, [&] { ::fexecve(way_back.image.fd, argv.data(), environ); });
  return ErrnoStatus("going back to the image it replaced (fexecve)", err);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace cohort;
  // What the image before this one left open for it (a live restart's status pipes and way back).
  const std::set<int> inherited = OpenDescriptors();
  // Handlers first: the default action of these signals would end the agent, and with it (by
  // PR_SET_PDEATHSIG, at once) its replicas. A live restart execs this image with them blocked
  // (ReExecute), so one that comes meanwhile waits for its handler here and is then taken as any
  // other: a stop preempts the replicas, a SIGUSR2 asks for the next restart.
  std::signal(SIGTERM, OnStopSignal);
  std::signal(SIGINT, OnStopSignal);
  std::signal(SIGHUP, OnReloadSignal);
  std::signal(SIGUSR2, OnRestartSignal);
  std::signal(SIGPIPE, SIG_IGN);
  const sigset_t handled = HandledSignals();
  ::sigprocmask(SIG_UNBLOCK, &handled, nullptr);
  const std::string own_executable = OwnExecutable(argv[0]);
  auto flags = agent::ParseAgentFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "cohort-agent: %s (see --help)\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help) return std::printf("%s", flags->usage.c_str()) < 0;
  if (flags->version)
    return std::puts(("cohort-agent " + std::string(CohortBuildVersion())).c_str()) < 0;
  InitLogging("cohort-agent", flags->log_level);
  if (Status s = agent::LoadSecurity(*flags); !s.ok()) {
    spdlog::error("{}", s.ToString());
    return 2;
  }
  if (flags->check_config) return std::puts("cohort-agent: the configuration holds") < 0;
  // Before anything in the work dir is read or swept: another agent's replicas are not leftovers.
  StatusOr<agent::WorkDirLock> work_dir_lock = agent::WorkDirLock::Take(flags->config.work_dir);
  if (!work_dir_lock.ok()) {
    spdlog::error("{}", work_dir_lock.status().ToString());
    return 1;
  }
  // A live restart's handoff, taken (and its file removed) before anything else.
  std::optional<agent::WayBack> way_back;
  StatusOr<std::optional<agent::Handoff>> handoff =
      agent::TakeHandoff(flags->config.work_dir, &way_back);
  if (!handoff.ok()) {
    if (way_back) {
      Status failed =
          GoBack(*way_back, "its handoff cannot be taken: " + handoff.status().ToString(),
                 inherited, flags->config.work_dir);
      spdlog::error("live restart: {}", failed.ToString());
    }
    spdlog::error("live restart: {}; starting afresh (what its replicas left is swept)",
                  handoff.status().ToString());
    handoff = std::optional<agent::Handoff>();
  } else if (*handoff && !(*handoff)->went_back_because.empty()) {
    spdlog::error(
        "live restart undone: {}; this one (cohort-agent {}) runs on with the replicas it "
        "handed over: mend the install and ask again (SIGUSR2)",
        (*handoff)->went_back_because, CohortBuildVersion());
  }
  flags->config.inventory = *agent::BuildInventory(*flags);
  agent::AddGpuLabels(flags->config.inventory.gpus, &flags->config.labels);
  agent::AddRdmaLabels(agent::RdmaDevices(), &flags->config.labels);
  flags->config.socket_interface = agent::InterfaceOfAddress(flags->config.advertise_address);
  if (flags->config.socket_interface.empty()) {
    spdlog::warn(
        "no interface of this node holds its advertise address {}: replicas' gloo binds "
        "where their hostname resolves unless their job sets GLOO_SOCKET_IFNAME",
        flags->config.advertise_address);
  } else {
    spdlog::info("replicas' gloo binds to {}, the interface of {} (GLOO_SOCKET_IFNAME)",
                 flags->config.socket_interface, flags->config.advertise_address);
  }
  flags->config.reap_all_children = ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  zmq::context_t context;
  MonotonicClock clock;
  auto agent = agent::BuildAgent(context, *flags, &clock, *handoff ? &**handoff : nullptr);
  if (!agent.ok()) {
    if (way_back) {
      Status failed =
          GoBack(*way_back, agent.status().ToString(), inherited, flags->config.work_dir);
      spdlog::error("live restart: {}", failed.ToString());
    }
    spdlog::error("{}", agent.status().ToString());
    return 1;
  }
  if (way_back) ::close(way_back->image.fd);  // started: no going back
  spdlog::info("node {} ({}): {} GPU(s), {} CPU(s), {} MiB; coordinator {}", flags->config.node_id,
               flags->config.advertise_address, flags->config.inventory.gpus.size(),
               flags->config.inventory.cpus, flags->config.inventory.memory_mb,
               flags->config.coordinator);
  NotifyReady();
  Status s;
  for (;;) {
    s = (*agent)->Run(g_stop, &g_reloads, &g_restarts);
    std::optional<agent::Handoff> handed = (*agent)->TakeHandoff();
    if (!handed) break;
    Status failed = ReExecute(own_executable, argc, argv, *handed, flags->config.work_dir);
    spdlog::error("live restart refused: {}; the agent runs on as it was", failed.ToString());
  }
  if (!s.ok()) spdlog::error("{}", s.ToString());
  // No process of a replica outlives the agent: as a subreaper it inherited every orphan of its
  // replicas, so whatever is still below it now (one that rewrote its environment) dies too.
  if (flags->config.reap_all_children) {
    int left = agent::KillUntilNoneLeft([] { return agent::Descendants(::getpid()); });
    if (left > 0) spdlog::warn("killed {} process(es) left by replicas at shutdown", left);
  }
  // Nor does its level of cgroups, once every replica cgroup under it went with its replica (one
  // that did not stays, for the next start's sweep).
  const std::string cgroup_dir = (*agent)->config().cgroup_dir;
  agent->reset();
  if (!cgroup_dir.empty() && !agent::CgroupManager::Remove(cgroup_dir).ok()) {
    spdlog::info("left the cgroup {}: replica cgroups remain under it", cgroup_dir);
  }
  return s.ok() ? 0 : 1;
}
