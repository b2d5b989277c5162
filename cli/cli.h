// The `cohort` launcher CLI (DESIGN.md "Command-line contract"), as a function so tests can run it
// in-process:
//
//   cohort [--coordinator tcp://HOST:7400] [--insecure] [--timeout 5s] VERB ...
//     submit FILE [--name N] [--after JOB[:C],...] [--hold] [--wait [--replica R|--all]]
//                                prints the job name; --after: scheduling.after; --hold:
//                                scheduling.hold; --wait shows it live. FILE: a Cohort job
//                                file or a Vertex AI CustomJob file (common/vertex_job.h)
//     status JOB [--json|--spec] state, message, times, restarts, replicas, events; --spec:
//                                the job file the coordinator stored
//     list [--state S] [--since T] [--limit N] [--json]   every job, or a history query
//     logs JOB [--replica ROLE-INDEX|--all] [--attempt N] [--tail N] [--follow|-f]
//     watch JOB [--replica ROLE-INDEX|--all]   the job live until it ends
//     cancel JOB|STUDY [--wait]  a job, else the study of that name (and its running trials)
//     suspend JOB [--wait]       stops its replicas; SUSPENDED until resumed
//     resume JOB                 queues a suspended job again
//     delete JOB                 a finished job and its records and logs
//     nodes [--json]
//     cordon NODE | uncordon NODE | drain NODE [--now] | label NODE [K=V|K-]... [--reset] |
//     forget NODE   (admins)
//     tune FILE [--name N] [--wait]  hyperparameter study; --wait prints the trials and the best
//     trials STUDY [--json|--spec] the trials and the best; --spec: the study file stored
//     studies [--json]
//     checkpoint DIR|--job JOB [--json]   checkpoints, verified; which one a restart restores
//     keygen [--dir DIR] [--name NAME]   CURVE key pair for this client
//
// The coordinator endpoint comes from --coordinator, else COHORT_COORDINATOR, else the client
// config file (common/client_config.h: ~/.config/cohort/client.conf or COHORT_CLIENT_CONFIG),
// else tcp://127.0.0.1:7400; --insecure, COHORT_INSECURE=1 or `insecure = true` in the file
// selects plaintext ZeroMQ. A client config file that cannot be read or is invalid: exit 2.
//
// Exit codes: 0 success; 1 the job or study failed or was cancelled (submit/tune --wait), no valid
// checkpoint (checkpoint), or another error;
// 2 bad usage, an invalid job or study spec (the message names the field), an unknown job;
// 3 the coordinator did not answer within --timeout (the message names the address);
// 4 the coordinator refused this client's key (not listed in its clients/ directory, or no
// longer): the message names the key;
// 5 permission denied: the job or study is another user's and this user is not an admin (the
// message names the owner; coordinator/permissions.h).
// `status`, `list`, `logs` and `cancel` exit 0 whenever the coordinator answered, whatever the
// job's state; scripts read the state from --json. Verbs that wait (submit/tune --wait, logs
// --follow) ride out a coordinator restart of up to max(6 x --timeout, 30 s).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace cohort::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitJobFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;
inline constexpr int kExitRefused = 4;
inline constexpr int kExitDenied = 5;

// Runs one command line (args excludes the program name). Normal output goes to `out`, errors
// and progress to `err`.
int RunCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace cohort::cli
