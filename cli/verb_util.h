// What the verbs of the `cohort` CLI share (cli/verbs_*.cc): exit codes for a Status, the
// connection, reading a spec file, and the shapes of verbs that submit a file or show a reply.
// Internal to cli/.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.h"
#include "cli/verbs.h"
#include "common/client.h"
#include "common/job_spec.h"
#include "common/spec_limit.h"
#include "common/status.h"
#include "common/vertex_job.h"

namespace cohort::cli {

// The exit code for `status` (cli.h's kExit*).
int ExitCodeFor(const Status& status);
// Prints "cohort: STATUS" on `err`; returns ExitCodeFor(status).
int Fail(std::ostream& err, const Status& status);
StatusOr<CoordinatorClient> ConnectClient(const Context& ctx);
// A spec file's text ("-": standard input).
StatusOr<std::string> ReadSpecText(const std::string& file);
// The text a spec file `file` is sent as: what `as_cohort` (AsCohortJobFile or AsCohortStudyFile,
// common/vertex_job.h) makes of it, a note on `err` for each field of a Vertex AI file without a
// counterpart ("cohort: note: ...").
StatusOr<std::string> AsCohortFile(
    const std::string& text, const std::string& file,
    const std::function<StatusOr<VertexConversion>(std::string_view, std::string_view)>& as_cohort,
    std::ostream& err);
// The spec size the CLI checks before sending: COHORT_MAX_SPEC_SIZE, else the coordinator's
// default limit.
StatusOr<uint64_t> SpecSizeLimit();

// What `--env KEY=VALUE`..., `--label KEY=VALUE`... and `-- ARG...` of submit and tune give the
// job (tune: its trial job): `edits`' env, labels and args. `file_args` is `args` without what
// follows "--" (the FILE alone). kInvalidArgument naming the flag for an --env that is not
// KEY=VALUE or a --label that is not a valid label.
Status ReadEnvLabelsAndArgs(const ParsedArgs& args, SubmitEdits* edits, ParsedArgs* file_args);

// What submit and tune share: the one FILE argument ("-": standard input) is read and checked with
// `parse` before anything is sent, then sent with `send` (the text, possibly changed by `edit`
// first: submit --name); on success `then` runs with the client, the parsed spec and the
// coordinator's reply. `kind` ("job", "study") names the spec in errors.
template <typename Spec, typename Reply>
int SubmitSpecFile(
    const ParsedArgs& args, const Context& ctx, const std::string& verb, const std::string& kind,
    StatusOr<Spec> (*parse)(std::string_view, std::string_view),
    const std::function<StatusOr<Reply>(CoordinatorClient&, const std::string&)>& send,
    const std::function<int(CoordinatorClient&, const Spec&, const Reply&)>& then,
    const std::function<StatusOr<std::string>(const std::string&)>& edit = {}) {
  if (args.positionals.size() != 1) return UsageError(ctx.err, verb, verb + " needs one FILE");
  const std::string& file = args.positionals[0];
  auto text = ReadSpecText(file);
  if (!text.ok()) return UsageError(ctx.err, verb, text.status().message());
  if (edit) {
    text = edit(*text);
    if (!text.ok()) return UsageError(ctx.err, verb, text.status().message());
  }
  auto limit = SpecSizeLimit();
  if (!limit.ok()) return UsageError(ctx.err, verb, limit.status().message());
  Status fits = CheckSpecSize(kind + " spec " + file, text->size(), *limit,
                              "the default --max-spec-size of the coordinator; "
                              "COHORT_MAX_SPEC_SIZE raises it here");
  if (!fits.ok()) {
    ctx.err << "cohort: " << fits.message() << "\n";
    return kExitUsage;
  }
  auto spec = parse(*text, file == "-" ? "<stdin>" : file);
  if (!spec.ok()) {
    ctx.err << "cohort: invalid " << kind << " spec: " << spec.status().message() << "\n";
    return kExitUsage;
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto reply = send(*client, *text);
  if (!reply.ok()) {
    if (reply.status().code() == StatusCode::kInvalidArgument) {
      ctx.err << "cohort: the coordinator rejected the " << kind
              << " spec: " << reply.status().message() << "\n";
      return kExitUsage;
    }
    return Fail(ctx.err, reply.status());
  }
  return then(*client, *spec, *reply);
}

// What status, list, nodes and trials share: `argument` ("JOB", "STUDY") is the one positional
// the verb needs, or "" for none; `fetch` asks the coordinator; the reply is printed as JSON with
// --json (`to_json`), else for people (`print`).
template <typename Reply>
int ShowVerb(const ParsedArgs& args, const Context& ctx, const std::string& verb,
             const std::string& argument,
             const std::function<StatusOr<Reply>(CoordinatorClient&)>& fetch,
             const std::function<nlohmann::json(const Reply&)>& to_json,
             const std::function<void(const Reply&, std::ostream&)>& print) {
  if (argument.empty() && !args.positionals.empty()) {
    return UsageError(ctx.err, verb, verb + " takes no arguments");
  }
  if (!argument.empty() && args.positionals.size() != 1) {
    return UsageError(ctx.err, verb, verb + " needs one " + argument);
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto reply = fetch(*client);
  if (!reply.ok()) return Fail(ctx.err, reply.status());
  if (args.Has("--json")) {
    ctx.out << to_json(*reply).dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
  } else {
    print(*reply, ctx.out);
  }
  return kExitOk;
}

// What list and nodes share: every item `list` returns, as a JSON array with --json.
template <typename Item>
int ShowAll(const ParsedArgs& args, const Context& ctx, const std::string& verb,
            StatusOr<std::vector<Item>> (CoordinatorClient::*list)(),
            nlohmann::json (*to_json)(const Item&),
            void (*print)(const std::vector<Item>&, std::ostream&)) {
  return ShowVerb<std::vector<Item>>(
      args, ctx, verb, "", [&](CoordinatorClient& client) { return (client.*list)(); },
      [&](const std::vector<Item>& items) {
        nlohmann::json array = nlohmann::json::array();
        for (const Item& item : items) array.push_back(to_json(item));
        return array;
      },
      print);
}

// `status JOB --spec`, `trials STUDY --spec`: the file the coordinator stored for the item the
// one positional `argument` names, as `get_spec` asks for it, printed as it is.
int ShowStoredFile(const ParsedArgs& args, const Context& ctx, const std::string& verb,
                   const std::string& argument,
                   StatusOr<std::string> (CoordinatorClient::*get_spec)(const std::string&));

// ShowVerb for a verb that names one item (`cohort status JOB`): `get` asks for it by the
// positional `argument` names; with --spec, `get_spec` the file stored for it (ShowStoredFile).
template <typename Item>
int ShowOne(const ParsedArgs& args, const Context& ctx, const std::string& verb,
            const std::string& argument,
            StatusOr<Item> (CoordinatorClient::*get)(const std::string&),
            nlohmann::json (*to_json)(const Item&), void (*print)(const Item&, std::ostream&),
            StatusOr<std::string> (CoordinatorClient::*get_spec)(const std::string&) = nullptr) {
  if (get_spec != nullptr && args.Has("--spec")) {
    return ShowStoredFile(args, ctx, verb, argument, get_spec);
  }
  return ShowVerb<Item>(
      args, ctx, verb, argument,
      [&](CoordinatorClient& client) { return (client.*get)(args.positionals[0]); }, to_json,
      print);
}

}  // namespace cohort::cli
