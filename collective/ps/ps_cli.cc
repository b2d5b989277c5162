#include "collective/ps/ps_cli.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "collective/ps/ps_server.h"
#include "collective/store_bootstrap.h"
#include "common/logging.h"

namespace cohort::collective::ps {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? std::string() : std::string(v);
}

StatusOr<int64_t> ParseInt(const std::string& what, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0)
    return InvalidArgument(what + ": '" + v + "' is not an integer");
  return static_cast<int64_t>(x);
}

StatusOr<double> ParseDouble(const std::string& what, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') return InvalidArgument(what + ": '" + v + "' is not a number");
  return x;
}

const char* const kFlags[] = {"index",
                              "num-servers",
                              "num-workers",
                              "bootstrap",
                              "checkpoint-dir",
                              "checkpoint-every",
                              "keep-checkpoints",
                              "restore",
                              "timeout-ms",
                              "rejoin-timeout-ms",
                              "optimizer",
                              "lr",
                              "momentum",
                              "beta1",
                              "beta2",
                              "epsilon",
                              "staleness",
                              "rescale"};

StatusOr<std::map<std::string, std::string>> ParseFlags(const std::vector<std::string>& args,
                                                        bool* restore_latest) {
  std::map<std::string, std::string> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0)
      return InvalidArgument("unexpected argument '" + a + "' (flags are --name=value)");
    std::string name = a.substr(2);
    std::replace(name.begin(), name.end(), '_', '-');
    std::string value;
    const auto eq = name.find('=');
    if (name == "restore-latest") {
      *restore_latest = true;
      continue;
    }
    if (eq != std::string::npos) name = name.substr(0, eq);
    if (std::find_if(std::begin(kFlags), std::end(kFlags),
                     [&](const char* f) { return name == f; }) == std::end(kFlags)) {
      return InvalidArgument("unknown flag --" + name);
    }
    if (eq != std::string::npos) {
      value = a.substr(a.find('=') + 1);  // from the original: values keep their underscores
    } else if (i + 1 < args.size()) {
      value = args[++i];
    } else {
      return InvalidArgument("flag --" + name + " needs a value");
    }
    flags[name] = value;
  }
  return flags;
}

}  // namespace

Status RunParameterServerMain(const std::vector<std::string>& args, const std::atomic<bool>& stop) {
  bool restore_latest = false;
  COHORT_ASSIGN_OR_RETURN(auto flags, ParseFlags(args, &restore_latest));
  auto get = [&](const std::string& flag, const std::string& fallback) {
    auto it = flags.find(flag);
    return it == flags.end() ? fallback : it->second;
  };

  PsServerOptions so;
  // Index: flag, COHORT_PS_INDEX, or the suffix of COHORT_REPLICA ("parameter_server-1").
  std::string index = Env("COHORT_PS_INDEX");
  if (index.empty()) {
    const std::string replica = Env("COHORT_REPLICA");
    const auto dash = replica.rfind('-');
    if (dash != std::string::npos) index = replica.substr(dash + 1);
  }
  COHORT_ASSIGN_OR_RETURN(int64_t idx, ParseInt("--index / COHORT_PS_INDEX",
                                                get("index", index.empty() ? "0" : index)));
  std::string servers_env = Env("COHORT_NUM_PS");
  if (servers_env.empty() && !Env("COHORT_PS_ADDRS").empty()) {
    const std::string a = Env("COHORT_PS_ADDRS");
    servers_env = std::to_string(1 + std::count(a.begin(), a.end(), ','));
  }
  COHORT_ASSIGN_OR_RETURN(int64_t servers,
                          ParseInt("--num-servers / COHORT_PS_ADDRS",
                                   get("num-servers", servers_env.empty() ? "1" : servers_env)));
  std::string workers_env = Env("COHORT_NUM_WORKERS");
  if (workers_env.empty()) workers_env = Env("WORLD_SIZE");
  COHORT_ASSIGN_OR_RETURN(int64_t workers,
                          ParseInt("--num-workers / COHORT_NUM_WORKERS",
                                   get("num-workers", workers_env.empty() ? "" : workers_env)));
  if (servers < 1 || workers < 1 || idx < 0 || idx >= servers) {
    return InvalidArgument("parameter server " + std::to_string(idx) + " of " +
                           std::to_string(servers) + " for " + std::to_string(workers) +
                           " workers is not valid");
  }
  so.server_index = static_cast<int>(idx);
  so.num_servers = static_cast<int>(servers);
  so.num_workers = static_cast<int>(workers);
  const std::string aip = Env("AIP_CHECKPOINT_DIR");
  so.checkpoint_dir = get("checkpoint-dir", aip.empty() ? "" : aip + "/ps-" + std::to_string(idx));
  COHORT_ASSIGN_OR_RETURN(so.checkpoint_every,
                          ParseInt("--checkpoint-every", get("checkpoint-every", "100")));
  COHORT_ASSIGN_OR_RETURN(int64_t keep,
                          ParseInt("--keep-checkpoints", get("keep-checkpoints", "3")));
  so.keep_checkpoints = static_cast<int>(std::max<int64_t>(1, keep));
  const std::string timeout_env = Env("COHORT_COMM_TIMEOUT_MS");
  COHORT_ASSIGN_OR_RETURN(
      int64_t timeout_ms,
      ParseInt("--timeout-ms", get("timeout-ms", timeout_env.empty() ? "60000" : timeout_env)));
  COHORT_ASSIGN_OR_RETURN(int64_t rejoin_ms,
                          ParseInt("--rejoin-timeout-ms", get("rejoin-timeout-ms", "60000")));
  if (timeout_ms <= 0 || rejoin_ms < 0) return InvalidArgument("timeouts must be positive");
  so.timeout = std::chrono::milliseconds(timeout_ms);

  std::optional<OptimizerConfig> forced;
  for (const char* f :
       {"optimizer", "lr", "momentum", "beta1", "beta2", "epsilon", "staleness", "rescale"}) {
    if (flags.count(f)) forced = OptimizerConfig{};
  }
  if (forced) {
    auto kind = ParseOptimizerKind(get("optimizer", "sgd"));
    if (!kind) return InvalidArgument("--optimizer must be sgd, momentum or adam");
    forced->kind = *kind;
    COHORT_ASSIGN_OR_RETURN(forced->learning_rate, ParseDouble("--lr", get("lr", "0.01")));
    COHORT_ASSIGN_OR_RETURN(forced->momentum, ParseDouble("--momentum", get("momentum", "0.9")));
    COHORT_ASSIGN_OR_RETURN(forced->beta1, ParseDouble("--beta1", get("beta1", "0.9")));
    COHORT_ASSIGN_OR_RETURN(forced->beta2, ParseDouble("--beta2", get("beta2", "0.999")));
    COHORT_ASSIGN_OR_RETURN(forced->epsilon, ParseDouble("--epsilon", get("epsilon", "1e-8")));
    COHORT_ASSIGN_OR_RETURN(forced->rescale, ParseDouble("--rescale", get("rescale", "0")));
    COHORT_ASSIGN_OR_RETURN(int64_t s, ParseInt("--staleness", get("staleness", "-1")));
    forced->staleness = static_cast<int32_t>(s);
    COHORT_RETURN_IF_ERROR(forced->Validate());
  }
  so.optimizer_override = forced;

  const std::string address = get("bootstrap", Env("COHORT_BOOTSTRAP_ADDR"));
  if (address.empty())
    return InvalidArgument("no bootstrap address (--bootstrap or COHORT_BOOTSTRAP_ADDR)");

  PsServer server(so);
  const std::string restart = Env("COHORT_RESTART_COUNT");
  std::string restore = get("restore", "");
  if (restore.empty() && (restore_latest || (!restart.empty() && restart != "0")))
    restore = so.checkpoint_dir;
  if (!restore.empty()) {
    Status s = server.Restore(restore);
    if (s.code() == StatusCode::kNotFound) {
      spdlog::warn("parameter server {}: nothing to restore in {} ({}); starting fresh", idx,
                   restore, s.message());
    } else if (!s.ok()) {
      return s;
    }
  }
  PsRunOptions ro;
  ro.connect_timeout = so.timeout;
  ro.rejoin_timeout = std::chrono::milliseconds(rejoin_ms);
  COHORT_ASSIGN_OR_RETURN(auto bootstrap, StoreBootstrap::Connect(address, so.timeout));
  spdlog::info("parameter server {} of {} for {} workers; bootstrap {}; checkpoints {}", idx,
               servers, workers, address, so.checkpoint_dir.empty() ? "off" : so.checkpoint_dir);
  return RunParameterServer(*bootstrap, server, ro, stop);
}

}  // namespace cohort::collective::ps
