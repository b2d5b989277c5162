// ClientService answers the launchers' requests on the client endpoint (the CLI, the C++ and
// Python clients): submit, get, list, cancel and update jobs, list nodes, read logs, submit and
// read studies, run a command beside a running replica (`cohort exec`, answered through the
// ExecRelay once it has ended) and have replicas' stacks taken (`cohort stacks`). It translates
// between the wire and the JobController / NodeRegistry / StudyController and queues every answer
// in the Outbox (sent after the pass commits). A request that cannot be
// served gets an ErrorReply naming why; a job or study spec over `max_spec_bytes` is refused
// (INVALID_ARGUMENT naming the limit) before it is parsed, and a job that could not run even on
// the idle cluster of every node known is refused (FAILED_PRECONDITION naming the pool and the
// resource: coordinator/gang_fit.h). That check waits until `fit_check_from_ms` (nodes known
// before a coordinator restart may still be registering) and passes while no node is known (the
// job waits for nodes). A ListJobs with a filter is a history query: `query_jobs` (the state
// store's ListJobs) selects the jobs in SQL and the reply shows each as it is now. A job naming a
// queue or priority class the coordinator does not have is refused (INVALID_ARGUMENT listing those
// it has). A dry run (SubmitJob.dry_run) makes every check a submit makes, stores nothing, and
// answers what the next scheduling round would do with the job (SubmitJobReply.dry_run: the
// Previewer's PlacementPreview) with the warnings a submit would give; for an array, with each
// task it would let in at once (the first `parallelism`, or all), submitted together
// (SubmitJobReply.task_dry_runs).
//
// Owners and permissions (coordinator/permissions.h): a submitted job or study is owned by its
// caller (CallerOf: the client key's user over CURVE, the claimed user with --insecure); only its
// owner or an admin may cancel a job (PERMISSION_DENIED naming the owner otherwise). Other verbs
// that change a job, a study or a node check through `options.permissions` the same way.
//
// Thread safety: none; the coordinator loop calls it. Lifetime: everything it is given must
// outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/exec_limits.h"
#include "common/messaging.h"
#include "common/spec_limit.h"
#include "coordinator/exec_relay.h"
#include "coordinator/gang_fit.h"
#include "coordinator/job_controller.h"
#include "coordinator/log_store.h"
#include "coordinator/node_registry.h"
#include "coordinator/outbox.h"
#include "coordinator/permissions.h"
#include "coordinator/placement_round.h"
#include "coordinator/queue_config.h"
#include "coordinator/replica_usage.h"
#include "coordinator/state_store.h"
#include "coordinator/study_controller.h"
#include "coordinator/watchdog.h"

namespace cohort::coordinator {

// After a job ends, logs still in flight get this long before a reader is told "complete" even
// without the attempt's end-of-file chunk.
constexpr int64_t kLogGraceMs = 5000;

struct ClientServiceOptions {
  uint64_t max_spec_bytes = kDefaultMaxSpecBytes;
  int port_min = 20000;  // the coordinator's --port-range
  int port_max = 29999;
  int64_t fit_check_from_ms = 0;
  // The queues and priority classes jobs may name (must outlive the service); null: only the
  // built-in ones.
  const QueueConfig* queues = nullptr;
  // Who may cancel what (the coordinator's admins).
  Permissions permissions;
};

class ClientService {
 public:
  using QueryJobs = std::function<StatusOr<std::vector<JobSummary>>(const JobQuery&)>;
  // `run_studies` submits and cancels the jobs the studies ask for (after a study is submitted).
  ClientService(JobController& jobs, const NodeRegistry& nodes, StudyController& studies,
                LogStore& logs, Outbox& outbox, ClientServiceOptions options,
                std::function<void()> run_studies, QueryJobs query_jobs)
      : jobs_(jobs),
        nodes_(nodes),
        studies_(studies),
        logs_(logs),
        outbox_(outbox),
        options_(options),
        run_studies_(std::move(run_studies)),
        query_jobs_(std::move(query_jobs)) {}

  void Handle(const RoutedMessage& m, int64_t now_ms);
  // Where a job's straggler lines come from (none: no lines). Outlives this.
  void SetWatchdog(const Watchdog* watchdog) { watchdog_ = watchdog; }
  // Where what running replicas use comes from (none: no usage shown). Outlives this.
  void SetUsageTracker(const ReplicaUsageTracker* usage) { usage_ = usage; }
  // Where `cohort exec` requests go once checked (none: they are refused). Outlives this.
  void SetExecRelay(ExecRelay* relay) { exec_relay_ = relay; }
  // How `cohort stacks` has an attempt's stacks taken: a DumpStacks to the agent of its node, with
  // `reason`; false when that node is not reachable. None: such requests are refused.
  using StackDumper = std::function<bool(const JobRecord& job, const ReplicaRecord& replica,
                                         const std::string& reason)>;
  void SetStackDumper(StackDumper dumper) { dump_stacks_ = std::move(dumper); }
  // What the next scheduling round would do with draft jobs, one preview each (PreviewPlacement,
  // with the coordinator's scheduler and options): how a dry run (SubmitJob.dry_run) is answered.
  // None: dry runs are refused.
  using Previewer =
      std::function<std::vector<PlacementPreview>(std::vector<JobRecord>& drafts, int64_t now_ms)>;
  void SetPreviewer(Previewer preview) { preview_ = std::move(preview); }

  // The wire view of a job (a queued one's message says why it waits) and of every node (with
  // what its live replicas use), or of those whose labels match `selector`.
  static wire::JobInfoT ToInfo(const JobRecord& job);
  wire::NodeListT Nodes(int64_t now_ms, const NodeSelector* selector = nullptr) const;
  // Every queue: quota, weight, use, running and waiting jobs.
  wire::QueueListT Queues();

 private:
  void OnSubmit(const RoutedMessage& m, const wire::SubmitJob& req, int64_t now_ms);
  void OnListJobs(const RoutedMessage& m, const wire::ListJobs& req, int64_t now_ms);
  // ToInfo(job), with what its running replicas use (GetJob and ListJobs answer this).
  wire::JobInfoT ToInfoWithUsage(const JobRecord& job, int64_t now_ms) const;
  // The job `name` when the caller may `verb` it (its owner or an admin); else nullptr, having
  // replied NOT_FOUND or PERMISSION_DENIED.
  JobRecord* OwnedJob(const RoutedMessage& m, const std::string& name, const std::string& verb);
  void OnCancel(const RoutedMessage& m, const wire::CancelJob& req, int64_t now_ms);
  // The tasks of a job array (JobSpec::IsArray, its name set and checked free, as each of its
  // tasks' names): submitted all at once, each a job of its own (coordinator/job_controller.h,
  // "Arrays"); or with `dry_run`, the forecast of the tasks it would let in at once.
  // `defaulted`: what its queue's defaults gave it (ApplyResourceDefaults), for each task's events.
  void SubmitArray(const RoutedMessage& m, JobSpec array, bool dry_run,
                   const std::vector<std::string>& defaulted, wire::SubmitJobReplyT reply,
                   int64_t now_ms);
  // `cohort status ARRAY` (wire::GetArray): its summary and tasks.
  void OnGetArray(const RoutedMessage& m, const wire::GetArray& req, int64_t now_ms);
  // The tasks of array `name`, by index, when the caller may `verb` ("cancel") every one; else
  // nullopt, the client answered (NOT_FOUND, PERMISSION_DENIED naming the task).
  std::optional<std::vector<JobRecord*>> OwnedArrayTasks(const RoutedMessage& m,
                                                         const std::string& name,
                                                         const std::string& verb);
  // Answers with `tasks` as they are now (wire::JobList).
  void ReplyTasks(const RoutedMessage& m, const std::vector<JobRecord*>& tasks);
  // `cohort cancel|suspend|resume|update ARRAY` (wire::CancelArray, SuspendArray, UpdateArray):
  // every task not ended, when the caller may change each (OwnedArrayTasks).
  void OnCancelArray(const RoutedMessage& m, const wire::CancelArray& req, int64_t now_ms);
  void OnSuspendArray(const RoutedMessage& m, const wire::SuspendArray& req, int64_t now_ms);
  void OnUpdateArray(const RoutedMessage& m, const wire::UpdateArray& req, int64_t now_ms);
  // Suspend or resume (wire::SuspendJob): the owner's or an admin's, as a cancel is.
  void OnSuspend(const RoutedMessage& m, const wire::SuspendJob& req, int64_t now_ms);
  // `cohort update` (wire::UpdateJob): the owner's or an admin's, as a cancel is; the class and
  // queue must be the coordinator's (CheckUpdate).
  void OnUpdate(const RoutedMessage& m, const wire::UpdateJob& req, int64_t now_ms);
  // INVALID_ARGUMENT unless `asked` names a priority class or a queue, each the coordinator's.
  Status CheckUpdate(const SchedulingSpec& asked) const;
  void OnGetLogs(const RoutedMessage& m, const wire::GetLogs& req, int64_t now_ms);
  // `cohort exec` (wire::ExecInReplica): the owner's or an admin's, in a RUNNING replica; noted
  // in the job's events and forwarded through the ExecRelay.
  void OnExec(const RoutedMessage& m, const wire::ExecInReplica& req, int64_t now_ms);
  void OnExecSession(const RoutedMessage& m, const wire::ExecSessionIo& req, int64_t now_ms);
  // The running replica of `job` an exec names ("": chief-0, else the job's first), the job's
  // owner's or an admin's; null when refused (the client is answered). Notes `what` (the
  // command, for its first step) in the job's events.
  const ReplicaRecord* ExecTarget(const RoutedMessage& m, const std::string& job,
                                  std::string& replica, const std::vector<std::string>& argv,
                                  const std::string& how, int64_t now_ms);
  // `cohort stacks` (wire::DumpStacks from a client): the owner's or an admin's; the stacks of
  // the job's running replicas (or the one named) are taken now, as the watchdog has them taken;
  // noted in the job's events. Reply: the job.
  void OnDumpStacks(const RoutedMessage& m, const wire::DumpStacks& req, int64_t now_ms);
  void OnSubmitStudy(const RoutedMessage& m, const wire::SubmitStudy& req, int64_t now_ms);
  // INVALID_ARGUMENT when the queue or priority class is not the coordinator's.
  Status CheckQueue(const SchedulingSpec& scheduling) const;
  const QueueConfig& queue_config() const {
    return options_.queues ? *options_.queues : builtin_queues_;
  }
  void Reply(const RoutedMessage& m, zmq::message_t frame) {
    outbox_.ToClient(m.peer, std::move(frame));
  }

  JobController& jobs_;
  const NodeRegistry& nodes_;
  StudyController& studies_;
  LogStore& logs_;
  Outbox& outbox_;
  ClientServiceOptions options_;
  const QueueConfig builtin_queues_;  // where options_.queues is null
  IdleClusterCheck idle_cluster_;
  std::function<void()> run_studies_;
  QueryJobs query_jobs_;
  const Watchdog* watchdog_ = nullptr;
  ExecRelay* exec_relay_ = nullptr;
  const ReplicaUsageTracker* usage_ = nullptr;
  StackDumper dump_stacks_;
  Previewer preview_;
};

}  // namespace cohort::coordinator
