#include "agent/handoff.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "common/file_util.h"
#include "common/utf8.h"

namespace cohort::agent {

namespace {

using nlohmann::json;

// Reads the fields of one JSON object, each checked for its type; the first fault is kept and
// names the field after `where` ("handoff attempts[0]" gives "handoff attempts[0].pid: must be an
// integer").
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) Fail("", "must be an object");
  }

  std::string String(const char* name) {
    const json* v = Find(name);
    if (v == nullptr) return {};
    if (!v->is_string()) return Fail(name, "must be a string"), std::string();
    return v->get<std::string>();
  }
  int64_t Integer(const char* name, int64_t min, int64_t max) {
    const json* v = Find(name);
    if (v == nullptr) return 0;
    if (!v->is_number_integer()) return Fail(name, "must be an integer"), 0;
    // Through the unsigned reading too: a value past INT64_MAX is out of range, not wrapped.
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return Fail(name, "out of range"), 0;
    }
    int64_t n = v->get<int64_t>();
    if (n < min || n > max) {
      return Fail(name, "must be in " + std::to_string(min) + ".." + std::to_string(max)), 0;
    }
    return n;
  }
  bool Bool(const char* name) {
    const json* v = Find(name);
    if (v == nullptr) return false;
    if (!v->is_boolean()) return Fail(name, "must be true or false"), false;
    return v->get<bool>();
  }
  std::map<std::string, std::string> StringMap(const char* name) {
    std::map<std::string, std::string> out;
    const json* v = Find(name);
    if (v == nullptr) return out;
    if (!v->is_object()) return Fail(name, "must be an object of strings"), out;
    for (const auto& [key, value] : v->items()) {
      if (!value.is_string()) return Fail(name, "must be an object of strings"), out;
      out[key] = value.get<std::string>();
    }
    return out;
  }
  std::vector<std::string> StringList(const char* name) {
    std::vector<std::string> out;
    const json* v = Find(name);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(name, "must be a list of strings"), out;
    for (const json& item : *v) {
      if (!item.is_string()) return Fail(name, "must be a list of strings"), out;
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  template <typename T>
  std::vector<T> IntegerList(const char* name, int64_t min, int64_t max) {
    std::vector<T> out;
    const json* v = Find(name);
    if (v == nullptr) return out;
    if (!v->is_array()) return Fail(name, "must be a list of integers"), out;
    for (const json& item : *v) {
      if (!item.is_number_integer() || item.get<int64_t>() < min || item.get<int64_t>() > max) {
        return Fail(name, "must be a list of integers in " + std::to_string(min) + ".." +
                              std::to_string(max)),
               out;
      }
      out.push_back(static_cast<T>(item.get<int64_t>()));
    }
    return out;
  }
  const json* Object(const char* name) {
    const json* v = Find(name);
    if (v != nullptr && !v->is_object()) Fail(name, "must be an object");
    return v != nullptr && v->is_object() ? v : nullptr;
  }

  void Require(bool holds, const char* name, const std::string& what) {
    if (!holds) Fail(name, what);
  }
  const Status& status() const { return status_; }

 private:
  const json* Find(const char* name) const {
    if (!object_.is_object()) return nullptr;
    auto it = object_.find(name);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  void Fail(const std::string& name, const std::string& what) {
    if (!status_.ok()) return;
    status_ = InvalidArgument(where_ + (name.empty() ? "" : "." + name) + ": " + what);
  }

  const json& object_;
  std::string where_;
  Status status_;
};

constexpr int64_t kMaxPid = 1 << 22;  // the kernel's PID_MAX_LIMIT
constexpr int64_t kMaxId = 0xFFFFFFFE;

json EncodeAttempt(const HandedOverAttempt& a) {
  json out = {{"job", a.job},
              {"job_created_ms", a.job_created_ms},
              {"replica", a.replica},
              {"attempt", a.attempt},
              {"gpus", a.gpus},
              {"pid", a.pid},
              {"status_fd", a.status_fd},
              {"cgroup", a.cgroup},
              {"working_dir", a.working_dir},
              {"log_path", a.log_path},
              {"env", a.env},
              {"chief", a.chief},
              {"container", a.container},
              {"container_id", a.container_id},
              {"launched_ns", a.launched_ns},
              {"log_acked", a.log_acked},
              {"measurements_acked", a.measurements_acked}};
  if (a.run_as) {
    out["run_as"] = {{"user", a.run_as->user},     {"account", a.run_as->account},
                     {"uid", a.run_as->uid},       {"gid", a.run_as->gid},
                     {"groups", a.run_as->groups}, {"home", a.run_as->home}};
  }
  return out;
}

StatusOr<HandedOverAttempt> DecodeAttempt(const json& in, const std::string& where) {
  Fields f(in, where);
  HandedOverAttempt a;
  a.job = f.String("job");
  a.job_created_ms = f.Integer("job_created_ms", 0, INT64_MAX);  // absent from older agents'
  a.replica = f.String("replica");
  a.attempt = static_cast<int>(f.Integer("attempt", 0, INT32_MAX));
  a.gpus = f.IntegerList<int>("gpus", 0, 1 << 16);
  a.pid = static_cast<pid_t>(f.Integer("pid", 0, kMaxPid));
  a.status_fd = static_cast<int>(f.Integer("status_fd", -1, INT32_MAX));
  a.cgroup = f.String("cgroup");
  a.working_dir = f.String("working_dir");
  a.log_path = f.String("log_path");
  a.env = f.StringMap("env");
  a.chief = f.Bool("chief");
  a.container = f.Bool("container");
  a.container_id = f.String("container_id");  // absent from older agents'
  a.launched_ns = f.Integer("launched_ns", 0, INT64_MAX);
  a.log_acked = static_cast<uint64_t>(f.Integer("log_acked", 0, INT64_MAX));
  a.measurements_acked = static_cast<uint64_t>(f.Integer("measurements_acked", 0, INT64_MAX));
  if (const json* run_as = f.Object("run_as")) {
    Fields r(*run_as, where + ".run_as");
    RunAs user;
    user.user = r.String("user");
    user.account = r.String("account");
    user.uid = static_cast<uid_t>(r.Integer("uid", 0, kMaxId));
    user.gid = static_cast<gid_t>(r.Integer("gid", 0, kMaxId));
    user.groups = r.IntegerList<gid_t>("groups", 0, kMaxId);
    user.home = r.String("home");
    if (!r.status().ok()) return r.status();
    a.run_as = std::move(user);
  }
  f.Require(!a.job.empty(), "job", "must not be empty");
  f.Require(!a.replica.empty(), "replica", "must not be empty");
  f.Require(a.pid > 1, "pid", "must be a process of this agent (> 1)");
  f.Require(!a.working_dir.empty() && a.working_dir.front() == '/', "working_dir",
            "must be an absolute path");
  f.Require(!a.log_path.empty() && a.log_path.front() == '/', "log_path",
            "must be an absolute path");
  f.Require(a.cgroup.empty() || a.cgroup.front() == '/', "cgroup", "must be an absolute path");
  f.Require(a.status_fd == -1 || a.status_fd > 2, "status_fd",
            "must be -1 or a descriptor above stderr");
  f.Require(a.container_id.empty() || ValidContainerId(a.container_id), "container_id",
            "must be letters, digits, '-', '_' and '.', not starting with '-'");
  if (!f.status().ok()) return f.status();
  return a;
}

// "previous_image": {"fd": 5, "argv": [...]}; nullopt where there is none (an older agent's).
StatusOr<std::optional<PreviousImage>> DecodePreviousImage(const json& in) {
  Fields file(in, "handoff file");
  const json* object = file.Object("previous_image");
  if (!file.status().ok()) return file.status();
  if (object == nullptr) return std::optional<PreviousImage>();
  Fields f(*object, "handoff previous_image");
  PreviousImage image;
  image.fd = static_cast<int>(f.Integer("fd", 3, INT32_MAX));
  image.argv = f.StringList("argv");
  f.Require(image.fd > 2, "fd", "missing");
  f.Require(!image.argv.empty(), "argv", "must not be empty");
  if (!f.status().ok()) return f.status();
  return std::optional<PreviousImage>(std::move(image));
}

// The way back `text` holds, where this process wrote it and its descriptor is an executable file
// (of the image this one replaced: nothing else could have opened it since the execve, as it was
// left open across it).
std::optional<WayBack> WayBackIn(const std::string& text) {
  json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!in.is_object()) return std::nullopt;
  auto pid = in.find("agent_pid");
  if (pid == in.end() || !pid->is_number_integer() || pid->get<int64_t>() != ::getpid()) {
    return std::nullopt;
  }
  auto image = DecodePreviousImage(in);
  if (!image.ok() || !image->has_value()) return std::nullopt;
  struct stat st;
  if (::fstat((*image)->fd, &st) != 0 || !S_ISREG(st.st_mode) ||
      (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) == 0) {
    return std::nullopt;
  }
  return WayBack{std::move(**image), text};
}

json EncodeEnded(const wire::ReplicaStatusT& s) {
  return {{"job", s.job},
          {"job_created_ms", s.job_created_ms},
          {"replica", s.replica},
          {"attempt", s.attempt},
          {"state", wire::EnumNameReplicaState(s.state)},
          {"exit_code", s.exit_code},
          {"signal", s.signal},
          {"cause_signal", s.cause_signal},
          {"message", s.message}};
}

StatusOr<wire::ReplicaStatusT> DecodeEnded(const json& in, const std::string& where) {
  Fields f(in, where);
  wire::ReplicaStatusT s;
  s.job = f.String("job");
  s.job_created_ms = f.Integer("job_created_ms", 0, INT64_MAX);
  s.replica = f.String("replica");
  s.attempt = static_cast<int>(f.Integer("attempt", 0, INT32_MAX));
  const std::string state = f.String("state");
  s.exit_code = static_cast<int>(f.Integer("exit_code", INT32_MIN, INT32_MAX));
  s.signal = static_cast<int>(f.Integer("signal", 0, 128));
  s.cause_signal = static_cast<int>(f.Integer("cause_signal", 0, 128));
  s.message = f.String("message");
  f.Require(!s.job.empty(), "job", "must not be empty");
  f.Require(!s.replica.empty(), "replica", "must not be empty");
  bool known = false;
  for (wire::ReplicaState final : {wire::ReplicaState::SUCCEEDED, wire::ReplicaState::FAILED,
                                   wire::ReplicaState::STOPPED, wire::ReplicaState::PREEMPTED}) {
    if (state == wire::EnumNameReplicaState(final)) {
      s.state = final;
      known = true;
    }
  }
  f.Require(known, "state", "must be SUCCEEDED, FAILED, STOPPED or PREEMPTED");
  if (!f.status().ok()) return f.status();
  return s;
}

json EncodeEndedList(const std::vector<wire::ReplicaStatusT>& ended) {
  json out = json::array();
  for (const wire::ReplicaStatusT& s : ended) out.push_back(EncodeEnded(s));
  return out;
}

// The `ended` list of the object `in` (absent or null: none), each entry checked; `file` names the
// file in errors ("handoff file.ended: must be a list", "handoff ended[2].state: ...").
StatusOr<std::vector<wire::ReplicaStatusT>> DecodeEndedList(const json& in,
                                                            const std::string& file) {
  std::vector<wire::ReplicaStatusT> out;
  auto ended = in.find("ended");
  if (ended == in.end() || ended->is_null()) return out;
  if (!ended->is_array()) return InvalidArgument(file + " file.ended: must be a list");
  for (size_t i = 0; i < ended->size(); ++i) {
    auto s = DecodeEnded((*ended)[i], file + " ended[" + std::to_string(i) + "]");
    if (!s.ok()) return s.status();
    out.push_back(std::move(*s));
  }
  return out;
}

}  // namespace

std::string HandoffPath(const std::string& work_dir) { return work_dir + "/.agent-handoff.json"; }

bool ContainerIdChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

bool ValidContainerId(const std::string& id) {
  return !id.empty() && id.front() != '-' && std::all_of(id.begin(), id.end(), ContainerIdChar);
}

StatusOr<std::string> EncodeHandoff(const Handoff& handoff) {
  json attempts = json::array();
  for (const HandedOverAttempt& a : handoff.attempts) {
    json attempt = EncodeAttempt(a);
    try {
      (void)attempt.dump();
    } catch (const json::exception& e) {
      return InvalidArgument("handoff: attempt " + ValidUtf8(a.job) + "/" + ValidUtf8(a.replica) +
                             "/" + std::to_string(a.attempt) +
                             " holds a path or an environment value that is not UTF-8, which "
                             "JSON cannot carry (" +
                             e.what() + ")");
    }
    attempts.push_back(std::move(attempt));
  }
  // The ends and the version are text for people: what is not UTF-8 in them is replaced, as in
  // the ends file.
  json out = {{"agent_pid", handoff.agent_pid},
              {"from_version", handoff.from_version},
              {"attempts", attempts},
              {"ended", EncodeEndedList(handoff.ended)}};
  if (handoff.previous_image) {
    out["previous_image"] = {{"fd", handoff.previous_image->fd},
                             {"argv", handoff.previous_image->argv}};
  }
  if (!handoff.went_back_because.empty()) out["went_back_because"] = handoff.went_back_because;
  // An argument that is not UTF-8 is replaced too: the way back then runs with the replacement,
  // which is no worse than the flag parser refusing it (the agent was started with it).
  return out.dump(1, ' ', false, json::error_handler_t::replace);
}

StatusOr<Handoff> DecodeHandoff(const std::string& text) {
  json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return InvalidArgument("handoff: not JSON");
  Fields f(in, "handoff file");
  Handoff handoff;
  handoff.agent_pid = static_cast<pid_t>(f.Integer("agent_pid", 1, kMaxPid));
  handoff.from_version = f.String("from_version");
  handoff.went_back_because = f.String("went_back_because");
  f.Require(handoff.agent_pid > 0, "agent_pid", "missing");
  if (!f.status().ok()) return f.status();
  COHORT_ASSIGN_OR_RETURN(handoff.previous_image, DecodePreviousImage(in));
  auto attempts = in.find("attempts");
  if (attempts != in.end() && !attempts->is_null()) {
    if (!attempts->is_array()) return InvalidArgument("handoff file.attempts: must be a list");
    std::set<std::string> keys;
    for (size_t i = 0; i < attempts->size(); ++i) {
      const std::string where = "attempts[" + std::to_string(i) + "]";
      auto a = DecodeAttempt((*attempts)[i], "handoff " + where);
      if (!a.ok()) return a.status();
      const std::string key = a->job + "/" + a->replica + "/" + std::to_string(a->attempt);
      if (!keys.insert(key).second) {
        return InvalidArgument("handoff " + where + ": attempt " + key + " is listed twice");
      }
      handoff.attempts.push_back(std::move(*a));
    }
  }
  // An agent older than the list hands none over.
  COHORT_ASSIGN_OR_RETURN(handoff.ended, DecodeEndedList(in, "handoff"));
  return handoff;
}

StatusOr<std::string> WriteHandoff(const std::string& work_dir, const Handoff& handoff) {
  const std::string path = HandoffPath(work_dir);
  COHORT_ASSIGN_OR_RETURN(std::string text, EncodeHandoff(handoff));
  COHORT_RETURN_IF_ERROR(ReplaceFile(path, text, 0600));
  return path;
}

StatusOr<std::optional<Handoff>> TakeHandoff(const std::string& work_dir,
                                             std::optional<WayBack>* way_back) {
  if (std::getenv(kHandoffVariable) == nullptr) return std::optional<Handoff>();
  ::unsetenv(kHandoffVariable);
  const std::string path = HandoffPath(work_dir);
  auto text = ReadFileToString(path, "handoff file");
  ::unlink(path.c_str());
  if (!text.ok()) return text.status();
  if (way_back != nullptr) *way_back = WayBackIn(*text);
  auto handoff = DecodeHandoff(*text);
  if (!handoff.ok()) return handoff.status().WithContext(path);
  if (handoff->agent_pid != ::getpid()) {
    return InvalidArgument(path + ": written by process " + std::to_string(handoff->agent_pid) +
                           ", not by this agent (" + std::to_string(::getpid()) +
                           "): its replicas are not this process's children");
  }
  return std::optional<Handoff>(std::move(*handoff));
}

std::string HandoffGoingBack(const WayBack& way_back, const std::string& why) {
  json out = json::parse(way_back.handoff, nullptr, /*allow_exceptions=*/false);
  out.erase("previous_image");
  out["went_back_because"] = why;
  return out.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string EndsPath(const std::string& work_dir) { return work_dir + "/.agent-ends.json"; }

std::string EncodeEnds(const std::string& node_id, const std::vector<wire::ReplicaStatusT>& ended) {
  return json{{"node_id", node_id}, {"ended", EncodeEndedList(ended)}}.dump(
      1, ' ', false, json::error_handler_t::replace);
}

StatusOr<std::vector<wire::ReplicaStatusT>> DecodeEnds(const std::string& text,
                                                       const std::string& node_id) {
  json in = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return InvalidArgument("ends file: not JSON");
  Fields f(in, "ends file");
  const std::string written_by = f.String("node_id");
  f.Require(!written_by.empty(), "node_id", "missing");
  if (!f.status().ok()) return f.status();
  if (written_by != node_id) {
    return FailedPrecondition("ends file: written by node " + written_by + ", not by this one (" +
                              node_id + ")");
  }
  return DecodeEndedList(in, "ends");
}

StatusOr<std::vector<wire::ReplicaStatusT>> ReadEnds(const std::string& work_dir,
                                                     const std::string& node_id) {
  const std::string path = EndsPath(work_dir);
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return std::vector<wire::ReplicaStatusT>();
  }
  auto text = ReadFileToString(path, "ends file");
  if (!text.ok()) return text.status();
  auto ended = DecodeEnds(*text, node_id);
  if (!ended.ok()) return ended.status().WithContext(path);
  return ended;
}

}  // namespace cohort::agent
