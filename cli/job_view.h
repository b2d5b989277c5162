// Live views of one job for the `cohort` CLI: `watch JOB` and `submit --wait` (WatchJob), and
// `logs JOB` over one replica or all of them (ShowLogs). Internal to cli/.
//
// WatchJob polls the coordinator (GetJob every `poll`, the followed replicas' logs as they
// grow) until the job ends, and shows: the elapsed time since submission, the job's state and
// why (a queued job's message says what it waits for), each replica's state, node and attempt,
// every event as it happens (placements, restarts and their causes, the end), and the followed
// replicas' output lines, each prefixed "[replica] ". On a terminal (`redraw`) the status block
// is redrawn in place under the lines printed so far (ANSI cursor movement); otherwise each
// change is one line, "[mm:ss] ...". The coordinator going away for a while (a restart) is
// ridden out for `unreachable_limit`. It returns the exit code: 0 when the job SUCCEEDED, 1 when
// it FAILED or was CANCELLED, or the code of the error that stopped it.
//
// Log lines are shown whole: a line still being written is held until its newline arrives (or
// the replica's log is complete). The coordinator keeps when each chunk of output reached it;
// `logs --timestamps` shows a line's time as that of the chunk holding its first byte, and
// `logs --since` filters on it.
//
// Thread safety: none; one call at a time.
#pragma once

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "common/client.h"

namespace cohort::cli {

struct WatchOptions {
  // Whose output to follow: these replicas ("chief-0"), or every replica with `all`.
  std::vector<std::string> replicas = {"chief-0"};
  bool all = false;
  bool redraw = false;  // `out` is a terminal
  size_t columns = 0;   // its width: the status block's lines are cut to it; 0: unknown
  std::chrono::milliseconds poll{500};
  std::chrono::milliseconds unreachable_limit{30000};
};

// "job NAME: STATE (its message)": what watch prints as a job's state changes, and suspend,
// resume and update print.
std::string StateLine(const wire::JobInfoT& job);

int WatchJob(CoordinatorClient& client, const std::string& job, const WatchOptions& options,
             std::ostream& out, std::ostream& err);

struct LogsOptions {
  std::vector<std::string> replicas = {"chief-0"};  // ignored with `all`
  bool all = false;         // every replica; each line prefixed "[replica] "
  int attempt = -1;         // -1: every attempt, each after a header line
  int tail = -1;            // >= 0: only the last `tail` lines of each replica (before following)
  bool follow = false;      // keep printing new output until every replica has finished
  int64_t since_ms = -1;    // >= 0: only lines that reached the coordinator at or after this
  bool timestamps = false;  // each line after its arrival time, UTC ("2026-11-25T03:20:01.123Z")
  std::chrono::milliseconds poll{500};
  std::chrono::milliseconds unreachable_limit{30000};
};

// `cohort logs`: prints the replicas' output on `out`; while the job has not started, says so on
// `err`. Returns the exit code (0 whenever the coordinator answered).
int ShowLogs(CoordinatorClient& client, const std::string& job, const LogsOptions& options,
             std::ostream& out, std::ostream& err);

}  // namespace cohort::cli
