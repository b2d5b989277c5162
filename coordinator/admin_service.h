// AdminService answers the day-2 requests on the client endpoint (issue 16 part 4; DESIGN.md "CLI
// additions"): an admin's cordon, uncordon, drain (and drain --now), label and forget of a node
// (wire::NodeAdmin), the deletion of a finished job with everything stored of it
// (wire::DeleteJob), the cancel of a study (wire::CancelStudy), and an admin's backup of the
// state database now (wire::BackupState: answered when it has ended, BackupsEnded). Like
// ClientService it translates between the wire and the managers and queues every answer in the
// Outbox (sent after the pass commits); the records the changes make (a node's setting, a deleted
// job's rows, the study's cancel) go to the StateStore in that same commit.
//
//   cordon     nothing new is placed on the node; what runs there keeps running.
//   drain      a cordon; the replicas running there finish (the node shows DRAINING, then DRAINED).
//   drain-now  a cordon, and every job with a replica holding resources there is preempted through
//              JobController::PreemptJob: its replicas stop (SIGTERM, grace, checkpoint), it goes
//              back to the queue and resumes elsewhere from its newest checkpoint, no restart
//              spent.
//   uncordon   clears a cordon or drain.
//   With NodeAdmin.gpus, cordon, drain and drain-now act on those GPUs of the node alone: they are
//   cordoned (NodeRegistry::CordonGpus; a GPU has no DRAINING/DRAINED state of its own), drain
//   names the jobs that finish there, drain-now preempts the jobs with a replica pinned to one of
//   them. uncordon with gpus uncordons those GPUs.
//   label      edits the node's labels over its agent's (NodeRegistry::EditLabels), label-reset
//              drops the earlier edits first.
//   forget     a LOST node leaves the registry (refused for a node heard from).
// Job retention (DeleteExpired) deletes finished jobs that ended longer ago than the retention.
//
// Permissions (coordinator/permissions.h): every request passes Authorize, the one place they are
// checked, with what it acts on (AdminTarget). A job's deletion and a study's cancel: its owner or
// an admin. A node: an admin; on a cluster with no admins configured, every admitted client (one
// team sharing a cluster; the coordinator says so at start).
//
// Thread safety: none; the coordinator loop calls it. Lifetime: everything it is given must
// outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "common/messaging.h"
#include "coordinator/client_service.h"
#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/outbox.h"
#include "coordinator/permissions.h"
#include "coordinator/state_backups.h"
#include "coordinator/study_controller.h"

namespace cohort::coordinator {

// What a request acts on: a job (delete), a study (cancel), or neither (a node: admins only),
// and the action in words for a refusal ("delete job x", "drain node n1").
struct AdminTarget {
  const JobRecord* job = nullptr;
  const wire::StudyInfoT* study = nullptr;
  std::string action;
};

class AdminService {
 public:
  // `clients` gives the wire view of nodes; `run_studies` submits and cancels the jobs the
  // studies ask for (after a study is cancelled).
  AdminService(JobController& jobs, NodeRegistry& nodes, StudyController& studies,
               const ClientService& clients, Outbox& outbox, Permissions permissions,
               std::function<void()> run_studies)
      : jobs_(jobs),
        nodes_(nodes),
        studies_(studies),
        clients_(clients),
        outbox_(outbox),
        permissions_(std::move(permissions)),
        run_studies_(std::move(run_studies)) {}

  // Answers `m` when it is one of this service's requests and returns true; false otherwise.
  bool Handle(const RoutedMessage& m, int64_t now_ms);

  // The state backups `cohort backup` asks for (wire::BackupState); none set: refused.
  void SetStateBackups(StateBackups* backups) { backups_ = backups; }
  // Answers everyone who asked for a backup with the first of `ended` that began after they asked.
  void BackupsEnded(const std::vector<StateBackupResult>& ended);

  // Deletes every finished job (replicas all stopped) that ended more than `retention_ms` before
  // `now_ms`; returns how many.
  size_t DeleteExpired(int64_t now_ms, int64_t retention_ms);
  // DeleteExpired, at most every quarter of `retention_ms` (at least every second, at most every
  // minute); nothing when `retention_ms` <= 0 (keep forever). Called from the loop's timers.
  void ApplyRetention(int64_t now_ms, int64_t retention_ms);

 private:
  void OnNodeAdmin(const RoutedMessage& m, const wire::NodeAdmin& req, int64_t now_ms);
  void OnDeleteJob(const RoutedMessage& m, const wire::DeleteJob& req);
  void OnCancelStudy(const RoutedMessage& m, const wire::CancelStudy& req, int64_t now_ms);
  void OnBackupState(const RoutedMessage& m);
  // The jobs with a replica holding resources on `node_id` (on one of `gpus`, when some are
  // named) that no stop was asked of yet.
  std::vector<JobRecord*> JobsHoldingOn(const std::string& node_id,
                                        const std::set<int>& gpus) const;
  // Preempts every job JobsHoldingOn names; their names.
  std::vector<std::string> PreemptJobsOn(const std::string& node_id, const std::set<int>& gpus,
                                         int64_t now_ms);
  // Whether the sender of `m` may act on `target`: Ok, or PERMISSION_DENIED naming who may.
  Status Authorize(const RoutedMessage& m, const AdminTarget& target) const;
  void Reply(const RoutedMessage& m, zmq::message_t frame) {
    outbox_.ToClient(m.peer, std::move(frame));
  }

  JobController& jobs_;
  NodeRegistry& nodes_;
  StudyController& studies_;
  const ClientService& clients_;
  Outbox& outbox_;
  Permissions permissions_;
  std::function<void()> run_studies_;
  int64_t last_retention_ms_ = 0;
  StateBackups* backups_ = nullptr;
  // Who waits for a backup (BackupState), and StateBackups::begun() when they asked.
  struct BackupWaiter {
    std::string peer;
    uint64_t request_id = 0;
    uint64_t begun_before = 0;
  };
  std::vector<BackupWaiter> backup_waiters_;
};

}  // namespace cohort::coordinator
