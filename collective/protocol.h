// The collective library's wire protocol: what the processes of one communicator (workers,
// reducers, parameter servers) must share to understand each other. It is every message that
// travels as raw bytes (RoundHeader in reduction_server.h, AgreementHeader and AgreementCall in
// pairwise_agreement.h, StallNotice in stalled_call_check.h, CallHeader in collective_call.h, the
// parameter server's RequestHeader and ReplyHeader in ps/ps_protocol.h), the shared-memory
// all-reduce's segment, the tags' steps, and what each field means.
//
// Contract: kCollectiveProtocol changes with any of those. The UCX transport publishes it with its
// address and refuses a peer of another protocol, or of a Cohort that published none (older than
// protocol 1), by name before it connects (UcxTransport::Create): two builds whose messages
// differ fail at the start of the job, saying so, instead of misreading each other's bytes (a
// rolling upgrade leaves nodes on two releases for a while).
#pragma once

#include <cstdint>

namespace cohort::collective {

// 1 (2026-12-07): AgreementHeader of 88 bytes, AgreementCall with the root, StallNotice kinds
// kCall and kDisagreement, RoundHeader of 32 bytes with wire_type and worker.
// 2 (2026-12-08): every call's headers carry the digest of the sender's calls before it
// (CallHistory): AgreementCall::history (where protocol 1 had padding), CallHeader of 32 bytes,
// RoundHeader of 40, the shared-memory segment's call with it.
constexpr uint32_t kCollectiveProtocol = 2;

}  // namespace cohort::collective
