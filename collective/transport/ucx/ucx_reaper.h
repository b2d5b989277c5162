// The UCX reaper: the process-wide owner of UCX workers whose transport closed while one of its
// endpoint closes was still pending (ucx_transport.h: the close waits at most 2 s). It keeps
// progressing each such worker, so that the close completes as soon as the peer progresses, then
// destroys the worker and its context. A worker whose closes are still pending after
// kReaperLimit, or when the process forks or exits, is destroyed at once (a forced close).
//
// What UCX 1.13.1 (Debian's) does, from its source (github:openucx/ucx, tag v1.13.1):
// - A graceful ucp_ep_close_nbx (src/ucp/core/ucp_ep.c) flushes the endpoint
//   (src/ucp/rma/flush.c, ucp_ep_flush_internal). Over TCP, an endpoint that sent anything flushes
//   by sending a zero-length PUT and waiting for the peer's acknowledgement
//   (src/uct/tcp/tcp_ep.c, uct_tcp_ep_flush: UCT_TCP_EP_FLAG_NEED_FLUSH, put_comp_q), which the
//   peer sends only from its own ucp_worker_progress. So the close completes once the peer's UCX
//   has read everything this side sent: a peer that is alive but not progressing (computing,
//   checkpointing, or in this process and closed later) holds it pending indefinitely.
//   Shared-memory endpoints flush without the peer (ucx_close_test: they never stay pending).
// - A pending graceful close cannot be made a forced one: ucp_ep_close_nbx on a closed endpoint
//   fails ("ep ... has already been closed", UCS_ERR_NOT_CONNECTED), and ucp_request_cancel
//   (src/ucp/core/ucp_request.c) cancels only tag receives.
// - Destroying the worker with a close pending is safe (no assertion, no hang; ucx_close_test
//   does it, and with UCX_LOG_LEVEL=debug UCX logs no warning then): ucp_worker_destroy
//   (src/ucp/core/ucp_worker.c, ucp_worker_destroy_eps) disconnects every endpoint by force;
//   destroying a TCP endpoint (uct_tcp_ep_purge) completes the flush with UCS_ERR_CANCELED; the
//   close request, freed beforehand, stays in the worker's request pool, which goes with it.
//   That is the forced close, and it loses data: UCX's own send buffer is dropped, and the
//   peer's next write to the closed socket resets the connection, which discards what its kernel
//   still held unread (ucx_close_test sees a busy peer lose its last messages that way).
// - UCX's async thread (src/ucs/async/thread.c) is process-wide, started by the first worker and
//   stopped by the last: a global use_count, no pthread_atfork. A child forked (without exec)
//   while any worker exists inherits use_count > 0 and the thread's epoll set (shared with the
//   parent's thread) but not the thread, so its own workers' TCP connection events are never
//   handled there: its hello never completes. UCX registers pthread_atfork only for logging,
//   the registration cache and the IB fork warning.
//
// Therefore: the reaper destroys everything it holds in a pthread_atfork prepare handler (the
// child inherits none of it and touches nothing inherited from the reaper) and at exit. Any fork
// (a subprocess too) while a close is pending thus forces it. A fork while a transport is still
// open in the parent remains unsupported, as for any UCX user.
//
// Guarantee: data handed to UCX (a send that completed) reaches a healthy peer that progresses
// within kReaperLimit of the close, unless this process forks or exits first. A transport that
// abandoned a send undrained (a failed call over shared memory) is not reaped but destroyed at
// once: progressing it could read the caller's freed buffer.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace cohort::collective {

// How long the reaper keeps progressing a worker whose closes are pending before it destroys it.
constexpr auto kReaperLimit = std::chrono::minutes(5);

// Takes `worker` and `context` (destroyed after the worker) with `closes`, the pending requests
// of ucp_ep_close_nbx; the caller must not touch any of them again.
void ReapUcxWorker(ucp_context_h context, ucp_worker_h worker, std::vector<void*> closes);

// What the reaper did in this process: workers it holds now, destroyed after their closes
// completed, and destroyed with closes still pending (limit, fork or exit).
struct UcxReaperCounts {
  int held = 0;
  int64_t completed = 0;
  int64_t forced = 0;
};
UcxReaperCounts GetUcxReaperCounts();

}  // namespace cohort::collective
