// SqliteStateStore's node_admin table and the deletion of a job's rows
// (coordinator/sqlite_state_store.h).
#include <spdlog/spdlog.h>

#include "coordinator/sqlite_rows.h"
#include "coordinator/sqlite_state_store.h"

namespace cohort::coordinator {
namespace {

// CRC-32 of the row's columns, each framed with its length; labels, gpus and the note only from
// the last of them that is not empty on, so that rows stored before their columns (schemas 9, 10
// and 12) verify unchanged, and no column passes for another.
uint32_t NodeAdminRowCrc(const std::string& node_id, const std::string& state,
                         const std::string& labels, const std::string& gpus,
                         const CordonNote& note) {
  rows::RowCrc crc;
  crc.Add(node_id).Add(state);
  const bool noted = !note.empty();
  if (!labels.empty() || !gpus.empty() || noted) crc.Add(labels);
  if (!gpus.empty() || noted) crc.Add(gpus);
  if (noted) crc.Add(note.reason).Add(note.by).Add(std::to_string(note.since_ms));
  return crc.value();
}

uint32_t NodeEventRowCrc(const std::string& node_id, const NodeEvent& event) {
  return rows::RowCrc().Add(node_id).Add(event.seq).Add(event.time_ms).Add(event.text).value();
}

}  // namespace

Status SqliteStateStore::WriteNodeEvent(const std::string& node_id, const NodeEvent& event) {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement insert,
                          db_->Prepare("INSERT OR REPLACE INTO node_events (node_id, seq, time_ms, "
                                       "text, row_crc) VALUES (?1, ?2, ?3, ?4, ?5)"));
  COHORT_RETURN_IF_ERROR(insert.RunWith(node_id, event.seq, event.time_ms, event.text,
                                        static_cast<int64_t>(NodeEventRowCrc(node_id, event))));
  COHORT_ASSIGN_OR_RETURN(SqliteStatement prune,
                          db_->Prepare("DELETE FROM node_events WHERE node_id = ?1 AND seq <= ?2"));
  return prune.RunWith(node_id, event.seq - static_cast<int64_t>(kNodeEventsKept));
}

Status SqliteStateStore::DeleteNodeEvents(const std::string& node_id) {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                          db_->Prepare("DELETE FROM node_events WHERE node_id = ?1"));
  return st.RunWith(node_id);
}

StatusOr<std::map<std::string, std::vector<NodeEvent>>> SqliteStateStore::ReadNodeEvents() {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                          db_->Prepare("SELECT node_id, seq, time_ms, text, row_crc FROM "
                                       "node_events ORDER BY node_id, seq"));
  std::map<std::string, std::vector<NodeEvent>> out;
  size_t dropped = 0;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    std::string node_id = st.Text(0);
    NodeEvent event{st.Int(1), st.Int(2), st.Text(3)};
    if (static_cast<uint32_t>(st.Int(4)) != NodeEventRowCrc(node_id, event)) {
      ++dropped;  // a node's history is told, never acted on: a damaged line is left out
      continue;
    }
    out[node_id].push_back(std::move(event));
  }
  if (dropped > 0) {
    spdlog::error("state store: {} node events in {} do not verify; left out", dropped, path_);
  }
  return out;
}

Status SqliteStateStore::WriteNodeSettings(const std::string& node_id,
                                           const NodeSettings& settings) {
  if (settings.empty()) {
    COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                            db_->Prepare("DELETE FROM node_admin WHERE node_id = ?1"));
    return st.RunWith(node_id);
  }
  const std::string state(NodeAdminName(settings.admin));
  const std::string labels = FormatNodeLabelEdits(settings.labels);
  const std::string gpus = FormatGpuSet(settings.gpus);
  const CordonNote& note = settings.note;
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement st,
      db_->Prepare("INSERT OR REPLACE INTO node_admin (node_id, state, labels, gpus, note_reason, "
                   "note_by, note_ms, row_crc) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  return st.RunWith(node_id, state, labels, gpus, note.reason, note.by, note.since_ms,
                    static_cast<int64_t>(NodeAdminRowCrc(node_id, state, labels, gpus, note)));
}

StatusOr<std::map<std::string, NodeSettings>> SqliteStateStore::ReadNodeSettings() {
  COHORT_ASSIGN_OR_RETURN(SqliteStatement st,
                          db_->Prepare("SELECT node_id, state, labels, gpus, note_reason, "
                                       "note_by, note_ms, row_crc FROM node_admin"));
  std::map<std::string, NodeSettings> out;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    std::string node_id = st.Text(0);
    std::string state = st.Text(1);
    std::string labels = st.Text(2);
    std::string gpus_text = st.Text(3);
    CordonNote note{st.Text(4), st.Text(5), st.Int(6)};
    auto admin = ParseNodeAdmin(state);
    auto edits = ParseNodeLabelEditsText(labels);
    auto gpus = ParseGpuSet(gpus_text);
    if (static_cast<uint32_t>(st.Int(7)) !=
            NodeAdminRowCrc(node_id, state, labels, gpus_text, note) ||
        !admin.ok() || !edits.ok() || !gpus.ok()) {
      // A lost setting never stops a start; the admin sees the node as its agent registered it
      // and can set it again.
      spdlog::error("state store: the admin settings of node {} in {} do not verify; dropped",
                    node_id, path_);
      continue;
    }
    out[node_id] = NodeSettings{*admin, std::move(*edits), std::move(*gpus), std::move(note)};
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
