// Point-to-point messages between two workers of a transport. A send of `count` elements with tag t
// to worker p matches a receive by p from this worker with tag t; between one pair, messages with
// one tag match in the order they were posted. Tags are in [0, kPointToPointTagLimit) and live in
// their own tag space (collective_call.h): messages may be in flight while collectives run.
//
// A message is a call header (kind send, type, count, tag) and the data in one transport message
// (the transport moves large ones without copies); the receiver checks the header first, so one
// that expects another count or type gets kInvalidArgument naming the sender.
//
// A receive from any worker (PostRecvAny) posts nothing at first: its Wait waits for a message
// header with its tag that no posted receive has taken (Transport::Probe), then receives that
// worker's message as a receive from it would, and names the worker (peer()). The caller posts
// every receive on the transport under one lock (`posting`, the Communicator's), which the Wait
// takes from its second look at the header until both of its receives are posted: no receive
// posted meanwhile can take the header, or the data, of the message it found. A receive from a
// named worker posted while one from any worker waits may take that worker's next message first;
// the one from any worker then takes the next one that comes, from whichever worker.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>

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
  // The worker at the other end; for a receive from any worker, -1 until its Wait found one.
  int peer() const { return peer_; }
  // Set by the Communicator: marks it poisoned when Wait fails.
  void set_poison_on_error(std::atomic<bool>* flag) { poison_on_error_ = flag; }
  // Set by the Communicator: the request's flight-recorder entry, which Wait ends (destroyed
  // unwaited: ended as cancelled).
  void set_flight_recording(FlightRecording recording) { recording_ = std::move(recording); }

 private:
  friend StatusOr<PointToPointRequest> PostSend(Transport&, const PointToPointOptions&);
  friend StatusOr<PointToPointRequest> PostRecv(Transport&, const PointToPointOptions&);
  friend StatusOr<PointToPointRequest> PostRecvAny(Transport&, const PointToPointOptions&,
                                                   std::mutex*);
  // PostSend (send) or PostRecv.
  static StatusOr<PointToPointRequest> Post(Transport& transport,
                                            const PointToPointOptions& options, bool send);
  // Posts the header's and the data's messages to or from options.peer.
  Status PostMessages(Transport& transport, const PointToPointOptions& options);
  // A receive from any worker: finds the worker whose message waits and posts its receive.
  Status FindSender();
  Status WaitOnce();

  bool send_ = false;
  int peer_ = -1;
  // A receive from any worker until FindSender posted it: what to post, where, under which lock.
  std::unique_ptr<PointToPointOptions> any_source_;
  Transport* transport_ = nullptr;
  std::mutex* posting_ = nullptr;
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
// A receive from any other worker (options.peer is ignored); `posting` is the lock under which
// every receive on `transport` is posted (see above), and must outlive the request. The transport
// must have Probe.
StatusOr<PointToPointRequest> PostRecvAny(Transport& transport, const PointToPointOptions& options,
                                          std::mutex* posting);

}  // namespace cohort::collective
