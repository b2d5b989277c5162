// The parameter-server framing (collective/ps/ps_framing.h) without a transport: what goes inside
// the request message and what follows it, decoding of what was encoded, and headers that lie.
#include "collective/ps/ps_framing.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace cohort::collective::ps {
namespace {

RequestHeader Push(uint64_t payload_bytes) {
  RequestHeader h;
  h.op = PsOp::kPush;
  h.type = static_cast<uint8_t>(DataType::kF32);
  h.id = 7;
  h.payload_bytes = payload_bytes;
  return h;
}

TEST(PsFramingTest, SmallRequestCarriesKeysAndValuesInline) {
  const std::vector<uint64_t> keys = {3, 5, 9};
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const EncodedRequest e =
      EncodeRequest(Push(values.size() * 4), keys, ConstBytes{values.data(), values.size() * 4});
  EXPECT_FALSE(e.keys_follow);
  EXPECT_FALSE(e.payload_follows);
  EXPECT_EQ(e.header.flags, kInlineKeys | kInlinePayload);
  EXPECT_EQ(e.header.num_keys, 3u);
  EXPECT_EQ(e.message.size(), sizeof(RequestHeader) + 3 * 8 + values.size() * 4);

  const DecodedRequest d = DecodeRequest(e.message.data(), e.message.size());
  ASSERT_TRUE(d.problem.ok()) << d.problem.ToString();
  EXPECT_EQ(d.header.id, 7u);
  EXPECT_EQ(d.keys, keys);
  ASSERT_NE(d.payload, nullptr);
  EXPECT_EQ(std::memcmp(d.payload, values.data(), values.size() * 4), 0);
  EXPECT_FALSE(d.keys_follow || d.payload_follows || d.layout_follows);
}

TEST(PsFramingTest, WhatDoesNotFitFollowsInItsOwnMessage) {
  std::vector<uint64_t> keys(kMaxRequestBytes / 8);
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i;
  const std::vector<char> values(kMaxRequestBytes, 'x');
  const EncodedRequest e =
      EncodeRequest(Push(values.size()), keys, ConstBytes{values.data(), values.size()});
  EXPECT_TRUE(e.keys_follow);
  EXPECT_TRUE(e.payload_follows);
  EXPECT_EQ(e.header.flags & (kInlineKeys | kInlinePayload), 0);
  EXPECT_EQ(e.message.size(), sizeof(RequestHeader));

  const DecodedRequest d = DecodeRequest(e.message.data(), e.message.size());
  ASSERT_TRUE(d.problem.ok()) << d.problem.ToString();
  EXPECT_TRUE(d.keys_follow);
  EXPECT_EQ(d.header.num_keys, keys.size());
  EXPECT_TRUE(d.payload_follows);
  EXPECT_EQ(d.payload, nullptr);
}

TEST(PsFramingTest, KeyRangesSendNoKeysAndInitSendsItsLayout) {
  RequestHeader h;
  h.op = PsOp::kPull;
  h.flags = kKeyRange;
  h.first_key = 4;
  h.num_keys = 10;
  h.payload_bytes = 4096;
  const EncodedRequest pull = EncodeRequest(h, {}, ConstBytes{});
  EXPECT_EQ(pull.message.size(), sizeof(RequestHeader));
  const DecodedRequest d = DecodeRequest(pull.message.data(), pull.message.size());
  EXPECT_TRUE(d.problem.ok());
  EXPECT_TRUE(d.keys.empty());
  EXPECT_FALSE(d.keys_follow || d.payload_follows);

  RequestHeader init;
  init.op = PsOp::kInit;
  init.layout_bytes = 100;
  const EncodedRequest e = EncodeRequest(init, {}, ConstBytes{});
  const DecodedRequest di = DecodeRequest(e.message.data(), e.message.size());
  EXPECT_TRUE(di.problem.ok());
  EXPECT_TRUE(di.layout_follows);
  EXPECT_FALSE(di.payload_follows) << "an init without kHasValues carries no values";
}

TEST(PsFramingTest, HeadersThatLieBecomeProblemsNotReads) {
  std::vector<char> message(kMaxRequestBytes, 0);
  auto decode = [&](const RequestHeader& h) {
    std::memcpy(message.data(), &h, sizeof(h));
    return DecodeRequest(message.data(), message.size());
  };
  RequestHeader bad = Push(0);
  bad.magic = 0;
  EXPECT_EQ(decode(bad).problem.code(), StatusCode::kDataLoss);

  RequestHeader keys = Push(0);
  keys.flags = kInlineKeys;
  keys.num_keys = kMaxRequestBytes / 8;
  EXPECT_EQ(decode(keys).problem.code(), StatusCode::kDataLoss);

  RequestHeader values = Push(kMaxRequestBytes);
  values.flags = kKeyRange | kInlinePayload;
  const DecodedRequest v = decode(values);
  EXPECT_EQ(v.problem.code(), StatusCode::kDataLoss);
  EXPECT_EQ(v.payload, nullptr);

  RequestHeader many = Push(0);
  many.num_keys = static_cast<uint32_t>(kMaxKeyList + 1);
  EXPECT_EQ(decode(many).problem.code(), StatusCode::kInvalidArgument);

  RequestHeader layout;
  layout.op = PsOp::kInit;
  layout.layout_bytes = kMaxLayoutBytes + 1;
  const DecodedRequest l = decode(layout);
  EXPECT_EQ(l.problem.code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(l.layout_follows);

  EXPECT_EQ(DecodeRequest(message.data(), sizeof(RequestHeader) - 1).problem.code(),
            StatusCode::kDataLoss);
}

TEST(PsFramingTest, RepliesCarryStatusClocksAndInlineValues) {
  const std::string long_message(1000, 'e');
  ReplyHeader rh = MakeReplyHeader(42, NotFound(long_message));
  rh.clock = 5;
  rh.applied_clock = 3;
  const std::vector<float> values = {1.5f, 2.5f};
  const std::vector<char> message = EncodeReply(rh, ConstBytes{values.data(), 8});
  ASSERT_EQ(message.size(), sizeof(ReplyHeader) + 8);
  EXPECT_EQ(std::memcmp(message.data() + sizeof(ReplyHeader), values.data(), 8), 0);

  auto got = DecodeReply(ConstBytes{message.data(), message.size()});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->id, 42u);
  EXPECT_EQ(got->clock, 5);
  EXPECT_EQ(got->applied_clock, 3);
  const Status s = ReplyStatus(*got);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), long_message.substr(0, kReplyMessageBytes - 1));
  EXPECT_TRUE(ReplyStatus(MakeReplyHeader(1, Status::Ok())).ok());

  std::vector<char> bad = message;
  bad[0] ^= 1;
  EXPECT_EQ(DecodeReply(ConstBytes{bad.data(), bad.size()}).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeReply(ConstBytes{message.data(), 10}).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cohort::collective::ps
