// Short helper commands the agent runs to completion with their output captured: the container
// runtime's state/kill/delete and umoci (oci_launcher), the stack dumpers eu-stack and gdb
// (stack_dump). Replicas never run through this (process_launcher starts them).
//
// Contract: stdin is /dev/null, stdout and stderr go to one pipe, read until the command closes it
// or exits (a process forked meanwhile by another thread may hold the pipe open), or the deadline
// passes (then it is killed with SIGKILL); the child is reaped before returning.
// Blocks the calling thread for as long as the command runs. Thread-safe; a command run off the
// agent loop's thread sets CaptureOptions::hidden_from_reaper (the loop reaps every child).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace cohort::agent {

struct CapturedCommand {
  int exit_code = -1;      // 128 + the signal when a signal ended it; -1 when it did not start
  std::string output;      // stdout and stderr as they came; "ARGV0: why" when it did not start
  bool timed_out = false;  // killed at the deadline
  bool cancelled = false;  // killed because CaptureOptions::cancel was set
};

struct CaptureOptions {
  std::chrono::milliseconds timeout{0};  // none when zero
  // Output past this many bytes is read and dropped (the output then holds at least that many).
  size_t max_output = std::string::npos;
  // The command runs under a "clone" child of the agent: one that sends no SIGCHLD at its exit
  // and that waitpid() sees only with __WCLONE, which waits for the command (its own child, in
  // a process group of its own) and exits with its status. The agent loop, which reaps every
  // child with waitpid(-1) (a subreaper), then cannot take that status from the thread running
  // it. argv[0] must be a path then (no PATH search).
  bool hidden_from_reaper = false;
  // Once this is set (by any thread) the command is killed with SIGKILL; noticed within 100 ms.
  const std::atomic<bool>* cancel = nullptr;

  // With hidden_from_reaper only: how the command runs, where not as the agent runs. Its whole
  // environment ("NAME=value"; null: the agent's), its working directory, a cgroup it joins (the
  // cgroup's directory; writing its cgroup.procs), and the account it runs as (supplementary
  // groups, gid, uid). All are set by the child before it runs the command, in that order; one
  // that cannot be set makes the command exit 126 saying which.
  const std::vector<std::string>* env = nullptr;
  std::string working_dir;
  std::string cgroup;
  struct Account {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
  };
  std::optional<Account> account;
};

// The child RunCaptured runs a hidden_from_reaper command under (the options' env, working_dir,
// cgroup and account apply; timeout, max_output and cancel are the caller's to enforce), with its
// stdin from `in_fd` and its stdout and stderr to `out_fd`. With `terminal`, `in_fd` is a
// terminal (a pty's slave) that becomes the command's controlling terminal, in a session of its
// own. On success returns 0 and sets `pid`: the child's process group is its pid, and
// waitpid(pid, ..., __WCLONE) takes the command's status (128 + a signal). Else an errno.
int SpawnHidden(const std::vector<std::string>& argv, const CaptureOptions& options, int in_fd,
                int out_fd, bool terminal, pid_t* pid);

// Runs argv (argv[0] searched on PATH when it has no slash, unless hidden_from_reaper).
CapturedCommand RunCaptured(const std::vector<std::string>& argv, const CaptureOptions& options);
// The same with a deadline (none when `timeout` is zero) and an output cap.
CapturedCommand RunCaptured(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                            size_t max_output = std::string::npos);

}  // namespace cohort::agent
