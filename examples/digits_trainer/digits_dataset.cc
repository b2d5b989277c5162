#include "examples/digits_trainer/digits_dataset.h"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "examples/digits_trainer/rng.h"

namespace cohort::examples {
namespace {

// Parses one CSV line into 64 features and a label.
Status ParseLine(const char* line, Dataset* out) {
  const char* p = line;
  float values[kDigitsFeatures + 1];
  for (int col = 0; col <= kDigitsFeatures; ++col) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(p, &end);
    if (end == p || errno != 0 || !std::isfinite(v)) {
      return InvalidArgument("column " + std::to_string(col + 1) + " is not a number");
    }
    values[col] = static_cast<float>(v);
    p = end;
    while (*p == ' ') ++p;
    if (col < kDigitsFeatures) {
      if (*p != ',') return InvalidArgument("expected 65 comma-separated columns");
      ++p;
    }
  }
  while (*p == ' ' || *p == '\r' || *p == '\n') ++p;
  if (*p != '\0') return InvalidArgument("more than 65 columns");
  const float label = values[kDigitsFeatures];
  if (label < 0 || label >= kDigitsClasses || label != std::floor(label)) {
    return InvalidArgument("label must be an integer 0..9");
  }
  for (int col = 0; col < kDigitsFeatures; ++col) {
    if (values[col] < 0 || values[col] > 16) {
      return InvalidArgument("pixel " + std::to_string(col + 1) + " is outside 0..16");
    }
    out->features.push_back(values[col] / 16.0f);
  }
  out->labels.push_back(static_cast<int>(label));
  return Status::Ok();
}

}  // namespace

StatusOr<Dataset> LoadDigits(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return ErrnoStatus("open " + path, errno == 0 ? ENOENT : errno);
  Dataset data;
  char line[4096];
  int line_no = 0;
  Status status;
  while (gzgets(file, line, sizeof(line)) != nullptr) {
    ++line_no;
    if (std::strchr(line, '\n') == nullptr && !gzeof(file)) {
      status = InvalidArgument("line too long");
    } else if (line[0] == '\n' || line[0] == '\0' || (line[0] == '\r' && line[1] == '\n')) {
      continue;
    } else {
      status = ParseLine(line, &data);
    }
    if (!status.ok()) break;
  }
  int err = Z_OK;
  const char* message = gzerror(file, &err);
  if (status.ok() && err != Z_OK && err != Z_STREAM_END) {
    status = DataLoss(std::string("decompressing: ") + message);
  }
  gzclose(file);
  if (!status.ok()) {
    return status.WithContext(path + ":" + std::to_string(line_no));
  }
  if (data.size() < 10) {
    return InvalidArgument(path + ": only " + std::to_string(data.size()) + " examples");
  }
  return data;
}

void SplitTrainTest(const Dataset& all, double test_fraction, uint64_t seed, Dataset* train,
                    Dataset* test) {
  std::vector<uint32_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
  Rng rng(seed);
  rng.Shuffle(order);
  const size_t n_test = static_cast<size_t>(std::llround(test_fraction * all.size()));
  const size_t n_train = all.size() - n_test;
  *train = Dataset();
  *test = Dataset();
  for (size_t i = 0; i < order.size(); ++i) {
    Dataset* dst = i < n_train ? train : test;
    const float* row = all.row(order[i]);
    dst->features.insert(dst->features.end(), row, row + kDigitsFeatures);
    dst->labels.push_back(all.labels[order[i]]);
  }
}

}  // namespace cohort::examples
