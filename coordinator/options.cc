#include "coordinator/options.h"

#include <algorithm>
#include <boost/program_options.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/config.h"
#include "common/http_server.h"
#include "common/job_spec.h"
#include "coordinator/notifier.h"

namespace cohort::coordinator {
namespace po = boost::program_options;

namespace {

StatusOr<std::chrono::milliseconds> Duration(const std::string& flag, const std::string& text) {
  auto d = ParseDuration(text);
  if (!d.ok()) return InvalidArgument("--" + flag + ": " + d.status().message());
  if (d->count() <= 0) return InvalidArgument("--" + flag + ": must be positive, got " + text);
  return *d;
}

}  // namespace

int64_t HeartbeatIntervalMs(int64_t heartbeat_timeout_ms) {
  return std::clamp<int64_t>(heartbeat_timeout_ms / 4, 10, 1000);
}

std::string DefaultJobOutputBase(const CoordinatorOptions& options) {
  return options.output_root.empty() ? options.state_dir + "/jobs" : options.output_root;
}

std::string DefaultStudyOutputBase(const CoordinatorOptions& options) {
  return (options.output_root.empty() ? options.state_dir : options.output_root) + "/studies";
}

StatusOr<std::vector<std::string>> ParseUserList(const std::string& flag, const std::string& text) {
  std::vector<std::string> users;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    std::string user = item.substr(b, e - b + 1);
    for (char c : user) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.' &&
          c != '@') {
        return InvalidArgument("--" + flag + ": '" + user +
                               "' is not a user name (letters, digits, _ - . @; a client key's "
                               "file name without .pub)");
      }
    }
    users.push_back(std::move(user));
  }
  return users;
}

std::string WithReadOnlyPathHint(const std::string& message) {
  if (message.find("Read-only file system") == std::string::npos) return message;
  return message +
         " (under systemd, the cohort-coordinator unit writes only under its state dir: add this "
         "path with `systemctl edit cohort-coordinator`, [Service] ReadWritePaths=PATH; README "
         "\"Install on a cluster\")";
}

StatusOr<ParsedFlags> ParseCoordinatorFlags(int argc, const char* const* argv) {
  ParsedFlags out;
  CoordinatorOptions& o = out.options;
  std::string config, heartbeat = "10s", starvation = "5m", ports = "20000-29999",
                      stop_grace = "30s", max_spec_size = "1MiB", job_retention = "none",
                      fence_after = "none", fence_grace = "stop-grace", notify_on = "end",
                      backup_every = "1h";
  po::options_description desc("Options");
  desc.add_options()("help,h", "show this help and exit")("version", "print the version and exit")(
      "config", po::value(&config), "INI file with the same names as these flags")(
      "client-endpoint", po::value(&o.client_endpoint)->default_value(o.client_endpoint),
      "ZeroMQ endpoint for launchers (cohort CLI, clients)")(
      "agent-endpoint", po::value(&o.agent_endpoint)->default_value(o.agent_endpoint),
      "ZeroMQ endpoint for node agents")("state-dir",
                                         po::value(&o.state_dir)->default_value(o.state_dir),
                                         "the state database (state.db) and logs (and job outputs "
                                         "without --output-root)")(
      "output-root", po::value(&o.output_root),
      "the default parent of job output dirs (<DIR>/<job>): a shared filesystem mounted at this "
      "path on every node, which the storage check verifies (default: none; outputs under "
      "<state-dir>/jobs on each node's own disk)")(
      "heartbeat-timeout", po::value(&heartbeat)->default_value(heartbeat),
      "a node silent this long is LOST and its replicas are restarted elsewhere")(
      "starvation-limit", po::value(&starvation)->default_value(starvation),
      "once the oldest queued job has waited this long, later jobs stop backfilling")(
      "port-range", po::value(&ports)->default_value(ports),
      "ports handed to replicas, MIN-MAX; each host (network namespace) has all of them")(
      "stop-grace", po::value(&stop_grace)->default_value(stop_grace),
      "SIGTERM-to-SIGKILL grace when the coordinator stops a replica")(
      "fence-after", po::value(&fence_after)->default_value(fence_after),
      "an agent that hears nothing from the coordinator this long stops its replicas, and those "
      "of a lost node are placed again only once its agent has surely stopped them (e.g. 20s; "
      "none: replicas on a silent node run on)")(
      "fence-grace", po::value(&fence_grace)->default_value(fence_grace),
      "SIGTERM-to-SIGKILL grace of a fenced agent's stops, which a lost node's restart waits "
      "for too (at most --stop-grace, its default)")(
      "accept-damaged-state", po::bool_switch(&o.accept_damaged_state),
      "start even though the state database is damaged or missing: drop what does not verify "
      "and list every job dropped")(
      "backup-dir", po::value(&o.backup_dir),
      "keep backups of the state database here (an absolute path, best on another disk or host): "
      "consistent copies taken while the coordinator runs, checked, fsynced and rotated "
      "(default: none)")("backup-every", po::value(&backup_every)->default_value(backup_every),
                         "how often a backup is taken into --backup-dir")(
      "backup-keep", po::value(&o.backup_keep)->default_value(o.backup_keep),
      "how many backups --backup-dir keeps (the oldest go)")(
      "restore-state", po::value(&out.restore_state),
      "make the backup FILE the state database of --state-dir (the coordinator must be stopped; "
      "the current database is kept aside), then exit")(
      "max-requests-per-peer",
      po::value(&o.max_requests_per_peer)->default_value(o.max_requests_per_peer),
      "requests one peer may have outstanding; more are refused (RESOURCE_EXHAUSTED)")(
      "job-retention", po::value(&job_retention)->default_value(job_retention),
      "finished jobs that ended longer ago than this (e.g. 30d) are deleted with their records "
      "and logs; none or 0 keeps them forever")(
      "notify-url", po::value(&o.notify_url),
      "http:// or https:// URL to POST a JSON notice to when a job, an array or a study ends "
      "(and what --notify-on adds), once stored; a chat webhook shows its \"text\" (a URL "
      "holding a secret is better kept in the config file)")(
      "notify-on", po::value(&notify_on)->default_value(notify_on),
      "what --notify-url hears of, comma-separated: end (a job's, an array's, a study's), start (a "
      "job's replicas all ran, the first time; an array's first task), restart (each restart a "
      "job spends), or all of these; and tasks: each task of an array and each trial of a study "
      "told as a job too (not in all: by default an array and a study are told as a whole); "
      "and nodes: each node event (`cohort nodes NODE`'s Events: LOST, back, health check, "
      "cordons and drains; not in all)")(
      "notify-ca-file", po::value(&o.notify_ca_file),
      "CA certificates (PEM) an https --notify-url's certificate must chain to (default: the "
      "system's)")(
      "max-spec-size", po::value(&max_spec_size)->default_value(max_spec_size),
      "job and study specs larger than this are refused at submit (bytes, or KiB/MiB)")(
      "insecure", po::bool_switch(&o.insecure), "plaintext ZeroMQ (local use only)")(
      "key-file", po::value(&o.curve_key)->default_value(o.curve_key),
      "this coordinator's CURVE key file (.key)")(
      "client-keys", po::value(&o.client_keys_dir)->default_value(o.client_keys_dir),
      "directory of client public keys allowed on the client endpoint")(
      "agent-keys", po::value(&o.agent_keys_dir)->default_value(o.agent_keys_dir),
      "directory of agent public keys allowed on the agent endpoint")(
      "log-level", po::value(&o.log_level)->default_value(o.log_level),
      "trace, debug, info, warn, error")(
      "http-endpoint",
      po::value(&o.http_endpoint)->default_value(CoordinatorOptions::kDefaultHttpEndpoint),
      "HOST:PORT of /metrics and the dashboard, or none")(
      "http-token", po::value(&o.http_token),
      "token HTTP requests must carry (required when --http-endpoint is not a loopback "
      "address; better kept in the config file)");
  std::string admins;
  desc.add_options()(
      "admins", po::value(&admins),
      "users (client key names, clients/<user>.pub) who may cancel anyone's jobs and studies and "
      "act on nodes, comma-separated: a,b");
  std::vector<std::string> queues, priority_classes;
  desc.add_options()(
      "queue", po::value(&queues)->composing(),
      "a job queue: 'NAME [gpus=N] [cpus=N] [weight=W] [gpu-idle-limit=D] [cpus-per-gpu=N] "
      "[memory-mb-per-gpu=N]' (repeat for more; the quota is what it is guaranteed, the weight "
      "its share of idle capacity; a job of it whose GPUs all sit idle for gpu-idle-limit fails; "
      "the per-GPU settings are its jobs' defaults; 'default' always exists)")(
      "priority-class", po::value(&priority_classes)->composing(),
      "a priority class 'NAME=VALUE' (repeat for more; low=100, normal=500, high=1000 exist)");
  PerGpuDefaults per_gpu;
  desc.add_options()(
      "cpus-per-gpu", po::value(&per_gpu.cpus)->default_value(0),
      "CPUs a replica gets per GPU where its job file gives no cpus (0: none, so 1 CPU; a "
      "queue's cpus-per-gpu=N wins)")(
      "memory-mb-per-gpu", po::value(&per_gpu.memory_mb)->default_value(0),
      "memory (MB) a replica gets per GPU where its job file gives no memory_mb (0: none, so "
      "no limit; a queue's memory-mb-per-gpu=N wins)");
  std::ostringstream help;
  auto parsed = ParseFlags(argc, argv, desc,
                           "usage: cohort-coordinator [--config FILE] [options]\n"
                           "Cohort's coordinator: keeps the jobs, gang-schedules their replicas on "
                           "the agents' nodes\n"
                           "and restarts them from their newest checkpoint.",
                           &help);
  if (!parsed.ok()) return parsed.status();
  if (parsed->help) {
    out.help = true;
    out.help_text = help.str();
    return out;
  }
  if (parsed->values.count("version")) {
    out.version = true;
    return out;
  }
  o.http_endpoint_explicit = !parsed->values["http-endpoint"].defaulted();
  COHORT_ASSIGN_OR_RETURN(o.heartbeat_timeout, Duration("heartbeat-timeout", heartbeat));
  COHORT_ASSIGN_OR_RETURN(o.starvation_limit, Duration("starvation-limit", starvation));
  COHORT_ASSIGN_OR_RETURN(o.stop_grace, Duration("stop-grace", stop_grace));
  if (fence_grace != "stop-grace") {
    COHORT_ASSIGN_OR_RETURN(o.fence_grace, Duration("fence-grace", fence_grace));
    if (*o.fence_grace > o.stop_grace) {
      return InvalidArgument("--fence-grace: at most --stop-grace (" + stop_grace + "), got " +
                             fence_grace);
    }
  }
  if (fence_after != "none" && fence_after != "0") {
    COHORT_ASSIGN_OR_RETURN(o.fence_after, Duration("fence-after", fence_after));
    if (o.fence_after > std::chrono::hours(1)) {
      return InvalidArgument("--fence-after: at most 1h, got " + fence_after);
    }
    // An agent hears the coordinator once a heartbeat interval: a fence much closer to that would
    // stop replicas on every late reply.
    const int64_t least = 4 * HeartbeatIntervalMs(o.heartbeat_timeout.count());
    if (o.fence_after.count() < least) {
      return InvalidArgument("--fence-after: at least four heartbeat intervals (" +
                             FormatDuration(std::chrono::milliseconds(least)) +
                             " with --heartbeat-timeout " + heartbeat + "), got " + fence_after);
    }
  }
  COHORT_ASSIGN_OR_RETURN(o.backup_every, Duration("backup-every", backup_every));
  if (o.backup_every < std::chrono::seconds(1)) {
    return InvalidArgument("--backup-every: at least 1s, got " + backup_every);
  }
  if (o.backup_keep < 1) {
    return InvalidArgument("--backup-keep: at least 1, got " + std::to_string(o.backup_keep));
  }
  if (!o.backup_dir.empty()) {
    if (o.backup_dir[0] != '/') {
      return InvalidArgument("--backup-dir: expected an absolute path, got '" + o.backup_dir + "'");
    }
    namespace fs = std::filesystem;
    o.backup_dir = fs::path(o.backup_dir).lexically_normal().string();
    while (o.backup_dir.size() > 1 && o.backup_dir.back() == '/') o.backup_dir.pop_back();
    std::error_code ec;
    fs::path state = fs::weakly_canonical(fs::absolute(o.state_dir), ec);
    if (!ec && fs::weakly_canonical(o.backup_dir, ec) == state) {
      return InvalidArgument("--backup-dir: must not be the state dir (" + o.state_dir + ")");
    }
  }
  if (job_retention != "none" && job_retention != "0") {
    COHORT_ASSIGN_OR_RETURN(o.job_retention, Duration("job-retention", job_retention));
  }
  if (!o.notify_url.empty()) {
    if (auto url = ParseWebhookUrl(o.notify_url); !url.ok()) {
      return InvalidArgument("--notify-url: " + url.status().message());
    }
  }
  {
    o.notify_ends = o.notify_starts = o.notify_restarts = o.notify_tasks = o.notify_nodes = false;
    std::istringstream items(notify_on);
    std::string item;
    bool any = false;
    while (std::getline(items, item, ',')) {
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (item.empty()) continue;
      any = true;
      if (item == "all") {
        o.notify_ends = o.notify_starts = o.notify_restarts = true;
      } else if (item == "end") {
        o.notify_ends = true;
      } else if (item == "start") {
        o.notify_starts = true;
      } else if (item == "restart") {
        o.notify_restarts = true;
      } else if (item == "tasks") {
        o.notify_tasks = true;
      } else if (item == "nodes") {
        o.notify_nodes = true;
      } else {
        return InvalidArgument(
            "--notify-on: '" + item +
            "' is none of end, start, restart, all, tasks, nodes (comma-separated)");
      }
    }
    if (!any) {
      return InvalidArgument("--notify-on: empty; end, start, restart, tasks, nodes or all");
    }
    if (!parsed->values["notify-on"].defaulted() && o.notify_url.empty()) {
      return InvalidArgument("--notify-on: without --notify-url");
    }
  }
  if (!o.notify_ca_file.empty()) {
    if (o.notify_url.empty()) return InvalidArgument("--notify-ca-file: without --notify-url");
    if (std::ifstream ca(o.notify_ca_file); !ca) {
      return InvalidArgument("--notify-ca-file: cannot read '" + o.notify_ca_file + "'");
    }
  }
  int lo = 0, hi = 0;
  char dash = 0;
  std::istringstream ps(ports);
  if (!(ps >> lo >> dash >> hi) || dash != '-' || lo < 1 || hi > 65535 || lo > hi) {
    return InvalidArgument("--port-range: expected MIN-MAX within 1-65535, got '" + ports + "'");
  }
  auto spec_size = ParseByteSize(max_spec_size);
  if (!spec_size.ok()) return InvalidArgument("--max-spec-size: " + spec_size.status().message());
  o.max_spec_bytes = *spec_size;
  o.port_min = lo;
  o.port_max = hi;
  COHORT_ASSIGN_OR_RETURN(o.queues, QueueConfig::Parse(queues, priority_classes, per_gpu));
  COHORT_ASSIGN_OR_RETURN(o.admins, ParseUserList("admins", admins));
  if (auto http = ParseHttpEndpoint(o.http_endpoint); !http.ok()) {
    return InvalidArgument("--http-endpoint: " + http.status().message());
  }
  if (!o.output_root.empty()) {
    if (o.output_root[0] != '/') {
      return InvalidArgument("--output-root: expected an absolute path, got '" + o.output_root +
                             "'");
    }
    // "/a/b/" and "/a/./b" are "/a/b": agents report the root back and it is compared as text.
    o.output_root = std::filesystem::path(o.output_root).lexically_normal().string();
    while (o.output_root.size() > 1 && o.output_root.back() == '/') o.output_root.pop_back();
  }
  if (o.max_requests_per_peer < 1) {
    return InvalidArgument("--max-requests-per-peer: must be at least 1");
  }
  return out;
}

}  // namespace cohort::coordinator
