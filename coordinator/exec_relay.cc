#include "coordinator/exec_relay.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/messaging.h"

namespace cohort::coordinator {

void ExecRelay::Forward(const std::string& client_peer, uint64_t request_id,
                        const std::string& node_id, wire::ExecInReplicaT exec, int64_t now_ms) {
  NodeRecord* node = nodes_.FindReady(node_id);
  const std::string what = exec.replica + " of job " + exec.job;
  if (node == nullptr) {
    outbox_.ToClient(client_peer,
                     EncodeError(request_id, Unavailable("node " + node_id + ", which runs " +
                                                         what + ", is not reachable")));
    return;
  }
  const uint64_t id = next_id_++;
  exec.exec_id = id;
  pending_[id] = Pending{client_peer, request_id, node_id, what,
                         now_ms + exec.timeout_ms + kExecAnswerSlackMs};
  outbox_.ToAgent(node->peer, Encode(0, std::move(exec)));
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
