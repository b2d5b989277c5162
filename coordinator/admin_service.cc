#include "coordinator/admin_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <vector>

#include "common/text_join.h"
#include "common/wire_string.h"

namespace cohort::coordinator {

Status AdminService::Authorize(const RoutedMessage& m, const AdminTarget& target) const {
  const std::string caller = CallerOf(m);
  if (target.job != nullptr) {
    return permissions_.CheckOwnerOrAdmin(caller, target.job->owner, target.action);
  }
  if (target.study != nullptr) {
    return permissions_.CheckOwnerOrAdmin(caller, target.study->owner, target.action);
  }
  if (permissions_.admins().empty()) return Status::Ok();
  return permissions_.CheckAdmin(caller, target.action);
}

void AdminService::ApplyRetention(int64_t now_ms, int64_t retention_ms) {
  // Checked every quarter of the retention, at least every second and at most every minute.
  if (retention_ms <= 0 ||
      now_ms - last_retention_ms_ < std::clamp<int64_t>(retention_ms / 4, 1000, 60'000)) {
    return;
  }
  last_retention_ms_ = now_ms;
  DeleteExpired(now_ms, retention_ms);
}

bool AdminService::Handle(const RoutedMessage& m, int64_t now_ms) {
  const Message& msg = m.message;
  switch (msg.type()) {
    case wire::Body::NodeAdmin:
      OnNodeAdmin(m, *msg.As<wire::NodeAdmin>(), now_ms);
      return true;
    case wire::Body::DeleteJob:
      OnDeleteJob(m, *msg.As<wire::DeleteJob>());
      return true;
    case wire::Body::CancelStudy:
      OnCancelStudy(m, *msg.As<wire::CancelStudy>(), now_ms);
      return true;
    case wire::Body::BackupState:
      OnBackupState(m);
      return true;
    default:
      return false;
  }
}

void AdminService::OnBackupState(const RoutedMessage& m) {
  const uint64_t id = m.message.request_id();
  if (Status allowed = Authorize(m, AdminTarget{nullptr, nullptr, "take a state backup"});
      !allowed.ok()) {
    Reply(m, EncodeError(id, allowed));
    return;
  }
  if (backups_ == nullptr || !backups_->enabled()) {
    Reply(m, EncodeError(id, FailedPrecondition("this coordinator takes no backups: start it with "
                                                "--backup-dir (README \"Backups\")")));
    return;
  }
  backups_->RequestNow();
  backup_waiters_.push_back({m.peer, id, backups_->begun()});
}

void AdminService::BackupsEnded(const std::vector<StateBackupResult>& ended) {
  for (const StateBackupResult& r : ended) {
    std::erase_if(backup_waiters_, [&](const BackupWaiter& w) {
      if (r.number <= w.begun_before) return false;  // under way before the request came
      if (!r.ok) {
        outbox_.ToClient(
            w.peer, EncodeError(w.request_id,
                                Status(StatusCode::kAborted, "the backup failed: " + r.error)));
        return true;
      }
      wire::BackupReplyT reply;
      reply.path = r.path;
      reply.bytes = r.bytes;
      reply.jobs = r.info.jobs;
      reply.studies = r.info.studies;
      reply.duration_ms = r.ended_ms - r.started_ms;
      outbox_.ToClient(w.peer, Encode(w.request_id, std::move(reply)));
      return true;
    });
  }
}

void AdminService::OnNodeAdmin(const RoutedMessage& m, const wire::NodeAdmin& req, int64_t now_ms) {
  const uint64_t id = m.message.request_id();
  const std::string node_id = Str(req.node_id());
  const std::string action = Str(req.action());
  if (Status allowed = Authorize(m, AdminTarget{nullptr, nullptr, action + " node " + node_id});
      !allowed.ok()) {
    Reply(m, EncodeError(id, allowed));
    return;
  }
  if (node_id.empty()) {
    Reply(m, EncodeError(id, InvalidArgument("NodeAdmin.node_id: no node named")));
    return;
  }
  wire::NodeAdminReplyT reply;
  Status done;
  std::set<int> gpus;
  if (req.gpus()) gpus.insert(req.gpus()->begin(), req.gpus()->end());
  const AdminAuthor author{Str(req.reason()), CallerOf(m), now_ms};
  const bool cordons = action == "cordon" || action == "drain" || action == "drain-now";
  if (!author.reason.empty() && !cordons) {
    done = InvalidArgument(
        "NodeAdmin.reason: only cordon, drain and drain-now keep a reason, not " + action);
  } else if (Status reason = CheckCordonReason(author.reason); !reason.ok()) {
    done = InvalidArgument("NodeAdmin.reason: " + reason.message());
  } else if (!gpus.empty() &&
             (action == "forget" || action == "label" || action == "label-reset")) {
    done = InvalidArgument(
        "NodeAdmin.gpus: only cordon, uncordon, drain and drain-now take GPUs, "
        "not " +
        action);
  } else if (!gpus.empty()) {
    done = nodes_.CordonGpus(node_id, gpus, action != "uncordon", author);
    if (done.ok()) {
      const bool one = gpus.size() == 1;
      reply.message = "node " + node_id + " GPU" + (one ? " " : "s ") + FormatGpuSet(gpus) + " " +
                      (action == "uncordon" ? "uncordoned" : "cordoned");
      if (action != "uncordon") {
        reply.message += ": nothing new is placed on " + std::string(one ? "it" : "them");
      }
      if (action == "drain") {
        std::vector<std::string> running;
        for (const JobRecord* job : JobsHoldingOn(node_id, gpus)) running.push_back(job->name);
        reply.message += running.empty() ? "; nothing runs there"
                                         : "; what runs there finishes: " + JoinWithCommas(running);
      }
      if (action == "drain-now") {
        std::vector<std::string> moved = PreemptJobsOn(node_id, gpus, now_ms);
        reply.message += moved.empty() ? "; nothing runs there"
                                       : "; preempted to move elsewhere: " + JoinWithCommas(moved);
        if (!moved.empty()) {
          nodes_.AddAdminEvent(node_id, now_ms,
                               "drain --now preempted the jobs on GPUs " + FormatGpuSet(gpus) +
                                   ": " + JoinWithCommas(moved));
        }
      }
    }
  } else if (action == "forget") {
    done = nodes_.Forget(node_id);
    if (done.ok()) reply.message = "node " + node_id + " forgotten";
  } else if (action == "cordon" || action == "uncordon" || action == "drain" ||
             action == "drain-now") {
    NodeAdmin admin = action == "cordon"     ? NodeAdmin::kCordoned
                      : action == "uncordon" ? NodeAdmin::kNone
                                             : NodeAdmin::kDraining;
    done = nodes_.SetAdmin(node_id, admin, author);
    if (done.ok()) {
      reply.message = "node " + node_id + " " + (action == "uncordon" ? "uncordoned" : "cordoned");
      if (action == "drain") reply.message += ": its running replicas finish there";
      if (action == "drain-now") {
        std::vector<std::string> moved = PreemptJobsOn(node_id, {}, now_ms);
        reply.message += moved.empty() ? ": nothing runs there"
                                       : ": preempted to move elsewhere: " + JoinWithCommas(moved);
        if (!moved.empty()) {
          nodes_.AddAdminEvent(node_id, now_ms,
                               "drain --now preempted its jobs: " + JoinWithCommas(moved));
        }
      }
    }
  } else if (action == "label" || action == "label-reset") {
    std::vector<std::string> items;
    if (req.labels()) {
      for (const auto* item : *req.labels()) items.push_back(Str(item));
    }
    auto edits = ParseNodeLabelEdits(items);
    done = edits.ok() ? nodes_.EditLabels(node_id, *edits, action == "label-reset", author)
                      : InvalidArgument("NodeAdmin.labels: " + edits.status().message());
    if (done.ok()) {
      const NodeLabelEdits kept = nodes_.SettingsOf(node_id).labels;
      reply.message =
          "node " + node_id + " labels edited: " +
          (kept.empty() ? std::string("none (its agent's labels)") : FormatNodeLabelEdits(kept));
    }
  } else {
    done = InvalidArgument("NodeAdmin.action: '" + action +
                           "' is none of cordon, uncordon, drain, drain-now, forget, label, "
                           "label-reset");
  }
  if (!done.ok()) {
    Reply(m, EncodeError(id, done));
    return;
  }
  spdlog::info("{}", reply.message);
  if (action != "forget") {
    wire::NodeListT list = clients_.Nodes(now_ms);
    for (auto& node : list.nodes) {
      if (node && node->node_id == node_id) reply.node = std::move(node);
    }
  }
  Reply(m, Encode(id, std::move(reply)));
}

std::vector<JobRecord*> AdminService::JobsHoldingOn(const std::string& node_id,
                                                    const std::set<int>& gpus) const {
  std::vector<JobRecord*> holding;
  for (const auto& [seq, job] : jobs_.active()) {
    if (!job->may_hold) continue;  // never placed: nothing of it runs anywhere
    for (const ReplicaRecord& r : job->replicas) {
      if (r.node_id != node_id || !JobController::HoldsResources(r) || r.stop_requested) continue;
      if (gpus.empty() ||
          std::any_of(r.gpus.begin(), r.gpus.end(), [&](int gpu) { return gpus.count(gpu) > 0; })) {
        holding.push_back(job);
        break;
      }
    }
  }
  return holding;
}

std::vector<std::string> AdminService::PreemptJobsOn(const std::string& node_id,
                                                     const std::set<int>& gpus, int64_t now_ms) {
  const std::string why = gpus.empty()
                              ? "node " + node_id + " drained by an admin (drain --now)"
                              : "node " + node_id + " GPU" + (gpus.size() == 1 ? " " : "s ") +
                                    FormatGpuSet(gpus) + " drained by an admin (drain --gpu --now)";
  std::vector<std::string> names;
  for (JobRecord* job : JobsHoldingOn(node_id, gpus)) {
    jobs_.PreemptJob(*job, why, now_ms);
    names.push_back(job->name);
  }
  return names;
}

void AdminService::OnDeleteJob(const RoutedMessage& m, const wire::DeleteJob& req) {
  const uint64_t id = m.message.request_id();
  const std::string name = Str(req.name());
  const JobRecord* job = jobs_.FindJob(name);
  if (job == nullptr) {
    Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")));
    return;
  }
  if (Status allowed = Authorize(m, AdminTarget{job, nullptr, "delete job " + name});
      !allowed.ok()) {
    Reply(m, EncodeError(id, allowed));
    return;
  }
  if (Status deleted = jobs_.Delete(name); !deleted.ok()) {
    Reply(m, EncodeError(id, deleted));
    return;
  }
  spdlog::info("job {} deleted", name);
  Reply(m, Encode(id, wire::AckT{}));
}

void AdminService::OnCancelStudy(const RoutedMessage& m, const wire::CancelStudy& req,
                                 int64_t now_ms) {
  const uint64_t id = m.message.request_id();
  const std::string name = Str(req.name());
  auto info = studies_.Info(name);
  if (!info.ok()) {
    Reply(m, EncodeError(id, info.status()));
    return;
  }
  if (Status allowed = Authorize(m, AdminTarget{nullptr, &*info, "cancel study " + name});
      !allowed.ok()) {
    Reply(m, EncodeError(id, allowed));
    return;
  }
  if (Status cancelled = studies_.Cancel(name, now_ms); !cancelled.ok()) {
    Reply(m, EncodeError(id, cancelled));
    return;
  }
  run_studies_();  // cancels the running trials' jobs
  info = studies_.Info(name);
  Reply(m, info.ok() ? Encode(id, std::move(*info)) : EncodeError(id, info.status()));
}

size_t AdminService::DeleteExpired(int64_t now_ms, int64_t retention_ms) {
  std::vector<std::string> expired;
  for (const auto& [name, job] : jobs_.jobs()) {
    if (job->finished() && job->end_time_ms > 0 && now_ms - job->end_time_ms > retention_ms &&
        !JobController::AnyHolding(*job)) {
      expired.push_back(name);
    }
  }
  for (const std::string& name : expired) {
    if (jobs_.Delete(name).ok()) {
      spdlog::info("job {} deleted: finished more than {} ago (--job-retention)", name,
                   FormatDuration(retention_ms));
    }
  }
  return expired.size();
}

}  // namespace cohort::coordinator
