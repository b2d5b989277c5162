// Outbox holds the replies, launches and stops the coordinator produces during one pass of its
// loop. Nothing in it is sent before the pass's changes are durable (Coordinator::Commit), so no
// client or agent ever hears of a change that a crash could undo.
//
// Thread safety: none; the coordinator loop owns it.
#pragma once

#include <string>
#include <utility>
#include <vector>
#include <zmq.hpp>

namespace cohort::coordinator {

class Outbox {
 public:
  struct Outgoing {
    bool agent = false;  // the agent endpoint, else the client endpoint
    std::string peer;    // ROUTER identity
    zmq::message_t frame;
  };

  void ToClient(const std::string& peer, zmq::message_t frame) {
    queue_.push_back(Outgoing{false, peer, std::move(frame)});
  }
  void ToAgent(const std::string& peer, zmq::message_t frame) {
    queue_.push_back(Outgoing{true, peer, std::move(frame)});
  }
  void To(bool agent, const std::string& peer, zmq::message_t frame) {
    queue_.push_back(Outgoing{agent, peer, std::move(frame)});
  }
  std::vector<Outgoing> Take() {
    std::vector<Outgoing> out;
    out.swap(queue_);
    return out;
  }

 private:
  std::vector<Outgoing> queue_;
};

}  // namespace cohort::coordinator
