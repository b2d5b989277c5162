// Wire views of a study (common/schema/cohort.fbs): the StudyInfo a GetStudy/SubmitStudy reply
// carries, built from a Study, and the metrics of a TrialMeasurement the agent sends, ready for
// Study::AddMeasurement. Object-API types (wire::StudyInfoT) so the coordinator encodes them with
// cohort::Encode like its other replies.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/schema/cohort_generated.h"
#include "common/status.h"
#include "coordinator/tuning/study.h"

namespace cohort::coordinator::tuning {

// create/end times are the controller's (milliseconds since the epoch; 0 = unknown / not ended).
wire::StudyInfoT ToStudyInfo(const Study& study, int64_t create_time_ms = 0,
                             int64_t end_time_ms = 0);
wire::TrialInfoT ToTrialInfo(const Study& study, const Trial& trial);

// tag -> value of a TrialMeasurement; a value that is not a finite number, or a tag that is not
// UTF-8 (the agent read it from JSON; the study's records are JSON), is kInvalidArgument naming
// the tag.
StatusOr<std::map<std::string, double>> MeasurementMetrics(const wire::TrialMeasurement& m);

}  // namespace cohort::coordinator::tuning
