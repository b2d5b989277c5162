// StalledCallCheck: how the workers of a collective call whose calls differ so much that they never
// meet in one algorithm's exchanges learn of it within a fraction of a second instead of at the
// deadline: an all-reduce whose sizes made kAuto run different algorithms (recursive doubling for
// one worker's 4 KiB, the ring for another's 1 MiB; halving-doubling, the Reduction Server or the
// shared-memory all-reduce against either), or workers in calls of different collectives at the
// same point of their sequence (an all-reduce against an allgather or a barrier: a script whose
// ranks took different paths, or whose checkpoint thread shares the group). Each algorithm
// compares the calls inside its own exchanges (pairwise_agreement.h, the Reduction Server's
// verdicts, the other collectives' call headers), which such workers never share, and none
// finishes without the others: so every worker of such a call waits. The Communicator watches
// every collective call (not point-to-point messages).
//
// A worker whose call has waited kStalledCallAfter sends its call, once, in a 64-byte notice to
// its right neighbour among the call's workers, and from then on takes the notices that have come
// between slices of its waits. A notice whose call differs from its own fails the call with
// kInvalidArgument naming that worker and both calls, and this worker tells every other worker of
// the communicator (the call's, and in a hierarchical all-reduce those of the other stages) which
// two differ; a worker told so fails the same way. If any two workers' calls differ, two
// neighbours' do, and both wait past kStalledCallAfter: every worker fails within about
// kStalledCallAfter and a slice of the first. A call that is only slow (large, or waiting
// for a late worker) costs each worker one notice; a call that ends sooner, nothing.
//
// A worker whose part of a call is only sends that leave eagerly (a broadcast's root, a gather's
// non-roots, on UCX or TCP) ends that call before the others enter theirs and goes on to its
// next: when their calls differ there, the workers wait at different points of their sequence.
// So each worker remembers its calls back to kKeepBehind before the latest, and a notice of an
// earlier call than the one it waits in is compared with the call this worker made then: if they
// differ, it fails as above, and tells the others of that earlier call's finding, which fails the
// workers still in it and those past it alike (a call after a failed one cannot finish). Going
// around the ring of workers from one stuck in an earlier call, some worker's right neighbour is
// further along: it gets the notice.
//
// Notices travel on one tag for all calls (MakeTag(0, kStallNoticeStep)) and carry their call's
// seq. StallNotices, one per communicator, takes them in as they come and keeps them by call, so
// that calls in flight together (the Reduction Server's two) each find their own; a notice that
// comes after its call ended is dropped when a later call takes notices in, or drains them
// (StallNotices::Drain, which the Communicator runs at most every kStallDrainInterval).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collective/algorithms/allreduce_options.h"
#include "collective/transport/transport.h"
#include "common/status.h"

namespace cohort::collective {

// How long a call waits before its worker sends its notice and starts taking others': longer than
// kAuto's small calls take across hosts (0.1-1 ms), short next to any timeout.
constexpr std::chrono::milliseconds kStalledCallAfter{200};
// Once past kStalledCallAfter, how long a wait runs between looks at the notices.
constexpr std::chrono::milliseconds kStalledCallSlice{10};
// How long a worker that learned otherwise that a finding is on its way looks for it
// (StalledCallCheck::AwaitFinding) before it reports what it learned.
constexpr std::chrono::milliseconds kStalledCallFindingGrace{100};
// Notices' step: below the Reduction Server's verdicts (reduction_server.h, kVerdictStep).
constexpr uint32_t kStallNoticeStep = (1u << kTagStepBits) - 5;
// The Communicator drains notices that came too late for their call when a call starts this long
// after the last drain: no more than a few can have come meanwhile (a worker's left neighbour
// sends one per call that waited kStalledCallAfter), and a drain costs a transport probe.
constexpr std::chrono::milliseconds kStallDrainInterval{1000};

struct StallNotice {
  static constexpr uint32_t kMagic = 0x4c415453;  // "STAL"
  enum Kind : uint32_t { kCall = 1, kDisagreement = 2 };
  uint32_t magic = kMagic;
  uint32_t seq = 0;  // the call's sequence number (AllreduceOptions::seq, CollectiveOptions::seq)
  uint32_t kind = kCall;
  uint32_t reserved = 0;
  // kCall: calls[0] is the sender's. kDisagreement: two workers' calls that differ.
  AgreementCall calls[2];
};
static_assert(
    sizeof(StallNotice) == 64,
    "StallNotice travels as raw bytes: a change of it is a new kCollectiveProtocol (protocol.h)");

// The notices of one communicator's transport: sent without waiting (the sends are reaped later),
// taken in as they come and kept by call. Thread safety: every method may be called from any
// thread (a Reduction Server call's second half runs on another thread than the next call).
class StallNotices {
 public:
  // `num_workers`: the communicator's workers, transport ranks 0 .. num_workers - 1, every one of
  // which is told a finding (whatever workers the call's exchanges involve).
  StallNotices(Transport& transport, int num_workers)
      : transport_(transport), num_workers_(num_workers) {}
  // Gives the sends still outstanding a moment to leave.
  ~StallNotices();
  StallNotices(const StallNotices&) = delete;
  StallNotices& operator=(const StallNotices&) = delete;

  // Sends `notice` to transport rank `peer`. A transport that refuses (poisoned) is ignored: the
  // call fails on its own then.
  void Send(int peer, const StallNotice& notice);
  // Remembers that this worker made `call` as call `seq` (kept while calls up to seq + kKeepBehind
  // are made).
  void Remember(uint32_t seq, const AgreementCall& call);
  // The call this worker made as call `seq`, if it is among those remembered.
  std::optional<AgreementCall> Recall(uint32_t seq);
  // Takes in every notice that has come and returns (and forgets) those of call `seq`, and
  // returns (and keeps, for that call's own check) those of earlier calls that find a
  // disagreement: a kDisagreement, or a kCall that differs from the call remembered for its seq.
  // Keeps the notices of calls from seq - kKeepBehind (a call still in flight beside this one,
  // or a neighbour behind) to seq + kKeepAhead (a neighbour ahead); drops the rest. A notice
  // that is not one (bad magic or kind) is kDataLoss naming its sender.
  StatusOr<std::vector<StallNotice>> Take(uint32_t seq);
  // Takes in every notice that has come and drops those of calls before seq - kKeepBehind.
  void Drain(uint32_t seq);

  int rank() const { return transport_.rank(); }
  int num_workers() const { return num_workers_; }

  static constexpr uint32_t kKeepAhead = 8;
  // A worker gets ahead only by calls whose every send left eagerly (small ones, each a message
  // waiting at its receivers), but a script can make many: a loop of broadcasts over a model's
  // small tensors (norms, biases) that one rank runs and the others do not. 1024 calls are
  // remembered (32 bytes each, 32 KiB a communicator); a worker further ahead than that is not
  // recognised, and such calls wait for the deadline.
  static constexpr uint32_t kKeepBehind = 1024;

 private:
  // Takes in what has come, keeping notices of calls seq - kKeepBehind .. seq + kKeepAhead.
  // Holds mu_.
  Status TakeInLocked(uint32_t seq);
  // Recall, holding mu_.
  std::optional<AgreementCall> RecallLocked(uint32_t seq) const;

  Transport& transport_;
  const int num_workers_;
  std::mutex mu_;
  std::map<uint32_t, std::vector<StallNotice>> kept_;  // by seq; guarded by mu_
  struct Made {
    uint32_t seq = 0;
    bool made = false;
    AgreementCall call;
  };
  static constexpr uint32_t kMade = kKeepBehind + 1;
  std::array<Made, kMade> made_{};  // at seq % kMade; guarded by mu_
  struct Sent {
    std::unique_ptr<StallNotice> notice;
    Request request;
  };
  std::vector<Sent> sends_;  // guarded by mu_
};

// One worker's watch over one collective call: its waits (Wait) go in slices once the call is
// overdue, and Check takes the notices between them. Contract: made as the call starts (the
// kStalledCallAfter clock starts then), used by the thread that waits, destroyed after the call.
class StalledCallCheck {
 public:
  // `workers`: the call's workers as ranks of `notices`' transport, in ring order, this worker
  // among them. `mine`: this worker's call, with the rank errors name it by. `what` prefixes
  // errors ("all-reduce", "barrier").
  // `workers` must outlive the check. `started`: when the call started (its kStalledCallAfter
  // counts from then).
  StalledCallCheck(StallNotices& notices, const std::vector<int>& workers, AgreementCall mine,
                   uint32_t seq, std::string what,
                   SteadyClock::time_point started = SteadyClock::now());

  // As request.Wait(deadline); once the call is overdue, waits in slices and fails as Check does
  // between them.
  Status Wait(Request& request, Deadline deadline);
  // Before the call is overdue, OK. Then: sends this worker's notice (the first time), takes the
  // notices that came, and fails with kInvalidArgument once they show two calls that differ, of
  // this call or of an earlier one (from then on, every time).
  Status Check();
  // Takes the notices that came, as Check does, for up to kStalledCallFindingGrace (even before
  // the call is overdue, and sending no notice of this worker's): for a worker that learned
  // otherwise that another is telling it which calls differ (a peer gave up with
  // kInvalidArgument). OK when no finding came.
  Status AwaitFinding();
  // A peer's call `theirs`, its call `seq` (another than this one), met this worker's call in an
  // exchange that does not keep calls apart by seq (the shared-memory all-reduce, the Reduction
  // Server's rounds): the finding that explains it, or OK when there is none (the caller reports
  // the meeting itself). An earlier `seq`: this worker's call then and theirs compared, as a
  // notice of theirs would be. A later one: the peer is further along, and its own check finds
  // which calls differ and tells this worker (AwaitFinding).
  Status Met(uint32_t seq, const AgreementCall& theirs);
  // True once Check has found two calls that differ: an error of Wait is then that finding.
  bool found() const { return !verdict_.ok(); }

 private:
  // As Check, before the call is overdue too, and sending no notice of this worker's.
  Status Look();
  // What `notice` finds (and keeps as the verdict): OK, or the calls that differ.
  Status Consider(const StallNotice& notice);
  // The error for calls `a` and `b` of call `seq` (this one or an earlier one), which differ: it
  // names the one that differs from this worker's. With `tell_others`, first tells every other
  // worker of the communicator (in a hierarchical all-reduce, those of this worker's host too).
  Status Disagree(uint32_t seq, const AgreementCall& a, const AgreementCall& b, bool tell_others);
  // Disagree's error for an earlier call than this one.
  Status DisagreeEarlier(uint32_t seq, const AgreementCall& a, const AgreementCall& b);
  // This worker's call before `call`, its call `seq`, where it remembers one (rank < 0: none).
  AgreementCall CallBefore(uint32_t seq, const AgreementCall& call);

  StallNotices& notices_;
  const std::vector<int>& workers_;
  const AgreementCall mine_;
  const uint32_t seq_;
  const std::string what_;
  const Deadline overdue_at_;
  int me_ = -1;  // this worker's index in workers_
  bool announced_ = false;
  Status verdict_;
};

// request.Wait(deadline), through `check` when there is one. An error gets context() ahead of
// it ("ring all-reduce: receiving from worker 3"), unless it is the check's finding, which names
// the workers itself (where this worker happened to wait does not matter).
template <typename Context>
Status WaitChecked(Request& request, Deadline deadline, StalledCallCheck* check, Context context) {
  Status s = check != nullptr ? check->Wait(request, deadline) : request.Wait(deadline);
  if (s.ok() || (check != nullptr && check->found())) return s;
  return s.WithContext(context());
}

}  // namespace cohort::collective
