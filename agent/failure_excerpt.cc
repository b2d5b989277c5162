#include "agent/failure_excerpt.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/utf8.h"

namespace cohort::agent {
namespace {

constexpr std::string_view kAgentNote = "cohort-agent: ";
constexpr std::string_view kTraceback = "Traceback (most recent call last):";
constexpr std::string_view kFatalPython = "Fatal Python error: ";
constexpr std::string_view kTerminate = "terminate called after throwing an instance of '";
constexpr std::string_view kWhat = "what():";
// What std::terminate prints with no exception in flight: most often a std::thread still joinable
// as a process tears down (torch's gloo threads after a script's sys.exit(1)), which says nothing
// of why the process was ending.
constexpr std::string_view kTerminateNoException = "terminate called without an active exception";
constexpr std::string_view kTorchrunRootCause = "Root Cause (first observed failure):";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The replica's lines, in order: the cut first line (unless whole) and the agent's notes left out,
// each line only what follows its last carriage return.
std::vector<std::string_view> ReplicaLines(std::string_view tail, bool whole) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  if (!whole) {
    size_t first_end = tail.find('\n');
    start = first_end == std::string_view::npos ? tail.size() : first_end + 1;
  }
  while (start < tail.size()) {
    size_t end = tail.find('\n', start);
    if (end == std::string_view::npos) end = tail.size();
    std::string_view line = tail.substr(start, end - start);
    // "...\r\n" ends a line; a \r inside one was overwritten by what follows it.
    if (line.ends_with('\r')) line.remove_suffix(1);
    if (size_t cr = line.rfind('\r'); cr != std::string_view::npos) line.remove_prefix(cr + 1);
    if (!line.starts_with(kAgentNote)) lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

bool Indented(std::string_view line) {
  return !line.empty() && (line.front() == ' ' || line.front() == '\t');
}

// The index of the last Python traceback header.
std::optional<size_t> LastTraceback(const std::vector<std::string_view>& lines) {
  for (size_t i = lines.size(); i-- > 0;) {
    if (Trim(lines[i]) == kTraceback) return i;
  }
  return std::nullopt;
}

// Rule 0: the last "Root Cause" block of torchrun's ChildFailedError report, its fields one a line
// ("  rank      : 1 (local_rank: 1)") up to the closing "=====" rule. The report is the message of
// torchrun's last traceback: one that comes before a later traceback (another command of the
// replica's that failed after torchrun) is not the cause. `exit_codes`: the root cause's, then
// those of the report's other failures (its "Failures:" section, above the root cause).
struct TorchrunReport {
  std::string rank, exit_code, traceback;
  std::vector<std::string> exit_codes;
};

// The value of `line`'s field `name` ("  exitcode  : -9 (pid: 1)"), if it is that field.
std::optional<std::string> FieldValue(std::string_view line, std::string_view name) {
  line = Trim(line);
  if (!line.starts_with(name)) return std::nullopt;
  const std::string_view rest = Trim(line.substr(name.size()));
  if (!rest.starts_with(':')) return std::nullopt;
  return std::string(Trim(rest.substr(1)));
}

std::optional<TorchrunReport> LastTorchrunReport(const std::vector<std::string_view>& lines) {
  const size_t from = LastTraceback(lines).value_or(0);
  for (size_t i = lines.size(); i-- > from;) {
    if (Trim(lines[i]) != kTorchrunRootCause) continue;
    TorchrunReport report;
    for (size_t k = i + 1; k < lines.size() && !Trim(lines[k]).starts_with("==="); ++k) {
      for (auto [name, value] : {std::pair{std::string_view("rank"), &report.rank},
                                 std::pair{std::string_view("exitcode"), &report.exit_code},
                                 std::pair{std::string_view("traceback"), &report.traceback}}) {
        if (!value->empty()) continue;
        if (auto v = FieldValue(lines[k], name)) *value = *v;
      }
    }
    if (report.rank.empty()) return std::nullopt;
    report.exit_codes.push_back(report.exit_code);
    // The other failures: back up to the report's "Failures:" line (its opening rule above).
    for (size_t k = i; k-- > from && !Trim(lines[k]).starts_with("===");) {
      if (auto v = FieldValue(lines[k], "exitcode")) report.exit_codes.push_back(*v);
    }
    return report;
  }
  return std::nullopt;
}

// The rank and its traceback field, or its exit code where that field holds no cause (a pointer
// to the docs, or a Python traceback, which the error file carries).
std::optional<std::string> TorchrunRootCause(const std::vector<std::string_view>& lines) {
  const std::optional<TorchrunReport> report = LastTorchrunReport(lines);
  if (!report) return std::nullopt;
  std::string cause = "torchrun: rank " + report->rank + " failed first";
  const std::string& traceback = report->traceback;
  const bool told = !traceback.empty() && traceback != "<N/A>" &&
                    !traceback.starts_with("To enable traceback") &&
                    !traceback.starts_with("Traceback");
  if (told) return cause + ": " + traceback;
  return report->exit_code.empty() ? cause : cause + ", exit code " + report->exit_code;
}

// Rule 1: the first unindented, non-blank line after the last traceback header.
std::optional<std::string_view> PythonException(const std::vector<std::string_view>& lines) {
  const std::optional<size_t> header = LastTraceback(lines);
  if (!header) return std::nullopt;
  for (size_t k = *header + 1; k < lines.size(); ++k) {
    if (!Indented(lines[k]) && !Trim(lines[k]).empty()) return Trim(lines[k]);
  }
  return std::nullopt;  // cut short: the process died while printing it
}

std::optional<std::string_view> FatalPythonError(const std::vector<std::string_view>& lines) {
  for (size_t i = lines.size(); i-- > 0;) {
    if (lines[i].starts_with(kFatalPython)) return Trim(lines[i]);
  }
  return std::nullopt;
}

// Rule 3: "T: msg" (just "T" when no what() line follows).
std::optional<std::string> CxxTerminate(const std::vector<std::string_view>& lines) {
  for (size_t i = lines.size(); i-- > 0;) {
    if (!lines[i].starts_with(kTerminate)) continue;
    std::string_view rest = lines[i].substr(kTerminate.size());
    std::string type(rest.substr(0, rest.find('\'')));
    if (i + 1 < lines.size()) {
      std::string_view next = Trim(lines[i + 1]);
      if (next.starts_with(kWhat)) {
        return type + ": " + std::string(Trim(next.substr(kWhat.size())));
      }
    }
    return type;
  }
  return std::nullopt;
}

// Rule 4: the last non-blank line; std::terminate's word on a teardown only when nothing precedes
// it.
std::optional<std::string_view> LastLine(const std::vector<std::string_view>& lines) {
  std::optional<std::string_view> teardown;
  for (size_t i = lines.size(); i-- > 0;) {
    const std::string_view line = Trim(lines[i]);
    if (line.empty()) continue;
    if (line != kTerminateNoException) return line;
    if (!teardown) teardown = line;
  }
  return teardown;
}

// Without terminal escape sequences (colours: ESC [ parameters, then a final byte @ to ~).
std::string WithoutEscapes(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1B' && i + 1 < text.size() && text[i + 1] == '[') {
      size_t k = i + 2;
      while (k < text.size() && (text[k] < '@' || text[k] > '~')) ++k;
      i = k;  // past the final byte (or the end, for a sequence cut short)
      continue;
    }
    out += text[i];
  }
  return out;
}

std::string Finish(std::string_view text) {
  std::string printable = ValidUtf8(WithoutEscapes(text), /*printable=*/true);
  return TruncateUtf8(Trim(printable), kMaxFailureExcerptBytes);
}

}  // namespace

std::string FailureExcerpt(std::string_view tail, bool whole, bool any_last_line) {
  const std::vector<std::string_view> lines = ReplicaLines(tail, whole);
  if (auto text = TorchrunRootCause(lines)) return Finish(*text);
  if (auto line = PythonException(lines)) return Finish(*line);
  if (auto line = FatalPythonError(lines)) return Finish(*line);
  if (auto text = CxxTerminate(lines)) return Finish(*text);
  if (any_last_line) {
    if (auto line = LastLine(lines)) return Finish(*line);
  }
  return "";
}

bool LastLineTellsTheCause(int signal) { return signal == 0 || signal == SIGABRT; }

int TorchrunKillSignal(std::string_view tail, bool whole) {
  const std::optional<TorchrunReport> report = LastTorchrunReport(ReplicaLines(tail, whole));
  if (!report) return 0;
  for (const std::string& code : report->exit_codes) {
    // "-9" or "-9 (pid: 123)": killed by signal 9.
    if (!code.starts_with('-')) continue;
    int signal = 0;
    const auto [end, error] = std::from_chars(code.data() + 1, code.data() + code.size(), signal);
    const bool ends = end == code.data() + code.size() || *end == ' ';
    if (error == std::errc() && ends && signal >= 1 && signal <= 64) return signal;
  }
  return 0;
}

std::string ErrorFileMessage(std::string_view json) {
  const nlohmann::json data = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!data.is_object()) return "";
  auto message = data.find("message");
  if (message == data.end()) return "";
  const nlohmann::json* text = &*message;
  if (message->is_object()) {
    auto inner = message->find("message");
    if (inner == message->end()) return "";
    text = &*inner;
  }
  if (!text->is_string()) return "";
  std::string_view first = text->get_ref<const std::string&>();
  first = first.substr(0, first.find('\n'));
  return Finish(first);
}

LogTail ReadLogTail(const std::string& path, size_t max_bytes) {
  LogTail tail;
  struct stat st {};
  StatusOr<int> fd = OpenRegularFile(path, "replica file", &st);
  if (!fd.ok()) return tail;
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t offset = size > max_bytes ? size - max_bytes : 0;
  tail.whole = offset == 0;
  if (!ReadAt(*fd, offset, max_bytes, &tail.text, "read " + path).ok()) tail.text.clear();
  ::close(*fd);
  return tail;
}

}  // namespace cohort::agent
