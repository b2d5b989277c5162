// Helpers of the UCX transport (ucx_transport.h), internal to it: UCX status codes as Status, the
// address each rank publishes, and what UCX_TLS allows.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

#include "common/status.h"

namespace cohort::collective {

// `status` as a Status whose message is "<what>: <UCX's text>": a dead or unreachable peer is
// kUnavailable, a cancelled request kCancelled, a truncated message kDataLoss.
Status FromUcs(ucs_status_t status, const std::string& what);

// The value a rank publishes: "<pid>\n<host identity>\n<UCX worker address bytes>".
std::string EncodeAddress(const std::string& ucx_address);
// Splits a published value; false when it is malformed.
bool DecodeAddress(const std::string& value, int* pid, std::string* host, std::string* ucx_address);

// Whether UCX_TLS leaves UCX a transport that can report a dead peer (tcp or an RDMA one). With
// only shared memory, asking for the peer error mode fails (and UCX logs an error), so same-host
// endpoints go straight to mode none plus PID liveness checks.
bool PeerFailureTransportsEnabled();

// Whether UCX_TLS leaves UCX a shared-memory transport (posix, sysv, cma, ...). Those cannot
// report a dead peer, so UCX never picks them for an endpoint created with the peer error mode:
// same-host endpoints must ask for mode none (and rely on PID checks) to get shared memory at all;
// with the peer mode they silently fall back to loopback tcp, 3x slower on one host.
bool SharedMemoryTransportsEnabled();

}  // namespace cohort::collective
