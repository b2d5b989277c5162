// SqliteStateStore's reading side (see sqlite_state_store.h): the rows of every table read and
// checked against their checksums, Load with its salvage of damaged rows, LoadJobs and LoadStudies.
#include <spdlog/spdlog.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "common/study_spec.h"
#include "coordinator/sqlite_rows.h"
#include "coordinator/sqlite_state_store.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kProblemsInMessage = 10;

std::vector<int> ParseGpuList(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(std::atoi(item.c_str()));
  }
  return out;
}

std::string Hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

constexpr const char* kJobColumns =
    "name, seq, state, message, create_time_ms, queued_since_ms, start_time_ms, end_time_ms, "
    "restarts, output_dir, trial_id, study, master_port, bootstrap_port, spec_crc, row_crc, owner, "
    "suspended_ms, first_running_ms";
constexpr const char* kSpecColumns = "job, spec_yaml, spec_crc";
constexpr const char* kReplicaColumns =
    "job, name, ord, role, idx, attempt, launched, state, node_id, last_node, gpus, port, "
    "exit_code, signal, message, stop_requested, state_time_ms, row_crc, cause_signal, "
    "fenced_until_ms, idle";
constexpr const char* kEventColumns = "job, pos, time_ms, message, row_crc";

// Steps `st` to its end, calling on_row() at each row (it reads the row's columns from `st`). A
// step that fails adds "<what>: <error>" to problems and ends the walk.
template <typename OnRow>
void ForEachRow(SqliteStatement& st, const std::string& what, std::vector<std::string>& problems,
                OnRow&& on_row) {
  while (true) {
    auto row = st.Step();
    if (!row.ok()) {
      problems.push_back(what + ": " + row.status().message());
      return;
    }
    if (!*row) return;
    on_row();
  }
}

std::string Summarize(const std::vector<std::string>& problems) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < kProblemsInMessage; ++i) {
    out += (i ? "; " : "") + problems[i];
  }
  if (problems.size() > kProblemsInMessage) {
    out += "; and " + std::to_string(problems.size() - kProblemsInMessage) + " more";
  }
  return out;
}

}  // namespace

// ---- reading --------------------------------------------------------------------------------

void SqliteStateStore::ReadJobRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                   std::map<uint64_t, std::string>* order,
                                   std::vector<std::string>& problems) {
  ForEachRow(st, "the jobs table cannot be read to its end", problems, [&] {
    ReadJob& r = jobs[st.Text(0)];
    JobRecord& j = r.job;
    r.has_row = true;
    j.name = st.Text(0);
    j.seq = static_cast<uint64_t>(st.Int(1));
    const int64_t state = st.Int(2);
    j.state = static_cast<JobState>(state);
    j.message = st.Text(3);
    j.create_time_ms = st.Int(4);
    j.queued_since_ms = st.Int(5);
    j.start_time_ms = st.Int(6);
    j.end_time_ms = st.Int(7);
    j.restarts = static_cast<int>(st.Int(8));
    j.output_dir = st.Text(9);
    j.trial_id = st.Text(10);
    j.study = st.Text(11);
    j.master_port = static_cast<int>(st.Int(12));
    j.bootstrap_port = static_cast<int>(st.Int(13));
    uint32_t spec_crc = static_cast<uint32_t>(st.Int(14));
    uint32_t row_crc = static_cast<uint32_t>(st.Int(15));
    j.owner = st.Text(16);
    j.suspended_ms = st.Int(17);
    j.first_running_ms = st.Int(18);
    if (order) (*order)[j.seq] = j.name;
    r.image.row_crc = row_crc;
    r.image.spec_crc = spec_crc;
    if (rows::JobRowCrc(j, spec_crc) != row_crc) {
      r.fatal.push_back("its row does not match its checksum (stored " + Hex(row_crc) +
                        ", computed " + Hex(rows::JobRowCrc(j, spec_crc)) + ")");
    } else if (!IsJobState(state)) {
      r.fatal.push_back("its state " + std::to_string(state) +
                        " is no job state this coordinator knows");
    }
  });
}

void SqliteStateStore::ReadSpecRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                    std::vector<std::string>& problems) {
  ForEachRow(st, "the job_specs table cannot be read to its end", problems, [&] {
    auto it = jobs.find(st.Text(0));
    if (it == jobs.end() || !it->second.has_row) return;  // a spec alone says nothing
    ReadJob& r = it->second;
    r.has_spec = true;
    r.job.spec_yaml = st.Text(1);
    uint32_t stored = static_cast<uint32_t>(st.Int(2));
    uint32_t actual = rows::TextCrc(r.job.spec_yaml);
    if (actual != stored || stored != r.image.spec_crc) {
      r.fatal.push_back("its spec does not match its checksum (stored " + Hex(stored) +
                        ", computed " + Hex(actual) + ")");
    }
  });
}

void SqliteStateStore::ReadReplicaRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                       std::vector<std::string>& problems) {
  ForEachRow(st, "the replicas table cannot be read to its end", problems, [&] {
    std::string job = st.Text(0);
    ReadJob& r = jobs[job];
    ReplicaRecord rep;
    rep.name = st.Text(1);
    int ord = static_cast<int>(st.Int(2));
    auto role = ParseRole(st.Text(3));
    rep.index = static_cast<int>(st.Int(4));
    rep.attempt = static_cast<int>(st.Int(5));
    rep.launched = st.Int(6) != 0;
    const int64_t state = st.Int(7);
    rep.state = static_cast<ReplicaState>(state);
    rep.node_id = st.Text(8);
    rep.last_node = st.Text(9);
    rep.gpus = ParseGpuList(st.Text(10));
    rep.port = static_cast<int>(st.Int(11));
    rep.exit_code = static_cast<int>(st.Int(12));
    rep.signal = static_cast<int>(st.Int(13));
    rep.message = st.Text(14);
    rep.stop_requested = st.Int(15) != 0;
    rep.state_time_ms = st.Int(16);
    uint32_t crc = static_cast<uint32_t>(st.Int(17));
    rep.cause_signal = static_cast<int>(st.Int(18));
    rep.fenced_until_ms = st.Int(19);
    rep.idle = st.Int(20) != 0;
    if (role.ok()) rep.role = *role;
    if (!role.ok() || rows::ReplicaRowCrc(job, rep, ord) != crc) {
      r.fatal.push_back("replica " + rep.name + " does not match its checksum");
      return;
    }
    if (!IsReplicaState(state)) {
      r.fatal.push_back("replica " + rep.name + ": its state " + std::to_string(state) +
                        " is no replica state this coordinator knows");
      return;
    }
    if (ord != static_cast<int>(r.job.replicas.size())) {
      r.fatal.push_back("replica " + rep.name + " is stored at place " + std::to_string(ord) +
                        " but " + std::to_string(r.job.replicas.size()) +
                        " replicas come before it");
    }
    r.image.replicas[rep.name] = crc;
    r.job.replicas.push_back(std::move(rep));
  });
}

void SqliteStateStore::ReadEventRows(SqliteStatement& st, std::map<std::string, ReadJob>& jobs,
                                     std::vector<std::string>& problems) {
  std::string current;
  int64_t next_pos = 0;
  ForEachRow(st, "the events table cannot be read to its end", problems, [&] {
    std::string job = st.Text(0);
    ReadJob& r = jobs[job];
    int64_t pos = st.Int(1);
    JobEventRecord e{st.Int(2), st.Text(3)};
    uint32_t crc = static_cast<uint32_t>(st.Int(4));
    if (job != current) {
      current = job;
      r.image.event_base = pos;
      next_pos = pos;
    }
    if (pos != next_pos) {
      r.partial.push_back("events " + std::to_string(next_pos) + " to " + std::to_string(pos - 1) +
                          " are missing");
    }
    next_pos = pos + 1;
    if (rows::EventRowCrc(job, e) != crc) {
      r.partial.push_back("event " + std::to_string(pos) + " does not match its checksum");
      return;
    }
    r.image.events.push_back(crc);
    r.job.events.push_back(std::move(e));
  });
}

void SqliteStateStore::FinishJob(const std::string& name, ReadJob& r) {
  JobRecord& j = r.job;
  if (!r.has_row) {
    r.fatal.push_back("its row is missing or unreadable (" + std::to_string(j.replicas.size()) +
                      " replica rows and " + std::to_string(j.events.size()) + " events remain)");
    j.name = name;
    return;
  }
  if (!r.has_spec) r.fatal.push_back("its spec is missing or unreadable");
  if (!r.fatal.empty()) return;
  auto spec = ParseJobSpec(j.spec_yaml, "stored spec of job " + name);
  if (!spec.ok()) {
    r.fatal.push_back("its spec does not parse: " + spec.status().message());
    return;
  }
  j.spec = std::move(*spec);
  std::vector<ReplicaRecord> expected = MakeReplicas(j.spec);
  bool same = expected.size() == j.replicas.size();
  for (size_t i = 0; same && i < expected.size(); ++i) {
    same = expected[i].name == j.replicas[i].name && expected[i].role == j.replicas[i].role;
  }
  if (!same) {
    std::string want, have;
    for (const auto& e : expected) want += (want.empty() ? "" : ", ") + e.name;
    for (const auto& h : j.replicas) have += (have.empty() ? "" : ", ") + h.name;
    r.fatal.push_back("its replicas (" + have + ") are not those its spec makes (" + want + ")");
    return;
  }
  FillDemands(j);
  if (j.first_running_ms == 0) j.first_running_ms = FirstRunningTimeFromEvents(j);
}

void SqliteStateStore::FinishJobs(std::map<std::string, ReadJob>& jobs) {
  // Parsing each stored spec is most of a restart (100,000 jobs: about 6 s of YAML on one core
  // here), and each job's is its own: the cores share them.
  std::vector<std::pair<const std::string*, ReadJob*>> work;
  work.reserve(jobs.size());
  for (auto& [name, r] : jobs) work.emplace_back(&name, &r);
  const size_t threads = std::min<size_t>(std::max(1u, std::thread::hardware_concurrency()),
                                          std::max<size_t>(1, work.size() / 1000));
  std::atomic<size_t> next{0};
  auto finish = [&] {
    for (size_t i = next++; i < work.size(); i = next++) FinishJob(*work[i].first, *work[i].second);
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(finish);
  finish();
  for (std::thread& t : pool) t.join();
}

SqliteStateStore::ReadAllResult SqliteStateStore::ReadAll() {
  ReadAllResult all;
  // PRAGMA integrity_check: "ok", or one row per problem.
  {
    auto st = db_->Prepare("PRAGMA integrity_check(100)");
    if (!st.ok()) {
      all.problems.push_back("integrity check: " + st.status().message());
    } else {
      ForEachRow(*st, "integrity check", all.problems, [&] {
        std::string line = st->Text(0);
        if (line != "ok") all.problems.push_back("integrity check: " + line);
      });
    }
  }
  auto scan = [&](const std::string& sql, auto&& read) {
    auto st = db_->Prepare(sql);
    if (!st.ok()) {
      all.problems.push_back(st.status().message());
      return;
    }
    read(*st);
  };
  scan(std::string("SELECT ") + kJobColumns + " FROM jobs",
       [&](SqliteStatement& st) { ReadJobRows(st, all.jobs, &all.order, all.problems); });
  scan(std::string("SELECT ") + kSpecColumns + " FROM job_specs",
       [&](SqliteStatement& st) { ReadSpecRows(st, all.jobs, all.problems); });
  scan(std::string("SELECT ") + kReplicaColumns + " FROM replicas ORDER BY job, ord",
       [&](SqliteStatement& st) { ReadReplicaRows(st, all.jobs, all.problems); });
  scan(std::string("SELECT ") + kEventColumns + " FROM events ORDER BY job, pos",
       [&](SqliteStatement& st) { ReadEventRows(st, all.jobs, all.problems); });
  FinishJobs(all.jobs);

  // Studies: the header row, then the events in order.
  scan("SELECT name, spec_yaml, spec_crc, create_time_ms, end_time_ms, row_crc, owner FROM studies",
       [&](SqliteStatement& st) {
         ForEachRow(st, "the studies table cannot be read to its end", all.problems, [&] {
           ReadStudy& s = all.studies[st.Text(0)];
           s.has_row = true;
           std::string name = st.Text(0), spec = st.Text(1);
           uint32_t spec_crc = static_cast<uint32_t>(st.Int(2));
           int64_t create_ms = st.Int(3), end_ms = st.Int(4);
           uint32_t crc = static_cast<uint32_t>(st.Int(5));
           std::string owner = st.Text(6);
           if (rows::StudyRowCrc(name, spec_crc, create_ms, end_ms, owner) != crc) {
             s.fatal.push_back("its row does not match its checksum");
           }
           if (rows::TextCrc(spec) != spec_crc)
             s.fatal.push_back("its spec does not match its checksum");
           s.image.row_crc = crc;
           s.record = json{{"kind", "study"},       {"name", name},
                           {"spec_yaml", spec},     {"create_time_ms", create_ms},
                           {"end_time_ms", end_ms}, {"first", 0},
                           {"owner", owner},        {"events", json::array()}}
                          .dump(-1, ' ', false, json::error_handler_t::replace);
         });
       });
  std::map<std::string, json> events;
  scan("SELECT study, pos, body, row_crc FROM study_events ORDER BY study, pos",
       [&](SqliteStatement& st) {
         ForEachRow(st, "the study_events table cannot be read to its end", all.problems, [&] {
           std::string study = st.Text(0), body = st.Text(2);
           int64_t pos = st.Int(1);
           ReadStudy& s = all.studies[study];
           json& list = events[study];
           if (!list.is_array()) list = json::array();
           if (pos != s.image.events) {
             s.fatal.push_back("events " + std::to_string(s.image.events) + " to " +
                               std::to_string(pos - 1) + " are missing");
           }
           s.image.events = pos + 1;
           json e = json::parse(body, nullptr, false);
           if (rows::StudyEventRowCrc(study, pos, body) != static_cast<uint32_t>(st.Int(3)) ||
               e.is_discarded()) {
             s.fatal.push_back("event " + std::to_string(pos) + " does not match its checksum");
             return;
           }
           list.push_back(std::move(e));
         });
       });
  scan("SELECT study, trial_id, job, parameters, ended, succeeded, message, row_crc FROM trials",
       [&](SqliteStatement& st) {
         ForEachRow(st, "the trials table cannot be read to its end", all.problems, [&] {
           if (rows::TrialRowCrc(st.Text(0), st.Text(1), st.Text(2), st.Text(3), st.Int(4),
                                 st.Int(5), st.Text(6)) != static_cast<uint32_t>(st.Int(7))) {
             all.studies[st.Text(0)].fatal.push_back("trial " + st.Text(1) +
                                                     " does not match its checksum");
           }
         });
       });
  for (auto& [name, s] : all.studies) {
    if (!s.has_row) {
      s.fatal.push_back("its row is missing (" + std::to_string(s.image.events) +
                        " events remain)");
      continue;
    }
    json j = json::parse(s.record);
    j["events"] = std::move(events[name]);
    if (!j["events"].is_array()) j["events"] = json::array();
    s.record = j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return all;
}

StatusOr<StoredState> SqliteStateStore::Load() {
  ReadAllResult all = ReadAll();
  std::vector<std::string> problems = all.problems;
  for (const auto& [name, r] : all.jobs) {
    for (const auto& p : r.fatal) problems.push_back("job " + name + ": " + p);
    for (const auto& p : r.partial) problems.push_back("job " + name + ": " + p);
  }
  for (const auto& [name, s] : all.studies) {
    for (const auto& p : s.fatal) problems.push_back("study " + name + ": " + p);
  }

  StoredState out;
  out.dropped = dropped_before_load_;
  COHORT_ASSIGN_OR_RETURN(out.training_metrics, ReadTrainingMetrics());
  COHORT_ASSIGN_OR_RETURN(out.node_settings, ReadNodeSettings());
  COHORT_ASSIGN_OR_RETURN(out.node_events, ReadNodeEvents());
  if (problems.empty()) {
    for (auto& [seq, name] : all.order) {
      ReadJob& r = all.jobs.at(name);
      jobs_[name] = std::move(r.image);
      out.jobs.push_back(std::move(r.job));
    }
    for (auto& [name, s] : all.studies) {
      studies_[name] = s.image;
      out.studies.push_back(std::move(s.record));
    }
    return out;
  }
  if (!options_.accept_damaged_state) {
    return DataLoss("the state database " + path_ + " is damaged (" +
                    std::to_string(problems.size()) + " problem" +
                    (problems.size() == 1 ? "" : "s") + "): " + Summarize(problems) +
                    ". The coordinator did not start. Restore the state dir from a backup, or "
                    "start with --accept-damaged-state to drop what is damaged (every job "
                    "dropped is listed)");
  }
  for (const auto& p : all.problems) {
    std::string line = "state database: " + p;
    spdlog::error("--accept-damaged-state: {}", line);
    out.dropped.push_back(line);
  }
  COHORT_ASSIGN_OR_RETURN(out.jobs, Salvage(all, out.dropped, out.studies));
  return out;
}

StatusOr<std::vector<JobRecord>> SqliteStateStore::Salvage(ReadAllResult& all,
                                                           std::vector<std::string>& dropped,
                                                           std::vector<std::string>& studies) {
  std::vector<JobRecord> kept;
  for (auto& [seq, name] : all.order) {
    ReadJob& r = all.jobs.at(name);
    if (!r.fatal.empty()) continue;
    if (!r.partial.empty()) {
      std::string line =
          "job " + name + ": kept without its damaged events (" + Summarize(r.partial) + ")";
      spdlog::error("--accept-damaged-state: {}", line);
      dropped.push_back(line);
    }
    kept.push_back(std::move(r.job));
  }
  for (auto& [name, r] : all.jobs) {
    if (r.fatal.empty()) continue;
    std::string line = "job " + name + " dropped: " + Summarize(r.fatal);
    spdlog::error("--accept-damaged-state: {}", line);
    dropped.push_back(line);
  }
  for (auto& [name, s] : all.studies) {
    if (!s.fatal.empty()) {
      std::string line = "study " + name + " dropped: " + Summarize(s.fatal);
      spdlog::error("--accept-damaged-state: {}", line);
      dropped.push_back(line);
      continue;
    }
    studies.push_back(s.record);
  }

  // A new database holding what was kept is built beside the damaged one, then takes its place;
  // the damaged one is kept aside. A crash in between leaves no state.db, which the next start
  // refuses (the marker says there was one) rather than starting empty.
  std::map<std::string, std::string> meta;
  for (const char* key : {"created_ms", "journal_imported"}) {
    auto value = Meta(key);
    if (value.ok() && !value->empty()) meta[key] = *value;
  }
  const std::string aside = path_ + ".damaged-" + std::to_string(rows::NowMs());
  meta["rebuilt_from"] = aside;
  const std::string rebuild = path_ + ".rebuild";
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    fs::remove(rebuild + suffix, ec);
  }
  {
    COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> fresh,
                            Open(rebuild, options_, store_id_));
    StateChanges changes;
    for (const JobRecord& j : kept) changes.jobs.push_back(&j);
    changes.study_records = studies;
    COHORT_RETURN_IF_ERROR(fresh->CommitWithMeta(changes, meta));
  }  // closed: its WAL is checkpointed into the file
  st_.reset();
  db_.reset();
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code ec;
    if (!fs::exists(path_ + suffix, ec)) continue;
    fs::rename(path_ + suffix, aside + suffix, ec);
    if (ec) return Unavailable("renaming the damaged " + path_ + suffix + ": " + ec.message());
  }
  std::error_code ec;
  fs::rename(rebuild, path_, ec);
  if (ec) return Unavailable("renaming " + rebuild + " to " + path_ + ": " + ec.message());
  spdlog::error("state store: the damaged database is kept as {}", aside);

  COHORT_ASSIGN_OR_RETURN(std::unique_ptr<SqliteStateStore> reopened, Open(path_, options_, ""));
  db_ = std::move(reopened->db_);
  st_ = std::move(reopened->st_);
  ReadAllResult again = ReadAll();
  if (!again.problems.empty()) {
    return DataLoss("the rebuilt database " + path_ +
                    " does not verify: " + Summarize(again.problems));
  }
  jobs_.clear();
  studies_.clear();
  for (auto& [name, r] : again.jobs) jobs_[name] = std::move(r.image);
  for (auto& [name, r] : again.studies) studies_[name] = r.image;
  spdlog::warn("state store: rebuilt {} with {} jobs and {} studies; {} dropped", path_,
               kept.size(), studies.size(), dropped.size());
  return kept;
}

StatusOr<std::vector<JobRecord>> SqliteStateStore::LoadJobs(const std::set<std::string>& names) {
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement job_st,
      db_->Prepare(std::string("SELECT ") + kJobColumns + " FROM jobs WHERE name = ?1"));
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement spec_st,
      db_->Prepare(std::string("SELECT ") + kSpecColumns + " FROM job_specs WHERE job = ?1"));
  COHORT_ASSIGN_OR_RETURN(SqliteStatement rep_st,
                          db_->Prepare(std::string("SELECT ") + kReplicaColumns +
                                       " FROM replicas WHERE job = ?1 ORDER BY ord"));
  COHORT_ASSIGN_OR_RETURN(SqliteStatement ev_st,
                          db_->Prepare(std::string("SELECT ") + kEventColumns +
                                       " FROM events WHERE job = ?1 ORDER BY pos"));
  std::vector<JobRecord> out;
  for (const std::string& name : names) {
    std::map<std::string, ReadJob> one;
    std::vector<std::string> problems;
    job_st.Reset();
    job_st.Bind(1, name);
    ReadJobRows(job_st, one, nullptr, problems);
    if (one.empty()) continue;
    spec_st.Reset();
    spec_st.Bind(1, name);
    ReadSpecRows(spec_st, one, problems);
    rep_st.Reset();
    rep_st.Bind(1, name);
    ReadReplicaRows(rep_st, one, problems);
    ev_st.Reset();
    ev_st.Bind(1, name);
    ReadEventRows(ev_st, one, problems);
    ReadJob& r = one.begin()->second;
    FinishJob(name, r);
    problems.insert(problems.end(), r.fatal.begin(), r.fatal.end());
    problems.insert(problems.end(), r.partial.begin(), r.partial.end());
    if (!problems.empty()) {
      return DataLoss("job " + name + " as stored in " + path_ + ": " + Summarize(problems));
    }
    jobs_[name] = std::move(r.image);
    out.push_back(std::move(r.job));
  }
  return out;
}

StatusOr<std::vector<std::string>> SqliteStateStore::LoadStudies() {
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement st,
      db_->Prepare("SELECT name, spec_yaml, create_time_ms, end_time_ms, owner FROM studies"));
  COHORT_ASSIGN_OR_RETURN(
      SqliteStatement ev,
      db_->Prepare("SELECT body FROM study_events WHERE study = ?1 ORDER BY pos"));
  std::vector<std::string> out;
  while (true) {
    COHORT_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    json events = json::array();
    ev.Reset();
    ev.Bind(1, st.Text(0));
    while (true) {
      COHORT_ASSIGN_OR_RETURN(bool erow, ev.Step());
      if (!erow) break;
      events.push_back(json::parse(ev.Text(0), nullptr, false));
    }
    out.push_back(json{{"kind", "study"},
                       {"name", st.Text(0)},
                       {"spec_yaml", st.Text(1)},
                       {"create_time_ms", st.Int(2)},
                       {"end_time_ms", st.Int(3)},
                       {"owner", st.Text(4)},
                       {"first", 0},
                       {"events", std::move(events)}}
                      .dump(-1, ' ', false, json::error_handler_t::replace));
  }
  return out;
}

}  // namespace cohort::coordinator
