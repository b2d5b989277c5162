// Interactive exec sessions on the agent (agent/exec_session.h), on real programs: a shell on a
// pty of its own (its terminal, window and ^C), a pipe streamed into `cat` and closed, a command
// that is not found, a step held while nothing comes, a session its client left, one ended with
// its attempt, and the bound on sessions at once.
#include "agent/exec_session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "tests/testing/temp_dir_test.h"

namespace cohort::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class ExecSessionTest : public ::cohort::testing::TempDirTest {
 protected:
  void SetUp() override {
    target_.env = {{"PATH", "/usr/bin:/bin"}, {"RANK", "3"}, {"TERM", "dumb"}};
    target_.working_dir = dir_;
  }

  // One step of session `id`; returns its answer once TakeAnswers gives it (within 10 s).
  wire::ExecOutputT Step(uint64_t id, ExecStep step = {}) {
    wire::ExecOutputT header;
    header.exec_id = ++exec_id_;
    Status s = sessions_.Step(id, key_, step, header, NowMs());
    EXPECT_TRUE(s.ok()) << s.ToString();
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      for (wire::ExecOutputT& answer : sessions_.TakeAnswers(NowMs())) {
        if (answer.exec_id == header.exec_id) return answer;
      }
      std::this_thread::sleep_for(5ms);
    }
    ADD_FAILURE() << "no answer to step " << header.exec_id;
    return {};
  }
  // Steps (sending `input` first) until the output holds `text` or the command ended; all of it.
  std::string ReadUntil(uint64_t id, const std::string& text, std::string input = "",
                        bool* ended = nullptr, int* exit_code = nullptr) {
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      ExecStep step;
      step.input = std::exchange(input, "");
      wire::ExecOutputT answer = Step(id, step);
      out.append(answer.output.begin(), answer.output.end());
      if (!answer.running) {
        if (ended) *ended = true;
        if (exit_code) *exit_code = answer.exit_code;
        return out;
      }
      if (out.find(text) != std::string::npos) return out;
    }
    ADD_FAILURE() << "no '" << text << "' in: " << out;
    return out;
  }

  ExecTarget target_;
  std::string key_ = "j/chief-0/0";  // the attempt Step names
  ExecSessions sessions_;
  uint64_t exec_id_ = 0;
};

TEST_F(ExecSessionTest, AShellOnATerminalOfItsOwn) {
  auto id = sessions_.Open("j/chief-0/0", target_, 4242, {"sh"}, /*tty=*/true, 40, 132, NowMs());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  ASSERT_NE(*id, 0u);
  // The replica's environment, a terminal (stdin is one), the window the client gave.
  std::string out = ReadUntil(*id, "size=40 132",
                              "echo rank=$RANK pid=$COHORT_REPLICA_PID; test -t 0 && echo "
                              "on-a-tty; echo size=$(stty size)\n");
  EXPECT_NE(out.find("rank=3 pid=4242"), std::string::npos) << out;
  EXPECT_NE(out.find("on-a-tty"), std::string::npos) << out;
  // A new window reaches the terminal.
  ExecStep resize;
  resize.rows = 50;
  resize.cols = 100;
  Step(*id, resize);
  out = ReadUntil(*id, "size=50 100", "echo size=$(stty size)\n");
  EXPECT_NE(out.find("size=50 100"), std::string::npos) << out;
  // ^C is the terminal's: it interrupts what runs in the foreground, not the shell, which then
  // answers at once (the sleep would take 30 s, ReadUntil gives up after 10). The ^C waits for
  // the foreground job's own word that it holds the terminal (a process of it, cat, whose group
  // is the terminal's foreground group: fields 5 and 8 of its /proc stat), not the terminal's
  // echo of the line, nor merely the job's first output: the shell gives the job the terminal
  // after forking it, so a ^C before that (a loaded machine) reached the shell, and the sleep
  // ran on.
  ReadUntil(*id, "as1leep",
            "(until set -- $(cat /proc/self/stat) && [ \"$5\" = \"$8\" ]; do :; done; "
            "echo as$((1))leep; sleep 30)\n");
  ReadUntil(*id, "^C", "\x03");
  out = ReadUntil(*id, "al1ive", "echo al$((1))ive\n");
  EXPECT_NE(out.find("al1ive"), std::string::npos) << out;
  bool ended = false;
  int code = -1;
  ReadUntil(*id, "\x01never", "exit 5\n", &ended, &code);
  EXPECT_TRUE(ended);
  EXPECT_EQ(code, 5);
  EXPECT_EQ(sessions_.size(), 0u) << "forgotten once its end was answered";
  EXPECT_FALSE(sessions_.Step(*id, "j/chief-0/0", {}, {}, NowMs()).ok());
}

TEST_F(ExecSessionTest, StdinStreamsThroughAPipeUntilClosed) {
  auto id = sessions_.Open("j/chief-0/0", target_, 4242, {"sh", "-c", "cat; echo done >&2"},
                           /*tty=*/false, 0, 0, NowMs());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  std::string out = ReadUntil(*id, "one\n", "one\n");
  EXPECT_EQ(out, "one\n");
  // Nothing to say: the step is held, then answered empty, the command still running.
  const int64_t before = NowMs();
  wire::ExecOutputT quiet = Step(*id);
  EXPECT_TRUE(quiet.running);
  EXPECT_TRUE(quiet.output.empty());
  EXPECT_GE(NowMs() - before, kExecStepHoldMs - 5);
  ExecStep close;
  close.input = "two\n";
  close.input_closed = true;
  wire::ExecOutputT answer = Step(*id, close);
  out.assign(answer.output.begin(), answer.output.end());
  bool ended = !answer.running;
  int code = answer.exit_code;
  if (!ended) out += ReadUntil(*id, "\x01never", "", &ended, &code);
  EXPECT_TRUE(ended);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "two\ndone\n");
}

TEST_F(ExecSessionTest, ACommandNotFoundEndsAtOnceSayingSo) {
  auto id =
      sessions_.Open("j/chief-0/0", target_, 1, {"no-such-shell"}, /*tty=*/true, 0, 0, NowMs());
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  wire::ExecOutputT answer = Step(*id);
  EXPECT_FALSE(answer.running);
  EXPECT_EQ(answer.exit_code, 127);
  EXPECT_EQ(std::string(answer.output.begin(), answer.output.end()),
            "cohort: no-such-shell: not found on the replica's PATH\n");
}

TEST_F(ExecSessionTest, SessionsLeftByTheirClientOrTheirAttemptAreKilled) {
  auto left = sessions_.Open("j/chief-0/0", target_, 1, {"sleep", "60"}, false, 0, 0, NowMs());
  auto other = sessions_.Open("j/worker-0/2", target_, 1, {"sleep", "60"}, false, 0, 0, NowMs());
  ASSERT_TRUE(left.ok() && other.ok());
  // Another attempt's step is refused.
  EXPECT_EQ(sessions_.Step(*other, "j/chief-0/0", {}, {}, NowMs()).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(sessions_.EndIdle(NowMs()), 0u);
  EXPECT_EQ(sessions_.EndIdle(NowMs() + kExecSessionIdleMs + 1), 2u);
  EXPECT_EQ(sessions_.size(), 0u);

  auto ended = sessions_.Open("j/chief-0/1", target_, 1, {"sleep", "60"}, false, 0, 0, NowMs());
  ASSERT_TRUE(ended.ok());
  sessions_.EndAttempt("j/chief-0/1");
  key_ = "j/chief-0/1";
  bool over = false;
  int code = -1;
  ReadUntil(*ended, "\x01never", "", &over, &code);
  EXPECT_TRUE(over);
  EXPECT_EQ(code, 128 + 9);
}

TEST_F(ExecSessionTest, AtMostSoManyAtOnce) {
  ExecSessions two(2);
  ASSERT_TRUE(two.Open("a", target_, 1, {"sleep", "60"}, false, 0, 0, NowMs()).ok());
  ASSERT_TRUE(two.Open("a", target_, 1, {"sleep", "60"}, true, 0, 0, NowMs()).ok());
  auto third = two.Open("a", target_, 1, {"sleep", "60"}, false, 0, 0, NowMs());
  EXPECT_EQ(third.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(third.status().message().find("2 exec sessions already run"), std::string::npos);
  // Destroying them kills both commands and returns (not after the sleeps).
}

}  // namespace
}  // namespace cohort::agent
