// QueueConfig is the coordinator's set of job queues and priority classes (the scheduling policy
// they drive: coordinator/scheduler.h). It comes from the coordinator's config file or flags:
//   queue = NAME [gpus=N] [cpus=N] [weight=W] [gpu-idle-limit=D] [cpus-per-gpu=N]
//           [memory-mb-per-gpu=N]                  (repeated; one queue each)
//   priority-class = NAME=VALUE                    (repeated)
//   cpus-per-gpu = N, memory-mb-per-gpu = N        (the queues' defaults where they give none)
// A queue's gpus/cpus are its quota: what it is guaranteed, and may reclaim by preemption from
// queues that borrow; omitted gpus is a quota of 0 GPUs (the queue only borrows), omitted cpus is
// no CPU quota (CPUs do not count against it). weight (default 1, > 0) is its share of the idle
// capacity that queues borrow. gpu-idle-limit (a duration, at least 1s; none by default) is the
// longest the GPUs of a job of the queue may all sit idle (NVML's utilization below 1%) before the
// job fails, whatever its own scheduling says (coordinator/watchdog.h, "The queue's GPU idle
// limit"): an admin's bound on GPUs held and not used. cpus-per-gpu and memory-mb-per-gpu are
// what a replica with GPUs gets for each GPU where its job file gives no cpus or memory_mb
// (Slurm's DefCpuPerGPU and DefMemPerGPU; on Vertex a machine type brings them with its GPUs):
// without them a GPU replica gets 1 CPU (its cgroup's cpu.max) and no memory limit, which starves
// a stock script's data loader workers. 0 (or none given) is no default; a queue's own value,
// 0 included, wins over the coordinator-wide one. A queue named `default` always exists (quota
// 0 GPUs, weight 1 unless configured). Priority classes low=100, normal=500 and high=1000 always
// exist; configured classes add to them or change their values. Jobs name a queue and a class
// (scheduling.queue, scheduling.priority; common/job_spec.h); names the coordinator does not know
// are refused at submit.
//
// Thread safety: immutable after parsing.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "common/status.h"

namespace cohort::coordinator {

struct QueueDef {
  std::string name;
  int64_t gpu_quota = 0;   // GPUs it is guaranteed
  int64_t cpu_quota = -1;  // CPUs it is guaranteed; -1: CPUs are not part of its quota
  double weight = 1.0;
  int64_t gpu_idle_limit_ms = 0;  // gpu-idle-limit; 0: none
  int cpus_per_gpu = 0;           // cpus-per-gpu; 0: none
  int64_t memory_mb_per_gpu = 0;  // memory-mb-per-gpu; 0: none
};

// The coordinator-wide defaults per GPU (--cpus-per-gpu, --memory-mb-per-gpu), for queues that
// give none of their own.
struct PerGpuDefaults {
  int cpus = 0;
  int64_t memory_mb = 0;
};

class QueueConfig {
 public:
  // Just the default queue and the built-in priority classes.
  QueueConfig();
  // From the values of the `queue` and `priority-class` options. Errors name the option and the
  // value ("--queue 'research gpus=x': gpus: expected a count, got 'x'").
  static StatusOr<QueueConfig> Parse(const std::vector<std::string>& queues,
                                     const std::vector<std::string>& priority_classes,
                                     PerGpuDefaults per_gpu = {});

  // Queues in order: `default` first, then as configured.
  const std::vector<QueueDef>& queues() const { return queues_; }
  // Index into queues(), or -1.
  int FindQueue(const std::string& name) const;
  // The class's value; nullopt for an unknown class.
  std::optional<int> FindPriority(const std::string& name) const;
  const std::map<std::string, int>& priority_classes() const { return priorities_; }
  // "default, research" / "low (100), normal (500), high (1000)", for error messages.
  std::string QueueNames() const;
  std::string PriorityNames() const;
  // The class name a value has, or the number when no class has it.
  std::string PriorityName(int value) const;

 private:
  std::vector<QueueDef> queues_;
  std::map<std::string, int> priorities_;
};

// Fills in what the job file left out of each pool with GPUs from its queue's defaults per GPU:
// cpus = gpus x cpus-per-gpu (at most Resources::kMaxCpus), memory_mb = gpus x memory-mb-per-gpu,
// each only where the pool gave none and the queue has that default; what it fills in counts as
// given (JobSpecToYaml writes it, so the stored spec says what each replica has). A job of a
// queue the coordinator does not know is left as it is (it is refused anyway). Returns a line per
// pool changed, for the submitter and the job's events: "pool worker: cpus 32 and memory_mb
// 262144 per replica, for its 4 GPUs (queue research's defaults: 8 CPUs and 65536 MB per GPU)";
// none when nothing changed.
std::vector<std::string> ApplyResourceDefaults(const QueueConfig& queues, JobSpec* spec);

}  // namespace cohort::coordinator
