// ExecSessions: the agent's interactive `cohort exec -i` / `-it` sessions (wire::ExecSessionIo):
// a command run beside a replica attempt as `cohort exec` runs one (agent/exec_in_replica.h: the
// attempt's environment, working directory, account and cgroup, or the container runtime's exec),
// whose stdin and output stream through its client's steps, as `kubectl exec -it` and `docker
// exec -it` do.
//
// A session's command reads a pipe, or, with a terminal, a pty of its own (its controlling
// terminal, its window set from the client's): what it writes (stdout and stderr together, on one
// pipe or the pty) is kept, up to kExecSessionBufferBytes, until a step takes it; past that the
// session stops reading, so a command writing faster than its client reads blocks, as on a slow
// terminal. Each session has a pump thread of its own (the command is a hidden child,
// agent/captured_command.h, so the agent's reaper never takes its status); the loop only queues
// input and takes output.
//
// Steps: Step() hands a step's input on and holds its answer; TakeAnswers() gives the answers due
// (the session has output or has ended, or the step's hold passed), each with at most
// kMaxExecStepBytes of output. A step that comes while another of its session is held answers the
// older one at once, empty. The answer that says the command ended (running false) is the last:
// the session is then forgotten. A session no step came for in kExecSessionIdleMs is killed
// (EndIdle), as are an attempt's sessions when it ends (EndAttempt), and every one when this
// is destroyed (which waits for their threads).
//
// Thread safety: every method runs on the agent loop; each session's pump shares only its
// mutex-guarded state with it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/exec_in_replica.h"
#include "common/exec_limits.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"

namespace cohort::agent {

// What one step asks besides its input.
struct ExecStep {
  std::string input;
  bool input_closed = false;
  bool kill = false;
  int rows = 0;  // 0: the window as it was
  int cols = 0;
};

class ExecSessions {
 public:
  explicit ExecSessions(size_t max_sessions = kMaxExecSessions);
  // Kills every session's command and waits for their pumps.
  ~ExecSessions();
  ExecSessions(const ExecSessions&) = delete;
  ExecSessions& operator=(const ExecSessions&) = delete;

  // Starts `argv` at `target` for the attempt `attempt_key` (Attempt's key), on a terminal of
  // `rows` x `cols` (0: 24 x 80) with `tty`. Returns the session's id (random, never 0). A
  // command the replica's PATH lacks makes a session that has ended already, saying so (127).
  // RESOURCE_EXHAUSTED when max_sessions run; INTERNAL when no pty or pipe could be had.
  StatusOr<uint64_t> Open(const std::string& attempt_key, const ExecTarget& target,
                          pid_t replica_pid, const std::vector<std::string>& argv, bool tty,
                          int rows, int cols, int64_t now_ms);
  // Hands `step` to session `id` of `attempt_key` and holds `answer` (its header: exec id, node,
  // job, replica, attempt) until TakeAnswers gives it. FAILED_PRECONDITION when that attempt has
  // no such session (it ended, or was killed).
  Status Step(uint64_t id, const std::string& attempt_key, const ExecStep& step,
              wire::ExecOutputT answer, int64_t now_ms);
  // The answers due at `now_ms` (see the header comment).
  std::vector<wire::ExecOutputT> TakeAnswers(int64_t now_ms);
  // Kills the sessions no step came for in kExecSessionIdleMs; returns how many.
  size_t EndIdle(int64_t now_ms);
  // Kills the attempt's sessions (its answers then say how they ended).
  void EndAttempt(const std::string& attempt_key);

  size_t size() const { return sessions_.size(); }

 private:
  struct Session;
  size_t max_sessions_;
  std::map<uint64_t, std::unique_ptr<Session>> sessions_;
  std::vector<wire::ExecOutputT> superseded_;  // held answers a newer step replaced: empty
};

}  // namespace cohort::agent
