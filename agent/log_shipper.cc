#include "agent/log_shipper.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/logging.h"

namespace cohort::agent {

LogShipper::LogShipper(Outbox& outbox, std::string key, std::string job, std::string replica,
                       int attempt, std::string path, size_t chunk_bytes,
                       std::chrono::milliseconds resend_after, uint64_t acked)
    : outbox_(outbox),
      key_(std::move(key)),
      job_(std::move(job)),
      replica_(std::move(replica)),
      attempt_(attempt),
      path_(std::move(path)),
      chunk_bytes_(chunk_bytes),
      resend_after_(resend_after),
      acked_(acked) {}

void LogShipper::Ship(bool ended) {
  if (done_ || !outbox_.Ready(stream(), resend_after_)) return;
  struct stat st;
  uint64_t size = ::stat(path_.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  if (acked_ > size) {
    if (ended) done_ = true;  // the coordinator holds more than we have: nothing to add
    return;
  }
  if (acked_ == size && !ended) return;
  uint64_t length = std::min<uint64_t>(size - acked_, chunk_bytes_);
  wire::LogChunkT chunk;
  chunk.job = job_;
  chunk.replica = replica_;
  chunk.attempt = attempt_;
  chunk.offset = acked_;
  chunk.data.resize(length);
  if (length > 0) {
    int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t got = ::pread(fd, chunk.data.data(), length, static_cast<off_t>(acked_));
    ::close(fd);
    if (got < 0) return;
    chunk.data.resize(static_cast<size_t>(got));
    length = static_cast<uint64_t>(got);
  }
  // Only once nothing can write to the file any more may a chunk say eof.
  chunk.eof = ended && acked_ + length == size;
  sent_end_ = acked_ + length;
  sent_eof_ = chunk.eof;
  wire::BodyUnion body;
  body.Set(std::move(chunk));
  outbox_.Send(stream(), sent_end_, std::move(body));
}

void LogShipper::OnLogAck(const Outbox::Answer& answer, uint64_t next_offset) {
  if (!answer.current) return;  // an answer to an older chunk
  outbox_.Settle(stream());
  acked_ = next_offset;
  if (sent_eof_ && acked_ == sent_end_) done_ = true;
}

void LogShipper::OnError(const Outbox::Answer& answer, const Status& error) {
  if (!answer.current || error.ok()) return;
  if (error.code() == StatusCode::kFailedPrecondition || Outbox::Transient(error)) {
    // Passing trouble: the chunk stays in flight and goes again after the resend interval.
    spdlog::info("coordinator could not take the log of {}/{} attempt {} yet: {}", job_, replica_,
                 attempt_, error.ToString());
    return;
  }
  spdlog::warn("coordinator refused the log of {}/{} attempt {}; not shipping it further: {}", job_,
               replica_, attempt_, error.ToString());
  outbox_.Settle(stream());
  done_ = true;
}

}  // namespace cohort::agent
