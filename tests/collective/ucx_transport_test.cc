// UcxTransport between two threads of this process, over tcp and over shared memory: messages on
// both sides of the eager limit (eager below it, rendezvous above it), received into buffers
// posted before the message arrives and after it (unexpected eager messages are buffered by UCX).
#include "collective/transport/ucx/ucx_transport.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collective/protocol.h"
#include "collective/transport/ucx/ucx_support.h"
#include "tests/testing/process.h"
#include "tests/testing/scoped_env.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// UCX_TLS for one test (other tests set their own), without UCX's warnings about variables of
// transports it does not load.
class ScopedTls {
 public:
  explicit ScopedTls(const std::string& tls)
      : tls_("UCX_TLS", tls), quiet_("UCX_WARN_UNUSED_ENV_VARS", "n") {}

 private:
  ::cohort::testing::ScopedEnv tls_;
  ::cohort::testing::ScopedEnv quiet_;
};

std::vector<char> Pattern(size_t size, size_t seed) {
  std::vector<char> v(size);
  for (size_t i = 0; i < size; ++i)
    v[i] = static_cast<char>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
  return v;
}

// UcxTransport::Create for `rank` of 2; on an error the transport is null and *status says why.
std::unique_ptr<UcxTransport> Connect(Bootstrap& bootstrap, int rank,
                                      const UcxTransportOptions& options, Status* status) {
  auto t = UcxTransport::Create(bootstrap, rank, 2, options);
  if (!t.ok()) {
    *status = t.status();
    return nullptr;
  }
  return std::move(*t);
}

// Posts a request for each of `ks` with post(k), then waits for every one: the first error, or OK.
Status PostAndWaitAll(const std::vector<size_t>& ks,
                      const std::function<StatusOr<Request>(size_t)>& post, Deadline deadline) {
  std::vector<Request> requests;
  for (size_t k : ks) {
    auto r = post(k);
    if (!r.ok()) return r.status();
    requests.push_back(std::move(*r));
  }
  for (auto& r : requests) {
    Status s = r.Wait(deadline);
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

class UcxTransportTest : public ::testing::TestWithParam<std::string> {};

TEST_P(UcxTransportTest, MessagesAroundTheEagerLimitArriveIntact) {
  ScopedTls tls(GetParam());
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  const size_t limit = options.eager_limit_bytes;
  ASSERT_GT(limit, 0u);
  const std::vector<size_t> sizes = {1,         4096,          limit - 1, limit,
                                     limit + 1, 3 * limit + 7, 4 * limit};
  const Deadline deadline = DeadlineAfter(milliseconds(20000));

  InMemoryBootstrap bootstrap;
  Status sender_status, receiver_status;
  std::vector<std::vector<char>> received(sizes.size());
  std::thread sender([&] {
    auto t = Connect(bootstrap, 0, options, &sender_status);
    if (!t) return;
    std::vector<std::vector<char>> payloads;
    std::vector<size_t> every;
    for (size_t k = 0; k < sizes.size(); ++k) {
      payloads.push_back(Pattern(sizes[k], k));
      every.push_back(k);
    }
    sender_status = PostAndWaitAll(
        every,
        [&](size_t k) {
          return t->Isend(1, MakeTag(1, static_cast<uint32_t>(k)),
                          ConstBytes{payloads[k].data(), sizes[k]});
        },
        deadline);
    if (!sender_status.ok()) return;
    // Stay connected until the receiver has everything (its last message is the go-ahead).
    char done = 0;
    auto r = t->Irecv(1, MakeTag(2, 0), MutableBytes{&done, 1});
    sender_status = r.ok() ? r->Wait(deadline) : r.status();
  });
  std::thread receiver([&] {
    auto t = Connect(bootstrap, 1, options, &receiver_status);
    if (!t) return;
    // Odd messages are received into buffers posted now; the even ones only once the odd ones
    // are in, so eager even messages arrive before their receive is posted.
    for (size_t parity : {size_t{1}, size_t{0}}) {
      std::vector<size_t> half;
      for (size_t k = parity; k < sizes.size(); k += 2) half.push_back(k);
      receiver_status = PostAndWaitAll(
          half,
          [&](size_t k) {
            received[k].assign(sizes[k], 0);
            return t->Irecv(0, MakeTag(1, static_cast<uint32_t>(k)),
                            MutableBytes{received[k].data(), sizes[k]});
          },
          deadline);
      if (!receiver_status.ok()) return;
    }
    const char done = 1;
    auto s = t->Isend(0, MakeTag(2, 0), ConstBytes{&done, 1});
    receiver_status = s.ok() ? s->Wait(deadline) : s.status();
  });
  sender.join();
  receiver.join();
  ASSERT_TRUE(sender_status.ok()) << sender_status.ToString();
  ASSERT_TRUE(receiver_status.ok()) << receiver_status.ToString();
  for (size_t k = 0; k < sizes.size(); ++k) {
    EXPECT_TRUE(received[k] == Pattern(sizes[k], k))
        << "message " << k << " of " << sizes[k] << " bytes differs";
  }
}

// Probe over a real UCX worker, three ranks: rank 0 finds the messages that ranks 1 and 2 sent
// with one tag (an eager one and a rendezvous one each), whichever came first, and receives each
// from the rank it named; a tag nobody sent finds nothing by the deadline; a message a posted
// receive has taken is not found again.
TEST_P(UcxTransportTest, ProbeFindsUnreceivedMessagesFromAnyPeer) {
  ScopedTls tls(GetParam());
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  const size_t sizes[] = {16, 4 * options.eager_limit_bytes};
  const Tag kTag = MakeTag(4, 1), kClaimed = MakeTag(4, 2), kDone = MakeTag(5, 0);
  const Deadline deadline = DeadlineAfter(milliseconds(20000));
  InMemoryBootstrap bootstrap;
  Status status[3];
  std::vector<std::string> failures;
  std::thread senders[2];
  for (int rank : {1, 2}) {
    senders[rank - 1] = std::thread([&, rank] {
      auto t = UcxTransport::Create(bootstrap, rank, 3, options);
      if (!t.ok()) {
        status[rank] = t.status();
        return;
      }
      std::vector<std::vector<char>> payloads;
      for (size_t k = 0; k < 2; ++k) payloads.push_back(Pattern(sizes[k], rank * 10 + k));
      std::vector<Request> sends;
      for (size_t k = 0; k < 2; ++k) {
        auto r = (*t)->Isend(0, kTag, ConstBytes{payloads[k].data(), sizes[k]});
        if (!r.ok()) {
          status[rank] = r.status();
          return;
        }
        sends.push_back(std::move(*r));
      }
      char one = 1;
      auto claimed = (*t)->Isend(0, kClaimed, ConstBytes{&one, 1});
      if (claimed.ok()) sends.push_back(std::move(*claimed));
      for (auto& r : sends) {
        if (status[rank] = r.Wait(deadline); !status[rank].ok()) return;
      }
      char done = 0;
      auto r = (*t)->Irecv(0, kDone, MutableBytes{&done, 1});
      status[rank] = r.ok() ? r->Wait(deadline) : r.status();
    });
  }
  {
    auto created = UcxTransport::Create(bootstrap, 0, 3, options);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    UcxTransport& t = **created;
    // Rank 1's one-byte kClaimed message: received by a receive posted before it came.
    char claimed = 0;
    auto claim = t.Irecv(1, kClaimed, MutableBytes{&claimed, 1});
    ASSERT_TRUE(claim.ok()) << claim.status().ToString();
    size_t next[3] = {0, 0, 0};
    for (int i = 0; i < 4; ++i) {
      StatusOr<int> peer = t.Probe(kTag, deadline);
      ASSERT_TRUE(peer.ok()) << peer.status().ToString();
      ASSERT_TRUE(*peer == 1 || *peer == 2) << *peer;
      ASSERT_LT(next[*peer], 2u) << "rank " << *peer << " found a third time";
      const size_t k = next[*peer]++;
      std::vector<char> got(sizes[k]);
      auto r = t.Irecv(*peer, kTag, MutableBytes{got.data(), got.size()});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_TRUE(r->Wait(deadline).ok());
      EXPECT_TRUE(got == Pattern(sizes[k], *peer * 10 + k))
          << "message " << k << " of rank " << *peer << " differs";
    }
    ASSERT_TRUE(claim->Wait(deadline).ok());
    EXPECT_EQ(claimed, 1);
    // Rank 2's kClaimed message is found; rank 1's was taken by the receive above.
    StatusOr<int> peer = t.Probe(kClaimed, deadline);
    EXPECT_TRUE(peer.ok() && *peer == 2) << peer.status().ToString();
    char other = 0;
    auto r = t.Irecv(2, kClaimed, MutableBytes{&other, 1});
    ASSERT_TRUE(r.ok() && r->Wait(deadline).ok());
    const auto start = SteadyClock::now();
    StatusOr<int> none = t.Probe(kClaimed, DeadlineAfter(milliseconds(200)));
    EXPECT_EQ(none.status().code(), StatusCode::kDeadlineExceeded) << none.status().ToString();
    EXPECT_GE(SteadyClock::now() - start, milliseconds(190));
    const char done = 1;
    for (int rank : {1, 2}) {
      auto d = t.Isend(rank, kDone, ConstBytes{&done, 1});
      ASSERT_TRUE(d.ok() && d->Wait(deadline).ok());
    }
    for (auto& thread : senders) thread.join();
  }
  EXPECT_TRUE(status[1].ok()) << status[1].ToString();
  EXPECT_TRUE(status[2].ok()) << status[2].ToString();
}

// Cancel from another thread ends rank 0's wait in progress with kCancelled: a receive its peer
// never sends to, and (on a fresh pair, over tcp) a rendezvous send its peer never receives,
// abandoned. Their deadlines are a minute away, so a wait that ran to one would say
// kDeadlineExceeded. Later posts are refused, notices too. The peer is alive throughout, idle.
// (Over shared memory such a send cannot be withdrawn: it would stay in flight to a live peer,
// and the transport would leave its worker in place, after which this test process could not
// fork UCX users; the torch backend's abort-reducers scenario covers that, between processes.)
TEST_P(UcxTransportTest, CancelEndsWaitsInProgressAndRefusesLaterPosts) {
  ScopedTls tls(GetParam());
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  for (bool send : {false, true}) {
    if (send && GetParam() == "sm") continue;
    InMemoryBootstrap bootstrap;
    Status peer_status, self_status;
    std::atomic<bool> done{false};
    std::thread peer([&] {
      auto p = Connect(bootstrap, 1, options, &peer_status);
      while (!done.load()) std::this_thread::sleep_for(milliseconds(5));
    });
    auto t = Connect(bootstrap, 0, options, &self_status);
    if (t != nullptr) {
      std::vector<char> buffer(4 * options.eager_limit_bytes);
      auto r = send ? t->Isend(1, MakeTag(3, 1), ConstBytes{buffer.data(), buffer.size()})
                    : t->Irecv(1, MakeTag(3, 1), MutableBytes{buffer.data(), buffer.size()});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      std::thread canceller([&] {
        std::this_thread::sleep_for(milliseconds(50));
        t->Cancel();
      });
      Status s = r->Wait(DeadlineAfter(milliseconds(60000)));
      canceller.join();
      const char* what = send ? "send: " : "receive: ";
      EXPECT_EQ(s.code(), StatusCode::kCancelled) << what << s.ToString();
      char x = 0;
      EXPECT_EQ(t->Isend(1, MakeTag(3, 2), ConstBytes{&x, 1}).status().code(),
                StatusCode::kCancelled);
      EXPECT_EQ(t->IsendNotice(1, MakeTag(3, 2), ConstBytes{&x, 1}).status().code(),
                StatusCode::kCancelled);
      EXPECT_EQ(t->Irecv(1, MakeTag(3, 2), MutableBytes{&x, 1}).status().code(),
                StatusCode::kCancelled);
      t.reset();
    }
    done.store(true);
    peer.join();
    EXPECT_TRUE(self_status.ok()) << self_status.ToString();
    EXPECT_TRUE(peer_status.ok()) << peer_status.ToString();
  }
}

// A peer whose transport is cancelled and closed while its process lives on (a torch rank that
// aborted its group and goes on to make a new one): a receive waiting for it fails with
// kUnavailable naming it, not at its one-minute deadline. Over tcp the closed endpoints reset the
// connection; over shared memory, where UCX cannot tell, the peer's liveness token is gone.
TEST_P(UcxTransportTest, APeerThatCancelledAndClosedIsGoneWhileItsProcessLives) {
  ScopedTls tls(GetParam());
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  InMemoryBootstrap bootstrap;
  Status canceller_status, waiter_status;
  std::atomic<bool> posted{false};
  std::thread canceller([&] {
    auto t = Connect(bootstrap, 0, options, &canceller_status);
    while (t != nullptr && !posted.load()) std::this_thread::sleep_for(milliseconds(5));
    if (t != nullptr) t->Cancel();
    t.reset();  // this thread, and its process, go on
  });
  auto t = Connect(bootstrap, 1, options, &waiter_status);
  Status s;
  if (t != nullptr) {
    char x = 0;
    auto r = t->Irecv(0, MakeTag(4, 1), MutableBytes{&x, 1});
    posted.store(true);
    s = r.ok() ? r->Wait(DeadlineAfter(milliseconds(60000))) : r.status();
  }
  posted.store(true);
  canceller.join();
  ASSERT_TRUE(canceller_status.ok()) << canceller_status.ToString();
  ASSERT_TRUE(waiter_status.ok()) << waiter_status.ToString();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s.ToString();
  EXPECT_EQ(t->gone_peer(), 0);
}

// Two peers close, rank 2 first, then rank 0: rank 1's transport knows both gone (peer_gone), and
// names rank 2, the one it found first, as gone_peer(): a lower rank that went later (a rank its
// launcher ended because of the first) does not take the blame.
TEST_P(UcxTransportTest, GonePeerIsTheFirstFoundGoneAndPeerGoneKnowsEach) {
  ScopedTls tls(GetParam());
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  InMemoryBootstrap bootstrap;
  Status status[3];
  std::atomic<int> close_rank{-1};
  std::thread closers[2];
  for (int rank : {0, 2}) {
    closers[rank / 2] = std::thread([&, rank] {
      auto t = UcxTransport::Create(bootstrap, rank, 3, options);
      if (!t.ok()) {
        status[rank] = t.status();
        return;
      }
      (void)cohort::testing::WaitUntil([&] { return close_rank.load() == rank; },
                                       milliseconds(30000));
      (*t)->Cancel();
    });
  }
  auto created = UcxTransport::Create(bootstrap, 1, 3, options);
  std::optional<bool> none_gone, second_gone_first, first_seen, second_seen;
  int gone = -2;
  if (created.ok()) {
    UcxTransport& t = **created;
    none_gone = !t.peer_gone(0) && !t.peer_gone(2) && t.gone_peer() == -1;
    close_rank.store(2);
    first_seen = cohort::testing::WaitUntil([&] { return t.peer_gone(2); }, milliseconds(20000));
    second_gone_first = t.peer_gone(0);
    close_rank.store(0);
    second_seen = cohort::testing::WaitUntil([&] { return t.peer_gone(0); }, milliseconds(20000));
    gone = t.gone_peer();
  }
  close_rank.store(0);
  for (auto& c : closers) c.join();
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ASSERT_TRUE(status[0].ok()) << status[0].ToString();
  ASSERT_TRUE(status[2].ok()) << status[2].ToString();
  EXPECT_EQ(none_gone, true);
  EXPECT_EQ(first_seen, true) << "rank 2's close was never seen";
  EXPECT_EQ(second_gone_first, false) << "rank 0 counted gone while it was open";
  EXPECT_EQ(second_seen, true) << "rank 0's close was never seen";
  EXPECT_EQ(gone, 2);
  EXPECT_FALSE((*created)->peer_gone(1));
  EXPECT_FALSE((*created)->peer_gone(7));
}

// A peer's last message is delivered even when the receive is posted after the peer went away
// (a worker sends its stop to a reducer busy with the round before, then exits); a message that
// never came fails with kUnavailable.
TEST(UcxTransportTcpTest, LastMessageOfAPeerThatLeftIsStillDelivered) {
  ScopedTls tls("tcp");
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  InMemoryBootstrap bootstrap;
  const Deadline deadline = DeadlineAfter(milliseconds(20000));
  constexpr uint64_t kLast = 0x600DB7E5;
  Status sender_status, gone, got, more;
  uint64_t last = 0;
  std::thread leaver([&] {
    auto t = Connect(bootstrap, 0, options, &sender_status);
    if (!t) return;
    auto s = t->Isend(1, MakeTag(3, 1), ConstBytes{&kLast, sizeof(kLast)});
    sender_status = s.ok() ? s->Wait(deadline) : s.status();
    // Leaves at once: the transport closes its endpoints here.
  });
  std::thread stayer([&] {
    auto t = Connect(bootstrap, 1, options, &gone);
    if (!t) return;
    // Busy with something else (a message that never comes) until it notices the peer is gone.
    uint64_t never = 0;
    auto missing = t->Irecv(0, MakeTag(3, 2), MutableBytes{&never, sizeof(never)});
    gone = missing.ok() ? missing->Wait(deadline) : missing.status();
    // Only now the receive for the message that arrived meanwhile.
    auto r = t->Irecv(0, MakeTag(3, 1), MutableBytes{&last, sizeof(last)});
    got = r.ok() ? r->Wait(deadline) : r.status();
    uint64_t other = 0;
    more = t->Irecv(0, MakeTag(3, 3), MutableBytes{&other, sizeof(other)}).status();
  });
  leaver.join();
  stayer.join();
  ASSERT_TRUE(sender_status.ok()) << sender_status.ToString();
  EXPECT_EQ(gone.code(), StatusCode::kUnavailable) << gone.ToString();
  EXPECT_TRUE(got.ok()) << got.ToString();
  EXPECT_EQ(last, kLast);
  // Anything else from it is refused at once.
  EXPECT_EQ(more.code(), StatusCode::kUnavailable) << more.ToString();
}

// SO_SNDBUF of every TCP socket this process holds.
std::vector<int> TcpSendBuffers() {
  std::vector<int> sizes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    int type = 0;
    socklen_t len = sizeof(type);
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage address{};
    socklen_t address_len = sizeof(address);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &address_len) != 0 ||
        (address.ss_family != AF_INET && address.ss_family != AF_INET6)) {
      continue;
    }
    int size = 0;
    len = sizeof(size);
    if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) == 0) sizes.push_back(size);
  }
  return sizes;
}

// tcp_send_buffer_bytes reaches the sockets UCX opens between the ranks (the kernel reports twice
// what was set); UCX_TCP_SNDBUF in the environment would win, so the test clears it.
TEST(UcxTransportTcpTest, SocketsGetTheConfiguredSendBuffer) {
  ScopedTls tls("tcp");
  const ::cohort::testing::ScopedEnv default_sndbuf("UCX_TCP_SNDBUF", std::nullopt);
  constexpr size_t kBytes = 96 << 10;  // an odd size: no default or autotuned buffer has it
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  options.tcp_send_buffer_bytes = kBytes;
  InMemoryBootstrap bootstrap;
  Status status[2];
  std::atomic<int> connected{0};
  std::atomic<bool> inspected{false};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      auto t = Connect(bootstrap, rank, options, &status[rank]);
      if (t) {
        // One message each way, so that both directions' connections exist.
        uint64_t out = 7 + rank, in = 0;
        const Deadline deadline = DeadlineAfter(milliseconds(20000));
        auto r = t->Irecv(1 - rank, MakeTag(1, 1), MutableBytes{&in, sizeof(in)});
        auto s = t->Isend(1 - rank, MakeTag(1, 1), ConstBytes{&out, sizeof(out)});
        status[rank] = !s.ok() ? s.status() : !r.ok() ? r.status() : s->Wait(deadline);
        if (status[rank].ok()) status[rank] = r->Wait(deadline);
      }
      // Both ranks keep their transports open until the sockets were looked at, then close them
      // together, as ranks in two processes would.
      ++connected;
      while (!inspected.load()) std::this_thread::sleep_for(milliseconds(1));
    });
  }
  while (connected.load() < 2) std::this_thread::sleep_for(milliseconds(1));
  const std::vector<int> sizes = TcpSendBuffers();
  inspected = true;
  for (auto& t : threads) t.join();
  ASSERT_TRUE(status[0].ok()) << status[0].ToString();
  ASSERT_TRUE(status[1].ok()) << status[1].ToString();
  const auto set = std::count(sizes.begin(), sizes.end(), static_cast<int>(2 * kBytes));
  EXPECT_GE(set, 2) << "no TCP socket between the ranks has the configured send buffer; "
                    << sizes.size() << " TCP sockets";
}

// Releases are taken to connect within one minor release only.
TEST(UcxReleaseTest, ConnectWithinOneMinorRelease) {
  const UcxRelease v1_13_1{1, 13, 1}, v1_13_0{1, 13, 0}, v1_18_1{1, 18, 1}, v1_23_0{1, 23, 0},
      v2_13_0{2, 13, 0};
  EXPECT_TRUE(UcxReleasesConnect(v1_13_1, v1_13_0));
  EXPECT_TRUE(UcxReleasesConnect(v1_23_0, v1_23_0));
  EXPECT_FALSE(UcxReleasesConnect(v1_18_1, v1_23_0));
  EXPECT_FALSE(UcxReleasesConnect(v1_23_0, v1_13_1));
  EXPECT_FALSE(UcxReleasesConnect(v1_13_0, v2_13_0));
  EXPECT_EQ(v1_13_1.ToString(), "1.13.1");
}

// A published address carries the publisher's UCX release and collective protocol. One without
// the release line (a peer of a Cohort before it) still decodes, with neither; one whose release
// line names no protocol (a Cohort before protocol 1), with the release alone. A release line
// that is not one is malformed; so is a protocol that is not a number.
TEST(UcxReleaseTest, PublishedAddressCarriesTheReleaseAndTheProtocol) {
  const std::string worker_address("\x01\n\x02ucx \n", 8);  // bytes, newlines among them
  std::optional<PublishedAddress> got = DecodeAddress(EncodeAddress(worker_address));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->pid, static_cast<int>(::getpid()));
  ASSERT_TRUE(got->ucx_release.has_value());
  EXPECT_EQ(got->ucx_release->ToString(), LoadedUcxRelease().ToString());
  EXPECT_EQ(got->protocol, kCollectiveProtocol);
  EXPECT_EQ(got->ucx_address, worker_address);

  got = DecodeAddress("42\nhost-a\n" + worker_address);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->pid, 42);
  EXPECT_EQ(got->host, "host-a");
  EXPECT_FALSE(got->ucx_release.has_value());
  EXPECT_FALSE(got->protocol.has_value());
  EXPECT_EQ(got->ucx_address, worker_address);

  got = DecodeAddress("42\nhost-a\nucx 1.13.1\n" + worker_address);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->ucx_release->ToString(), "1.13.1");
  EXPECT_FALSE(got->protocol.has_value());
  EXPECT_EQ(got->ucx_address, worker_address);

  got = DecodeAddress("42\nhost-a\nucx 1.13.1 protocol 12\n" + worker_address);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->protocol, 12u);

  for (const std::string bad :
       {"ucx 1.x\n", "ucx 1.13.1 protocol\n", "ucx 1.13.1 protocol 2x\n",
        "ucx 1.13.1 protocol -1\n", "ucx 1.13.1 protocol 99999999999\n", "ucx 1.13 protocol 1\n"}) {
    EXPECT_FALSE(DecodeAddress("42\nhost-a\n" + bad + worker_address).has_value()) << bad;
  }
  EXPECT_FALSE(DecodeAddress("42\nhost-a\nucx 1.13.1").has_value());
}

// How rank 0 ("worker 0") connects to a rank 1 ("reducer 1") that published `release_line` (over
// tcp): its error; the test fails if it connected.
Status ConnectToPeerThatPublished(const std::string& release_line) {
  ScopedTls tls("tcp");
  InMemoryBootstrap bootstrap;
  EXPECT_TRUE(
      bootstrap.Put("cohort/addr/1", "1\nelsewhere\n" + release_line + "\nnot an address").ok());
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  options.rank_name = [](int rank) {
    return (rank == 0 ? "worker " : "reducer ") + std::to_string(rank);
  };
  Status status;
  EXPECT_EQ(Connect(bootstrap, 0, options, &status), nullptr);
  return status;
}

// A peer on another minor release of UCX (1.0, which no UCX this builds with is) is refused by name
// before UCX is handed its address: a clear error, not an abort inside UCX.
TEST(UcxTransportTcpTest, PeerOnAnotherMinorReleaseIsRefusedByName) {
  const Status status = ConnectToPeerThatPublished("ucx 1.0.0");
  EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
  EXPECT_NE(status.message().find("reducer 1 runs UCX 1.0.0 and worker 0 UCX " +
                                  LoadedUcxRelease().ToString()),
            std::string::npos)
      << status.ToString();
}

// A peer of another collective protocol, or of a Cohort from before protocol 1 (its address names
// none), is refused by name before UCX is handed its address: the two builds' messages differ.
TEST(UcxTransportTcpTest, PeerOfAnotherCollectiveProtocolIsRefusedByName) {
  const std::string release = LoadedUcxRelease().ToString();
  const std::string mine = " and worker 0 protocol " + std::to_string(kCollectiveProtocol) + ": ";
  for (const auto& [line, want] : std::vector<std::pair<std::string, std::string>>{
           {"ucx " + release + " protocol " + std::to_string(kCollectiveProtocol + 1),
            "reducer 1 speaks collective protocol " + std::to_string(kCollectiveProtocol + 1) +
                mine},
           {"ucx " + release, "reducer 1 runs a Cohort from before collective protocol 1" + mine},
       }) {
    SCOPED_TRACE(line);
    const Status status = ConnectToPeerThatPublished(line);
    EXPECT_EQ(status.code(), StatusCode::kFailedPrecondition) << status.ToString();
    EXPECT_NE(status.message().find(want), std::string::npos) << status.ToString();
  }
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxTransportTest, ::testing::Values("tcp", "sm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cohort::collective
