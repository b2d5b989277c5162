#include "coordinator/node_registry.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string_view>
#include <utility>

#include "common/config.h"
#include "common/utf8.h"
#include "common/wire_string.h"
#include "coordinator/options.h"

namespace cohort::coordinator {
namespace {

// An agent's text as the coordinator keeps it: printable UTF-8 of at most kMaxAgentTextBytes.
std::string AgentText(const flatbuffers::String* text) {
  return TruncateUtf8(ValidUtf8(Str(text), /*printable=*/true), kMaxAgentTextBytes);
}

// The agent's storage report, when it sent one (else `storage` keeps what it had).
void ReadStorage(const wire::StorageReport* report, NodeStorage& storage) {
  if (report == nullptr) return;
  storage.reported = true;
  storage.root = AgentText(report->root());
  storage.token = AgentText(report->token());
  storage.error = AgentText(report->error());
}

// Whether the agent registering with `uptime_ms` and `instance` (RegisterAgent.agent_instance) is a
// process that started since the coordinator last heard of `node` (a stop and start, a crash, a
// reboot), not the same one registering again (after a broken link, or this coordinator's
// restart); keeps its start and instance in `node`. A node this coordinator has heard since its
// own start is told by the instance, where both registrations give one: another process, however
// soon after the last (systemd's RestartSec=2s). Otherwise by the start, told by this
// coordinator's clock (`now_ms` less the uptime, so the two hosts' clocks need not agree): a later
// one than the start it knew, or, for a node it has not heard since its own start, than the
// node's last event. Estimates of one process's start differ by how long its registrations took
// to arrive: kAgentStartSlackMs keeps a slow one from looking like a restart (so an agent without
// an instance that restarts sooner after its start is not told).
constexpr int64_t kAgentStartSlackMs = 5'000;

bool AgentStartedAgain(int64_t uptime_ms, const std::string& instance, int64_t now_ms,
                       const NodeRegistry::Registration& reg, const NodeEvent* last_event,
                       NodeRecord& node) {
  const bool by_instance = reg.returning && !instance.empty() && !node.agent_instance.empty();
  const bool other_instance = by_instance && instance != node.agent_instance;
  if (!instance.empty()) node.agent_instance = instance;
  if (uptime_ms <= 0 || uptime_ms > now_ms) return false;  // an agent older than uptime_ms
  const int64_t started = now_ms - uptime_ms;
  const int64_t known = reg.returning           ? node.agent_started_ms
                        : last_event != nullptr ? last_event->time_ms
                                                : 0;
  const bool again =
      by_instance ? other_instance : known > 0 && started > known + kAgentStartSlackMs;
  if (again || node.agent_started_ms == 0 || started < node.agent_started_ms) {
    node.agent_started_ms = started;
  }
  return again;
}

// What the agent's health check says (RegisterAgent/Heartbeat.unhealthy), as printable text of a
// bounded size; logged when it changes, and added to `events` (the node's events to add).
void ReadHealth(const flatbuffers::String* reported, NodeRecord& node,
                std::vector<std::string>& events) {
  std::string problem =
      TruncateUtf8(ValidUtf8(Str(reported), /*printable=*/true), kMaxUnhealthyBytes);
  if (problem == node.unhealthy) return;
  if (problem.empty()) {
    spdlog::info("node {} passes its health check again: new replicas may go there", node.node_id);
    events.push_back("passes its health check again");
  } else {
    spdlog::warn("node {} fails its health check: {}; nothing new is placed there", node.node_id,
                 problem);
    events.push_back("fails its health check: " + problem);
  }
  node.unhealthy = std::move(problem);
}

// Which of its GPUs the agent finds unfit (RegisterAgent/Heartbeat.unhealthy_gpus): those of its
// registered GPUs, each reason printable text of a bounded size; logged when it changes, and
// added to `events`.
void ReadGpuHealth(const flatbuffers::Vector<flatbuffers::Offset<wire::UnhealthyGpu>>* reported,
                   NodeRecord& node, std::vector<std::string>& events) {
  std::map<int, std::string> unhealthy;
  if (reported != nullptr) {
    for (const wire::UnhealthyGpu* gpu : *reported) {
      if (gpu == nullptr) continue;
      const bool known =
          std::any_of(node.gpus.begin(), node.gpus.end(),
                      [&](const wire::GpuInfoT& g) { return g.index == gpu->index(); });
      if (!known) continue;  // not a GPU it offers
      std::string why =
          TruncateUtf8(ValidUtf8(Str(gpu->reason()), /*printable=*/true), kMaxUnhealthyBytes);
      unhealthy[gpu->index()] = why.empty() ? "unfit (no reason given)" : std::move(why);
    }
  }
  if (unhealthy == node.unhealthy_gpus) return;
  for (const auto& [index, why] : unhealthy) {
    auto was = node.unhealthy_gpus.find(index);
    if (was == node.unhealthy_gpus.end() || was->second != why) {
      spdlog::warn("node {}: GPU {} is unfit for work: {}; nothing new is placed on it",
                   node.node_id, index, why);
      events.push_back("GPU " + std::to_string(index) + " unfit: " + why);
    }
  }
  for (const auto& [index, why] : node.unhealthy_gpus) {
    if (unhealthy.count(index) == 0) {
      spdlog::info("node {}: GPU {} is fit again: new replicas may use it", node.node_id, index);
      events.push_back("GPU " + std::to_string(index) + " fit again");
    }
  }
  node.unhealthy_gpus = std::move(unhealthy);
}

// Flapping: a health check or a GPU that keeps failing and passing again, or an agent that keeps
// crashing and being started again (systemd's Restart=), would fill a node's history
// (kNodeEventsKept) with its changes alone, pushing out what came before. Its changes within
// kFlapWindowMs of the one before fold into the newest event, rewritten in place (the same seq:
// the store replaces the row): after "fails its health check: X", "passes its health check
// again" and "fails its health check: X" read "its health check changed 2 times since the event
// before; the last: fails its health check: X", counting on while the flapping goes on; an
// agent's starts, "its agent started again 3 times since the event before; the last: ...".
constexpr int64_t kFlapWindowMs = 10 * 60 * 1000;
constexpr std::string_view kFlapMiddle = " times since the event before; the last: ";

// What an event that folds is about, and what its subject did: ("its health check", "changed"),
// ("GPU 3", "changed"), ("its agent", "started again"); empty for any other event.
struct FlapSubject {
  std::string subject;
  std::string_view verb;
  bool operator==(const FlapSubject&) const = default;
  bool empty() const { return subject.empty(); }
};

FlapSubject FlapSubjectOf(std::string_view text) {
  if (text.starts_with("fails its health check: ") || text == "passes its health check again") {
    return {"its health check", "changed"};
  }
  if (text.starts_with("its agent started again ")) return {"its agent", "started again"};
  if (!text.starts_with("GPU ")) return {};
  const size_t digits = text.find_first_not_of("0123456789", 4);
  if (digits == 4 || digits == std::string_view::npos) return {};
  const std::string_view rest = text.substr(digits);
  if (!rest.starts_with(" unfit: ") && rest != " fit again") return {};
  return {std::string(text.substr(0, digits)), "changed"};
}

// A fold's subject and count (("GPU 3", "changed"), 4) when `text` is one; else ({}, 0).
std::pair<FlapSubject, int64_t> FoldOf(std::string_view text) {
  const size_t middle = text.find(kFlapMiddle);
  if (middle == std::string_view::npos) return {{}, 0};
  FlapSubject subject = FlapSubjectOf(text.substr(middle + kFlapMiddle.size()));
  const std::string head = subject.subject + " " + std::string(subject.verb) + " ";
  if (subject.empty() || !text.starts_with(head) || middle < head.size()) return {{}, 0};
  const std::string_view count = text.substr(head.size(), middle - head.size());
  if (count.empty() || count.size() > 12 ||
      count.find_first_not_of("0123456789") != std::string_view::npos) {
    return {{}, 0};
  }
  return {std::move(subject), std::stoll(std::string(count))};
}

// The text the newest of `kept` becomes when `text` (an event that flaps) folds into it, or
// nullopt where it is told as an event of its own.
std::optional<std::string> FoldedFlap(const std::vector<NodeEvent>& kept, const std::string& text,
                                      int64_t now_ms) {
  const FlapSubject subject = FlapSubjectOf(text);
  if (subject.empty() || kept.size() < 2) return std::nullopt;
  const NodeEvent& last = kept.back();
  const NodeEvent& before = kept[kept.size() - 2];
  if (now_ms - last.time_ms > kFlapWindowMs || FlapSubjectOf(before.text) != subject) {
    return std::nullopt;
  }
  int64_t changes = 0;
  // A fold first: an agent's ("its agent started again 2 times ...") reads as a start too.
  if (auto [folded, count] = FoldOf(last.text); folded == subject) {
    changes = count + 1;
  } else if (FlapSubjectOf(last.text) == subject) {
    changes = 2;  // the newest event and this one
  } else {
    return std::nullopt;
  }
  return subject.subject + " " + std::string(subject.verb) + " " + std::to_string(changes) +
         std::string(kFlapMiddle) + text;
}

std::vector<int> Ports(const flatbuffers::Vector<int32_t>* ports) {
  // An empty list is sent as no list at all.
  return ports ? std::vector<int>(ports->begin(), ports->end()) : std::vector<int>();
}

}  // namespace

NodeRegistry::NodeRegistry(int64_t heartbeat_timeout_ms)
    : heartbeat_timeout_ms_(heartbeat_timeout_ms) {}

int64_t NodeRegistry::heartbeat_interval_ms() const {
  return HeartbeatIntervalMs(heartbeat_timeout_ms_);
}

Status CheckAgentNames(const wire::RegisterAgent& req) {
  const std::pair<const char*, const flatbuffers::String*> names[] = {
      {"node_id", req.node_id()},
      {"address", req.address()},
      {"port_domain", req.port_domain()},
      {"version", req.version()}};
  for (const auto& [field, value] : names) {
    COHORT_RETURN_IF_ERROR(
        CheckPrintableText(Str(value), kMaxNodeNameBytes, "RegisterAgent." + std::string(field)));
  }
  return Status::Ok();
}

NodeRegistry::Registration NodeRegistry::Register(const wire::RegisterAgent& req,
                                                  const std::string& peer, int64_t now_ms) {
  std::string node_id = Str(req.node_id());
  Registration reg;
  reg.returning = nodes_.count(node_id) > 0;
  NodeRecord& node = nodes_[node_id];
  ++capacity_version_;
  reg.was_lost = reg.returning && !node.ready;
  if (reg.returning) reg.last_heard_ms = node.last_heartbeat_ms;
  reg.node = &node;
  node.node_id = node_id;
  node.address = Str(req.address());
  if (node.address.empty()) node.address = node_id;
  const std::string version_before = std::exchange(node.version, Str(req.version()));
  std::string domain = Str(req.port_domain());
  SetPortDomain(node, domain.empty() ? "address " + node.address : std::move(domain));
  node.gpus.clear();
  if (req.gpus()) {
    for (const auto* g : *req.gpus()) {
      wire::GpuInfoT info;
      g->UnPackTo(&info);
      info.model = AgentText(g->model());
      info.uuid = AgentText(g->uuid());
      node.gpus.push_back(std::move(info));
    }
  }
  node.cpus = req.cpus();
  node.memory_mb = req.memory_mb();
  node.agent_labels.clear();
  if (req.labels()) {
    for (const auto* kv : *req.labels()) {
      std::string key = Str(kv->key()), value = Str(kv->value());
      // An agent checks its --label; one that sends what no selector could name is told off.
      if (Status bad = CheckNodeLabel(key, value);
          !bad.ok() || node.agent_labels.size() >= kMaxNodeLabels) {
        spdlog::warn(
            "node {}: label ignored: {}", node_id,
            bad.ok() ? "more than " + std::to_string(kMaxNodeLabels) + " labels" : bad.message());
        continue;
      }
      node.agent_labels[std::move(key)] = std::move(value);
    }
  }
  node.last_heartbeat_ms = now_ms;
  node.ready = true;
  node.lost_why.clear();
  node.lost_while_answering = false;
  next_loss_check_ms_ = std::min(next_loss_check_ms_, now_ms + heartbeat_timeout_ms_ + 1);
  node.draining = false;
  std::vector<std::string> events;
  const std::string agent =
      node.version.empty() ? "an agent of unknown version" : "cohort-agent " + node.version;
  auto last = events_.find(node_id);
  const NodeEvent* last_event = last == events_.end() ? nullptr : &last->second->back();
  const bool restarted = AgentStartedAgain(req.uptime_ms(), AgentText(req.agent_instance()), now_ms,
                                           reg, last_event, node);
  const std::string started =
      restarted ? ", started " + FormatElapsed(req.uptime_ms()) + " ago" : std::string();
  if (reg.was_lost) {
    events.push_back("registered again (" + agent + started + "), " +
                     FormatElapsed(now_ms - *reg.last_heard_ms) + " after it was last heard");
  } else if (!reg.returning && last_event == nullptr) {
    events.push_back("registered: " + agent + " at " + node.address + ", " +
                     std::to_string(node.gpus.size()) + " GPUs, " + std::to_string(node.cpus) +
                     " CPUs, " + std::to_string(node.memory_mb) + " MiB");
  } else if (!reg.returning && last_event->text.starts_with("LOST")) {
    // LOST before the coordinator restarted: back now.
    events.push_back("registered again (" + agent + started + "), " +
                     FormatElapsed(now_ms - last_event->time_ms) + " after it was LOST");
  } else if (restarted && reg.returning) {
    // A stop and start, a crash and systemd's restart, a reboot: quick enough not to be LOST.
    events.push_back(
        "its agent started again " + FormatElapsed(req.uptime_ms()) + " ago (" + agent +
        (version_before != node.version && !version_before.empty() ? ", was " + version_before
                                                                   : "") +
        "), " + FormatElapsed(now_ms - *reg.last_heard_ms) + " after it was last heard");
  } else if (restarted) {
    events.push_back("its agent started " + FormatElapsed(req.uptime_ms()) + " ago (" + agent +
                     "), after the last event here: a start this coordinator did not see (it was "
                     "not running, or not reached)");
  } else if (reg.returning && version_before != node.version) {
    events.push_back("its agent is now " + agent + " (was " +
                     (version_before.empty() ? "of unknown version" : version_before) + ")");
  }
  if (std::string undone = AgentText(req.live_restart_undone()); !undone.empty()) {
    std::string text =
        "its agent's live restart was undone: " + undone + "; it runs " + agent + " as before";
    // The agent tells it until a registration is answered: two of its registrations may.
    if (last_event == nullptr || last_event->text != text) events.push_back(std::move(text));
  }
  ReadHealth(req.unhealthy(), node, events);
  ReadGpuHealth(req.unhealthy_gpus(), node, events);
  for (std::string& text : events) AddEvent(node_id, now_ms, std::move(text), false);
  node.health_rechecking = false;
  ApplySettings(node, SettingsOf(node_id));
  node.listening_ports = Ports(req.listening_ports());
  node.peer = peer;
  node.storage = NodeStorage{};
  ReadStorage(req.storage(), node.storage);
  JudgeStorage(storage_root(), storage_ ? storage_->tokens() : StorageTokens{}, node.storage);
  spdlog::info("node {} {} ({} GPUs, {} CPUs, {} MiB) at {}, agent {}", node_id,
               reg.was_lost ? "came back" : (reg.returning ? "re-registered" : "registered"),
               node.gpus.size(), node.cpus, node.memory_mb, node.address,
               node.version.empty() ? "of unknown version" : node.version);
  return reg;
}

bool NodeRegistry::Heartbeat(const wire::Heartbeat& req, const std::string& peer, int64_t now_ms) {
  NodeRecord* node = FindReady(Str(req.node_id()));
  if (node == nullptr) return false;
  node->last_heartbeat_ms = now_ms;
  node->peer = peer;
  node->listening_ports = Ports(req.listening_ports());
  ReadStorage(req.storage(), node->storage);
  JudgeStorage(storage_root(), storage_ ? storage_->tokens() : StorageTokens{}, node->storage);
  std::vector<std::string> events;
  ReadHealth(req.unhealthy(), *node, events);
  ReadGpuHealth(req.unhealthy_gpus(), *node, events);
  node->health_rechecking = req.health_rechecking();
  if (req.draining() && !node->draining) {
    node->draining = true;
    spdlog::info("node {} is draining (its agent is shutting down): nothing new is placed there",
                 node->node_id);
    events.push_back("its agent is shutting down: nothing new is placed there");
  }
  for (std::string& text : events) AddEvent(node->node_id, now_ms, std::move(text), false);
  return true;
}

std::vector<std::pair<std::string, std::string>> NodeRegistry::CheckLost(int64_t now_ms) {
  std::vector<std::pair<std::string, std::string>> lost;
  // A pass comes with every message (a thousand agents: a thousand heartbeats a second), so the
  // nodes are walked only once a deadline may have passed.
  if (now_ms < next_loss_check_ms_) return lost;
  int64_t next = std::numeric_limits<int64_t>::max();
  for (auto& [id, node] : nodes_) {
    if (!node.ready) continue;
    if (now_ms - node.last_heartbeat_ms > heartbeat_timeout_ms_) {
      node.ready = false;
      std::string why = "no heartbeat for " + FormatDuration(now_ms - node.last_heartbeat_ms) +
                        " (timeout " + FormatDuration(heartbeat_timeout_ms_) + ")";
      spdlog::warn("node {} LOST: {}", id, why);
      AddEvent(id, now_ms, "LOST: " + why, false);
      node.lost_why = why;
      node.lost_while_answering = false;
      lost.emplace_back(id, std::move(why));
    } else {
      next = std::min(next, node.last_heartbeat_ms + heartbeat_timeout_ms_ + 1);
    }
  }
  next_loss_check_ms_ = next;
  return lost;
}

bool NodeRegistry::EndSession(const std::string& node_id, std::string why, int64_t now_ms) {
  NodeRecord* node = FindReady(node_id);
  if (node == nullptr) return false;
  AddEvent(node_id, now_ms, "LOST: " + why, false);
  node->ready = false;
  node->peer.clear();
  node->lost_why = std::move(why);
  node->lost_while_answering = true;
  return true;
}

NodeRecord* NodeRegistry::FindReady(const std::string& node_id) {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() || !it->second.ready ? nullptr : &it->second;
}

const NodeRecord* NodeRegistry::Find(const std::string& node_id) const {
  auto it = nodes_.find(node_id);
  return it == nodes_.end() ? nullptr : &it->second;
}

std::string NodeRegistry::AddressOf(const std::string& node_id) const {
  const NodeRecord* node = Find(node_id);
  return node == nullptr ? node_id : node->address;
}

std::optional<int64_t> NodeRegistry::LastHeardMs(const std::string& node_id) const {
  const NodeRecord* node = Find(node_id);
  if (node == nullptr || !node->ready) return std::nullopt;
  return node->last_heartbeat_ms;
}

std::string NodeRegistry::Unhealthy(const std::string& node_id) const {
  const NodeRecord* node = Find(node_id);
  return node == nullptr ? "" : node->unhealthy;
}

std::map<int, std::string> NodeRegistry::UnhealthyGpus(const std::string& node_id) const {
  const NodeRecord* node = Find(node_id);
  return node == nullptr ? std::map<int, std::string>() : node->unhealthy_gpus;
}

bool NodeRegistry::HealthRechecking(const std::string& node_id) const {
  const NodeRecord* node = Find(node_id);
  return node != nullptr && node->ready && node->health_rechecking;
}

void NodeRegistry::RestoreSettings(const std::map<std::string, NodeSettings>& stored) {
  for (const auto& [id, settings] : stored) {
    if (settings.empty()) continue;
    settings_[id] = settings;
    if (auto it = nodes_.find(id); it != nodes_.end()) ApplySettings(it->second, settings);
  }
}

Status NodeRegistry::ChangeSettings(const std::string& node_id,
                                    const std::function<Status(NodeSettings&)>& change,
                                    bool* changed) {
  *changed = false;
  auto node = nodes_.find(node_id);
  if (node == nodes_.end() && !settings_.count(node_id)) {
    return NotFound("no node '" + node_id + "'");
  }
  const NodeSettings before = SettingsOf(node_id);
  NodeSettings after = before;
  COHORT_RETURN_IF_ERROR(change(after));
  if (after == before) return Status::Ok();
  *changed = true;
  pending_settings_.emplace(node_id, before);  // keeps the first "before" of the pass
  if (after.empty()) {
    settings_.erase(node_id);
  } else {
    settings_[node_id] = after;
  }
  if (node != nodes_.end()) ApplySettings(node->second, after);
  return Status::Ok();
}

void NodeRegistry::ApplySettings(NodeRecord& node, const NodeSettings& settings) {
  node.admin = settings.admin;
  node.cordon_note = settings.note;
  node.label_edits = settings.labels;
  if (node.cordoned_gpus != settings.gpus) {
    node.cordoned_gpus = settings.gpus;
    ++capacity_version_;
  }
  NodeLabels labels = ApplyNodeLabelEdits(node.agent_labels, settings.labels);
  if (labels != node.labels) {
    node.labels = std::move(labels);
    ++capacity_version_;
  }
}

namespace {

// " by alice: GPU 3 ECC errors": what a node's event and log line say of an admin's change.
std::string ByWhomWhy(const AdminAuthor& author) {
  std::string text = author.by.empty() ? " by an admin" : " by " + author.by;
  if (!author.reason.empty()) text += ": " + author.reason;
  return text;
}

}  // namespace

Status NodeRegistry::SetAdmin(const std::string& node_id, NodeAdmin admin,
                              const AdminAuthor& author) {
  bool changed = false;
  COHORT_RETURN_IF_ERROR(ChangeSettings(
      node_id,
      [&](NodeSettings& settings) {
        settings.admin = admin;
        settings.note =
            NextCordonNote(settings, settings.note, author.reason, author.by, author.now_ms);
        return Status::Ok();
      },
      &changed));
  const std::string what =
      std::string(admin == NodeAdmin::kNone ? "uncordoned" : NodeAdminName(admin)) +
      ByWhomWhy(author);
  spdlog::info("node {}: {}{}", node_id, what,
               admin == NodeAdmin::kNone ? "" : "; nothing new is placed there");
  if (changed) AddEvent(node_id, author.now_ms, what, true);
  return Status::Ok();
}

Status NodeRegistry::CordonGpus(const std::string& node_id, const std::set<int>& gpus, bool cordon,
                                const AdminAuthor& author) {
  const NodeRecord* node = Find(node_id);
  if (node == nullptr && !settings_.count(node_id)) return NotFound("no node '" + node_id + "'");
  if (cordon && node == nullptr) {
    return FailedPrecondition("node " + node_id +
                              " has not registered since the coordinator started: its GPUs are "
                              "not known yet");
  }
  const int count = node == nullptr ? kMaxGpusPerNode : static_cast<int>(node->gpus.size());
  for (int gpu : gpus) {
    if (gpu < 0 || gpu >= count) {
      return InvalidArgument(
          "node " + node_id + " has " + std::to_string(count) + " GPU" + (count == 1 ? "" : "s") +
          (count > 0 ? " (0-" + std::to_string(count - 1) + ")" : std::string()) + ": " +
          std::to_string(gpu) + " is none of them");
    }
  }
  bool changed = false;
  COHORT_RETURN_IF_ERROR(ChangeSettings(
      node_id,
      [&](NodeSettings& settings) {
        for (int gpu : gpus) {
          if (cordon) {
            settings.gpus.insert(gpu);
          } else {
            settings.gpus.erase(gpu);
          }
        }
        settings.note =
            NextCordonNote(settings, settings.note, author.reason, author.by, author.now_ms);
        return Status::Ok();
      },
      &changed));
  const std::string what = std::string(gpus.size() == 1 ? "GPU " : "GPUs ") + FormatGpuSet(gpus) +
                           (cordon ? " cordoned" : " uncordoned") + ByWhomWhy(author);
  const std::string now = FormatGpuSet(SettingsOf(node_id).gpus);
  spdlog::info("node {}: {}; cordoned now: {}", node_id, what, now.empty() ? "none" : now);
  if (changed) AddEvent(node_id, author.now_ms, what, true);
  return Status::Ok();
}

Status NodeRegistry::EditLabels(const std::string& node_id, const NodeLabelEdits& edits, bool reset,
                                const AdminAuthor& author) {
  const NodeRecord* node = Find(node_id);
  bool changed = false;
  auto edit = [&](NodeSettings& settings) {
    if (reset) settings.labels.clear();
    for (const auto& [key, value] : edits) settings.labels[key] = value;
    if (settings.labels.size() > kMaxNodeLabels) {
      return InvalidArgument("node " + node_id + " would keep edits of " +
                             std::to_string(settings.labels.size()) + " label keys (at most " +
                             std::to_string(kMaxNodeLabels) + "): `cohort label " + node_id +
                             " --reset` drops them");
    }
    if (node != nullptr) {
      const size_t count = ApplyNodeLabelEdits(node->agent_labels, settings.labels).size();
      if (count > kMaxNodeLabels) {
        return InvalidArgument("node " + node_id + " would carry " + std::to_string(count) +
                               " labels (at most " + std::to_string(kMaxNodeLabels) + ")");
      }
    }
    return Status::Ok();
  };
  COHORT_RETURN_IF_ERROR(ChangeSettings(node_id, edit, &changed));
  std::string what = std::string(reset ? "labels reset" : "labels edited") + ByWhomWhy(author);
  if (!edits.empty()) what += ": " + FormatNodeLabelEdits(edits);
  spdlog::info("node {}: {}; its edits now: {}", node_id, what,
               FormatNodeLabelEdits(SettingsOf(node_id).labels));
  if (changed) AddEvent(node_id, author.now_ms, std::move(what), true);
  return Status::Ok();
}

NodeSettings NodeRegistry::SettingsOf(const std::string& node_id) const {
  auto it = settings_.find(node_id);
  return it == settings_.end() ? NodeSettings{} : it->second;
}

void NodeRegistry::SetPortDomain(NodeRecord& node, std::string domain) {
  if (!node.port_domain.empty() && node.port_domain == domain) return;
  ReleasePortDomain(node);
  PortDomainUse& use = port_domains_[domain];
  if (use.nodes++ == 0) {
    if (free_port_domain_ids_.empty()) {
      use.id = next_port_domain_id_++;
    } else {
      use.id = free_port_domain_ids_.back();
      free_port_domain_ids_.pop_back();
    }
  }
  node.port_domain = std::move(domain);
  node.port_domain_id = use.id;
}

void NodeRegistry::ReleasePortDomain(const NodeRecord& node) {
  auto it = port_domains_.find(node.port_domain);
  if (node.port_domain.empty() || it == port_domains_.end()) return;
  if (--it->second.nodes == 0) {
    free_port_domain_ids_.push_back(it->second.id);
    port_domains_.erase(it);
  }
}

Status NodeRegistry::Forget(const std::string& node_id) {
  auto node = nodes_.find(node_id);
  if (node == nodes_.end() && !settings_.count(node_id)) {
    return NotFound("no node '" + node_id + "'");
  }
  if (node != nodes_.end() && node->second.ready) {
    return FailedPrecondition("node " + node_id +
                              " is not LOST (its agent is heard from): stop its agent first, or "
                              "`cohort drain` it");
  }
  if (auto it = settings_.find(node_id); it != settings_.end()) {
    pending_settings_.emplace(node_id, it->second);
    settings_.erase(it);
  }
  if (node != nodes_.end()) {
    ReleasePortDomain(node->second);
    nodes_.erase(node);
    ++capacity_version_;
  }
  events_.erase(node_id);
  std::erase_if(pending_events_, [&](const PendingEvent& e) { return e.node_id == node_id; });
  forgotten_.push_back(node_id);
  spdlog::info("node {} forgotten", node_id);
  return Status::Ok();
}

std::map<std::string, NodeSettings> NodeRegistry::PendingSettings() const {
  std::map<std::string, NodeSettings> changes;
  for (const auto& [id, before] : pending_settings_) changes[id] = SettingsOf(id);
  return changes;
}

void NodeRegistry::RevertSettings() {
  for (const auto& [id, before] : pending_settings_) {
    if (before.empty()) {
      settings_.erase(id);
    } else {
      settings_[id] = before;
    }
    if (auto it = nodes_.find(id); it != nodes_.end()) ApplySettings(it->second, before);
  }
  pending_settings_.clear();
  // The admins' changes were undone: so are their events.
  std::erase_if(pending_events_, [&](const PendingEvent& e) {
    if (!e.admin) return false;
    if (auto it = events_.find(e.node_id); it != events_.end()) {
      std::vector<NodeEvent> kept = *it->second;
      std::erase_if(kept, [&](const NodeEvent& k) { return k.seq == e.event.seq; });
      SetEvents(e.node_id, std::move(kept));
    }
    return true;
  });
}

void NodeRegistry::RestoreEvents(std::map<std::string, std::vector<NodeEvent>> stored) {
  for (auto& [id, events] : stored) SetEvents(id, std::move(events));
}

void NodeRegistry::SetEvents(const std::string& node_id, std::vector<NodeEvent> events) {
  if (events.size() > kNodeEventsKept) {
    events.erase(events.begin(), events.end() - static_cast<std::ptrdiff_t>(kNodeEventsKept));
  }
  if (events.empty()) {
    events_.erase(node_id);
  } else {
    events_[node_id] = std::make_shared<const std::vector<NodeEvent>>(std::move(events));
  }
}

std::vector<NodeEvent> NodeRegistry::EventsOf(const std::string& node_id) const {
  auto it = events_.find(node_id);
  return it == events_.end() ? std::vector<NodeEvent>() : *it->second;
}

void NodeRegistry::AddAdminEvent(const std::string& node_id, int64_t now_ms, std::string text) {
  AddEvent(node_id, now_ms, std::move(text), true);
}

void NodeRegistry::AddEvent(const std::string& node_id, int64_t now_ms, std::string text,
                            bool admin) {
  std::vector<NodeEvent> kept = EventsOf(node_id);
  if (std::optional<std::string> folded = admin ? std::nullopt : FoldedFlap(kept, text, now_ms)) {
    NodeEvent event{kept.back().seq, now_ms, std::move(*folded)};
    kept.back() = event;
    SetEvents(node_id, std::move(kept));
    // Stored again under its seq; a version not yet stored is replaced in the queue.
    auto queued = std::find_if(
        pending_events_.rbegin(), pending_events_.rend(),
        [&](const PendingEvent& e) { return e.node_id == node_id && e.event.seq == event.seq; });
    if (queued != pending_events_.rend()) {
      queued->event = std::move(event);
    } else {
      pending_events_.push_back({node_id, std::move(event), false});
    }
    return;
  }
  NodeEvent event{kept.empty() ? 1 : kept.back().seq + 1, now_ms, std::move(text)};
  kept.push_back(event);
  SetEvents(node_id, std::move(kept));
  pending_events_.push_back({node_id, std::move(event), admin});
  // While the store keeps failing, the oldest go first: a history is told, never acted on.
  while (pending_events_.size() > kMaxPendingNodeEvents) pending_events_.pop_front();
}

std::vector<std::pair<std::string, NodeEvent>> NodeRegistry::PendingEvents() const {
  std::vector<std::pair<std::string, NodeEvent>> out;
  out.reserve(pending_events_.size());
  for (const PendingEvent& e : pending_events_) out.emplace_back(e.node_id, e.event);
  return out;
}

void NodeRegistry::EventsStored() {
  pending_events_.clear();
  forgotten_.clear();
}

}  // namespace cohort::coordinator
