#include "cli/job_view.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <sstream>
#include <thread>
#include <utility>

#include "cli/output.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/utf8.h"

namespace cohort::cli {
namespace {

using Clock = std::chrono::steady_clock;

// How long after a job's end its last output may still be on its way (the coordinator calls a
// finished replica's log complete at its end-of-file chunk, or 5 s after the job ended).
constexpr std::chrono::milliseconds kLastOutputWait{7000};

// A line of output and when its first byte reached the coordinator (-1: not known).
struct LogLine {
  std::string text;
  int64_t time_ms = -1;
};

// One replica's output as it grows: the bytes after offset_, cut into whole lines; with
// `with_times`, also when they arrived.
class LogFollower {
 public:
  LogFollower(std::string replica, int attempt, bool with_times = false)
      : replica_(std::move(replica)), attempt_(attempt), with_times_(with_times) {}

  // Reads what is new (until a read comes back empty) into the held bytes.
  Status Poll(CoordinatorClient& client, const std::string& job) {
    for (int reads = 0; reads < 64; ++reads) {
      auto data = client.ReadLogs(job, replica_, offset_, attempt_, 1u << 20, with_times_);
      if (!data.ok()) return data.status();
      for (const auto& mark : data->marks) AddMark(mark.offset(), mark.time_ms());
      held_.append(data->data.begin(), data->data.end());
      offset_ = std::max<uint64_t>(data->next_offset, offset_ + data->data.size());
      complete_ = data->complete;
      if (data->data.empty()) break;
    }
    return Status::Ok();
  }
  // The whole lines held, taken, with their times; with `all`, the unfinished last line too.
  std::vector<LogLine> TakeTimedLines(bool all) {
    std::vector<LogLine> lines;
    const uint64_t held_at = offset_ - held_.size();  // offset of held_[0]
    size_t mark = 0;
    auto time_at = [&](size_t start) {  // lines ascend, so the search goes on from the last one
      while (mark + 1 < marks_.size() && marks_[mark + 1].first <= held_at + start) ++mark;
      return !marks_.empty() && marks_[mark].first <= held_at + start ? marks_[mark].second
                                                                      : int64_t{-1};
    };
    size_t start = 0;
    for (size_t nl = held_.find('\n'); nl != std::string::npos; nl = held_.find('\n', start)) {
      lines.push_back({held_.substr(start, nl - start), time_at(start)});
      start = nl + 1;
    }
    if ((all || complete_) && start < held_.size()) {
      lines.push_back({held_.substr(start), time_at(start)});
      start = held_.size();
    }
    held_.erase(0, start);
    // Keep the mark that covers the first byte still held, and those after it.
    while (marks_.size() > 1 && marks_[1].first <= held_at + start) marks_.pop_front();
    return lines;
  }
  // The whole lines held, taken; with `all`, the unfinished last line too.
  std::vector<std::string> TakeLines(bool all) {
    std::vector<std::string> lines;
    for (auto& line : TakeTimedLines(all)) lines.push_back(std::move(line.text));
    return lines;
  }
  // The bytes held, taken as they are.
  std::string TakeBytes() {
    marks_.clear();
    return std::exchange(held_, std::string());
  }

  const std::string& replica() const { return replica_; }
  bool complete() const { return complete_; }

 private:
  void AddMark(uint64_t offset, int64_t time_ms) {
    if (!marks_.empty() && marks_.back().first >= offset) {
      if (marks_.back().first != offset) return;  // already known (a re-read)
      marks_.pop_back();
    }
    marks_.emplace_back(offset, time_ms);
  }

  std::string replica_;
  int attempt_;
  bool with_times_;
  uint64_t offset_ = 0;
  std::string held_;
  std::deque<std::pair<uint64_t, int64_t>> marks_;  // (offset, arrival ms), ascending
  bool complete_ = false;
};

// "2026-11-25T03:20:01.123Z" (UTC) for `ms`; a "-" as wide for an unknown time (-1).
std::string UtcStamp(int64_t ms) {
  if (ms < 0) return "-                       ";
  char millis[8];
  std::snprintf(millis, sizeof(millis), ".%03dZ", static_cast<int>(ms % 1000));
  return FormatUtc(ms, "%Y-%m-%dT%H:%M:%S") + millis;
}

bool Started(const wire::JobInfoT& job) {
  return job.state != wire::JobState::QUEUED && job.state != wire::JobState::PENDING;
}

// "[mm:ss]" (or "[h:mm:ss]") of `ms`.
std::string Stamp(int64_t ms) {
  int64_t s = std::max<int64_t>(ms, 0) / 1000;
  char buffer[32];
  if (s >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "[%lld:%02lld:%02lld]", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buffer, sizeof(buffer), "[%02lld:%02lld]", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buffer;
}

std::string ReplicaLine(const wire::ReplicaInfoT& r) {
  std::string line = r.replica + ": " + wire::EnumNameReplicaState(r.state);
  if (!r.node_id.empty()) line += " on " + r.node_id;
  line += ", attempt " + std::to_string(r.attempt);
  if (r.exit_code >= 0 && r.state != wire::ReplicaState::RUNNING) {
    line += ", exit code " + ExitCode(r);
  }
  if (!r.message.empty()) line += " (" + r.message + ")";
  return line;
}

// The status block of a terminal view: the job's line, then one line per replica, with what it
// uses while it runs.
std::vector<std::string> StatusBlock(const wire::JobInfoT& job, int64_t now_ms) {
  int64_t end = job.end_time_ms > 0 ? job.end_time_ms : now_ms;
  std::string head = "job " + job.name + "  " + wire::EnumNameJobState(job.state) + "  elapsed " +
                     FormatElapsed(end - job.create_time_ms);
  if (job.start_time_ms > 0) head += "  running " + JobRunTime(job, now_ms);
  head += "  restarts " + std::to_string(job.restarts) + " of " + std::to_string(job.max_restarts);
  std::vector<std::string> block = {head};
  if (!job.message.empty()) block.push_back("  " + job.message);
  Table table({"  REPLICA", "STATE", "NODE", "ATTEMPT", "EXIT", "CPU", "MEMORY", "GPUS"});
  for (const auto& r : job.replicas) {
    if (!r) continue;
    std::vector<std::string> row = {"  " + r->replica, wire::EnumNameReplicaState(r->state),
                                    r->node_id.empty() ? "-" : r->node_id,
                                    std::to_string(r->attempt), ExitCode(*r)};
    for (auto& cell : UsageCells(r->usage.get(), /*compact=*/true)) row.push_back(std::move(cell));
    table.AddRow(std::move(row));
  }
  std::ostringstream rows;
  table.Print(rows);
  std::string line;
  for (std::istringstream in(rows.str()); std::getline(in, line);) block.push_back(line);
  return block;
}

bool Follows(const std::vector<std::string>& replicas, bool all, const std::string& replica) {
  return all || std::find(replicas.begin(), replicas.end(), replica) != replicas.end();
}

}  // namespace

std::string StateLine(const wire::JobInfoT& job) {
  std::string line = "job " + job.name + ": " + wire::EnumNameJobState(job.state);
  if (!job.message.empty()) line += " (" + job.message + ")";
  return line;
}

int WatchJob(CoordinatorClient& client, const std::string& name, const WatchOptions& options,
             std::ostream& out, std::ostream& err) {
  std::map<std::string, LogFollower> followers;
  std::map<std::string, std::string> replica_lines;  // what line mode last said of each
  std::string state_line;
  size_t events_shown = 0;
  size_t block_lines = 0;  // lines of the status block on the screen (redraw)
  auto last_reply = Clock::now();
  std::optional<Clock::time_point> ended_at;

  while (true) {
    auto job = client.GetJob(name);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::kUnavailable &&
          Clock::now() - last_reply < options.unreachable_limit) {
        std::this_thread::sleep_for(options.poll);
        continue;
      }
      err << "cohort: " << job.status().ToString() << "\n";
      return job.status().code() == StatusCode::kUnavailable ? 3 : 2;
    }
    last_reply = Clock::now();
    const int64_t now = NowMs();
    const int64_t since_submit = now - job->create_time_ms;
    std::vector<std::string> lines;  // printed once, above the status block

    if (std::string line = StateLine(*job); line != state_line) {
      lines.push_back(Stamp(since_submit) + " " + line);
      state_line = line;
    }
    for (; events_shown < job->events.size(); ++events_shown) {
      const auto& e = job->events[events_shown];
      if (e) lines.push_back(Stamp(e->time_ms - job->create_time_ms) + " event: " + e->message);
    }
    for (const auto& r : job->replicas) {
      if (!r) continue;
      if (!options.redraw) {
        std::string line = ReplicaLine(*r);
        if (replica_lines[r->replica] != line) {
          lines.push_back(Stamp(since_submit) + " " + line);
          replica_lines[r->replica] = line;
        }
      }
      if (Follows(options.replicas, options.all, r->replica)) {
        followers.try_emplace(r->replica, r->replica, -1);
      }
    }
    const bool ended = IsTerminal(job->state);
    if (ended && !ended_at) ended_at = Clock::now();
    bool logs_done = true;
    if (Started(*job)) {
      for (auto& [replica, follower] : followers) {
        Status polled = follower.Poll(client, name);
        if (!polled.ok() && polled.code() != StatusCode::kUnavailable) {
          lines.push_back("cohort: the log of " + replica + ": " + polled.ToString());
        }
        for (auto& line : follower.TakeLines(false)) {
          lines.push_back("[" + replica + "] " + line);
        }
        logs_done = logs_done && follower.complete();
      }
    }
    // After the end, the last output may still be on its way from the agents.
    const bool done = ended && (logs_done || Clock::now() - *ended_at > kLastOutputWait);
    if (done) {
      for (auto& [replica, follower] : followers) {
        for (auto& line : follower.TakeLines(true)) lines.push_back("[" + replica + "] " + line);
      }
    }

    if (options.redraw) {
      // Back to the first line of the block, clear to the end of the screen, print what
      // happened, and the block again below it.
      if (block_lines > 0) out << "\033[" << block_lines << "F\033[J";
      for (const auto& line : lines) out << line << "\n";
      std::vector<std::string> block = StatusBlock(*job, now);
      // A line wider than the terminal would take two rows, and the next redraw would go back
      // one row too few.
      for (const auto& line : block) {
        out << (options.columns > 1 ? TruncateUtf8(line, options.columns - 1) : line) << "\n";
      }
      block_lines = block.size();
    } else {
      for (const auto& line : lines) out << line << "\n";
    }
    out.flush();
    if (done) return job->state == wire::JobState::SUCCEEDED ? 0 : 1;
    std::this_thread::sleep_for(options.poll);
  }
}

int ShowLogs(CoordinatorClient& client, const std::string& name, const LogsOptions& options,
             std::ostream& out, std::ostream& err) {
  auto job = client.GetJob(name);
  if (!job.ok()) {
    err << "cohort: " << job.status().ToString() << "\n";
    return job.status().code() == StatusCode::kUnavailable ? 3 : 2;
  }
  std::vector<std::string> replicas;
  std::string known;
  for (const auto& r : job->replicas) {
    if (!r) continue;
    known += (known.empty() ? "" : ", ") + r->replica;
    if (options.all) replicas.push_back(r->replica);
  }
  if (!options.all) {
    for (const auto& replica : options.replicas) {
      bool exists = false;
      for (const auto& r : job->replicas) exists = exists || (r && r->replica == replica);
      if (!exists) {
        err << "cohort: job " << name << " has no replica '" << replica << "' (it has " << known
            << ")\n";
        return 2;
      }
      replicas.push_back(replica);
    }
  }
  const bool prefix = options.all || replicas.size() > 1;
  const bool timed = options.timestamps || options.since_ms >= 0;
  const bool raw = !prefix && options.tail < 0 && !timed;
  if (!Started(*job)) {
    err << "cohort: job " << name << " is " << wire::EnumNameJobState(job->state)
        << (job->message.empty() ? "" : " (" + job->message + ")") << "; no output yet"
        << (options.follow ? ", waiting for it to start" : "") << "\n";
  }
  std::vector<LogFollower> followers;
  for (const auto& replica : replicas) followers.emplace_back(replica, options.attempt, timed);

  auto last_reply = Clock::now();
  bool first = true;
  while (true) {
    bool all_complete = true;
    for (auto& follower : followers) {
      Status polled = follower.Poll(client, name);
      if (!polled.ok()) {
        if (options.follow && polled.code() == StatusCode::kUnavailable &&
            Clock::now() - last_reply < options.unreachable_limit) {
          all_complete = false;
          continue;
        }
        err << "cohort: " << polled.ToString() << "\n";
        return polled.code() == StatusCode::kUnavailable ? 3 : 2;
      }
      last_reply = Clock::now();
      all_complete = all_complete && follower.complete();
      if (raw) {
        out << follower.TakeBytes();
        continue;
      }
      // Before following, a line still being written is shown too (as `logs` without
      // --follow always showed what is held).
      std::vector<LogLine> lines = follower.TakeTimedLines(!options.follow || follower.complete());
      if (options.since_ms >= 0) {
        std::erase_if(lines, [&](const LogLine& line) { return line.time_ms < options.since_ms; });
      }
      if (first && options.tail >= 0 && lines.size() > static_cast<size_t>(options.tail)) {
        lines.erase(lines.begin(), lines.end() - options.tail);
      }
      for (const auto& line : lines) {
        if (prefix) out << "[" << follower.replica() << "] ";
        if (options.timestamps) out << UtcStamp(line.time_ms) << " ";
        out << line.text << "\n";
      }
    }
    out.flush();
    first = false;
    if (!options.follow || all_complete) return 0;
    std::this_thread::sleep_for(options.poll);
  }
}

}  // namespace cohort::cli
