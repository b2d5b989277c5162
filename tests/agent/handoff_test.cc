// The handoff of a live restart and the ends file of an ordinary one (agent/handoff.h): what the
// old image writes is what the new one reads, and a file that is hostile, damaged or someone
// else's is refused whole, naming what is wrong, never half taken.
#include "agent/handoff.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "agent/latest_file_writer.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

HandedOverAttempt Attempt(const std::string& replica) {
  HandedOverAttempt a;
  a.job = "train";
  a.job_created_ms = 1'764'964'800'123;
  a.replica = replica;
  a.attempt = 2;
  a.gpus = {0, 3};
  a.pid = 4242;
  a.status_fd = 17;
  a.cgroup = "/sys/fs/cgroup/cohort/node1/train." + replica + ".2";
  a.working_dir = "/var/lib/cohort-agent/train/" + replica + "/attempt-2";
  a.log_path = a.working_dir + ".log";
  a.env = {{"RANK", "1"}, {"WEIRD", "a\"b\\nc\xc3\xa9"}};
  a.run_as = RunAs{"alice", "alice_unix", 1001, 1001, {1001, 27}, "/home/alice_unix"};
  a.chief = replica == "chief-0";
  a.launched_ns = 1234567890123;
  a.log_acked = 1 << 20;
  a.measurements_acked = 7;
  a.container = replica == "worker-0";
  a.container_id = a.container ? "cohort-0badf00d-train-worker-0-2" : "";
  return a;
}

Handoff TwoAttempts() {
  Handoff h;
  h.agent_pid = ::getpid();
  h.from_version = "0.9.1";
  h.attempts = {Attempt("chief-0"), Attempt("worker-0")};
  h.attempts[1].run_as.reset();
  h.attempts[1].status_fd = -1;
  h.attempts[1].cgroup = "";
  auto ended = [](int attempt, wire::ReplicaState state, int exit_code, int signal,
                  const std::string& message) {
    wire::ReplicaStatusT s;
    s.job = "eval";
    s.job_created_ms = 1'764'964'900'456;
    s.replica = "chief-0";
    s.attempt = attempt;
    s.state = state;
    s.exit_code = exit_code;
    s.signal = signal;
    s.message = message;
    return s;
  };
  h.ended.push_back(ended(1, wire::ReplicaState::FAILED, 137, 9, "killed by SIGKILL \xc3\xa9"));
  h.ended.push_back(ended(2, wire::ReplicaState::SUCCEEDED, 0, 0, ""));
  return h;
}

// The message of DecodeHandoff's error for `text`; "" when it was taken.
std::string Refusal(const std::string& text) {
  auto decoded = DecodeHandoff(text);
  if (decoded.ok()) return "";
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  return decoded.status().message();
}

TEST(HandoffTest, WhatIsWrittenIsWhatIsRead) {
  const Handoff h = TwoAttempts();
  auto back = DecodeHandoff(*EncodeHandoff(h));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->agent_pid, h.agent_pid);
  EXPECT_EQ(back->from_version, "0.9.1");
  ASSERT_EQ(back->attempts.size(), 2u);
  const HandedOverAttempt& a = back->attempts[0];
  const HandedOverAttempt& want = h.attempts[0];
  EXPECT_EQ(a.job, want.job);
  EXPECT_EQ(a.job_created_ms, 1'764'964'800'123);
  EXPECT_EQ(a.replica, want.replica);
  EXPECT_EQ(a.attempt, 2);
  EXPECT_EQ(a.gpus, want.gpus);
  EXPECT_EQ(a.pid, 4242);
  EXPECT_EQ(a.status_fd, 17);
  EXPECT_EQ(a.cgroup, want.cgroup);
  EXPECT_EQ(a.working_dir, want.working_dir);
  EXPECT_EQ(a.log_path, want.log_path);
  EXPECT_EQ(a.env, want.env);
  ASSERT_TRUE(a.run_as.has_value());
  EXPECT_EQ(a.run_as->account, "alice_unix");
  EXPECT_EQ(a.run_as->uid, 1001u);
  EXPECT_EQ(a.run_as->groups, (std::vector<gid_t>{1001, 27}));
  EXPECT_EQ(a.run_as->home, "/home/alice_unix");
  EXPECT_TRUE(a.chief);
  EXPECT_EQ(a.launched_ns, 1234567890123);
  EXPECT_EQ(a.log_acked, 1u << 20);
  EXPECT_EQ(a.measurements_acked, 7u);
  EXPECT_FALSE(back->attempts[1].run_as.has_value());
  EXPECT_EQ(back->attempts[1].status_fd, -1);
  EXPECT_FALSE(back->attempts[1].chief);
  EXPECT_FALSE(a.container);
  EXPECT_TRUE(back->attempts[1].container);
  EXPECT_EQ(back->attempts[1].container_id, "cohort-0badf00d-train-worker-0-2");
  // How the attempts that ended lately ended, in order.
  ASSERT_EQ(back->ended.size(), 2u);
  EXPECT_EQ(back->ended[0].job, "eval");
  EXPECT_EQ(back->ended[0].job_created_ms, 1'764'964'900'456);
  EXPECT_EQ(back->ended[0].replica, "chief-0");
  EXPECT_EQ(back->ended[0].attempt, 1);
  EXPECT_EQ(back->ended[0].state, wire::ReplicaState::FAILED);
  EXPECT_EQ(back->ended[0].exit_code, 137);
  EXPECT_EQ(back->ended[0].signal, 9);
  EXPECT_EQ(back->ended[0].message, h.ended[0].message);
  EXPECT_EQ(back->ended[1].state, wire::ReplicaState::SUCCEEDED);
  // A file of an agent older than the list has none; one older than create times has 0s.
  nlohmann::json older = nlohmann::json::parse(*EncodeHandoff(h));
  older.erase("ended");
  older["attempts"][0].erase("job_created_ms");
  older["attempts"][1].erase("container_id");  // one older than container tags: its ids had none
  auto without = DecodeHandoff(older.dump());
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_TRUE(without->ended.empty());
  EXPECT_EQ(without->attempts[0].job_created_ms, 0);
  EXPECT_EQ(without->attempts[1].container_id, "");
  EXPECT_FALSE(without->previous_image.has_value());  // nor one older than the way back

  Handoff with_way_back = TwoAttempts();
  with_way_back.previous_image = PreviousImage{9, {"/usr/bin/cohort-agent", "--config", "a b"}};
  with_way_back.went_back_because = "UNAVAILABLE: --http-endpoint: cannot bind";
  back = DecodeHandoff(*EncodeHandoff(with_way_back));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->previous_image.has_value());
  EXPECT_EQ(back->previous_image->fd, 9);
  EXPECT_EQ(back->previous_image->argv, with_way_back.previous_image->argv);
  EXPECT_EQ(back->went_back_because, with_way_back.went_back_because);
}

TEST(HandoffTest, AHostileOrDamagedFileIsRefusedNamingWhatIsWrong) {
  EXPECT_EQ(Refusal("{\"agent_pid\": 12, \"attempts\": ["), "handoff: not JSON");
  EXPECT_EQ(Refusal("[1, 2]"), "handoff file: must be an object");
  EXPECT_EQ(Refusal("{}"), "handoff file.agent_pid: missing");
  EXPECT_EQ(Refusal("{\"agent_pid\": \"12\"}"), "handoff file.agent_pid: must be an integer");
  EXPECT_EQ(Refusal("{\"agent_pid\": 12, \"attempts\": {}}"),
            "handoff file.attempts: must be a list");

  // Each field of an attempt, broken in turn, on an otherwise good file.
  auto with = [](const std::string& field, nlohmann::json value) {
    nlohmann::json file = nlohmann::json::parse(*EncodeHandoff(TwoAttempts()));
    file["attempts"][1][field] = std::move(value);
    return Refusal(file.dump());
  };
  EXPECT_EQ(with("pid", 0), "handoff attempts[1].pid: must be a process of this agent (> 1)");
  EXPECT_EQ(with("pid", -5), "handoff attempts[1].pid: must be in 0..4194304");
  EXPECT_EQ(with("pid", 1), "handoff attempts[1].pid: must be a process of this agent (> 1)");
  EXPECT_EQ(with("pid", 18446744073709551615ull), "handoff attempts[1].pid: out of range");
  EXPECT_EQ(with("pid", 3.5), "handoff attempts[1].pid: must be an integer");
  EXPECT_EQ(with("job", ""), "handoff attempts[1].job: must not be empty");
  EXPECT_EQ(with("replica", 7), "handoff attempts[1].replica: must be a string");
  EXPECT_EQ(with("working_dir", "relative/dir"),
            "handoff attempts[1].working_dir: must be an absolute path");
  EXPECT_EQ(with("log_path", ""), "handoff attempts[1].log_path: must be an absolute path");
  EXPECT_EQ(with("cgroup", "cohort/x"), "handoff attempts[1].cgroup: must be an absolute path");
  EXPECT_EQ(with("status_fd", 1),
            "handoff attempts[1].status_fd: must be -1 or a descriptor above stderr");
  EXPECT_EQ(with("gpus", nlohmann::json::array({0, -1})),
            "handoff attempts[1].gpus: must be a list of integers in 0..65536");
  EXPECT_EQ(with("env", nlohmann::json{{"A", 1}}),
            "handoff attempts[1].env: must be an object of strings");
  EXPECT_EQ(with("chief", "yes"), "handoff attempts[1].chief: must be true or false");
  EXPECT_EQ(with("run_as", nlohmann::json{{"uid", -1}}),
            "handoff attempts[1].run_as.uid: must be in 0..4294967294");
  EXPECT_EQ(with("run_as", "root"), "handoff attempts[1].run_as: must be an object");
  EXPECT_EQ(with("container_id", "--root=/tmp/x"),
            "handoff attempts[1].container_id: must be letters, digits, '-', '_' and '.', not "
            "starting with '-'");
  EXPECT_EQ(with("container_id", "cohort-a/../b"),
            "handoff attempts[1].container_id: must be letters, digits, '-', '_' and '.', not "
            "starting with '-'");
  EXPECT_EQ(with("replica", "chief-0"),
            "handoff attempts[1]: attempt train/chief-0/2 is listed twice");

  auto with_ended = [](const std::string& field, nlohmann::json value) {
    nlohmann::json file = nlohmann::json::parse(*EncodeHandoff(TwoAttempts()));
    file["ended"][1][field] = std::move(value);
    return Refusal(file.dump());
  };
  EXPECT_EQ(with_ended("state", "RUNNING"),
            "handoff ended[1].state: must be SUCCEEDED, FAILED, STOPPED or PREEMPTED");
  EXPECT_EQ(with_ended("state", 3), "handoff ended[1].state: must be a string");
  EXPECT_EQ(with_ended("job", ""), "handoff ended[1].job: must not be empty");
  EXPECT_EQ(with_ended("signal", 300), "handoff ended[1].signal: must be in 0..128");
  EXPECT_EQ(with_ended("attempt", -1), "handoff ended[1].attempt: must be in 0..2147483647");
  nlohmann::json file = nlohmann::json::parse(*EncodeHandoff(TwoAttempts()));
  file["ended"] = "none";
  EXPECT_EQ(Refusal(file.dump()), "handoff file.ended: must be a list");

  auto with_image = [](nlohmann::json value) {
    nlohmann::json file = nlohmann::json::parse(*EncodeHandoff(TwoAttempts()));
    file["previous_image"] = std::move(value);
    return Refusal(file.dump());
  };
  EXPECT_EQ(with_image(5), "handoff file.previous_image: must be an object");
  EXPECT_EQ(with_image({{"fd", 1}, {"argv", {"/a"}}}),
            "handoff previous_image.fd: must be in 3..2147483647");
  EXPECT_EQ(with_image({{"argv", {"/a"}}}), "handoff previous_image.fd: missing");
  EXPECT_EQ(with_image({{"fd", 5}, {"argv", nlohmann::json::array()}}),
            "handoff previous_image.argv: must not be empty");
  EXPECT_EQ(with_image({{"fd", 5}, {"argv", {"/a", 2}}}),
            "handoff previous_image.argv: must be a list of strings");
}

// JSON carries only UTF-8: an attempt whose environment or paths hold other bytes (the agent's own
// HOME, say) refuses the handoff naming the attempt, so the live restart is refused and the agent
// runs on, rather than throwing (which ended the agent and its replicas) or changing the value.
// Ends are text for people: what is not UTF-8 in them is replaced.
TEST(HandoffTest, BytesThatAreNotUtf8RefuseTheHandoffWhereTheyAreAPathOrAValue) {
  testing::TempDir dir;
  Handoff h = TwoAttempts();
  h.attempts[1].env["HOME"] = "/home/caf\xe9";  // Latin-1
  auto encoded = EncodeHandoff(h);
  ASSERT_FALSE(encoded.ok());
  EXPECT_EQ(encoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(encoded.status().message().find(
                "handoff: attempt train/worker-0/2 holds a path or an environment value that is "
                "not UTF-8"),
            std::string::npos)
      << encoded.status().message();
  EXPECT_FALSE(WriteHandoff(dir.path(), h).ok());
  EXPECT_FALSE(std::filesystem::exists(HandoffPath(dir.path())));

  h = TwoAttempts();
  h.attempts[0].working_dir += "\xff";
  EXPECT_FALSE(EncodeHandoff(h).ok());

  h = TwoAttempts();
  h.ended[0].message = "exited 1: caf\xe9";
  auto with_ends = EncodeHandoff(h);
  ASSERT_TRUE(with_ends.ok()) << with_ends.status().ToString();
  auto back = DecodeHandoff(*with_ends);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->ended[0].message, "exited 1: caf\xef\xbf\xbd");
  EXPECT_EQ(back->attempts[0].env.at("WEIRD"), h.attempts[0].env.at("WEIRD"));  // UTF-8 as is
}

class TakeHandoffTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unsetenv(kHandoffVariable); }
  testing::TempDir dir_;
};

TEST_F(TakeHandoffTest, NoneWithoutTheVariableEvenWhereAFileIs) {
  ::unsetenv(kHandoffVariable);
  ASSERT_TRUE(WriteHandoff(dir_.path(), TwoAttempts()).ok());
  auto taken = TakeHandoff(dir_.path());
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_FALSE(taken->has_value());  // an ordinary start never reads it
}

TEST_F(TakeHandoffTest, TakesThisProcesssFileAndRemovesIt) {
  auto path = WriteHandoff(dir_.path(), TwoAttempts());
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, HandoffPath(dir_.path()));
  ::setenv(kHandoffVariable, "1", 1);
  auto taken = TakeHandoff(dir_.path());
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  ASSERT_TRUE(taken->has_value());
  EXPECT_EQ((*taken)->attempts.size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(*path));
  EXPECT_EQ(std::getenv(kHandoffVariable), nullptr);
}

TEST_F(TakeHandoffTest, RefusesAnotherProcesssFileAndAMissingOne) {
  Handoff theirs = TwoAttempts();
  theirs.agent_pid = ::getpid() + 1;
  auto path = WriteHandoff(dir_.path(), theirs);
  ASSERT_TRUE(path.ok());
  ::setenv(kHandoffVariable, "1", 1);
  auto taken = TakeHandoff(dir_.path());
  ASSERT_FALSE(taken.ok());
  EXPECT_NE(taken.status().message().find("written by process " + std::to_string(theirs.agent_pid)),
            std::string::npos)
      << taken.status().message();
  EXPECT_FALSE(std::filesystem::exists(*path));  // not read again at the next start

  ::setenv(kHandoffVariable, "1", 1);  // now gone
  taken = TakeHandoff(dir_.path());
  ASSERT_FALSE(taken.ok());
  EXPECT_EQ(taken.status().code(), StatusCode::kNotFound) << taken.status().ToString();
}

// The way back to the image that wrote the handoff is read on its own: a new image that cannot take
// the rest goes back as well. It is taken only from this process's file, with a descriptor of an
// executable file; what goes back is the file as written, less the way back, plus why.
TEST_F(TakeHandoffTest, TheWayBackIsTakenOnItsOwnFromThisProcesssFileOnly) {
  const int image = ::open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(image, 0);
  Handoff h = TwoAttempts();
  h.previous_image = PreviousImage{image, {"/usr/bin/cohort-agent", "--node-id", "gpu1"}};
  auto take = [&](const std::string& text) {
    testing::WriteFile(HandoffPath(dir_.path()), text);
    ::setenv(kHandoffVariable, "1", 1);
    std::optional<WayBack> way_back;
    auto taken = TakeHandoff(dir_.path(), &way_back);
    return std::make_pair(taken.ok(), way_back);
  };
  const std::string written = *EncodeHandoff(h);
  auto [ok, way_back] = take(written);
  EXPECT_TRUE(ok);
  ASSERT_TRUE(way_back.has_value());
  EXPECT_EQ(way_back->image.fd, image);
  EXPECT_EQ(way_back->image.argv, h.previous_image->argv);
  EXPECT_EQ(way_back->handoff, written);

  // What goes back: the same handoff, without the way back (its descriptor is closed then), and
  // why.
  auto back = DecodeHandoff(HandoffGoingBack(*way_back, "UNAVAILABLE: a port is taken"));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->previous_image.has_value());
  EXPECT_EQ(back->went_back_because, "UNAVAILABLE: a port is taken");
  EXPECT_EQ(back->attempts.size(), 2u);
  EXPECT_EQ(back->ended.size(), 2u);

  // A handoff this image cannot take still has its way back.
  nlohmann::json broken = nlohmann::json::parse(written);
  broken["attempts"][0]["pid"] = "many";
  std::tie(ok, way_back) = take(broken.dump());
  EXPECT_FALSE(ok);
  ASSERT_TRUE(way_back.has_value());
  EXPECT_EQ(way_back->handoff, broken.dump());

  // None from another process's file, nor to a descriptor that is not an executable file.
  Handoff theirs = h;
  theirs.agent_pid = ::getpid() + 1;
  std::tie(ok, way_back) = take(*EncodeHandoff(theirs));
  EXPECT_FALSE(way_back.has_value());
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  Handoff to_a_pipe = h;
  to_a_pipe.previous_image->fd = pipe_fds[0];
  std::tie(ok, way_back) = take(*EncodeHandoff(to_a_pipe));
  EXPECT_TRUE(ok);
  EXPECT_FALSE(way_back.has_value());
  const std::string data = dir_.path() + "/data";
  testing::WriteFile(data, "not a program");
  const int file = ::open(data.c_str(), O_RDONLY | O_CLOEXEC);
  Handoff to_data = h;
  to_data.previous_image->fd = file;
  std::tie(ok, way_back) = take(*EncodeHandoff(to_data));
  EXPECT_FALSE(way_back.has_value());
  ::close(image);
  ::close(file);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  std::tie(ok, way_back) = take(written);  // its descriptor now closed
  EXPECT_FALSE(way_back.has_value());
  Handoff none = TwoAttempts();
  std::tie(ok, way_back) = take(*EncodeHandoff(none));
  EXPECT_TRUE(ok);
  EXPECT_FALSE(way_back.has_value());
}

// The ends file: an ordinary start reads back what the agent before it wrote, for this node only;
// none where there is no file; a damaged or hostile one is refused whole, naming what is wrong.
TEST(EndsFileTest, WhatIsWrittenIsReadBackByTheSameNodeOnly) {
  testing::TempDir dir;
  auto none = ReadEnds(dir.path(), "node-1");
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_TRUE(none->empty());

  const std::vector<wire::ReplicaStatusT> ended = TwoAttempts().ended;
  {
    LatestFileWriter writer(EndsPath(dir.path()), kEndsFileMode);  // as the agent writes it
    writer.Post(1, EncodeEnds("node-1", ended));
  }
  struct stat st {};
  ASSERT_EQ(::stat(EndsPath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto back = ReadEnds(dir.path(), "node-1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].job, "eval");
  EXPECT_EQ((*back)[0].job_created_ms, ended[0].job_created_ms);
  EXPECT_EQ((*back)[0].attempt, 1);
  EXPECT_EQ((*back)[0].state, wire::ReplicaState::FAILED);
  EXPECT_EQ((*back)[0].exit_code, 137);
  EXPECT_EQ((*back)[0].signal, 9);
  EXPECT_EQ((*back)[0].message, ended[0].message);
  EXPECT_EQ((*back)[1].state, wire::ReplicaState::SUCCEEDED);

  auto theirs = ReadEnds(dir.path(), "node-2");
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(theirs.status().message().find("written by node node-1, not by this one (node-2)"),
            std::string::npos)
      << theirs.status().message();
}

TEST(EndsFileTest, ADamagedOrHostileFileIsRefusedNamingWhatIsWrong) {
  auto refusal = [](const std::string& text) {
    auto ended = DecodeEnds(text, "node-1");
    return ended.ok() ? std::string("accepted") : ended.status().message();
  };
  EXPECT_EQ(refusal(""), "ends file: not JSON");
  EXPECT_EQ(refusal(EncodeEnds("node-1", TwoAttempts().ended).substr(0, 40)),
            "ends file: not JSON");  // torn
  EXPECT_EQ(refusal("[]"), "ends file: must be an object");
  EXPECT_EQ(refusal("{}"), "ends file.node_id: missing");
  EXPECT_EQ(refusal("{\"node_id\": 7}"), "ends file.node_id: must be a string");
  EXPECT_EQ(refusal("{\"node_id\": \"node-1\", \"ended\": {}}"), "ends file.ended: must be a list");
  nlohmann::json file = nlohmann::json::parse(EncodeEnds("node-1", TwoAttempts().ended));
  file["ended"][1]["state"] = "RUNNING";
  EXPECT_EQ(refusal(file.dump()),
            "ends ended[1].state: must be SUCCEEDED, FAILED, STOPPED or PREEMPTED");
  file["ended"][1] = "SUCCEEDED";
  EXPECT_EQ(refusal(file.dump()), "ends ended[1]: must be an object");
  EXPECT_EQ(refusal("{\"node_id\": \"node-1\"}"), "accepted");  // no ends yet

  // Text that is not UTF-8 (a message) is written with U+FFFD, never refused or thrown.
  std::vector<wire::ReplicaStatusT> latin1 = TwoAttempts().ended;
  latin1[0].message = "caf\xe9";
  auto read = DecodeEnds(EncodeEnds("node-1", latin1), "node-1");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ((*read)[0].message, "caf\xef\xbf\xbd");

  testing::TempDir dir;
  std::ofstream(EndsPath(dir.path())) << "{\"node_id\": \"node-1\", \"ended\": [";
  auto torn = ReadEnds(dir.path(), "node-1");
  ASSERT_FALSE(torn.ok());
  EXPECT_EQ(torn.status().message(), EndsPath(dir.path()) + ": ends file: not JSON");
}

}  // namespace
}  // namespace cohort::agent
