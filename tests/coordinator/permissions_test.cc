// Owners and permissions: the Permissions check (coordinator/permissions.h) and --admins parsing
// as units, then the coordinator through its real client endpoint (inproc://, --insecure, so the
// callers are the users their messages claim): a job is owned by its submitter, another user's
// cancel is refused naming the owner, an admin's is obeyed, and the owner survives a restart on
// the same state dir (SQLite).
#include "coordinator/permissions.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "coordinator/job_usage.h"
#include "coordinator/options.h"

namespace cohort::coordinator {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

TEST(PermissionsTest, TheOwnerOrAnAdminMayAndAnyoneElseIsToldWhoOwnsIt) {
  Permissions p({"carol", "dave"});
  EXPECT_TRUE(p.IsAdmin("carol"));
  EXPECT_FALSE(p.IsAdmin("alice"));
  EXPECT_FALSE(p.IsAdmin(""));
  EXPECT_TRUE(p.CheckOwnerOrAdmin("alice", "alice", "cancel job j").ok());
  EXPECT_TRUE(p.CheckOwnerOrAdmin("carol", "alice", "cancel job j").ok());
  Status denied = p.CheckOwnerOrAdmin("bob", "alice", "cancel job j");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(),
            "user bob may not cancel job j: it is owned by alice (only its owner or an admin may)");
  // A caller that names no user is nobody: not the owner, never an admin.
  Status nobody = p.CheckOwnerOrAdmin("", "alice", "cancel job j");
  EXPECT_EQ(nobody.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(nobody.message().find("a client that names no user"), std::string::npos);
  // Something stored before owners were recorded may be changed by anyone.
  EXPECT_TRUE(p.CheckOwnerOrAdmin("bob", "", "cancel job old").ok());
  EXPECT_TRUE(p.CheckOwnerOrAdmin("", "", "cancel job old").ok());
  // Admin-only actions (node verbs).
  EXPECT_TRUE(p.CheckAdmin("dave", "drain node n1").ok());
  Status node = p.CheckAdmin("alice", "drain node n1");
  EXPECT_EQ(node.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(node.message().find("drain node n1"), std::string::npos) << node.ToString();
  EXPECT_EQ(Permissions().CheckAdmin("alice", "forget node n1").code(),
            StatusCode::kPermissionDenied);
}

TEST(PermissionsTest, AdminsAreACommaListOfUserNames) {
  auto users = ParseUserList("admins", " carol, dave ,,erin@corp ");
  ASSERT_TRUE(users.ok()) << users.status().ToString();
  EXPECT_EQ(*users, (std::vector<std::string>{"carol", "dave", "erin@corp"}));
  EXPECT_TRUE(ParseUserList("admins", "")->empty());
  auto bad = ParseUserList("admins", "carol,ro ot");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--admins: 'ro ot'"), std::string::npos)
      << bad.status().ToString();

  const char* argv[] = {"cohort-coordinator", "--admins", "carol,dave"};
  auto flags = ParseCoordinatorFlags(3, argv);
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  EXPECT_EQ(flags->options.admins, (std::vector<std::string>{"carol", "dave"}));
}

TEST(PermissionsTest, UsageCountsAJobForItsOwner) {
  JobRecord job;
  EXPECT_EQ(JobUser(job), "unknown");
  job.owner = "alice";
  EXPECT_EQ(JobUser(job), "alice");
}

std::string TinyJob(const std::string& name) {
  return "name: " + name +
         "\nworker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: 1}\n"
         "    process: {command: [/bin/true]}\n";
}

class OwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    tag_ = std::to_string(::getpid()) + "-" + std::to_string(++counter);
    dir_ = fs::temp_directory_path() / ("cohort-owner-test-" + tag_);
    fs::remove_all(dir_);
    options_.state_dir = dir_.string();
    options_.insecure = true;
    options_.admins = {"carol"};
    Start();
  }
  void TearDown() override {
    coordinator_.reset();
    fs::remove_all(dir_);
  }
  void Start() {
    // A closed inproc:// endpoint is released asynchronously: every start binds fresh names.
    ++starts_;
    options_.client_endpoint = "inproc://owner-clients-" + tag_ + "-" + std::to_string(starts_);
    options_.agent_endpoint = "inproc://owner-agents-" + tag_ + "-" + std::to_string(starts_);
    auto c = Coordinator::Create(options_, &clock_, &context_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coordinator_ = std::move(*c);
  }

  // One request from a client that claims `user`; steps the loop until the reply comes.
  template <typename T>
  Message Call(const std::string& user, T body) {
    auto socket = DealerSocket::Connect(context_, options_.client_endpoint);
    EXPECT_TRUE(socket.ok());
    uint64_t id = socket->NextRequestId();
    EXPECT_TRUE(socket->Send(Encode(id, std::move(body), user)).ok());
    for (int i = 0; i < 500; ++i) {
      EXPECT_TRUE(coordinator_->RunOnce(milliseconds(2)).ok());
      auto m = socket->Receive(milliseconds(0));
      if (m.ok() && m->has_value() && (*m)->request_id() == id) return std::move(**m);
    }
    ADD_FAILURE() << "no reply";
    std::abort();
  }
  Status Submit(const std::string& user, const std::string& name) {
    wire::SubmitJobT req;
    req.spec_yaml = TinyJob(name);
    return Call(user, std::move(req)).ErrorStatus();
  }
  Message Cancel(const std::string& user, const std::string& name) {
    wire::CancelJobT req;
    req.name = name;
    return Call(user, std::move(req));
  }
  wire::JobInfoT Get(const std::string& name) {
    wire::GetJobT req;
    req.name = name;
    Message m = Call("anyone", std::move(req));
    wire::JobInfoT info;
    const auto* j = m.As<wire::JobInfo>();
    EXPECT_NE(j, nullptr) << m.ErrorStatus().ToString();
    if (j) j->UnPackTo(&info);
    return info;
  }

  std::string tag_;
  int starts_ = 0;
  fs::path dir_;
  CoordinatorOptions options_;
  ManualClock clock_;
  zmq::context_t context_{1};
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(OwnershipTest, OnlyTheOwnerOrAnAdminCancelsAndTheOwnerSurvivesARestart) {
  ASSERT_TRUE(Submit("alice", "alices").ok());
  ASSERT_TRUE(Submit("alice", "second").ok());
  EXPECT_EQ(Get("alices").owner, "alice");

  // Another user: refused naming the owner; the job is untouched.
  Message denied = Cancel("bob", "alices");
  EXPECT_EQ(denied.ErrorStatus().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.ErrorStatus().message().find("owned by alice"), std::string::npos)
      << denied.ErrorStatus().ToString();
  EXPECT_EQ(Get("alices").state, wire::JobState::QUEUED);
  // A client that claims no user is refused too.
  EXPECT_EQ(Cancel("", "alices").ErrorStatus().code(), StatusCode::kPermissionDenied);

  // The owner survives a restart on the same state dir, and so does the check.
  coordinator_.reset();
  Start();
  EXPECT_EQ(Get("alices").owner, "alice");
  EXPECT_EQ(Cancel("bob", "alices").ErrorStatus().code(), StatusCode::kPermissionDenied);

  // The owner may; an admin may cancel anyone's.
  Message own = Cancel("alice", "alices");
  ASSERT_TRUE(own.ErrorStatus().ok()) << own.ErrorStatus().ToString();
  Message admin = Cancel("carol", "second");
  ASSERT_TRUE(admin.ErrorStatus().ok()) << admin.ErrorStatus().ToString();
  wire::JobInfoT second = Get("second");
  EXPECT_TRUE(second.state == wire::JobState::CANCELLED ||
              second.state == wire::JobState::CANCELLING)
      << wire::EnumNameJobState(second.state);
  bool noted = false;
  for (const auto& e : second.events) noted |= e->message.find("by carol") != std::string::npos;
  EXPECT_TRUE(noted) << "the job's events do not say who cancelled it";
}

// A job file may hold credentials in its env: only its owner or an admin reads it.
TEST_F(OwnershipTest, OnlyTheOwnerOrAnAdminReadsAJobsFile) {
  ASSERT_TRUE(Submit("alice", "alices").ok());
  auto spec_for = [&](const std::string& user) {
    wire::GetJobT req;
    req.name = "alices";
    req.with_spec = true;
    return Call(user, std::move(req));
  };
  Message denied = spec_for("bob");
  EXPECT_EQ(denied.ErrorStatus().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.ErrorStatus().message().find("read the job file of job alices"),
            std::string::npos)
      << denied.ErrorStatus().ToString();
  for (const char* may : {"alice", "carol"}) {  // the owner; an admin
    Message read = spec_for(may);
    const auto* info = read.As<wire::JobInfo>();
    ASSERT_NE(info, nullptr) << may << ": " << read.ErrorStatus().ToString();
    ASSERT_NE(info->spec_yaml(), nullptr) << may;
    EXPECT_NE(info->spec_yaml()->str().find("alices"), std::string::npos) << may;
  }
  EXPECT_TRUE(Get("alices").spec_yaml.empty());  // the job itself stays everyone's to read
}

TEST_F(OwnershipTest, AStudysOwnerOwnsItsTrialJobs) {
  wire::SubmitStudyT req;
  req.spec_yaml =
      "name: st\nmetric: {id: score, goal: maximize}\n"
      "parameters:\n  - {id: x, type: integer, min: 1, max: 2}\n"
      "algorithm: grid\nmax_trials: 1\nparallel_trials: 1\n"
      "trial_job:\n  worker_pools:\n"
      "    - {role: chief, replicas: 1, resources: {cpus: 1}, process: {command: [/bin/t]}}\n";
  Message m = Call("alice", std::move(req));
  const auto* study = m.As<wire::StudyInfo>();
  ASSERT_NE(study, nullptr) << m.ErrorStatus().ToString();
  ASSERT_NE(study->owner(), nullptr);
  EXPECT_EQ(study->owner()->str(), "alice");
  ASSERT_NE(study->trials(), nullptr);
  ASSERT_EQ(study->trials()->size(), 1u);
  std::string trial_job = study->trials()->Get(0)->job()->str();
  EXPECT_EQ(Get(trial_job).owner, "alice");
  EXPECT_EQ(Cancel("bob", trial_job).ErrorStatus().code(), StatusCode::kPermissionDenied);
  // The study file, as a job's, is its owner's or an admin's to read.
  auto spec_for = [&](const std::string& user) {
    wire::GetStudyT get;
    get.name = "st";
    get.with_spec = true;
    return Call(user, std::move(get));
  };
  Message denied = spec_for("bob");
  EXPECT_EQ(denied.ErrorStatus().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(denied.ErrorStatus().message().find("read the study file of study st"),
            std::string::npos)
      << denied.ErrorStatus().ToString();
  for (const char* may : {"alice", "carol"}) {  // the owner; an admin
    Message read = spec_for(may);
    const auto* info = read.As<wire::StudyInfo>();
    ASSERT_NE(info, nullptr) << may << ": " << read.ErrorStatus().ToString();
    ASSERT_NE(info->spec_yaml(), nullptr) << may;
    EXPECT_NE(info->spec_yaml()->str().find("/bin/t"), std::string::npos) << may;
  }
  wire::GetStudyT plain;  // the study itself stays everyone's to read
  plain.name = "st";
  Message read = Call("bob", std::move(plain));
  const auto* info = read.As<wire::StudyInfo>();
  ASSERT_NE(info, nullptr) << read.ErrorStatus().ToString();
  EXPECT_EQ(info->spec_yaml(), nullptr);
}

// The day-2 verbs go through the same check: a job's deletion and a study's cancel by its owner
// or an admin; a node's cordon, drain, uncordon, label or forget by an admin only (admins = carol
// here).
TEST_F(OwnershipTest, OnlyTheOwnerOrAnAdminUpdatesAJob) {
  ASSERT_TRUE(Submit("alice", "queued").ok());
  auto update = [&](const std::string& user, const std::string& priority) {
    wire::UpdateJobT req;
    req.name = "queued";
    req.priority = priority;
    return Call(user, std::move(req)).ErrorStatus();
  };
  Status denied = update("bob", "high");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied) << denied.ToString();
  EXPECT_NE(denied.message().find("owned by alice"), std::string::npos) << denied.ToString();
  EXPECT_EQ(Get("queued").priority, "normal");
  EXPECT_TRUE(update("alice", "low").ok());
  EXPECT_EQ(Get("queued").priority, "low");
  EXPECT_TRUE(update("carol", "high").ok());  // an admin
  EXPECT_EQ(Get("queued").priority, "high");
}

TEST_F(OwnershipTest, DeleteCancelStudyAndNodeVerbsAreTheOwnersOrAnAdmins) {
  ASSERT_TRUE(Submit("alice", "done").ok());
  ASSERT_TRUE(Cancel("alice", "done").ErrorStatus().ok());
  ASSERT_EQ(Get("done").state, wire::JobState::CANCELLED);
  auto del = [&](const std::string& user) {
    wire::DeleteJobT req;
    req.name = "done";
    return Call(user, std::move(req)).ErrorStatus();
  };
  Status denied = del("bob");
  EXPECT_EQ(denied.code(), StatusCode::kPermissionDenied) << denied.ToString();
  EXPECT_NE(denied.message().find("owned by alice"), std::string::npos) << denied.ToString();
  Status deleted = del("alice");
  EXPECT_TRUE(deleted.ok()) << deleted.ToString();

  wire::SubmitStudyT study;
  study.spec_yaml =
      "name: st\nmetric: {id: score, goal: maximize}\n"
      "parameters:\n  - {id: x, type: integer, min: 1, max: 2}\n"
      "algorithm: grid\nmax_trials: 1\nparallel_trials: 1\n"
      "trial_job:\n  worker_pools:\n"
      "    - {role: chief, replicas: 1, resources: {cpus: 1}, process: {command: [/bin/t]}}\n";
  ASSERT_TRUE(Call("alice", std::move(study)).ErrorStatus().ok());
  auto cancel_study = [&](const std::string& user) {
    wire::CancelStudyT req;
    req.name = "st";
    return Call(user, std::move(req)).ErrorStatus();
  };
  EXPECT_EQ(cancel_study("bob").code(), StatusCode::kPermissionDenied);
  Status by_admin = cancel_study("carol");
  EXPECT_TRUE(by_admin.ok()) << by_admin.ToString();

  auto cordon = [&](const std::string& user) {
    wire::NodeAdminT req;
    req.node_id = "n1";
    req.action = "cordon";
    return Call(user, std::move(req)).ErrorStatus();
  };
  Status not_admin = cordon("alice");
  EXPECT_EQ(not_admin.code(), StatusCode::kPermissionDenied) << not_admin.ToString();
  // An admin passes the check (and hears that there is no such node).
  EXPECT_EQ(cordon("carol").code(), StatusCode::kNotFound);
  auto label = [&](const std::string& user) {
    wire::NodeAdminT req;
    req.node_id = "n1";
    req.action = "label";
    req.labels = {"gpu=h100"};
    return Call(user, std::move(req)).ErrorStatus();
  };
  EXPECT_EQ(label("alice").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(label("carol").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cohort::coordinator
