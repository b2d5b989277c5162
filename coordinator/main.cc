// cohort-coordinator: parse flags, build the Coordinator, run its loop until SIGTERM/SIGINT.
#include <sys/resource.h>

#include <csignal>
#include <cstdio>

#include "common/build_version.h"
#include "common/logging.h"
#include "common/service_notify.h"
#include "common/storage_marker.h"
#include "coordinator/coordinator.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop.store(true); }
}  // namespace

int main(int argc, char** argv) {
  using namespace cohort::coordinator;
  auto flags = ParseCoordinatorFlags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "cohort-coordinator: %s\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help) {
    std::fputs(flags->help_text.c_str(), stdout);
    return 0;
  }
  if (flags->version) {
    std::puts(("cohort-coordinator " + std::string(cohort::CohortBuildVersion())).c_str());
    return 0;
  }
  if (!flags->restore_state.empty()) {
    auto said = RestoreStateStore(flags->options.state_dir, flags->restore_state);
    if (!said.ok()) {
      std::fprintf(stderr, "cohort-coordinator: --restore-state: %s\n",
                   said.status().ToString().c_str());
      return 1;
    }
    for (const std::string& line : *said) std::printf("%s\n", line.c_str());
    return 0;
  }
  cohort::InitLogging("cohort-coordinator", flags->options.log_level);
  // One connection per agent: allow as many descriptors as the hard limit permits.
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  cohort::SystemClock clock;
  auto coordinator = Coordinator::Create(flags->options, &clock);
  if (!coordinator.ok()) {
    spdlog::critical("cannot start: {}", coordinator.status().ToString());
    return 1;
  }
  const CoordinatorOptions& options = flags->options;
  if (options.output_root.empty()) {
    spdlog::warn(
        "no output root (--output-root): jobs without output_dir write under {}/<job> on the "
        "node that runs them; a job restarted on another node finds its checkpoints only where "
        "its output_dir is on storage every node shares (README \"Storage\")",
        DefaultJobOutputBase(options));
  } else {
    spdlog::info(
        "output root {}: jobs without output_dir write under it, and run only on nodes that "
        "see the storage marker {}/{} (cohort nodes, STORAGE)",
        options.output_root, options.output_root, cohort::kStorageMarkerName);
  }
  if (options.admins.empty()) {
    spdlog::warn(
        "no admins (--admins): every admitted client may drain, cordon, uncordon, label and forget "
        "nodes; jobs and studies are still cancelled and deleted only by their owners");
  }
  cohort::NotifyReady("serving clients on " + (*coordinator)->client_endpoint());
  cohort::Status s = (*coordinator)->Run(g_stop);
  cohort::NotifyStopping();
  if (!s.ok()) {
    spdlog::critical("stopping on error: {}", s.ToString());
    return 1;
  }
  spdlog::info("stopped cleanly");
  return 0;
}
