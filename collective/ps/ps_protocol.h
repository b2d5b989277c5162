// Wire protocol between PsWorker and PsServer (ps-lite's shape: small headers, values in their
// own messages). Ranks: workers 0..n-1, servers n..n+s-1 on one Transport.
//
// A worker sends every request to a server on the fixed tag kRequestTag: one message of at most
// kMaxRequestBytes holding a RequestHeader, then (flag kInlineKeys) the key list as u64s, then
// (flag kInlinePayload) the values. What does not fit travels in its own message right after:
// the key list on RequestTag(id, kKeysStep), the values on RequestTag(id, kPayloadStep), sent
// straight from the caller's buffer (zero-copy rendezvous for large values). The server handles
// one worker's requests in order.
//
// Every request gets one reply on ReplyTag(id, kReplyStep): a ReplyHeader, followed (pull, flag
// kInlinePayload) by the values when they are at most the worker's inline limit; larger pulled
// values come in their own message on ReplyTag(id, kDataStep) straight into the caller's buffer,
// and that message is always sent (empty on error) so the worker's posted receive completes.
//
// Keys: flag kKeyRange means `num_keys` consecutive layout keys starting at `first_key`, with no
// list sent. The values of a request are, per listed key, the bytes of that key the server owns,
// concatenated in key order (ps_layout.h).
#pragma once

#include <cstdint>
#include <string>

#include "collective/ps/ps_optimizer.h"
#include "collective/transport/transport.h"

namespace cohort::collective::ps {

enum class PsOp : uint8_t {
  kInit = 1,      // register the layout; values + optimizer when flag kHasValues (the chief)
  kPush = 2,      // gradients for keys
  kPull = 3,      // read parameters
  kClock = 4,     // the worker finished one iteration (SSP)
  kShutdown = 5,  // training is over: later pushes are refused
  kBye = 6,       // this worker leaves the current transport generation
  kBarrier = 7,   // answered once every worker still here has sent as many barriers
};

constexpr uint32_t kRequestMagic = 0x51525043;  // "CPRQ"
constexpr uint32_t kReplyMagic = 0x50525043;    // "CPRP"
// A request message: room for the header and the keys and values of a small request, so most
// requests are one message.
constexpr size_t kMaxRequestBytes = 64 * 1024;
// Room for a reply's error text: enough to name a key and the sizes involved.
constexpr size_t kReplyMessageBytes = 256;
// Pulled values up to this size come inside the reply message (a small pull is one message);
// larger ones in their own, received straight into the caller's buffer.
constexpr uint64_t kInlineReplyBytes = 32 * 1024;

enum RequestFlags : uint16_t {
  kKeyRange = 1,
  kInlineKeys = 2,
  kInlinePayload = 4,
  kHasValues = 8,  // init: carries values and the optimizer config
  kReset = 16,     // init with values: replace whatever model the server holds (benchmarks)
};

struct RequestHeader {
  uint32_t magic = kRequestMagic;
  PsOp op = PsOp::kPush;
  uint8_t type = 0;  // DataType of the values
  uint16_t flags = 0;
  uint32_t id = 0;  // request id (tags use its low 20 bits)
  uint32_t num_keys = 0;
  uint64_t first_key = 0;
  uint64_t payload_bytes = 0;  // values sent (push, init) or expected back (pull)
  uint64_t layout_bytes = 0;   // init: a serialized ModelLayout follows as the key-list message
  int64_t clock = 0;           // the worker's clock (informational; the server counts kClock)
  OptimizerConfig optimizer;   // init with kHasValues
};

struct ReplyHeader {
  uint32_t magic = kReplyMagic;
  uint32_t id = 0;
  uint8_t code = 0;  // StatusCode
  uint8_t flags = 0;
  uint16_t reserved = 0;
  uint32_t message_size = 0;
  int64_t clock = 0;  // the server's clock for this worker after the request (init: restored clock)
  int64_t applied_clock = 0;  // clocks fully applied on this server
  uint64_t payload_bytes = 0;
  char message[kReplyMessageBytes] = {};
};

// Tag steps. The request tag uses sequence 0 and a step no per-request message uses.
constexpr uint32_t kRequestStep = (1u << kTagStepBits) - 3;
constexpr uint32_t kKeysStep = 1;
constexpr uint32_t kPayloadStep = 2;
constexpr uint32_t kReplyStep = 3;
constexpr uint32_t kDataStep = 4;

inline Tag RequestTag() { return MakeTag(0, kRequestStep); }

// "worker 2", "parameter server 0": a rank's name in errors.
inline std::string PsRankName(int rank, int num_workers) {
  return rank < num_workers ? "worker " + std::to_string(rank)
                            : "parameter server " + std::to_string(rank - num_workers);
}
inline Tag MessageTag(uint32_t id, uint32_t step) { return MakeTag(id, step); }

}  // namespace cohort::collective::ps
