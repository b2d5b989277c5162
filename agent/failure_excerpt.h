// FailureExcerpt: the line of a failed replica's log that most likely says why it failed, so that
// `cohort status` shows the cause beside the exit code ("exited with code 1 (log: ValueError:
// learning rate must be positive)") without a trip to `cohort logs`. The agent takes it from the
// end of the attempt's log when the replica's main process fails (agent/replica_manager.cc).
//
// Rules, over the log's last bytes, first match wins:
//  0. torchrun run inside the replica: the root cause its ChildFailedError report names (the
//     "Root Cause (first observed failure)" block), as "torchrun: rank 1 (local_rank: 1) failed
//     first: Signal 9 (SIGKILL) received by PID 123", or with ", exit code 1 (pid: 123)" where the
//     report gives no cause (the worker's own exception is then in the error file, below).
//  1. Python: the exception line that ends the last traceback ("Traceback (most recent call
//     last):", its indented frames, then "ValueError: ..."; a chained exception's last traceback
//     is the one that ended the process). A message of several lines gives its first.
//  2. "Fatal Python error: ..." (faulthandler's report of a crash).
//  3. C++: std::terminate's "terminate called after throwing an instance of 'T'" with its
//     "  what():  msg" line, as "T: msg".
//  4. Only when `any_last_line` (LastLineTellsTheCause: a non-zero exit, or SIGABRT; another
//     signal's name is the better cause): the last non-blank line, as a script that calls
//     sys.exit("why") or prints its error and exits 1 leaves it, and as abort() leaves it (an
//     assertion's or glibc's reason, or the last word of a process aborted in its teardown).
//     std::terminate's "terminate called without an active exception" (a thread left joinable as
//     the process ends) is passed over for the line before it, where there is one.
// Lines the agent appended itself ("cohort-agent: ...") are not the replica's and are skipped. A
// carriage return keeps only what follows it (progress bars). The result is well-formed UTF-8
// without terminal escape sequences (colours) or other control characters, cut to
// kMaxFailureExcerptBytes; empty when no rule matched.
//
// ErrorFileMessage: the cause torch's error file gives. torch.distributed.elastic's `@record`
// (torch.distributed.elastic.multiprocessing.errors) writes the exception that ends a process to
// the file TORCHELASTIC_ERROR_FILE names, as JSON: {"message": {"message": "ValueError: msg",
// "extraInfo": {"py_callstack": ..., "timestamp": "..."}}}; an older form has "message" a string.
// torchrun, itself under `@record`, copies there the file of the first of its workers that failed:
// a replica that runs torchrun with several workers reports that worker's exception, not
// torchrun's ChildFailedError. The agent points the variable at <attempt
// dir>/torchelastic-error.json (agent/replica_env.h) and prefers this cause to the log's.
//
// Thread safety: pure functions, except that ReadLogTail reads a file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cohort::agent {

inline constexpr size_t kMaxFailureExcerptBytes = 240;
// How much of the log's end the agent reads for it.
inline constexpr size_t kFailureLogTailBytes = 16 * 1024;

// `tail`: the log's last bytes; `whole`: they are the whole log (else the first line may be cut
// and is ignored).
std::string FailureExcerpt(std::string_view tail, bool whole, bool any_last_line);

// Whether rule 4 holds for a replica ended by `signal` (0: it exited with a code). SIGABRT comes
// after its reason is printed (a failed assertion, glibc's "double free or corruption", torch's
// gloo threads aborting a script that printed why and called sys.exit(1)); after SIGSEGV and the
// like the last line is ordinary output, and SIGKILL or SIGTERM came from outside.
bool LastLineTellsTheCause(int signal);

// The signal that killed a worker of torchrun's, by its report (rule 0): the root cause's
// "exitcode : -9" (torch's form of "killed by signal 9"), else the first such among the report's
// other failures; 0 where the log holds no report or every worker exited with a code. The other
// failures count because torchrun polls its workers every few seconds and names the lowest rank
// among those it found failed in one poll: a rank killed by a signal and its local peer that
// exited 1 on losing it come out with the peer as "root cause". Such a replica exits 1 (torchrun's
// own code) although one of its processes was killed (by the kernel's OOM killer, an admin): the
// coordinator judges that end by this signal (coordinator/job_controller.h, "Failure
// attribution").
int TorchrunKillSignal(std::string_view tail, bool whole);

// The largest error file the agent reads (a callstack of a few hundred frames fits).
inline constexpr size_t kMaxErrorFileBytes = 256 * 1024;
// The message's first line, finished as an excerpt is (printable UTF-8, cut); empty when `json` is
// not such a file or holds no message.
std::string ErrorFileMessage(std::string_view json);

// The last `max_bytes` of the file at `path` and whether that is all of it; empty when it cannot
// be read or is no regular file of its own (a symbolic link, a FIFO: common/file_util.h's
// OpenRegularFile, as the error file is the replica's to make).
struct LogTail {
  std::string text;
  bool whole = true;
};
LogTail ReadLogTail(const std::string& path, size_t max_bytes);

}  // namespace cohort::agent
