// Outbox: the agent's delivery of reports to the coordinator: replica statuses (ReplicaUpdate),
// log chunks (LogChunk) and trial measurements (TrialMeasurement), plus the heartbeats, whose
// answers it recognises. Each stream (one kind of report for one attempt) has at most one
// message in flight. A message not answered within the stream's resend interval may be lost, so
// the stream may send again: delivery is at least once, and the coordinator takes repeats as
// idempotent. Heartbeats are never resent (the next one replaces a lost one).
//
// Each message carries a version chosen by its stream (a status version, the end offset of a
// log chunk, the number of measurements acknowledged before it). An answer (Ack, ErrorReply,
// LogAck), matched by request id, tells which stream and version it answers and whether it
// answers the message in flight now or an older one (`current`). The stream decides what an
// answer means and calls Settle() once nothing of it is in flight any more; a transient error
// (Transient(): the coordinator could not take the message now, e.g. its disk is full) leaves the
// message in flight, so it is resent after the resend interval, as long as the error lasts.
//
// Reset() is for when the coordinator may have lost what was in flight (it forgot this node):
// every stream may send again at once, and answers to earlier requests are ignored.
//
// Thread safety: none; the agent loop owns it. Lifetime: `clock` outlives it.
#pragma once

#include <chrono>
#include <compare>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::agent {

class Outbox {
 public:
  enum class Kind { kHeartbeat, kStatus, kLog, kMetric };
  struct Stream {
    Kind kind;
    std::string key;  // the attempt's key; empty for heartbeats
    auto operator<=>(const Stream&) const = default;
  };
  struct Answer {
    Stream stream;
    uint64_t version = 0;
    bool current = false;  // it answers the message in flight now
  };
  // Sends one message to the coordinator and returns its request id (unique per message).
  using Transmit = std::function<uint64_t(wire::BodyUnion body)>;

  Outbox(Clock& clock, Transmit transmit);

  // True for an ErrorReply that refuses a message for now only, so that the message must be sent
  // again: UNAVAILABLE (the coordinator could not store it), RESOURCE_EXHAUSTED (its disk is
  // full, or this agent has too many requests outstanding). FAILED_PRECONDITION (the coordinator
  // does not know this node) is not: the agent registers again instead, carrying what is unacked.
  static bool Transient(const Status& error);

  // True when `stream` may send: nothing of it is in flight, or its message went out at least
  // `resend_after` ago.
  bool Ready(const Stream& stream, std::chrono::milliseconds resend_after) const;
  // Sends `body` as the stream's message in flight; returns its request id.
  uint64_t Send(const Stream& stream, uint64_t version, wire::BodyUnion body);

  // True while `request_id` is a message of this outbox that has not been answered.
  bool Awaits(uint64_t request_id) const { return requests_.count(request_id) > 0; }
  // Takes the answer to `request_id`: nullopt when the request is unknown (never sent here,
  // already answered, dropped by Reset or ForgetOlderThan). The stream stays in flight.
  std::optional<Answer> Answered(uint64_t request_id);
  // Nothing of `stream` is in flight any more: it may send at once.
  void Settle(const Stream& stream);
  // Every stream of attempt `key` is closed: nothing of it is in flight.
  void Close(const std::string& key);
  void Reset();
  // Requests unanswered for longer than `age` are not waited for any more.
  void ForgetOlderThan(std::chrono::milliseconds age);

 private:
  struct Request {
    Stream stream;
    uint64_t version = 0;
    std::chrono::milliseconds sent{0};
  };
  struct InFlight {
    uint64_t request_id = 0;
    std::chrono::milliseconds sent{0};
  };
  std::chrono::milliseconds Now() const { return std::chrono::milliseconds(clock_.NowMs()); }

  Clock& clock_;
  Transmit transmit_;
  std::map<uint64_t, Request> requests_;  // unanswered, by request id
  std::map<Stream, InFlight> in_flight_;  // the newest message of each stream
};

}  // namespace cohort::agent
