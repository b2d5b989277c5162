// Watchdog finds the jobs whose ranks are alive and stuck (DESIGN.md "Added in the second round":
// scheduling.hang_timeout, scheduling.progress) and the ranks that are persistently late. It is a
// state machine without sockets or clock of its own, like the JobController: agents' heartbeats
// bring each running replica's progress (Report), the coordinator loop asks for verdicts (Check)
// with the time, and acts on them (stack dumps, then JobController::Hang).
//
// Progress. A report carries ages measured by the agent (since the replica's log last grew, its
// metric file last grew, it last completed a collective operation; from the attempt's start when
// nothing happened yet), so the time of the newest progress of a replica is known to the
// coordinator as `received - age`, however seldom heartbeats come. A job is hung when, by the
// source its spec names, none of its replicas has made progress for hang_timeout:
//  - collective: the ranks (chief and workers) with a flight recorder; progress is a completed
//    operation. A rank that has completed none yet counts from when it entered its first one; one
//    in none is still starting (importing, loading data, meeting its peers) and counts for
//    nothing, so a job none of whose ranks has entered an operation is not judged, however long
//    its start takes. Sequence numbers are per communicator and the same on every rank (SPMD), so
//    the verdict compares them: N is the newest operation some rank waits in. The ranks that have
//    not reached N are stuck, either outside any operation ("worker-2 has not entered allreduce
//    #1843 (64 MiB, reduction-server) for 120 s; chief-0, worker-0, worker-1 are waiting in it") or
//    in an older one that its peers completed ("worker-2 is stuck in allreduce #1842 for 121 s,
//    which its peers completed; ..."). When every rank waits in N, none is behind: every rank (and
//    any reducer or parameter server of the job) is named, since the cause is outside the ranks.
//    When no rank is in an operation, every rank is stuck outside the collectives. A replica of
//    several ranks (torchrun inside it) is named with the rank it reports, its slowest
//    ("worker-0 (rank 3) has not entered ..."). A replica
//    whose ranks have all exited (ranks_exited: their processes ended normally, the replica has
//    not yet: torchrun's monitor interval, a script exporting the model) is finishing: it is left
//    out, and a job all of whose ranks are so is not judged.
//  - metrics / logs: every running replica of the job; the replicas silent for hang_timeout are
//    named ("no replica has written to its log for 30 s (progress: logs): chief-0, worker-0").
//  - gpus: every running replica that holds GPUs; progress is a heartbeat whose samples (NVML, on
//    its agent) have one of its GPUs at kBusyUtilization or more, and the clock of an attempt
//    starts at its first report. A replica whose reports carry no sample of its GPUs (no NVML on
//    its node) counts for nothing; a job none of whose replicas has one cannot be watched, and
//    Check says so once, as for collective ("no replica has used its GPUs for 30 min (progress:
//    gpus; every GPU below 1%): chief-0, worker-0").
// A job is judged only while RUNNING, with every replica of the progress set reporting its
// current attempt and every report fresh (at most max_report_age_ms old); a verdict is given once
// per set of attempts (the restart brings new attempts). A job whose spec says collective but
// none of whose ranks has a recorder cannot be watched: Check says so once (an event), and leaves
// it alone.
//
// The queue's GPU idle limit. A queue may bound how long a job's GPUs sit idle (its
// gpu-idle-limit, coordinator/queue_config.h; WatchdogOptions::gpu_idle_limit_ms), whatever the
// job's own scheduling says: every RUNNING job of the queue holding GPUs is also watched as
// progress: gpus is, with that limit, and its verdict fails the job (HangVerdict::fail_reason)
// rather than acting on its hang_action. The job's own verdict, when it has one, comes first; a
// job none of whose replicas has GPU samples is not watched so, and says nothing.
//
// Where the stuck were. The coordinator sends each verdict's dumps (HangVerdict::dump) and says so
// (StacksAsked); when the agent's dump of one comes back, StacksTaken gives the event that says
// where that replica was, read from the dump by common/stack_where.h ("stacks of worker-2 attempt
// 0 (hang): in backward (torch/autograd/__init__.py:197), from train (train.py:88)"), so that the
// job's events answer "stuck where?" without the dump being opened. A dump asked for is awaited
// kStacksWaitMs (the agent gives up on its tools well before); a dump asked for otherwise
// (`cohort stacks`) gives no event.
//
// Stragglers. Each report lists the operations the rank entered since its previous report, with
// the start time by its node's clock (Unix time: nodes are assumed to agree within a few ms, as
// with NTP). Once every rank has entered operation s, each rank's lateness for s is its start
// minus the earliest start; a rank's window holds its last `straggler_window` latenesses. A rank
// whose median lateness is at least `straggler_min_ms` over at least `straggler_min_samples`
// operations is a straggler: "worker-3 enters collectives 410 ms after the first rank (median of
// the last 200)".
//
// Thread safety: none; the coordinator loop calls it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "coordinator/state.h"

namespace cohort::coordinator {

// One replica attempt's progress as one heartbeat carried it (wire::ReplicaProgress).
struct ProgressReport {
  std::string replica;
  int attempt = 0;
  int64_t log_idle_ms = 0;
  int64_t metric_idle_ms = 0;
  bool has_recorder = false;
  bool ranks_exited = false;  // every rank of it has exited: finishing, never judged stuck
  int rank = -1;  // of its several ranks, the one the operation fields are (-1: it runs one)
  int64_t completed_seq = -1;
  int64_t completed_idle_ms = 0;
  int64_t current_seq = -1;
  std::string current_op;
  std::string current_algorithm;
  int64_t current_bytes = 0;
  int64_t current_ms = 0;
  std::vector<std::pair<int64_t, int64_t>> starts;  // (seq, Unix microseconds)
  // Of its own GPUs: how many the heartbeat has a sample of, and whether one of them was in use
  // (at kBusyUtilization or more).
  int gpus_sampled = 0;
  bool gpus_busy = false;
};

struct WatchdogOptions {
  // A report older than this is not trusted to judge a hang (its node may be late or lost).
  int64_t max_report_age_ms = 5'000;
  size_t straggler_window = 200;
  size_t straggler_min_samples = 20;
  double straggler_min_ms = 100;
  // Operations whose starts are still incomplete, per job, at most (older ones are dropped).
  size_t max_pending_ops = 512;
  // Queue name -> its gpu-idle-limit (see "The queue's GPU idle limit"); queues absent: none.
  std::map<std::string, int64_t> gpu_idle_limit_ms;
};

// A hung job: what to record, whose stacks to dump.
struct HangVerdict {
  std::string job;
  std::string message;             // the event text, starting "hang: "
  std::vector<std::string> stuck;  // the replicas named stuck
  std::vector<std::string> dump;   // the replicas whose stacks to dump (stuck ones first)
  // Not empty: the job fails with this message, whatever its hang_action (a queue's
  // gpu-idle-limit: "its GPUs sat idle for 2h (queue notebooks: gpu-idle-limit=2h)").
  std::string fail_reason;
};

// How late one rank enters collectives (its window's median).
struct Lateness {
  std::string replica;
  double median_ms = 0;
  size_t samples = 0;
};

class Watchdog {
 public:
  // A GPU used at this utilization (percent) or more is progress for progress: gpus (below it a
  // GPU is idle, as ReplicaUsageTracker says).
  static constexpr double kBusyUtilization = 1.0;

  explicit Watchdog(WatchdogOptions options = {}) : options_(std::move(options)) {}

  // A heartbeat received at `now_ms` reported `report` for a replica of `job`.
  void Report(const JobRecord& job, const ProgressReport& report, int64_t now_ms);

  // The jobs found hung now (each at most once per set of attempts), and, in `notes`, events for
  // jobs that cannot be watched (once each). Jobs that are gone or finished are forgotten.
  struct Checked {
    std::vector<HangVerdict> hangs;
    std::vector<std::pair<std::string, std::string>> notes;  // (job, event)
  };
  // `find_job` looks a job up by name (nullptr: gone).
  Checked Check(const std::function<const JobRecord*(const std::string&)>& find_job,
                int64_t now_ms);

  // Straggler lines of `job` ("worker-3 enters collectives 410 ms after the first rank (median of
  // the last 200)"), most late first.
  std::vector<std::string> StragglerLines(const std::string& job) const;
  // Every rank's lateness in `job` (the agents export them), for the ranks with samples.
  std::vector<Lateness> LatenessOf(const std::string& job) const;

  void Forget(const std::string& job) { jobs_.erase(job); }

  // The coordinator sent a verdict's DumpStacks for `replica` attempt `attempt` of `job`.
  void StacksAsked(const std::string& job, const std::string& replica, int attempt, int64_t now_ms);
  // An agent's dump of that attempt came: the event saying where it was, when a verdict asked
  // for it (once), else nullopt.
  std::optional<std::string> StacksTaken(const std::string& job, const std::string& replica,
                                         int attempt, const std::string& text, int64_t now_ms);
  static constexpr int64_t kStacksWaitMs = 5 * 60'000;

 private:
  struct Replica {
    ProgressReport last;
    int64_t received_ms = 0;
    // When a report of this attempt last had one of its GPUs in use, or its first report.
    int64_t gpus_busy_ms = 0;
    std::deque<double> lateness_ms;  // newest last
  };
  struct Job {
    std::map<std::string, Replica> replicas;
    // Starts of operations not yet entered by every rank: seq -> replica -> Unix microseconds.
    std::map<int64_t, std::map<std::string, int64_t>> pending;
    std::string judged;       // the attempts of the last verdict ("chief-0:1,worker-0:1,...")
    std::string judged_idle;  // the same of the last verdict of its queue's GPU idle limit
    bool noted_unwatchable = false;
  };

  std::optional<HangVerdict> JudgeCollective(const JobRecord& record, Job& job,
                                             const std::vector<const ReplicaRecord*>& ranks,
                                             int64_t now_ms, int64_t timeout_ms);
  // The replicas whose progress counts for `source`, each RUNNING with a fresh report of its
  // attempt, into `set`; false when one is not (the job is not judged now). `finishing`: some
  // rank's replica has seen all its ranks exit.
  bool WatchSet(const JobRecord& record, const Job& job, ProgressSource source, int64_t now_ms,
                std::vector<const ReplicaRecord*>* set, bool* finishing) const;
  // By the job's scheduling.hang_timeout and progress (notes: that it cannot be watched).
  std::optional<HangVerdict> JudgeBySpec(const JobRecord& record, Job& job, int64_t now_ms,
                                         std::vector<std::pair<std::string, std::string>>& notes);
  // By its queue's gpu-idle-limit.
  std::optional<HangVerdict> JudgeByQueue(const JobRecord& record, Job& job, int64_t now_ms);
  // metrics, logs or gpus (`watched`, else the job's progress): `rule` names what set the
  // timeout in the message ("progress: logs", "queue q: gpu-idle-limit=2h").
  std::optional<HangVerdict> JudgeOutput(const JobRecord& record, Job& job,
                                         const std::vector<const ReplicaRecord*>& set,
                                         int64_t now_ms, int64_t timeout_ms,
                                         const std::string& rule,
                                         std::optional<ProgressSource> watched = std::nullopt);
  void AddStarts(Job& job, const JobRecord& record, const ProgressReport& report);

  WatchdogOptions options_;
  std::map<std::string, Job> jobs_;
  // The dumps verdicts asked for and not yet taken: (job, replica, attempt) -> when asked. Kept
  // apart from jobs_: a job that hang_action: fail ended is forgotten there before its dumps come.
  std::map<std::tuple<std::string, std::string, int>, int64_t> stacks_asked_;
};

// "64 MiB", "1.5 KiB", "100 B".
std::string FormatBytes(int64_t bytes);

}  // namespace cohort::coordinator
