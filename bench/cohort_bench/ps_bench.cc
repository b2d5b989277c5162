#include "bench/cohort_bench/ps_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <optional>
#include <thread>

#include "bench/cohort_bench/bench_flags.h"
#include "bench/cohort_bench/forked_ranks.h"
#include "bench/common/json_line.h"
#include "bench/common/size_args.h"
#include "collective/ps/ps_server.h"
#include "collective/ps/ps_worker.h"
#include "collective/store_bootstrap.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/logging.h"

namespace cohort::bench {
namespace {

using collective::DataType;
using collective::ps::ModelLayout;
using collective::ps::OptimizerConfig;
using collective::ps::PsServer;
using collective::ps::PsServerOptions;
using collective::ps::PsWorker;
using collective::ps::PsWorkerOptions;
using collective::ps::RequestId;
using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Status WaitOne(PsWorker& ps, StatusOr<RequestId> id) {
  if (!id.ok()) return id.status();
  return ps.Wait(*id);
}

// The model of one size: one key, or keys of key_bytes.
StatusOr<ModelLayout> LayoutFor(size_t size, size_t key_bytes) {
  const uint64_t count = std::max<uint64_t>(1, size / 4);
  if (key_bytes == 0) return ModelLayout::FromCounts({count}, DataType::kF32);
  const uint64_t per = std::max<uint64_t>(1, key_bytes / 4);
  std::vector<uint64_t> counts;
  for (uint64_t done = 0; done < count; done += per) counts.push_back(std::min(per, count - done));
  return ModelLayout::FromCounts(counts, DataType::kF32);
}

// Every worker switches to `layout` together: worker 0 replaces the servers' model, the others
// check theirs against it.
Status SwitchModel(PsWorker& ps, const ModelLayout& layout) {
  COHORT_RETURN_IF_ERROR(ps.Barrier());
  OptimizerConfig c;  // asynchronous SGD, lr 1, sum: pushing -1 adds exactly 1 per push
  c.learning_rate = 1.0;
  c.rescale = 1.0;
  if (ps.rank() == 0) {
    std::vector<float> zeros(layout.total_bytes() / 4, 0.0f);
    COHORT_RETURN_IF_ERROR(ps.InitModel(layout, zeros.data(), c, /*reset=*/true).status());
  }
  COHORT_RETURN_IF_ERROR(ps.Barrier());
  if (ps.rank() != 0) COHORT_RETURN_IF_ERROR(ps.InitModel(layout, nullptr, c).status());
  return ps.Barrier();
}

void PrintHeader(const PsBenchOptions& o) {
  if (o.json) return;
  const char* tls = std::getenv("UCX_TLS");
  std::printf(
      "# cohort-bench ps: %d workers, %d servers, transport %s%s%s%s, f32, async sgd, iters %d, "
      "warmup %d%s\n",
      o.workers, o.servers, o.transport.c_str(), o.transport == "ucx" ? " (UCX_TLS=" : "",
      o.transport == "ucx" ? (tls ? tls : "all") : "", o.transport == "ucx" ? ")" : "", o.iters,
      o.warmup,
      o.key_bytes ? (", keys of " + std::to_string(o.key_bytes) + " B").c_str() : ", one key");
  if (o.update_rate) {
    std::printf("# %10s %10s %6s %7s %10s %14s %12s\n", "keys", "key_bytes", "batch", "window",
                "updates", "time_us", "updates_per_s");
  } else {
    std::printf("# %12s %12s %6s %12s %11s %12s %11s %6s %8s\n", "size", "count", "type", "push_us",
                "push_GBps", "pull_us", "pull_GBps", "links", "wrong");
  }
  std::fflush(stdout);
}

// Runs `iters` rounds of `op` between barriers; returns seconds per round (slowest worker).
StatusOr<double> Timed(PsWorker& ps, int iters, const std::function<Status()>& op, int* done) {
  COHORT_RETURN_IF_ERROR(ps.Barrier());
  const auto t0 = Clock::now();
  int n = 0;
  for (; n < iters; ++n) COHORT_RETURN_IF_ERROR(op());
  COHORT_RETURN_IF_ERROR(ps.Barrier());
  *done = n;
  return Seconds(Clock::now() - t0) / std::max(1, n);
}

Status RunThroughput(PsWorker& ps, const PsBenchOptions& o) {
  for (size_t size : o.sizes) {
    COHORT_ASSIGN_OR_RETURN(ModelLayout layout, LayoutFor(size, o.key_bytes));
    COHORT_RETURN_IF_ERROR(SwitchModel(ps, layout));
    const size_t count = layout.total_bytes() / 4;
    std::vector<float> grad(count, -1.0f);
    std::vector<float> params(count, 0.0f);
    // Auto-scale the rounds so big models do not take minutes: at least 2 timed rounds.
    int iters = o.iters;
    if (o.max_seconds_per_size > 0) {
      const double per_round_guess =
          static_cast<double>(layout.total_bytes()) * o.workers / 50e6;  // 50 MB/s floor
      iters = std::clamp(static_cast<int>(o.max_seconds_per_size / std::max(per_round_guess, 1e-6)),
                         2, o.iters);
    }
    for (int i = 0; i < o.warmup; ++i) COHORT_RETURN_IF_ERROR(WaitOne(ps, ps.PushAll(grad.data())));
    int done = 0;
    COHORT_ASSIGN_OR_RETURN(
        double push_s, Timed(
                           ps, iters, [&] { return WaitOne(ps, ps.PushAll(grad.data())); }, &done));
    const int pushes = o.warmup + done;
    COHORT_ASSIGN_OR_RETURN(
        double pull_s,
        Timed(
            ps, iters, [&] { return WaitOne(ps, ps.PullAll(params.data())); }, &done));
    int64_t wrong = 0;
    if (o.check) {
      const float want = static_cast<float>(pushes) * o.workers;
      for (float v : params) wrong += v != want;
    }
    if (ps.rank() == 0) {
      const double bytes = static_cast<double>(layout.total_bytes()) * o.workers;
      const double push_gbps = bytes / push_s / 1e9;
      const double pull_gbps = bytes / pull_s / 1e9;
      const int links = std::min(o.workers, o.servers);
      if (o.json) {
        JsonLine line;
        line["impl"] = "cohort-ps";
        line["size"] = size;
        line["count"] = count;
        line["type"] = "f32";
        line["push_us"] = RoundTo(push_s * 1e6, 3);
        line["push_GBps"] = RoundTo(push_gbps, 6);
        line["pull_us"] = RoundTo(pull_s * 1e6, 3);
        line["pull_GBps"] = RoundTo(pull_gbps, 6);
        line["links"] = links;
        line["wrong"] = o.check ? JsonLine(wrong) : JsonLine(nullptr);
        line["workers"] = o.workers;
        line["servers"] = o.servers;
        line["keys"] = layout.num_keys();
        line["transport"] = o.transport;
        line["iters"] = iters;
        PrintJsonLine(line);
      } else {
        std::printf("  %12zu %12zu %6s %12.2f %11.4f %12.2f %11.4f %6d %8s\n", size, count, "f32",
                    push_s * 1e6, push_gbps, pull_s * 1e6, pull_gbps, links,
                    o.check ? std::to_string(wrong).c_str() : "N/A");
      }
      std::fflush(stdout);
    }
    if (wrong > 0)
      return DataLoss("worker " + std::to_string(ps.rank()) + ": " + std::to_string(wrong) +
                      " wrong values");
  }
  return Status::Ok();
}

Status RunUpdateRate(PsWorker& ps, const PsBenchOptions& o) {
  const size_t key_bytes = o.key_bytes ? o.key_bytes : 4096;
  COHORT_ASSIGN_OR_RETURN(ModelLayout layout, LayoutFor(key_bytes * o.keys, key_bytes));
  COHORT_RETURN_IF_ERROR(SwitchModel(ps, layout));
  const size_t per = key_bytes / 4;
  const int batch = std::max(1, o.batch);
  std::vector<float> grads(per * batch, -1.0f);
  const int requests = std::max(1, o.updates / batch);
  // Each worker starts at its own offset and walks the keys: every server gets its share.
  size_t next_key = (layout.num_keys() / o.workers) * ps.rank();
  std::deque<RequestId> inflight;
  std::vector<std::vector<uint64_t>> key_lists(o.window + 1);
  int slot = 0;
  auto issue = [&]() -> Status {
    std::vector<uint64_t>& keys = key_lists[slot];
    slot = (slot + 1) % static_cast<int>(key_lists.size());
    if (next_key + batch > layout.num_keys()) next_key = 0;
    keys.clear();
    for (int b = 0; b < batch; ++b) keys.push_back(next_key + b);
    next_key += batch;
    COHORT_ASSIGN_OR_RETURN(RequestId id,
                            ps.Push(keys, grads.data(), keys.size() * key_bytes, DataType::kF32));
    inflight.push_back(id);
    return Status::Ok();
  };
  COHORT_RETURN_IF_ERROR(ps.Barrier());
  const auto t0 = Clock::now();
  for (int r = 0; r < requests; ++r) {
    if (static_cast<int>(inflight.size()) >= o.window) {
      COHORT_RETURN_IF_ERROR(ps.Wait(inflight.front()));
      inflight.pop_front();
    }
    COHORT_RETURN_IF_ERROR(issue());
  }
  while (!inflight.empty()) {
    COHORT_RETURN_IF_ERROR(ps.Wait(inflight.front()));
    inflight.pop_front();
  }
  COHORT_RETURN_IF_ERROR(ps.Barrier());
  const double s = Seconds(Clock::now() - t0);
  if (ps.rank() == 0) {
    const double updates = static_cast<double>(requests) * batch * o.workers;
    if (o.json) {
      JsonLine line;
      line["impl"] = "cohort-ps";
      line["mode"] = "update-rate";
      line["keys"] = layout.num_keys();
      line["key_bytes"] = key_bytes;
      line["batch"] = batch;
      line["window"] = o.window;
      line["updates"] = static_cast<int64_t>(updates);
      line["time_us"] = RoundTo(s * 1e6, 3);
      line["updates_per_s"] = RoundTo(updates / s, 1);
      line["workers"] = o.workers;
      line["servers"] = o.servers;
      line["transport"] = o.transport;
      PrintJsonLine(line);
    } else {
      std::printf("  %10zu %10zu %6d %7d %10.0f %14.1f %12.1f\n", layout.num_keys(), key_bytes,
                  batch, o.window, updates, s * 1e6, updates / s);
    }
    std::fflush(stdout);
  }
  return Status::Ok();
}

Status RunWorker(PsWorker& ps, const PsBenchOptions& o) {
  if (ps.rank() == 0) PrintHeader(o);
  Status s = o.update_rate ? RunUpdateRate(ps, o) : RunThroughput(ps, o);
  if (s.ok() && ps.rank() == 0) s = ps.Shutdown();
  return s;
}

PsServerOptions ServerOptions(const PsBenchOptions& o, int index) {
  PsServerOptions so;
  so.num_workers = o.workers;
  so.num_servers = o.servers;
  so.server_index = index;
  so.timeout = std::chrono::milliseconds(o.timeout_ms);
  return so;
}

// One rank of a job whose bootstrap store is (or will be, on worker 0) at `address`.
int RunOneRank(const PsBenchOptions& o, bool worker, int rank, const std::string& address) {
  const std::string role = worker ? "worker" : "server";
  return RunRank(role, rank, worker, address, std::chrono::milliseconds(o.timeout_ms),
                 [&](collective::StoreBootstrap& bootstrap) {
                   if (!worker) {
                     PsServer server(ServerOptions(o, rank));
                     collective::ps::PsRunOptions ro;
                     ro.connect_timeout = std::chrono::milliseconds(o.timeout_ms);
                     ro.rejoin_timeout = std::chrono::milliseconds(0);
                     std::atomic<bool> stop{false};
                     return RankExitCode(
                         role, rank,
                         collective::ps::RunParameterServer(bootstrap, server, ro, stop));
                   }
                   PsWorkerOptions wo;
                   wo.timeout = std::chrono::milliseconds(o.timeout_ms);
                   auto ps = PsWorker::Create(bootstrap, rank, o.workers, o.servers, wo);
                   if (!ps.ok()) return RankExitCode(role, rank, ps.status());
                   return RankExitCode(role, rank, RunWorker(**ps, o));
                 });
}

int RunThreads(const PsBenchOptions& o) {
  collective::LoopbackFabric fabric(o.workers + o.servers);
  std::vector<std::unique_ptr<PsServer>> servers;
  for (int j = 0; j < o.servers; ++j)
    servers.push_back(std::make_unique<PsServer>(ServerOptions(o, j)));
  std::atomic<int> rc{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> server_threads, worker_threads;
  for (int j = 0; j < o.servers; ++j) {
    server_threads.emplace_back([&, j] {
      auto t = fabric.CreateTransport(o.workers + j);
      Status s = servers[j]->Serve(*t, stop);
      if (!s.ok() && s.code() != StatusCode::kCancelled) rc = 1;
    });
  }
  for (int i = 0; i < o.workers; ++i) {
    worker_threads.emplace_back([&, i] {
      PsWorkerOptions wo;
      wo.timeout = std::chrono::milliseconds(o.timeout_ms);
      auto ps = PsWorker::Attach(fabric.CreateTransport(i), o.workers, o.servers, wo);
      if (RankExitCode("worker", i, ps.ok() ? RunWorker(**ps, o) : ps.status()) != 0) rc = 1;
    });
  }
  for (auto& t : worker_threads) t.join();
  stop.store(true);
  for (auto& t : server_threads) t.join();
  return rc.load();
}

}  // namespace

void PrintPsUsage() {
  std::printf(
      "usage: cohort-bench ps [--workers N] [--servers S] [--sizes 1M:256M] [--key-bytes B]\n"
      "         [--transport ucx|inproc] [--iters N] [--warmup N] [--max-seconds-per-size S] "
      "[--check] [--json]\n"
      "         [--update-rate [--key-bytes 4K] [--keys N] [--batch K] [--window W] [--updates "
      "N]]\n"
      "         [--rank R --role worker|server --bootstrap HOST:PORT] [--timeout-ms MS]\n"
      "Push and pull throughput of the parameter server (aggregate over the workers), or with\n"
      "--update-rate the key updates per second for small keys. --transport inproc runs ranks as\n"
      "threads; ucx forks one process per worker and server (UCX_TLS from the environment). With\n"
      "--rank/--bootstrap this process is one rank of a job launched elsewhere (worker 0 serves "
      "the\n"
      "bootstrap store at HOST:PORT); --rank is the worker rank or, with --role server, the server "
      "index.\n");
}

bool ParsePsArgs(const std::vector<std::string>& args, PsBenchOptions* o, bool* help) {
  std::string sizes = "1M:256M";
  int keys = static_cast<int>(o->keys);
  const std::vector<BenchFlag> own = {
      {"--update-rate", true, [&](const std::string&) { return o->update_rate = true; }},
      {"--servers", false, IntAtLeast(&o->servers, 1)},
      {"--key-bytes", false,
       [&](const std::string& v) {
         auto s = ParseByteSize(v);
         const bool ok = s.has_value() && (*s == 0 || *s >= 4);
         if (ok) o->key_bytes = *s;
         return ok;
       }},
      {"--keys", false, IntAtLeast(&keys, 1)},
      {"--batch", false, IntAtLeast(&o->batch, 1)},
      {"--window", false, IntAtLeast(&o->window, 1)},
      {"--updates", false, IntAtLeast(&o->updates, 1)},
      {"--role", false, OneOf(&o->role, {"worker", "server"})},
  };
  std::vector<BenchFlag> flags = SharedFlags(o, &sizes);
  flags.insert(flags.end(), own.begin(), own.end());
  if (!ParseBenchFlags(args, "cohort-bench ps", flags, help)) return false;
  if (*help) return true;
  o->keys = static_cast<size_t>(keys);
  return CheckSweepAndRank("cohort-bench ps", sizes, &o->sizes, o->rank, o->bootstrap);
}

int RunPsBench(const PsBenchOptions& o) {
  return RunJob(
      "cohort-bench ps", o.rank, o.role, o.bootstrap, o.workers, o.servers, o.transport == "inproc",
      [&] { return RunThreads(o); },
      [&](bool worker, int index, const std::string& address) {
        return RunOneRank(o, worker, index, address);
      });
}

}  // namespace cohort::bench
