// Flags and config files for Cohort's daemons and tools, over Boost.Program_options.
//
// A binary declares its options in a boost::program_options::options_description (values may be
// bound to variables with po::value(&x)), then calls ParseFlags(). ParseFlags adds --help and
// --config FILE unless the description already has them, parses argv, and when --config is given
// reads the file: INI, `name = value` with the long flag names (no dashes), `#` or `;` comment
// lines, a ` #` inline comment, and `[section]` headers that prefix names ("[log] level = x" is
// "log.level"). The command line wins over the file; a name repeated in the file is an error
// unless the option is composing. Finally po::notify() runs, so bound variables are filled and
// required() options are checked.
//
// Errors are kInvalidArgument naming the option ("unrecognised option '--bogus'"), or the file
// and line for the config file ("agent.conf:3: unknown option 'cpu' (did you mean 'cpus'?)": an
// unknown name is followed by the option nearest to it, common/nearest_name.h); an unreadable file
// is kNotFound/kInternal naming the file. --help prints `usage` and the options to `help_out` and
// returns with help == true (the caller exits 0 without doing anything else). A --version the
// binary declares returns as soon as argv is parsed, as --help does: the --config file is not
// read, nor po::notify() run (values.count("version") tells the caller).
//
// Durations ("10s", "30s", "1500ms", "7d", bare seconds) are options of type FlagDuration,
// parsed with ParseDuration (common/job_spec.h); a bad one names the option.
//
// Thread safety: none needed; call from main().
#pragma once

#include <boost/program_options.hpp>
#include <chrono>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace cohort {

// A duration-valued option: po::value<FlagDuration>(&d)->default_value(FlagDuration::Seconds(10)).
struct FlagDuration {
  std::chrono::milliseconds value{0};

  FlagDuration() = default;
  explicit FlagDuration(std::chrono::milliseconds v) : value(v) {}
  static FlagDuration Seconds(int64_t s) { return FlagDuration(std::chrono::seconds(s)); }

  bool operator==(const FlagDuration&) const = default;
};

// "10s", "1500ms", "2h": the form ParseDuration reads back (used for --help defaults).
std::string FormatDuration(std::chrono::milliseconds d);
// A span of time as a person reads it: "9.5s", "45s", "3m07s", "2h05m", "3d04h"; negative or
// zero: "0s" (run times, ages).
std::string FormatElapsed(int64_t ms);
std::ostream& operator<<(std::ostream& out, const FlagDuration& d);
// Boost.Program_options hook (found by argument-dependent lookup).
void validate(boost::any& value, const std::vector<std::string>& tokens, FlagDuration*, int);

struct CommandLine {
  boost::program_options::variables_map values;
  bool help = false;        // --help was given: usage was printed, nothing else was parsed
  std::string config_file;  // the --config file that was read ("" when none)
};

// What a Boost.Program_options error says. Boost puts the value given in place of its template's
// "%value%" (and the option's name in place of "%option%"), again and again while the result
// still holds the placeholder: e.what() never returned for a value that holds one itself
// ("--cpus %value%"), the daemon hung at its start. A value with two '%' or more is shown with
// U+FF05 (a fullwidth '%') in their place.
std::string FlagErrorText(boost::program_options::error& e);

// Parses argv and the --config file as described above.
StatusOr<CommandLine> ParseFlags(
    int argc, const char* const* argv, const boost::program_options::options_description& options,
    std::string_view usage, std::ostream* help_out = nullptr,
    const boost::program_options::positional_options_description* positional = nullptr);

// Parses INI text into `values` (values already there win, as on the command line) without
// calling notify. `source` names the text in errors. Exposed for tests and for tools that keep
// their configuration somewhere other than a file.
Status ParseConfigText(std::string_view text, std::string_view source,
                       const boost::program_options::options_description& options,
                       boost::program_options::variables_map* values);

// Reads and parses a config file (ParseConfigText on its contents).
Status ParseConfigFile(const std::string& path,
                       const boost::program_options::options_description& options,
                       boost::program_options::variables_map* values);

}  // namespace cohort
