#include "examples/digits_trainer/trainer_state.h"

#include <cstring>

namespace cohort::examples {
namespace {

constexpr char kMagic[] = "CDGTST02";
constexpr size_t kMagicSize = 8;

template <typename T>
void Put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

template <typename T>
void PutVector(std::string& out, const std::vector<T>& values, bool wide_count) {
  if (wide_count) {
    Put<uint64_t>(out, values.size());
  } else {
    Put<uint32_t>(out, static_cast<uint32_t>(values.size()));
  }
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  bool Get(T* value) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  template <typename T>
  bool GetVector(std::vector<T>* values, bool wide_count) {
    uint64_t n = 0;
    if (wide_count) {
      if (!Get(&n)) return false;
    } else {
      uint32_t n32 = 0;
      if (!Get(&n32)) return false;
      n = n32;
    }
    if ((bytes_.size() - pos_) / sizeof(T) < n) return false;
    values->resize(n);
    std::memcpy(values->data(), bytes_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return true;
  }

  bool GetString(std::string* value) {
    std::vector<char> chars;
    if (!GetVector(&chars, false)) return false;
    value->assign(chars.begin(), chars.end());
    return true;
  }

  bool done() const { return pos_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::string SerializeTrainerState(const TrainerState& state) {
  std::string out(kMagic, kMagicSize);
  Put<uint32_t>(out, static_cast<uint32_t>(state.hidden));
  Put<uint32_t>(out, static_cast<uint32_t>(state.batch_size));
  Put<int64_t>(out, state.step);
  Put<double>(out, state.epoch_loss_sum);
  Put<int64_t>(out, state.epoch_batches);
  PutVector(out, std::vector<char>(state.rng_state.begin(), state.rng_state.end()), false);
  PutVector(out, state.order, false);
  PutVector(out, state.params, true);
  PutVector(out, state.velocity, true);
  return out;
}

StatusOr<TrainerState> ParseTrainerState(std::string_view bytes) {
  if (bytes.size() < kMagicSize || bytes.substr(0, kMagicSize) != std::string_view(kMagic)) {
    return DataLoss("not a digits-trainer state (bad magic)");
  }
  Reader reader(bytes.substr(kMagicSize));
  TrainerState state;
  uint32_t hidden = 0;
  uint32_t batch_size = 0;
  const bool ok = reader.Get(&hidden) && reader.Get(&batch_size) && reader.Get(&state.step) &&
                  reader.Get(&state.epoch_loss_sum) && reader.Get(&state.epoch_batches) &&
                  reader.GetString(&state.rng_state) && reader.GetVector(&state.order, false) &&
                  reader.GetVector(&state.params, true) && reader.GetVector(&state.velocity, true);
  if (!ok) return DataLoss("digits-trainer state is truncated");
  if (!reader.done()) return DataLoss("digits-trainer state has trailing bytes");
  if (hidden == 0 || batch_size == 0 || state.step < 0) {
    return DataLoss("digits-trainer state has bad header fields");
  }
  state.hidden = static_cast<int>(hidden);
  state.batch_size = static_cast<int>(batch_size);
  return state;
}

}  // namespace cohort::examples
