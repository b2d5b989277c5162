#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <thread>

#include "collective/store_bootstrap.h"
#include "tests/testing/signal_storm.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

std::string IpcAddress(const std::string& name) {
  return "ipc:///tmp/cohort-test-" + std::to_string(getpid()) + "-" + name + ".sock";
}

TEST(InMemoryBootstrapTest, GetWaitsForPut) {
  InMemoryBootstrap b;
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(20));
    EXPECT_TRUE(b.Put("k", "v").ok());
  });
  auto v = b.Get("k", DeadlineAfter(milliseconds(5000)));
  t.join();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, "v");
  auto missing = b.Get("nope", DeadlineAfter(milliseconds(10)));
  EXPECT_EQ(missing.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);
}

TEST(StoreBootstrapTest, PutAndGetOverTcpWithBinaryValues) {
  auto server = StoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string addr = "127.0.0.1:" + std::to_string((*server)->port());
  auto a = StoreBootstrap::Connect(addr);
  auto b = StoreBootstrap::Connect(addr);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string value("\0\1\2binary\xff", 10);
  ASSERT_TRUE((*a)->Put("addr/0", value).ok());
  auto got = (*b)->Get("addr/0", DeadlineAfter(milliseconds(5000)));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, value);
  ASSERT_TRUE((*b)->Put("addr/0", "new").ok());
  EXPECT_EQ(*(*a)->Get("addr/0", DeadlineAfter(milliseconds(5000))), "new");
}

// A training script's handled signals (its own, Python's, torch's DataLoader's SIGCHLD) landing in
// the store client's calls: every put and get still succeeds with its value.
TEST(StoreBootstrapTest, SignalsLandingInTheClientsCallsFailNone) {
  auto server = StoreServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  auto client = StoreBootstrap::Connect("127.0.0.1:" + std::to_string((*server)->port()));
  ASSERT_TRUE(client.ok());
  testing::SignalStorm storm(pthread_self());
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "key/" + std::to_string(i % 7), value = "value " + std::to_string(i);
    Status put = (*client)->Put(key, value);
    ASSERT_TRUE(put.ok()) << "put " << i << ": " << put.ToString();
    auto got = (*client)->Get(key, DeadlineAfter(milliseconds(5000)));
    ASSERT_TRUE(got.ok()) << "get " << i << ": " << got.status().ToString();
    ASSERT_EQ(*got, value);
  }
  EXPECT_GT(storm.sent(), 100);  // the calls above ran under the storm
}

TEST(StoreBootstrapTest, ClientsMayStartBeforeTheServer) {
  const std::string addr = IpcAddress("late");
  auto client = StoreBootstrap::Connect(addr);
  ASSERT_TRUE(client.ok());
  std::unique_ptr<StoreServer> server;
  std::thread starter([&] {
    std::this_thread::sleep_for(milliseconds(300));
    auto s = StoreServer::Start(addr);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server = std::move(*s);
    auto writer = StoreBootstrap::Connect(addr);
    ASSERT_TRUE((*writer)->Put("generation", "g1").ok());
  });
  auto v = (*client)->Get("generation", DeadlineAfter(milliseconds(10000)));
  starter.join();
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(*v, "g1");
}

TEST(StoreBootstrapTest, MissingKeyFailsAtTheDeadlineNamingTheKey) {
  auto server = StoreServer::Start(IpcAddress("missing"));
  ASSERT_TRUE(server.ok());
  auto client = StoreBootstrap::Connect((*server)->endpoint());
  const auto start = SteadyClock::now();
  auto v = (*client)->Get("cohort/addr/5", DeadlineAfter(milliseconds(300)));
  EXPECT_EQ(v.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(v.status().message().find("cohort/addr/5"), std::string::npos) << v.status().ToString();
  EXPECT_LT(SteadyClock::now() - start, milliseconds(3000));
}

TEST(StoreBootstrapTest, AnIpcServerTakesItsSocketFileWithIt) {
  auto server = StoreServer::Start(IpcAddress("file"));
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string file = (*server)->endpoint().substr(std::strlen("ipc://"));
  ASSERT_EQ(::access(file.c_str(), F_OK), 0) << file;
  server->reset();
  EXPECT_NE(::access(file.c_str(), F_OK), 0) << "the server left its socket file behind: " << file;
}

TEST(StoreBootstrapTest, NoServerAtAllIsADeadlineError) {
  auto client = StoreBootstrap::Connect(IpcAddress("nobody"), milliseconds(200));
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->Put("k", "v").code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*client)->Get("k", DeadlineAfter(milliseconds(200))).status().code(),
            StatusCode::kDeadlineExceeded);
}

TEST(BootstrapTest, LookupAnswersAtOnceWhetherAKeyExists) {
  InMemoryBootstrap memory;
  auto server = StoreServer::Start(IpcAddress("lookup"));
  ASSERT_TRUE(server.ok());
  auto store = StoreBootstrap::Connect((*server)->endpoint());
  ASSERT_TRUE(store.ok());
  for (Bootstrap* b : {static_cast<Bootstrap*>(&memory), static_cast<Bootstrap*>(store->get())}) {
    ASSERT_TRUE(b->Put("here", "v").ok());
    auto here = b->Lookup("here", DeadlineAfter(milliseconds(5000)));
    ASSERT_TRUE(here.ok()) << here.status().ToString();
    EXPECT_EQ(here->value_or("absent"), "v");
    auto absent = b->Lookup("absent", DeadlineAfter(milliseconds(5000)));
    ASSERT_TRUE(absent.ok()) << absent.status().ToString();
    EXPECT_FALSE(absent->has_value());
  }
  auto nobody = StoreBootstrap::Connect(IpcAddress("lookup-nobody"));
  EXPECT_EQ((*nobody)->Lookup("k", DeadlineAfter(milliseconds(200))).status().code(),
            StatusCode::kDeadlineExceeded)
      << "no answer is not an answer that the key is missing";
}

TEST(BootstrapFromEnvironmentTest, TheChiefServesTheStoreEveryoneConnects) {
  unsetenv("COHORT_BOOTSTRAP_ADDR");
  auto unset = BootstrapFromEnvironment(true, milliseconds(1000));
  EXPECT_EQ(unset.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unset.status().message().find("COHORT_BOOTSTRAP_ADDR"), std::string::npos);

  setenv("COHORT_BOOTSTRAP_ADDR", IpcAddress("env").c_str(), 1);
  auto chief = BootstrapFromEnvironment(true, milliseconds(5000));
  ASSERT_TRUE(chief.ok()) << chief.status().ToString();
  EXPECT_NE(chief->server, nullptr);
  auto worker = BootstrapFromEnvironment(false, milliseconds(5000));
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  EXPECT_EQ(worker->server, nullptr);
  ASSERT_TRUE(chief->client->Put("k", "from the chief").ok());
  auto got = worker->client->Get("k", DeadlineAfter(milliseconds(5000)));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "from the chief");
  unsetenv("COHORT_BOOTSTRAP_ADDR");
}

TEST(StoreBootstrapTest, AddressForms) {
  EXPECT_EQ(ClientEndpoint("host:7000"), "tcp://host:7000");
  EXPECT_EQ(BindEndpoint("host:7000"), "tcp://*:7000");
  EXPECT_EQ(ClientEndpoint("ipc:///tmp/x"), "ipc:///tmp/x");
  EXPECT_EQ(BindEndpoint("tcp://127.0.0.1:9"), "tcp://127.0.0.1:9");
}

}  // namespace
}  // namespace cohort::collective
