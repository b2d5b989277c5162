// `cohort exec` and `cohort stacks` in a real cluster: a coordinator and an agent on loopback, a
// job whose replica runs a shell script, and the cohort CLI and the Python client as processes
// running commands beside it: its environment, working directory and process, exit codes, a
// command not found, one killed at --kill-after, the refusals, and the job's events; then the
// stacks of a Python job's two replicas, waiting in a function of their own.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
namespace ct = ::cohort::testing;

class ExecTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries({COHORT_CLI_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("exec"), 1}));
  }
};

// Runs the Python client's `script` (Debian's python3, the cohort package built here) with the
// coordinator's client endpoint as its argument.
ct::RunResult RunPythonClient(const std::string& script, const std::string& endpoint) {
  return ct::RunProcess("/usr/bin/python3",
                        {"-c",
                         "import sys\nfrom cohort import Client, CohortError\n"
                         "c = Client(sys.argv[1], insecure=True)\n" +
                             script,
                         endpoint},
                        {"PYTHONPATH=" + std::string(COHORT_PYTHON_DIR)}, 90s);
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(ExecTest, ACommandRunsBesideARunningReplicaAsItRunsAndItsStatusIsCohorts) {
  // The trainer runs until the test ends it.
  const std::string stop = cluster_->scratch("stop");
  const std::string trainer = cluster_->scratch("train.sh");
  ct::WriteFile(trainer,
                "#!/bin/sh\necho 'epoch 1' > progress.txt\nwhile [ ! -e " + stop +
                    " ]; do sleep 0.05; done\necho done\n",
                /*executable=*/true);
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: train\nworker_pools:\n  - role: chief\n    resources: {gpus: 1, "
                          "cpus: 1}\n    process: {command: [" +
                          trainer + "], env: {LEARNING_RATE: \"0.1\"}}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "train", wire::JobState::RUNNING, 20s));

  // Its environment, its working directory (where it wrote progress.txt), its process.
  ct::RunResult ran = RunCli({"exec", "train", "--", "sh", "-c",
                              "echo rank=$RANK lr=$LEARNING_RATE; cat progress.txt; pwd; echo "
                              "pid=$COHORT_REPLICA_PID"});
  ASSERT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  std::istringstream lines(ran.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "rank=0 lr=0.1");
  std::getline(lines, line);
  EXPECT_EQ(line, "epoch 1");
  std::getline(lines, line);
  EXPECT_EQ(line.substr(line.size() - std::string("/train/chief-0/attempt-0").size()),
            "/train/chief-0/attempt-0")
      << line;
  std::getline(lines, line);
  ASSERT_EQ(line.rfind("pid=", 0), 0u) << ran.out;
  const std::string pid = line.substr(4);
  EXPECT_NE(ReadText("/proc/" + pid + "/cmdline").find("train.sh"), std::string::npos)
      << "COHORT_REPLICA_PID " << pid << " is not the trainer";

  // The command's exit status is cohort's; one not found is 127, as a shell says.
  ran = RunCli({"exec", "train", "--replica", "chief-0", "--", "sh", "-c", "echo out; exit 7"});
  EXPECT_EQ(ran.exit_code, 7) << ran.err;
  EXPECT_EQ(ran.out, "out\n");
  ran = RunCli({"exec", "train", "--", "no-such-tool", "-v"});
  EXPECT_EQ(ran.exit_code, 127);
  EXPECT_EQ(ran.out, "cohort: no-such-tool: not found on the replica's PATH\n");
  // Killed at --kill-after: 124, saying so.
  const auto start = std::chrono::steady_clock::now();
  ran = RunCli({"exec", "train", "--kill-after", "1s", "--", "sleep", "30"});
  EXPECT_EQ(ran.exit_code, 124) << ran.out << ran.err;
  EXPECT_NE(ran.err.find("sleep in chief-0 was killed after 1s (--kill-after)"), std::string::npos)
      << ran.err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);

  // The Python client does the same.
  auto python = RunPythonClient(
      "r = c.exec('train', ['sh', '-c', 'echo $RANK; exit 3'])\n"
      "assert r['exit_code'] == 3 and r['output'] == b'0\\n' and r['replica'] == 'chief-0', r\n"
      "assert r['killed_because'] == '' and not r['timed_out'], r\n"
      "print('python exec: ok')\n",
      cluster_->client_endpoint());
  EXPECT_EQ(python.exit_code, 0) << python.out << python.err;
  EXPECT_NE(python.out.find("python exec: ok"), std::string::npos) << python.out << python.err;

  // Refusals name what is wrong.
  ran = RunCli({"exec", "train", "--replica", "worker-4", "--", "ls"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("job train has no replica worker-4 (it has chief-0)"), std::string::npos)
      << ran.err;
  ran = RunCli({"exec", "train"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("exec needs a JOB and a COMMAND"), std::string::npos) << ran.err;

  // Each command run is an event of the job.
  auto job = client.GetJob("train");
  ASSERT_TRUE(job.ok());
  int execs = 0;
  for (const auto& e : job->events) {
    if (e->message.rfind("cohort exec by ", 0) == 0) ++execs;
  }
  EXPECT_EQ(execs, 5);

  // Once the job has ended there is nothing to run beside.
  ct::WriteFile(stop, "");
  ASSERT_EQ(ct::WaitForJobEnd(client, "train", 30s).state, wire::JobState::SUCCEEDED);
  ran = RunCli({"exec", "train", "--", "ls"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("chief-0 of job train is not running (SUCCEEDED, job SUCCEEDED)"),
            std::string::npos)
      << ran.err;
}

// `cohort exec -i` and `-it`: interactive sessions through the coordinator and the agent, driven
// by the CLI as a process with its stdin piped: input streams to the command (on a terminal of
// its own with -t), output streams back, the command's status is cohort's, and each session is an
// event of the job.
TEST_F(ExecTest, InteractiveSessionsStreamStdinAndOutput) {
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: shell\nworker_pools:\n  - role: chief\n    resources: {cpus: "
                          "1}\n    process: {command: [sleep, '600'], env: {GREETING: hi}}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitForJobState(client, "shell", wire::JobState::RUNNING, 20s));
  auto piped = [&](const std::string& input, const std::vector<std::string>& args) {
    std::string command = "printf '" + input + "' | '" + std::string(COHORT_CLI_BIN) + "'";
    for (const std::string& arg : Cli(args)) command += " '" + arg + "'";
    return ct::RunProcess("/bin/sh", {"-c", command}, {}, 30s);
  };
  // -i: a pipe into cat, closed at the end of stdin; the replica's environment.
  ct::RunResult ran = piped(
      "one\\ntwo\\n", {"exec", "shell", "-i", "--", "sh", "-c", "cat; echo $GREETING; exit 3"});
  EXPECT_EQ(ran.exit_code, 3) << ran.err;
  EXPECT_EQ(ran.out, "one\ntwo\nhi\n") << ran.err;
  // -it: a shell on a terminal of its own (24 x 80 when this side has none).
  ran = piped("tty; stty size; exit 4\\n", {"exec", "shell", "-it", "--", "sh"});
  EXPECT_EQ(ran.exit_code, 4) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("/dev/pts/"), std::string::npos) << ran.out;
  EXPECT_NE(ran.out.find("24 80"), std::string::npos) << ran.out;
  // The end of a piped stdin is the terminal's ^D: a shell reading it ends.
  ran = piped("echo last\\n", {"exec", "shell", "-t", "--", "sh"});
  EXPECT_EQ(ran.exit_code, 0) << ran.out << ran.err;
  EXPECT_NE(ran.out.find("last"), std::string::npos) << ran.out;
  // Refusals name what is wrong.
  ran = RunCli({"exec", "shell", "-i", "--all", "--", "sh"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("-i and -t run one session: not with --all"), std::string::npos)
      << ran.err;
  ran = RunCli({"exec", "shell", "-i", "--replica", "worker-3", "--", "sh"});
  EXPECT_EQ(ran.exit_code, 2);
  EXPECT_NE(ran.err.find("job shell has no replica worker-3"), std::string::npos) << ran.err;

  auto job = client.GetJob("shell");
  ASSERT_TRUE(job.ok());
  // The same event again is counted on the one before.
  std::string sessions;
  for (const auto& e : job->events) {
    if (e->message.rfind("cohort exec -i", 0) == 0) sessions += e->message + "\n";
  }
  EXPECT_NE(sessions.find("cohort exec -i by "), std::string::npos) << sessions;
  EXPECT_NE(sessions.find("in chief-0 attempt 0: sh (2 times)\n"), std::string::npos) << sessions;

  // The Python client's sessions: communicate() as subprocess's, send() and read(), a terminal
  // of the size asked, kill(), input of several steps, and a refusal.
  auto python = RunPythonClient(
      "out, code = c.exec_session('shell', ['cat']).communicate(b'one\\ntwo\\n')\n"
      "assert (out, code) == (b'one\\ntwo\\n', 0), (out, code)\n"
      "s = c.exec_session('shell', ['sh', '-c', 'read x; echo got $x $GREETING; exit 5'])\n"
      "s.send('ping\\n')\n"
      "out = b''\n"
      "while s.running: out += s.read(timeout_s=10)\n"
      "assert out == b'got ping hi\\n' and s.returncode == 5, (out, s.returncode)\n"
      "t = c.exec_session('shell', ['sh'], tty=True, rows=30, cols=100)\n"
      "out, code = t.communicate(b'stty size; exit 6\\n', timeout_s=20)\n"
      "assert code == 6 and b'30 100' in out, (out, code)\n"
      "with c.exec_session('shell', ['sleep', '60']) as k:\n"
      "    assert k.read(timeout_s=0.2) == b'' and k.running\n"
      "    assert k.kill() == 137, k.returncode\n"
      "big = bytes(range(256)) * 1024\n"
      "out, code = c.exec_session('shell', ['cat']).communicate(big, timeout_s=60)\n"
      "assert code == 0 and out == big, (len(out), code)\n"
      "try:\n"
      "    c.exec_session('shell', ['cat'], replica='worker-3')\n"
      "    raise SystemExit('a session in no replica started')\n"
      "except CohortError as e:\n"
      "    assert 'no replica worker-3' in str(e), e\n"
      "print('python exec session: ok')\n",
      cluster_->client_endpoint());
  EXPECT_EQ(python.exit_code, 0) << python.out << python.err;
  EXPECT_NE(python.out.find("python exec session: ok"), std::string::npos)
      << python.out << python.err;
  ASSERT_TRUE(client.Cancel("shell").ok());
}

// `cohort stacks`: what every running replica of a job is doing now, without a hang timeout set.
TEST_F(ExecTest, StacksShowWhatEachRunningReplicaIsDoingNow) {
  const std::string stop = cluster_->scratch("stop-stacks");
  const std::string trainer = cluster_->scratch("stuck_trainer.py");
  // A trainer that waits in a function whose name the stacks must show: the chief's imported
  // cohort's package (as one using cohort.collective or cohort.torch does), the worker's is a
  // stock script that never heard of Cohort (the agent's sitecustomize registers it).
  ct::WriteFile(trainer,
                "import os, sys, time\nif sys.argv[1:] == ['cohort']:\n    import "
                "cohort.collective\n\ndef wait_for_the_data():\n"
                "    while not os.path.exists(" +
                    ("'" + stop + "'") +
                    "):\n        time.sleep(0.05)\n\nprint('waiting', flush=True)\n"
                    "wait_for_the_data()\n",
                /*executable=*/false);
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: stuck\nworker_pools:\n  - role: chief\n    resources: {cpus: "
                          "1}\n    process: {command: [/usr/bin/python3, " +
                          trainer + "], args: [cohort], env: {PYTHONPATH: \"" +
                          std::string(COHORT_PYTHON_DIR) +
                          "\"}}\n  - role: worker\n    replicas: 1\n    resources: {cpus: 1}\n"
                          "    process: {command: [/usr/bin/python3, " +
                          trainer + "]}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto job = client.GetJob("stuck");
        if (!job.ok() || job->state != wire::JobState::RUNNING) return false;
        // Both have printed: each is in wait_for_the_data.
        for (const char* replica : {"chief-0", "worker-0"}) {
          auto log = client.ReadLogs("stuck", replica, 0);
          if (!log.ok() || log->data.empty()) return false;
        }
        return true;
      },
      30s));

  ct::RunResult stacks = RunCli({"stacks", "stuck"}, 150s);
  ASSERT_EQ(stacks.exit_code, 0) << stacks.out << stacks.err;
  for (const std::string replica : {"chief-0", "worker-0"}) {
    const size_t at = stacks.out.find("==== " + replica + " attempt 0 ====\n");
    ASSERT_NE(at, std::string::npos) << stacks.out;
  }
  // Each replica's part: its Python stack in wait_for_the_data, in the script.
  for (const std::string replica : {"chief-0", "worker-0"}) {
    const std::string other = replica == "chief-0" ? "worker-0" : "chief-0";
    const size_t from = stacks.out.find("==== " + replica + " attempt 0 ====\n");
    const size_t to = stacks.out.find("==== " + other + " attempt 0 ====\n");
    const std::string part =
        to > from ? stacks.out.substr(from, to - from) : stacks.out.substr(from);
    EXPECT_NE(part.find("Python stacks (faulthandler)"), std::string::npos) << replica << part;
    EXPECT_NE(part.find("in wait_for_the_data"), std::string::npos) << replica << part;
    EXPECT_NE(part.find("stuck_trainer.py"), std::string::npos) << replica << part;
  }
  // Kept with the replica's logs, and an event of the job.
  ct::RunResult kept = RunCli({"logs", "stuck", "--replica", "worker-0", "--dump"});
  EXPECT_NE(kept.out.find("wait_for_the_data"), std::string::npos) << kept.out << kept.err;
  auto job = client.GetJob("stuck");
  ASSERT_TRUE(job.ok());
  std::string events;
  for (const auto& e : job->events) events += e->message + "\n";
  EXPECT_NE(events.find("cohort stacks by "), std::string::npos) << events;
  EXPECT_NE(events.find(": chief-0, worker-0\n"), std::string::npos) << events;

  // A command on every running replica: each line after its replica's name, the largest status.
  ct::RunResult all =
      RunCli({"exec", "stuck", "--all", "--", "sh", "-c", "echo rank $RANK; exit $((RANK + 3))"});
  EXPECT_EQ(all.exit_code, 4) << all.err;
  EXPECT_EQ(all.out, "[chief-0] rank 0\n[worker-0] rank 1\n");

  // One replica alone, through the Python client.
  auto python = ct::RunProcess(
      "/usr/bin/python3",
      {"-c",
       "import sys\nfrom cohort import Client\nc = Client(sys.argv[1], insecure=True)\n"
       "s = c.stacks('stuck', replica='worker-0')\n"
       "assert list(s) == ['worker-0'] and 'wait_for_the_data' in s['worker-0'], s\n"
       "print('python stacks: ok')\n",
       cluster_->client_endpoint()},
      {"PYTHONPATH=" + std::string(COHORT_PYTHON_DIR)}, 150s);
  EXPECT_EQ(python.exit_code, 0) << python.out << python.err;
  EXPECT_NE(python.out.find("python stacks: ok"), std::string::npos) << python.out << python.err;

  // Once nothing of the job runs, there is nothing to take.
  ct::WriteFile(stop, "");
  ASSERT_EQ(ct::WaitForJobEnd(client, "stuck", 30s).state, wire::JobState::SUCCEEDED);
  ct::WaitForReplicasEnded(client, "stuck", 30s);
  ct::RunResult after = RunCli({"stacks", "stuck"});
  EXPECT_EQ(after.exit_code, 2);
  EXPECT_NE(after.err.find("no replica of job stuck is running (job SUCCEEDED)"), std::string::npos)
      << after.err;
}

}  // namespace
}  // namespace cohort
