// cohort-scheduler-bench: the cost of one Scheduler round (coordinator/scheduler.h) with queues,
// quotas, fair share and preemption, at the scale of the control-plane target: K nodes of G GPUs,
// N queued jobs spread over Q queues, and the cluster mostly full of running jobs (some queues
// borrowing beyond their quotas), so that rounds search for victims as well as for room. Each
// round starts from the same state (a fresh copy of the view); the figure is the median, with the
// minimum and maximum, of --rounds rounds of Scheduler::Schedule() alone (building the view from
// the job records is the coordinator's part: cohort-control-plane-bench measures whole rounds).
//
// The mix (seeded, so every run is the same): queues 0..Q-1 with equal GPU quotas summing to the
// cluster and weights 1..Q; running jobs of 1/2/4/8 GPUs fill all but about 2% of the GPUs, half
// the queues using 1.5x their quota and the others 0.5x; queued jobs of 1/2/4 replicas x 1/2/4/8
// GPUs with priorities low/normal/high (100/500/1000) in the proportions 40/50/10%.
// --numa-nodes M names each node's GPUs on M NUMA nodes (GPUs 0..G/M-1 on the first, ...), as
// agents on two-socket servers do, so that each replica's GPUs are picked by NUMA node
// (PickGpus); 0, the default, names none (lowest free first).
// Never run by ctest.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/common/flag_pairs.h"
#include "coordinator/scheduler.h"

namespace {

using namespace cohort::coordinator;
using Clock = std::chrono::steady_clock;

struct Args {
  int nodes = 1000;
  int gpus = 8;
  int jobs = 10000;
  int queues = 8;
  int rounds = 20;
  int numa_nodes = 0;
};

}  // namespace

constexpr char kUsage[] =
    "usage: cohort-scheduler-bench [--nodes 1000] [--gpus 8] [--jobs 10000] [--queues 8] "
    "[--rounds 20] [--numa-nodes 0]\n";

int main(int argc, char** argv) {
  if (cohort::bench::AsksForHelp(argc, argv, 1)) return std::fputs(kUsage, stdout), 0;
  Args a;
  const std::string bad = cohort::bench::ParseFlagPairs(argc, argv, 1,
                                                        {{"--nodes", &a.nodes},
                                                         {"--gpus", &a.gpus},
                                                         {"--jobs", &a.jobs},
                                                         {"--queues", &a.queues},
                                                         {"--rounds", &a.rounds},
                                                         {"--numa-nodes", &a.numa_nodes}});
  if (!bad.empty()) return std::fprintf(stderr, "%s\n%s", bad.c_str(), kUsage), 2;
  for (int v : {a.nodes, a.gpus, a.jobs, a.queues, a.rounds}) {
    if (v <= 0) return std::fprintf(stderr, "every count must be positive\n%s", kUsage), 2;
  }
  if (a.numa_nodes < 0 || a.numa_nodes > a.gpus) {
    return std::fprintf(stderr, "--numa-nodes: 0 to --gpus\n%s", kUsage), 2;
  }
  std::mt19937 rng(11);
  const int64_t cluster_gpus = static_cast<int64_t>(a.nodes) * a.gpus;
  ScheduleInput input;
  input.cluster_gpus = cluster_gpus;
  input.cluster_cpus = static_cast<int64_t>(a.nodes) * 64;
  for (int q = 0; q < a.queues; ++q) {
    input.queues.push_back(QueueState{cluster_gpus / a.queues, -1, 1.0 + q, 0, 0});
  }

  // The cluster, filled by running jobs (each on one node) up to each queue's target use.
  ClusterView base(20000, 60000);
  for (int n = 0; n < a.nodes; ++n) {
    NodeFree f;
    f.node_id = "node-" + std::to_string(n);
    for (int g = 0; g < a.gpus; ++g) {
      f.free_gpus.push_back(g);
      if (a.numa_nodes > 0) f.gpu_numa[g] = g * a.numa_nodes / a.gpus;
    }
    f.free_cpus = 64;
    f.memory_unlimited = true;
    base.nodes.push_back(std::move(f));
  }
  std::vector<int64_t> target(static_cast<size_t>(a.queues));
  for (int q = 0; q < a.queues; ++q) {
    target[static_cast<size_t>(q)] = (q % 2 == 0 ? 3 : 1) * (cluster_gpus / a.queues) / 2;
  }
  int64_t fill = cluster_gpus * 98 / 100;
  int64_t used = 0;
  int node = 0, job_id = 0;
  for (int q = 0; used < fill && node < a.nodes; q = (q + 1) % a.queues) {
    QueueState& qs = input.queues[static_cast<size_t>(q)];
    if (qs.gpus_used >= target[static_cast<size_t>(q)]) continue;
    int g = 1 << (rng() % 4);
    NodeFree* f = &base.nodes[static_cast<size_t>(node)];
    if (f->free_gpus.empty()) {
      if (++node >= a.nodes) break;
      f = &base.nodes[static_cast<size_t>(node)];
    }
    g = std::min<int>(g, static_cast<int>(f->free_gpus.size()));
    RunningJob r;
    r.name = "run-" + std::to_string(job_id++);
    r.queue = q;
    int pick = static_cast<int>(rng() % 10);
    r.priority = pick < 4 ? 100 : pick < 9 ? 500 : 1000;
    r.start_ms = job_id;
    HeldSlot h;
    h.node = node;
    h.gpus.assign(f->free_gpus.begin(), f->free_gpus.begin() + g);
    f->free_gpus.erase(f->free_gpus.begin(), f->free_gpus.begin() + g);
    h.cpus = 1;
    f->free_cpus -= 1;
    r.held.push_back(h);
    r.gpus = g;
    r.cpus = 1;
    qs.gpus_used += g;
    qs.cpus_used += 1;
    used += g;
    input.running.push_back(std::move(r));
  }
  for (int p = 0; p < 20000 && base.ports_free(0) > 0; p += 3) base.MarkPortUsed(0, 20000 + p);

  std::vector<JobRequest> queue;
  for (int i = 0; i < a.jobs; ++i) {
    JobRequest r;
    r.name = "q" + std::to_string(i);
    r.waiting_since_ms = i;
    r.queue = static_cast<int>(rng() % static_cast<unsigned>(a.queues));
    int pick = static_cast<int>(rng() % 10);
    r.priority = pick < 4 ? 100 : pick < 9 ? 500 : 1000;
    int reps = 1 << (rng() % 3), g = 1 << (rng() % 4);
    r.replicas.assign(static_cast<size_t>(reps), ReplicaDemand{g, 1, 0});
    queue.push_back(std::move(r));
  }

  Scheduler scheduler({5 * 60 * 1000});
  std::vector<double> times;
  ScheduleResult first;
  for (int round = 0; round < a.rounds; ++round) {
    ClusterView view = base;
    auto t0 = Clock::now();
    ScheduleResult result = scheduler.Schedule(queue, view, 1000, input);
    times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (round == 0) first = std::move(result);
  }
  size_t victims = 0;
  for (const auto& p : first.preemptions) victims += p.victims.size();
  std::sort(times.begin(), times.end());
  std::printf(
      "scheduler round: %d nodes x %d GPUs (%zu running jobs, %lld GPUs free), %d queued jobs in "
      "%d queues\n",
      a.nodes, a.gpus, input.running.size(), static_cast<long long>(cluster_gpus - used), a.jobs,
      a.queues);
  std::printf("  placed %zu, %zu preemptions (%zu victims), %zu placement searches\n",
              first.placed.size(), first.preemptions.size(), victims, first.searches);
  std::printf("  round time over %d rounds: median %.2f ms, min %.2f ms, max %.2f ms\n", a.rounds,
              times[times.size() / 2], times.front(), times.back());
  return 0;
}
