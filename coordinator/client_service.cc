#include "coordinator/client_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include "common/build_version.h"
#include "common/spec_limit.h"
#include "common/study_spec.h"
#include "common/utf8.h"
#include "common/vertex_job.h"
#include "common/wire_string.h"
#include "coordinator/gang_fit.h"
#include "coordinator/job_array.h"
#include "coordinator/placement_round.h"

namespace cohort::coordinator {
namespace {

// `fits` (a job that cannot run on the idle cluster) with what its queue's defaults gave it,
// which the job file did not ask for and may ask less of.
Status WithDefaultsSaid(const Status& fits, const std::vector<std::string>& defaulted) {
  if (fits.ok() || defaulted.empty()) return fits;
  std::string said;
  for (const std::string& line : defaulted) said += (said.empty() ? "" : "; ") + line;
  return Status(fits.code(), fits.message() + " (" + said +
                                 "; give resources.cpus and memory_mb in the job file to ask "
                                 "for less)");
}

// A job name for `name_prefix`: the prefix, '-' and 8 lowercase letters and digits, not taken.
std::string GenerateJobName(const std::string& prefix, const JobController& jobs) {
  static std::mt19937_64 random{std::random_device{}()};
  constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::uniform_int_distribution<size_t> pick(0, sizeof kAlphabet - 2);
  while (true) {
    std::string name = prefix + "-";
    for (int i = 0; i < 8; ++i) name += kAlphabet[pick(random)];
    if (jobs.FindJob(name) == nullptr) return name;
  }
}

// A request's KeyValue list into `out`, a later entry of a key over an earlier.
void CopyKeyValues(const flatbuffers::Vector<flatbuffers::Offset<wire::KeyValue>>* entries,
                   std::map<std::string, std::string>* out) {
  if (entries == nullptr) return;
  for (const wire::KeyValue* kv : *entries) {
    if (kv != nullptr) (*out)[Str(kv->key())] = Str(kv->value());
  }
}

// The env, labels and args of a SubmitJob or SubmitStudy request (`--env KEY=VALUE --label
// KEY=VALUE ... -- ARGS`) into `edits`, counted before they are copied: kInvalidArgument past
// kMaxSubmitEditEntries of env or args, or kMaxJobLabels labels.
template <typename Request>
Status ReadEnvLabelsAndArgs(const Request& req, SubmitEdits* edits) {
  if ((req.env() && req.env()->size() > kMaxSubmitEditEntries) ||
      (req.args() && req.args()->size() > kMaxSubmitEditEntries)) {
    return InvalidArgument("env and args: at most " + std::to_string(kMaxSubmitEditEntries) +
                           " entries each");
  }
  if (req.labels() && req.labels()->size() > kMaxJobLabels) {
    return InvalidArgument("labels: at most " + std::to_string(kMaxJobLabels) + " labels, got " +
                           std::to_string(req.labels()->size()));
  }
  CopyKeyValues(req.env(), &edits->env);
  CopyKeyValues(req.labels(), &edits->labels);
  if (req.args()) {
    for (const flatbuffers::String* arg : *req.args()) edits->args.push_back(Str(arg));
  }
  return Status::Ok();
}

// The edits a SubmitJob request asks of its spec's text; kInvalidArgument naming a malformed
// entry of its after, or too many entries of after, env, args or labels.
StatusOr<SubmitEdits> SubmitEditsOf(const wire::SubmitJob& req) {
  SubmitEdits edits;
  edits.name = Str(req.name());
  if (req.after()) {
    // Counted first: adding each entry compares it with those before it (WithAfter).
    if (req.after()->size() > kMaxAfterJobs) {
      return InvalidArgument("after: at most " + std::to_string(kMaxAfterJobs) + " jobs, got " +
                             std::to_string(req.after()->size()));
    }
    for (const flatbuffers::String* entry : *req.after()) {
      StatusOr<JobDependency> dependency = ParseJobDependency(Str(entry));
      if (!dependency.ok()) return dependency.status().WithContext("after");
      edits.after.push_back(*std::move(dependency));
    }
  }
  edits.hold = req.hold();
  edits.array = Str(req.array());
  COHORT_RETURN_IF_ERROR(ReadEnvLabelsAndArgs(req, &edits));
  return edits;
}

// The replica `name` of `job` when it is RUNNING; else NOT_FOUND naming the replicas it has, or
// FAILED_PRECONDITION naming its state.
StatusOr<const ReplicaRecord*> RunningReplica(const JobRecord& job, const std::string& name) {
  const ReplicaRecord* r = job.FindReplica(name);
  if (r == nullptr) {
    std::string names;
    for (const ReplicaRecord& other : job.replicas) {
      names += (names.empty() ? "" : ", ") + other.name;
    }
    return NotFound("job " + job.name + " has no replica " + name + " (it has " + names + ")");
  }
  if (r->state != ReplicaState::RUNNING || !r->placed()) {
    return FailedPrecondition(r->name + " of job " + job.name + " is not running (" +
                              wire::EnumNameReplicaState(r->state) + ", job " +
                              wire::EnumNameJobState(job.state) + ")");
  }
  return r;
}

wire::DryRunPlanT ToWire(const PlacementPreview& preview) {
  wire::DryRunPlanT plan;
  plan.outcome = preview.outcome;
  for (const PlacementPreview::Replica& r : preview.replicas) {
    auto planned = std::make_unique<wire::PlannedReplicaT>();
    planned->replica = r.name;
    planned->node_id = r.node_id;
    planned->gpus = r.gpus;
    plan.replicas.push_back(std::move(planned));
  }
  plan.preempts = preview.victims;
  plan.reason = preview.reason;
  plan.queue = preview.queue;
  plan.queued_ahead = static_cast<uint32_t>(preview.queued_ahead);
  return plan;
}

}  // namespace

void ClientService::Handle(const RoutedMessage& m, int64_t now_ms) {
  const Message& msg = m.message;
  uint64_t id = msg.request_id();
  switch (msg.type()) {
    case wire::Body::SubmitJob:
      OnSubmit(m, *msg.As<wire::SubmitJob>(), now_ms);
      return;
    case wire::Body::GetJob: {
      const wire::GetJob& req = *msg.As<wire::GetJob>();
      std::string name = Str(req.name());
      const JobRecord* job = jobs_.FindJob(name);
      if (job == nullptr) {
        Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")));
        return;
      }
      wire::JobInfoT info = ToInfoWithUsage(*job, now_ms);
      if (watchdog_ != nullptr && !job->finished())
        info.stragglers = watchdog_->StragglerLines(name);
      if (req.with_spec()) {
        // A job file can hold credentials in its env: its owner's or an admin's to read.
        if (Status may = options_.permissions.CheckOwnerOrAdmin(CallerOf(m), job->owner,
                                                                "read the job file of job " + name);
            !may.ok()) {
          Reply(m, EncodeError(id, may));
          return;
        }
        info.spec_yaml = job->spec_yaml;
      }
      Reply(m, Encode(id, std::move(info)));
      return;
    }
    case wire::Body::ListJobs:
      OnListJobs(m, *msg.As<wire::ListJobs>(), now_ms);
      return;
    case wire::Body::CancelJob:
      OnCancel(m, *msg.As<wire::CancelJob>(), now_ms);
      return;
    case wire::Body::CancelArray:
      OnCancelArray(m, *msg.As<wire::CancelArray>(), now_ms);
      return;
    case wire::Body::SuspendJob:
      OnSuspend(m, *msg.As<wire::SuspendJob>(), now_ms);
      return;
    case wire::Body::UpdateJob:
      OnUpdate(m, *msg.As<wire::UpdateJob>(), now_ms);
      return;
    case wire::Body::ExecInReplica:
      OnExec(m, *msg.As<wire::ExecInReplica>(), now_ms);
      return;
    case wire::Body::ExecSessionIo:
      OnExecSession(m, *msg.As<wire::ExecSessionIo>(), now_ms);
      return;
    case wire::Body::DumpStacks:
      OnDumpStacks(m, *msg.As<wire::DumpStacks>(), now_ms);
      return;
    case wire::Body::ListNodes: {
      // "" is the empty selector: every node.
      StatusOr<NodeSelector> selector =
          ParseNodeSelector(Str(msg.As<wire::ListNodes>()->selector()));
      if (!selector.ok()) {
        Reply(m, EncodeError(id, InvalidArgument("selector: " + selector.status().message())));
        return;
      }
      wire::NodeListT list = Nodes(now_ms, &*selector);
      list.selector = FormatNodeSelector(*selector);
      const std::string events_of = Str(msg.As<wire::ListNodes>()->events_of());
      for (auto& node : list.nodes) {
        if (!node || events_of.empty() || node->node_id != events_of) continue;
        for (NodeEvent& e : nodes_.EventsOf(events_of)) {
          auto event = std::make_unique<wire::NodeEventT>();
          event->seq = e.seq;
          event->time_ms = e.time_ms;
          event->text = std::move(e.text);
          node->events.push_back(std::move(event));
        }
      }
      Reply(m, Encode(id, std::move(list)));
      return;
    }
    case wire::Body::ListQueues:
      Reply(m, Encode(id, Queues()));
      return;
    case wire::Body::GetVersion: {
      wire::VersionInfoT version;
      version.coordinator = std::string(CohortBuildVersion());
      Reply(m, Encode(id, std::move(version)));
      return;
    }
    case wire::Body::GetLogs:
      OnGetLogs(m, *msg.As<wire::GetLogs>(), now_ms);
      return;
    case wire::Body::SubmitStudy:
      OnSubmitStudy(m, *msg.As<wire::SubmitStudy>(), now_ms);
      return;
    case wire::Body::GetStudy: {
      const auto& req = *msg.As<wire::GetStudy>();
      std::string name = Str(req.name());
      auto info = studies_.Info(name);
      if (info.ok() && req.with_spec()) {
        // As a job's file, a study's trial job can hold credentials in its env.
        if (Status may = options_.permissions.CheckOwnerOrAdmin(
                CallerOf(m), info->owner, "read the study file of study " + name);
            !may.ok()) {
          Reply(m, EncodeError(id, may));
          return;
        }
        info->spec_yaml = *studies_.SpecYamlOf(name);
      }
      Reply(m, info.ok() ? Encode(id, std::move(*info)) : EncodeError(id, info.status()));
      return;
    }
    case wire::Body::ListArrays: {
      std::map<std::string, std::vector<const JobRecord*>> arrays;
      for (const auto& [array, tasks] : jobs_.Arrays()) {
        for (const auto& [index, task] : tasks) arrays[array].push_back(jobs_.FindJob(task));
      }
      Reply(m, Encode(id, ListArrays(arrays)));
      return;
    }
    case wire::Body::GetArray:
      OnGetArray(m, *msg.As<wire::GetArray>(), now_ms);
      return;
    case wire::Body::SuspendArray:
      OnSuspendArray(m, *msg.As<wire::SuspendArray>(), now_ms);
      return;
    case wire::Body::UpdateArray:
      OnUpdateArray(m, *msg.As<wire::UpdateArray>(), now_ms);
      return;
    case wire::Body::ListStudies: {
      wire::StudyListT list;
      for (auto& info : studies_.List()) {
        list.studies.push_back(std::make_unique<wire::StudyInfoT>(std::move(info)));
      }
      Reply(m, Encode(id, std::move(list)));
      return;
    }
    default:
      Reply(m, EncodeError(
                   id, InvalidArgument(std::string("unexpected ") + wire::EnumNameBody(msg.type()) +
                                       " on the client endpoint")));
  }
}

void ClientService::OnSubmit(const RoutedMessage& m, const wire::SubmitJob& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  size_t size = req.spec_yaml() ? req.spec_yaml()->size() : 0;
  Status fits =
      CheckSpecSize("job spec", size, options_.max_spec_bytes, "the coordinator's --max-spec-size");
  if (!fits.ok()) {
    Reply(m, EncodeError(id, fits));
    return;
  }
  // A Vertex CustomJob file: the Cohort job file it makes is what is stored; what had no
  // counterpart goes back as warnings.
  StatusOr<VertexConversion> job_file = AsCohortJobFile(Str(req.spec_yaml()), "submitted job");
  if (!job_file.ok()) {
    Reply(m, EncodeError(id, job_file.status()));
    return;
  }
  std::string yaml = std::move(job_file->yaml);
  if (StatusOr<SubmitEdits> edits = SubmitEditsOf(req); !edits.ok()) {
    Reply(m, EncodeError(id, edits.status().WithContext("submitted job")));
    return;
  } else if (!edits->empty()) {
    StatusOr<std::string> edited = ApplySubmitEdits(yaml, *edits);
    if (!edited.ok()) {
      Reply(m, EncodeError(id, edited.status().WithContext("submitted job")));
      return;
    }
    yaml = *std::move(edited);
    // Its env and args may have made it larger than a job file may be.
    if (Status edited_fits =
            CheckSpecSize("job spec (with its submit edits)", yaml.size(), options_.max_spec_bytes,
                          "the coordinator's --max-spec-size");
        !edited_fits.ok()) {
      Reply(m, EncodeError(id, edited_fits));
      return;
    }
  }
  auto spec = ParseJobSpec(yaml, "submitted job");
  if (!spec.ok()) {
    Reply(m, EncodeError(id, InvalidArgument(spec.status().message())));
    return;
  }
  // The stored spec carries the CPUs and memory its queue gave, and the generated name.
  const std::vector<std::string> defaulted = ApplyResourceDefaults(queue_config(), &*spec);
  bool rewrite = !defaulted.empty();
  if (spec->name.empty()) {
    spec->name = GenerateJobName(spec->name_prefix, jobs_);
    spec->name_prefix.clear();
    rewrite = true;
  }
  if (rewrite) yaml = JobSpecToYaml(*spec);
  if (jobs_.FindJob(spec->name)) {
    Reply(m, EncodeError(id, AlreadyExists("a job named '" + spec->name + "' already exists")));
    return;
  }
  // Only SubmitArray makes tasks: one submitted alone could take a slot of another's array.
  if (spec->IsArrayTask()) {
    Reply(m, EncodeError(id, InvalidArgument(
                                 "submitted job: scheduling.array_index: the coordinator sets it "
                                 "on an array's tasks; submit the array (scheduling.array) instead "
                                 "or remove array_index")));
    return;
  }
  // A job and an array never share a name: `cohort cancel NAME` means one of them.
  if (!jobs_.ArrayTasks(spec->name).empty()) {
    Reply(m, EncodeError(id,
                         AlreadyExists("an array named '" + spec->name +
                                       "' already exists (its tasks " + spec->name + "-<index>)")));
    return;
  }
  if (spec->IsArray()) {
    for (int index : spec->scheduling.array.indexes) {
      const std::string task = spec->name + "-" + std::to_string(index);
      if (jobs_.FindJob(task)) {
        Reply(m, EncodeError(id, AlreadyExists("a job named '" + task + "' already exists: task " +
                                               std::to_string(index) + " of array " + spec->name +
                                               " would have its name")));
        return;
      }
    }
  }
  if (Status known = CheckQueue(spec->scheduling); !known.ok()) {
    Reply(m, EncodeError(id, known.WithContext("submitted job")));
    return;
  }
  if (Status after = jobs_.CheckAfter(*spec); !after.ok()) {
    Reply(m, EncodeError(id, after.WithContext("submitted job")));
    return;
  }
  if (now_ms >= options_.fit_check_from_ms) {
    Status fits = idle_cluster_.Check(*spec, nodes_, options_.port_min, options_.port_max);
    if (!fits.ok()) {
      Reply(m,
            EncodeError(id, WithDefaultsSaid(fits, defaulted)
                                .WithContext("job " + spec->name + " cannot run on this cluster")));
      return;
    }
  }
  wire::SubmitJobReplyT reply;
  reply.warnings = std::move(job_file->notes);
  reply.defaults = defaulted;
  if (spec->IsArray()) {
    SubmitArray(m, std::move(*spec), req.dry_run(), defaulted, std::move(reply), now_ms);
    return;
  }
  if (req.dry_run()) {
    if (!preview_) {
      Reply(m, EncodeError(id, FailedPrecondition("this coordinator does not serve dry runs")));
      return;
    }
    std::vector<JobRecord> drafts;
    drafts.push_back(jobs_.Draft(std::move(*spec), yaml, now_ms));
    reply.name = drafts[0].name;
    std::string warning =
        StorageWarning(drafts[0].output_dir, nodes_.storage_root(), nodes_.nodes().size());
    if (!warning.empty()) reply.warnings.push_back(std::move(warning));
    reply.dry_run = std::make_unique<wire::DryRunPlanT>(ToWire(preview_(drafts, now_ms)[0]));
    Reply(m, Encode(id, std::move(reply)));
    return;
  }
  JobRecord& job = jobs_.Submit(std::move(*spec), yaml, now_ms);
  job.owner = CallerOf(m);
  reply.name = job.name;
  for (const std::string& note : defaulted) jobs_.Note(job, note, now_ms);
  std::string warning =
      StorageWarning(job.output_dir, nodes_.storage_root(), nodes_.nodes().size());
  if (!warning.empty()) {
    jobs_.Note(job, "warning: " + warning, now_ms);
    reply.warnings.push_back(std::move(warning));
  }
  Reply(m, Encode(id, std::move(reply)));
}

void ClientService::SubmitArray(const RoutedMessage& m, JobSpec array, bool dry_run,
                                const std::vector<std::string>& defaulted,
                                wire::SubmitJobReplyT reply, int64_t now_ms) {
  const uint64_t id = m.message.request_id();
  reply.name = array.name;
  const std::vector<int>& indexes = array.scheduling.array.indexes;
  if (dry_run && !preview_) {
    Reply(m, EncodeError(id, FailedPrecondition("this coordinator does not serve dry runs")));
    return;
  }
  if (dry_run) {
    // The tasks let in at once, submitted together; the others would wait for their turn.
    const size_t at_once =
        array.scheduling.array.parallelism > 0
            ? std::min(indexes.size(), static_cast<size_t>(array.scheduling.array.parallelism))
            : indexes.size();
    std::vector<JobRecord> drafts;
    drafts.reserve(at_once);
    for (size_t i = 0; i < at_once; ++i) {
      JobSpec task = ArrayTask(array, indexes[i]);
      const std::string yaml = JobSpecToYaml(task);
      // Draft gives every draft the next seq; each task's must follow the one before.
      drafts.push_back(jobs_.Draft(std::move(task), yaml, now_ms));
      drafts.back().seq += i;
      reply.tasks.push_back(drafts.back().name);
    }
    std::string warning =
        StorageWarning(drafts[0].output_dir, nodes_.storage_root(), nodes_.nodes().size());
    if (!warning.empty()) reply.warnings.push_back(std::move(warning));
    std::vector<PlacementPreview> previews = preview_(drafts, now_ms);
    for (const PlacementPreview& preview : previews) {
      reply.task_dry_runs.push_back(std::make_unique<wire::DryRunPlanT>(ToWire(preview)));
    }
    reply.dry_run = std::make_unique<wire::DryRunPlanT>(ToWire(previews[0]));
    Reply(m, Encode(id, std::move(reply)));
    return;
  }
  const size_t stored = JobSpecToYaml(ArrayTask(array, indexes.back())).size() * indexes.size();
  if (stored > kMaxArraySpecBytes) {
    Reply(m, EncodeError(id, InvalidArgument("scheduling.array: " + std::to_string(indexes.size()) +
                                             " tasks would store " + std::to_string(stored >> 20) +
                                             " MiB of job files; at most " +
                                             std::to_string(kMaxArraySpecBytes >> 20) +
                                             " MiB: fewer tasks, or a smaller job file")));
    return;
  }
  const std::string owner = CallerOf(m);
  for (int index : indexes) {
    JobSpec spec = ArrayTask(array, index);
    const std::string yaml = JobSpecToYaml(spec);
    JobRecord& task = jobs_.Submit(std::move(spec), yaml, now_ms);
    task.owner = owner;
    reply.tasks.push_back(task.name);
    for (const std::string& note : defaulted) jobs_.Note(task, note, now_ms);
    std::string warning =
        StorageWarning(task.output_dir, nodes_.storage_root(), nodes_.nodes().size());
    if (warning.empty()) continue;
    jobs_.Note(task, "warning: " + warning, now_ms);
    if (index == indexes.front()) reply.warnings.push_back(std::move(warning));
  }
  Reply(m, Encode(id, std::move(reply)));
}

void ClientService::OnGetArray(const RoutedMessage& m, const wire::GetArray& req, int64_t now_ms) {
  const uint64_t id = m.message.request_id();
  const std::string name = Str(req.name());
  const std::vector<std::pair<int, std::string>>& tasks = jobs_.ArrayTasks(name);
  if (tasks.empty()) {
    Reply(m, EncodeError(id, NotFound("no array named '" + name + "'")));
    return;
  }
  std::vector<const JobRecord*> records;
  wire::ArrayStatusT reply;
  for (const auto& [index, task] : tasks) {
    const JobRecord& job = *jobs_.FindJob(task);
    records.push_back(&job);
    reply.tasks.push_back(std::make_unique<wire::JobInfoT>(ToInfoWithUsage(job, now_ms)));
  }
  reply.summary = std::make_unique<wire::ArrayInfoT>(ArrayInfoOf(name, records));
  if (req.with_spec()) {
    // Its lowest task's file, as the array: a job file, with a job's rule for who may read it.
    const JobRecord& lowest = *records.front();
    if (Status may = options_.permissions.CheckOwnerOrAdmin(CallerOf(m), lowest.owner,
                                                            "read the job file of array " + name);
        !may.ok()) {
      Reply(m, EncodeError(id, may));
      return;
    }
    reply.spec_yaml = JobSpecToYaml(ArrayOfTask(lowest.spec));
  }
  Reply(m, Encode(id, std::move(reply)));
}

std::optional<std::vector<JobRecord*>> ClientService::OwnedArrayTasks(const RoutedMessage& m,
                                                                      const std::string& name,
                                                                      const std::string& verb) {
  const uint64_t id = m.message.request_id();
  const std::vector<std::pair<int, std::string>>& names = jobs_.ArrayTasks(name);
  if (names.empty()) {
    Reply(m, EncodeError(id, NotFound("no array named '" + name + "'")));
    return std::nullopt;
  }
  const std::string caller = CallerOf(m);
  std::vector<JobRecord*> tasks;
  for (const auto& [index, task] : names) {
    JobRecord* job = jobs_.FindJob(task);
    if (Status may = options_.permissions.CheckOwnerOrAdmin(
            caller, job->owner, verb + " job " + task + " of array " + name);
        !may.ok()) {
      Reply(m, EncodeError(id, may));
      return std::nullopt;
    }
    tasks.push_back(job);
  }
  return tasks;
}

void ClientService::ReplyTasks(const RoutedMessage& m, const std::vector<JobRecord*>& tasks) {
  wire::JobListT list;
  for (const JobRecord* task : tasks) {
    list.jobs.push_back(std::make_unique<wire::JobInfoT>(ToInfo(*task)));
  }
  Reply(m, Encode(m.message.request_id(), std::move(list)));
}

void ClientService::OnCancelArray(const RoutedMessage& m, const wire::CancelArray& req,
                                  int64_t now_ms) {
  const std::string name = Str(req.name());
  std::optional<std::vector<JobRecord*>> tasks = OwnedArrayTasks(m, name, "cancel");
  if (!tasks) return;
  const std::string caller = CallerOf(m);
  const std::string reason =
      "array " + name + " cancelled" + (caller.empty() ? "" : " by " + caller);
  // The tasks waiting for a slot first: a task in flight that ends at once would otherwise hand
  // its slot to one of them, which would say it may run just before it is cancelled.
  for (bool waiting : {true, false}) {
    for (JobRecord* task : *tasks) {
      if (task->waits_for_array_slot == waiting) jobs_.Cancel(*task, reason, now_ms);
    }
  }
  ReplyTasks(m, *tasks);
}

void ClientService::OnSuspendArray(const RoutedMessage& m, const wire::SuspendArray& req,
                                   int64_t now_ms) {
  const std::string name = Str(req.name());
  std::optional<std::vector<JobRecord*>> tasks =
      OwnedArrayTasks(m, name, req.resume() ? "resume" : "suspend");
  if (!tasks) return;
  const std::string caller = CallerOf(m);
  const std::string reason = "array " + name + (req.resume() ? " resumed" : " suspended") +
                             (caller.empty() ? "" : " by " + caller);
  for (JobRecord* task : *tasks) {
    // Those ended or being cancelled are left as they are; the others cannot refuse.
    if (task->finished() || task->state == JobState::CANCELLING) continue;
    Status done =
        req.resume() ? jobs_.Resume(*task, reason, now_ms) : jobs_.Suspend(*task, reason, now_ms);
    if (!done.ok()) spdlog::warn("array {}: {}", name, done.ToString());
  }
  ReplyTasks(m, *tasks);
}

void ClientService::OnUpdateArray(const RoutedMessage& m, const wire::UpdateArray& req,
                                  int64_t now_ms) {
  SchedulingSpec asked;
  asked.priority = Str(req.priority());
  asked.queue = Str(req.queue());
  if (Status known = CheckUpdate(asked); !known.ok()) {
    Reply(m, EncodeError(m.message.request_id(), known));
    return;
  }
  const std::string name = Str(req.name());
  std::optional<std::vector<JobRecord*>> tasks = OwnedArrayTasks(m, name, "update");
  if (!tasks) return;
  for (JobRecord* task : *tasks) {
    if (task->finished() || task->state == JobState::CANCELLING) continue;
    Status done = jobs_.UpdateScheduling(*task, asked.priority, asked.queue, CallerOf(m), now_ms);
    if (!done.ok()) spdlog::warn("array {}: {}", name, done.ToString());
  }
  ReplyTasks(m, *tasks);
}

void ClientService::OnListJobs(const RoutedMessage& m, const wire::ListJobs& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  JobQuery query;
  if (req.states()) {
    for (auto state : *req.states()) {
      if (state < wire::JobState::MIN || state > wire::JobState::MAX) {
        Reply(m, EncodeError(id, InvalidArgument("ListJobs.states: no job state " +
                                                 std::to_string(static_cast<int>(state)))));
        return;
      }
      query.states.push_back(state);
    }
  }
  query.created_since_ms = std::max<int64_t>(req.created_since_ms(), 0);
  query.limit = req.limit();
  StatusOr<NodeSelector> selector = ParseNodeSelector(Str(req.selector()));
  if (!selector.ok()) {
    Reply(m, EncodeError(id, InvalidArgument("selector: " + selector.status().message())));
    return;
  }
  // With a selector the limit counts the jobs it selects, newest first.
  const size_t limit = query.limit;
  if (!selector->empty()) query.limit = 0;
  std::vector<const JobRecord*> selected;
  if (query.states.empty() && query.created_since_ms == 0 && query.limit == 0) {
    for (const auto& [n, j] : jobs_.jobs()) selected.push_back(j.get());
    std::sort(selected.begin(), selected.end(),
              [](const JobRecord* a, const JobRecord* b) { return a->seq < b->seq; });
  } else {
    auto found = query_jobs_(query);
    if (!found.ok()) {
      Reply(m, EncodeError(id, found.status().WithContext("listing jobs from the state store")));
      return;
    }
    // Newest first from the store; each shown as it is now (a change of this pass is stored at
    // its end), and left out if that state no longer matches.
    for (auto it = found->rbegin(); it != found->rend(); ++it) {
      const JobRecord* job = jobs_.FindJob(it->name);
      if (job == nullptr) continue;
      if (!query.states.empty() &&
          std::find(query.states.begin(), query.states.end(), job->state) == query.states.end()) {
        continue;
      }
      selected.push_back(job);
    }
  }
  if (!selector->empty()) {
    std::erase_if(selected, [&](const JobRecord* j) { return !selector->Matches(j->spec.labels); });
    if (limit > 0 && selected.size() > limit) {
      selected.erase(selected.begin(), selected.end() - static_cast<std::ptrdiff_t>(limit));
    }
  }
  wire::JobListT list;
  for (const JobRecord* j : selected) {
    list.jobs.push_back(std::make_unique<wire::JobInfoT>(ToInfoWithUsage(*j, now_ms)));
  }
  Reply(m, Encode(id, std::move(list)));
}

JobRecord* ClientService::OwnedJob(const RoutedMessage& m, const std::string& name,
                                   const std::string& verb) {
  uint64_t id = m.message.request_id();
  JobRecord* job = jobs_.FindJob(name);
  if (job == nullptr) {
    Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")));
    return nullptr;
  }
  if (Status may =
          options_.permissions.CheckOwnerOrAdmin(CallerOf(m), job->owner, verb + " job " + name);
      !may.ok()) {
    Reply(m, EncodeError(id, may));
    return nullptr;
  }
  return job;
}

void ClientService::OnCancel(const RoutedMessage& m, const wire::CancelJob& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  JobRecord* job = OwnedJob(m, Str(req.name()), "cancel");
  if (job == nullptr) return;
  const std::string caller = CallerOf(m);
  jobs_.Cancel(*job, caller.empty() ? "cancel requested" : "cancel requested by " + caller, now_ms);
  Reply(m, Encode(id, ToInfo(*job)));
}

void ClientService::OnSuspend(const RoutedMessage& m, const wire::SuspendJob& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  JobRecord* job = OwnedJob(m, Str(req.name()), req.resume() ? "resume" : "suspend");
  if (job == nullptr) return;
  const std::string caller = CallerOf(m);
  const std::string reason =
      std::string(req.resume() ? "resumed" : "suspended") + (caller.empty() ? "" : " by " + caller);
  Status done =
      req.resume() ? jobs_.Resume(*job, reason, now_ms) : jobs_.Suspend(*job, reason, now_ms);
  if (!done.ok()) {
    Reply(m, EncodeError(id, done));
    return;
  }
  Reply(m, Encode(id, ToInfo(*job)));
}

Status ClientService::CheckUpdate(const SchedulingSpec& asked) const {
  if (asked.priority.empty() && asked.queue.empty()) {
    return InvalidArgument("update: give a priority class or a queue");
  }
  // CheckQueue reads both: what is not asked for is checked as the defaults, always known.
  SchedulingSpec check = asked;
  if (check.priority.empty()) check.priority = SchedulingSpec{}.priority;
  if (check.queue.empty()) check.queue = SchedulingSpec{}.queue;
  return CheckQueue(check).WithContext("update");
}

void ClientService::OnUpdate(const RoutedMessage& m, const wire::UpdateJob& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  SchedulingSpec asked;
  asked.priority = Str(req.priority());
  asked.queue = Str(req.queue());
  if (Status known = CheckUpdate(asked); !known.ok()) {
    Reply(m, EncodeError(id, known));
    return;
  }
  JobRecord* job = OwnedJob(m, Str(req.name()), "update");
  if (job == nullptr) return;
  if (Status done = jobs_.UpdateScheduling(*job, asked.priority, asked.queue, CallerOf(m), now_ms);
      !done.ok()) {
    Reply(m, EncodeError(id, done));
    return;
  }
  Reply(m, Encode(id, ToInfo(*job)));
}

namespace {

// Why an exec's command cannot be run as given; OK when it can.
Status CheckExecArgv(const std::vector<std::string>& argv) {
  if (argv.empty() || argv.front().empty()) return InvalidArgument("exec: no command to run");
  size_t bytes = 0;
  for (const std::string& arg : argv) {
    if (arg.find('\0') != std::string::npos) {
      return InvalidArgument("exec: an argument holds a NUL byte");
    }
    bytes += arg.size() + 1;
  }
  if (argv.size() > kMaxExecArgs || bytes > kMaxExecArgBytes) {
    return InvalidArgument("exec: the command has " + std::to_string(argv.size()) +
                           " arguments of " + std::to_string(bytes) + " bytes; at most " +
                           std::to_string(kMaxExecArgs) + " of " +
                           std::to_string(kMaxExecArgBytes) + " bytes are run");
  }
  return Status::Ok();
}

}  // namespace

const ReplicaRecord* ClientService::ExecTarget(const RoutedMessage& m, const std::string& job_name,
                                               std::string& replica,
                                               const std::vector<std::string>& argv,
                                               const std::string& how, int64_t now_ms) {
  JobRecord* job = OwnedJob(m, job_name, "exec in");
  if (job == nullptr) return nullptr;
  if (replica.empty()) {
    replica = job->FindReplica("chief-0") != nullptr || job->replicas.empty()
                  ? "chief-0"
                  : job->replicas.front().name;
  }
  StatusOr<const ReplicaRecord*> running = RunningReplica(*job, replica);
  if (!running.ok()) {
    Reply(m, EncodeError(m.message.request_id(), running.status()));
    return nullptr;
  }
  const ReplicaRecord* r = *running;
  if (argv.empty()) return r;
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  command = TruncateUtf8(ValidUtf8(command, /*printable=*/true), 200);
  const std::string caller = CallerOf(m);
  jobs_.NoteRepeatable(*job,
                       "cohort exec" + how + (caller.empty() ? std::string() : " by " + caller) +
                           " in " + r->name + " attempt " + std::to_string(r->attempt) + ": " +
                           command,
                       now_ms);
  return r;
}

void ClientService::OnExec(const RoutedMessage& m, const wire::ExecInReplica& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  auto refuse = [&](const Status& why) { Reply(m, EncodeError(id, why)); };
  if (exec_relay_ == nullptr) return refuse(FailedPrecondition("cohort exec is not served here"));
  wire::ExecInReplicaT exec;
  req.UnPackTo(&exec);
  if (Status argv = CheckExecArgv(exec.argv); !argv.ok()) return refuse(argv);
  if (exec.timeout_ms == 0) exec.timeout_ms = kDefaultExecTimeoutMs;
  if (exec.timeout_ms < 0 || exec.timeout_ms > kMaxExecTimeoutMs) {
    return refuse(InvalidArgument("exec: the timeout must be above 0 and at most 1h, not " +
                                  std::to_string(exec.timeout_ms) + " ms"));
  }
  const ReplicaRecord* r = ExecTarget(m, exec.job, exec.replica, exec.argv, "", now_ms);
  if (r == nullptr) return;
  exec.attempt = r->attempt;
  exec_relay_->Forward(m.peer, id, r->node_id, std::move(exec), now_ms);
}

void ClientService::OnExecSession(const RoutedMessage& m, const wire::ExecSessionIo& req,
                                  int64_t now_ms) {
  uint64_t id = m.message.request_id();
  auto refuse = [&](const Status& why) { Reply(m, EncodeError(id, why)); };
  if (exec_relay_ == nullptr) return refuse(FailedPrecondition("cohort exec is not served here"));
  wire::ExecSessionIoT step;
  req.UnPackTo(&step);
  if (step.session == 0) {
    if (Status argv = CheckExecArgv(step.argv); !argv.ok()) return refuse(argv);
  } else {
    step.argv.clear();  // only the first step starts a command
  }
  if (step.input.size() > kMaxExecStepBytes) {
    return refuse(InvalidArgument("exec: a step carries at most " +
                                  std::to_string(kMaxExecStepBytes) + " bytes of input, not " +
                                  std::to_string(step.input.size())));
  }
  const ReplicaRecord* r =
      ExecTarget(m, step.job, step.replica, step.argv, step.tty ? " -it" : " -i", now_ms);
  if (r == nullptr) return;
  step.attempt = r->attempt;
  exec_relay_->Forward(m.peer, id, r->node_id, std::move(step), now_ms);
}

void ClientService::OnDumpStacks(const RoutedMessage& m, const wire::DumpStacks& req,
                                 int64_t now_ms) {
  uint64_t id = m.message.request_id();
  if (!dump_stacks_) {
    Reply(m, EncodeError(id, FailedPrecondition("cohort stacks is not served here")));
    return;
  }
  JobRecord* job = OwnedJob(m, Str(req.job()), "take the stacks of");
  if (job == nullptr) return;
  std::vector<const ReplicaRecord*> targets;
  if (const std::string name = Str(req.replica()); !name.empty()) {
    StatusOr<const ReplicaRecord*> running = RunningReplica(*job, name);
    if (!running.ok()) {
      Reply(m, EncodeError(id, running.status()));
      return;
    }
    targets.push_back(*running);
  } else {
    for (const ReplicaRecord& r : job->replicas) {
      if (r.state == ReplicaState::RUNNING && r.placed()) targets.push_back(&r);
    }
  }
  if (targets.empty()) {
    Reply(m, EncodeError(id,
                         FailedPrecondition("no replica of job " + job->name + " is running (job " +
                                            wire::EnumNameJobState(job->state) + ")")));
    return;
  }
  const std::string caller = CallerOf(m);
  const std::string by = caller.empty() ? std::string() : " by " + caller;
  std::string asked;
  for (const ReplicaRecord* r : targets) {
    if (dump_stacks_(*job, *r, "stacks asked for" + by + " (cohort stacks)")) {
      asked += (asked.empty() ? "" : ", ") + r->name;
    }
  }
  if (asked.empty()) {
    Reply(m, EncodeError(id,
                         Unavailable("the nodes running job " + job->name + " are not reachable")));
    return;
  }
  jobs_.NoteRepeatable(*job, "cohort stacks" + by + ": " + asked, now_ms);
  Reply(m, Encode(id, ToInfo(*job)));
}

void ClientService::OnSubmitStudy(const RoutedMessage& m, const wire::SubmitStudy& req,
                                  int64_t now_ms) {
  uint64_t id = m.message.request_id();
  size_t size = req.spec_yaml() ? req.spec_yaml()->size() : 0;
  Status fits = CheckSpecSize("study spec", size, options_.max_spec_bytes,
                              "the coordinator's --max-spec-size");
  if (!fits.ok()) {
    Reply(m, EncodeError(id, fits));
    return;
  }
  // A Vertex HyperparameterTuningJob file: the Cohort study file it makes is what is stored;
  // what had no counterpart is in the reply's warnings.
  StatusOr<VertexConversion> study_file =
      AsCohortStudyFile(Str(req.spec_yaml()), "submitted study", Str(req.name()));
  if (!study_file.ok()) {
    Reply(m, EncodeError(id, study_file.status()));
    return;
  }
  if (req.name() != nullptr && req.name()->size() > 0) {
    StatusOr<std::string> renamed = WithStudyName(study_file->yaml, Str(req.name()));
    if (!renamed.ok()) {
      Reply(m, EncodeError(id, renamed.status()));
      return;
    }
    study_file->yaml = *std::move(renamed);
  }
  SubmitEdits edits;
  if (Status read = ReadEnvLabelsAndArgs(req, &edits); !read.ok()) {
    Reply(m, EncodeError(id, read));
    return;
  }
  if (!edits.empty()) {
    StatusOr<std::string> edited = WithTrialJobEdits(study_file->yaml, edits);
    if (!edited.ok()) {
      Reply(m, EncodeError(id, edited.status()));
      return;
    }
    study_file->yaml = *std::move(edited);
  }
  const std::string& yaml = study_file->yaml;
  // An invalid spec is refused by studies_.Submit below, naming the field.
  if (auto spec = ParseStudySpec(yaml, "submitted study"); spec.ok()) {
    if (Status known = CheckQueue(spec->trial_job.scheduling); !known.ok()) {
      Reply(m, EncodeError(id, known.WithContext("the trial job of study " + spec->name)));
      return;
    }
    // A study whose trial job cannot run here would queue trials that never start. Each trial
    // job takes its queue's defaults when it is submitted (StudyRunner), as here.
    const std::vector<std::string> defaulted =
        ApplyResourceDefaults(queue_config(), &spec->trial_job);
    if (now_ms >= options_.fit_check_from_ms) {
      Status fits =
          idle_cluster_.Check(spec->trial_job, nodes_, options_.port_min, options_.port_max);
      if (!fits.ok()) {
        Reply(m, EncodeError(id, WithDefaultsSaid(fits, defaulted)
                                     .WithContext("the trials of study " + spec->name +
                                                  " cannot run on this cluster")));
        return;
      }
    }
  }
  auto name = studies_.Submit(yaml, now_ms, CallerOf(m));
  if (!name.ok()) {
    Reply(m, EncodeError(id, name.status()));
    return;
  }
  run_studies_();
  wire::StudyInfoT info = *studies_.Info(*name);
  info.warnings = std::move(study_file->notes);
  Reply(m, Encode(id, info));
}

void ClientService::OnGetLogs(const RoutedMessage& m, const wire::GetLogs& req, int64_t now_ms) {
  uint64_t id = m.message.request_id();
  std::string name = Str(req.job());
  std::string replica = Str(req.replica());
  JobRecord* job = jobs_.FindJob(name);
  if (job == nullptr) {
    Reply(m, EncodeError(id, NotFound("no job named '" + name + "'")));
    return;
  }
  ReplicaRecord* r = job->FindReplica(replica);
  if (!r) {
    Reply(m, EncodeError(id, NotFound("job " + name + " has no replica '" + replica + "'")));
    return;
  }
  int attempt = req.attempt();
  if (attempt < -1 || attempt > r->attempt) {
    Reply(m, EncodeError(id, InvalidArgument("replica " + replica + " has no attempt " +
                                             std::to_string(attempt))));
    return;
  }
  uint32_t max_bytes = std::min<uint32_t>(req.max_bytes() ? req.max_bytes() : 1, 16u << 20);
  auto read = req.dump()
                  ? logs_.ReadStacks(name, replica, attempt, r->attempt, req.offset(), max_bytes)
                  : logs_.Read(name, replica, attempt, r->attempt, req.offset(), max_bytes,
                               req.with_times());
  if (!read.ok()) {
    Reply(m, EncodeError(id, read.status()));
    return;
  }
  bool no_more = !r->launched || r->state == ReplicaState::LOST ||
                 logs_.Eof(name, replica, r->attempt) || now_ms - job->end_time_ms > kLogGraceMs;
  wire::LogDataT data;
  data.job = name;
  data.replica = replica;
  data.offset = req.offset();
  data.next_offset = read->next_offset;
  data.data.assign(read->data.begin(), read->data.end());
  // Stack dumps are read as they are now (there is nothing to follow).
  data.complete = req.dump() ? read->at_end : job->finished() && read->at_end && no_more;
  for (const auto& mark : read->marks) data.marks.emplace_back(mark.offset, mark.time_ms);
  Reply(m, Encode(id, std::move(data)));
}

Status ClientService::CheckQueue(const SchedulingSpec& scheduling) const {
  const QueueConfig& queues = queue_config();
  if (queues.FindQueue(scheduling.queue) < 0) {
    return InvalidArgument("scheduling.queue: no queue named '" + scheduling.queue +
                           "' (queues: " + queues.QueueNames() + ")");
  }
  if (!queues.FindPriority(scheduling.priority)) {
    return InvalidArgument("scheduling.priority: no priority class named '" + scheduling.priority +
                           "' (classes: " + queues.PriorityNames() + ")");
  }
  return Status::Ok();
}

wire::QueueListT ClientService::Queues() {
  constexpr size_t kNamesShown = 20;
  const QueueConfig& queues = queue_config();
  std::vector<QueueState> usage = QueueUsage(jobs_, queues);
  std::vector<std::vector<const JobRecord*>> waiting(usage.size());
  std::vector<int> running(usage.size(), 0), suspended(usage.size(), 0), after(usage.size(), 0);
  for (const auto& [seq, job] : jobs_.active()) {
    size_t q = static_cast<size_t>(job->queue_index);
    if (job->state == JobState::QUEUED) {
      // Those waiting for other jobs are counted, not listed: no round tries them yet.
      if (job->waits_for_jobs) {
        ++after[q];
      } else {
        waiting[q].push_back(job);
      }
    } else if (job->state == JobState::PENDING || job->state == JobState::RUNNING) {
      ++running[q];
    } else if (job->state == JobState::SUSPENDED) {
      ++suspended[q];
    }
  }
  wire::QueueListT list;
  for (size_t q = 0; q < usage.size(); ++q) {
    // The order the scheduler tries them in: priority, then submit order.
    std::stable_sort(
        waiting[q].begin(), waiting[q].end(),
        [](const JobRecord* a, const JobRecord* b) { return a->priority > b->priority; });
    auto info = std::make_unique<wire::QueueInfoT>();
    info->name = queues.queues()[q].name;
    info->gpu_quota = usage[q].gpu_quota;
    info->cpu_quota = usage[q].cpu_quota;
    info->weight = usage[q].weight;
    info->gpu_idle_limit_ms = queues.queues()[q].gpu_idle_limit_ms;
    info->cpus_per_gpu = queues.queues()[q].cpus_per_gpu;
    info->memory_mb_per_gpu = queues.queues()[q].memory_mb_per_gpu;
    info->gpus_used = usage[q].gpus_used;
    info->cpus_used = usage[q].cpus_used;
    info->running = running[q];
    info->waiting = static_cast<int>(waiting[q].size()) + after[q];
    info->suspended = suspended[q];
    for (size_t k = 0; k < waiting[q].size() && k < kNamesShown; ++k) {
      info->waiting_jobs.push_back(waiting[q][k]->name);
    }
    list.queues.push_back(std::move(info));
  }
  return list;
}

wire::JobInfoT ClientService::ToInfo(const JobRecord& job) {
  wire::JobInfoT info;
  info.name = job.name;
  info.state = job.state;
  info.message = job.ShownMessage();
  info.create_time_ms = job.create_time_ms;
  info.start_time_ms = job.start_time_ms;
  info.end_time_ms = job.end_time_ms;
  info.restarts = job.restarts;
  info.max_restarts = job.spec.scheduling.max_restarts;
  info.restart_rule = job.spec.RestartRule();
  info.output_dir = job.output_dir;
  info.trial_id = job.trial_id;
  info.study = job.study;
  info.queue = job.spec.scheduling.queue;
  info.priority = job.spec.scheduling.priority;
  info.owner = job.owner;
  for (const auto& [key, value] : job.spec.labels) {
    auto label = std::make_unique<wire::KeyValueT>();
    label->key = key;
    label->value = value;
    info.labels.push_back(std::move(label));
  }
  for (const auto& r : job.replicas) {
    auto ri = std::make_unique<wire::ReplicaInfoT>();
    ri->replica = r.name;
    ri->role = std::string(RoleName(r.role));
    ri->index = r.index;
    ri->pool = r.pool();
    ri->node_id = r.node_id;
    ri->gpus = r.gpus;
    ri->state = r.state;
    ri->attempt = r.attempt;
    ri->exit_code = r.exit_code;
    ri->signal = r.signal;
    ri->cause_signal = r.cause_signal;
    ri->message = r.message;
    info.replicas.push_back(std::move(ri));
  }
  for (const auto& e : job.events) {
    auto je = std::make_unique<wire::JobEventT>();
    je->time_ms = e.time_ms;
    je->message = e.message;
    info.events.push_back(std::move(je));
  }
  return info;
}

wire::JobInfoT ClientService::ToInfoWithUsage(const JobRecord& job, int64_t now_ms) const {
  wire::JobInfoT info = ToInfo(job);
  if (usage_ == nullptr || job.finished()) return info;
  for (auto& ri : info.replicas) {
    if (ri->state == ReplicaState::RUNNING) {
      ri->usage = usage_->Of(job.name, ri->replica, ri->attempt, now_ms);
    }
  }
  return info;
}

wire::NodeListT ClientService::Nodes(int64_t now_ms, const NodeSelector* selector) const {
  struct Use {
    std::vector<int> gpus;
    int cpus = 0;
    int64_t mem = 0;
    int replicas = 0;
    std::vector<std::unique_ptr<wire::NodeReplicaT>> holders;
  };
  std::map<std::string, Use> use;
  auto account = [&](const JobRecord& job) {
    for (const auto& r : job.replicas) {
      if (!JobController::HoldsResources(r)) continue;
      Use& u = use[r.node_id];
      u.gpus.insert(u.gpus.end(), r.gpus.begin(), r.gpus.end());
      const Resources& res = job.PoolOf(r).resources;
      u.cpus += res.cpus;
      u.mem += res.memory_mb;
      ++u.replicas;
      auto holder = std::make_unique<wire::NodeReplicaT>();
      holder->job = job.name;
      holder->replica = r.name;
      holder->state = r.state;
      holder->gpus = r.gpus;
      holder->cpus = res.cpus;
      holder->memory_mb = res.memory_mb;
      u.holders.push_back(std::move(holder));
    }
  };
  // A job never placed holds nothing (100,000 queued jobs need not be read).
  for (const auto& [seq, job] : jobs_.active()) {
    if (job->may_hold) account(*job);
  }
  // Jobs that ended may still have replicas being stopped.
  for (const JobRecord* job : jobs_.EndedHolding()) account(*job);
  std::map<std::string, wire::NodeUsageT> usage;
  if (usage_ != nullptr) {
    usage = usage_
                ->ByNode(now_ms, ReplicaUsageTracker::PlacedIn([this](const std::string& name) {
                           return jobs_.FindJob(name);
                         }))
                .nodes;
  }
  wire::NodeListT list;
  for (const auto& [id, n] : nodes_.nodes()) {
    if (selector != nullptr && !selector->Matches(n.labels)) continue;
    auto ni = std::make_unique<wire::NodeInfoT>();
    ni->node_id = id;
    ni->address = n.address;
    ni->version = n.version;
    ni->agent_started_ms = n.agent_started_ms;
    for (const auto& g : n.gpus) ni->gpus.push_back(std::make_unique<wire::GpuInfoT>(g));
    ni->cpus = n.cpus;
    ni->memory_mb = n.memory_mb;
    ni->last_heartbeat_ms = n.last_heartbeat_ms;
    ni->storage = n.storage.verdict;
    ni->labels = FormatNodeLabels(n.labels);
    ni->label_edits = FormatNodeLabelEdits(n.label_edits);
    ni->unhealthy = n.unhealthy;
    for (const auto& [index, why] : n.unhealthy_gpus) {
      auto gpu = std::make_unique<wire::UnhealthyGpuT>();
      gpu->index = index;
      gpu->reason = why;
      ni->unhealthy_gpus.push_back(std::move(gpu));
    }
    ni->cordoned_gpus.assign(n.cordoned_gpus.begin(), n.cordoned_gpus.end());
    ni->admin_reason = n.cordon_note.reason;
    ni->admin_by = n.cordon_note.by;
    ni->admin_since_ms = n.cordon_note.since_ms;
    auto u = use.find(id);
    if (u != use.end()) {
      ni->gpus_used = u->second.gpus;
      std::sort(ni->gpus_used.begin(), ni->gpus_used.end());
      ni->cpus_used = u->second.cpus;
      ni->memory_used_mb = u->second.mem;
      ni->replicas = u->second.replicas;
      ni->holders = std::move(u->second.holders);
      std::sort(ni->holders.begin(), ni->holders.end(), [](const auto& a, const auto& b) {
        return std::tie(a->job, a->replica) < std::tie(b->job, b->replica);
      });
    }
    if (auto it = usage.find(id); it != usage.end()) {
      ni->usage = std::make_unique<wire::NodeUsageT>(std::move(it->second));
    }
    ni->state = NodeStateName(n, ni->replicas > 0);
    ni->admin = NodeAdminLabel(n, ni->replicas > 0);
    list.nodes.push_back(std::move(ni));
  }
  return list;
}

}  // namespace cohort::coordinator
