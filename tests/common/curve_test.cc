// CURVE security over real ZeroMQ sockets: listed keys get through, unlisted clients and
// impostor coordinators are refused.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/curve_keys.h"
#include "common/messaging.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

class CurveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cohort-curve-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    server_ = *GenerateCurveKeyPair();
    allowed_ = *GenerateCurveKeyPair();
    stranger_ = *GenerateCurveKeyPair();
    ASSERT_TRUE(WriteCurveKeyFiles(dir_ / "clients", "alice", allowed_).ok());
    fs::create_directories(dir_ / "private");
    ASSERT_TRUE(WriteCurveKeyFiles(dir_ / "private", "stranger", stranger_).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Serves one ListJobs round trip if the client gets through; returns whether it did.
  bool RoundTrip(RouterSocket& router, DealerSocket& dealer) {
    if (!dealer.Send(Encode(1, wire::ListJobsT())).ok()) return false;
    auto request = router.Receive(1500ms);
    if (!request.ok() || !request->has_value()) return false;
    if (!router.Send((*request)->peer, Encode(1, wire::JobListT())).ok()) return false;
    auto reply = dealer.Receive(1500ms);
    return reply.ok() && reply->has_value();
  }

  SocketSecurity ServerSecurity() const {
    SocketSecurity s;
    s.insecure = false;
    s.keys = server_;
    s.zap_domain = "clients";
    return s;
  }
  SocketSecurity ClientSecurity(const CurveKeyPair& keys, const std::string& server_key) const {
    SocketSecurity s;
    s.insecure = false;
    s.keys = keys;
    s.server_public_key = server_key;
    return s;
  }

  fs::path dir_;
  CurveKeyPair server_, allowed_, stranger_;
};

TEST_F(CurveTest, KeyFilesRoundTripAndRefuseOverwrite) {
  auto read = ReadCurveKeyFile((dir_ / "clients" / "alice.key").string());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->public_key, allowed_.public_key);
  EXPECT_EQ(read->secret_key, allowed_.secret_key);
  auto pub = ReadCurveKeyFile((dir_ / "clients" / "alice.pub").string());
  ASSERT_TRUE(pub.ok());
  EXPECT_TRUE(pub->secret_key.empty());
  EXPECT_EQ(fs::status(dir_ / "clients" / "alice.key").permissions() & fs::perms::others_read,
            fs::perms::none);
  EXPECT_FALSE(WriteCurveKeyFiles(dir_ / "clients", "alice", stranger_).ok());
}

TEST_F(CurveTest, MalformedKeyFileNamesFileAndLine) {
  fs::path bad = dir_ / "bad.key";
  { std::ofstream(bad) << "# comment\npublic-key = tooshort\n"; }
  auto read = ReadCurveKeyFile(bad.string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("bad.key:2"), std::string::npos)
      << read.status().message();
}

TEST_F(CurveTest, ListedClientIsServedUnlistedClientAndWrongServerKeyAreRefused) {
  zmq::context_t context;
  auto zap = ZapAuthenticator::Start(context, {{"clients", (dir_ / "clients").string()}});
  ASSERT_TRUE(zap.ok()) << zap.status().ToString();
  auto router = RouterSocket::Bind(context, "tcp://127.0.0.1:*", ServerSecurity());
  ASSERT_TRUE(router.ok()) << router.status().ToString();

  auto alice = DealerSocket::Connect(context, router->endpoint(), "alice",
                                     ClientSecurity(allowed_, server_.public_key));
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE(RoundTrip(*router, *alice));

  auto stranger = DealerSocket::Connect(context, router->endpoint(), "stranger",
                                        ClientSecurity(stranger_, server_.public_key));
  ASSERT_TRUE(stranger.ok());
  EXPECT_FALSE(RoundTrip(*router, *stranger));

  // A client that expects another coordinator key never completes the handshake.
  auto fooled = DealerSocket::Connect(context, router->endpoint(), "fooled",
                                      ClientSecurity(allowed_, stranger_.public_key));
  ASSERT_TRUE(fooled.ok());
  EXPECT_FALSE(RoundTrip(*router, *fooled));

  // Keys added to the directory are honoured without a restart.
  ASSERT_TRUE(WriteCurveKeyFiles(dir_ / "clients", "stranger", stranger_).ok());
  auto welcomed = DealerSocket::Connect(context, router->endpoint(), "welcomed",
                                        ClientSecurity(stranger_, server_.public_key));
  ASSERT_TRUE(welcomed.ok());
  EXPECT_TRUE(RoundTrip(*router, *welcomed));
}

TEST_F(CurveTest, PlaintextClientCannotTalkToCurveServer) {
  zmq::context_t context;
  auto zap = ZapAuthenticator::Start(context, {{"clients", (dir_ / "clients").string()}});
  ASSERT_TRUE(zap.ok());
  auto router = RouterSocket::Bind(context, "tcp://127.0.0.1:*", ServerSecurity());
  ASSERT_TRUE(router.ok());
  auto plain = DealerSocket::Connect(context, router->endpoint(), "plain");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(RoundTrip(*router, *plain));
}

TEST_F(CurveTest, MissingKeysAreClearErrors) {
  zmq::context_t context;
  SocketSecurity no_secret;
  no_secret.insecure = false;
  auto router = RouterSocket::Bind(context, "tcp://127.0.0.1:*", no_secret);
  EXPECT_EQ(router.status().code(), StatusCode::kInvalidArgument);
  SocketSecurity no_server_key = ClientSecurity(allowed_, "");
  auto dealer = DealerSocket::Connect(context, "tcp://127.0.0.1:1", "", no_server_key);
  EXPECT_EQ(dealer.status().code(), StatusCode::kInvalidArgument);
  auto zap = ZapAuthenticator::Start(context, {{"agents", (dir_ / "nope").string()}});
  EXPECT_EQ(zap.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort
