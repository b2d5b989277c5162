// CURVE security over real ZeroMQ sockets: listed keys get through, unlisted clients and
// impostor coordinators are refused.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>

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

  // A CURVE router in context_ that admits the keys listed under dir_/clients; nullptr (and a
  // failure) when it cannot start. It and its authenticator live as long as the fixture.
  RouterSocket* ServeListedClients() {
    auto zap = ZapAuthenticator::Start(context_, {{"clients", (dir_ / "clients").string()}});
    EXPECT_TRUE(zap.ok()) << zap.status().ToString();
    if (!zap.ok()) return nullptr;
    zap_ = std::move(*zap);
    auto router = RouterSocket::Bind(context_, "tcp://127.0.0.1:*", ServerSecurity());
    EXPECT_TRUE(router.ok()) << router.status().ToString();
    if (!router.ok()) return nullptr;
    router_ = std::make_unique<RouterSocket>(std::move(*router));
    return router_.get();
  }

  // A CURVE client of `keys` under routing id `name`, connected to the router that
  // ServeListedClients() started, expecting the server key `server_key` (server_'s by default).
  StatusOr<DealerSocket> ConnectClient(const std::string& name, const CurveKeyPair& keys) {
    return ConnectClient(name, keys, server_.public_key);
  }
  StatusOr<DealerSocket> ConnectClient(const std::string& name, const CurveKeyPair& keys,
                                       const std::string& server_key) {
    return DealerSocket::Connect(context_, router_->endpoint(), name,
                                 ClientSecurity(keys, server_key));
  }

  fs::path dir_;
  CurveKeyPair server_, allowed_, stranger_;
  // Declared in this order so the sockets close before the context ends.
  zmq::context_t context_;
  std::unique_ptr<ZapAuthenticator> zap_;
  std::unique_ptr<RouterSocket> router_;
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
  RouterSocket* router = ServeListedClients();
  ASSERT_NE(router, nullptr);

  auto alice = ConnectClient("alice", allowed_);
  ASSERT_TRUE(alice.ok());
  EXPECT_TRUE(RoundTrip(*router, *alice));

  auto stranger = ConnectClient("stranger", stranger_);
  ASSERT_TRUE(stranger.ok());
  EXPECT_FALSE(RoundTrip(*router, *stranger));

  // A client that expects another coordinator key never completes the handshake.
  auto fooled = ConnectClient("fooled", allowed_, stranger_.public_key);
  ASSERT_TRUE(fooled.ok());
  EXPECT_FALSE(RoundTrip(*router, *fooled));

  // Keys added to the directory are honoured without a restart.
  ASSERT_TRUE(WriteCurveKeyFiles(dir_ / "clients", "stranger", stranger_).ok());
  auto welcomed = ConnectClient("welcomed", stranger_);
  ASSERT_TRUE(welcomed.ok());
  EXPECT_TRUE(RoundTrip(*router, *welcomed));
}

TEST_F(CurveTest, AListedKeyNamesItsHolderAndAKeyUnderTwoNamesAdmitsNeither) {
  ASSERT_TRUE(WriteCurveKeyFiles(dir_ / "agents", "node-7", allowed_).ok());
  fs::remove(dir_ / "agents" / "node-7.key");
  auto listed = ReadListedKeys((dir_ / "agents").string());
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_TRUE(listed->Lists("node-7", allowed_.public_key));
  EXPECT_FALSE(listed->Lists("node-8", allowed_.public_key));
  EXPECT_FALSE(listed->Lists("node-7", stranger_.public_key));
  fs::copy_file(dir_ / "agents" / "node-7.pub", dir_ / "agents" / "node-8.pub");
  listed = ReadListedKeys((dir_ / "agents").string());
  ASSERT_TRUE(listed.ok());
  EXPECT_FALSE(listed->Lists("node-7", allowed_.public_key));
  EXPECT_FALSE(listed->Lists("node-8", allowed_.public_key));
}

TEST_F(CurveTest, EveryMessageCarriesTheNameAndKeyItsConnectionWasAdmittedUnder) {
  RouterSocket* router = ServeListedClients();
  ASSERT_NE(router, nullptr);
  auto alice = ConnectClient("", allowed_);
  ASSERT_TRUE(alice.ok());
  ASSERT_TRUE(alice->Send(Encode(1, wire::ListJobsT())).ok());
  auto request = router->Receive(5s);
  ASSERT_TRUE(request.ok());
  ASSERT_TRUE(request->has_value());
  EXPECT_EQ((*request)->identity.user, "alice");
  EXPECT_EQ((*request)->identity.key, allowed_.public_key);
}

TEST_F(CurveTest, ARefusedKeyIsToldApartFromNoAnswer) {
  RouterSocket* router = ServeListedClients();
  ASSERT_NE(router, nullptr);
  auto stranger = ConnectClient("", stranger_);
  ASSERT_TRUE(stranger.ok());
  auto refused = stranger->Call(wire::ListJobsT(), 10s);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnauthenticated) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("refused this key (not listed)"), std::string::npos);
  EXPECT_NE(refused.status().message().find(stranger_.public_key), std::string::npos);

  // Listed meanwhile: ZeroMQ does not reconnect after a refusal, the socket does (on a call a
  // second later); the handshake succeeds and calls are served.
  ASSERT_TRUE(WriteCurveKeyFiles(dir_ / "clients", "stranger", stranger_).ok());
  std::atomic<bool> serving{true};
  std::thread server([&] {
    while (serving) {
      auto request = router->Receive(50ms);
      if (request.ok() && request->has_value()) {
        (void)router->Send((*request)->peer,
                           Encode((*request)->message.request_id(), wire::JobListT()));
      }
    }
  });
  Status served = Unavailable("not tried");
  for (int i = 0; i < 50 && !served.ok(); ++i) {
    served = stranger->Call(wire::ListJobsT(), 1s).status();
    if (!served.ok()) std::this_thread::sleep_for(200ms);
  }
  serving = false;
  server.join();
  EXPECT_TRUE(served.ok()) << served.ToString();
  EXPECT_TRUE(stranger->KeyStatus().ok()) << stranger->KeyStatus().ToString();

  // No coordinator at all: no answer, not a refusal.
  auto nobody = DealerSocket::Connect(context_, "tcp://127.0.0.1:1", "",
                                      ClientSecurity(allowed_, server_.public_key));
  ASSERT_TRUE(nobody.ok());
  EXPECT_EQ(nobody->Call(wire::ListJobsT(), 300ms).status().code(), StatusCode::kUnavailable);
}

TEST_F(CurveTest, PlaintextClientCannotTalkToCurveServer) {
  RouterSocket* router = ServeListedClients();
  ASSERT_NE(router, nullptr);
  auto plain = DealerSocket::Connect(context_, router->endpoint(), "plain");
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
