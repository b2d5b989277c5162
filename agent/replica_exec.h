// ReplicaExec: how a replica's command is executed after fork, shared by ProcessLauncher's child
// (agent/process_launcher.h) and cohort-replica-init's child (agent/replica_init.cc): the command
// name looked up like execvp does (a name without '/' on the PATH the replica's environment
// gives, else /usr/local/bin:/usr/bin:/bin), and a failure reported to the agent as a ChildError
// through a close-on-exec pipe: EOF on that pipe means the command was executed.
//
// ExecCommand() calls only async-signal-safe functions (execve, write, _exit): it may run in the
// child of a multithreaded process. ExecCandidates() allocates: call it before fork.
#pragma once

#include <string>
#include <vector>

namespace cohort::agent {

// What a child reports through the pipe when it cannot run the command.
struct ChildError {
  enum Stage : int {
    kChdir = 0,
    kExec = 1,
    kSetgroups = 2,
    kSetgid = 3,
    kSetuid = 4,
    kExecInit = 5,  // cohort-replica-init itself could not be executed
  };
  int stage;
  int err;  // errno
};

// Writes all of `data` to `fd`, retrying on EINTR (async-signal-safe).
void WriteAll(int fd, const void* data, size_t size);

// The paths execve is tried on for `name`: `name` itself when it holds a '/', else each directory
// of `path` (a PATH value) joined with it, in order. An empty entry (a leading, trailing or
// doubled ':') is ".", the current directory, as execvp reads it (glibc; POSIX leaves it to the
// implementation). FindBuiltinBinary (agent/replica_env.h) reads the agent's PATH with it too.
std::vector<std::string> ExecCandidates(const std::string& name, const std::string& path);

// execve()s each candidate in turn, as execvp does (on to the next after ENOENT, ENOTDIR or
// EACCES). When none runs it writes ChildError{kExec, errno} to `report_fd` and exits 126 (found
// but not executable) or 127 (not found). Never returns.
[[noreturn]] void ExecCommand(const std::vector<std::string>& candidates, char* const argv[],
                              char* const envp[], int report_fd);

}  // namespace cohort::agent
