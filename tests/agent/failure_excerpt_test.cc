#include "agent/failure_excerpt.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "tests/testing/process.h"

namespace cohort::agent {
namespace {

std::string Excerpt(const std::string& log, bool any_last_line = true) {
  return FailureExcerpt(log, /*whole=*/true, any_last_line);
}

TEST(FailureExcerptTest, APythonTracebackGivesItsExceptionLine) {
  const std::string log =
      "epoch 0 loss 2.30\n"
      "Traceback (most recent call last):\n"
      "  File \"/job/train.py\", line 40, in <module>\n"
      "    main()\n"
      "  File \"/job/train.py\", line 31, in main\n"
      "    opt = make_optimizer(args.lr)\n"
      "          ^^^^^^^^^^^^^^^^^^^^^^^\n"
      "ValueError: learning rate must be positive, got -1.0\n";
  EXPECT_EQ(Excerpt(log), "ValueError: learning rate must be positive, got -1.0");
  // A signal's death takes the traceback too (only the last-line rule needs an exit code).
  EXPECT_EQ(Excerpt(log, /*any_last_line=*/false),
            "ValueError: learning rate must be positive, got -1.0");
}

// Tracebacks of several parts: the exception that ended the process is taken, and its first line.
TEST(FailureExcerptTest, ChainedNestedAndTorchTracebacksGiveTheExceptionThatEndedTheProcess) {
  struct Case {
    const char* what;
    std::string log;
    std::string excerpt;
  };
  const Case cases[] = {
      {"a chained exception, its message of two lines",
       "Traceback (most recent call last):\n"
       "  File \"t.py\", line 3, in load\n"
       "KeyError: 'weights'\n"
       "\n"
       "During handling of the above exception, another exception occurred:\n"
       "\n"
       "Traceback (most recent call last):\n"
       "  File \"t.py\", line 9, in <module>\n"
       "RuntimeError: checkpoint /ckpt/step-100 is unreadable\n"
       "  (a second line of the message)\n",
       "RuntimeError: checkpoint /ckpt/step-100 is unreadable"},
      {"a DataLoader worker's error, re-raised in the main process with the original's text",
       "Traceback (most recent call last):\n"
       "  File \"train.py\", line 12, in <module>\n"
       "RuntimeError: Caught ValueError in DataLoader worker process 0.\n"
       "Original Traceback (most recent call last):\n"
       "  File \"dataset.py\", line 5, in __getitem__\n"
       "ValueError: bad sample 17\n",
       "RuntimeError: Caught ValueError in DataLoader worker process 0."},
      {"gloo's error in a DDP rank, then a note of the agent's",
       "Traceback (most recent call last):\n"
       "  File \"ddp.py\", line 88, in <module>\n"
       "    loss.backward()\n"
       "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
       "[10.0.0.2]:40730: Connection reset by peer\n"
       "cohort-agent: stacks taken (cohort logs job --dump)\n",
       "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:589] Read error "
       "[10.0.0.2]:40730: Connection reset by peer"},
  };
  for (const Case& c : cases) EXPECT_EQ(Excerpt(c.log), c.excerpt) << c.what;
}

TEST(FailureExcerptTest, CrashesOfPythonAndCxx) {
  EXPECT_EQ(Excerpt("Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent "
                    "call first):\n  File \"x.py\", line 2 in <module>\n",
                    /*any_last_line=*/false),
            "Fatal Python error: Segmentation fault");
  EXPECT_EQ(Excerpt("step 3\nterminate called after throwing an instance of "
                    "'std::runtime_error'\n  what():  shape mismatch: 3 vs 4\n",
                    /*any_last_line=*/false),
            "std::runtime_error: shape mismatch: 3 vs 4");
  EXPECT_EQ(Excerpt("terminate called after throwing an instance of 'int'\n", false), "int");
}

TEST(FailureExcerptTest, OtherwiseTheLastLineForAnExitCodeOrAnAbort) {
  const std::string log = "loading data\nerror: no such dataset /data/imagenet\n\n   \n";
  EXPECT_EQ(Excerpt(log), "error: no such dataset /data/imagenet");
  // Killed by a signal: the signal says more than whatever it printed last.
  EXPECT_EQ(Excerpt("epoch 3 loss 0.21\n", /*any_last_line=*/false), "");
  EXPECT_EQ(Excerpt(""), "");
  EXPECT_EQ(Excerpt("cohort-agent: cannot launch: no such file\n"), "");
  // A script that printed why and exited, aborted in its teardown by a thread left joinable: its
  // own last line, not std::terminate's; that one alone where nothing precedes it.
  EXPECT_EQ(Excerpt("rank 1 failing on purpose\nterminate called without an active exception\n"),
            "rank 1 failing on purpose");
  EXPECT_EQ(Excerpt("terminate called without an active exception\n"),
            "terminate called without an active exception");
}

TEST(FailureExcerptTest, TheLastLineTellsTheCauseOfAnExitCodeOrAnAbortOnly) {
  EXPECT_TRUE(LastLineTellsTheCause(0));
  EXPECT_TRUE(LastLineTellsTheCause(SIGABRT));
  for (int other : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGKILL, SIGTERM, SIGINT, SIGHUP, SIGPIPE}) {
    EXPECT_FALSE(LastLineTellsTheCause(other)) << strsignal(other);
  }
}

// torchrun's report when one of its workers fails (torch 1.13's ChildFailedError, as it prints it):
// its root cause, not the exception that ends torchrun's own traceback.
std::string TorchrunReport(const std::string& exit_code, const std::string& traceback) {
  return "Traceback (most recent call last):\n"
         "  File \"/usr/bin/torchrun\", line 33, in <module>\n"
         "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
         "============================================================\n"
         "train.py FAILED\n"
         "------------------------------------------------------------\n"
         "Failures:\n"
         "  <NO_OTHER_FAILURES>\n"
         "------------------------------------------------------------\n"
         "Root Cause (first observed failure):\n"
         "[0]:\n"
         "  time      : 2026-11-27_23:19:53\n"
         "  host      : node-b\n"
         "  rank      : 5 (local_rank: 1)\n"
         "  exitcode  : " +
         exit_code +
         "\n"
         "  error_file: <N/A>\n"
         "  traceback : " +
         traceback +
         "\n"
         "============================================================\n";
}

// The signal that killed one of torchrun's workers: what the coordinator judges a torchrun
// replica's exit 1 by. The root cause's, else another failure's of the same report (torchrun names
// the lowest rank of those it found failed in one poll: here the peer that exited 1 on losing the
// killed rank). A worker that exited with a code, a later failure of the replica's own, a log
// without a report and a garbled field give none.
TEST(FailureExcerptTest, TorchrunsKillSignalIsReadFromItsExitCodes) {
  const auto signal_of = [](const std::string& log) {
    return TorchrunKillSignal(log, /*whole=*/true);
  };
  EXPECT_EQ(signal_of(TorchrunReport("-9 (pid: 123)", "Signal 9 (SIGKILL) received by PID 123")),
            9);
  EXPECT_EQ(signal_of("epoch 2\n" + TorchrunReport("-15", "Signal 15 (SIGTERM) received by PID 1")),
            15);
  EXPECT_EQ(signal_of(TorchrunReport("1 (pid: 123)", "<N/A>")), 0);
  // torch 1.13's report of two failures found in one poll (ChildFailedError.format_msg).
  std::string two = TorchrunReport("1 (pid: 122)", "To enable traceback see: https://x");
  two.replace(two.find("  <NO_OTHER_FAILURES>\n"), std::string("  <NO_OTHER_FAILURES>\n").size(),
              "[1]:\n  time      : 2026-11-29_02:29:33\n  rank      : 6 (local_rank: 2)\n"
              "  exitcode  : -9 (pid: 123)\n  error_file: <N/A>\n"
              "  traceback : Signal 9 (SIGKILL) received by PID 123\n");
  EXPECT_EQ(signal_of(two), 9);
  EXPECT_EQ(Excerpt(two), "torchrun: rank 5 (local_rank: 1) failed first, exit code 1 (pid: 122)");
  EXPECT_EQ(signal_of(TorchrunReport("-9 (pid: 1)", "Signal 9 (SIGKILL) received by PID 1") +
                      "Traceback (most recent call last):\n  File \"after.py\"\nOSError: x\n"),
            0);
  EXPECT_EQ(signal_of("Traceback (most recent call last):\nValueError: no\n"), 0);
  for (const char* bad : {"-", "-x", "-9x", "-0", "-65", "--9", "-99999999999999999999"}) {
    EXPECT_EQ(signal_of(TorchrunReport(bad, "<N/A>")), 0) << bad;
  }
}

TEST(FailureExcerptTest, TorchrunsRootCauseIsTakenOverItsOwnTraceback) {
  EXPECT_EQ(
      Excerpt(TorchrunReport("-9 (pid: 123)", "Signal 9 (SIGKILL) received by PID 123")),
      "torchrun: rank 5 (local_rank: 1) failed first: Signal 9 (SIGKILL) received by PID 123");
  EXPECT_EQ(Excerpt(TorchrunReport("1 (pid: 123)",
                                   "To enable traceback see: "
                                   "https://pytorch.org/docs/stable/elastic/errors.html")),
            "torchrun: rank 5 (local_rank: 1) failed first, exit code 1 (pid: 123)");
  // A worker under @record: its traceback (in the error file) spans lines; the report's gives no
  // one-line cause.
  EXPECT_EQ(Excerpt(TorchrunReport("1 (pid: 77)",
                                   "Traceback (most recent call last):\n"
                                   "    File \"train.py\", line 9, in main\n"
                                   "  ValueError: shard 1 is corrupt")),
            "torchrun: rank 5 (local_rank: 1) failed first, exit code 1 (pid: 77)");
  // A later failure of the replica's own, after torchrun's, is the cause.
  EXPECT_EQ(Excerpt(TorchrunReport("1 (pid: 1)", "Signal 6 (SIGABRT) received by PID 1") +
                    "Traceback (most recent call last):\n"
                    "  File \"upload.py\", line 3, in <module>\n"
                    "OSError: bucket not found\n"),
            "OSError: bucket not found");
  // A report without its fields gives the other rules their turn.
  EXPECT_EQ(Excerpt("Root Cause (first observed failure):\n[0]:\n=====\n"), "=====");
}

TEST(FailureExcerptTest, ACutFirstLineIsNotTakenAndCarriageReturnsKeepTheLastText) {
  EXPECT_EQ(FailureExcerpt("of a cut line", /*whole=*/false, true), "");
  EXPECT_EQ(FailureExcerpt("cut line\nwhole line\r\n", /*whole=*/false, true), "whole line");
  EXPECT_EQ(Excerpt("train  10%\rtrain  20%\rout of disk space\r\n"), "out of disk space");
}

TEST(FailureExcerptTest, TheExcerptIsPrintableWellFormedAndBounded) {
  EXPECT_EQ(Excerpt("\x1B[1;31mERROR\x1B[0m failed:\xFF bad\x07\n"),
            "ERROR failed:\xEF\xBF\xBD bad");
  std::string excerpt =
      Excerpt("Traceback (most recent call last):\nOSError: " + std::string(1000, 'x') + "\n");
  EXPECT_EQ(excerpt.size(), kMaxFailureExcerptBytes);
  EXPECT_EQ(excerpt.substr(0, 9), "OSError: ");
  EXPECT_EQ(excerpt.substr(excerpt.size() - 3), "...");
}

TEST(FailureExcerptTest, ATracebackCutShortFallsBackToTheOtherRules) {
  EXPECT_EQ(Excerpt("Traceback (most recent call last):\n  File \"x.py\", line 1\n"),
            "File \"x.py\", line 1");
  EXPECT_EQ(Excerpt("Traceback (most recent call last):\n", /*any_last_line=*/false), "");
}

TEST(FailureExcerptTest, ReadLogTailReadsTheEndOfTheFile) {
  testing::TempDir dir("excerpt");
  const std::string path = dir.path() + "/log";
  EXPECT_EQ(ReadLogTail(path, 16).text, "");  // no file
  std::ofstream(path) << "0123456789abcdef";
  LogTail all = ReadLogTail(path, 64);
  EXPECT_EQ(all.text, "0123456789abcdef");
  EXPECT_TRUE(all.whole);
  LogTail end = ReadLogTail(path, 6);
  EXPECT_EQ(end.text, "abcdef");
  EXPECT_FALSE(end.whole);
}

// The error file is the replica's to make: a link (to /dev/zero, or to a file the agent may read
// and the replica may not) or a FIFO (whose open would block the agent loop) gives nothing.
TEST(FailureExcerptTest, ReadLogTailTakesOnlyARegularFileOfItsOwn) {
  testing::TempDir dir("excerpt");
  const std::string secret = dir.path() + "/secret", link = dir.path() + "/error.json";
  std::ofstream(secret) << R"({"message": "root's secret"})";
  ASSERT_EQ(::symlink(secret.c_str(), link.c_str()), 0);
  EXPECT_EQ(ReadLogTail(link, kMaxErrorFileBytes).text, "");
  const std::string zero = dir.path() + "/zero.json", fifo = dir.path() + "/fifo.json";
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  EXPECT_EQ(ReadLogTail(zero, kMaxErrorFileBytes).text, "");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_EQ(ReadLogTail(fifo, kMaxErrorFileBytes).text, "");  // at once: no writer is awaited
}

// torch's error file (@record), in the form torch 1.13 and 2.x write and torchrun copies from its
// first failed worker, and in the older form with a string message.
TEST(ErrorFileMessageTest, TheExceptionOfTorchsErrorFileIsTaken) {
  EXPECT_EQ(ErrorFileMessage(R"({"message": {"message": "ValueError: shard 1 is corrupt",
      "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  ...\n",
                    "timestamp": "1795816175"}}})"),
            "ValueError: shard 1 is corrupt");
  // torchrun's copy also carries the worker's exit code.
  EXPECT_EQ(ErrorFileMessage(R"({"message": {"message": "RuntimeError: CUDA out of memory",
      "extraInfo": {"timestamp": "1"}, "errorCode": 1}})"),
            "RuntimeError: CUDA out of memory");
  EXPECT_EQ(ErrorFileMessage(R"({"message": "Signal 6 (SIGABRT) received", "timestamp": 7})"),
            "Signal 6 (SIGABRT) received");
}

TEST(ErrorFileMessageTest, AMessageIsCutToItsFirstLineAndMadePrintable) {
  EXPECT_EQ(ErrorFileMessage(R"({"message": {"message": "KeyError: \u001b[31mw\u001b[0m\nmore"}})"),
            "KeyError: w");
  std::string long_message =
      R"({"message": {"message": "OSError: )" + std::string(1000, 'x') + "\"}}";
  EXPECT_EQ(ErrorFileMessage(long_message).size(), kMaxFailureExcerptBytes);
}

TEST(ErrorFileMessageTest, AnythingElseGivesNoCause) {
  for (const char* text :
       {"", "not json", "{\"message\": ", "[1, 2]", "{}", "{\"message\": 3}",
        "{\"message\": {\"extraInfo\": {}}}", "{\"message\": {\"message\": null}}",
        "{\"message\": [\"ValueError: x\"]}", "{\"msg\": \"ValueError: x\"}"}) {
    EXPECT_EQ(ErrorFileMessage(text), "") << text;
  }
  // Nesting deeper than any error file is parsed without harm.
  EXPECT_EQ(ErrorFileMessage(std::string(100000, '[') + std::string(100000, ']')), "");
}

}  // namespace
}  // namespace cohort::agent
