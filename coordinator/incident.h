// Incident is one retryable failure of a job and everything it took down with it (see
// JobController, "Failure attribution"): the cause (a lost node, a preemption, a killed rank), the
// attempt of every replica when it opened (a replica still on that attempt that fails while the
// incident is open is collateral), and the consequences seen so far. It renders the job event
// that names them all, rewritten in place as consequences arrive:
//   restart 1/3: the whole job (restart_job_on_worker_restart) because node b lost (worker-0):
//   no heartbeat for 10s (timeout 10s); chief-0, worker-1 exited with code 1 as a consequence
//
// Thread safety: none; a value owned by the JobController.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/state.h"

namespace cohort::coordinator {

class Incident {
 public:
  // The `restart` of an incident that spends none (a launch that never reached its node, see
  // JobController "Launches into silence"): its event opens "relaunch (no restart spent): ".
  static constexpr int kNoneSpent = 0;

  Incident() = default;
  // `cause` ended retryably at `now_ms` and the job spends restart `restart` of `budget`; or it
  // ended on a node whose health check fails, as `node_fault` says ("node b, which fails its
  // health check: ...").
  Incident(const JobRecord& job, const ReplicaRecord& cause, int restart, int budget,
           int64_t now_ms, const std::string& node_fault = "");
  // The whole job restarts because of `cause`, which no replica's end describes (a hang: "of a
  // hang (worker-2 stuck)").
  Incident(const JobRecord& job, std::string cause, int restart, int budget, int64_t now_ms);

  // The replica's attempt is the one it ran when the incident opened.
  bool SameAttempt(const std::string& replica, int attempt) const;
  // Open: its latest failure was at most `window_ms` before `time_ms`.
  bool OpenAt(int64_t time_ms, int64_t window_ms) const { return time_ms - last_ms_ <= window_ms; }
  // Whether it restarts the whole job (JobSpec::RestartsWholeJob), save that where the job's
  // shape decides (restart_job_on_worker_restart unset) an evaluator, no rank of the group, falls
  // alone.
  bool whole_job() const { return whole_job_; }
  // `r`, falling with an incident that restarts its cause alone, is a rank of the job's one group
  // (the cause an evaluator): the incident must take the whole job (TakeTheWholeJob).
  bool TakesTheWholeJob(const JobRecord& job, const ReplicaRecord& r) const;
  void TakeTheWholeJob() { whole_job_ = true; }
  // The event's time and its first words ("restart 1/3: ", or "relaunch (no restart spent): "),
  // to find it among the job's events.
  int64_t event_time_ms() const { return event_time_ms_; }
  const std::string& event_prefix() const { return event_prefix_; }
  // True when `r` went down with the node whose loss caused the incident.
  bool WentWithCauseNode(const ReplicaRecord& r) const;

  // `r` (collateral) fell at `now_ms`; `restarts`: it restarts on its own as attempt+1 (not a
  // whole-job restart).
  void AddConsequence(const ReplicaRecord& r, bool restarts, int64_t now_ms);
  std::string Event() const;

  // "exited with code 1", "was killed by signal 9": how a replica ended, without its message.
  static std::string HowItEnded(const ReplicaRecord& r);
  // (replica, how it ended) pairs, those that ended the same way named together in the order
  // they came: "chief-0, worker-1 exited with code 1, worker-2 was killed by signal 9 (SIGKILL)".
  static std::string NameByHowTheyEnded(
      const std::vector<std::pair<std::string, std::string>>& ends);

 private:
  int64_t last_ms_ = 0;
  std::map<std::string, int> attempts_;  // replica -> attempt when it opened
  std::string cause_;                    // "worker-1 attempt 0 was preempted", or the node's why
  std::string cause_node_;               // set when the cause is a lost node
  std::vector<std::string> lost_with_cause_;
  std::vector<std::pair<std::string, std::string>> consequences_;  // (replica, how it ended)
  std::vector<std::string> restarted_;  // per-replica restarts: "worker-0 as attempt 1"
  bool whole_job_ = false;
  // Why the job's restart policy restarts what it does (JobSpec::RestartReason); empty where
  // the whole job restarts for another cause (a hang).
  std::string restart_reason_;
  std::string event_prefix_;
  int64_t event_time_ms_ = 0;
};

}  // namespace cohort::coordinator
