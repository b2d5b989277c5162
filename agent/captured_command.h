// Short helper commands the agent runs to completion with their output captured: the container
// runtime's state/kill/delete and umoci (oci_launcher), the stack dumpers eu-stack and gdb
// (stack_dump). Replicas never run through this (process_launcher starts them).
//
// Contract: stdin is /dev/null, stdout and stderr go to one pipe, read until the command closes it
// or the deadline passes (then it is killed with SIGKILL); the child is reaped before returning.
// Blocks the calling thread for as long as the command runs.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace cohort::agent {

struct CapturedCommand {
  int exit_code = -1;      // 128 + the signal when a signal ended it; -1 when it did not start
  std::string output;      // stdout and stderr as they came; "ARGV0: why" when it did not start
  bool timed_out = false;  // killed at the deadline
};

// Runs argv (argv[0] searched on PATH when it has no slash). No deadline when `timeout` is zero.
// Output past `max_output` bytes is read and dropped (the output then holds at least that many).
CapturedCommand RunCaptured(const std::vector<std::string>& argv,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(0),
                            size_t max_output = std::string::npos);

}  // namespace cohort::agent
