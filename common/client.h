// CoordinatorClient is the C++ client library for job launchers: the `cohort` CLI, tools and
// tests use it to talk to cohort-coordinator's client endpoint (default tcp://HOST:7400) over one
// ZeroMQ DEALER socket. Every call sends one request (common/schema/cohort.fbs, "client ->
// coordinator") and waits for its reply; replies come back as the FlatBuffers object-API types
// (wire::JobInfoT, wire::NodeListT, ...) so the Python client can mirror this interface one to one.
//
// Errors: an ErrorReply from the coordinator becomes its Status (INVALID_ARGUMENT naming the spec
// field, NOT_FOUND, ALREADY_EXISTS, ...). No reply within the call timeout is kUnavailable with a
// message that names the endpoint; the CLI maps that to exit code 3. A late reply to a timed-out
// call is discarded by request id, so the client stays usable afterwards.
//
// Thread safety: not thread-safe (one ZeroMQ socket); use one client per thread.
// Lifetime: the client owns its ZeroMQ context and socket; moving it is fine.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/exec_limits.h"
#include "common/messaging.h"
#include "common/schema/cohort_generated.h"
#include "common/status.h"
#include "common/wire_json.h"

namespace cohort {

// The NOT_FOUND of a name that is neither a job's nor a job array's (the verbs that take either:
// status, watch, suspend, resume, update, delete).
inline Status NoJobOrArray(const std::string& name) {
  return NotFound("no job or array named '" + name + "'");
}

struct ClientOptions {
  std::string endpoint = "tcp://127.0.0.1:7400";
  bool insecure = false;                    // plaintext ZeroMQ; CURVE otherwise
  std::chrono::milliseconds timeout{5000};  // per call
  // CURVE (when not insecure): this client's key pair (a NAME.key file written by
  // `cohort keygen`, whose NAME.pub the admin puts in the coordinator's clients/ key directory)
  // and the coordinator's public key (its coordinator.pub).
  std::string key_file;
  std::string server_key_file;
  // The user this client says it is on a plaintext (insecure) endpoint (Envelope.user): there the
  // coordinator records it as the owner of what this client submits and checks it against the
  // owner of what it cancels, unverified (protection against mistakes, not against attackers).
  // Over CURVE it is not sent: the user is the name the key is listed under. Empty: none.
  std::string user;
};

// This process's account name (its effective uid's passwd entry, else $USER; "" when neither).
std::string LocalUserName();

// Defaults from the environment over built-in ones; explicit flags override what this returns:
// user: LocalUserName(); COHORT_COORDINATOR (endpoint), COHORT_INSECURE=1, COHORT_KEY (default
// $HOME/.config/cohort/client.key), COHORT_SERVER_KEY (default
// $HOME/.config/cohort/coordinator.pub).
ClientOptions ClientOptionsFromEnvironment();
// $HOME/.config/cohort (or ./.cohort without HOME): where `cohort keygen` writes by default.
std::string DefaultClientKeyDir();

// True for SUCCEEDED, FAILED and CANCELLED.
bool IsTerminal(wire::JobState state);

// True for a study state of SUCCEEDED, FAILED or CANCELLED.
bool IsStudyTerminal(const std::string& state);

class CoordinatorClient {
 public:
  // Creates the socket and starts connecting (ZeroMQ connects in the background, so this
  // succeeds even when nothing listens yet; the first call then times out with kUnavailable).
  static StatusOr<CoordinatorClient> Connect(const ClientOptions& options);
  static StatusOr<CoordinatorClient> Connect(const std::string& endpoint, bool insecure);

  CoordinatorClient(CoordinatorClient&&) = default;
  CoordinatorClient& operator=(CoordinatorClient&&) = default;
  ~CoordinatorClient();

  // Sends a job file's YAML text; returns the accepted job's name. The coordinator validates the
  // spec again (callers should validate first with ParseJobSpec for a local, faster error).
  // `reply` (optional) receives the whole answer: its warnings (e.g. an output dir off the shared
  // storage: coordinator/storage_probe.h), what the job's queue filled in (defaults), and for a
  // job array (scheduling.array), whose name is returned, its tasks' names by index.
  StatusOr<std::string> Submit(const std::string& spec_yaml,
                               wire::SubmitJobReplyT* reply = nullptr);
  // A dry run of Submit (wire::SubmitJob.dry_run): the coordinator checks the job file as a
  // submit would and stores nothing; the reply's dry_run says what the next scheduling round
  // would do with the job, its warnings and defaults what a submit would say.
  StatusOr<wire::SubmitJobReplyT> DryRun(const std::string& spec_yaml);
  StatusOr<wire::JobInfoT> GetJob(const std::string& name);
  // The job file the coordinator stored for the job (wire::JobInfo.spec_yaml); where no job has
  // the name, the file of the job array of that name (wire::GetArray.with_spec: its lowest task's
  // as the array, in canonical YAML: it submits the array again as it is). NOT_FOUND naming both
  // otherwise.
  StatusOr<std::string> GetJobSpec(const std::string& name);
  StatusOr<std::vector<wire::JobInfoT>> ListJobs();
  // A history query (`cohort list --state S --since T --limit N`; wire::ListJobs says what each
  // field filters), answered from the coordinator's state store: oldest first.
  StatusOr<std::vector<wire::JobInfoT>> ListJobs(const wire::ListJobsT& query);
  // Asks the coordinator to cancel; returns the job as it is right after (usually CANCELLING).
  StatusOr<wire::JobInfoT> Cancel(const std::string& name);
  // Cancels every task of a job array that has not ended (wire::CancelArray); returns its tasks
  // right after, by index.
  StatusOr<std::vector<wire::JobInfoT>> CancelArray(const std::string& name);
  // Every job array, newest first, as its tasks add up (wire::ArrayInfo).
  StatusOr<std::vector<wire::ArrayInfoT>> ListArrays();
  // One job array (wire::GetArray): its summary and its tasks by index, and with `with_spec` its
  // job file; NOT_FOUND when no array has that name.
  struct ArrayStatus {
    wire::ArrayInfoT summary;
    std::vector<wire::JobInfoT> tasks;
    std::string spec_yaml;
  };
  StatusOr<ArrayStatus> GetArray(const std::string& name, bool with_spec = false);
  // Suspends (`resume` false) or resumes every task of a job array that has not ended
  // (wire::SuspendArray); returns its tasks right after, by index.
  StatusOr<std::vector<wire::JobInfoT>> SuspendArray(const std::string& name, bool resume);
  // Update for every task of a job array that has not ended (wire::UpdateArray).
  StatusOr<std::vector<wire::JobInfoT>> UpdateArray(const std::string& name,
                                                    const std::string& priority,
                                                    const std::string& queue);
  // Suspends the job (`resume` false) or queues a suspended one again (wire::SuspendJob);
  // returns the job as it is right after.
  StatusOr<wire::JobInfoT> Suspend(const std::string& name, bool resume);
  // Moves the job to the priority class and queue given (wire::UpdateJob; "": left as it is);
  // returns the job as it is right after.
  StatusOr<wire::JobInfoT> Update(const std::string& name, const std::string& priority,
                                  const std::string& queue);
  // The registered nodes; with a `selector` (ParseNodeSelector's), those whose labels match it
  // (matched here when the coordinator is older than ListNodes.selector and lists them all);
  // node `events_of` with its history (NodeInfo.events).
  StatusOr<std::vector<wire::NodeInfoT>> ListNodes(const std::string& selector = "",
                                                   const std::string& events_of = "");
  // Day-2 operations (admins): `action` is cordon, uncordon, drain, drain-now, forget, or label
  // and label-reset with `labels` ("KEY=VALUE", "KEY-"; wire::NodeAdmin says what each does),
  // cordon, uncordon, drain and drain-now of the node's `gpus` alone; cordon, drain and
  // drain-now keep `reason` with the cordon; the reply names the node after it and what was done.
  StatusOr<wire::NodeAdminReplyT> AdminNode(const std::string& node_id, const std::string& action,
                                            const std::vector<std::string>& labels = {},
                                            const std::vector<int>& gpus = {},
                                            const std::string& reason = "");
  // Runs `argv` beside a running replica of `job` (`replica` "": chief-0, else its first), as
  // the replica runs (wire::ExecInReplica says how), killed after `timeout` (zero: 60 s); returns
  // how it ended and its output once it has. The call waits for the command: its timeout plus
  // kExecAnswerSlackMs plus the options' timeout.
  StatusOr<wire::ExecOutputT> Exec(const std::string& job, const std::string& replica,
                                   const std::vector<std::string>& argv,
                                   std::chrono::milliseconds timeout);
  // One step of an interactive session (wire::ExecSessionIo says what it carries and when it is
  // answered): the first (session 0) starts `step.argv`; the answer names the session, carries
  // the output since the last step and, once running is false, how the command ended.
  StatusOr<wire::ExecOutputT> ExecStep(wire::ExecSessionIoT step);
  // Has the stacks of the job's running replicas (`replica` alone when not "") taken now
  // (wire::DumpStacks); returns the job as it was asked. The dumps arrive later, in ReadLogs
  // with `dump`.
  StatusOr<wire::JobInfoT> DumpStacks(const std::string& job, const std::string& replica);
  // Deletes a finished job and its records; kFailedPrecondition for a job not finished.
  Status DeleteJob(const std::string& name);
  // Cancels a study (its running trials are cancelled); returns the study after.
  StatusOr<wire::StudyInfoT> CancelStudy(const std::string& name);
  // Every queue of the coordinator: quota, weight, use, running and waiting jobs.
  StatusOr<std::vector<wire::QueueInfoT>> ListQueues();
  // Log bytes of one replica ("chief-0") from `offset`; attempt -1: every attempt concatenated,
  // each preceded by a header line. LogData.next_offset is where the next read starts. With
  // `with_times`, LogData.marks says when the bytes reached the coordinator. dump: the replica's
  // stack dumps (taken when the watchdog found its job hung) instead of its output.
  StatusOr<wire::LogDataT> ReadLogs(const std::string& job, const std::string& replica,
                                    uint64_t offset, int attempt = -1,
                                    uint32_t max_bytes = 1u << 20, bool with_times = false,
                                    bool dump = false);

  // Hyperparameter studies (DESIGN.md "Hyperparameter tuning"): a study file's YAML text in,
  // the study (its trials, the best trial so far) out.
  StatusOr<wire::StudyInfoT> SubmitStudy(const std::string& spec_yaml);
  StatusOr<wire::StudyInfoT> GetStudy(const std::string& name);
  // The study file the coordinator stored for the study (wire::StudyInfo.spec_yaml).
  StatusOr<std::string> GetStudySpec(const std::string& name);
  StatusOr<std::vector<wire::StudyInfoT>> ListStudies();

  // Observability: a job's training metrics (`cohort metrics`), and accounting (`cohort usage`).
  StatusOr<wire::JobMetricsT> GetJobMetrics(const std::string& job);
  // GetUsage's rows: wire::GetUsage says what each field of `request` selects.
  StatusOr<std::vector<wire::UsageRowT>> GetUsage(wire::GetUsageT request);

  // Polls GetJob every `poll` until `done(job)` holds, and returns that job. `on_change` (may be
  // empty) sees every polled state that differs from the previous one. Unreachable polls are
  // retried until `unreachable_limit` passes without a reply; kDeadlineExceeded after `deadline`.
  StatusOr<wire::JobInfoT> WaitForJob(
      const std::string& name, const std::function<bool(const wire::JobInfoT&)>& done,
      std::chrono::steady_clock::time_point deadline,
      std::chrono::milliseconds poll = std::chrono::milliseconds(250),
      const std::function<void(const wire::JobInfoT&)>& on_change = {},
      std::chrono::milliseconds unreachable_limit = std::chrono::seconds(30));
  // WaitForJob until the job is SUCCEEDED, FAILED or CANCELLED.
  StatusOr<wire::JobInfoT> WaitForTerminal(const std::string& name,
                                           std::chrono::steady_clock::time_point deadline);

  const std::string& endpoint() const { return options_.endpoint; }
  // Asks the coordinator for a backup of its state database now (wire::BackupState) and waits for
  // it, up to `timeout` (a large database takes a while).
  StatusOr<wire::BackupReplyT> BackupState(std::chrono::milliseconds timeout);
  // The coordinator's build (wire::GetVersion): "0.1.0+g298bf5264a1c". kInvalidArgument
  // ("unexpected GetVersion") from a coordinator older than the request.
  StatusOr<std::string> CoordinatorVersion();

  const ClientOptions& options() const { return options_; }

 private:
  CoordinatorClient(ClientOptions options, std::unique_ptr<zmq::context_t> context,
                    std::unique_ptr<DealerSocket> socket)
      : options_(std::move(options)), context_(std::move(context)), socket_(std::move(socket)) {}

  // Sends `body`, waits for the reply (`timeout`; zero: the options' timeout), and checks it is
  // of type R.
  template <typename R, typename T>
  StatusOr<Message> Request(T body, std::string_view what,
                            std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Request, with the reply unpacked into R's object-API type (wire::JobInfo -> wire::JobInfoT).
  template <typename R, typename T>
  StatusOr<typename R::NativeTableType> Call(
      T body, std::string_view what,
      std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // Call with a request T whose body is a job's or a study's name alone.
  template <typename R, typename T>
  StatusOr<typename R::NativeTableType> CallNamed(const std::string& name, std::string_view what);
  // Call for a list reply: the entries of its `field`, a null entry (malformed) dropped.
  template <typename R, typename T, typename Item>
  StatusOr<std::vector<Item>> CallList(
      T body, std::string_view what, std::vector<std::unique_ptr<Item>> R::NativeTableType::*field);

  ClientOptions options_;
  // Declared before socket_ so the socket closes first.
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<DealerSocket> socket_;
};

}  // namespace cohort
