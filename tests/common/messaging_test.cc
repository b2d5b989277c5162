// Wire schema round trips and the verifier's rejection of bad frames, over real ZeroMQ sockets.
#include "common/messaging.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <string>

#include "tests/testing/signal_storm.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;

TEST(MessagingTest, EncodeParseRoundTripKeepsEveryField) {
  wire::JobInfoT job;
  job.name = "digits_ddp_001";
  job.state = wire::JobState::RUNNING;
  job.restarts = 2;
  auto replica = std::make_unique<wire::ReplicaInfoT>();
  replica->replica = "worker-1";
  replica->gpus = {0, 3};
  replica->state = wire::ReplicaState::RUNNING;
  job.replicas.push_back(std::move(replica));

  auto message = Message::Parse(Encode(42, std::move(job)));
  ASSERT_TRUE(message.ok()) << message.status().ToString();
  EXPECT_EQ(message->request_id(), 42u);
  ASSERT_EQ(message->type(), wire::Body::JobInfo);
  const auto* parsed = message->As<wire::JobInfo>();
  ASSERT_NE(parsed, nullptr);
  EXPECT_EQ(parsed->name()->str(), "digits_ddp_001");
  EXPECT_EQ(parsed->state(), wire::JobState::RUNNING);
  EXPECT_EQ(parsed->restarts(), 2);
  ASSERT_EQ(parsed->replicas()->size(), 1u);
  EXPECT_EQ(parsed->replicas()->Get(0)->replica()->str(), "worker-1");
  EXPECT_EQ(parsed->replicas()->Get(0)->gpus()->Get(1), 3);
  EXPECT_EQ(message->As<wire::NodeList>(), nullptr);
}

TEST(MessagingTest, ErrorReplyBecomesItsStatus) {
  auto message = Message::Parse(EncodeError(7, InvalidArgument("worker_pools[0].replicas: bad")));
  ASSERT_TRUE(message.ok());
  Status status = message->ErrorStatus();
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "worker_pools[0].replicas: bad");
}

// The user a plaintext client claims becomes a job's owner (stored, shown, in JSON): a frame
// claiming one that is not printable UTF-8, or too long, is refused naming it.
TEST(MessagingTest, ParseRefusesAClaimedUserThatIsNotPrintableUtf8) {
  auto claimed = [](const std::string& user) {
    return Message::Parse(Encode(3, wire::ListJobsT{}, user)).status();
  };
  EXPECT_TRUE(claimed("").ok());
  EXPECT_TRUE(claimed("alice").ok());
  EXPECT_TRUE(claimed("jos\xc3\xa9").ok());
  EXPECT_TRUE(claimed(std::string(kMaxClaimedUserBytes, 'a')).ok());
  const Status latin1 = claimed("jos\xe9");
  EXPECT_EQ(latin1.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(latin1.message(), "Envelope.user: 'jos\xef\xbf\xbd' is not printable UTF-8");
  EXPECT_EQ(claimed("bob\n").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(claimed(std::string(kMaxClaimedUserBytes + 1, 'a')).message(),
            "Envelope.user: 256 bytes; at most 255");
}

TEST(MessagingTest, ParseRejectsGarbageShortAndTruncatedFrames) {
  EXPECT_EQ(Message::Parse(zmq::message_t(std::string("hi"))).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(Message::Parse(zmq::message_t(std::string(64, 'x'))).status().code(),
            StatusCode::kDataLoss);

  wire::SubmitJobT submit;
  submit.spec_yaml = std::string(1000, 'y');
  zmq::message_t good = Encode(1, std::move(submit));
  // Every truncation of a valid frame must be refused, never read out of bounds.
  for (size_t cut = 0; cut < good.size(); cut += 7) {
    zmq::message_t truncated(good.data(), cut);
    EXPECT_FALSE(Message::Parse(std::move(truncated)).ok()) << "cut at " << cut;
  }
}

TEST(MessagingTest, ParseRejectsCorruptedOffsets) {
  wire::GetJobT get;
  get.name = "a_job";
  zmq::message_t good = Encode(3, std::move(get));
  std::string bytes(static_cast<const char*>(good.data()), good.size());
  int refused = 0;
  // Flip each byte in turn: the verifier either refuses the frame or it still parses safely.
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    auto message = Message::Parse(zmq::message_t(bad.data(), bad.size()));
    if (!message.ok()) {
      ++refused;
    } else if (const auto* body = message->As<wire::GetJob>(); body && body->name()) {
      EXPECT_LE(body->name()->size(), bad.size());
    }
  }
  EXPECT_GT(refused, 0);
}

TEST(MessagingTest, ParseRejectsOtherProtocolVersion) {
  flatbuffers::FlatBufferBuilder builder;
  wire::EnvelopeT envelope;
  envelope.version = kProtocolVersion + 1;
  envelope.body.Set(wire::ListJobsT());
  builder.Finish(wire::Envelope::Pack(builder, &envelope), wire::EnvelopeIdentifier());
  auto message = Message::Parse(zmq::message_t(builder.GetBufferPointer(), builder.GetSize()));
  EXPECT_EQ(message.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(message.status().message().find("protocol version"), std::string::npos);
}

// A router on a free loopback port and a dealer connected to it as "client-1".
struct RouterAndDealer {
  // A failure to bind or connect is a fatal failure (callers wrap it in ASSERT_NO_FATAL_FAILURE).
  void Connect() {
    auto bound = RouterSocket::Bind(context, "tcp://127.0.0.1:*");
    ASSERT_TRUE(bound.ok()) << bound.status().ToString();
    router.emplace(std::move(*bound));
    auto connected = DealerSocket::Connect(context, router->endpoint(), "client-1");
    ASSERT_TRUE(connected.ok()) << connected.status().ToString();
    dealer.emplace(std::move(*connected));
  }

  zmq::context_t context;
  std::optional<RouterSocket> router;
  std::optional<DealerSocket> dealer;
};

TEST(MessagingTest, RouterAnswersBadFrameAndKeepsServing) {
  RouterAndDealer sockets;
  ASSERT_NO_FATAL_FAILURE(sockets.Connect());
  RouterSocket& router = *sockets.router;
  DealerSocket& dealer = *sockets.dealer;

  // Garbage first: the router must answer it with an error and not hand it to us.
  zmq::message_t garbage(std::string("definitely not a flatbuffer"));
  ASSERT_TRUE(dealer.socket().send(garbage, zmq::send_flags::none));
  // The router handles the garbage inside Receive; nothing is returned for it.
  auto nothing = router.Receive(200ms);
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->has_value());
  auto reply_to_garbage = dealer.Receive(5s);
  ASSERT_TRUE(reply_to_garbage.ok());
  ASSERT_TRUE(reply_to_garbage->has_value());
  EXPECT_EQ((*reply_to_garbage)->ErrorStatus().code(), StatusCode::kDataLoss);

  // A good request still works afterwards, and the reply finds its caller by request id.
  ASSERT_TRUE(dealer.Send(Encode(9, wire::ListJobsT())).ok());
  auto request = router.Receive(5s);
  ASSERT_TRUE(request.ok());
  ASSERT_TRUE(request->has_value());
  EXPECT_EQ((*request)->peer, "client-1");
  EXPECT_EQ((*request)->message.type(), wire::Body::ListJobs);
  ASSERT_TRUE(router.Send((*request)->peer, Encode(9, wire::JobListT())).ok());
  auto reply = dealer.Receive(5s);
  ASSERT_TRUE(reply.ok());
  ASSERT_TRUE(reply->has_value());
  EXPECT_EQ((*reply)->request_id(), 9u);
  EXPECT_EQ((*reply)->type(), wire::Body::JobList);
}

TEST(MessagingTest, NextReadsOneMessageAndHandsBackABadFrameWithItsReason) {
  RouterAndDealer sockets;
  ASSERT_NO_FATAL_FAILURE(sockets.Connect());
  RouterSocket& router = *sockets.router;
  DealerSocket& dealer = *sockets.dealer;
  auto next = [&]() -> std::optional<Incoming> {
    zmq::pollitem_t item{router.socket().handle(), 0, ZMQ_POLLIN, 0};
    zmq::poll(&item, 1, 5s);
    auto in = router.Next();
    EXPECT_TRUE(in.ok()) << in.status().ToString();
    return in.ok() ? std::move(*in) : std::nullopt;
  };

  auto nothing = router.Next();
  ASSERT_TRUE(nothing.ok());
  EXPECT_FALSE(nothing->has_value());

  zmq::message_t garbage(std::string("definitely not a flatbuffer"));
  ASSERT_TRUE(dealer.socket().send(garbage, zmq::send_flags::none));
  auto bad = next();
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->peer, "client-1");
  EXPECT_EQ(bad->message.status().code(), StatusCode::kDataLoss);
  // Nothing is answered for it: that is the caller's choice.
  auto no_reply = dealer.Receive(100ms);
  ASSERT_TRUE(no_reply.ok());
  EXPECT_FALSE(no_reply->has_value());

  zmq::message_t one(std::string("one")), two(std::string("two"));
  ASSERT_TRUE(dealer.socket().send(one, zmq::send_flags::sndmore));
  ASSERT_TRUE(dealer.socket().send(two, zmq::send_flags::none));
  auto multi = next();
  ASSERT_TRUE(multi.has_value());
  EXPECT_EQ(multi->message.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(multi->message.status().message().find("exactly one frame"), std::string::npos);

  ASSERT_TRUE(dealer.Send(Encode(3, wire::ListJobsT())).ok());
  auto good = next();
  ASSERT_TRUE(good.has_value());
  ASSERT_TRUE(good->message.ok());
  EXPECT_EQ(good->message->type(), wire::Body::ListJobs);
  EXPECT_EQ(PeerName(good->peer), "client-1");
  EXPECT_EQ(PeerName(std::string("\0\x01\xff", 3)), "0x0001ff");
}

// A daemon's handled signal (the coordinator's SIGTERM, the agent's SIGHUP and SIGUSR2) that lands
// while ZeroMQ looks at its mailbox fails that call with EINTR before any message moved: the call
// is made again, and neither side loses, splits or reports anything.
TEST(MessagingTest, SignalsLandingInEveryCallLoseNoMessage) {
  RouterAndDealer sockets;
  ASSERT_NO_FATAL_FAILURE(sockets.Connect());
  RouterSocket& router = *sockets.router;
  DealerSocket& dealer = *sockets.dealer;
  constexpr uint64_t kMessages = 3000;
  testing::SignalStorm storm(pthread_self());
  uint64_t received = 0, replies = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (uint64_t id = 1; id <= kMessages; ++id) {
    ASSERT_TRUE(dealer.Send(Encode(id, wire::ListJobsT())).ok());
    // Next and Send as the coordinator's loop makes them, without waiting first.
    while (received < id && std::chrono::steady_clock::now() < deadline) {
      auto in = router.Next();
      ASSERT_TRUE(in.ok()) << "message " << id << ": " << in.status().ToString();
      if (!in->has_value()) continue;
      ASSERT_TRUE((*in)->message.ok())
          << "message " << id << ": " << (*in)->message.status().ToString();
      ASSERT_EQ((*in)->message->request_id(), id);
      ++received;
      ASSERT_TRUE(router.Send((*in)->peer, Encode(id, wire::JobListT())).ok());
    }
    auto reply = dealer.Receive(5s);
    ASSERT_TRUE(reply.ok()) << "reply " << id << ": " << reply.status().ToString();
    ASSERT_TRUE(reply->has_value()) << "reply " << id;
    ASSERT_EQ((*reply)->request_id(), id);
    ++replies;
  }
  EXPECT_EQ(received, kMessages);
  EXPECT_EQ(replies, kMessages);
  EXPECT_GT(storm.sent(), 100);  // the calls above ran under the storm
}

TEST(MessagingTest, CallTimesOutWithUnavailableWhenNobodyAnswers) {
  zmq::context_t context;
  auto dealer = DealerSocket::Connect(context, "tcp://127.0.0.1:1");
  ASSERT_TRUE(dealer.ok());
  auto reply = dealer->Call(wire::ListJobsT(), 100ms);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace cohort
