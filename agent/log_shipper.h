// LogShipper ships one replica attempt's log file to the coordinator (`cohort logs` reads it
// there), in LogChunks of at most `chunk_bytes` from the offset the coordinator last
// acknowledged, one chunk in flight (Outbox stream {kLog, key}), resent after `resend_after`.
//
// A LogAck moves the acknowledged offset, back too when the coordinator holds less than was
// sent (it restarted and kept less), so shipping resumes from what it holds and nothing is lost.
// The last chunk says eof; it is sent only once the attempt has ended (nothing writes the file
// any more), and the shipper is done when the coordinator acknowledges it. A transient refusal
// (FAILED_PRECONDITION, UNAVAILABLE, RESOURCE_EXHAUSTED) is retried after `resend_after`; any
// other error ends shipping, with a warning.
//
// Thread safety: none; the agent loop owns it. Lifetime: `outbox` outlives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "agent/outbox.h"
#include "common/status.h"

namespace cohort::agent {

class LogShipper {
 public:
  // `key` names the attempt's streams in the outbox; job, replica and attempt go into each chunk.
  // `acked`: the bytes the coordinator already holds (a restarted agent's, agent/handoff.h).
  LogShipper(Outbox& outbox, std::string key, std::string job, std::string replica, int attempt,
             std::string path, size_t chunk_bytes, std::chrono::milliseconds resend_after,
             uint64_t acked = 0);

  // Sends the next chunk if the stream is ready and there is something to send. `ended`: the
  // attempt's processes are gone, so what the file holds is all there will be.
  void Ship(bool ended);
  // The coordinator's LogAck (next_offset: the bytes it holds) or error for one of our chunks.
  void OnLogAck(const Outbox::Answer& answer, uint64_t next_offset);
  void OnError(const Outbox::Answer& answer, const Status& error);

  // The whole log reached the coordinator (or it refused the log for good).
  bool done() const { return done_; }
  const std::string& path() const { return path_; }
  // Bytes the coordinator holds (its last LogAck).
  uint64_t acked() const { return acked_; }

 private:
  Outbox::Stream stream() const { return {Outbox::Kind::kLog, key_}; }

  Outbox& outbox_;
  std::string key_, job_, replica_;
  int attempt_;
  std::string path_;
  size_t chunk_bytes_;
  std::chrono::milliseconds resend_after_;
  uint64_t acked_ = 0;     // the coordinator holds [0, acked_)
  uint64_t sent_end_ = 0;  // the chunk in flight ends there
  bool sent_eof_ = false;  // and says eof
  bool done_ = false;
};

}  // namespace cohort::agent
