#include "common/config.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/file_util.h"
#include "common/job_spec.h"
#include "common/nearest_name.h"

namespace cohort {

namespace po = boost::program_options;

namespace {

// Reaches the texts Boost puts in place of an error's placeholders ("%value%", "%option%"): the
// protected member is named through this derived class, never instantiated.
struct ErrorSubstitutions : po::error_with_option_name {
  static std::map<std::string, std::string>& Of(po::error_with_option_name& e) {
    return e.*(&ErrorSubstitutions::m_substitutions);
  }
};

std::string_view Trim(std::string_view s) {
  const char* blanks = " \t\r\f\v";
  size_t b = s.find_first_not_of(blanks);
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(blanks);
  return s.substr(b, e - b + 1);
}

// True when the option was given (not just defaulted). A bool_switch counts only when true.
bool Given(const po::variables_map& vm, const std::string& name) {
  auto it = vm.find(name);
  if (it == vm.end() || it->second.defaulted() || it->second.empty()) return false;
  if (const bool* b = boost::any_cast<bool>(&it->second.value())) return *b;
  return true;
}

// DidYouMean over the long names of `options`, each after `prefix` ("--" on a command line).
std::string DidYouMeanOption(std::string_view typed, const po::options_description& options,
                             const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& option : options.options()) names.push_back(prefix + option->long_name());
  return DidYouMean(typed, std::vector<std::string_view>(names.begin(), names.end()));
}

}  // namespace

std::string FormatDuration(std::chrono::milliseconds d) {
  int64_t ms = d.count();
  if (ms == 0) return "0s";
  if (ms % 1000 != 0) return std::to_string(ms) + "ms";
  int64_t s = ms / 1000;
  if (s % 86400 == 0) return std::to_string(s / 86400) + "d";
  if (s % 3600 == 0) return std::to_string(s / 3600) + "h";
  if (s % 60 == 0) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string FormatElapsed(int64_t ms) {
  if (ms <= 0) return "0s";
  int64_t s = ms / 1000;
  char buffer[32];
  if (s < 60) {
    if (ms < 10000) {
      std::snprintf(buffer, sizeof(buffer), "%.1fs", static_cast<double>(ms) / 1000.0);
    } else {
      std::snprintf(buffer, sizeof(buffer), "%llds", static_cast<long long>(s));
    }
  } else if (s < 3600) {
    std::snprintf(buffer, sizeof(buffer), "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buffer, sizeof(buffer), "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  } else {
    std::snprintf(buffer, sizeof(buffer), "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>((s % 86400) / 3600));
  }
  return buffer;
}

std::string FlagErrorText(po::error& e) {
  if (auto* named = dynamic_cast<po::error_with_option_name*>(&e)) {
    for (auto& [placeholder, text] : ErrorSubstitutions::Of(*named)) {
      if (std::count(text.begin(), text.end(), '%') < 2) continue;
      std::string shown;
      for (char c : text) shown += c == '%' ? std::string("\uFF05") : std::string(1, c);
      text = std::move(shown);
    }
  }
  return e.what();
}

std::ostream& operator<<(std::ostream& out, const FlagDuration& d) {
  return out << FormatDuration(d.value);
}

void validate(boost::any& value, const std::vector<std::string>& tokens, FlagDuration*, int) {
  po::validators::check_first_occurrence(value);
  const std::string& text = po::validators::get_single_string(tokens);
  StatusOr<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d.ok()) {
    // Boost fills in the option name when store() rethrows.
    po::invalid_option_value e(text);
    e.m_error_template =
        "the argument ('%value%') for option '%canonical_option%' is not a duration: use 7d, 12h, "
        "30m, 45s, 1500ms or bare seconds";
    throw e;
  }
  value = FlagDuration(*d);
}

Status ParseConfigText(std::string_view text, std::string_view source,
                       const po::options_description& options, po::variables_map* values) {
  std::set<std::string> seen;
  std::string section;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view raw =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++line_no;
    auto error = [&](const std::string& what) {
      return InvalidArgument(std::string(source) + ":" + std::to_string(line_no) + ": " + what);
    };
    std::string_view line = Trim(raw);
    if (line.empty() || line.front() == '#' || line.front() == ';') continue;
    if (line.front() == '[') {
      if (line.back() != ']') return error("unterminated section header");
      section = std::string(Trim(line.substr(1, line.size() - 2)));
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos)
      return error("expected 'name = value', got '" + std::string(line) + "'");
    std::string key(Trim(line.substr(0, eq)));
    std::string_view value = Trim(line.substr(eq + 1));
    // Inline comment: whitespace then '#', outside a quoted value.
    if (!value.empty() && value.front() == '"') {
      size_t close = value.find('"', 1);
      if (close == std::string_view::npos) return error("unterminated quoted value");
      std::string_view rest = Trim(value.substr(close + 1));
      if (!rest.empty() && rest.front() != '#') return error("text after a quoted value");
      value = value.substr(1, close - 1);
    } else {
      for (size_t i = 1; i < value.size(); ++i) {
        if (value[i] == '#' && (value[i - 1] == ' ' || value[i - 1] == '\t')) {
          value = Trim(value.substr(0, i));
          break;
        }
      }
    }
    if (key.empty()) return error("missing option name before '='");
    if (!section.empty()) key = section + "." + key;
    const po::option_description* desc = options.find_nothrow(key, false, false, false);
    if (desc == nullptr) {
      return error("unknown option '" + key + "'" + DidYouMeanOption(key, options, ""));
    }
    if (!seen.insert(key).second && !desc->semantic()->is_composing()) {
      return error("option '" + key + "' is given more than once");
    }
    po::parsed_options parsed(&options);
    po::option opt;
    opt.string_key = key;
    opt.value.emplace_back(value);
    opt.original_tokens = {key, std::string(value)};
    parsed.options.push_back(std::move(opt));
    try {
      po::store(parsed, *values);
    } catch (po::error& e) {
      return error(FlagErrorText(e));
    } catch (const std::exception& e) {
      return error(e.what());
    }
  }
  return Status::Ok();
}

Status ParseConfigFile(const std::string& path, const po::options_description& options,
                       po::variables_map* values) {
  COHORT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path, "config file"));
  return ParseConfigText(text, path, options, values);
}

StatusOr<CommandLine> ParseFlags(int argc, const char* const* argv,
                                 const po::options_description& options, std::string_view usage,
                                 std::ostream* help_out,
                                 const po::positional_options_description* positional) {
  po::options_description all;
  po::options_description generic;
  const bool own_help = options.find_nothrow("help", false) == nullptr;
  const bool own_config = options.find_nothrow("config", false) == nullptr;
  if (own_help) generic.add_options()("help", "print this help and exit");
  if (own_config) {
    generic.add_options()("config", po::value<std::string>()->value_name("FILE"),
                          "read options from an INI file (name = value); flags win");
  }
  all.add(options);
  if (own_help || own_config) all.add(generic);

  CommandLine out;
  try {
    po::command_line_parser parser(argc, argv);
    parser.options(all);
    if (positional != nullptr) parser.positional(*positional);
    po::store(parser.run(), out.values);
  } catch (po::unknown_option& e) {
    return InvalidArgument(FlagErrorText(e) + DidYouMeanOption(e.get_option_name(), all, "--"));
  } catch (po::error& e) {
    return InvalidArgument(FlagErrorText(e));
  } catch (const std::exception& e) {
    return InvalidArgument(e.what());
  }

  if (Given(out.values, "help")) {
    out.help = true;
    std::ostream& os = help_out != nullptr ? *help_out : std::cout;
    if (!usage.empty()) os << usage << "\n\n";
    std::ostringstream listed;
    listed << all;
    std::string text = listed.str();
    if (text.rfind('\n', 0) == 0) text.erase(0, 1);  // `all` opens its first part with one
    os << text;
    return out;
  }
  // --version (where the binary has one) is answered as --help is: whatever --config names.
  if (Given(out.values, "version")) return out;

  if (Given(out.values, "config")) {
    try {
      out.config_file = out.values["config"].as<std::string>();
    } catch (const boost::bad_any_cast&) {
      return InvalidArgument("--config: expected a file name");
    }
    COHORT_RETURN_IF_ERROR(ParseConfigFile(out.config_file, all, &out.values));
  }

  try {
    po::notify(out.values);
  } catch (po::error& e) {
    return InvalidArgument(FlagErrorText(e));
  } catch (const std::exception& e) {
    return InvalidArgument(e.what());
  }
  return out;
}

}  // namespace cohort
