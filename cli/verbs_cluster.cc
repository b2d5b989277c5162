// The cluster verbs of the `cohort` CLI: nodes, cordon, uncordon, drain, label, forget, queues,
// usage, keygen.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/cli.h"
#include "cli/job_view.h"
#include "cli/output.h"
#include "cli/verb_util.h"
#include "cli/verbs.h"
#include "common/curve_keys.h"
#include "common/node_label_edits.h"

namespace cohort::cli {
namespace {

// Hours with 4 decimals ("0.0012"): short jobs still show.
std::string FormatHours(double h) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", h);
  return buf;
}

// cordon, uncordon, drain, forget: one NODE, one NodeAdmin action; prints what was done.
int NodeAdminVerb(const ParsedArgs& args, const Context& ctx, const std::string& verb,
                  const std::string& action) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, verb, verb + " needs one NODE");
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto reply = client->AdminNode(args.positionals[0], action);
  if (!reply.ok()) return Fail(ctx.err, reply.status());
  ctx.out << reply->message;
  if (reply->node) ctx.out << " (" << reply->node->state << ")";
  ctx.out << "\n";
  return kExitOk;
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
  if (args.positionals.empty() || (args.positionals.size() == 1 && !reset)) {
    return UsageError(ctx.err, "label", "label needs a NODE and KEY=VALUE or KEY- (or --reset)");
  }
  const std::vector<std::string> items(args.positionals.begin() + 1, args.positionals.end());
  if (auto edits = ParseNodeLabelEdits(items); !edits.ok()) {
    return UsageError(ctx.err, "label", edits.status().message());
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto reply = client->AdminNode(args.positionals[0], reset ? "label-reset" : "label", items);
  if (!reply.ok()) return Fail(ctx.err, reply.status());
  ctx.out << reply->message << "\n";
  if (reply->node) {
    ctx.out << "labels: " << (reply->node->labels.empty() ? "-" : reply->node->labels) << "\n";
  }
  return kExitOk;
}

int Forget(const ParsedArgs& args, const Context& ctx) {
  return NodeAdminVerb(args, ctx, "forget", "forget");
}

int Nodes(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "nodes", &CoordinatorClient::ListNodes, NodeToJson, PrintNodes);
}

int Queues(const ParsedArgs& args, const Context& ctx) {
  return ShowAll(args, ctx, "queues", &CoordinatorClient::ListQueues, QueueToJson, PrintQueues);
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
  return ShowVerb<std::vector<wire::UsageRowT>>(
      args, ctx, "usage", "",
      [&](CoordinatorClient& client) {
        return client.GetUsage(args.Get("--user"), args.Get("--queue"), since_ms);
      },
      [](const std::vector<wire::UsageRowT>& rows) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : rows) out.push_back(UsageRowToJson(r));
        return out;
      },
      [](const std::vector<wire::UsageRowT>& rows, std::ostream& out) {
        Table table({"USER", "QUEUE", "JOBS", "FAILED", "GPU-HOURS", "CPU-HOURS"});
        wire::UsageRowT total;
        for (const auto& r : rows) {
          table.AddRow({r.user, r.queue, std::to_string(r.jobs), std::to_string(r.failed),
                        FormatHours(r.gpu_hours), FormatHours(r.cpu_hours)});
          total.jobs += r.jobs;
          total.failed += r.failed;
          total.gpu_hours += r.gpu_hours;
          total.cpu_hours += r.cpu_hours;
        }
        if (rows.size() != 1) {
          table.AddRow({"TOTAL", "", std::to_string(total.jobs), std::to_string(total.failed),
                        FormatHours(total.gpu_hours), FormatHours(total.cpu_hours)});
        }
        table.Print(out);
      });
}

}  // namespace cohort::cli
