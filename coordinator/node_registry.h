// NodeRegistry is the coordinator's table of nodes: what each agent registered (address, GPUs,
// CPUs, memory, labels, the ports it listens on), when it was last heard from, and whether it is
// READY, DRAINING (its agent is shutting down: nothing new is placed there) or LOST (silent for
// heartbeat_timeout), and what its agent's health check last said (NodeRecord::unhealthy: while
// it fails nothing new is placed there). It knows nothing of jobs: the Coordinator hands what it
// learns (a lost node, the replicas a re-registering agent reports) to the JobController, which
// decides each replica's fate. Nodes live in memory; after a coordinator restart they come back as
// agents register.
//
// What an admin sets on a node (NodeSettings, state.h: a cordon or drain, label edits) is the one
// thing about nodes that is stored: SetAdmin and EditLabels change it (also for a node known only
// from the store, not registered since the restart), it is applied again at each of the agent's
// re-registrations, and each change is queued for the pass's commit (PendingSettings;
// SettingsStored after the commit, RevertSettings after a failed one puts the settings back as
// they were). Forget removes a LOST node and its settings.
//
// Each node's history (NodeEvent, state.h) is kept here too: what the registry sees happen (a
// registration, a loss, a return, a health check or GPU failing or passing again, an agent
// shutting down) and what admins change, the newest kNodeEventsKept per node, each queued for
// the pass's commit (PendingEvents; EventsStored after it). A failed commit drops the events of
// the admins' changes it undid (RevertSettings) and keeps the rest queued: they happened. A health
// check or GPU flapping (failing and passing again, each change within 10 minutes of the one
// before) folds into its newest event, rewritten under the same seq, so it cannot push the rest
// of the history out.
//
// Thread safety: none; the coordinator loop calls it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/messaging.h"
#include "common/schema/cohort_generated.h"
#include "coordinator/job_controller.h"
#include "coordinator/state.h"
#include "coordinator/storage_probe.h"

namespace cohort::coordinator {

// The longest health-check reason kept from an agent (printable UTF-8; longer is cut).
inline constexpr size_t kMaxUnhealthyBytes = 512;
// The longest GPU model or UUID, storage root, token or error kept from an agent (printable
// UTF-8; longer is cut).
inline constexpr size_t kMaxAgentTextBytes = 512;
// The most node events waiting for a commit (while the store fails, the oldest go first).
inline constexpr size_t kMaxPendingNodeEvents = 10'000;

// What names the node in RegisterAgent (its node id, address, port domain and version: stored,
// shown, put in events and in its replicas' environment) must be printable UTF-8 of at most
// kMaxNodeNameBytes (common/messaging.h): kInvalidArgument naming the field otherwise, and the
// registration is refused. The rest of an agent's text (GPU models, its storage report) is made so
// as it is kept.
Status CheckAgentNames(const wire::RegisterAgent& req);

// Who changes a node's settings, when, and the reason given ("" for none): what its CordonNote
// keeps (NextCordonNote) and its events tell.
struct AdminAuthor {
  std::string reason;
  std::string by;
  int64_t now_ms = 0;
};

class NodeRegistry : public NodeHealth {
 public:
  explicit NodeRegistry(int64_t heartbeat_timeout_ms);

  // How often agents are asked to heartbeat (HeartbeatIntervalMs of the timeout).
  int64_t heartbeat_interval_ms() const;

  struct Registration {
    NodeRecord* node = nullptr;
    bool returning = false;  // known before (re-registered, or came back from LOST)
    bool was_lost = false;
    // A returning node: when it was last heard from before this registration.
    std::optional<int64_t> last_heard_ms;
  };
  // Registers (or re-registers) `req.node_id`, which must not be empty; READY again.
  Registration Register(const wire::RegisterAgent& req, const std::string& peer, int64_t now_ms);
  // A heartbeat; false when the node is unknown or LOST (it must register again).
  bool Heartbeat(const wire::Heartbeat& req, const std::string& peer, int64_t now_ms);
  // Any other message from a READY node's agent counts as hearing from it.
  void Touch(NodeRecord& node, int64_t now_ms) { node.last_heartbeat_ms = now_ms; }
  // The coordinator sent `node_id`'s agent a message of its own (NodeRecord::last_sent_ms).
  void NoteSent(const std::string& node_id, int64_t now_ms) {
    auto it = nodes_.find(node_id);
    if (it != nodes_.end()) it->second.last_sent_ms = now_ms;
  }

  // Ends `node_id`'s session now (its agent's key was removed): LOST while it still answered,
  // for `why`, and its routing id is forgotten, so nothing more is sent to that connection; false
  // when it was not READY. The node is READY again only by registering, with a listed key.
  bool EndSession(const std::string& node_id, std::string why, int64_t now_ms);
  // Marks every READY node silent past the timeout LOST (fell silent: NodeRecord::lost_why and
  // silent_since_ms say so); returns (node id, why) for each. Called every loop pass: it walks
  // the nodes only once the earliest deadline it knows of has come.
  std::vector<std::pair<std::string, std::string>> CheckLost(int64_t now_ms);

  NodeRecord* FindReady(const std::string& node_id);
  const NodeRecord* Find(const std::string& node_id) const;
  const std::map<std::string, NodeRecord>& nodes() const { return nodes_; }
  // Moves whenever a node's capacity may have changed: it registered (again), was forgotten, or
  // an admin changed its labels.
  // Whatever is derived from every node's capacity is built again only when this moved.
  uint64_t capacity_version() const { return capacity_version_; }
  // The address replicas use to reach `node_id` (the node id itself when unknown).
  std::string AddressOf(const std::string& node_id) const;

  std::optional<int64_t> LastHeardMs(const std::string& node_id) const override;
  std::string Unhealthy(const std::string& node_id) const override;
  std::map<int, std::string> UnhealthyGpus(const std::string& node_id) const override;
  bool HealthRechecking(const std::string& node_id) const override;

  // ---- admin settings (see the header comment)
  // The stored settings, at start (before any agent registers).
  void RestoreSettings(const std::map<std::string, NodeSettings>& stored);
  // Sets `node_id`'s cordon or drain, by `author` (its note: NextCordonNote); kNotFound when the
  // node is neither registered nor has stored settings.
  Status SetAdmin(const std::string& node_id, NodeAdmin admin, const AdminAuthor& author);
  // Applies `edits` over `node_id`'s label edits (after dropping them all, with `reset`): its
  // labels are its agent's with the edits applied. kNotFound as SetAdmin; kInvalidArgument, and
  // nothing changed, when the node would carry more than kMaxNodeLabels labels or keep edits of
  // more than kMaxNodeLabels keys.
  Status EditLabels(const std::string& node_id, const NodeLabelEdits& edits, bool reset,
                    const AdminAuthor& author);
  // Cordons (or, `cordon` false, uncordons) GPUs `gpus` of `node_id` alone. kNotFound as
  // SetAdmin; kInvalidArgument, and nothing changed, for a GPU the node does not have (a cordon
  // needs the node registered, to know its GPUs).
  Status CordonGpus(const std::string& node_id, const std::set<int>& gpus, bool cordon,
                    const AdminAuthor& author);
  // The settings of `node_id` (empty when none).
  NodeSettings SettingsOf(const std::string& node_id) const;
  // Removes a LOST node (and its settings); kNotFound for an unknown node, kFailedPrecondition
  // for one that is not LOST.
  Status Forget(const std::string& node_id);
  // Settings changed since the last SettingsStored/RevertSettings: node id -> the new settings
  // (empty: none, the stored row goes).
  std::map<std::string, NodeSettings> PendingSettings() const;
  void SettingsStored() { pending_settings_.clear(); }
  void RevertSettings();

  // ---- events (see the header comment)
  // The stored events, at start.
  void RestoreEvents(std::map<std::string, std::vector<NodeEvent>> stored);
  // `node_id`'s newest events, oldest first (none: empty).
  std::vector<NodeEvent> EventsOf(const std::string& node_id) const;
  // An event of an admin's change made outside the registry (drain --now's preemptions): undone
  // with the pass's settings by RevertSettings.
  void AddAdminEvent(const std::string& node_id, int64_t now_ms, std::string text);
  // Events not stored yet, in the order they happened; the nodes forgotten since.
  std::vector<std::pair<std::string, NodeEvent>> PendingEvents() const;
  std::vector<std::string> ForgottenNodes() const { return forgotten_; }
  void EventsStored();
  // Every node's events (each list shared, not copied).
  const std::map<std::string, NodeEventList>& events() const { return events_; }

  // The storage check (NodeRecord::storage is judged at each registration and heartbeat against
  // what `probe` wrote); none: every node is "no output root". `probe` outlives this.
  void SetStorageProbe(const StorageProbe* probe) { storage_ = probe; }
  // The output root agents are to check; empty: none.
  std::string storage_root() const { return storage_ ? storage_->root() : std::string(); }

 private:
  int64_t heartbeat_timeout_ms_;
  // No READY node can be past its timeout before this. Hearing from a node only moves its
  // deadline later, so this stays a lower bound between walks; a registration may bring it forward.
  int64_t next_loss_check_ms_ = 0;
  const StorageProbe* storage_ = nullptr;
  // Gives `node` the id of `domain` (and lets go of its previous one).
  void SetPortDomain(NodeRecord& node, std::string domain);
  void ReleasePortDomain(const NodeRecord& node);

  std::map<std::string, NodeRecord> nodes_;
  uint64_t capacity_version_ = 0;
  struct PortDomainUse {
    uint32_t id = 0;
    int nodes = 0;  // nodes that report it; at 0 the domain and its id are let go
  };
  std::unordered_map<std::string, PortDomainUse> port_domains_;
  // Ids of domains no node reports any more, given again first: ids stay below the number of
  // domains in use, so a round maps them to port spaces with a vector (ClusterView::SpaceOfDomain).
  std::vector<uint32_t> free_port_domain_ids_;
  uint32_t next_port_domain_id_ = 0;
  // `change` applied to `node_id`'s settings (kNotFound as SetAdmin; an error from `change`
  // changes nothing), queued for the commit and applied to the node when registered; `changed`:
  // whether the settings differ from before.
  Status ChangeSettings(const std::string& node_id,
                        const std::function<Status(NodeSettings&)>& change, bool* changed);
  // `node` takes `settings`: its admin setting, and its labels from its agent's.
  void ApplySettings(NodeRecord& node, const NodeSettings& settings);
  // Every node's admin settings (none: absent), registered or not.
  std::map<std::string, NodeSettings> settings_;
  // Changed and not yet stored: node id -> the settings before the first change.
  std::map<std::string, NodeSettings> pending_settings_;

  // Adds `text` to `node_id`'s events at `now_ms`; `admin`: undone by RevertSettings.
  void AddEvent(const std::string& node_id, int64_t now_ms, std::string text, bool admin);
  // Sets `node_id`'s events to `events`, its newest kNodeEventsKept (none: the node has none).
  void SetEvents(const std::string& node_id, std::vector<NodeEvent> events);
  std::map<std::string, NodeEventList> events_;
  struct PendingEvent {
    std::string node_id;
    NodeEvent event;
    bool admin = false;
  };
  // At most kMaxPendingEvents (the oldest go first while the store keeps failing).
  std::deque<PendingEvent> pending_events_;
  std::vector<std::string> forgotten_;
};

}  // namespace cohort::coordinator
