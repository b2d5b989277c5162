// The client side of `cohort exec -i` / `-it`: an interactive session with a command beside a
// running replica (wire::ExecSessionIo), as `kubectl exec -it` and `docker exec -it` have.
//
// The session is a loop of steps over the client's one socket: each carries what stdin has
// (read without waiting, at most 64 KiB, and only while the command has read what came before)
// and is answered with the command's output since the last, which is written to stdout; an agent
// holds a step with nothing to answer for about 50 ms, so keys typed wait at most that long.
// With `tty` the command has a terminal of its own, sized as this one's stdout (and resized with
// it, SIGWINCH); when stdin is a terminal it is put in raw mode for the session (and restored,
// also on SIGTERM/SIGHUP), so ^C, ^D and ^Z go to the command. Without a terminal (-i alone, or
// a local stdin that is no terminal) the end of stdin closes the command's (on a terminal it is
// ^D), and SIGINT, SIGTERM or SIGHUP kill the command, then end this.
//
// Thread safety: RunExecSession uses the process's stdin, stdout and signal handlers; one session
// per process at a time.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "common/client.h"

namespace cohort::cli {

// Runs the session to its end; returns the command's exit status (128 + a signal), or the CLI's
// exit code for cohort's own error, printed on `err` ("cohort: ...").
int RunExecSession(CoordinatorClient& client, const std::string& job, const std::string& replica,
                   const std::vector<std::string>& argv, bool tty, std::ostream& err);

}  // namespace cohort::cli
