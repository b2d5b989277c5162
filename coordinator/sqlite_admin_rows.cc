// SqliteStateStore's node_admin table and the deletion of a job's rows
// (coordinator/sqlite_state_store.h).
#include <spdlog/spdlog.h>
#include <zlib.h>

#include "coordinator/sqlite_state_store.h"

namespace cohort::coordinator {
namespace {

// CRC-32 of the row's columns, each framed with its length.
uint32_t NodeAdminRowCrc(const std::string& node_id, const std::string& state) {
  uLong crc = crc32(0, nullptr, 0);
  for (std::string_view s : {std::string_view(node_id), std::string_view(state)}) {
    uint64_t n = s.size();
    crc = crc32(crc, reinterpret_cast<const Bytef*>(&n), sizeof n);
    crc = crc32_z(crc, reinterpret_cast<const Bytef*>(s.data()), s.size());
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace

Status SqliteStateStore::WriteNodeAdmin(const std::string& node_id, NodeAdmin admin) {
  if (admin == NodeAdmin::kNone) {
    COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                            db_->Prepare("DELETE FROM node_admin WHERE node_id = ?1"));
    return st.RunWith(node_id);
  }
  const std::string state(NodeAdminName(admin));
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement st,
      db_->Prepare(
          "INSERT OR REPLACE INTO node_admin (node_id, state, row_crc) VALUES (?1, ?2, ?3)"));
  return st.RunWith(node_id, state, static_cast<int64_t>(NodeAdminRowCrc(node_id, state)));
}

StatusOr<std::map<std::string, NodeAdmin>> SqliteStateStore::ReadNodeAdmin() {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                          db_->Prepare("SELECT node_id, state, row_crc FROM node_admin"));
  std::map<std::string, NodeAdmin> out;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    std::string node_id = st.Text(0);
    std::string state = st.Text(1);
    auto admin = ParseNodeAdmin(state);
    if (static_cast<uint32_t>(st.Int(2)) != NodeAdminRowCrc(node_id, state) || !admin.ok()) {
      // A lost cordon never stops a start; the admin sees the node READY and can cordon again.
      spdlog::error("state store: the admin setting of node {} in {} does not verify; dropped",
                    node_id, path_);
      continue;
    }
    out[node_id] = *admin;
  }
  return out;
}

Status SqliteStateStore::DeleteJobRows(const std::string& job) {
  for (const char* sql :
       {"DELETE FROM jobs WHERE name = ?1", "DELETE FROM job_specs WHERE job = ?1",
        "DELETE FROM replicas WHERE job = ?1", "DELETE FROM events WHERE job = ?1",
        "DELETE FROM job_metrics WHERE job = ?1"}) {
    COHORT_ASSIGN_OR_RETURN(SqliteStatement st, db_->Prepare(sql));
    COHORT_RETURN_IF_ERROR(st.RunWith(job));
  }
  return Status::Ok();
}

}  // namespace cohort::coordinator
