// Point-to-point messages between two workers of a transport. A send of `count` elements with tag t
// to worker p matches a receive by p from this worker with tag t; between one pair, messages with
// one tag match in the order they were posted. Tags are in [0, kPointToPointTagLimit) and live in
// their own tag space (collective_call.h): messages may be in flight while collectives run.
//
// A message is a call header (kind send, type, count, tag) and the data in one transport message
// (the transport moves large ones without copies); the receiver checks the header first, so one
// that expects another count or type gets kInvalidArgument naming the sender.
#pragma once

#include <atomic>
#include <memory>

#include "collective/algorithms/collective_call.h"
#include "common/flight_recorder.h"

namespace cohort::collective {

constexpr int kPointToPointTagLimit = 1 << kTagSeqBits;

struct PointToPointOptions {
  void* data = nullptr;  // send: read until the request completes; receive: written
  size_t count = 0;
  DataType type = DataType::kF32;
  int peer = -1;  // the worker at the other end
  int tag = 0;
  int num_workers = 0;
  Deadline deadline = Deadline::max();
};

// One posted send or receive. Movable. Wait once, from one thread; the buffer belongs to the
// transport until Wait returns. Destroying a request that was not waited for cancels it (which
// poisons the transport if a send had to be abandoned).
class PointToPointRequest {
 public:
  PointToPointRequest() = default;
  PointToPointRequest(PointToPointRequest&&) = default;
  PointToPointRequest& operator=(PointToPointRequest&&) = default;

  // Blocks until the message has gone (send) or arrived (receive), or until the deadline given when
  // it was posted: kUnavailable or kDeadlineExceeded naming the peer, kInvalidArgument when the
  // sender's count or type differ from the receiver's. On an error, *poison_on_error (when set)
  // becomes true.
  Status Wait();
  bool valid() const { return header_ != nullptr; }
  // Set by the Communicator: marks it poisoned when Wait fails.
  void set_poison_on_error(std::atomic<bool>* flag) { poison_on_error_ = flag; }
  // Set by the Communicator: the request's flight-recorder entry, which Wait ends (destroyed
  // unwaited: ended as cancelled).
  void set_flight_recording(FlightRecording recording) { recording_ = std::move(recording); }

 private:
  friend StatusOr<PointToPointRequest> PostSend(Transport&, const PointToPointOptions&);
  friend StatusOr<PointToPointRequest> PostRecv(Transport&, const PointToPointOptions&);
  // PostSend (send) or PostRecv.
  static StatusOr<PointToPointRequest> Post(Transport& transport,
                                            const PointToPointOptions& options, bool send);
  Status WaitOnce();

  bool send_ = false;
  int peer_ = -1;
  Deadline deadline_{};
  CallHeader expected_;                 // receive: what this worker expects
  std::unique_ptr<CallHeader> header_;  // send: this worker's; receive: the sender's (posted)
  Request header_request_;
  Request data_request_;
  // Receive: the data receive could not be posted (a larger message from the peer was already
  // here: the transport refuses it as truncated). Reported after the header, which says why.
  Status data_post_error_;
  bool has_data_ = false;
  bool waited_ = false;
  Status status_;
  std::atomic<bool>* poison_on_error_ = nullptr;
  FlightRecording recording_;
};

// Post a send (or a receive) of options.count elements to (from) options.peer. kInvalidArgument
// for a peer that is not another worker or a tag out of range.
StatusOr<PointToPointRequest> PostSend(Transport& transport, const PointToPointOptions& options);
StatusOr<PointToPointRequest> PostRecv(Transport& transport, const PointToPointOptions& options);

}  // namespace cohort::collective
