#include "examples/digits_trainer/trainer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdarg>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "examples/digits_trainer/mlp.h"
#include "examples/digits_trainer/rng.h"
#include "examples/digits_trainer/trainer_checkpoint.h"
#include "examples/digits_trainer/trainer_state.h"

namespace cohort::examples {
namespace {

std::string JoinPath(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

Status MakeDirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("create directory " + dir + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

uint32_t ModelCrc32(const std::vector<float>& params) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(params.data()),
                                     static_cast<uInt>(params.size() * sizeof(float))));
}

std::string_view OptimizerName(Optimizer optimizer) {
  return optimizer == Optimizer::kSgd ? "sgd" : "momentum";
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("open " + tmp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return ErrnoStatus("write " + tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus("sync " + tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoStatus("rename " + tmp, err);
  }
  return Status::Ok();
}

Trainer::Trainer(TrainerOptions options, const Dataset& train, const Dataset& test,
                 GradientAverager* averager)
    : options_(std::move(options)), train_(train), test_(test), averager_(averager) {}

Status Trainer::ValidateOptions() const {
  if (options_.epochs < 1) return InvalidArgument("--epochs must be at least 1");
  if (options_.epoch_pause_ms < 0 || options_.epoch_pause_ms > 600000) {
    return InvalidArgument("--epoch-pause-ms must be from 0 to 600000, got " +
                           std::to_string(options_.epoch_pause_ms));
  }
  if (!(options_.learning_rate > 0)) return InvalidArgument("--lr must be positive");
  if (options_.hidden < 1 || options_.hidden > 65536) {
    return InvalidArgument("--hidden must be in 1..65536");
  }
  if (options_.batch_size < 1) return InvalidArgument("--batch-size must be at least 1");
  if (options_.momentum < 0 || options_.momentum >= 1) {
    return InvalidArgument("--momentum must be in [0, 1)");
  }
  if (options_.checkpoint_every < 0) return InvalidArgument("--checkpoint-every must be >= 0");
  if (options_.keep_checkpoints < 1) return InvalidArgument("--keep-checkpoints must be >= 1");
  if (train_.size() == 0) return InvalidArgument("no training examples");
  return Status::Ok();
}

void Trainer::Log(const char* format, ...) const {
  if (options_.log == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(options_.log, format, args);
  va_end(args);
  std::fputc('\n', options_.log);
  std::fflush(options_.log);
}

void Trainer::PauseAfterEpoch() const {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.epoch_pause_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (options_.stop_requested != nullptr && options_.stop_requested->load()) return;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        end - std::chrono::steady_clock::now(), std::chrono::milliseconds(50)));
  }
}

Status Trainer::WriteMetricLine(double accuracy, int64_t step) const {
  if (options_.metric_file.empty()) return Status::Ok();
  const auto parent = std::filesystem::path(options_.metric_file).parent_path();
  if (!parent.empty()) COHORT_RETURN_IF_ERROR(MakeDirs(parent.string()));
  char value[32];
  std::snprintf(value, sizeof(value), "%.4f", accuracy);
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::json line = {{options_.metric_tag, value},
                         {"global_step", std::to_string(step)},
                         {"timestamp", now},
                         {"trial", options_.trial_id.empty() ? "0" : options_.trial_id}};
  std::ofstream out(options_.metric_file, std::ios::app);
  out << line.dump() << '\n';
  out.flush();
  if (!out) return Internal("append to metric file " + options_.metric_file + " failed");
  return Status::Ok();
}

Status Trainer::WriteModel(const std::vector<float>& params, const TrainResult& result) const {
  COHORT_RETURN_IF_ERROR(MakeDirs(options_.model_dir));
  std::string model("CDGTMLP1", 8);
  const uint32_t header[4] = {kDigitsFeatures, static_cast<uint32_t>(options_.hidden),
                              kDigitsClasses, 0};
  model.append(reinterpret_cast<const char*>(header), sizeof(header));
  model.append(reinterpret_cast<const char*>(params.data()), params.size() * sizeof(float));
  COHORT_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(options_.model_dir, "model.bin"), model));

  nlohmann::json metrics = {
      {"test_accuracy", result.test_accuracy},
      {"train_loss", result.train_loss},
      {"global_step", result.steps},
      {"epochs", options_.epochs},
      {"world_size", averager_->world_size()},
      {"hidden", options_.hidden},
      {"optimizer", std::string(OptimizerName(options_.optimizer))},
      {"learning_rate", options_.learning_rate},
      {"batch_size", options_.batch_size},
      {"seed", options_.seed},
      {"train_examples", train_.size()},
      {"test_examples", test_.size()},
      {"model_crc32", ModelCrc32(params)},
  };
  return WriteFileAtomically(JoinPath(options_.model_dir, "metrics.json"), metrics.dump(2) + "\n");
}

StatusOr<TrainResult> Trainer::Run() {
  COHORT_RETURN_IF_ERROR(ValidateOptions());
  const int rank = averager_->rank();
  const int world = averager_->world_size();
  const bool chief = rank == 0;
  const bool momentum = options_.optimizer == Optimizer::kMomentum;
  const Mlp mlp(options_.hidden);
  const size_t num_params = mlp.num_params();
  const size_t n_train = train_.size();
  const int64_t batch = options_.batch_size;
  const int64_t steps_per_epoch = (static_cast<int64_t>(n_train) + batch - 1) / batch;
  const int64_t total_steps = steps_per_epoch * options_.epochs;

  Rng rng(options_.seed);
  TrainerState state;
  TrainResult result;
  if (!options_.restore_from.empty()) {
    std::string restored_path;
    COHORT_ASSIGN_OR_RETURN(state, RestoreTrainerCheckpoint(options_.restore_from, &restored_path));
    if (state.hidden != options_.hidden || state.params.size() != num_params) {
      return InvalidArgument("checkpoint " + restored_path +
                             " holds a model with hidden=" + std::to_string(state.hidden) +
                             ", this run has --hidden=" + std::to_string(options_.hidden));
    }
    if (state.batch_size != options_.batch_size) {
      return InvalidArgument("checkpoint " + restored_path +
                             " counts steps of --batch-size=" + std::to_string(state.batch_size) +
                             ", this run has " + std::to_string(options_.batch_size));
    }
    if (state.velocity.size() != (momentum ? num_params : 0)) {
      return InvalidArgument("checkpoint " + restored_path +
                             " was written with a different --optimizer");
    }
    if (state.order.size() != n_train) {
      return InvalidArgument("checkpoint " + restored_path + " has a data order for " +
                             std::to_string(state.order.size()) + " examples, not " +
                             std::to_string(n_train));
    }
    COHORT_RETURN_IF_ERROR(rng.LoadState(state.rng_state));
    result.restored_step = state.step;
    Log("restored checkpoint %s at step %lld", restored_path.c_str(),
        static_cast<long long>(state.step));
  } else {
    state.hidden = options_.hidden;
    state.batch_size = options_.batch_size;
    state.params = mlp.InitParams(rng);
    if (momentum) state.velocity.assign(num_params, 0.0f);
  }
  const int64_t start_step = state.step;

  Log("digits-trainer rank %d/%d: %zu train / %zu test examples, mlp 64-%d-10 (%zu params), "
      "%s lr %g, global batch %lld, %d epochs (%lld steps)",
      rank, world, n_train, test_.size(), options_.hidden, num_params,
      std::string(OptimizerName(options_.optimizer)).c_str(), options_.learning_rate,
      static_cast<long long>(batch), options_.epochs, static_cast<long long>(total_steps));

  // The averaged buffer: the gradient, then the batch loss, then the stop vote.
  std::vector<float> buffer(num_params + 2);
  const size_t kLossSlot = num_params;
  const size_t kStopSlot = num_params + 1;
  const float lr = static_cast<float>(options_.learning_rate);
  const float mu = static_cast<float>(options_.momentum);

  while (state.step < total_steps) {
    const int64_t epoch = state.step / steps_per_epoch;
    const int64_t pos = state.step % steps_per_epoch;
    if (pos == 0) {
      state.order.resize(n_train);
      for (size_t i = 0; i < n_train; ++i) state.order[i] = static_cast<uint32_t>(i);
      rng.Shuffle(state.order);
      state.epoch_loss_sum = 0.0;
      state.epoch_batches = 0;
    }
    const int64_t begin = pos * batch;
    const int64_t count = std::min<int64_t>(batch, static_cast<int64_t>(n_train) - begin);
    const int64_t lo = begin + count * rank / world;
    const int64_t hi = begin + count * (rank + 1) / world;

    std::fill(buffer.begin(), buffer.end(), 0.0f);
    const double loss = mlp.AccumulateGradient(state.params, train_, state.order.data() + lo,
                                               static_cast<size_t>(hi - lo), buffer.data());
    // Averaging sum * world / count over the ranks gives the mean over the global batch.
    const float scale = static_cast<float>(world) / static_cast<float>(count);
    for (size_t i = 0; i < num_params; ++i) buffer[i] *= scale;
    buffer[kLossSlot] = static_cast<float>(loss) * scale;
    const bool stop_here = options_.stop_requested != nullptr &&
                           options_.stop_requested->load(std::memory_order_relaxed);
    buffer[kStopSlot] = stop_here ? 1.0f : 0.0f;
    Status averaged = averager_->Average(buffer.data(), buffer.size());
    if (!averaged.ok()) {
      return averaged.WithContext("averaging gradients at step " + std::to_string(state.step));
    }

    if (momentum) {
      for (size_t i = 0; i < num_params; ++i) {
        state.velocity[i] = mu * state.velocity[i] + buffer[i];
        state.params[i] -= lr * state.velocity[i];
      }
    } else {
      for (size_t i = 0; i < num_params; ++i) state.params[i] -= lr * buffer[i];
    }
    ++state.step;
    state.epoch_loss_sum += buffer[kLossSlot];
    ++state.epoch_batches;

    const bool stop = buffer[kStopSlot] > 0.0f;
    const bool periodic =
        options_.checkpoint_every > 0 && state.step % options_.checkpoint_every == 0;
    if (chief && !options_.checkpoint_dir.empty() && (periodic || stop)) {
      state.rng_state = rng.SaveState();
      COHORT_RETURN_IF_ERROR(
          SaveTrainerCheckpoint(options_.checkpoint_dir, state, options_.keep_checkpoints));
      Log("checkpoint at step %lld written to %s", static_cast<long long>(state.step),
          options_.checkpoint_dir.c_str());
    }
    if (pos + 1 == steps_per_epoch) {
      const double accuracy = mlp.Accuracy(state.params, test_);
      result.train_loss = state.epoch_loss_sum / static_cast<double>(state.epoch_batches);
      Log("epoch %lld/%d step %lld train_loss %.4f test_accuracy %.4f",
          static_cast<long long>(epoch + 1), options_.epochs, static_cast<long long>(state.step),
          result.train_loss, accuracy);
      if (chief) COHORT_RETURN_IF_ERROR(WriteMetricLine(accuracy, state.step));
      PauseAfterEpoch();
    }
    if (stop) {
      Log("stop requested: stopping at step %lld", static_cast<long long>(state.step));
      return Cancelled("stopped at step " + std::to_string(state.step) + " on request");
    }
    if (options_.fail_at_step > 0 && state.step == options_.fail_at_step &&
        start_step < options_.fail_at_step) {
      Log("injected failure at step %lld", static_cast<long long>(state.step));
      return Aborted("injected failure at step " + std::to_string(state.step));
    }
  }

  result.steps = state.step;
  result.test_accuracy = mlp.Accuracy(state.params, test_);
  if (state.epoch_batches > 0) {
    result.train_loss = state.epoch_loss_sum / static_cast<double>(state.epoch_batches);
  }
  result.params = state.params;
  if (chief && !options_.model_dir.empty()) {
    COHORT_RETURN_IF_ERROR(WriteModel(state.params, result));
    Log("model written to %s", options_.model_dir.c_str());
  }
  Log("model crc32 %08x after %lld steps", ModelCrc32(result.params),
      static_cast<long long>(result.steps));
  Log("final test accuracy: %.3f", result.test_accuracy);
  return result;
}

}  // namespace cohort::examples
