// The verbs of the `cohort` CLI (cli/cli.h lists them) and what they share with RunCli: the
// parsed command line and the context a verb runs in. Internal to cli/.
//
// Each verb takes its parsed arguments (global flags already applied to ctx.options), writes its
// output to ctx.out and errors to ctx.err, and returns the process exit code (cli.h's kExit*).
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "common/client.h"

namespace cohort::cli {

struct ParsedArgs {
  std::map<std::string, std::string> values;  // flag -> value ("" for booleans)
  std::vector<std::string> positionals;
  // A flag that repeats -> each of its values, in order.
  std::map<std::string, std::vector<std::string>> repeated;
  // How many positionals came before "--" (npos: there was none).
  size_t dashdash = std::string::npos;
  std::vector<std::string> All(const std::string& flag) const {
    auto it = repeated.find(flag);
    return it == repeated.end() ? std::vector<std::string>() : it->second;
  }
  bool Has(const std::string& flag) const { return values.count(flag) > 0; }
  std::string Get(const std::string& flag, const std::string& fallback = "") const {
    auto it = values.find(flag);
    return it == values.end() ? fallback : it->second;
  }
};

struct Context {
  ClientOptions options;
  std::ostream& out;
  std::ostream& err;
  // `out` / `err` are terminals (live views redraw in place there).
  bool out_is_terminal = false;
  bool err_is_terminal = false;
};

// Prints "cohort: MESSAGE" and the verb's usage (the main usage for an unknown verb) on `err`;
// returns kExitUsage.
int UsageError(std::ostream& err, const std::string& verb, const std::string& message);

int Submit(const ParsedArgs& args, const Context& ctx);
int ShowJob(const ParsedArgs& args, const Context& ctx);
int List(const ParsedArgs& args, const Context& ctx);
int Top(const ParsedArgs& args, const Context& ctx);
int Logs(const ParsedArgs& args, const Context& ctx);
int Watch(const ParsedArgs& args, const Context& ctx);
int Exec(const ParsedArgs& args, const Context& ctx);
int Stacks(const ParsedArgs& args, const Context& ctx);
int Cancel(const ParsedArgs& args, const Context& ctx);
int Suspend(const ParsedArgs& args, const Context& ctx);
int Resume(const ParsedArgs& args, const Context& ctx);
int Update(const ParsedArgs& args, const Context& ctx);
int Nodes(const ParsedArgs& args, const Context& ctx);
int Queues(const ParsedArgs& args, const Context& ctx);
int Checkpoint(const ParsedArgs& args, const Context& ctx);
int Keygen(const ParsedArgs& args, const Context& ctx);
int Backup(const ParsedArgs& args, const Context& ctx);
int Version(const ParsedArgs& args, const Context& ctx);
int Tune(const ParsedArgs& args, const Context& ctx);
int Trials(const ParsedArgs& args, const Context& ctx);
int Metrics(const ParsedArgs& args, const Context& ctx);
int Usage(const ParsedArgs& args, const Context& ctx);
int Delete(const ParsedArgs& args, const Context& ctx);
int Studies(const ParsedArgs& args, const Context& ctx);
int Arrays(const ParsedArgs& args, const Context& ctx);
int Cordon(const ParsedArgs& args, const Context& ctx);
int Uncordon(const ParsedArgs& args, const Context& ctx);
int Label(const ParsedArgs& args, const Context& ctx);
int Drain(const ParsedArgs& args, const Context& ctx);
int Forget(const ParsedArgs& args, const Context& ctx);

}  // namespace cohort::cli
