// A failed replica's cause, from the end of its own log, in its job's message, its status and
// `cohort status` (agent/failure_excerpt.h), or from torch's error file: a real coordinator and
// agent on loopback, real replicas failing the ways user code fails (a Python exception, an error
// line and an exit code with bytes that are not UTF-8 and terminal colours, a crash by signal), the
// cohort CLI run as a process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace ct = ::cohort::testing;

class FailureCauseTest : public ct::OneNodeCliTest {
 protected:
  FailureCauseTest() : OneNodeCliTest("cause") {}

  // Runs job `name`, one chief executing the file `script` (written to the scratch dir) with
  // `interpreter`, to its end; returns what the coordinator says of it.
  wire::JobInfoT RunScript(const std::string& name, const std::string& interpreter,
                           const std::string& script) {
    const std::string path = cluster_->scratch(name + ".script");
    ct::WriteFile(path, script);
    const std::string yaml = "name: " + name +
                             "\nworker_pools:\n  - role: chief\n    replicas: 1\n"
                             "    resources: {cpus: 1}\n"
                             "    process: {command: [" +
                             interpreter + ", " + path + "]}\nscheduling: {max_restarts: 2}\n";
    auto client = cluster_->Client();
    auto submitted = client.Submit(yaml);
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    return ct::WaitForJobEnd(client, name, 60s);
  }

  // `done`, job `job`'s end, failed at once by its chief's exit 1 with `cause`, in the job's
  // message, `cohort status` and the chief's entry of `cohort status --json`.
  void ExpectExitOneWithCause(const std::string& job, const wire::JobInfoT& done,
                              const std::string& cause) {
    ASSERT_EQ(done.state, wire::JobState::FAILED) << done.message;
    EXPECT_EQ(done.message,
              "chief-0 attempt 0 exited with code 1 (" + cause + ") (permanent failure)");
    EXPECT_EQ(done.restarts, 0);
    auto status = RunCli({"status", job});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_NE(status.out.find(cause), std::string::npos) << status.out;
    json chief = ChiefJson(job);
    EXPECT_EQ(chief["message"], cause) << chief;
    EXPECT_EQ(chief["exit_code"], 1) << chief;
  }

  static std::string TorchMissing() { return ct::TorchMissing(); }

  // Job `job`, its chief running `script` with Debian's Python and torch, fails at once with
  // `cause` (ExpectExitOneWithCause); skips where /usr/bin/python3 cannot import torch.
  void ExpectTorchScriptFailsWith(const std::string& job, const std::string& script,
                                  const std::string& cause) {
    if (const std::string why = TorchMissing(); !why.empty()) GTEST_SKIP() << why;
    ExpectExitOneWithCause(job, RunScript(job, "/usr/bin/python3", script), cause);
  }

  // `cohort status JOB --json`'s chief-0 entry (the CLI's exit code checked).
  json ChiefJson(const std::string& job) {
    auto status = RunCli({"status", job, "--json"});
    EXPECT_EQ(status.exit_code, 0) << status.err;
    json j = json::parse(status.out, nullptr, false);
    if (!j.is_object() || !j["replicas"].is_array() || j["replicas"].empty()) {
      ADD_FAILURE() << "not a job: " << status.out;
      return json::object();
    }
    return j["replicas"][0];
  }
};

TEST_F(FailureCauseTest, APythonExceptionIsNamedInTheJobsMessageAndInCohortStatus) {
  if (::access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 here";
  const wire::JobInfoT done =
      RunScript("bad_lr", "/usr/bin/python3",
                "print('epoch 0 loss 2.30', flush=True)\n"
                "def make_optimizer(lr):\n"
                "    if lr <= 0:\n"
                "        raise ValueError(f'learning rate must be positive, got {lr}')\n"
                "make_optimizer(-1.0)\n");
  ExpectExitOneWithCause("bad_lr", done,
                         "log: ValueError: learning rate must be positive, got -1.0");
}

// A script under torch's `@record` (as torchrun's docs ask of every script) writes its exception
// to the TORCHELASTIC_ERROR_FILE the agent gave it: that is the cause, ahead of the log's.
TEST_F(FailureCauseTest, TorchsRecordedExceptionIsTheCause) {
  ExpectTorchScriptFailsWith(
      "recorded",
      "from torch.distributed.elastic.multiprocessing.errors import record\n"
      "@record\n"
      "def main():\n"
      "    raise RuntimeError('shard 3 of /data/train is corrupt\\n(more detail)')\n"
      "main()\n",
      "raised: RuntimeError: shard 3 of /data/train is corrupt");
}

// torchrun's ChildFailedError report (formatted by torch's own ChildFailedError, as torchrun
// raises it) in a replica's log: `exit_code` is its first failed worker's.
std::string TorchrunFailureScript(int exit_code) {
  return "from torch.distributed.elastic.multiprocessing import errors\n"
         "@errors.record\n"
         "def main():\n"
         "    failure = errors.ProcessFailure(local_rank=1, pid=123, exitcode=" +
         std::to_string(exit_code) +
         ",\n"
         "                                    error_file=errors._NOT_AVAILABLE)\n"
         "    raise errors.ChildFailedError(name='train.py', failures={1: failure})\n"
         "main()\n";
}

// torchrun inside a replica whose worker was killed: no error file is written then, and the log
// ends with torchrun's own report, which names the worker that failed first. Its signal (SIGKILL,
// as the OOM killer sends) makes torchrun's exit 1 retryable: the job restarts until its budget
// is spent, each end named by the signal and the report.
TEST_F(FailureCauseTest, TorchrunsReportOfItsFirstFailedWorkerIsTheCause) {
  if (const std::string why = TorchMissing(); !why.empty()) GTEST_SKIP() << why;
  const std::string cause =
      "log: torchrun: rank 1 (local_rank: 1) failed first: Signal 9 (SIGKILL) received by PID 123";
  const wire::JobInfoT done =
      RunScript("torchrun_signal", "/usr/bin/python3", TorchrunFailureScript(-9));
  ASSERT_EQ(done.state, wire::JobState::FAILED) << done.message;
  EXPECT_EQ(done.restarts, 2);
  EXPECT_EQ(done.message,
            "chief-0 attempt 2 exited with code 1 after signal 9 (SIGKILL) killed a process inside "
            "it (" +
                cause + "); the restart budget (max_restarts=2) is spent");
  json chief = ChiefJson("torchrun_signal");
  EXPECT_EQ(chief["message"], cause) << chief;
  EXPECT_EQ(chief["exit_code"], 1) << chief;
  EXPECT_EQ(chief["signal"], 0) << chief;
  EXPECT_EQ(chief["cause_signal"], 9) << chief;
}

// A worker of torchrun's that exited 1 on its own: torchrun's exit 1 is a permanent failure.
TEST_F(FailureCauseTest, TorchrunsWorkerExitingOneFailsTheJobAtOnce) {
  ExpectTorchScriptFailsWith("torchrun_exit", TorchrunFailureScript(1),
                             "log: torchrun: rank 1 (local_rank: 1) failed first, exit code 1 "
                             "(pid: 123)");
}

TEST_F(FailureCauseTest, AnErrorLineIsShownPrintableAndWellFormed) {
  // Its last line has a byte that is not UTF-8 and terminal colours.
  const wire::JobInfoT done =
      RunScript("no_data", "/bin/sh",
                "echo 'loading /data/train'\n"
                "printf 'error: no dataset at /data/train \\377\\033[31m(red)\\033[0m\\n' >&2\n"
                "exit 3\n");
  ASSERT_EQ(done.state, wire::JobState::FAILED) << done.message;
  const std::string cause = "log: error: no dataset at /data/train \xEF\xBF\xBD(red)";
  EXPECT_NE(done.message.find("exited with code 3 (" + cause + ")"), std::string::npos)
      << done.message;
  json chief = ChiefJson("no_data");
  EXPECT_EQ(chief["message"], cause) << chief;
}

TEST_F(FailureCauseTest, ACrashBySignalIsNamedWithoutQuotingOrdinaryOutput) {
  const wire::JobInfoT done =
      RunScript("segv", "/bin/sh", "echo 'epoch 1 loss 0.50'\nkill -SEGV $$\n");
  ASSERT_EQ(done.state, wire::JobState::FAILED) << done.message;
  EXPECT_NE(done.message.find("chief-0 attempt 0 was killed by signal 11 (SIGSEGV)"),
            std::string::npos)
      << done.message;
  EXPECT_EQ(done.message.find("log:"), std::string::npos) << done.message;
  json chief = ChiefJson("segv");
  EXPECT_EQ(chief["message"], "") << chief;
  EXPECT_EQ(chief["signal"], 11) << chief;
  EXPECT_EQ(chief["exit_code"], 128 + 11) << chief;
  auto status = RunCli({"status", "segv"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("  139 (SIGSEGV)"), std::string::npos) << status.out;
}

// SIGABRT comes after its reason: the log's last line is quoted beside the signal (a failed
// assertion here; torch's gloo threads abort a script that printed why and called sys.exit(1)).
TEST_F(FailureCauseTest, AnAbortIsNamedWithTheLineBeforeIt) {
  const wire::JobInfoT done = RunScript(
      "abrt", "/bin/sh",
      "echo 'epoch 1 loss 0.50'\necho 'train: shard.c:42: read_shard: Assertion `n > 0` failed.'\n"
      "kill -ABRT $$\n");
  ASSERT_EQ(done.state, wire::JobState::FAILED) << done.message;
  EXPECT_NE(done.message.find("chief-0 attempt 0 was killed by signal 6 (SIGABRT) (log: train: "
                              "shard.c:42: read_shard: Assertion `n > 0` failed.)"),
            std::string::npos)
      << done.message;
}

}  // namespace
}  // namespace cohort
