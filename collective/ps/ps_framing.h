// Framing of the parameter-server protocol (ps_protocol.h): how a request or reply becomes
// transport messages and back, with no transport in sight (ps-lite's Van packs and unpacks the
// same way before it sends). PsWorker encodes requests and decodes replies; PsServer decodes
// requests, receives what they say follows, and encodes replies.
//
// Decoding never trusts the sender: a header that lies about its sizes yields a `problem` (the
// request is answered with it, unhandled) and never a read past the message.
// Thread safety: free functions over the caller's buffers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "collective/ps/ps_protocol.h"
#include "common/status.h"

namespace cohort::collective::ps {

// Largest layout an init may carry, and largest key list sent in its own message: bounds on what
// a bad header can make the server allocate.
constexpr uint64_t kMaxLayoutBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxKeyList = uint64_t{1} << 24;

// True when `op` carries values (a push, or an init with kHasValues).
bool CarriesValues(PsOp op, uint16_t flags);

// One request as its first message carries it, and the messages that follow it on
// MessageTag(id, kKeysStep) and MessageTag(id, kPayloadStep).
struct EncodedRequest {
  RequestHeader header;          // with kInlineKeys / kInlinePayload and num_keys set
  std::vector<char> message;     // sent on RequestTag(); at most kMaxRequestBytes
  bool keys_follow = false;      // the key list goes in its own message (the caller's keys)
  bool payload_follows = false;  // the values go in their own message (the caller's buffer)
};

// Puts the key list (push and pull without kKeyRange) and the values (CarriesValues) inside the
// request message when they fit in kMaxRequestBytes; `header.clock` and `layout_bytes` are sent
// as given.
EncodedRequest EncodeRequest(RequestHeader header, std::span<const uint64_t> keys,
                             ConstBytes payload);

// What a received request message says.
struct DecodedRequest {
  RequestHeader header;
  std::vector<uint64_t> keys;     // the inline key list
  const char* payload = nullptr;  // inline values: inside the decoded message
  bool layout_follows = false;    // init: a layout of header.layout_bytes follows
  bool keys_follow = false;       // header.num_keys keys follow in their own message
  bool payload_follows = false;   // header.payload_bytes of values follow in their own message
  // A malformed or oversized request: answer with this. What is marked to follow was sent
  // before the problem was found and is still to be received.
  Status problem;
};

// Decodes a request message of `size` bytes (the receive buffer: kMaxRequestBytes). Bad magic,
// inline keys or values that would run past kMaxRequestBytes, a layout over kMaxLayoutBytes or a
// key list over kMaxKeyList become `problem`.
DecodedRequest DecodeRequest(const char* message, size_t size);

// The reply to request `id` with `status` (its message cut to kReplyMessageBytes - 1).
ReplyHeader MakeReplyHeader(uint32_t id, const Status& status);
// The reply message: the header, then `inline_values` (a small pull).
std::vector<char> EncodeReply(const ReplyHeader& header, ConstBytes inline_values);
// kDataLoss when the message is too short or its magic is wrong.
StatusOr<ReplyHeader> DecodeReply(ConstBytes message);
// The status a reply carries: OK, or its code with its message.
Status ReplyStatus(const ReplyHeader& header);

// "init", "push", ... for logs.
std::string OpName(PsOp op);

}  // namespace cohort::collective::ps
