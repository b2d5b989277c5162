// Users who own their jobs (issue 16), with the real daemons and CURVE keys: a job is its
// submitting key's user's; another key's `cohort cancel` is refused (exit 5, naming the owner)
// through a coordinator restart, an admin's is obeyed; a replica runs as its owner's mapped Unix
// account (a test account made with useradd), with its output dir that account's; an owner with
// no account on the node, or one mapped to root, fails the launch saying why.
#include <grp.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "common/client.h"
#include "common/curve_keys.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;
namespace fs = std::filesystem;

constexpr int kExitDenied = 5;  // cli/cli.h

std::string Job(const std::string& name, const std::string& script,
                const std::string& output_dir = "") {
  std::string yaml = "name: " + name + "\n";
  if (!output_dir.empty()) yaml += "output_dir: " + output_dir + "\n";
  return yaml +
         "worker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
         "    process: {command: [/bin/sh, -c], args: ['" +
         script + "']}\nscheduling: {max_restarts: 0}\n";
}

class OwnersTest : public ct::ClusterTest {
 protected:
  void SetUp() override { NeedBinaries({COHORT_CLI_BIN}); }

  // A secure cluster (its admin key is "admin", an admin) whose clients/ also lists `users`.
  void StartSecure(const std::vector<std::string>& users) {
    ct::ClusterOptions options;
    options.secure = true;
    options.coordinator_args = {"--admins", "admin"};
    cluster_ = std::make_unique<ct::LocalCluster>(
        ct::ClusterBinaries{COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, options);
    const std::string keys = cluster_->keys_dir();
    for (const std::string& user : users) {
      auto pair = GenerateCurveKeyPair();
      ASSERT_TRUE(pair.ok());
      ASSERT_TRUE(WriteCurveKeyFiles(keys, user, *pair).ok());
      fs::copy_file(keys + "/" + user + ".pub", keys + "/clients/" + user + ".pub");
    }
    ASSERT_EQ(cluster_->StartCoordinator(), "");
  }
  CoordinatorClient ClientAs(const std::string& user) {
    ClientOptions options = cluster_->ClientOptionsFor(10s);
    options.key_file = cluster_->keys_dir() + "/" + user + ".key";
    auto client = CoordinatorClient::Connect(options);
    EXPECT_TRUE(client.ok());
    return std::move(*client);
  }
  ct::RunResult CliAs(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"--coordinator", cluster_->client_endpoint(), "--key",
                               cluster_->keys_dir() + "/" + user + ".key", "--server-key",
                               cluster_->keys_dir() + "/coordinator.pub", "--timeout", "10s"});
    return ct::RunProcess(COHORT_CLI_BIN, args, {}, 30s);
  }
};

TEST_F(OwnersTest, AnotherKeyCannotCancelTheOwnersJobAnAdminCanAndTheOwnerSurvivesARestart) {
  ASSERT_NO_FATAL_FAILURE(StartSecure({"alice", "bob"}));
  // No agent: the jobs stay QUEUED, which is all a cancel needs.
  auto alice = ClientAs("alice");
  ASSERT_TRUE(alice.Submit(Job("alices", "true")).ok());
  ASSERT_TRUE(alice.Submit(Job("alices_other", "true")).ok());

  ct::RunResult denied = CliAs("bob", {"cancel", "alices"});
  EXPECT_EQ(denied.exit_code, kExitDenied) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("PERMISSION_DENIED"), std::string::npos) << denied.err;
  EXPECT_NE(denied.err.find("user bob may not cancel job alices: it is owned by alice"),
            std::string::npos)
      << denied.err;
  // Everyone may read: bob sees the owner in status and list.
  ct::RunResult status = CliAs("bob", {"status", "alices"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("Owner:      alice"), std::string::npos) << status.out;
  ct::RunResult list = CliAs("bob", {"list"});
  EXPECT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("OWNER"), std::string::npos) << list.out;
  bool listed = false;  // the row of alices_other names alice in its OWNER column
  std::istringstream rows(list.out);
  for (std::string row; std::getline(rows, row);) {
    listed |= row.rfind("alices_other ", 0) == 0 && row.find(" alice ") != std::string::npos;
  }
  EXPECT_TRUE(listed) << list.out;

  // The owner is stored: after a kill -9 and a restart it is the same, and so is the refusal.
  cluster_->coordinator().Signal(SIGKILL);
  ASSERT_TRUE(cluster_->coordinator().Wait(10s).has_value());
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  auto after = ClientAs("bob").GetJob("alices");
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(after->owner, "alice");
  EXPECT_EQ(after->state, wire::JobState::QUEUED);
  EXPECT_EQ(CliAs("bob", {"cancel", "alices"}).exit_code, kExitDenied);
  // Suspending and resuming are the owner's as cancelling is.
  for (const char* verb : {"suspend", "resume"}) {
    ct::RunResult other = CliAs("bob", {verb, "alices"});
    EXPECT_EQ(other.exit_code, kExitDenied) << other.out << other.err;
    EXPECT_NE(other.err.find(std::string("user bob may not ") + verb +
                             " job alices: it is owned by alice"),
              std::string::npos)
        << other.err;
  }

  // The owner may cancel; so may an admin, anyone's.
  ct::RunResult own = CliAs("alice", {"cancel", "alices"});
  EXPECT_EQ(own.exit_code, 0) << own.err;
  ct::RunResult admin = CliAs("admin", {"cancel", "alices_other"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  auto other = cluster_->Client().GetJob("alices_other");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->state == wire::JobState::CANCELLED ||
              other->state == wire::JobState::CANCELLING)
      << wire::EnumNameJobState(other->state);
}

// A Unix account made for one test and removed after it.
class TestAccount {
 public:
  explicit TestAccount(std::string name) : name_(std::move(name)) {
    ct::RunResult made =
        ct::RunProcess("/usr/sbin/useradd",
                       {"--system", "--no-create-home", "--shell", "/bin/sh", name_}, {}, 30s);
    created_ = made.exit_code == 0;
    error_ = made.err;
  }
  ~TestAccount() {
    if (created_) ct::RunProcess("/usr/sbin/userdel", {name_}, {}, 30s);
  }
  bool created() const { return created_; }
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  uid_t uid() const {
    struct passwd* pw = ::getpwnam(name_.c_str());
    return pw ? pw->pw_uid : 0;
  }

 private:
  std::string name_;
  bool created_ = false;
  std::string error_;
};

// Every directory from `dir` up to / traversable by other accounts (the cluster's TempDir is
// mkdtemp's 0700).
void OpenUpTo(const fs::path& dir) {
  for (fs::path p = dir; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) ::chmod(p.c_str(), (st.st_mode & 07777) | 0055);
  }
}

bool NeedRootAndUseradd() {
  if (::geteuid() != 0) {
    [] { GTEST_SKIP() << "needs root: it creates a Unix account and switches a replica's uid"; }();
    return false;
  }
  if (!fs::exists("/usr/sbin/useradd")) {
    [] { GTEST_SKIP() << "no /usr/sbin/useradd to create the test account with"; }();
    return false;
  }
  return true;
}

TEST_F(OwnersTest, AReplicaRunsAsItsOwnersMappedAccountAndItsOutputDirIsThatAccounts) {
  if (!NeedRootAndUseradd()) return;
  TestAccount account("cohort-t" + std::to_string(::getpid()));
  ASSERT_TRUE(account.created()) << account.error();
  ASSERT_NE(account.uid(), 0u);
  ASSERT_NO_FATAL_FAILURE(StartSecure({"alice"}));
  const std::string node = UniqueNodeId("owners");
  ASSERT_EQ(cluster_->StartAgent({node, 0, 2, 2048, "2s", {"--users", "alice=" + account.name()}}),
            "");
  const std::string out = cluster_->scratch("alice-out");
  OpenUpTo(cluster_->scratch());

  auto alice = ClientAs("alice");
  ASSERT_TRUE(
      alice
          .Submit(Job("as_alice", "echo uid=$(id -u) user=$USER; touch \"$AIP_MODEL_DIR/written\"",
                      out))
          .ok());
  wire::JobInfoT job = ct::WaitForJobEnd(alice, "as_alice", 60s);
  auto logs = alice.ReadLogs("as_alice", "chief-0", 0);
  ASSERT_TRUE(logs.ok()) << logs.status().ToString();
  std::string text(logs->data.begin(), logs->data.end());
  ASSERT_EQ(job.state, wire::JobState::SUCCEEDED) << job.message << "\n" << text;
  EXPECT_NE(text.find("uid=" + std::to_string(account.uid()) + " user=" + account.name()),
            std::string::npos)
      << text;
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, account.uid()) << "the job's output dir is not its owner's";
  ASSERT_EQ(::stat((out + "/model/written").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, account.uid());
}

TEST_F(OwnersTest, AnOwnerWithNoAccountOrMappedToRootFailsTheLaunchSayingWhy) {
  if (!NeedRootAndUseradd()) return;
  const std::string ghost = "ghost" + std::to_string(::getpid());
  ASSERT_EQ(::getpwnam(ghost.c_str()), nullptr);
  ASSERT_NO_FATAL_FAILURE(StartSecure({ghost, "rooty"}));
  const std::string node = UniqueNodeId("owners-none");
  ASSERT_EQ(cluster_->StartAgent({node, 0, 2, 2048, "2s", {"--users", "rooty=root"}}), "");

  auto client = ClientAs(ghost);
  ASSERT_TRUE(client.Submit(Job("ghosts", "true")).ok());
  wire::JobInfoT job = ct::WaitForJobEnd(client, "ghosts", 60s);
  EXPECT_EQ(job.state, wire::JobState::FAILED);
  std::string why = job.message;
  for (const auto& r : job.replicas) why += " | " + r->message;
  EXPECT_NE(why.find("user " + ghost + " has no Unix account '" + ghost + "' on node " + node),
            std::string::npos)
      << why;

  auto rooty = ClientAs("rooty");
  ASSERT_TRUE(rooty.Submit(Job("rootys", "true")).ok());
  job = ct::WaitForJobEnd(rooty, "rootys", 60s);
  EXPECT_EQ(job.state, wire::JobState::FAILED);
  why = job.message;
  for (const auto& r : job.replicas) why += " | " + r->message;
  EXPECT_NE(why.find("(uid 0, root) on node " + node), std::string::npos) << why;
}

}  // namespace
}  // namespace cohort
