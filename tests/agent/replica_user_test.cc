// Which Unix account a replica runs as (agent/replica_user.h): the users mapping, the rules for
// root, missing accounts and agents that cannot switch; directories created owned by the account;
// and a real process launched as another account (root only: it switches uid).
#include "agent/replica_user.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "agent/process_launcher.h"
#include "agent/replica_env.h"
#include "tests/agent/test_util.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::TempDir;

// An unprivileged account every Debian system has.
std::optional<struct passwd> Nobody() {
  struct passwd* pw = ::getpwnam("nobody");
  if (pw == nullptr) return std::nullopt;
  return *pw;
}

TEST(ReplicaUserTest, TheUsersSettingIsACommaListOfUserEqualsAccount) {
  auto map = ParseUserMap("users", " alice=ualice, bob = bob ,,");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(*map, (std::map<std::string, std::string>{{"alice", "ualice"}, {"bob", "bob"}}));
  for (const char* bad : {"alice", "alice=", "=ualice"}) {
    auto refused = ParseUserMap("users", bad);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("--users: expected USER=ACCOUNT"), std::string::npos)
        << refused.status().ToString();
  }
}

TEST(ReplicaUserTest, NoOwnerOrAnAgentThatCannotSwitchRunsAsTheAgent) {
  ReplicaUsers cannot({}, "n1", /*can_switch=*/false);
  auto r = cannot.Resolve("alice");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  ReplicaUsers can({}, "n1", /*can_switch=*/true);
  auto none = can.Resolve("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(ReplicaUserTest, AMappedUserResolvesToTheAccountWithItsGroups) {
  auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "this system has no 'nobody' account";
  ReplicaUserOptions options;
  options.users = {{"alice", "nobody"}};
  ReplicaUsers users(options, "n1", true);
  auto r = users.Resolve("alice");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->user, "alice");
  EXPECT_EQ((*r)->account, "nobody");
  EXPECT_EQ((*r)->uid, nobody->pw_uid);
  EXPECT_EQ((*r)->gid, nobody->pw_gid);
  EXPECT_NE(std::find((*r)->groups.begin(), (*r)->groups.end(), nobody->pw_gid),
            (*r)->groups.end());
  // Not listed: the account of the same name.
  auto same = users.Resolve("nobody");
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ((*same)->account, "nobody");
}

TEST(ReplicaUserTest, AUserWithNoAccountHereIsRefusedNamingUserAccountAndNode) {
  ReplicaUserOptions options;
  options.users = {{"carol", "no-such-account-x"}};
  ReplicaUsers users(options, "gpu-node-7", true);
  for (const auto& [owner, account] : std::vector<std::pair<std::string, std::string>>{
           {"carol", "no-such-account-x"}, {"no-such-user-y", "no-such-user-y"}}) {
    auto r = users.Resolve(owner);
    ASSERT_FALSE(r.ok()) << owner;
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
    const std::string m = r.status().message();
    EXPECT_NE(m.find("user " + owner), std::string::npos) << m;
    EXPECT_NE(m.find("'" + account + "'"), std::string::npos) << m;
    EXPECT_NE(m.find("node gpu-node-7"), std::string::npos) << m;
  }
}

TEST(ReplicaUserTest, RootIsRefusedUnlessAllowedForThatUserOrTheAgentIsInsecure) {
  ReplicaUserOptions options;
  options.users = {{"alice", "root"}, {"ops", "root"}};
  options.allow_root_users = {"ops"};
  ReplicaUsers users(options, "n1", true);
  auto alice = users.Resolve("alice");
  ASSERT_FALSE(alice.ok());
  EXPECT_EQ(alice.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(alice.status().message().find("uid 0"), std::string::npos) << alice.status().ToString();
  EXPECT_NE(alice.status().message().find("allow-root-users"), std::string::npos);
  auto ops = users.Resolve("ops");
  ASSERT_TRUE(ops.ok()) << ops.status().ToString();
  EXPECT_EQ((*ops)->uid, 0u);

  options.allow_root = true;  // --insecure
  ReplicaUsers insecure(options, "n1", true);
  EXPECT_TRUE(insecure.Resolve("alice").ok());
}

TEST(ReplicaUserTest, OutputDirsBelowTheJobsDirAreTheAccountsAndParentsStayTheAgents) {
  auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "this system has no 'nobody' account";
  if (::geteuid() != 0) GTEST_SKIP() << "chown to another account needs root";
  TempDir dir;
  RunAs run_as;
  run_as.account = "nobody";
  run_as.uid = nobody->pw_uid;
  run_as.gid = nobody->pw_gid;
  const std::string base = dir.path() + "/jobs/j1";
  std::map<std::string, std::string> env = {{"AIP_MODEL_DIR", base + "/model/"},
                                            {"AIP_CHECKPOINT_DIR", base + "/checkpoints/"},
                                            {"CLOUD_ML_HP_METRIC_FILE", base + "/hp.jsonl"}};
  ASSERT_TRUE(MakeOutputDirs(env, run_as).ok());
  auto owner = [](const std::string& path) {
    struct stat st {};
    EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
    return st.st_uid;
  };
  EXPECT_EQ(owner(base), nobody->pw_uid);
  EXPECT_EQ(owner(base + "/model"), nobody->pw_uid);
  EXPECT_EQ(owner(base + "/checkpoints"), nobody->pw_uid);
  EXPECT_EQ(owner(dir.path() + "/jobs"), 0u);  // above the job's dir: the agent's
  // A directory that existed already is left as it was.
  const std::string existing = dir.path() + "/existing";
  fs::create_directories(existing);
  ASSERT_TRUE(MakeDirsOwnedBy(existing + "/sub", run_as, existing).ok());
  EXPECT_EQ(owner(existing), 0u);
  EXPECT_EQ(owner(existing + "/sub"), nobody->pw_uid);
}

TEST(ReplicaUserTest, AProcessLaunchedAsAnAccountRunsWithItsUidGidAndHome) {
  auto nobody = Nobody();
  if (!nobody) GTEST_SKIP() << "this system has no 'nobody' account";
  if (::geteuid() != 0) GTEST_SKIP() << "switching a replica's uid needs root";
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  const std::string work = dir.path() + "/attempt-0";
  ReplicaUsers users({{{"alice", "nobody"}}, {}, false}, "n1", true);
  auto run_as = users.Resolve("alice");
  ASSERT_TRUE(run_as.ok() && run_as->has_value()) << run_as.status().ToString();
  ASSERT_TRUE(MakeDirsOwnedBy(work, *run_as).ok());
  LaunchRequest r;
  r.job = "j";
  r.replica = "chief-0";
  r.argv = {"/bin/sh", "-c", "echo uid=$(id -u) gid=$(id -g) user=$USER; touch mine"};
  r.env = {{"PATH", "/usr/bin:/bin"}};
  r.working_dir = work;
  r.log_path = dir.path() + "/attempt-0.log";
  r.run_as = *run_as;
  ProcessLauncher launcher{CgroupManager()};
  auto p = launcher.Launch(r);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(testing::Reap(**p)) << "the replica did not exit";
  std::string log = ReadFile(r.log_path);
  EXPECT_EQ((*p)->exit_info()->exit_code, 0) << log;
  EXPECT_NE(log.find("uid=" + std::to_string(nobody->pw_uid) +
                     " gid=" + std::to_string(nobody->pw_gid) + " user=nobody"),
            std::string::npos)
      << log;
  struct stat st {};
  ASSERT_EQ(::stat((work + "/mine").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->pw_uid);
}

}  // namespace
}  // namespace cohort::agent
