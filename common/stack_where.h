// StackWhere: one line saying where a replica is, read from an agent's stack dump
// (agent/stack_dump.h: "---- pid N: CMDLINE" per process, then its "-- Python stacks
// (faulthandler):" and its "-- native stacks (eu-stack|gdb):"). A dump of a stuck training
// script runs to hundreds of lines, most of them the interpreter's and the libraries' frames; the
// hang event and `cohort stacks` lead with this line instead:
//
//   in _engine_run_backward (torch/autograd/graph.py:825), from train (ddp_digits.py:88)
//
// The rules:
//  - Python first. A process's main thread is the one whose outermost frame is `<module>` (a
//    thread started by `threading` ends in threading.py's _bootstrap), else its first thread. Its
//    innermost frame is named, and when that is not the user's code, the innermost frame that is.
//    User code is any file that is not a library's: not under a *-packages directory or the
//    interpreter's lib/pythonX.Y, not "<frozen ...>", not an entry script without ".py" (torchrun).
//  - The process: the first one (the dump lists the replica's command, then its descendants by
//    pid) whose main thread has a user frame, so torchrun's own process gives way to its workers;
//    else the first with Python stacks. A process other than the replica's command is named
//    ("pid 812: in ...").
//  - Without Python stacks, the native ones: the first thread's three innermost named frames
//    ("in __futex_abstimed_wait_common < pthread_cond_wait < c10d::Reducer::finalize_backward",
//    arguments and glibc's @VERSION suffixes dropped).
//  - Paths are shortened: a library's file from its package on (torch/autograd/graph.py, or
//    threading.py for the standard library), a user's file to its name.
// A dump with neither (a process that exited, tools missing) gives "".
//
// Thread safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cohort {

// The one-line summary of `dump` ("" when it has no stack this can read), at most
// kStackWhereMaxBytes.
inline constexpr size_t kStackWhereMaxBytes = 600;
std::string StackWhere(std::string_view dump);

}  // namespace cohort
