#include "collective/transport/ucx/ucx_transport.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <vector>

#include "collective/protocol.h"
#include "collective/same_host.h"
#include "collective/transport/ucx/tcp_ack_flusher.h"
#include "collective/transport/ucx/ucx_reaper.h"
#include "collective/transport/ucx/ucx_support.h"
#include "common/fnv.h"
#include "common/logging.h"

namespace cohort::collective {
namespace {

// The sender's rank takes the wire tag's upper 16 bits, above the Tag's 48 (transport.h).
constexpr int kRankShift = 48;
// How long a waiter spins on progress after the last event before sleeping on the event fd.
// COHORT_UCX_SPIN_US overrides it (0: sleep at once; large: never sleep).
std::chrono::microseconds SpinTime() {
  static const std::chrono::microseconds spin = [] {
    const char* v = std::getenv("COHORT_UCX_SPIN_US");
    return std::chrono::microseconds(v != nullptr ? std::atol(v) : 200);
  }();
  return spin;
}
// Longest sleep on the event fd between progress calls: bounds how late a wait notices its deadline
// or a dead peer when no event comes.
constexpr auto kMaxSleep = std::chrono::microseconds(2000);
// While sends are in flight a waiter sleeps at most this long: over tcp the sender itself pushes
// rendezvous data whenever the socket drains, and a long nap would leave a fast link idle.
constexpr auto kMaxSleepWithSends = std::chrono::microseconds(50);
const Tag kHelloTag = MakeTag((1u << kTagSeqBits) - 1, (1u << kTagStepBits) - 2);

ucp_tag_t WireTag(int sender, Tag tag) {
  return (static_cast<ucp_tag_t>(sender) << kRankShift) | (tag & kTagMask);
}

constexpr auto kLivenessInterval = std::chrono::milliseconds(100);
// Closing, the transport takes in what its peers still send until they have been quiet this long
// (longer after a failure, when peers may still be sending to a call that failed), at most
// kCloseDrain: see DrainInputLocked.
constexpr auto kCloseQuiet = std::chrono::milliseconds(20);
constexpr auto kCloseQuietAfterFailure = std::chrono::milliseconds(500);
constexpr auto kCloseDrain = std::chrono::milliseconds(2000);
// How long the endpoints' closes are waited for before the UCX reaper takes them over (or,
// cancelled or after an abandoned send, the worker is destroyed by force).
constexpr auto kCloseWait = std::chrono::milliseconds(2000);
constexpr auto kCloseWaitCancelled = std::chrono::milliseconds(100);

// The liveness token of `rank` (process `pid`) in the transport keyed `key_prefix`.
std::string TokenName(const std::string& key_prefix, int rank, int pid) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(Fnv1a().Add(key_prefix).value()));
  return std::string(hex) + "/" + std::to_string(rank) + "/" + std::to_string(pid);
}

}  // namespace

class UcxRequest;

class UcxTransportImpl {
 public:
  UcxTransportImpl(int rank, int size, UcxTransportOptions options)
      : rank_(rank),
        size_(size),
        options_(std::move(options)),
        eps_(size, nullptr),
        peer_status_(size, UCS_OK),
        peer_pid_(size, 0),
        peer_token_(size),
        peer_mode_(size, false),
        stalled_(size, false) {
    if (!options_.rank_name) options_.rank_name = [](int r) { return "rank " + std::to_string(r); };
  }
  ~UcxTransportImpl();

  Status Init(Bootstrap& bootstrap);
  // `notice`: a send that a poisoned transport still makes while `peer` is there (IsendNotice).
  StatusOr<Request> Post(int peer, Tag tag, bool is_send, const void* src, void* dst, size_t size,
                         bool notice = false);
  // The peer found gone first, or -1; whether `peer` is gone (Transport's gone_peer, peer_gone).
  int GonePeer();
  bool PeerGone(int peer);
  // Drives progress until `r` reaches a final state (true) or `deadline` passes (false).
  bool Progress(UcxRequest* r, Deadline deadline);
  Status Wait(UcxRequest* r, Deadline deadline);
  void Abandon(UcxRequest* r);
  // Transport::Probe.
  StatusOr<int> Probe(Tag tag, Deadline deadline);
  // Transport::Cancel: waits notice it between progress calls (at most kMaxSleep apart), and
  // same-host peers once the liveness token is gone.
  void Cancel() {
    cancelled_.store(true);
    if (token_ != nullptr) token_->Release();
  }

  int rank_;
  int size_;
  UcxTransportOptions options_;

  // Set by Init.
  Placement placement_;

 private:
  struct EpArg {
    UcxTransportImpl* impl;
    int peer;
  };
  static void OnEpError(void* arg, ucp_ep_h ep, ucs_status_t status);
  // With mu_ held: cancels or force-completes r's UCP request and frees it.
  void AbortLocked(UcxRequest* r);
  void CloseEpLocked(int peer, bool force, std::vector<void*>* pending);
  // With mu_ held: progresses until `req` completes (then frees it) or `deadline` passes; true if
  // it completed.
  bool DrainLocked(void* req, Deadline deadline);
  // With mu_ held, before the endpoints close: takes in what the peers still send (see
  // kCloseQuiet). Over TCP a socket closed with unread input is reset, dropping what this side
  // still had queued (a reducer's last notices); over shared memory a peer's sends to this rank
  // complete only as it reads them (a worker abandoning a failed call's sends waits for that).
  void DrainInputLocked();

  std::mutex mu_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<ucp_ep_h> eps_;  // guarded by mu_
  std::vector<std::unique_ptr<EpArg>> ep_args_;
  std::vector<ucs_status_t> peer_status_;  // guarded by mu_ (written by the error callback)
  int first_gone_ = -1;                    // the peer found gone first (guarded by mu_)
  bool poisoned_ = false;                  // guarded by mu_
  std::atomic<bool> cancelled_{false};     // Cancel was called
  std::atomic<int> inflight_sends_{0};     // sends posted and not yet finished
  SteadyClock::time_point last_event_;     // guarded by mu_
  // Same-host peers' PIDs (0: other host): checked every kLivenessInterval while waiting.
  std::vector<int> peer_pid_;
  // This transport's liveness token (same_host.h), held while it is open and not cancelled; and
  // the tokens of same-host peers on endpoints without UCX's failure detection (empty: none, or
  // the peer held none when it connected), checked with their PIDs.
  std::unique_ptr<LivenessToken> token_;
  std::vector<std::string> peer_token_;
  // Endpoints in UCP_ERR_HANDLING_MODE_PEER: only those can be closed by force (UCX refuses it for
  // the others, whose sends then complete only as the peer reads them).
  std::vector<bool> peer_mode_;
  std::vector<bool> stalled_;  // guarded by mu_: peers that left an abandoned request undrained
  struct Abandoned {
    void* req;  // UCP's request, not freed until the transport closes
    int peer;
  };
  std::vector<Abandoned> abandoned_;             // guarded by mu_: those requests
  SteadyClock::time_point last_liveness_check_;  // guarded by mu_
  void CheckLivenessLocked();
  // Between progress calls, without mu_: yields while events came within SpinTime, else sleeps
  // until the worker has events or kMaxSleep passes. False (at once) when `deadline` has passed.
  bool Idle(Deadline deadline);
  // A failed peer's name and reason, or "" when every peer is alive.
  std::string FailedPeerLocked() const;
  int GonePeerLocked() const { return first_gone_; }
  // Records that `peer` is gone (its endpoint failed, or its process or transport went), and
  // poisons the transport.
  void MarkGoneLocked(int peer, ucs_status_t status);
};

class UcxRequest final : public RequestState {
 public:
  UcxRequest(UcxTransportImpl* impl, void* req, int peer, bool is_recv)
      : impl_(impl), req_(req), peer_(peer), is_recv_(is_recv) {}
  ~UcxRequest() override {
    if (!finished_) impl_->Abandon(this);
  }
  Status Wait(Deadline deadline) override { return impl_->Wait(this, deadline); }
  bool Poll(Deadline deadline) override { return impl_->Progress(this, deadline); }

  UcxTransportImpl* impl_;
  void* req_;
  int peer_;
  bool is_recv_;
  bool finished_ = false;
  Status status_;
};

void UcxTransportImpl::OnEpError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* a = static_cast<EpArg*>(arg);
  // Runs inside ucp_worker_progress, i.e. with mu_ held by the progressing thread.
  a->impl->MarkGoneLocked(a->peer, status);
}

Status UcxTransportImpl::Init(Bootstrap& bootstrap) {
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return FromUcs(st, "ucp_config_read");
  if (std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr) {
    (void)ucp_config_modify(config, "KEEPALIVE_INTERVAL", "1s");
  }
  if (std::getenv("UCX_RNDV_THRESH") == nullptr && options_.eager_limit_bytes > 0) {
    st = ucp_config_modify(config, "RNDV_THRESH",
                           std::to_string(options_.eager_limit_bytes).c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return FromUcs(st,
                     "setting UCX's RNDV_THRESH to " + std::to_string(options_.eager_limit_bytes));
    }
  }
  if (std::getenv("UCX_TCP_SNDBUF") == nullptr && options_.tcp_send_buffer_bytes > 0) {
    // UCX before 1.17 takes a transport's setting by its field name alone (only TCP's transports
    // have this one) and keeps "TCP_SNDBUF" without applying it; 1.17 on applies "TCP_SNDBUF"
    // (its table's prefix and the name; openucx/ucx bca427bea3) and 1.21 on refuses "SNDBUF".
    // UcxTransportTcpTest.SocketsGetTheConfiguredSendBuffer checks it. The loaded library's
    // version decides, not the headers'. A buffer size is a tuning, not a reason to fail: where
    // UCX takes neither, the kernel sizes the buffers.
    const UcxRelease ucx = LoadedUcxRelease();
    const char* name = (ucx.major > 1 || ucx.minor >= 17) ? "TCP_SNDBUF" : "SNDBUF";
    const std::string bytes = std::to_string(options_.tcp_send_buffer_bytes);
    st = ucp_config_modify(config, name, bytes.c_str());
    if (st != UCS_OK) {
      spdlog::warn("ucx: UCX {} takes no {} ({}); the kernel sizes the TCP send buffers",
                   ucp_get_version_string(), name, ucs_status_string(st));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  st = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (st != UCS_OK) return FromUcs(st, "ucp_init");

  ucp_worker_params_t wparams{};
  wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wparams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  st = ucp_worker_create(context_, &wparams, &worker_);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_create");
  st = ucp_worker_get_efd(worker_, &efd_);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_get_efd");

  ucp_address_t* address = nullptr;
  size_t address_len = 0;
  st = ucp_worker_get_address(worker_, &address, &address_len);
  if (st != UCS_OK) return FromUcs(st, "ucp_worker_get_address");
  std::string mine =
      EncodeAddress(std::string(reinterpret_cast<const char*>(address), address_len));
  const std::string my_host = HostIdentity();
  placement_.hosts.assign(size_, "");
  placement_.hosts[rank_] = my_host;
  const bool peer_failure_tls = PeerFailureTransportsEnabled();
  const bool shm_tls = SharedMemoryTransportsEnabled();
  placement_.shared_memory = shm_tls;
  ucp_worker_release_address(worker_, address);
  const UcxRelease my_release = LoadedUcxRelease();
  const char* release_check = std::getenv("COHORT_UCX_RELEASE_CHECK");
  const bool check_releases = release_check == nullptr || std::string(release_check) != "0";
  const std::string key_base = options_.key_prefix + "/addr/";
  token_ = std::make_unique<LivenessToken>(TokenName(options_.key_prefix, rank_, getpid()));
  COHORT_RETURN_IF_ERROR(
      bootstrap.Put(key_base + std::to_string(rank_), mine)
          .WithContext("publishing the UCX address of " + options_.rank_name(rank_)));

  const Deadline deadline = SteadyClock::now() + options_.connect_timeout;
  ep_args_.resize(size_);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto addr = bootstrap.Get(key_base + std::to_string(peer), deadline);
    if (!addr.ok()) {
      if (addr.status().code() == StatusCode::kDeadlineExceeded) {
        return DeadlineExceeded(options_.rank_name(peer) + " never published its address within " +
                                FormatDuration(options_.connect_timeout));
      }
      return addr.status().WithContext("reading the address of " + options_.rank_name(peer));
    }
    const std::optional<PublishedAddress> published = DecodeAddress(*addr);
    if (!published) {
      return DataLoss("the address " + options_.rank_name(peer) + " published is malformed");
    }
    const std::optional<UcxRelease>& peer_release = published->ucx_release;
    if (peer_release && !UcxReleasesConnect(*peer_release, my_release)) {
      const std::string what = options_.rank_name(peer) + " runs UCX " + peer_release->ToString() +
                               " and " + options_.rank_name(rank_) + " " + DescribeLoadedUcx();
      if (!check_releases) {
        spdlog::warn("ucx: {}: connecting anyway (COHORT_UCX_RELEASE_CHECK=0)", what);
      } else {
        return FailedPrecondition(
            what +
            ": UCX promises no connection across minor releases (1.23 and 1.18 fail, and the "
            "older side aborts); run the job's processes, its reducers too, on one UCX release, "
            "or set COHORT_UCX_RELEASE_CHECK=0 to try anyway");
      }
    }
    if (published->protocol != kCollectiveProtocol) {
      const std::string theirs =
          published->protocol
              ? " speaks collective protocol " + std::to_string(*published->protocol)
              : " runs a Cohort from before collective protocol 1";
      return FailedPrecondition(
          options_.rank_name(peer) + theirs + " and " + options_.rank_name(rank_) + " protocol " +
          std::to_string(kCollectiveProtocol) +
          ": their messages differ; run the job's processes, its reducers too, on one Cohort "
          "release");
    }
    const std::string& host = published->host;
    if (host == my_host) peer_pid_[peer] = published->pid;
    placement_.hosts[peer] = host;
    ep_args_[peer] = std::make_unique<EpArg>(EpArg{this, peer});
    ucp_ep_params_t ep_params{};
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = reinterpret_cast<const ucp_address_t*>(published->ucx_address.data());
    // Same-host peers: mode none whenever shared memory may be used (see
    // SharedMemoryTransportsEnabled); their death is noticed by PID instead.
    ep_params.err_mode = peer_pid_[peer] != 0 && (shm_tls || !peer_failure_tls)
                             ? UCP_ERR_HANDLING_MODE_NONE
                             : UCP_ERR_HANDLING_MODE_PEER;
    ep_params.err_handler.cb = &UcxTransportImpl::OnEpError;
    ep_params.err_handler.arg = ep_args_[peer].get();
    std::lock_guard<std::mutex> lock(mu_);
    st = ucp_ep_create(worker_, &ep_params, &eps_[peer]);
    if (st == UCS_ERR_UNREACHABLE && peer_pid_[peer] != 0 &&
        ep_params.err_mode == UCP_ERR_HANDLING_MODE_PEER) {
      // Shared-memory transports (UCX_TLS=sm) lack peer-failure detection, so UCX refuses the
      // peer error mode; fall back to none and detect dead same-host peers by PID instead.
      ep_params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      st = ucp_ep_create(worker_, &ep_params, &eps_[peer]);
    }
    if (st != UCS_OK) return FromUcs(st, "connecting to " + options_.rank_name(peer));
    peer_mode_[peer] = ep_params.err_mode == UCP_ERR_HANDLING_MODE_PEER;
  }

  // Hello: every pair exchanges one small message, so all endpoints are wired up in both
  // directions before the first operation and an unreachable peer is named now.
  std::vector<int32_t> incoming(size_, -1);
  std::vector<Request> recvs(size_), sends(size_);
  const int32_t me = rank_;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    COHORT_ASSIGN_OR_RETURN(
        recvs[peer], Post(peer, kHelloTag, false, nullptr, &incoming[peer], sizeof(int32_t)));
    COHORT_ASSIGN_OR_RETURN(sends[peer],
                            Post(peer, kHelloTag, true, &me, nullptr, sizeof(int32_t)));
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    Status s = recvs[peer].Wait(deadline);
    if (s.code() == StatusCode::kDeadlineExceeded) {
      return DeadlineExceeded(options_.rank_name(peer) + " did not answer within " +
                              FormatDuration(options_.connect_timeout));
    }
    COHORT_RETURN_IF_ERROR(s.WithContext("hello from " + options_.rank_name(peer)));
    if (incoming[peer] != peer)
      return DataLoss("hello from " + options_.rank_name(peer) + " carried the wrong rank");
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    COHORT_RETURN_IF_ERROR(
        sends[peer].Wait(deadline).WithContext("hello to " + options_.rank_name(peer)));
  }
  // The peers that answered hold their tokens by now (bound before they published addresses).
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peer_pid_[peer] == 0 || peer_mode_[peer]) continue;
    const std::string name = TokenName(options_.key_prefix, peer, peer_pid_[peer]);
    if (LivenessTokenHeld(name)) peer_token_[peer] = name;
  }
  return Status::Ok();
}

UcxTransportImpl::~UcxTransportImpl() {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker_ != nullptr) {
    // Cancelled, this rank has given up on its peers: what they still send is not taken in, the
    // endpoints that can be are closed by force (the peers' requests to it fail at once), and a
    // graceful close gets a moment, not kCloseWait.
    const bool cancelled = cancelled_.load();
    if (!cancelled) DrainInputLocked();
    std::vector<void*> pending;
    for (int peer = 0; peer < size_; ++peer) {
      if (eps_[peer] != nullptr)
        CloseEpLocked(peer, (peer_status_[peer] != UCS_OK || cancelled) && peer_mode_[peer],
                      &pending);
    }
    const Deadline deadline = SteadyClock::now() + (cancelled ? kCloseWaitCancelled : kCloseWait);
    std::vector<void*> closing;
    for (void* req : pending) {
      if (!DrainLocked(req, deadline)) closing.push_back(req);
    }
    // A send abandoned undrained (a failed or cancelled call, over shared memory) to a peer
    // whose process lives but does not read it holds the caller's buffer registered while it is
    // in flight: destroying the worker then fails an assertion in UCX 1.23 (ucp_rcache
    // "destroying inuse region", SIGABRT; not once the peer's process is gone, nor in 1.13), and
    // progressing it could read that buffer, which the caller has freed. So such a worker is left
    // as it is, never progressed or destroyed: its memory, and UCX's async thread (which a child
    // forked later then lacks, ucx_reaper.h), are the price.
    const auto held = std::count_if(abandoned_.begin(), abandoned_.end(), [&](const Abandoned& a) {
      return ucp_request_check_status(a.req) == UCS_INPROGRESS &&
             (peer_pid_[a.peer] == 0 || ProcessAlive(peer_pid_[a.peer]));
    });
    if (held > 0) {
      spdlog::warn(
          "ucx: {} abandoned send(s) to a live peer that never read them are still in flight; "
          "this transport's UCX worker is left in place, not destroyed",
          held);
      return;
    }
    for (const Abandoned& a : abandoned_) {
      if (ucp_request_check_status(a.req) != UCS_INPROGRESS) ucp_request_free(a.req);
    }
    // A close still pending waits for a peer that is not progressing (ucx_reaper.h): the reaper
    // progresses the worker until the peer has taken in the last sends, then destroys it. Unless
    // a send was abandoned undrained: progressing the worker could then have read the caller's
    // freed buffer, so it goes now, by force.
    const bool abandoned = std::find(stalled_.begin(), stalled_.end(), true) != stalled_.end();
    if (!closing.empty() && !abandoned) {
      spdlog::debug("ucx: an endpoint was still closing; the UCX reaper finishes it");
      ReapUcxWorker(context_, worker_, std::move(closing));
      return;
    }
    for (void* req : closing) ucp_request_free(req);
    ucp_worker_destroy(worker_);
  }
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxTransportImpl::CloseEpLocked(int peer, bool force, std::vector<void*>* pending) {
  ucp_request_param_t prm{};
  prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  prm.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t sp = ucp_ep_close_nbx(eps_[peer], &prm);
  eps_[peer] = nullptr;
  if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) pending->push_back(sp);
}

void UcxTransportImpl::DrainInputLocked() {
  // Every message nobody received is taken into a buffer of its own and dropped: a rendezvous
  // send completes only once received (a worker abandoning a failed call's chunks waits for that).
  struct Taking {
    void* req;
    std::unique_ptr<char[]> buffer;
  };
  std::vector<Taking> taking;
  const auto quiet = poisoned_ ? kCloseQuietAfterFailure : kCloseQuiet;
  const auto start = SteadyClock::now();
  auto last = start;
  for (auto now = start; now - last < quiet && now - start < kCloseDrain;
       now = SteadyClock::now()) {
    bool busy = ucp_worker_progress(worker_) != 0;
    ucp_tag_recv_info_t info;
    while (ucp_tag_message_h msg = ucp_tag_probe_nb(worker_, 0, 0, /*remove=*/1, &info)) {
      auto buffer = std::make_unique<char[]>(std::max<size_t>(1, info.length));
      ucp_request_param_t prm{};
      ucs_status_ptr_t sp = ucp_tag_msg_recv_nbx(worker_, buffer.get(), info.length, msg, &prm);
      if (sp != nullptr && !UCS_PTR_IS_ERR(sp)) taking.push_back({sp, std::move(buffer)});
      busy = true;
    }
    std::erase_if(taking, [](const Taking& t) {
      if (ucp_request_check_status(t.req) == UCS_INPROGRESS) return false;
      ucp_request_free(t.req);
      return true;
    });
    if (busy || !taking.empty()) {
      last = SteadyClock::now();
    } else if (ucp_worker_arm(worker_) == UCS_OK) {
      pollfd pfd{efd_, POLLIN, 0};
      ::poll(&pfd, 1, 1);
    }
  }
  // A receive still under way may yet write into its buffer: that buffer is left to the process.
  for (Taking& t : taking) {
    if (!DrainLocked(t.req, SteadyClock::now())) (void)t.buffer.release();
  }
}

bool UcxTransportImpl::DrainLocked(void* req, Deadline deadline) {
  while (ucp_request_check_status(req) == UCS_INPROGRESS && SteadyClock::now() < deadline) {
    ucp_worker_progress(worker_);
  }
  if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
  ucp_request_free(req);
  return true;
}

StatusOr<Request> UcxTransportImpl::Post(int peer, Tag tag, bool is_send, const void* src,
                                         void* dst, size_t size, bool notice) {
  if (peer < 0 || peer >= size_ || peer == rank_)
    return InvalidArgument("ucx: bad peer " + std::to_string(peer));
  if (cancelled_.load()) {
    return Cancelled(std::string(is_send ? "send to " : "receive from ") +
                     options_.rank_name(peer) + ": the transport was cancelled");
  }
  std::lock_guard<std::mutex> lock(mu_);
  // A message that arrived before its sender went away (a worker's last message, then its exit)
  // is still delivered: a receive that matches one already here is posted even now.
  auto arrived = [&] {
    ucp_tag_recv_info_t info;
    return !is_send &&
           ucp_tag_probe_nb(worker_, WireTag(peer, tag), ~ucp_tag_t{0}, 0, &info) != nullptr;
  };
  if (peer_status_[peer] != UCS_OK && !arrived()) {
    poisoned_ = true;
    return Unavailable(options_.rank_name(peer) +
                       " is gone: " + ucs_status_string(peer_status_[peer]));
  }
  if (poisoned_ && !notice && !arrived()) {
    const std::string failed = FailedPeerLocked();
    if (!failed.empty()) return Unavailable(failed);
    return Aborted("ucx transport is poisoned by an earlier error; rebuild the communicator");
  }
  ucp_request_param_t prm{};
  ucs_status_ptr_t sp;
  if (is_send) {
    if (eps_[peer] == nullptr)
      return Aborted("ucx: endpoint to " + options_.rank_name(peer) + " is closed");
    sp = ucp_tag_send_nbx(eps_[peer], src, size, WireTag(rank_, tag), &prm);
  } else {
    sp = ucp_tag_recv_nbx(worker_, dst, size, WireTag(peer, tag), ~ucp_tag_t{0}, &prm);
  }
  if (sp == nullptr) return Request::Done();
  if (UCS_PTR_IS_ERR(sp)) {
    poisoned_ = true;
    return FromUcs(UCS_PTR_STATUS(sp),
                   std::string(is_send ? "send to " : "receive from ") + options_.rank_name(peer));
  }
  if (is_send) inflight_sends_.fetch_add(1);
  return Request(std::make_unique<UcxRequest>(this, sp, peer, !is_send));
}

void UcxTransportImpl::CheckLivenessLocked() {
  const auto now = SteadyClock::now();
  if (now - last_liveness_check_ < kLivenessInterval) return;
  last_liveness_check_ = now;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer_pid_[peer] == 0 || peer_status_[peer] != UCS_OK) continue;
    if (!ProcessAlive(peer_pid_[peer]) ||
        (!peer_token_[peer].empty() && !LivenessTokenHeld(peer_token_[peer]))) {
      MarkGoneLocked(peer, UCS_ERR_CONNECTION_RESET);
    }
  }
}

void UcxTransportImpl::MarkGoneLocked(int peer, ucs_status_t status) {
  if (peer_status_[peer] == UCS_OK && first_gone_ < 0) first_gone_ = peer;
  peer_status_[peer] = status;
  poisoned_ = true;
}

std::string UcxTransportImpl::FailedPeerLocked() const {
  const int peer = GonePeerLocked();
  if (peer < 0) return "";
  return options_.rank_name(peer) + " is gone (" + ucs_status_string(peer_status_[peer]) + ")";
}

void UcxTransportImpl::AbortLocked(UcxRequest* r) {
  if (r->finished_) return;
  if (ucp_request_check_status(r->req_) == UCS_INPROGRESS) {
    if (r->is_recv_) {
      ucp_request_cancel(worker_, r->req_);
    } else if (eps_[r->peer_] != nullptr && peer_mode_[r->peer_]) {
      // A send cannot be withdrawn; closing the endpoint by force completes it.
      std::vector<void*> pending;
      CloseEpLocked(r->peer_, true, &pending);
      for (void* req : pending)
        DrainLocked(req, SteadyClock::now() + std::chrono::milliseconds(100));
    }
    // A send over shared memory (mode none) completes only as the peer reads it: a live peer does
    // (a reducer that told this worker of a failure reads until it closes, DrainInputLocked), so
    // it is waited for, and the caller's buffer is free when the call returns. One to a dead peer,
    // or to one that stopped reading, may never complete: give it a moment, then leave it (the
    // peer cannot touch our memory any more; the transport is poisoned, and only what is still
    // progressed afterwards could read the buffer). A peer that already left one undrained gets
    // no more moments: a failed call abandons dozens of requests (each would wait in turn).
    // Cancelled, a live peer gets the moment a gone one does: the caller is giving up.
    const auto grace = stalled_[r->peer_] ? std::chrono::milliseconds(0)
                       : peer_status_[r->peer_] != UCS_OK || cancelled_.load()
                           ? std::chrono::milliseconds(100)
                           : std::chrono::milliseconds(2000);
    if (!DrainLocked(r->req_, SteadyClock::now() + grace)) {
      stalled_[r->peer_] = true;
      abandoned_.push_back({r->req_, r->peer_});
      spdlog::debug("ucx: a request to {} could not be cancelled; abandoning it",
                    options_.rank_name(r->peer_));
    }
  } else {
    ucp_request_free(r->req_);
  }
  r->finished_ = true;
  r->req_ = nullptr;
  if (!r->is_recv_) inflight_sends_.fetch_sub(1);
  poisoned_ = true;
}

bool UcxTransportImpl::Progress(UcxRequest* r, Deadline deadline) {
  if (r->finished_) return true;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (ucp_worker_progress(worker_) != 0) last_event_ = SteadyClock::now();
      CheckLivenessLocked();
      const ucs_status_t st = ucp_request_check_status(r->req_);
      if (st != UCS_INPROGRESS) {
        ucp_request_free(r->req_);
        r->req_ = nullptr;
        r->finished_ = true;
        if (!r->is_recv_) inflight_sends_.fetch_sub(1);
        if (st != UCS_OK) {
          poisoned_ = true;
          const std::string what = std::string(r->is_recv_ ? "receive from " : "send to ") +
                                   options_.rank_name(r->peer_);
          r->status_ = peer_status_[r->peer_] != UCS_OK
                           ? Unavailable(what + ": peer is gone (" +
                                         ucs_status_string(peer_status_[r->peer_]) + ")")
                           : FromUcs(st, what);
        }
        return true;
      }
      if (peer_status_[r->peer_] != UCS_OK) {
        const ucs_status_t peer_st = peer_status_[r->peer_];
        AbortLocked(r);
        r->status_ = Unavailable(options_.rank_name(r->peer_) + " is gone (" +
                                 ucs_status_string(peer_st) + ")");
        return true;
      }
      if (cancelled_.load()) {
        AbortLocked(r);
        r->status_ = Cancelled(std::string(r->is_recv_ ? "receive from " : "send to ") +
                               options_.rank_name(r->peer_) + ": cancelled");
        return true;
      }
    }
    if (!Idle(deadline)) return false;
  }
}

bool UcxTransportImpl::Idle(Deadline deadline) {
  // A peer may be waiting for an ACK this host's kernel holds back (tcp_ack_flusher.h).
  ProcessTcpAckFlusher().Flush();
  const auto now = SteadyClock::now();
  if (now >= deadline) return false;
  if (now - last_event_ < SpinTime()) {
    sched_yield();
    return true;
  }
  ucs_status_t armed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed = ucp_worker_arm(worker_);
  }
  if (armed == UCS_OK) {
    const auto cap = inflight_sends_.load() > 0 ? kMaxSleepWithSends : kMaxSleep;
    const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now);
    const auto sleep =
        std::max(std::chrono::microseconds(0), std::min(left, std::chrono::microseconds(cap)));
    pollfd pfd{efd_, POLLIN, 0};
    const timespec ts{static_cast<time_t>(sleep.count() / 1000000),
                      static_cast<long>(sleep.count() % 1000000) * 1000};
    ::ppoll(&pfd, 1, &ts, nullptr);
  }
  // Either events are pending (UCS_ERR_BUSY) or we woke up: progress again, spinning a while.
  std::lock_guard<std::mutex> lock(mu_);
  last_event_ = SteadyClock::now();
  return true;
}

StatusOr<int> UcxTransportImpl::Probe(Tag tag, Deadline deadline) {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (ucp_worker_progress(worker_) != 0) last_event_ = SteadyClock::now();
      CheckLivenessLocked();
      // The rank bits are left out of the match: any sender's message with `tag`.
      ucp_tag_recv_info_t info;
      if (ucp_tag_probe_nb(worker_, WireTag(0, tag), kTagMask, /*remove=*/0, &info) != nullptr) {
        const int peer = static_cast<int>(info.sender_tag >> kRankShift);
        if (peer >= 0 && peer < size_) return peer;
      }
      if (cancelled_.load()) return Cancelled("receive from any rank: cancelled");
      if (poisoned_) {
        const std::string failed = FailedPeerLocked();
        if (!failed.empty()) return Unavailable(failed);
        return Aborted("ucx transport is poisoned by an earlier error; rebuild the communicator");
      }
    }
    if (!Idle(deadline)) return DeadlineExceeded("receive from any rank timed out");
  }
}

Status UcxTransportImpl::Wait(UcxRequest* r, Deadline deadline) {
  if (Progress(r, deadline)) return r->status_;
  std::lock_guard<std::mutex> lock(mu_);
  AbortLocked(r);
  r->status_ = DeadlineExceeded(std::string(r->is_recv_ ? "receive from " : "send to ") +
                                options_.rank_name(r->peer_) + " timed out");
  return r->status_;
}

void UcxTransportImpl::Abandon(UcxRequest* r) {
  std::lock_guard<std::mutex> lock(mu_);
  AbortLocked(r);
}

StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(Bootstrap& bootstrap, int rank,
                                                             int size,
                                                             UcxTransportOptions options) {
  if (size < 1 || rank < 0 || rank >= size || size > (1 << 15)) {
    return InvalidArgument("ucx transport: bad rank " + std::to_string(rank) + " of " +
                           std::to_string(size));
  }
  auto impl = std::make_unique<UcxTransportImpl>(rank, size, std::move(options));
  COHORT_RETURN_IF_ERROR(impl->Init(bootstrap));
  return std::unique_ptr<UcxTransport>(new UcxTransport(std::move(impl)));
}

UcxTransport::UcxTransport(std::unique_ptr<UcxTransportImpl> impl) : impl_(std::move(impl)) {}
UcxTransport::~UcxTransport() = default;
int UcxTransport::rank() const { return impl_->rank_; }
int UcxTransport::size() const { return impl_->size_; }
const Placement& UcxTransport::placement() const { return impl_->placement_; }

StatusOr<Request> UcxTransport::Isend(int peer, Tag tag, ConstBytes data) {
  return impl_->Post(peer, tag, true, data.data, nullptr, data.size);
}

StatusOr<Request> UcxTransport::Irecv(int peer, Tag tag, MutableBytes data) {
  return impl_->Post(peer, tag, false, nullptr, data.data, data.size);
}

StatusOr<int> UcxTransport::Probe(Tag tag, Deadline deadline) {
  return impl_->Probe(tag, deadline);
}

int UcxTransport::gone_peer() const { return impl_->GonePeer(); }

bool UcxTransport::peer_gone(int peer) const { return impl_->PeerGone(peer); }

void UcxTransport::Cancel() { impl_->Cancel(); }

int UcxTransportImpl::GonePeer() {
  // Asked before every all-reduce (RoundVerdicts::Post): the liveness check only, which is
  // rate-limited; callers that wait progress the worker themselves.
  std::lock_guard<std::mutex> lock(mu_);
  CheckLivenessLocked();  // a same-host peer that died while nothing waited
  return GonePeerLocked();
}

bool UcxTransportImpl::PeerGone(int peer) {
  if (peer < 0 || peer >= size_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  // Asked while nothing else may progress the worker (a lingering reducer): an endpoint's failure
  // (tcp) is delivered by progress, a same-host peer's death by the liveness check.
  while (ucp_worker_progress(worker_) != 0) last_event_ = SteadyClock::now();
  CheckLivenessLocked();
  return peer_status_[peer] != UCS_OK;
}

StatusOr<Request> UcxTransport::IsendNotice(int peer, Tag tag, ConstBytes data) {
  return impl_->Post(peer, tag, true, data.data, nullptr, data.size, /*notice=*/true);
}

}  // namespace cohort::collective
