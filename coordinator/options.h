// CoordinatorOptions: everything cohort-coordinator can be told, from its command line and its
// INI config file (the same names as the long flags; the command line wins). The contract names
// (DESIGN.md) are --config, --client-endpoint, --agent-endpoint, --state-dir,
// --heartbeat-timeout, --insecure; the rest are Cohort extensions with safe defaults.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/config_dir.h"
#include "common/spec_limit.h"
#include "common/status.h"
#include "coordinator/queue_config.h"

namespace cohort::coordinator {

struct CoordinatorOptions {
  std::string client_endpoint = "tcp://*:7400";
  std::string agent_endpoint = "tcp://*:7401";
  std::string state_dir = "/var/lib/cohort";
  // --output-root (config key output-root): the default parent of job output dirs, a directory
  // of a filesystem every node mounts at this same path (README "Storage"); the storage check
  // (coordinator/storage_probe.h) verifies that each node sees it. Empty: none; outputs default
  // to <state_dir>/jobs (each node's own disk) and nothing is checked. Absolute, normalised.
  std::string output_root;
  std::chrono::milliseconds heartbeat_timeout{10'000};
  std::chrono::milliseconds starvation_limit{5 * 60'000};
  int port_min = 20000;
  int port_max = 29999;
  // Grace given to a replica between SIGTERM and SIGKILL when the coordinator stops it.
  std::chrono::milliseconds stop_grace{30'000};
  // --fence-after (README "Fencing"): an agent that hears nothing from the coordinator this long
  // stops its replicas (with fence_grace), and the coordinator places the replicas of a node it
  // declared lost again only once that node's agent has surely stopped them. 0: off (replicas on
  // a silent node run on, and may run beside their restart until the node is heard from again).
  std::chrono::milliseconds fence_after{0};
  // --fence-grace: the SIGTERM-to-SIGKILL grace of a fenced agent's stops, which a lost node's
  // restart waits for too; shorter than stop_grace, it trades a fenced replica's time to
  // checkpoint for a sooner restart. At most stop_grace; nullopt: stop_grace (FenceGrace()).
  std::optional<std::chrono::milliseconds> fence_grace;
  std::chrono::milliseconds FenceGrace() const { return fence_grace.value_or(stop_grace); }
  // Start even though the state store is damaged or missing, dropping what does not verify and
  // listing every job dropped (coordinator/state_store.h).
  bool accept_damaged_state = false;
  // State backups (coordinator/state_backups.h, README "Backups"): --backup-dir (empty: none; an
  // absolute path, not the state dir), --backup-every (at least 1 s), --backup-keep (at least 1).
  std::string backup_dir;
  std::chrono::milliseconds backup_every{3'600'000};
  int backup_keep = 24;
  // Requests one peer (client or agent) may have outstanding, i.e. read and not yet answered, in
  // one pass of the loop; beyond that they are answered RESOURCE_EXHAUSTED unprocessed, so one
  // flooding peer cannot starve the others. Frames are capped at 64 MiB by the sockets.
  int max_requests_per_peer = 256;
  // Job and study specs larger than this are refused at submit (INVALID_ARGUMENT naming it).
  uint64_t max_spec_bytes = kDefaultMaxSpecBytes;
  bool insecure = false;
  // CURVE (when not insecure): --key-file (this coordinator's key pair), --client-keys and
  // --agent-keys (directories of the public keys allowed on each endpoint; re-read per handshake).
  std::string curve_key = ConfigPath("keys/coordinator.key");
  std::string client_keys_dir = ConfigPath("keys/clients");
  std::string agent_keys_dir = ConfigPath("keys/agents");
  std::string log_level = "info";
  // Users who may cancel and delete anyone's jobs and studies and act on nodes
  // (coordinator/permissions.h): --admins a,b (config key `admins`).
  std::vector<std::string> admins;
  // Job queues (quotas, weights) and priority classes: --queue, --priority-class.
  QueueConfig queues;
  // The HTTP endpoint (/metrics, the dashboard, /api/; coordinator/http_service.h): HOST:PORT or
  // "none". Bound beyond loopback it requires http_token (config key http-token). The command
  // line's default is kDefaultHttpEndpoint; the struct's is none, so that tests and embedders opt
  // in. When the default address cannot be bound the coordinator runs without it (a warning);
  // an address given explicitly must bind.
  static constexpr const char* kDefaultHttpEndpoint = "127.0.0.1:7480";
  std::string http_endpoint = "none";
  bool http_endpoint_explicit = false;
  std::string http_token;
  // Finished jobs that ended longer ago than this are deleted with their records and logs
  // (--job-retention, e.g. 30d; 0, "0" or "none": kept forever).
  std::chrono::milliseconds job_retention{0};
  // Job notices (coordinator/notifier.h): POSTed to this http:// or https:// URL
  // (--notify-url; empty: none), an https receiver's certificate checked against notify_ca_file
  // (PEM; empty: the system's CAs).
  std::string notify_url;
  std::string notify_ca_file;
  // What is notified (--notify-on end,start,restart,tasks | all; default end): a job's (an
  // array's, a study's) end, a job's (an array's) first run, each restart a job spends; and
  // whether each task of an array and each trial of a study is told as a job too (tasks; as
  // Slurm's ARRAY_TASKS, not in `all`): without it an array and a study are told as a whole.
  bool notify_ends = true;
  bool notify_starts = false;
  bool notify_restarts = false;
  bool notify_tasks = false;
  bool notify_nodes = false;  // --notify-on nodes: each node event (NodeEvent) too
};

// How often agents are asked to heartbeat: a quarter of the timeout, within [10 ms, 1 s].
int64_t HeartbeatIntervalMs(int64_t heartbeat_timeout_ms);

// `message` (a failed write), with a hint where it says "Read-only file system": the packaged
// systemd unit (ProtectSystem=strict) lets the coordinator write only under its state dir, so an
// output root or a backup dir elsewhere must be added to its ReadWritePaths.
std::string WithReadOnlyPathHint(const std::string& message);

// Where a job without output_dir writes: <DefaultJobOutputBase>/<job name>, i.e. under
// output_root, else under <state_dir>/jobs. Trial jobs of a study without one write under
// <DefaultStudyOutputBase>/<study>/<trial id>: <output_root>/studies, else <state_dir>/studies.
std::string DefaultJobOutputBase(const CoordinatorOptions& options);
std::string DefaultStudyOutputBase(const CoordinatorOptions& options);

struct ParsedFlags {
  CoordinatorOptions options;
  // --restore-state FILE: make that backup the state dir's database (RestoreStateStore), then
  // exit.
  std::string restore_state;
  bool help = false;     // --help: print help_text, exit 0
  bool version = false;  // --version: print "cohort-coordinator <version>", exit 0
  std::string help_text;
};

// "a, b,c" -> {a, b, c} (blanks around names and empty items dropped); a name with characters
// other than letters, digits, _ - . @ is INVALID_ARGUMENT naming `flag`.
StatusOr<std::vector<std::string>> ParseUserList(const std::string& flag, const std::string& text);

// Parses argv (and the --config file it names). Errors name the flag.
StatusOr<ParsedFlags> ParseCoordinatorFlags(int argc, const char* const* argv);

}  // namespace cohort::coordinator
