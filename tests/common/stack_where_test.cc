#include "common/stack_where.h"

#include <gtest/gtest.h>

#include <string>

namespace cohort {
namespace {

// Sections as the agent writes them (agent/stack_dump.cc); the frames are taken from real dumps
// of a stock gloo DDP script (torch 2.1, Debian's python3.11) stuck in backward and its peer.
const std::string kHeader = "==== stacks taken 2026-12-01T18:20:00Z: hang: worker-1 ...\n";

std::string Process(const std::string& pid, const std::string& cmdline, const std::string& python,
                    const std::string& native) {
  std::string out = "\n---- pid " + pid + ": " + cmdline + "\n";
  if (!python.empty()) out += "-- Python stacks (faulthandler):\n" + python;
  return out + "-- native stacks (eu-stack):\n" + native;
}

const std::string kBackwardPython =
    "Current thread 0x00007f42b884a040 (most recent call first):\n"
    "  File \"/usr/lib/python3/dist-packages/torch/autograd/__init__.py\", line 197 in backward\n"
    "  File \"/usr/lib/python3/dist-packages/torch/_tensor.py\", line 488 in backward\n"
    "  File \"/home/ana/ddp/train.py\", line 11 in train\n"
    "  File \"/home/ana/ddp/train.py\", line 12 in <module>\n";

const std::string kBackwardNative =
    "PID 5844 - process\n"
    "TID 5851:\n"
    "#0  0x00007f42b88d0f16 __futex_abstimed_wait_common\n"
    "TID 5844:\n"
    "#0  0x00007f42b88d0f16 __futex_abstimed_wait_common\n"
    "#1  0x00007f42b88d35d8 pthread_cond_wait@@GLIBC_2.3.2\n"
    "#2  0x00007f42b44a5023 c10d::Reducer::finalize_backward()\n"
    "#3  0x00007f42b44a5891\n"
    "#4  0x00007f42b3b38bca torch::autograd::Engine::thread_main(std::shared_ptr<"
    "torch::autograd::GraphTask> const&)\n";

TEST(StackWhereTest, NamesTheInnermostFrameAndTheUsersCodeThatCalledIt) {
  const std::string dump =
      kHeader + Process("5844", "python3 train.py", kBackwardPython, kBackwardNative);
  EXPECT_EQ(StackWhere(dump),
            "in backward (torch/autograd/__init__.py:197), from train (train.py:11)");
}

TEST(StackWhereTest, AUsersFrameInnermostIsNamedAlone) {
  const std::string python =
      "Current thread 0x00007f7d6434c040 (most recent call first):\n"
      "  File \"/tmp/ddp_hang.py\", line 9 in train\n"
      "  File \"/tmp/ddp_hang.py\", line 12 in <module>\n";
  EXPECT_EQ(StackWhere(kHeader + Process("7", "python3 /tmp/ddp_hang.py", python, "")),
            "in train (ddp_hang.py:9)");
}

TEST(StackWhereTest, TheMainThreadIsTheOneThatRunsTheModule) {
  // A DataLoader-style thread first, in the user's code too; the main thread waits in the
  // standard library.
  const std::string python =
      "Thread 0x00007f5fd139c6c0 (most recent call first):\n"
      "  File \"/srv/job/loader.py\", line 5 in worker\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n"
      "\n"
      "Current thread 0x00007f5fd1657040 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n"
      "  File \"/srv/job/main.py\", line 8 in step\n"
      "  File \"/srv/job/main.py\", line 11 in <module>\n";
  EXPECT_EQ(StackWhere(kHeader + Process("9", "python3 main.py", python, "")),
            "in wait (threading.py:320), from step (main.py:8)");
}

TEST(StackWhereTest, TorchrunsOwnProcessGivesWayToTheWorkerItStarted) {
  const std::string torchrun =
      "Current thread 0x00007f0000000001 (most recent call first):\n"
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/agent/server/api.py\", "
      "line 835 in _invoke_run\n"
      "  File \"/usr/bin/torchrun\", line 33 in <module>\n";
  const std::string dump = kHeader +
                           Process("100", "/usr/bin/python3 /usr/bin/torchrun ...", torchrun, "") +
                           Process("104", "/usr/bin/python3 -u train.py", kBackwardPython, "");
  EXPECT_EQ(StackWhere(dump),
            "pid 104: in backward (torch/autograd/__init__.py:197), from train (train.py:11)");
  // Alone, torchrun's own stack is all there is to say.
  EXPECT_EQ(StackWhere(kHeader + Process("100", "torchrun", torchrun, "")),
            "in _invoke_run (torch/distributed/elastic/agent/server/api.py:835)");
}

TEST(StackWhereTest, WithoutPythonStacksTheMainThreadsNativeFramesAreNamed) {
  EXPECT_EQ(StackWhere(kHeader + Process("5844", "cohort-reducer", "", kBackwardNative)),
            "in __futex_abstimed_wait_common < pthread_cond_wait < "
            "c10d::Reducer::finalize_backward");
  // gdb's form: the threads highest first, Thread 1 the main one.
  const std::string gdb =
      "Thread 2 (Thread 0x7f0 (LWP 11) \"worker\"):\n"
      "#0  0x00007f01 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6\n"
      "Thread 1 (Thread 0x7f1 (LWP 10) \"digits-trainer\"):\n"
      "#0  __futex_abstimed_wait_common64 (private=0, cancel=true) at ./nptl/futex-internal.c:57\n"
      "#1  0x00007f02 in ?? ()\n"
      "#2  0x00007f03 in cohort::collective::Ring::AllReduce (this=0x1) at ring.cc:40\n"
      "#3  0x00007f04 in main () at main.cc:9\n"
      "#4  0x00007f05 in __libc_start_call_main () from /lib/x86_64-linux-gnu/libc.so.6\n";
  std::string dump = kHeader + "\n---- pid 10: digits-trainer\n-- native stacks (gdb):\n" + gdb;
  EXPECT_EQ(StackWhere(dump),
            "in __futex_abstimed_wait_common64 < cohort::collective::Ring::AllReduce < main");
}

TEST(StackWhereTest, ADumpWithNothingReadableSaysNothing) {
  EXPECT_EQ(StackWhere(""), "");
  EXPECT_EQ(StackWhere(kHeader), "");
  EXPECT_EQ(StackWhere(kHeader + Process("5", "sleep 100", "(nothing written within 2000 ms)\n",
                                         "eu-stack: dwfl_linux_proc_attach pid 5: Operation not "
                                         "permitted\n")),
            "");
  // Torn and hostile lines are skipped, never read past their end.
  EXPECT_EQ(StackWhere("---- pid \n-- Python stacks\n  File \"\n  File \"x\", line \nThread 0x\n"
                       "  File \"a.py\", line 3 in\n#\n#0  0x1\n"),
            "");
}

TEST(StackWhereTest, LongNamesAreClipped) {
  const std::string python = "Current thread 0x1 (most recent call first):\n  File \"/w/" +
                             std::string(500, 'a') + ".py\", line 1 in " + std::string(500, 'f') +
                             "\n";
  const std::string where = StackWhere(kHeader + Process("1", "python3", python, ""));
  EXPECT_LT(where.size(), 300u) << where;
  EXPECT_EQ(where.substr(0, 8), "in fffff");
}

}  // namespace
}  // namespace cohort
