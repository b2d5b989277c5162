// Helpers of the UCX transport (ucx_transport.h), internal to it: UCX status codes as Status, the
// address each rank publishes, which UCX releases connect, and what UCX_TLS allows.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace cohort::collective {

// `status` as a Status whose message is "<what>: <UCX's text>": a dead or unreachable peer is
// kUnavailable, a cancelled request kCancelled, a truncated message kDataLoss.
Status FromUcs(ucs_status_t status, const std::string& what);

// A UCX release, as ucp_get_version reads it.
struct UcxRelease {
  unsigned major = 0, minor = 0, release = 0;
  std::string ToString() const;  // "1.13.1"
};

// The release of the libucp this process loaded (not the headers').
UcxRelease LoadedUcxRelease();
// "UCX 1.13.1 (/usr/lib/x86_64-linux-gnu/libucp.so.0)": the loaded release and its file.
std::string DescribeLoadedUcx();

// Whether processes on UCX releases `a` and `b` are taken to connect: one minor release. UCX keeps
// no promise across minor releases, and Debian's do not all connect over tcp: 1.13 (Debian 12) with
// 1.18 (13) works, 1.23 (sid) with either fails ("Destination is unreachable"), and the older side
// then aborts inside ucp_worker_progress (an assertion in UCX). So the check comes before either
// side makes an endpoint; COHORT_UCX_RELEASE_CHECK=0 makes it a warning.
bool UcxReleasesConnect(const UcxRelease& a, const UcxRelease& b);

// The value a rank publishes: "<pid>\n<host identity>\nucx <release> protocol <collective
// protocol>\n<UCX worker address bytes>" (protocol.h). The protocol shares the release's line so
// that a Cohort from before it, which reads three numbers there, refuses the value as malformed
// instead of connecting.
std::string EncodeAddress(const std::string& ucx_address);
// A published value, split.
struct PublishedAddress {
  int pid = 0;
  std::string host;
  // Empty for a value without the release line (a peer of a Cohort before it), whose release
  // cannot be checked.
  std::optional<UcxRelease> ucx_release;
  // Empty for a value whose release line names none (a Cohort before protocol 1).
  std::optional<uint32_t> protocol;
  std::string ucx_address;
};
// Splits a published value; empty when it is malformed.
std::optional<PublishedAddress> DecodeAddress(const std::string& value);

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
