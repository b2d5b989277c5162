// Queues, quotas, fair share, priorities, preemption and the reservation rule of the Scheduler
// (coordinator/scheduler.h), driven round by round: the test plays the coordinator, applying each
// round's placements and preemptions to its own model of the cluster (which jobs run where).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/job_spec.h"
#include "coordinator/queue_config.h"
#include "coordinator/scheduler.h"

namespace cohort::coordinator {
namespace {

// A small cluster and its jobs, the way PlacementRound sees them.
class Sim {
 public:
  struct Job {
    std::string name;
    int queue = 0;
    int priority = 0;
    int replicas = 1;
    int gpus_each = 1;
    int64_t submitted = 0;
    bool running = false;
    bool stopping = false;  // preempted, its replicas not yet gone
    std::vector<HeldSlot> held = {};
    std::vector<std::string> waiting_for = {};  // victims it preempted
    int preempted = 0;                          // times it was preempted
  };

  Sim(std::vector<int> node_gpus, std::vector<QueueState> queues)
      : node_gpus_(std::move(node_gpus)), queues_(std::move(queues)) {}

  void Submit(const std::string& name, int queue, int priority, int replicas, int gpus_each) {
    jobs_.push_back(Job{name, queue, priority, replicas, gpus_each, now_});
  }
  Job& Find(const std::string& name) {
    for (auto& j : jobs_) {
      if (j.name == name) return j;
    }
    ADD_FAILURE() << "no job " << name;
    return jobs_.front();
  }
  void Finish(const std::string& name) {
    jobs_.erase(
        std::remove_if(jobs_.begin(), jobs_.end(), [&](const Job& j) { return j.name == name; }),
        jobs_.end());
  }
  // Every stopping job's replicas are gone (their grace period passed).
  void StopPreempted() {
    for (auto& j : jobs_) {
      if (j.stopping) {
        j.stopping = false;
        j.held.clear();
      }
    }
  }
  int64_t GpusUsed(int queue) const {
    int64_t n = 0;
    for (const auto& j : jobs_) {
      if (j.queue != queue) continue;
      for (const auto& h : j.held) n += static_cast<int64_t>(h.gpus.size());
    }
    return n;
  }
  bool Waiting(int queue) const {
    return std::any_of(jobs_.begin(), jobs_.end(),
                       [&](const Job& j) { return j.queue == queue && !j.running; });
  }

  // One round; applies placements and preemptions. Returns the round's result.
  ScheduleResult Round(int64_t starvation_limit_ms = 1'000'000) {
    now_ += 1000;
    ClusterView view(20000, 29999);
    for (size_t n = 0; n < node_gpus_.size(); ++n) {
      NodeFree f;
      f.node_id = "n" + std::to_string(n);
      for (int g = 0; g < node_gpus_[n]; ++g) f.free_gpus.push_back(g);
      f.free_cpus = 64;
      f.memory_unlimited = true;
      view.nodes.push_back(std::move(f));
    }
    ScheduleInput input;
    input.queues = queues_;
    for (int g : node_gpus_) input.cluster_gpus += g;
    input.cluster_cpus = 64 * static_cast<int64_t>(node_gpus_.size());
    std::vector<Job*> running, queued;
    std::vector<JobRequest> requests;
    for (auto& j : jobs_) {
      for (const auto& h : j.held) {
        NodeFree& f = view.nodes[static_cast<size_t>(h.node)];
        for (int g : h.gpus)
          f.free_gpus.erase(std::find(f.free_gpus.begin(), f.free_gpus.end(), g));
        f.free_cpus -= h.cpus;
        input.queues[static_cast<size_t>(j.queue)].gpus_used += static_cast<int64_t>(h.gpus.size());
        input.queues[static_cast<size_t>(j.queue)].cpus_used += h.cpus;
      }
      if (j.running) {
        RunningJob r{.name = j.name,
                     .queue = j.queue,
                     .priority = j.priority,
                     .start_ms = j.submitted,
                     .held = j.held};
        for (const auto& h : j.held) {
          r.gpus += static_cast<int64_t>(h.gpus.size());
          r.cpus += h.cpus;
        }
        running.push_back(&j);
        input.running.push_back(std::move(r));
      } else {
        JobRequest q;
        q.name = j.name;
        q.waiting_since_ms = j.submitted;
        q.queue = j.queue;
        q.priority = j.priority;
        q.schedulable = !j.stopping;
        q.replicas.assign(static_cast<size_t>(j.replicas), ReplicaDemand{j.gpus_each, 1, 0});
        bool victims_gone = std::none_of(j.waiting_for.begin(), j.waiting_for.end(),
                                         [&](const std::string& v) { return Find(v).stopping; });
        q.may_preempt = victims_gone;
        q.nominated = !j.waiting_for.empty() && victims_gone;
        queued.push_back(&j);
        requests.push_back(std::move(q));
      }
    }
    Scheduler scheduler({starvation_limit_ms});
    ScheduleResult result = scheduler.Schedule(requests, view, now_, input);
    for (const auto& p : result.placed) {
      Job& j = *queued[p.request];
      j.running = true;
      j.waiting_for.clear();
      for (const auto& s : p.replicas) j.held.push_back(HeldSlot{s.node, s.gpus, 1, 0});
    }
    for (const auto& p : result.preemptions) {
      Job& by = *queued[p.request];
      for (size_t v : p.victims) {
        Job& victim = *running[v];
        victim.running = false;
        victim.stopping = true;
        ++victim.preempted;
        by.waiting_for.push_back(victim.name);
      }
    }
    return result;
  }

  // The preempted jobs' replicas are gone; then one round.
  ScheduleResult RoundAfterStops() {
    StopPreempted();
    return Round();
  }

  std::vector<Job>& jobs() { return jobs_; }

 private:
  std::vector<int> node_gpus_;
  std::vector<QueueState> queues_;
  std::vector<Job> jobs_;
  int64_t now_ = 0;
};

QueueState Quota(int64_t gpus, double weight = 1.0) { return QueueState{gpus, -1, weight, 0, 0}; }

// How many jobs round `r` preempted, for its only preemption (a failure when there is not
// exactly one).
size_t VictimsOfTheOnlyPreemption(const ScheduleResult& r) {
  EXPECT_EQ(r.preemptions.size(), 1u);
  return r.preemptions.size() == 1 ? r.preemptions[0].victims.size() : 0;
}

std::vector<std::string> Names(const ScheduleResult& r, const std::vector<JobRequest>& q) {
  std::vector<std::string> out;
  for (const auto& p : r.placed) out.push_back(q[p.request].name);
  return out;
}

TEST(QueueSchedulingTest, WithinQuotaJobsGoBeforeBorrowersAndFairShareSplitsTheRest) {
  // 2 nodes x 8 GPUs; queue a: quota 4, weight 1; queue b: quota 4, weight 3.
  Sim sim({8, 8}, {Quota(4, 1.0), Quota(4, 3.0)});
  for (int i = 0; i < 16; ++i) sim.Submit("a" + std::to_string(i), 0, 500, 1, 1);
  for (int i = 0; i < 16; ++i) sim.Submit("b" + std::to_string(i), 1, 500, 1, 1);
  sim.Round();
  // Each gets its quota (4), then the 8 idle GPUs are lent in proportion to the weights: b borrows
  // about three times what a borrows.
  EXPECT_EQ(sim.GpusUsed(0) + sim.GpusUsed(1), 16);
  EXPECT_EQ(sim.GpusUsed(0) - 4, 2) << "a borrowed";
  EXPECT_EQ(sim.GpusUsed(1) - 4, 6) << "b borrowed";
}

TEST(QueueSchedulingTest, AQueueNeverExceedsItsQuotaWhileAnotherQueueWaitsWithinItsOwn) {
  Sim sim({4, 4}, {Quota(4), Quota(4)});
  // a fills the whole cluster while b is idle (borrowing is allowed then).
  for (int i = 0; i < 8; ++i) sim.Submit("a" + std::to_string(i), 0, 500, 1, 1);
  sim.Round();
  EXPECT_EQ(sim.GpusUsed(0), 8);
  // b arrives: its quota is reclaimed by preempting a's borrowed jobs, never a's own four.
  for (int i = 0; i < 6; ++i) sim.Submit("b" + std::to_string(i), 1, 100, 1, 1);
  for (int round = 0; round < 4; ++round) {
    ScheduleResult r = sim.Round();
    sim.StopPreempted();
    EXPECT_GE(sim.GpusUsed(0), 4) << "round " << round << ": a lost part of its own quota";
  }
  EXPECT_EQ(sim.GpusUsed(1), 4);
  EXPECT_EQ(sim.GpusUsed(0), 4);
  // Once b waits (beyond its quota: 2 jobs), a stays within its quota as long as b waits ...
  EXPECT_TRUE(sim.Waiting(1));
  // ... and preempted jobs of a wait too: nobody borrows a full cluster.
  int preempted = 0;
  for (const auto& j : sim.jobs()) preempted += j.preempted;
  EXPECT_EQ(preempted, 4);
}

TEST(QueueSchedulingTest, BorrowedCapacityIsReturnedByPreemptionWhateverTheBorrowersPriority) {
  Sim sim({8}, {Quota(4), Quota(4)});
  sim.Submit("a-high", 0, 1000, 1, 8);  // borrows 4 of b's quota, at a high priority
  sim.Round();
  ASSERT_TRUE(sim.Find("a-high").running);
  sim.Submit("b-low", 1, 100, 1, 4);  // within b's quota
  ScheduleResult r = sim.Round();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_TRUE(sim.Find("a-high").stopping);
  EXPECT_FALSE(sim.Find("b-low").running) << "placed only once its victim is gone";
  sim.StopPreempted();
  r = sim.Round();
  EXPECT_TRUE(sim.Find("b-low").running);
  EXPECT_FALSE(sim.Find("a-high").running);  // 4 GPUs left, it needs 8
}

TEST(QueueSchedulingTest, ABorrowerDoesNotPreemptAnotherQueue) {
  Sim sim({8}, {Quota(0), Quota(8)});
  sim.Submit("b-low", 1, 100, 1, 8);
  sim.Round();
  sim.Submit("a-high", 0, 1000, 1, 8);  // a has no quota: it may only borrow
  ScheduleResult r = sim.Round();
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_TRUE(sim.Find("b-low").running);
}

TEST(QueueSchedulingTest, HigherPriorityPreemptsTheFewestLowerPriorityJobsOfItsQueue) {
  // One node of 8 GPUs: six 1-GPU jobs and one 2-GPU job, all low priority.
  Sim sim({8}, {Quota(0)});
  for (int i = 0; i < 6; ++i) sim.Submit("small" + std::to_string(i), 0, 100, 1, 1);
  sim.Submit("pair", 0, 100, 1, 2);
  sim.Round();
  ASSERT_EQ(sim.GpusUsed(0), 8);
  // A 2-GPU high-priority job: one victim (the 2-GPU job) is enough, not two 1-GPU jobs.
  sim.Submit("urgent", 0, 1000, 1, 2);
  ScheduleResult r = sim.Round();
  EXPECT_EQ(VictimsOfTheOnlyPreemption(r), 1u);
  EXPECT_TRUE(sim.Find("pair").stopping);
  // A 3-GPU one: the pair is queued again, so the fewest victims are three 1-GPU jobs.
  sim.RoundAfterStops();
  EXPECT_TRUE(sim.Find("urgent").running);
  sim.Submit("urgent3", 0, 1000, 1, 3);
  r = sim.Round();
  EXPECT_EQ(VictimsOfTheOnlyPreemption(r), 3u);
  // Equal priorities never preempt each other.
  sim.RoundAfterStops();
  ASSERT_TRUE(sim.Find("urgent3").running);
  sim.Submit("peer", 0, 1000, 1, 8);
  r = sim.Round();
  EXPECT_TRUE(r.preemptions.empty()) << "only lower priorities may be preempted";
  EXPECT_TRUE(sim.Find("urgent").running);
  EXPECT_TRUE(sim.Find("urgent3").running);
}

TEST(QueueSchedulingTest, FewestVictimsAcrossNodesWithAPruningPass) {
  // Two nodes of 4 GPUs. One: a 4-GPU low job; the other: four 1-GPU low jobs started later (so
  // preferred as victims). A 4-GPU high job preempts the single 4-GPU job, not four.
  Sim sim({4, 4}, {Quota(0)});
  sim.Submit("whole", 0, 100, 1, 4);
  sim.Round();
  for (int i = 0; i < 4; ++i) sim.Submit("bit" + std::to_string(i), 0, 100, 1, 1);
  sim.Round();
  ASSERT_EQ(sim.GpusUsed(0), 8);
  sim.Submit("high", 0, 1000, 1, 4);
  ScheduleResult r = sim.Round();
  EXPECT_EQ(VictimsOfTheOnlyPreemption(r), 1u);
  EXPECT_TRUE(sim.Find("whole").stopping) << "the preferred victims are four; one job suffices";
  // A gang of two 3-GPU replicas needs room on both nodes: the set keeps only what is needed.
  sim.RoundAfterStops();
  ASSERT_TRUE(sim.Find("high").running);
  sim.Submit("gang", 0, 2000, 2, 3);
  r = sim.Round();
  ASSERT_EQ(r.preemptions.size(), 1u);
  std::set<std::string> victims;
  for (auto& j : sim.jobs()) {
    if (j.stopping) victims.insert(j.name);
  }
  // high (4 GPUs on one node) and three of the four 1-GPU jobs on the other.
  EXPECT_EQ(victims.size(), 4u);
  EXPECT_TRUE(victims.count("high"));
  sim.RoundAfterStops();
  EXPECT_TRUE(sim.Find("gang").running);
}

TEST(QueueSchedulingTest, PreemptorIsPlacedFirstOnceItsVictimsAreGone) {
  Sim sim({4}, {Quota(0)});
  sim.Submit("low", 0, 100, 1, 4);
  sim.Round();
  sim.Submit("high", 0, 1000, 1, 4);
  ScheduleResult r = sim.Round();
  ASSERT_EQ(r.preemptions.size(), 1u);
  // While the victim stops, the preemptor neither preempts again nor is placed.
  r = sim.Round();
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_TRUE(r.placed.empty());
  sim.StopPreempted();
  sim.Submit("another-low", 0, 100, 1, 4);
  sim.Round();
  EXPECT_TRUE(sim.Find("high").running);
  EXPECT_FALSE(sim.Find("low").running);
  EXPECT_FALSE(sim.Find("another-low").running);
}

TEST(QueueSchedulingTest, ReservationHoldsBackSmallJobsOfItsQueueAndBorrowers) {
  // 8 GPUs; queue a (quota 8) runs a 6-GPU job; queue b (quota 0) borrows.
  Sim sim({8}, {Quota(8), Quota(0)});
  sim.Submit("a-running", 0, 500, 1, 6);
  sim.Round();
  sim.Submit("a-big", 0, 500, 1, 8);  // waits for the whole node
  sim.Submit("a-small", 0, 500, 1, 1);
  sim.Submit("b-small", 1, 500, 1, 1);
  // Before the starvation limit: small jobs backfill around the big one.
  ScheduleResult r = sim.Round(/*starvation_limit_ms=*/5'000);
  EXPECT_TRUE(sim.Find("a-small").running);
  EXPECT_TRUE(sim.Find("b-small").running);
  EXPECT_TRUE(r.starving_job.empty());
  sim.Finish("a-small");
  sim.Finish("b-small");
  // After it: the big job holds a reservation; neither its queue's later jobs nor borrowers start.
  for (int i = 0; i < 6; ++i) sim.Round(5'000);
  sim.Submit("a-small2", 0, 500, 1, 1);
  sim.Submit("b-small2", 1, 500, 1, 1);
  r = sim.Round(5'000);
  EXPECT_EQ(r.starving_job, "a-big");
  EXPECT_FALSE(sim.Find("a-small2").running);
  EXPECT_FALSE(sim.Find("b-small2").running);
  ASSERT_EQ(r.waiting_behind.size(), 3u);
  // Once the running job ends, the big job gets the node.
  sim.Finish("a-running");
  sim.Round(5'000);
  EXPECT_TRUE(sim.Find("a-big").running);
}

TEST(QueueSchedulingTest, ReservationLetsOtherQueuesRunWithinTheirQuota) {
  Sim sim({8}, {Quota(4), Quota(4)});
  sim.Submit("a-running", 0, 500, 1, 3);
  sim.Round();
  sim.Submit("a-big", 0, 500, 1, 8);
  for (int i = 0; i < 6; ++i) sim.Round(2'000);
  sim.Submit("b-within", 1, 500, 1, 2);
  ScheduleResult r = sim.Round(2'000);
  EXPECT_EQ(r.starving_job, "a-big");
  EXPECT_TRUE(sim.Find("b-within").running);
}

TEST(QueueSchedulingTest, OneQueueWithoutQuotaKeepsPriorityThenSubmitOrder) {
  ClusterView view(20000, 20999);
  NodeFree n;
  n.node_id = "n";
  n.free_gpus = {0, 1};
  n.free_cpus = 8;
  n.memory_unlimited = true;
  view.nodes.push_back(n);
  std::vector<JobRequest> q(3);
  for (int i = 0; i < 3; ++i) {
    q[i].name = "j" + std::to_string(i);
    q[i].replicas = {ReplicaDemand{1, 1, 0}};
  }
  q[2].priority = 10;
  Scheduler s({1'000'000});
  ScheduleResult r = s.Schedule(q, view, 0);
  EXPECT_EQ(Names(r, q), (std::vector<std::string>{"j2", "j0"}));
}

TEST(QueueConfigTest, ParsesQueuesAndClassesAndNamesWhatIsWrong) {
  auto c = QueueConfig::Parse({"research gpus=16 cpus=128 weight=2", "prod gpus=8"},
                              {"urgent=5000", "low=1"});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->queues().size(), 3u);
  EXPECT_EQ(c->queues()[0].name, "default");
  EXPECT_EQ(c->queues()[0].gpu_quota, 0);
  EXPECT_EQ(c->queues()[1].name, "research");
  EXPECT_EQ(c->queues()[1].gpu_quota, 16);
  EXPECT_EQ(c->queues()[1].cpu_quota, 128);
  EXPECT_DOUBLE_EQ(c->queues()[1].weight, 2.0);
  EXPECT_EQ(c->queues()[2].cpu_quota, -1);
  EXPECT_EQ(c->FindQueue("prod"), 2);
  EXPECT_EQ(c->FindQueue("nope"), -1);
  EXPECT_EQ(c->FindPriority("urgent").value_or(-1), 5000);
  EXPECT_EQ(c->FindPriority("low").value_or(-1), 1);
  EXPECT_EQ(c->FindPriority("high").value_or(-1), 1000);
  EXPECT_FALSE(c->FindPriority("nope").has_value());
  EXPECT_EQ(c->queues()[1].gpu_idle_limit_ms, 0);
  auto idle = QueueConfig::Parse({"notebooks gpus=8 gpu-idle-limit=2h"}, {});
  ASSERT_TRUE(idle.ok()) << idle.status().ToString();
  EXPECT_EQ(idle->queues()[1].gpu_idle_limit_ms, 7'200'000);
  for (const char* limit : {"soon", "500ms", ""}) {
    auto refused = QueueConfig::Parse({std::string("notebooks gpu-idle-limit=") + limit}, {});
    ASSERT_FALSE(refused.ok()) << limit;
    EXPECT_NE(refused.status().message().find(
                  "gpu-idle-limit: expected a duration of at least 1s (30m, 2h), got '" +
                  std::string(limit) + "'"),
              std::string::npos)
        << refused.status().ToString();
  }

  auto bad = QueueConfig::Parse({"research gpus=x"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpus: expected a count"), std::string::npos);
  bad = QueueConfig::Parse({"research weight=0"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("weight"), std::string::npos);
  bad = QueueConfig::Parse({"a gpus=1", "a gpus=2"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("given twice"), std::string::npos);
  bad = QueueConfig::Parse({"1bad"}, {});
  EXPECT_FALSE(bad.ok());
  bad = QueueConfig::Parse({"q colour=blue"}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown setting 'colour=blue'"), std::string::npos);
  bad = QueueConfig::Parse({}, {"urgent"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("VALUE must be an integer"), std::string::npos);
}

TEST(QueueConfigTest, DefaultsPerGpuComeFromTheQueueElseTheCoordinator) {
  auto c = QueueConfig::Parse(
      {"research cpus-per-gpu=12 memory-mb-per-gpu=98304", "notebooks cpus-per-gpu=0", "prod"}, {},
      PerGpuDefaults{8, 65536});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<QueueDef>& q = c->queues();
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q[0].cpus_per_gpu, 8);  // default, not configured: the coordinator's
  EXPECT_EQ(q[0].memory_mb_per_gpu, 65536);
  EXPECT_EQ(q[1].cpus_per_gpu, 12);
  EXPECT_EQ(q[1].memory_mb_per_gpu, 98304);
  EXPECT_EQ(q[2].cpus_per_gpu, 0);  // its own 0 wins
  EXPECT_EQ(q[2].memory_mb_per_gpu, 65536);
  EXPECT_EQ(q[3].cpus_per_gpu, 8);
  // Without any: none.
  auto plain = QueueConfig::Parse({"prod"}, {});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->queues()[1].cpus_per_gpu, 0);
  EXPECT_EQ(plain->queues()[1].memory_mb_per_gpu, 0);

  for (const char* setting : {"cpus-per-gpu=x", "cpus-per-gpu=-1", "cpus-per-gpu=1025",
                              "memory-mb-per-gpu=lots", "memory-mb-per-gpu=99999999999"}) {
    auto bad = QueueConfig::Parse({std::string("q ") + setting}, {});
    ASSERT_FALSE(bad.ok()) << setting;
    EXPECT_NE(bad.status().message().find(std::string(setting).substr(0, 12)), std::string::npos)
        << bad.status().ToString();
  }
  auto bad = QueueConfig::Parse({}, {}, PerGpuDefaults{2000, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--cpus-per-gpu: expected 0-1024, got 2000"),
            std::string::npos)
      << bad.status().ToString();
  bad = QueueConfig::Parse({}, {}, PerGpuDefaults{0, -5});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--memory-mb-per-gpu"), std::string::npos);
}

JobSpec ParsedJob(const std::string& yaml) {
  auto spec = ParseJobSpec(yaml, "test");
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  return spec.ok() ? *spec : JobSpec{};
}

TEST(QueueConfigTest, ResourceDefaultsFillOnlyWhatAPoolWithGpusLeftOut) {
  auto queues = QueueConfig::Parse({"research cpus-per-gpu=12", "big cpus-per-gpu=600"}, {},
                                   PerGpuDefaults{8, 65536});
  ASSERT_TRUE(queues.ok());
  JobSpec job = ParsedJob(R"(name: j
worker_pools:
  - role: chief
    resources: {gpus: 2}
    process: {command: [/bin/true]}
  - role: worker
    replicas: 2
    resources: {gpus: 4, cpus: 3}
    process: {command: [/bin/true]}
  - role: reducer
    replicas: 1
    builtin: reducer
  - role: evaluator
    resources: {gpus: 1, memory_mb: 1000}
    process: {command: [/bin/true]}
)");
  std::vector<std::string> notes = ApplyResourceDefaults(*queues, &job);
  ASSERT_EQ(job.pools.size(), 4u);
  EXPECT_EQ(job.pools[0].resources.cpus, 16);  // 2 GPUs x 8
  EXPECT_EQ(job.pools[0].resources.memory_mb, 131072);
  EXPECT_EQ(job.pools[1].resources.cpus, 3);  // given
  EXPECT_EQ(job.pools[1].resources.memory_mb, 262144);
  EXPECT_EQ(job.pools[2].resources.cpus, 1);  // no GPUs: the built-in 1 CPU, no limit
  EXPECT_EQ(job.pools[2].resources.memory_mb, 0);
  EXPECT_EQ(job.pools[3].resources.cpus, 8);
  EXPECT_EQ(job.pools[3].resources.memory_mb, 1000);
  ASSERT_EQ(notes.size(), 3u);
  EXPECT_EQ(notes[0],
            "pool chief: cpus 16 and memory_mb 131072 per replica, for its 2 GPUs (queue "
            "default's defaults: 8 CPUs and 65536 MB per GPU)");
  EXPECT_EQ(notes[1],
            "pool worker: memory_mb 262144 per replica, for its 4 GPUs (queue default's "
            "defaults: 65536 MB per GPU)");
  EXPECT_EQ(notes[2],
            "pool evaluator: cpus 8 per replica, for its 1 GPU (queue default's defaults: 8 CPUs "
            "per GPU)");
  // The stored spec says what each replica got; applied again, nothing changes.
  JobSpec stored = ParsedJob(JobSpecToYaml(job));
  EXPECT_EQ(stored.pools[0].resources.cpus, 16);
  EXPECT_EQ(stored.pools[0].resources.memory_mb, 131072);
  EXPECT_TRUE(ApplyResourceDefaults(*queues, &stored).empty());
  EXPECT_EQ(stored.pools[2].resources.cpus, 1);

  // The job's own queue's; at most a replica's largest cpus; none for an unknown queue.
  auto eight_gpus_in = [](const std::string& queue) {
    return ParsedJob("name: j\nscheduling: {queue: " + queue +
                     "}\nworker_pools:\n  - role: chief\n    resources: {gpus: 8}\n"
                     "    process: {command: [/bin/true]}\n");
  };
  JobSpec eight = eight_gpus_in("big");
  ApplyResourceDefaults(*queues, &eight);
  EXPECT_EQ(eight.pools[0].resources.cpus, Resources::kMaxCpus);
  EXPECT_EQ(eight.pools[0].resources.memory_mb, 8 * 65536);
  eight = eight_gpus_in("research");
  ApplyResourceDefaults(*queues, &eight);
  EXPECT_EQ(eight.pools[0].resources.cpus, 96);
  eight.scheduling.queue = "nope";
  eight.pools[0].resources.cpus_given = false;
  EXPECT_TRUE(ApplyResourceDefaults(*queues, &eight).empty());
  // Without defaults, a file that leaves cpus out keeps the built-in 1 and its spec stays silent.
  JobSpec plain = ParsedJob(R"(name: j
worker_pools:
  - role: chief
    resources: {gpus: 1}
    process: {command: [/bin/true]}
)");
  EXPECT_TRUE(ApplyResourceDefaults(QueueConfig(), &plain).empty());
  EXPECT_EQ(plain.pools[0].resources.cpus, 1);
  EXPECT_EQ(JobSpecToYaml(plain).find("cpus"), std::string::npos) << JobSpecToYaml(plain);
}

}  // namespace
}  // namespace cohort::coordinator
