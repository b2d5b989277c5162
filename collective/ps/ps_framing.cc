#include "collective/ps/ps_framing.h"

#include <algorithm>
#include <cstring>

#include "common/enum_names.h"

namespace cohort::collective::ps {
namespace {

constexpr EnumName<PsOp> kPsOpNames[] = {{PsOp::kInit, "init"},         {PsOp::kPush, "push"},
                                         {PsOp::kPull, "pull"},         {PsOp::kClock, "clock"},
                                         {PsOp::kShutdown, "shutdown"}, {PsOp::kBye, "bye"},
                                         {PsOp::kBarrier, "barrier"}};

}  // namespace

bool CarriesValues(PsOp op, uint16_t flags) {
  return op == PsOp::kPush || (op == PsOp::kInit && (flags & kHasValues));
}

EncodedRequest EncodeRequest(RequestHeader h, std::span<const uint64_t> keys, ConstBytes payload) {
  EncodedRequest out;
  size_t size = sizeof(RequestHeader);
  const bool list = !(h.flags & kKeyRange) && (h.op == PsOp::kPush || h.op == PsOp::kPull);
  if (list) {
    h.num_keys = static_cast<uint32_t>(keys.size());
    if (size + keys.size() * 8 <= kMaxRequestBytes) {
      h.flags |= kInlineKeys;
      size += keys.size() * 8;
    } else {
      out.keys_follow = true;
    }
  }
  const bool values = CarriesValues(h.op, h.flags) && payload.size > 0;
  if (values && size + payload.size <= kMaxRequestBytes) {
    h.flags |= kInlinePayload;
    size += payload.size;
  }
  out.payload_follows = values && !(h.flags & kInlinePayload);
  out.message.resize(size);
  char* p = out.message.data();
  std::memcpy(p, &h, sizeof(h));
  p += sizeof(h);
  if (h.flags & kInlineKeys) {
    std::memcpy(p, keys.data(), keys.size() * 8);
    p += keys.size() * 8;
  }
  if (h.flags & kInlinePayload) std::memcpy(p, payload.data, payload.size);
  out.header = h;
  return out;
}

DecodedRequest DecodeRequest(const char* message, size_t size) {
  DecodedRequest r;
  if (size < sizeof(RequestHeader)) {
    r.problem = DataLoss("request message of " + std::to_string(size) + " bytes is too short");
    return r;
  }
  std::memcpy(&r.header, message, sizeof(RequestHeader));
  const RequestHeader& h = r.header;
  if (h.magic != kRequestMagic) {
    r.problem = DataLoss("bad request header");
    return r;
  }
  const uint64_t limit = std::min<uint64_t>(size, kMaxRequestBytes);
  uint64_t off = sizeof(RequestHeader);
  const bool is_init = h.op == PsOp::kInit;
  if (is_init) {
    if (h.layout_bytes > kMaxLayoutBytes) {
      r.problem = InvalidArgument("init: layout of " + std::to_string(h.layout_bytes) +
                                  " bytes is too large");
      return r;
    }
    r.layout_follows = true;
  } else if (!(h.flags & kKeyRange) && (h.op == PsOp::kPush || h.op == PsOp::kPull)) {
    if (h.flags & kInlineKeys) {
      if (off + uint64_t{h.num_keys} * 8 > limit) {
        r.problem = DataLoss("request claims more inline keys than its message holds");
        return r;
      }
      r.keys.resize(h.num_keys);
      std::memcpy(r.keys.data(), message + off, r.keys.size() * 8);
      off += r.keys.size() * 8;
    } else if (h.num_keys > 0) {
      if (h.num_keys > kMaxKeyList) {
        r.problem =
            InvalidArgument("request of " + std::to_string(h.num_keys) + " keys is too large");
        return r;
      }
      r.keys_follow = true;
    }
  }
  if (CarriesValues(h.op, h.flags) && h.payload_bytes > 0) {
    if (h.flags & kInlinePayload) {
      if (off + h.payload_bytes > limit) {
        r.problem = DataLoss("request claims more inline values than its message holds");
      } else {
        r.payload = message + off;
      }
    } else {
      r.payload_follows = true;
    }
  }
  return r;
}

ReplyHeader MakeReplyHeader(uint32_t id, const Status& status) {
  ReplyHeader rh;
  rh.id = id;
  rh.code = static_cast<uint8_t>(status.code());
  const std::string& text = status.ok() ? std::string() : status.message();
  rh.message_size = static_cast<uint32_t>(std::min(text.size(), kReplyMessageBytes - 1));
  std::memcpy(rh.message, text.data(), rh.message_size);
  return rh;
}

std::vector<char> EncodeReply(const ReplyHeader& header, ConstBytes inline_values) {
  std::vector<char> message(sizeof(ReplyHeader) + inline_values.size);
  std::memcpy(message.data(), &header, sizeof(header));
  if (inline_values.size > 0) {
    std::memcpy(message.data() + sizeof(header), inline_values.data, inline_values.size);
  }
  return message;
}

StatusOr<ReplyHeader> DecodeReply(ConstBytes message) {
  ReplyHeader rh;
  if (message.size < sizeof(rh)) return DataLoss("reply message is too short");
  std::memcpy(&rh, message.data, sizeof(rh));
  if (rh.magic != kReplyMagic) return DataLoss("bad reply header");
  return rh;
}

Status ReplyStatus(const ReplyHeader& header) {
  if (header.code == 0) return Status::Ok();
  return Status(
      static_cast<StatusCode>(header.code),
      std::string(header.message, std::min<size_t>(header.message_size, kReplyMessageBytes)));
}

std::string OpName(PsOp op) {
  const std::string_view name = NameIn(kPsOpNames, op, "");
  return name.empty() ? "op " + std::to_string(static_cast<int>(op)) : std::string(name);
}

}  // namespace cohort::collective::ps
