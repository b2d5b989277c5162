// PairwiseAgreement against a peer whose headers are malformed (corrupt, or sent by something that
// is not a worker of this call): the worker fails at once with kDataLoss naming that peer, never
// crashes, never reads past what arrived, and never waits for the deadline.
#include "collective/algorithms/pairwise_agreement.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "collective/algorithms/recursive_doubling.h"
#include "collective/algorithms/ring_allreduce.h"
#include "collective/transport/loopback/loopback_transport.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr size_t kCount = 1000;

// A header worker 1 would send for 1000 f32 (sum), its data inline.
AgreementHeader WellFormedHeader() {
  AgreementHeader h;
  h.data_bytes = kCount / 2 * sizeof(float);
  h.sender = {.count = kCount,
              .type = static_cast<uint8_t>(DataType::kF32),
              .op = static_cast<uint8_t>(ReduceOp::kSum),
              .rank = 1};
  return h;
}

struct Corruption {
  std::string name;
  std::function<void(AgreementHeader&)> apply;
};

TEST(PairwiseAgreementTest, AMalformedHeaderFailsTheWorkerAtOnceNamingTheSender) {
  const std::vector<Corruption> corruptions = {
      {"magic", [](AgreementHeader& h) { h.magic = 0; }},
      {"type", [](AgreementHeader& h) { h.sender.type = 200; }},
      {"op", [](AgreementHeader& h) { h.sender.op = 200; }},
      {"data not whole elements", [](AgreementHeader& h) { h.data_bytes = 3; }},
      {"more data than its call", [](AgreementHeader& h) { h.data_bytes = 4 * (kCount + 1); }},
      {"pieces not whole elements", [](AgreementHeader& h) { h.piece_bytes = 6; }},
      {"more pieces than steps",
       [](AgreementHeader& h) {
         h.sender.count = uint64_t{1} << 40;
         h.data_bytes = uint64_t{4} << 38;
         h.piece_bytes = 4;
       }},
      {"another sender", [](AgreementHeader& h) { h.sender.rank = 7; }},
      {"half a disagreement", [](AgreementHeader& h) { h.differ[0].rank = 0; }}};
  using Allreduce = Status (*)(Transport&, const AllreduceOptions&);
  const std::vector<std::pair<std::string, Allreduce>> algorithms = {
      {"ring", RingAllreduce}, {"recursive doubling", RecursiveDoublingAllreduce}};
  for (const auto& [algorithm, allreduce] : algorithms) {
    // The ring's first header comes on step 1, recursive doubling's (2 workers: no fold) on 2.
    const uint32_t step = kAgreementHeaderStep + (algorithm == "ring" ? 1 : 2);
    for (const Corruption& corruption : corruptions) {
      SCOPED_TRACE(algorithm + ", " + corruption.name);
      LoopbackFabric fabric(2);
      auto worker = fabric.CreateTransport(0);
      auto peer = fabric.CreateTransport(1);
      AgreementHeader header = WellFormedHeader();
      if (algorithm == "recursive doubling") header.data_bytes = kCount * sizeof(float);
      corruption.apply(header);
      // The header with as many bytes after it as it could claim inline.
      std::vector<char> message(sizeof(header) + kAgreementInlineBytes, 0);
      std::memcpy(message.data(), &header, sizeof(header));
      auto sent = peer->Isend(0, MakeTag(0, step), ConstBytes{message.data(), message.size()});
      ASSERT_TRUE(sent.ok()) << sent.status().ToString();

      std::vector<float> data(kCount, 1.0f);
      AllreduceOptions o;
      o.data = data.data();
      o.count = kCount;
      o.deadline = DeadlineAfter(milliseconds(20000));
      o.num_workers = 2;
      const auto start = SteadyClock::now();
      const Status s = allreduce(*worker, o);
      EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
      EXPECT_NE(s.message().find("malformed call header from worker 1"), std::string::npos)
          << s.ToString();
      EXPECT_LT(SteadyClock::now() - start, milliseconds(5000)) << "it waited for the deadline";
      // The peer's header was taken whole: its send completed.
      EXPECT_TRUE(sent->Wait(DeadlineAfter(milliseconds(1000))).ok());
      fabric.Kill(0);  // what the worker left posted goes
    }
  }
}

}  // namespace
}  // namespace cohort::collective
