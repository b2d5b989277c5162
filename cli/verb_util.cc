#include "cli/verb_util.h"

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace cohort::cli {

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
    case StatusCode::kUnauthenticated:
      return kExitRefused;
    case StatusCode::kPermissionDenied:
      return kExitDenied;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return kExitUsage;
    default:
      return kExitJobFailed;
  }
}

int Fail(std::ostream& err, const Status& status) {
  err << "cohort: " << status.ToString() << "\n";
  return ExitCodeFor(status);
}

StatusOr<CoordinatorClient> ConnectClient(const Context& ctx) {
  return CoordinatorClient::Connect(ctx.options);
}

StatusOr<std::string> ReadSpecText(const std::string& file) {
  std::stringstream buffer;
  if (file == "-") {
    buffer << std::cin.rdbuf();
    return buffer.str();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return ErrnoStatus("cannot read job file " + file, errno);
  buffer << in.rdbuf();
  if (in.bad()) return ErrnoStatus("cannot read job file " + file, errno);
  return buffer.str();
}

StatusOr<std::string> AsCohortFile(
    const std::string& text, const std::string& file,
    const std::function<StatusOr<VertexConversion>(std::string_view, std::string_view)>& as_cohort,
    std::ostream& err) {
  COHORT_ASSIGN_OR_RETURN(VertexConversion converted,
                          as_cohort(text, file == "-" ? "<stdin>" : file));
  for (const std::string& note : converted.notes) err << "cohort: note: " << note << "\n";
  return std::move(converted.yaml);
}

int ShowStoredFile(const ParsedArgs& args, const Context& ctx, const std::string& verb,
                   const std::string& argument,
                   StatusOr<std::string> (CoordinatorClient::*get_spec)(const std::string&)) {
  if (args.Has("--json")) return UsageError(ctx.err, verb, "give --json or --spec, not both");
  if (args.positionals.size() != 1) {
    return UsageError(ctx.err, verb, verb + " needs one " + argument);
  }
  auto client = ConnectClient(ctx);
  if (!client.ok()) return Fail(ctx.err, client.status());
  auto spec = ((*client).*get_spec)(args.positionals[0]);
  if (!spec.ok()) return Fail(ctx.err, spec.status());
  ctx.out << *spec;
  if (!spec->empty() && spec->back() != '\n') ctx.out << "\n";
  return kExitOk;
}

// The spec size the CLI checks before sending: COHORT_MAX_SPEC_SIZE, else the coordinator's
// default limit.
StatusOr<uint64_t> SpecSizeLimit() {
  const char* env = std::getenv("COHORT_MAX_SPEC_SIZE");
  if (env == nullptr || *env == '\0') return kDefaultMaxSpecBytes;
  auto limit = ParseByteSize(env);
  if (!limit.ok()) return limit.status().WithContext("COHORT_MAX_SPEC_SIZE");
  return limit;
}

Status ReadEnvLabelsAndArgs(const ParsedArgs& args, SubmitEdits* edits, ParsedArgs* file_args) {
  for (const std::string& entry : args.All("--env")) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--env: expected KEY=VALUE, got '" + entry + "'");
    }
    edits->env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const std::string& entry : args.All("--label")) {
    StatusOr<std::pair<std::string, std::string>> label = ParseNodeLabel(entry);
    if (!label.ok()) return label.status().WithContext("--label");
    edits->labels.insert_or_assign(label->first, label->second);
  }
  *file_args = args;
  if (args.dashdash != std::string::npos) {
    edits->args.assign(args.positionals.begin() + static_cast<std::ptrdiff_t>(args.dashdash),
                       args.positionals.end());
    file_args->positionals.resize(args.dashdash);
  }
  return Status::Ok();
}

}  // namespace cohort::cli
