// ExecRelay carries `cohort exec` (wire::ExecInReplica) between a client and the agent that runs
// the replica (agent/exec_in_replica.h): ClientService checks the request and Forwards it, with an
// exec id of the relay's own, to the agent of the replica's node; the client is answered when
// that agent's ExecOutput comes back (AgentService hands it to OnOutput): the output itself, or
// FAILED_PRECONDITION with the agent's error (the attempt was no longer running there, too many
// commands ran there). A node lost meanwhile answers UNAVAILABLE, and no answer within the
// command's timeout plus kExecAnswerSlackMs (common/exec_limits.h) DEADLINE_EXCEEDED (Check,
// every pass). An ExecOutput the relay
// no longer waits for (answered already, or sent to a coordinator restarted since) is dropped,
// and so is one from another node than the exec went to.
//
// Nothing of it is stored: a coordinator restart forgets the execs under way (their clients'
// calls time out, and each command runs on to its own timeout). What each exec ran is noted in
// the job's events by ClientService.
//
// Thread safety: none; the coordinator loop calls it. Lifetime: `outbox` and `nodes` outlive it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/exec_limits.h"
#include "common/schema/cohort_generated.h"
#include "coordinator/node_registry.h"
#include "coordinator/outbox.h"

namespace cohort::coordinator {

class ExecRelay {
 public:
  ExecRelay(Outbox& outbox, NodeRegistry& nodes) : outbox_(outbox), nodes_(nodes) {}

  // Sends `exec` (its attempt and timeout set) to the agent of the READY node `node_id`, and
  // waits for its answer to reply to `client_peer`'s request `request_id`.
  void Forward(const std::string& client_peer, uint64_t request_id, const std::string& node_id,
               wire::ExecInReplicaT exec, int64_t now_ms);
  // The same for a step of an interactive session (wire::ExecSessionIo: its attempt set),
  // answered within the agent's hold plus kExecAnswerSlackMs.
  void Forward(const std::string& client_peer, uint64_t request_id, const std::string& node_id,
               wire::ExecSessionIoT step, int64_t now_ms);
  // An agent's ExecOutput, from node `node_id`.
  void OnOutput(const std::string& node_id, wire::ExecOutputT output);
  // Answers the execs whose node is no longer READY, or whose answer is overdue.
  void Check(int64_t now_ms);

  size_t pending() const { return pending_.size(); }

 private:
  // Notes what the agent's answer goes to, and returns its exec id and the agent's peer; 0 when
  // the node is not READY (the client is answered UNAVAILABLE).
  uint64_t Expect(const std::string& client_peer, uint64_t request_id, const std::string& node_id,
                  const std::string& what, int64_t deadline_ms, std::string* agent_peer);

  struct Pending {
    std::string client_peer;
    uint64_t request_id = 0;
    std::string node_id;
    std::string what;  // "worker-0 of job j"
    int64_t deadline_ms = 0;
  };

  Outbox& outbox_;
  NodeRegistry& nodes_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending> pending_;  // by exec id
};

}  // namespace cohort::coordinator
