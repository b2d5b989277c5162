// JSON views of the wire's object-API types, one form for every reader: the `cohort` CLI's
// --json output (cli/), the coordinator's dashboard API (/api/studies, coordinator/
// snapshot_publisher.cc) and the Python client's dicts (python/cohort/client.py) share these keys.
//
// Contract: states are their names ("RUNNING"), times are ms since the epoch, a study trial's
// parameters are an object {id: value}, and its final_metric is null until it has one; a
// replica's usage is null when none is known (it is not running, its agent has not said yet).
#pragma once

#include <nlohmann/json.hpp>

#include "common/schema/cohort_generated.h"

namespace cohort {

nlohmann::json JobToJson(const wire::JobInfoT& job);
nlohmann::json NodeToJson(const wire::NodeInfoT& node);
nlohmann::json QueueToJson(const wire::QueueInfoT& queue);
nlohmann::json StudyToJson(const wire::StudyInfoT& study);
// by_state as an object: {"SUCCEEDED": 3, "RUNNING": 2}.
nlohmann::json ArrayToJson(const wire::ArrayInfoT& array);
nlohmann::json JobMetricsToJson(const wire::JobMetricsT& metrics);
// A row by user and queue: {user, queue, jobs, failed, gpu_hours, cpu_hours}; one by a label's
// value (GetUsage.by_label): {label (null for the unlabelled row), jobs, failed, ...}.
nlohmann::json UsageRowToJson(const wire::UsageRowT& row, bool by_label);
// A submit's reply; a dry run's (`cohort submit --dry-run --json`) with its plan, the outcome by
// name ("START"), else "dry_run": null.
nlohmann::json SubmitReplyToJson(const wire::SubmitJobReplyT& reply);
nlohmann::json ReplicaUsageToJson(const wire::ReplicaUsageT* usage);  // null: JSON null
nlohmann::json NodeUsageToJson(const wire::NodeUsageT* usage);        // null: JSON null

}  // namespace cohort
