// What a job notice holds (coordinator/notifier.h: POSTed to --notify-url once what it tells is
// stored). Each is one JSON object, whose "kind" says which:
//   job_ended:   job, state (SUCCEEDED, FAILED, CANCELLED), message (why it ended), user, queue,
//                labels, restarts, create_time_ms, start_time_ms (0: never placed), end_time_ms,
//                output_dir; array and array_index for a task of an array; study and trial_id
//                for a trial's job.
//   job_started: (--notify-on start) the job's replicas all ran for the first time: job, user,
//                queue, labels, create_time_ms, start_time_ms, waited_ms (submit to now).
//   job_restarted: (--notify-on restart) a restart spent: job, user, queue, labels, restarts,
//                max_restarts, event (the incident as `cohort status` lists it when it opened).
//   array_started: (--notify-on start) the array's first task ran: the array as `cohort arrays
//                --json` has it then, its user, and waited_ms (its first task's submit to now).
//   array_ended: the array as `cohort arrays --json` has it (coordinator/job_array.h: its state
//                is its end), and its user; sent when its last task ends, after that task's.
//   node_event:  (--notify-on nodes) something happened to a node (NodeEvent, state.h: LOST,
//                back, a health check or GPU failing or passing, an agent shutting down, an
//                admin's cordon, drain, uncordon or label edit): node, seq, time_ms, event.
//   study_ended: the study as `cohort trials --json` has it, but its trials counted
//                (trials_total) rather than listed, with the best one as "best" ({id, parameters,
//                final_metric}; null when no trial reported the metric), and its user.
// A task of an array and a trial's job are told as jobs only with --notify-on tasks
// (coordinator/coordinator.cc, QueueNotices); else only as part of their array or study.
// Each carries "text": one line a person reads, as a chat webhook (Slack, Mattermost) shows it:
//   "job train FAILED after 1h02m, 2 restarts: worker-1 attempt 2 exited with code 1 ..."
//
// Thread safety: pure functions of the records given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/schema/cohort_generated.h"
#include "coordinator/state.h"

namespace cohort::coordinator {

// `job` has ended (JobRecord::finished).
std::string JobEndedNotice(const JobRecord& job);
// `job`'s replicas all run, the first time, at `now_ms`.
std::string JobStartedNotice(const JobRecord& job, int64_t now_ms);
// `job` spent a restart; `event`: its incident's event.
std::string JobRestartedNotice(const JobRecord& job, const std::string& event);
// The first task of the array `name` to run, `first`, runs at `now_ms`; `tasks`: all of them.
std::string ArrayStartedNotice(const std::string& name, const std::vector<const JobRecord*>& tasks,
                               const JobRecord& first, int64_t now_ms);
// Every task of the array `name` (not empty) has ended.
std::string ArrayEndedNotice(const std::string& name, const std::vector<const JobRecord*>& tasks);
// The study `study` (StudyController::Info) has ended.
std::string StudyEndedNotice(const wire::StudyInfoT& study);
// `event` happened to node `node_id`.
std::string NodeEventNotice(const std::string& node_id, const NodeEvent& event);

}  // namespace cohort::coordinator
