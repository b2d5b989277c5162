#include "common/stack_where.h"

#include <cctype>
#include <optional>
#include <vector>

namespace cohort {
namespace {

constexpr std::string_view kProcessHeader = "---- pid ";
constexpr std::string_view kPythonHeader = "-- Python stacks";
constexpr std::string_view kNativeHeader = "-- native stacks";
constexpr size_t kMaxNativeFrames = 3;
constexpr size_t kMaxName = 80;  // bytes of one name, path, line or pid shown

struct Frame {
  std::string file;
  std::string line;
  std::string function;
};

struct Process {
  std::string pid;
  std::vector<std::string_view> python;  // the lines of its Python section
  std::vector<std::string_view> native;  // the lines of its native section
};

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

std::string Clip(std::string_view s) {
  return std::string(s.size() <= kMaxName ? s : s.substr(0, kMaxName - 3)) +
         (s.size() <= kMaxName ? "" : "...");
}

std::vector<Process> SplitProcesses(std::string_view dump) {
  std::vector<Process> processes;
  std::vector<std::string_view>* section = nullptr;
  for (std::string_view line : Lines(dump)) {
    if (StartsWith(line, kProcessHeader)) {
      std::string_view rest = line.substr(kProcessHeader.size());
      processes.push_back({std::string(rest.substr(0, rest.find(':'))), {}, {}});
      section = nullptr;
    } else if (processes.empty()) {
      continue;
    } else if (StartsWith(line, kPythonHeader)) {
      section = &processes.back().python;
    } else if (StartsWith(line, kNativeHeader)) {
      section = &processes.back().native;
    } else if (section != nullptr) {
      section->push_back(line);
    }
  }
  return processes;
}

// `  File "PATH", line N in FUNCTION` (faulthandler's form).
std::optional<Frame> ParsePythonFrame(std::string_view line) {
  constexpr std::string_view kFile = "  File \"";
  if (!StartsWith(line, kFile)) return std::nullopt;
  line.remove_prefix(kFile.size());
  size_t quote = line.find("\", line ");
  if (quote == std::string_view::npos) return std::nullopt;
  Frame frame{std::string(line.substr(0, quote)), "", ""};
  line.remove_prefix(quote + 8);
  size_t in = line.find(" in ");
  if (in == std::string_view::npos) return std::nullopt;
  frame.line = std::string(line.substr(0, in));
  frame.function = std::string(line.substr(in + 4));
  return frame;
}

// Each thread's frames, innermost first, in the order faulthandler wrote the threads.
std::vector<std::vector<Frame>> PythonThreads(const std::vector<std::string_view>& lines) {
  std::vector<std::vector<Frame>> threads;
  for (std::string_view line : lines) {
    if (StartsWith(line, "Thread 0x") || StartsWith(line, "Current thread 0x")) {
      threads.emplace_back();
    } else if (auto frame = ParsePythonFrame(line); frame && !threads.empty()) {
      threads.back().push_back(std::move(*frame));
    }
  }
  std::erase_if(threads, [](const auto& t) { return t.empty(); });
  return threads;
}

const std::vector<Frame>* MainThread(const std::vector<std::vector<Frame>>& threads) {
  for (const auto& thread : threads) {
    if (thread.back().function == "<module>") return &thread;
  }
  return threads.empty() ? nullptr : &threads.front();
}

// Where a library's path starts its package ("/usr/lib/python3/dist-packages/torch/x.py" ->
// "torch/x.py", "/usr/lib/python3.11/threading.py" -> "threading.py"); npos for the user's code.
size_t LibraryStart(const std::string& file) {
  if (StartsWith(file, "<")) return 0;                  // <frozen importlib._bootstrap>, <string>
  constexpr std::string_view kPackages = "-packages/";  // site-packages, dist-packages
  if (size_t at = file.rfind(kPackages); at != std::string::npos) return at + kPackages.size();
  for (size_t at = file.find("/python"); at != std::string::npos;
       at = file.find("/python", at + 1)) {
    // .../lib/python3.11/X or .../lib/python3/X: the interpreter's own library.
    size_t end = file.find('/', at + 1);
    if (at >= 4 && file.compare(at - 4, 4, "/lib") == 0 && end != std::string::npos &&
        std::isdigit(static_cast<unsigned char>(file[at + 7]))) {
      return end + 1;
    }
  }
  // An entry script (/usr/bin/torchrun) is the package's, not the user's.
  const size_t slash = file.rfind('/');
  const std::string_view name = std::string_view(file).substr(slash + 1);
  if (name.size() < 3 || name.substr(name.size() - 3) != ".py") return slash + 1;
  return std::string::npos;
}

bool IsUserCode(const Frame& frame) { return LibraryStart(frame.file) == std::string::npos; }

std::string Describe(const Frame& frame) {
  size_t start = LibraryStart(frame.file);
  if (start == std::string::npos) start = frame.file.rfind('/') + 1;  // npos + 1 = 0
  return Clip(frame.function) + " (" + Clip(std::string_view(frame.file).substr(start)) + ":" +
         Clip(frame.line) + ")";
}

std::string PythonWhere(const std::vector<Frame>& main) {
  std::string where = "in " + Describe(main.front());
  if (!IsUserCode(main.front())) {
    for (const Frame& frame : main) {
      if (IsUserCode(frame)) return where + ", from " + Describe(frame);
    }
  }
  return where;
}

// The named frames of one native thread, innermost first: eu-stack's "#0  0xADDR NAME" or gdb's
// "#0  0xADDR in NAME (ARGS) from LIB" / "#0  NAME (ARGS) at FILE:LINE".
std::vector<std::string> NativeFrameNames(const std::vector<std::string_view>& lines, size_t from,
                                          size_t to) {
  std::vector<std::string> names;
  for (size_t i = from; i < to && names.size() < kMaxNativeFrames; ++i) {
    std::string_view line = lines[i];
    if (!StartsWith(line, "#")) continue;
    size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    line.remove_prefix(space);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (StartsWith(line, "0x")) {
      size_t end = line.find(' ');
      if (end == std::string_view::npos) continue;  // an address without a name
      line.remove_prefix(end + 1);
      if (StartsWith(line, "in ")) line.remove_prefix(3);
    }
    std::string_view name = line.substr(0, line.find_first_of(" @("));
    if (name.empty() || name == "??") continue;
    if (names.empty() || names.back() != name) names.push_back(Clip(name));
  }
  return names;
}

std::string NativeWhere(const Process& process) {
  const auto& lines = process.native;
  // Thread blocks: eu-stack's "TID N:" (the process's own TID is its main thread) or gdb's
  // "Thread N (...)" (highest first, Thread 1 the main one). Without headers, the whole section.
  std::vector<size_t> headers;
  size_t main = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!StartsWith(lines[i], "TID ") && !StartsWith(lines[i], "Thread ")) continue;
    if (lines[i] == "TID " + process.pid + ":" || StartsWith(lines[i], "Thread 1 (")) {
      main = headers.size();
    }
    headers.push_back(i);
  }
  const size_t begin = headers.empty() ? 0 : headers[main] + 1;
  const size_t end = main + 1 < headers.size() ? headers[main + 1] : lines.size();
  std::string where;
  for (const std::string& name : NativeFrameNames(lines, begin, end)) {
    where += (where.empty() ? "in " : " < ") + name;
  }
  return where;
}

}  // namespace

std::string StackWhere(std::string_view dump) {
  std::vector<Process> processes = SplitProcesses(dump);
  const Process* chosen = nullptr;
  const std::vector<Frame>* chosen_main = nullptr;
  std::vector<std::vector<Frame>> chosen_threads;
  for (const Process& process : processes) {
    auto threads = PythonThreads(process.python);
    const std::vector<Frame>* main = MainThread(threads);
    if (main == nullptr) continue;
    bool user = false;
    for (const Frame& frame : *main) user = user || IsUserCode(frame);
    if (chosen == nullptr || user) {
      chosen = &process;
      chosen_threads = std::move(threads);
      chosen_main = MainThread(chosen_threads);
      if (user) break;
    }
  }
  std::string where;
  if (chosen != nullptr) {
    where = PythonWhere(*chosen_main);
  } else {
    for (const Process& process : processes) {
      where = NativeWhere(process);
      if (!where.empty()) {
        chosen = &process;
        break;
      }
    }
  }
  if (where.empty()) return "";
  return chosen == &processes.front() ? where : "pid " + Clip(chosen->pid) + ": " + where;
}

}  // namespace cohort
