#include "agent/outbox.h"

namespace cohort::agent {

Outbox::Outbox(Clock& clock, Transmit transmit) : clock_(clock), transmit_(std::move(transmit)) {}

bool Outbox::Transient(const Status& error) {
  return error.code() == StatusCode::kUnavailable || error.code() == StatusCode::kResourceExhausted;
}

bool Outbox::Ready(const Stream& stream, std::chrono::milliseconds resend_after) const {
  auto it = in_flight_.find(stream);
  return it == in_flight_.end() || Now() - it->second.sent >= resend_after;
}

uint64_t Outbox::Send(const Stream& stream, uint64_t version, wire::BodyUnion body) {
  uint64_t id = transmit_(std::move(body));
  requests_[id] = Request{stream, version, Now()};
  in_flight_[stream] = InFlight{id, Now()};
  return id;
}

std::optional<Outbox::Answer> Outbox::Answered(uint64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return std::nullopt;
  Answer answer{it->second.stream, it->second.version, false};
  requests_.erase(it);
  auto flight = in_flight_.find(answer.stream);
  answer.current = flight != in_flight_.end() && flight->second.request_id == request_id;
  return answer;
}

void Outbox::Settle(const Stream& stream) { in_flight_.erase(stream); }

void Outbox::Close(const std::string& key) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    it = it->first.key == key ? in_flight_.erase(it) : std::next(it);
  }
}

void Outbox::Reset() {
  requests_.clear();
  in_flight_.clear();
}

void Outbox::ForgetOlderThan(std::chrono::milliseconds age) {
  const std::chrono::milliseconds now = Now();
  for (auto it = requests_.begin(); it != requests_.end();) {
    it = now - it->second.sent > age ? requests_.erase(it) : std::next(it);
  }
}

}  // namespace cohort::agent
