// cohort-round-bench: the coordinator's whole scheduling round (coordinator/placement_round.h:
// the cluster view built from every node and job record, restarts, queue use, the Scheduler, the
// waiting reasons), in process and at any scale, without sockets or simulated agents: K nodes of
// G GPUs registered in a NodeRegistry, N jobs submitted to a JobController (1/2/4 replicas x
// 1/2/4/8 GPUs, seeded), one round to fill the cluster, then --rounds rounds timed as the
// coordinator times them (wall and the thread's CPU). cohort-control-plane-bench measures the
// same round inside a real coordinator with simulated agents; this one isolates it, so that the
// 10,000-node, 100,000-job target can be worked on in seconds.
// Never run by ctest.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/common/flag_pairs.h"
#include "bench/common/percentile.h"
#include "bench/common/sim_agents.h"
#include "common/job_spec.h"
#include "coordinator/job_controller.h"
#include "coordinator/node_registry.h"
#include "coordinator/placement_round.h"
#include "coordinator/queue_config.h"
#include "coordinator/scheduler.h"

namespace {

using namespace cohort;
using namespace cohort::coordinator;
using cohort::bench::Percentile;

struct Args {
  int nodes = 10000;
  int gpus = 8;
  int jobs = 100000;
  int rounds = 10;
  int port_min = 20000;
  int port_max = 29999;
};

void Register(NodeRegistry& registry, const std::string& id, int gpus) {
  wire::RegisterAgentT reg = bench::SimRegistration(id, gpus);
  flatbuffers::FlatBufferBuilder fbb;
  fbb.Finish(wire::RegisterAgent::Pack(fbb, &reg));
  registry.Register(*flatbuffers::GetRoot<wire::RegisterAgent>(fbb.GetBufferPointer()), id, 0);
}

}  // namespace

constexpr char kUsage[] =
    "usage: cohort-round-bench [--nodes 10000] [--gpus 8] [--jobs 100000] [--rounds 10] "
    "[--port-min 20000] [--port-max 29999]\n";

int main(int argc, char** argv) {
  if (cohort::bench::AsksForHelp(argc, argv, 1)) return std::fputs(kUsage, stdout), 0;
  Args a;
  const std::string bad = cohort::bench::ParseFlagPairs(argc, argv, 1,
                                                        {{"--nodes", &a.nodes},
                                                         {"--gpus", &a.gpus},
                                                         {"--jobs", &a.jobs},
                                                         {"--rounds", &a.rounds},
                                                         {"--port-min", &a.port_min},
                                                         {"--port-max", &a.port_max}});
  if (!bad.empty()) return std::fprintf(stderr, "%s\n%s", bad.c_str(), kUsage), 2;
  for (int v : {a.nodes, a.gpus, a.jobs, a.rounds}) {
    if (v <= 0) return std::fprintf(stderr, "every count must be positive\n%s", kUsage), 2;
  }
  if (a.port_min <= 0 || a.port_max < a.port_min || a.port_max > 65535) {
    return std::fprintf(stderr, "bad port range\n%s", kUsage), 2;
  }

  spdlog::set_level(spdlog::level::warn);  // not a line per node and per placement
  NodeRegistry nodes(10'000);
  for (int n = 0; n < a.nodes; ++n) Register(nodes, "node-" + std::to_string(n), a.gpus);
  JobControllerOptions options;
  options.default_output_base = "/tmp/cohort-round-bench";
  JobController jobs(options, &nodes);
  // One parsed spec per shape, copied for each job (parsing 100,000 specs is not what is timed).
  std::vector<JobSpec> shapes;
  for (int reps : {1, 2, 4}) {
    for (int g : {1, 2, 4, 8}) {
      auto spec = ParseJobSpec(bench::SimJobYaml("shape", reps, g));
      if (!spec.ok()) return std::fprintf(stderr, "%s\n", spec.status().ToString().c_str()), 1;
      shapes.push_back(*spec);
    }
  }
  std::mt19937 rng(1);
  for (int i = 0; i < a.jobs; ++i) {
    JobSpec spec = shapes[rng() % shapes.size()];
    spec.name = "job" + std::to_string(i);
    jobs.Submit(std::move(spec), "", i);
  }
  const QueueConfig queues;
  const Scheduler scheduler(SchedulerOptions{});
  int64_t now = a.jobs;
  PlacementRoundStats fill =
      RunPlacementRound(jobs, nodes, scheduler, queues, a.port_min, a.port_max, ++now);
  size_t running = 0;
  for (const auto& [seq, job] : jobs.active()) running += job->state != JobState::QUEUED;
  (void)jobs.TakeCommands();
  std::printf("round bench: %d nodes x %d GPUs, %d jobs, ports %d-%d\n", a.nodes, a.gpus, a.jobs,
              a.port_min, a.port_max);
  std::printf("  filling round: %zu jobs placed, %.1f ms wall, %.1f ms CPU\n", running,
              fill.wall_us / 1000.0, fill.cpu_us / 1000.0);

  std::vector<double> wall, cpu;
  size_t queued = 0;
  for (int r = 0; r < a.rounds; ++r) {
    PlacementRoundStats s =
        RunPlacementRound(jobs, nodes, scheduler, queues, a.port_min, a.port_max, ++now);
    (void)jobs.TakeCommands();
    wall.push_back(s.wall_us / 1000.0);
    cpu.push_back(s.cpu_us / 1000.0);
    queued = s.queued;
  }
  std::printf(
      "  steady rounds (%zu queued, %zu running): wall median %.1f ms (min %.1f, max %.1f), CPU "
      "median %.1f ms (min %.1f, max %.1f) over %d rounds\n",
      queued, running, Percentile(wall, 0.5), Percentile(wall, 0), Percentile(wall, 1),
      Percentile(cpu, 0.5), Percentile(cpu, 0), Percentile(cpu, 1), a.rounds);
  return 0;
}
