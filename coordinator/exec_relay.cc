#include "coordinator/exec_relay.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/messaging.h"

namespace cohort::coordinator {

uint64_t ExecRelay::Expect(const std::string& client_peer, uint64_t request_id,
                           const std::string& node_id, const std::string& what, int64_t deadline_ms,
                           std::string* agent_peer) {
  NodeRecord* node = nodes_.FindReady(node_id);
  if (node == nullptr) {
    outbox_.ToClient(client_peer,
                     EncodeError(request_id, Unavailable("node " + node_id + ", which runs " +
                                                         what + ", is not reachable")));
    return 0;
  }
  const uint64_t id = next_id_++;
  pending_[id] = Pending{client_peer, request_id, node_id, what, deadline_ms};
  *agent_peer = node->peer;
  return id;
}

void ExecRelay::Forward(const std::string& client_peer, uint64_t request_id,
                        const std::string& node_id, wire::ExecInReplicaT exec, int64_t now_ms) {
  std::string agent;
  exec.exec_id = Expect(client_peer, request_id, node_id, exec.replica + " of job " + exec.job,
                        now_ms + exec.timeout_ms + kExecAnswerSlackMs, &agent);
  if (exec.exec_id == 0) return;
  outbox_.ToAgent(agent, Encode(0, std::move(exec)));
  nodes_.NoteSent(node_id, now_ms);
}

void ExecRelay::Forward(const std::string& client_peer, uint64_t request_id,
                        const std::string& node_id, wire::ExecSessionIoT step, int64_t now_ms) {
  std::string agent;
  step.exec_id = Expect(client_peer, request_id, node_id, step.replica + " of job " + step.job,
                        now_ms + kExecStepHoldMs + kExecAnswerSlackMs, &agent);
  if (step.exec_id == 0) return;
  outbox_.ToAgent(agent, Encode(0, std::move(step)));
  nodes_.NoteSent(node_id, now_ms);
}

void ExecRelay::OnOutput(const std::string& node_id, wire::ExecOutputT output) {
  auto it = pending_.find(output.exec_id);
  if (it == pending_.end() || it->second.node_id != node_id) {
    spdlog::info("dropping the output of exec {} from node {}: not waited for", output.exec_id,
                 node_id);
    return;
  }
  const Pending p = std::move(it->second);
  pending_.erase(it);
  if (!output.error.empty()) {
    outbox_.ToClient(p.client_peer, EncodeError(p.request_id, FailedPrecondition(output.error)));
    return;
  }
  outbox_.ToClient(p.client_peer, Encode(p.request_id, std::move(output)));
}

void ExecRelay::Check(int64_t now_ms) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Pending& p = it->second;
    Status answer;
    if (nodes_.FindReady(p.node_id) == nullptr) {
      answer =
          Unavailable("node " + p.node_id + " was lost before the command in " + p.what + " ended");
    } else if (now_ms >= p.deadline_ms) {
      answer = DeadlineExceeded("node " + p.node_id + " did not say how the command in " + p.what +
                                " ended");
    }
    if (answer.ok()) {
      ++it;
      continue;
    }
    outbox_.ToClient(p.client_peer, EncodeError(p.request_id, answer));
    it = pending_.erase(it);
  }
}

}  // namespace cohort::coordinator
