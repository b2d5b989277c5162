#include "coordinator/sqlite_rows.h"

#include <zlib.h>

#include <chrono>

namespace cohort::coordinator::rows {

uint32_t TextCrc(std::string_view s) {
  return static_cast<uint32_t>(
      crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data()), s.size()));
}

uint32_t JobRowCrc(const JobRecord& j, uint32_t spec_crc) {
  return RowCrc()
      .Add(j.name)
      .Add(static_cast<int64_t>(j.seq))
      .Add(static_cast<int64_t>(j.state))
      .Add(j.message)
      .Add(j.create_time_ms)
      .Add(j.queued_since_ms)
      .Add(j.start_time_ms)
      .Add(j.end_time_ms)
      .Add(j.restarts)
      .Add(j.output_dir)
      .Add(j.trial_id)
      .Add(j.study)
      .Add(j.master_port)
      .Add(j.bootstrap_port)
      .Add(spec_crc)
      .AddIfNotEmpty(j.owner)
      .AddNamedIfNotZero("suspended_ms", j.suspended_ms)
      .AddNamedIfNotZero("first_running_ms", j.first_running_ms)
      .value();
}

std::string GpuList(const std::vector<int>& gpus) {
  std::string out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(gpus[i]);
  }
  return out;
}

uint32_t ReplicaRowCrc(const std::string& job, const ReplicaRecord& r, int ord) {
  return RowCrc()
      .Add(job)
      .Add(r.name)
      .Add(ord)
      .Add(RoleName(r.role))
      .Add(r.index)
      .Add(r.attempt)
      .Add(r.launched ? 1 : 0)
      .Add(static_cast<int64_t>(r.state))
      .Add(r.node_id)
      .Add(r.last_node)
      .Add(GpuList(r.gpus))
      .Add(r.port)
      .Add(r.exit_code)
      .Add(r.signal)
      .Add(r.message)
      .Add(r.stop_requested ? 1 : 0)
      .Add(r.state_time_ms)
      .AddIfNotZero(r.cause_signal)
      .AddNamedIfNotZero("fenced_until_ms", r.fenced_until_ms)
      .AddNamedIfNotZero("idle", r.idle ? 1 : 0)
      .value();
}

uint32_t EventRowCrc(const std::string& job, const JobEventRecord& e) {
  return RowCrc().Add(job).Add(e.time_ms).Add(e.message).value();
}

uint32_t StudyRowCrc(const std::string& name, uint32_t spec_crc, int64_t create_ms, int64_t end_ms,
                     const std::string& owner) {
  return RowCrc().Add(name).Add(spec_crc).Add(create_ms).Add(end_ms).AddIfNotEmpty(owner).value();
}

uint32_t StudyEventRowCrc(const std::string& study, int64_t pos, const std::string& body) {
  return RowCrc().Add(study).Add(pos).Add(body).value();
}

uint32_t TrialRowCrc(const std::string& study, const std::string& trial, const std::string& job,
                     const std::string& parameters, int64_t ended, int64_t succeeded,
                     const std::string& message) {
  return RowCrc()
      .Add(study)
      .Add(trial)
      .Add(job)
      .Add(parameters)
      .Add(ended)
      .Add(succeeded)
      .Add(message)
      .value();
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cohort::coordinator::rows
