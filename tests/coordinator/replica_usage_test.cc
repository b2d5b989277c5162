// ReplicaUsageTracker driven directly: heartbeat samples in, what `cohort status` shows out, the
// time moved by the test.
#include "coordinator/replica_usage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>

namespace cohort::coordinator {
namespace {

ReplicaUsageTracker::Sample At(double cpu_seconds, int64_t memory_bytes = 1 << 20) {
  ReplicaUsageTracker::Sample s;
  s.cpu_seconds = cpu_seconds;
  s.memory_bytes = memory_bytes;
  return s;
}

TEST(ReplicaUsageTest, CpuCoresAreTheCgroupsCpuTimePerSecondOverTheWindow) {
  ReplicaUsageTracker usage;
  usage.Observe("j", "worker-0", 0, At(100.0), 1'000);
  // One sample: memory is known, CPU not yet.
  auto first = usage.Of("j", "worker-0", 0, 1'000);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->cpu_cores, -1);
  EXPECT_EQ(first->memory_bytes, 1 << 20);
  // Two cores busy: two CPU seconds a second.
  for (int s = 1; s <= 20; ++s)
    usage.Observe("j", "worker-0", 0, At(100.0 + 2.0 * s), 1'000 + s * 1'000);
  auto busy = usage.Of("j", "worker-0", 0, 21'000);
  ASSERT_NE(busy, nullptr);
  EXPECT_DOUBLE_EQ(busy->cpu_cores, 2.0);
  EXPECT_EQ(busy->age_ms, 0);
  // It goes idle: the window's average falls, to 0 once the window holds only idle seconds.
  for (int s = 21; s <= 25; ++s) usage.Observe("j", "worker-0", 0, At(140.0), 1'000 + s * 1'000);
  auto falling = usage.Of("j", "worker-0", 0, 26'000);
  ASSERT_NE(falling, nullptr);
  EXPECT_DOUBLE_EQ(falling->cpu_cores, 1.0);  // 10 CPU seconds over the 10 s window
  for (int s = 26; s <= 40; ++s) usage.Observe("j", "worker-0", 0, At(140.0), 1'000 + s * 1'000);
  EXPECT_DOUBLE_EQ(usage.Of("j", "worker-0", 0, 41'000)->cpu_cores, 0.0);
}

TEST(ReplicaUsageTest, TwoSamplesTooCloseSayNothingOfCpu) {
  ReplicaUsageTracker usage;
  usage.Observe("j", "chief-0", 0, At(1.0), 1'000);
  usage.Observe("j", "chief-0", 0, At(1.5), 1'100);
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 1'100)->cpu_cores, -1);
  usage.Observe("j", "chief-0", 0, At(2.0), 2'000);
  EXPECT_DOUBLE_EQ(usage.Of("j", "chief-0", 0, 2'000)->cpu_cores, 1.0);
}

TEST(ReplicaUsageTest, ANewAttemptOrACounterThatGoesBackStartsAgain) {
  ReplicaUsageTracker usage;
  usage.Observe("j", "chief-0", 0, At(50.0), 1'000);
  usage.Observe("j", "chief-0", 0, At(51.0), 2'000);
  EXPECT_DOUBLE_EQ(usage.Of("j", "chief-0", 0, 2'000)->cpu_cores, 1.0);
  // The old attempt's usage is not the new one's.
  EXPECT_EQ(usage.Of("j", "chief-0", 1, 2'000), nullptr);
  usage.Observe("j", "chief-0", 1, At(0.5), 3'000);
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 3'000), nullptr);
  EXPECT_EQ(usage.Of("j", "chief-0", 1, 3'000)->cpu_cores, -1);
  usage.Observe("j", "chief-0", 1, At(1.0), 4'000);
  EXPECT_DOUBLE_EQ(usage.Of("j", "chief-0", 1, 4'000)->cpu_cores, 0.5);
  // A counter that went back (another cgroup) is not a negative rate.
  usage.Observe("j", "chief-0", 1, At(0.2), 5'000);
  EXPECT_EQ(usage.Of("j", "chief-0", 1, 5'000)->cpu_cores, -1);
  // No cgroup: nothing known of CPU or memory, and nothing invented.
  usage.Observe("j", "chief-0", 1, At(-1, -1), 6'000);
  auto none = usage.Of("j", "chief-0", 1, 6'000);
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->cpu_cores, -1);
  EXPECT_EQ(none->memory_bytes, -1);
}

TEST(ReplicaUsageTest, GpusAreTheNewestSamplesAndStaleUsageIsNotShown) {
  ReplicaUsageTracker usage;
  auto sample = At(1.0);
  wire::GpuUsageT gpu;
  gpu.index = 3;
  gpu.utilization = 97;
  gpu.memory_used_bytes = 30LL << 30;
  gpu.memory_total_bytes = 80LL << 30;
  sample.gpus.push_back(gpu);
  usage.Observe("j", "worker-1", 0, sample, 1'000);
  auto shown = usage.Of("j", "worker-1", 0, 5'000);
  ASSERT_NE(shown, nullptr);
  ASSERT_EQ(shown->gpus.size(), 1u);
  EXPECT_EQ(shown->gpus[0]->index, 3);
  EXPECT_EQ(shown->gpus[0]->utilization, 97);
  EXPECT_EQ(shown->gpus[0]->memory_used_bytes, 30LL << 30);
  EXPECT_EQ(shown->age_ms, 4'000);
  // Its node went silent: past kStaleMs nothing is shown, and Sweep forgets it.
  const int64_t stale = 1'000 + ReplicaUsageTracker::kStaleMs + 1;
  EXPECT_EQ(usage.Of("j", "worker-1", 0, stale), nullptr);
  usage.Sweep(stale - 2);
  EXPECT_EQ(usage.size(), 1u);
  usage.Sweep(stale);
  EXPECT_EQ(usage.size(), 0u);
}

// A job that holds GPUs it does not use: every sample of every one of its GPUs at 0% since when.
TEST(ReplicaUsageTest, GpusIdleCountsFromTheFirstSampleOfAllOfThemAtZero) {
  ReplicaUsageTracker usage;
  auto at = [](double gpu0, double gpu1) {
    ReplicaUsageTracker::Sample s = At(1.0);
    for (auto [index, utilization] : {std::pair{0, gpu0}, std::pair{1, gpu1}}) {
      wire::GpuUsageT g;
      g.index = index;
      g.utilization = utilization;
      s.gpus.push_back(g);
    }
    return s;
  };
  usage.Observe("j", "chief-0", 0, at(95, 0), 1'000);  // one busy: not idle
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 1'000)->gpus_idle_ms, 0);
  usage.Observe("j", "chief-0", 0, at(0.4, 0), 6'000);
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 6'000)->gpus_idle_ms, 0);  // idle from now on
  usage.Observe("j", "chief-0", 0, at(0, 0), 11'000);
  usage.Observe("j", "chief-0", 0, at(0, 0), 606'000);
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 606'000)->gpus_idle_ms, 600'000);
  // One sample of work breaks it; it counts again from the next idle sample.
  usage.Observe("j", "chief-0", 0, at(0, 30), 611'000);
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 611'000)->gpus_idle_ms, 0);
  usage.Observe("j", "chief-0", 0, at(0, 0), 616'000);
  usage.Observe("j", "chief-0", 0, at(0, 0), 621'000);
  EXPECT_EQ(usage.Of("j", "chief-0", 0, 621'000)->gpus_idle_ms, 5'000);
  // A replica without GPUs is never idle by this measure.
  usage.Observe("j", "worker-0", 0, At(1.0), 1'000);
  usage.Observe("j", "worker-0", 0, At(1.0), 900'000);
  EXPECT_EQ(usage.Of("j", "worker-0", 0, 900'000)->gpus_idle_ms, 0);
}

// cohort_gpus{state="held_idle"}: the GPUs of placed attempts idle for kHeldIdleMs.
TEST(ReplicaUsageTest, GpusHeldIdleCountsThePlacedAttemptsIdleForAMinute) {
  ReplicaUsageTracker usage;
  auto idle = [](std::vector<int> gpus) {
    ReplicaUsageTracker::Sample s = At(1.0);
    for (int index : gpus) {
      wire::GpuUsageT g;
      g.index = index;
      s.gpus.push_back(g);
    }
    return s;
  };
  const int64_t t0 = 1'000, t1 = t0 + ReplicaUsageTracker::kHeldIdleMs;
  for (int64_t t : {t0, t1}) {
    usage.Observe("j", "chief-0", 0, idle({0, 1}), t);  // idle a minute: 2 GPUs
    usage.Observe("j", "worker-0", 0, idle({2}), t);    // the same, not placed now
  }
  usage.Observe("j", "worker-1", 0, idle({3}), t0 + 1);  // idle a minute less 1 ms
  usage.Observe("j", "worker-1", 0, idle({3}), t1);
  auto placed = [](const std::string&, const std::string& replica, int) -> std::string {
    return replica == "worker-0" ? "" : "node-a";
  };
  EXPECT_EQ(usage.ByNode(t1, placed).gpus_held_idle, 2);
}

// A heartbeat's progress as the wire carries it, built from its object form.
struct ProgressBuffer {
  explicit ProgressBuffer(const wire::ReplicaProgressT& progress) {
    builder.Finish(wire::ReplicaProgress::Pack(builder, &progress));
  }
  const wire::ReplicaProgress& get() const {
    return *flatbuffers::GetRoot<wire::ReplicaProgress>(builder.GetBufferPointer());
  }
  flatbuffers::FlatBufferBuilder builder;
};

std::unique_ptr<wire::GpuUsageT> Gpu(int index, double utilization, int64_t used, int64_t total) {
  auto g = std::make_unique<wire::GpuUsageT>();
  g->index = index;
  g->utilization = utilization;
  g->memory_used_bytes = used;
  g->memory_total_bytes = total;
  return g;
}

TEST(ReplicaUsageTest, AGarbledOrHostileReportIsMadeSaneAndKeepsToTheReplicasOwnGpus) {
  wire::ReplicaProgressT p;
  p.cpu_seconds = std::nan("");
  p.memory_bytes = -7;
  p.gpus.push_back(Gpu(1, 250, 5, 10));                                        // over 100%
  p.gpus.push_back(Gpu(1, 40, 6, 10));                                         // twice
  p.gpus.push_back(Gpu(2, -std::numeric_limits<double>::infinity(), -1, -1));  // not a number
  p.gpus.push_back(Gpu(7, 50, 1, 10));  // another replica's GPU
  const ProgressBuffer wire_form(p);
  const ReplicaUsageTracker::Sample s =
      ReplicaUsageTracker::FromProgress(wire_form.get(), /*pinned=*/{1, 2});
  EXPECT_EQ(s.cpu_seconds, -1);
  EXPECT_EQ(s.memory_bytes, -1);
  ASSERT_EQ(s.gpus.size(), 2u);
  EXPECT_EQ(s.gpus[0].index, 1);
  EXPECT_EQ(s.gpus[0].utilization, 100);
  EXPECT_EQ(s.gpus[0].memory_used_bytes, 5);
  EXPECT_EQ(s.gpus[1].index, 2);
  EXPECT_EQ(s.gpus[1].utilization, 0);
  EXPECT_EQ(s.gpus[1].memory_used_bytes, 0);
  EXPECT_EQ(s.gpus[1].memory_total_bytes, 0);
  // A sane report passes as it is; one of an agent too old to send usage is all unknown.
  wire::ReplicaProgressT fine;
  fine.cpu_seconds = 12.5;
  fine.memory_bytes = 1 << 30;
  const ProgressBuffer fine_form(fine);
  const auto f = ReplicaUsageTracker::FromProgress(fine_form.get(), {});
  EXPECT_EQ(f.cpu_seconds, 12.5);
  EXPECT_EQ(f.memory_bytes, 1 << 30);
  EXPECT_TRUE(f.gpus.empty());
  const ProgressBuffer old_form{wire::ReplicaProgressT{}};
  const auto old = ReplicaUsageTracker::FromProgress(old_form.get(), {0});
  EXPECT_EQ(old.cpu_seconds, -1);
  EXPECT_EQ(old.memory_bytes, -1);
  EXPECT_TRUE(old.gpus.empty());
}

// A node's usage is the sum of its replicas' that are the current placed attempt: two replicas of
// one job on node-a, one of another job on node-b, a stale attempt and a replica that is gone.
TEST(ReplicaUsageTest, ANodesUsageIsTheSumOfItsCurrentReplicas) {
  ReplicaUsageTracker usage;
  auto with_gpu = [](double cpu_seconds, int64_t memory, int index, double util) {
    auto s = At(cpu_seconds, memory);
    wire::GpuUsageT gpu;
    gpu.index = index;
    gpu.utilization = util;
    s.gpus.push_back(gpu);
    return s;
  };
  for (int t = 0; t <= 2; ++t) {
    const int64_t now = 1'000 + t * 1'000;
    usage.Observe("a", "worker-1", 0, with_gpu(2.0 * t, 1LL << 30, 3, 90), now);  // 2 cores
    usage.Observe("a", "chief-0", 0, with_gpu(1.0 * t, 2LL << 30, 1, 50), now);   // 1 core
    usage.Observe("b", "chief-0", 0, At(0.5 * t, -1), now);  // no memory controller
    usage.Observe("a", "worker-0", 0, At(1.0 * t), now);     // restarted: attempt 1 now
    usage.Observe("gone", "chief-0", 0, At(1.0 * t), now);   // the job is gone
  }
  std::map<std::pair<std::string, std::string>, std::pair<int, std::string>> placed = {
      {{"a", "worker-1"}, {0, "node-a"}},
      {{"a", "chief-0"}, {0, "node-a"}},
      {{"b", "chief-0"}, {0, "node-b"}},
      {{"a", "worker-0"}, {1, "node-b"}}};
  auto nodes =
      usage
          .ByNode(
              3'000,
              [&](const std::string& job, const std::string& replica, int attempt) -> std::string {
                auto it = placed.find({job, replica});
                return it == placed.end() || it->second.first != attempt ? "" : it->second.second;
              })
          .nodes;
  ASSERT_EQ(nodes.size(), 2u);
  const wire::NodeUsageT& a = nodes.at("node-a");
  EXPECT_EQ(a.replicas, 2);
  EXPECT_DOUBLE_EQ(a.cpu_cores, 3.0);
  EXPECT_EQ(a.memory_bytes, 3LL << 30);
  ASSERT_EQ(a.gpus.size(), 2u);  // by index
  EXPECT_EQ(a.gpus[0]->index, 1);
  EXPECT_EQ(a.gpus[0]->utilization, 50);
  EXPECT_EQ(a.gpus[1]->index, 3);
  const wire::NodeUsageT& b = nodes.at("node-b");
  EXPECT_EQ(b.replicas, 1);
  EXPECT_DOUBLE_EQ(b.cpu_cores, 0.5);
  EXPECT_EQ(b.memory_bytes, -1);  // none known
  EXPECT_TRUE(b.gpus.empty());
  // Stale usage counts for nothing.
  EXPECT_TRUE(usage
                  .ByNode(3'000 + ReplicaUsageTracker::kStaleMs + 1,
                          [](auto&, auto&, int) { return std::string("node-a"); })
                  .nodes.empty());
}

// PlacedIn: a replica's node while the attempt is its current one, placed and not final.
TEST(ReplicaUsageTest, PlacedInNamesTheNodeOfTheCurrentAttemptOnly) {
  JobRecord job;
  job.name = "j";
  ReplicaRecord r;
  r.name = "worker-0";
  r.attempt = 2;
  r.node_id = "node-7";
  r.state = ReplicaState::RUNNING;
  job.replicas.push_back(r);
  auto node_of = ReplicaUsageTracker::PlacedIn(
      [&](const std::string& name) { return name == "j" ? &job : nullptr; });
  EXPECT_EQ(node_of("j", "worker-0", 2), "node-7");
  EXPECT_EQ(node_of("j", "worker-0", 1), "");  // an older attempt
  EXPECT_EQ(node_of("j", "chief-0", 2), "");   // no such replica
  EXPECT_EQ(node_of("k", "worker-0", 2), "");  // no such job
  job.replicas[0].state = ReplicaState::SUCCEEDED;
  EXPECT_EQ(node_of("j", "worker-0", 2), "");  // ended
}

}  // namespace
}  // namespace cohort::coordinator
