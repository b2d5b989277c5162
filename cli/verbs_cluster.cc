// The cluster verbs of the `cohort` CLI: nodes, cordon, uncordon, drain, label, forget, queues,
// usage, keygen.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "cli/verb_util.h"
#include "cli/verbs.h"
#include "common/build_version.h"
#include "common/curve_keys.h"
#include "common/job_spec.h"
#include "common/nearest_name.h"
#include "common/node_label_edits.h"

namespace cohort::cli {
namespace {

// Hours with 4 decimals ("0.0012"): short jobs still show.
std::string FormatHours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", h);
  return buf;
}

// The -l SELECTOR of a verb, parsed (nullopt without one).
StatusOr<std::optional<NodeSelector>> SelectorFlag(const ParsedArgs& args) {
  if (!args.Has("--selector")) return std::optional<NodeSelector>();
  COHORT_ASSIGN_OR_RETURN(NodeSelector selector, ParseNodeSelector(args.Get("--selector")));
  return std::optional<NodeSelector>(std::move(selector));
}

// Runs `action` of NodeAdmin, with `items` (label's edits), on the verb's NODE or on every
// registered node -l SELECTOR matches, in `cohort nodes`' order (none matching is no error, as
// with kubectl's -l); prints what was done. The exit code of the first that failed (the others
// are still tried), else 0.
int AdminTargets(const ParsedArgs& args, const Context& ctx, const std::string& verb,
                 const std::string& action, const std::vector<std::string>& items,
                 bool print_labels) {
  auto selector = SelectorFlag(args);
  if (!selector.ok()) return UsageError(ctx.err, verb, selector.status().message());
  std::vector<int> gpus;
  for (const std::string& gpu : args.All("--gpu")) {
    int index = -1;
    const auto [end, ec] = std::from_chars(gpu.data(), gpu.data() + gpu.size(), index);
    if (gpu.empty() || ec != std::errc() || end != gpu.data() + gpu.size() || index < 0) {
      return UsageError(ctx.err, verb,
                        "--gpu: expected a GPU index (0, 1, ...), got '" + gpu + "'");
    }
    gpus.push_back(index);
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  std::vector<std::string> targets;
  if (!*selector) {
    targets.push_back(args.positionals[0]);
  } else {
    auto nodes = client->ListNodes(args.Get("--selector"));
    if (!nodes.ok()) return Fail(ctx.err, nodes.status());
    for (const wire::NodeInfoT& node : *nodes) targets.push_back(node.node_id);
    if (targets.empty()) {
      ctx.err << "cohort: no node matches " << args.Get("--selector") << "\n";
      return kExitOk;
    }
  }
  int exit_code = kExitOk;
  for (const std::string& node : targets) {
    auto reply = client->AdminNode(node, action, items, gpus, args.Get("--reason"));
    if (!reply.ok()) {
      const int failed = Fail(ctx.err, reply.status());
      if (exit_code == kExitOk) exit_code = failed;
      continue;
    }
    ctx.out << reply->message;
    if (reply->node && !print_labels) ctx.out << " (" << reply->node->state << ")";
    ctx.out << "\n";
    if (reply->node && print_labels) {
      ctx.out << "labels: " << (reply->node->labels.empty() ? "-" : reply->node->labels) << "\n";
    }
  }
  return exit_code;
}

// cordon, uncordon, drain, forget: one NODE or -l SELECTOR, one NodeAdmin action.
int NodeAdminVerb(const ParsedArgs& args, const Context& ctx, const std::string& verb,
                  const std::string& action) {
  if (args.Has("--selector") && !args.positionals.empty()) {
    return UsageError(ctx.err, verb, verb + " takes a NODE or -l SELECTOR, not both");
  }
  if (!args.Has("--selector") && args.positionals.size() != 1) {
    return UsageError(ctx.err, verb, verb + " needs one NODE (or -l SELECTOR)");
  }
  return AdminTargets(args, ctx, verb, action, {}, /*print_labels=*/false);
}

}  // namespace

int Cordon(const ParsedArgs& args, const Context& ctx) {
  return NodeAdminVerb(args, ctx, "cordon", "cordon");
}

int Uncordon(const ParsedArgs& args, const Context& ctx) {
  return NodeAdminVerb(args, ctx, "uncordon", "uncordon");
}

int Drain(const ParsedArgs& args, const Context& ctx) {
  return NodeAdminVerb(args, ctx, "drain", args.Has("--now") ? "drain-now" : "drain");
}

int Label(const ParsedArgs& args, const Context& ctx) {
  const bool reset = args.Has("--reset");
  const bool selector = args.Has("--selector");
  const size_t node_args = selector ? 0 : 1;
  if (args.positionals.size() < node_args || (args.positionals.size() == node_args && !reset)) {
    return UsageError(ctx.err, "label",
                      "label needs a NODE (or -l SELECTOR) and KEY=VALUE or KEY- (or --reset)");
  }
  const std::vector<std::string> items(args.positionals.begin() + node_args,
                                       args.positionals.end());
  if (auto edits = ParseNodeLabelEdits(items); !edits.ok()) {
    return UsageError(ctx.err, "label", edits.status().message());
  }
  return AdminTargets(args, ctx, "label", reset ? "label-reset" : "label", items,
                      /*print_labels=*/true);
}

int Forget(const ParsedArgs& args, const Context& ctx) {
  return NodeAdminVerb(args, ctx, "forget", "forget");
}

int Nodes(const ParsedArgs& args, const Context& ctx) {
  auto selector = SelectorFlag(args);
  if (!selector.ok()) return UsageError(ctx.err, "nodes", selector.status().message());
  if (!args.positionals.empty()) {
    if (args.Has("--selector")) {
      return UsageError(ctx.err, "nodes", "nodes takes a NODE or -l SELECTOR, not both");
    }
    return ShowVerb<wire::NodeInfoT>(
        args, ctx, "nodes", "NODE",
        [&](CoordinatorClient& client) -> StatusOr<wire::NodeInfoT> {
          const std::string& name = args.positionals[0];
          auto nodes = client.ListNodes("", name);
          if (!nodes.ok()) return nodes.status();
          std::vector<std::string_view> names;
          for (wire::NodeInfoT& node : *nodes) {
            if (node.node_id == name) return std::move(node);
            names.push_back(node.node_id);
          }
          return NotFound("no node '" + name + "'" + DidYouMean(name, names));
        },
        NodeToJson, PrintNode);
  }
  return ShowVerb<std::vector<wire::NodeInfoT>>(
      args, ctx, "nodes", "",
      [&](CoordinatorClient& client) -> StatusOr<std::vector<wire::NodeInfoT>> {
        return client.ListNodes(args.Get("--selector"));
      },
      [](const std::vector<wire::NodeInfoT>& nodes) {
        nlohmann::json array = nlohmann::json::array();
        for (const wire::NodeInfoT& node : nodes) array.push_back(NodeToJson(node));
        return array;
      },
      PrintNodes);
}

int Queues(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "queues", &CoordinatorClient::ListQueues, QueueToJson, PrintQueues);
}

int Backup(const ParsedArgs& args, const Context& ctx) {
  if (!args.positionals.empty()) return UsageError(ctx.err, "backup", "backup takes no arguments");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  // The coordinator answers once the backup has ended: a large database takes a while.
  constexpr std::chrono::milliseconds kBackupWait = std::chrono::minutes(10);
  auto reply = client->BackupState(std::max(ctx.options.timeout, kBackupWait));
  if (!reply.ok()) return Fail(ctx.err, reply.status());
  if (args.Has("--json")) {
    const nlohmann::json out = {{"path", reply->path},
                                {"bytes", reply->bytes},
                                {"jobs", reply->jobs},
                                {"studies", reply->studies},
                                {"duration_ms", reply->duration_ms}};
    ctx.out << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    ctx.out << "wrote " << reply->path << " (" << reply->bytes << " bytes: " << reply->jobs
            << " jobs, " << reply->studies << " studies) in " << reply->duration_ms << " ms\n";
  }
  return kExitOk;
}

int Keygen(const ParsedArgs& args, const Context& ctx) {
  if (!args.positionals.empty()) return UsageError(ctx.err, "keygen", "keygen takes no arguments");
  std::string dir = args.Get("--dir", DefaultClientKeyDir());
  std::string name = args.Get("--name", "client");
  if (name.empty() || name.find('/') != std::string::npos) {
    return UsageError(ctx.err, "keygen", "--name: must be a plain file name");
  }
  auto keys = GenerateCurveKeyPair();
  if (!keys.ok()) return Fail(ctx.err, keys.status());
  Status written = WriteCurveKeyFiles(dir, name, *keys);
  if (!written.ok()) {
    ctx.err << "cohort: " << written.ToString() << "\n";
    return kExitJobFailed;
  }
  ctx.out << "wrote " << dir << "/" << name << ".key (secret, keep it) and " << dir << "/" << name
          << ".pub\npublic-key = " << keys->public_key << "\n";
  return kExitOk;
}

int Version(const ParsedArgs& args, const Context& ctx) {
  if (!args.positionals.empty())
    return UsageError(ctx.err, "version", "version takes no arguments");
  const std::string client(CohortBuildVersion());
  StatusOr<std::string> coordinator = [&]() -> StatusOr<std::string> {
    COHORT_ASSIGN_OR_RETURN(CoordinatorClient connected, ConnectClient(ctx));
    return connected.CoordinatorVersion();
  }();
  if (args.Has("--json")) {
    nlohmann::json out = {{"client", client}, {"coordinator", nullptr}};
    if (coordinator.ok()) {
      out["coordinator"] = *coordinator;
    } else {
      out["error"] = coordinator.status().ToString();
    }
    ctx.out << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    ctx.out << "cohort " << client << "\n";
    if (coordinator.ok())
      ctx.out << "cohort-coordinator " << *coordinator << " (" << ctx.options.endpoint << ")\n";
  }
  if (coordinator.ok()) return kExitOk;
  // A coordinator from before GetVersion refuses it as a request it does not know: not a usage
  // error of this command.
  if (coordinator.status().code() == StatusCode::kInvalidArgument) {
    ctx.err << "cohort: the coordinator predates `cohort version` (it answered: "
            << coordinator.status().message() << ")\n";
    return kExitJobFailed;
  }
  return Fail(ctx.err, coordinator.status().WithContext("the coordinator's version"));
}

int Usage(const ParsedArgs& args, const Context& ctx) {
  int64_t since_ms = 0;
  if (args.Has("--since")) {
    int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    auto since = ParseSince(args.Get("--since"), now_ms);
    if (!since.ok()) return UsageError(ctx.err, "usage", since.status().message());
    since_ms = *since;
  }
  wire::GetUsageT request;
  request.user = args.Get("--user");
  request.queue = args.Get("--queue");
  request.since_ms = since_ms;
  request.selector = args.Get("--selector");
  request.by_label = args.Get("--by-label");
  if (args.Has("--by-label")) {
    if (Status bad = CheckNodeLabel(request.by_label, ""); !bad.ok()) {
      return UsageError(ctx.err, "usage", "--by-label: " + bad.message());
    }
  }
  const bool by_label = args.Has("--by-label");
  return ShowVerb<std::vector<wire::UsageRowT>>(
      args, ctx, "usage", "", [&](CoordinatorClient& client) { return client.GetUsage(request); },
      [&](const std::vector<wire::UsageRowT>& rows) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) out.push_back(UsageRowToJson(r, by_label));
        return out;
      },
      [&](const std::vector<wire::UsageRowT>& rows, std::ostream& out) {
        // By user and queue, or by the label's value (its key, upper-cased, heads the column).
        std::vector<std::string> heads = {"USER", "QUEUE"};
        if (by_label) {
          std::string key = request.by_label;
          for (char& c : key) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          heads = {key};
        }
        for (const char* head : {"JOBS", "FAILED", "GPU-HOURS", "CPU-HOURS"}) heads.push_back(head);
        Table table(heads);
        wire::UsageRowT total;
        auto add_row = [&](std::vector<std::string> cells, const wire::UsageRowT& r) {
          for (std::string cell : {std::to_string(r.jobs), std::to_string(r.failed),
                                   FormatHours(r.gpu_hours), FormatHours(r.cpu_hours)}) {
            cells.push_back(std::move(cell));
          }
          table.AddRow(cells);
        };
        for (const auto& r : rows) {
          if (by_label) {
            add_row({r.unlabelled ? "<none>" : r.label.empty() ? "\"\"" : r.label}, r);
          } else {
            add_row({r.user, r.queue}, r);
          }
          total.jobs += r.jobs;
          total.failed += r.failed;
          total.gpu_hours += r.gpu_hours;
          total.cpu_hours += r.cpu_hours;
        }
        if (rows.size() != 1) {
          add_row(
              by_label ? std::vector<std::string>{"TOTAL"} : std::vector<std::string>{"TOTAL", ""},
              total);
        }
        table.Print(out);
      });
}

}  // namespace cohort::cli
