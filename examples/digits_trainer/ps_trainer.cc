#include "examples/digits_trainer/ps_trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "examples/digits_trainer/mlp.h"
#include "examples/digits_trainer/rng.h"

namespace cohort::examples {
namespace {

using collective::ps::ModelLayout;
using collective::ps::OptimizerConfig;
using collective::ps::OptimizerKind;

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("create directory " + dir + ": " + ec.message());
  return Status::Ok();
}

// The data order of `epoch`: the same on every rank, and after a restart, without saved state.
std::vector<uint32_t> EpochOrder(uint64_t seed, int64_t epoch, size_t n) {
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
  Rng rng(seed * 1000003ULL + static_cast<uint64_t>(epoch) + 1);
  rng.Shuffle(order);
  return order;
}

}  // namespace

PsTrainer::PsTrainer(PsTrainerOptions options, const Dataset& train, const Dataset& test,
                     collective::ps::PsWorker* ps)
    : options_(std::move(options)), train_(train), test_(test), ps_(ps) {}

void PsTrainer::Log(const char* format, ...) const {
  if (options_.base.log == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(options_.base.log, format, args);
  va_end(args);
  std::fputc('\n', options_.base.log);
  std::fflush(options_.base.log);
}

StatusOr<TrainResult> PsTrainer::Run() {
  const TrainerOptions& o = options_.base;
  const int rank = ps_->rank();
  const int world = ps_->num_workers();
  const bool chief = rank == 0;
  const Mlp mlp(o.hidden);
  const size_t num_params = mlp.num_params();
  const size_t n_train = train_.size();
  if (n_train == 0) return InvalidArgument("no training examples");
  if (o.batch_size < 1 || o.epochs < 1)
    return InvalidArgument("--batch-size and --epochs must be at least 1");
  const int64_t batch = o.batch_size;
  const int64_t steps_per_epoch = (static_cast<int64_t>(n_train) + batch - 1) / batch;
  const int64_t total_steps = steps_per_epoch * o.epochs;

  // One key per tensor of the flat parameter vector: W1, b1, W2, b2.
  const uint64_t h = static_cast<uint64_t>(o.hidden);
  auto layout = ModelLayout::FromCounts(
      {h * kDigitsFeatures, h, kDigitsClasses * h, kDigitsClasses}, collective::DataType::kF32);
  if (!layout.ok()) return layout.status();
  OptimizerConfig config;
  config.kind = options_.optimizer;
  config.learning_rate = o.learning_rate;
  config.momentum = o.momentum;
  config.staleness = options_.staleness;
  std::vector<float> params(num_params);
  if (chief) {
    Rng rng(o.seed);
    params = mlp.InitParams(rng);
  }
  COHORT_ASSIGN_OR_RETURN(const int64_t start,
                          ps_->InitModel(*layout, chief ? params.data() : nullptr, config));
  TrainResult result;
  if (start > 0) {
    result.restored_step = start;
    Log("parameter servers resume at step %lld", static_cast<long long>(start));
  }
  Log("digits-trainer (parameter server) rank %d/%d, %d servers: %zu train / %zu test examples, "
      "mlp 64-%d-10 "
      "(%zu params), %s lr %g on the servers, %s, global batch %lld, %d epochs (%lld steps)",
      rank, world, ps_->num_servers(), n_train, test_.size(), o.hidden, num_params,
      std::string(collective::ps::OptimizerKindName(options_.optimizer)).c_str(), o.learning_rate,
      options_.staleness < 0 ? "asynchronous"
                             : ("staleness " + std::to_string(options_.staleness)).c_str(),
      static_cast<long long>(batch), o.epochs, static_cast<long long>(total_steps));

  std::vector<float> grad(num_params);
  std::vector<uint32_t> order;
  int64_t order_epoch = -1;
  double epoch_loss = 0.0;
  int64_t epoch_batches = 0;
  for (int64_t step = start; step < total_steps; ++step) {
    const int64_t epoch = step / steps_per_epoch;
    const int64_t pos = step % steps_per_epoch;
    if (epoch != order_epoch) {
      order = EpochOrder(o.seed, epoch, n_train);
      order_epoch = epoch;
      epoch_loss = 0.0;
      epoch_batches = 0;
    }
    COHORT_ASSIGN_OR_RETURN(auto pull, ps_->PullAll(params.data()));
    COHORT_RETURN_IF_ERROR(
        ps_->Wait(pull).WithContext("pulling parameters at step " + std::to_string(step)));
    const int64_t begin = pos * batch;
    const int64_t count = std::min<int64_t>(batch, static_cast<int64_t>(n_train) - begin);
    const int64_t lo = begin + count * rank / world;
    const int64_t hi = begin + count * (rank + 1) / world;
    std::fill(grad.begin(), grad.end(), 0.0f);
    const double loss = mlp.AccumulateGradient(params, train_, order.data() + lo,
                                               static_cast<size_t>(hi - lo), grad.data());
    // The servers multiply by 1/world: the pushes then add up to the mean over the global batch.
    const float scale = static_cast<float>(world) / static_cast<float>(count);
    for (float& g : grad) g *= scale;
    COHORT_ASSIGN_OR_RETURN(auto push, ps_->PushAll(grad.data()));
    COHORT_RETURN_IF_ERROR(
        ps_->Wait(push).WithContext("pushing gradients at step " + std::to_string(step)));
    COHORT_RETURN_IF_ERROR(ps_->Clock());
    epoch_loss +=
        loss / static_cast<double>(count) * world;  // this rank's share, as a batch mean estimate
    ++epoch_batches;
    if (pos + 1 == steps_per_epoch) {
      result.train_loss = epoch_loss / static_cast<double>(epoch_batches);
      if (chief) {
        const double accuracy = mlp.Accuracy(params, test_);
        Log("epoch %lld/%d step %lld train_loss %.4f test_accuracy %.4f",
            static_cast<long long>(epoch + 1), o.epochs, static_cast<long long>(step + 1),
            result.train_loss, accuracy);
        if (!o.metric_file.empty()) {
          const auto parent = std::filesystem::path(o.metric_file).parent_path();
          if (!parent.empty()) COHORT_RETURN_IF_ERROR(MakeDirs(parent.string()));
          char value[32];
          std::snprintf(value, sizeof(value), "%.4f", accuracy);
          const double now =
              std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                  .count();
          nlohmann::json line = {{o.metric_tag, value},
                                 {"global_step", std::to_string(step + 1)},
                                 {"timestamp", now},
                                 {"trial", o.trial_id.empty() ? "0" : o.trial_id}};
          std::ofstream out(o.metric_file, std::ios::app);
          out << line.dump() << '\n';
        }
      }
    }
    if (o.stop_requested != nullptr && o.stop_requested->load(std::memory_order_relaxed)) {
      Log("stop requested: stopping at step %lld (the servers keep the model)",
          static_cast<long long>(step + 1));
      return Cancelled("stopped at step " + std::to_string(step + 1) + " on request");
    }
    if (o.fail_at_step > 0 && step + 1 == o.fail_at_step && start < o.fail_at_step) {
      return Aborted("injected failure at step " + std::to_string(step + 1));
    }
  }

  // Every rank's last push has landed once all reach the barrier; then read the final model.
  COHORT_RETURN_IF_ERROR(ps_->Barrier().WithContext("end-of-training barrier"));
  COHORT_ASSIGN_OR_RETURN(auto pull, ps_->PullAll(params.data()));
  COHORT_RETURN_IF_ERROR(ps_->Wait(pull).WithContext("pulling the final model"));
  result.steps = total_steps;
  result.test_accuracy = mlp.Accuracy(params, test_);
  result.params = params;
  if (chief) {
    if (!o.model_dir.empty()) {
      COHORT_RETURN_IF_ERROR(MakeDirs(o.model_dir));
      std::string model("CDGTMLP1", 8);
      const uint32_t header[4] = {kDigitsFeatures, static_cast<uint32_t>(o.hidden), kDigitsClasses,
                                  0};
      model.append(reinterpret_cast<const char*>(header), sizeof(header));
      model.append(reinterpret_cast<const char*>(params.data()), params.size() * sizeof(float));
      COHORT_RETURN_IF_ERROR(
          WriteFileAtomically((std::filesystem::path(o.model_dir) / "model.bin").string(), model));
      nlohmann::json metrics = {
          {"test_accuracy", result.test_accuracy},
          {"train_loss", result.train_loss},
          {"global_step", result.steps},
          {"epochs", o.epochs},
          {"world_size", world},
          {"parameter_servers", ps_->num_servers()},
          {"staleness", options_.staleness},
          {"hidden", o.hidden},
          {"optimizer", std::string(collective::ps::OptimizerKindName(options_.optimizer))},
          {"learning_rate", o.learning_rate},
          {"batch_size", o.batch_size},
          {"seed", o.seed},
          {"model_crc32", ModelCrc32(params)},
      };
      COHORT_RETURN_IF_ERROR(WriteFileAtomically(
          (std::filesystem::path(o.model_dir) / "metrics.json").string(), metrics.dump(2) + "\n"));
      Log("model written to %s", o.model_dir.c_str());
    }
    COHORT_RETURN_IF_ERROR(
        ps_->Shutdown().WithContext("telling the parameter servers training is over"));
  }
  Log("model crc32 %08x after %lld steps", ModelCrc32(params),
      static_cast<long long>(result.steps));
  Log("final test accuracy: %.3f", result.test_accuracy);
  return result;
}

}  // namespace cohort::examples
