// Tests of the digits trainer on the real data set: it learns, a run resumed from a checkpoint
// ends bit-identical to an uninterrupted one, and data-parallel ranks end with the same model.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "common/job_spec.h"
#include "common/study_spec.h"
#include "examples/digits_trainer/digits_dataset.h"
#include "examples/digits_trainer/gradient_averager.h"
#include "examples/digits_trainer/trainer.h"
#include "examples/digits_trainer/trainer_checkpoint.h"
#include "examples/digits_trainer/trainer_state.h"
#include "tests/testing/process.h"

namespace cohort::examples {
namespace {

namespace fs = std::filesystem;

using cohort::testing::ReadFile;
using cohort::testing::TempDir;

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  gzclose(file);
}

// A run resumed from the checkpoint of `step` that ended with the parameters of the
// uninterrupted run `straight`, bit for bit.
void ExpectResumedAt(const StatusOr<TrainResult>& resumed, int64_t step,
                     const TrainResult& straight) {
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->restored_step, step);
  ASSERT_EQ(resumed->params.size(), straight.params.size());
  EXPECT_EQ(0, std::memcmp(resumed->params.data(), straight.params.data(),
                           straight.params.size() * sizeof(float)));
}

class DigitsTrainerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kDefaultDigitsPath)) return;
    auto data = LoadDigits(kDefaultDigitsPath);
    ASSERT_TRUE(data.ok()) << data.status().ToString();
    all_ = new Dataset(std::move(*data));
    train_ = new Dataset();
    test_ = new Dataset();
    SplitTrainTest(*all_, 0.2, 42, train_, test_);
  }
  static void TearDownTestSuite() {
    delete all_;
    delete train_;
    delete test_;
    all_ = train_ = test_ = nullptr;
  }
  void SetUp() override {
    if (all_ == nullptr) {
      GTEST_SKIP() << kDefaultDigitsPath << " is missing (Debian package python3-sklearn)";
    }
  }

  static TrainerOptions QuietOptions(int epochs = 3) {
    TrainerOptions options;
    options.epochs = epochs;
    options.log = nullptr;
    return options;
  }
  // `base` checkpointing into `dir`/checkpoints every `every` steps.
  static TrainerOptions Checkpointing(const TrainerOptions& base, const TempDir& dir, int every) {
    TrainerOptions options = base;
    options.checkpoint_dir = dir.Join("checkpoints");
    options.checkpoint_every = every;
    return options;
  }
  // A run of `options` on this process alone.
  StatusOr<TrainResult> Train(const TrainerOptions& options) {
    LocalGradientAverager averager;
    return Trainer(options, *train_, *test_, &averager).Run();
  }

  static Dataset* all_;
  static Dataset* train_;
  static Dataset* test_;
};

Dataset* DigitsTrainerTest::all_ = nullptr;
Dataset* DigitsTrainerTest::train_ = nullptr;
Dataset* DigitsTrainerTest::test_ = nullptr;

TEST_F(DigitsTrainerTest, LoadsAndSplitsTheRealDataSet) {
  ASSERT_EQ(all_->size(), 1797u);
  EXPECT_EQ(all_->features.size(), 1797u * kDigitsFeatures);
  std::vector<int> per_class(kDigitsClasses, 0);
  for (int label : all_->labels) ++per_class.at(label);
  for (int count : per_class) EXPECT_GT(count, 170);
  for (float v : all_->features) {
    ASSERT_GE(v, 0.0f);
    ASSERT_LE(v, 1.0f);
  }
  EXPECT_EQ(train_->size(), 1438u);
  EXPECT_EQ(test_->size(), 359u);

  // The split depends only on its seed.
  Dataset train2, test2;
  SplitTrainTest(*all_, 0.2, 42, &train2, &test2);
  EXPECT_EQ(train2.labels, train_->labels);
  EXPECT_EQ(test2.features, test_->features);
  SplitTrainTest(*all_, 0.2, 7, &train2, &test2);
  EXPECT_NE(train2.labels, train_->labels);
}

TEST(DigitsDatasetTest, MalformedFileNamesTheLine) {
  TempDir dir;
  std::string good;
  for (int i = 0; i < 64; ++i) good += "1,";
  good += "3\n";
  std::string text;
  for (int i = 0; i < 11; ++i) text += good;
  WriteGzip(dir.Join("ok.csv.gz"), text);
  auto ok = LoadDigits(dir.Join("ok.csv.gz"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 11u);
  EXPECT_FLOAT_EQ(ok->features[0], 1.0f / 16.0f);
  EXPECT_EQ(ok->labels[10], 3);

  WriteGzip(dir.Join("bad.csv.gz"), good + good + "1,2,x\n" + good);
  auto bad = LoadDigits(dir.Join("bad.csv.gz"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.csv.gz:3"), std::string::npos)
      << bad.status().message();

  WriteGzip(dir.Join("label.csv.gz"), good.substr(0, good.size() - 2) + "12\n");
  EXPECT_EQ(LoadDigits(dir.Join("label.csv.gz")).status().code(), StatusCode::kInvalidArgument);

  EXPECT_EQ(LoadDigits(dir.Join("missing.csv.gz")).status().code(), StatusCode::kNotFound);
}

TEST(TrainerStateTest, RoundTripsAndRejectsTornBytes) {
  TrainerState state;
  state.hidden = 4;
  state.batch_size = 8;
  state.step = 17;
  state.epoch_loss_sum = 1.25;
  state.epoch_batches = 3;
  state.rng_state = "1 2 3";
  state.order = {3, 1, 2, 0};
  state.params = {0.5f, -1.5f, 2.0f};
  state.velocity = {0.25f, 0.0f, -0.125f};
  const std::string bytes = SerializeTrainerState(state);
  auto parsed = ParseTrainerState(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(*parsed, state);

  for (size_t cut : {size_t{0}, size_t{5}, size_t{20}, bytes.size() - 1}) {
    EXPECT_EQ(ParseTrainerState(bytes.substr(0, cut)).status().code(), StatusCode::kDataLoss)
        << "cut at " << cut;
  }
  EXPECT_EQ(ParseTrainerState(bytes + "x").status().code(), StatusCode::kDataLoss);
}

TEST_F(DigitsTrainerTest, SingleProcessLearnsAndWritesItsFiles) {
  TempDir dir;
  TrainerOptions options = QuietOptions();
  options.model_dir = dir.Join("model");
  options.metric_file = dir.Join("hp/metrics.jsonl");
  options.trial_id = "7";
  LocalGradientAverager averager;
  Trainer trainer(options, *train_, *test_, &averager);
  auto result = trainer.Run();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GT(result->test_accuracy, 0.90);
  EXPECT_EQ(result->steps, 3 * 45);  // ceil(1438 / 32) = 45 steps per epoch
  EXPECT_LT(result->train_loss, 0.5);

  // model.bin: 24-byte header and the parameters.
  const std::string model = ReadFile(dir.Join("model/model.bin"));
  ASSERT_EQ(model.size(), 24 + result->params.size() * sizeof(float));
  EXPECT_EQ(model.substr(0, 8), "CDGTMLP1");
  EXPECT_EQ(0, std::memcmp(model.data() + 24, result->params.data(), model.size() - 24));
  auto metrics = nlohmann::json::parse(ReadFile(dir.Join("model/metrics.json")));
  EXPECT_DOUBLE_EQ(metrics["test_accuracy"].get<double>(), result->test_accuracy);
  EXPECT_EQ(metrics["global_step"].get<int>(), 135);

  // One hypertune line per epoch, cloudml-hypertune's shape (values as strings).
  std::ifstream lines(dir.Join("hp/metrics.jsonl"));
  std::string line;
  std::vector<nlohmann::json> parsed;
  while (std::getline(lines, line)) parsed.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[2]["global_step"], "135");
  EXPECT_EQ(parsed[2]["trial"], "7");
  EXPECT_TRUE(parsed[2]["timestamp"].is_number());
  EXPECT_NEAR(std::stod(parsed[2]["accuracy"].get<std::string>()), result->test_accuracy, 1e-4);
}

TEST_F(DigitsTrainerTest, PlainSgdLearnsToo) {
  TrainerOptions options = QuietOptions();
  options.optimizer = Optimizer::kSgd;
  options.learning_rate = 0.3;
  options.hidden = 32;
  LocalGradientAverager averager;
  auto result = Trainer(options, *train_, *test_, &averager).Run();
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_GT(result->test_accuracy, 0.90);
}

TEST_F(DigitsTrainerTest, RejectsBadOptions) {
  LocalGradientAverager averager;
  TrainerOptions options = QuietOptions();
  options.batch_size = 0;
  EXPECT_EQ(Trainer(options, *train_, *test_, &averager).Run().status().code(),
            StatusCode::kInvalidArgument);
  options = QuietOptions();
  options.learning_rate = -1;
  EXPECT_EQ(Trainer(options, *train_, *test_, &averager).ValidateOptions().code(),
            StatusCode::kInvalidArgument);
  options = QuietOptions();
  options.epoch_pause_ms = -1;
  EXPECT_EQ(Trainer(options, *train_, *test_, &averager).ValidateOptions().code(),
            StatusCode::kInvalidArgument);
}

// The pause after each epoch (the demo's) leaves the model as it is, and a stop request cuts it
// short instead of waiting it out.
TEST_F(DigitsTrainerTest, EpochPauseKeepsTheModelAndYieldsToAStop) {
  LocalGradientAverager averager;
  TrainerOptions base = QuietOptions();
  auto straight = Trainer(base, *train_, *test_, &averager).Run();
  ASSERT_TRUE(straight.ok()) << straight.status().ToString();
  TrainerOptions paused = base;
  paused.epoch_pause_ms = 20;
  auto slow = Trainer(paused, *train_, *test_, &averager).Run();
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  EXPECT_EQ(slow->params, straight->params);

  std::atomic<bool> stop{false};
  paused.epoch_pause_ms = 600000;  // ten minutes an epoch: only the stop ends this run
  paused.stop_requested = &stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    stop = true;
  });
  auto stopped = Trainer(paused, *train_, *test_, &averager).Run();
  stopper.join();
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled) << stopped.status().ToString();
}

// Interrupted at `fail_at` (mid-epoch or at an epoch boundary) and resumed from the newest
// checkpoint, the run ends with exactly the parameters of a run that never stopped.
TEST_F(DigitsTrainerTest, ResumedRunEqualsUninterruptedRunBitForBit) {
  LocalGradientAverager averager;
  TrainerOptions base = QuietOptions();
  auto straight = Trainer(base, *train_, *test_, &averager).Run();
  ASSERT_TRUE(straight.ok()) << straight.status().ToString();

  for (int64_t fail_at : {int64_t{50}, int64_t{90}}) {  // step 90 ends epoch 2
    SCOPED_TRACE("fail at step " + std::to_string(fail_at));
    TempDir dir;
    TrainerOptions first = base;
    first.checkpoint_dir = dir.Join("checkpoints");
    first.checkpoint_every = 10;
    first.fail_at_step = fail_at;
    auto interrupted = Trainer(first, *train_, *test_, &averager).Run();
    ASSERT_EQ(interrupted.status().code(), StatusCode::kAborted);

    TrainerOptions second = first;
    second.restore_from = first.checkpoint_dir;  // a directory of checkpoints: newest is taken
    auto resumed = Trainer(second, *train_, *test_, &averager).Run();
    ASSERT_NO_FATAL_FAILURE(ExpectResumedAt(resumed, fail_at, *straight));
    EXPECT_EQ(resumed->test_accuracy, straight->test_accuracy);
    EXPECT_EQ(resumed->train_loss, straight->train_loss);

    // Only the newest three checkpoints are kept.
    int kept = 0;
    for (const auto& entry : fs::directory_iterator(first.checkpoint_dir)) {
      if (entry.path().filename().string().rfind("ckpt-", 0) == 0) ++kept;
    }
    EXPECT_EQ(kept, 3);
  }
}

// A torn or corrupted newest checkpoint is skipped: the run resumes from the one before it and
// still ends equal to the uninterrupted run.
TEST_F(DigitsTrainerTest, CorruptNewestCheckpointIsSkipped) {
  const TrainerOptions base = QuietOptions(2);
  auto straight = Train(base);
  ASSERT_TRUE(straight.ok());

  TempDir dir;
  TrainerOptions first = Checkpointing(base, dir, 10);
  first.fail_at_step = 50;
  ASSERT_EQ(Train(first).status().code(), StatusCode::kAborted);
  {
    // Flip one byte in the middle of the newest state file.
    std::fstream state(dir.Join("checkpoints/ckpt-50/trainer_state.bin"),
                       std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(state.is_open());
    state.seekp(100);
    state.put('\x5a');
  }
  // Named directly, the corrupt checkpoint is an error, not a silent fresh start.
  TrainerOptions direct = base;
  direct.restore_from = dir.Join("checkpoints/ckpt-50");
  EXPECT_EQ(Train(direct).status().code(), StatusCode::kDataLoss);
  TrainerOptions second = first;
  second.fail_at_step = 0;  // restored before step 50, it would fail there again
  second.restore_from = first.checkpoint_dir;
  auto resumed = Train(second);
  ASSERT_NO_FATAL_FAILURE(ExpectResumedAt(resumed, 40, *straight));
}

// A stop request (SIGTERM in the binary) checkpoints at the current step even off the periodic
// schedule, and the resumed run still matches the uninterrupted one.
TEST_F(DigitsTrainerTest, StopRequestCheckpointsAndResumes) {
  const TrainerOptions base = QuietOptions(2);
  auto straight = Train(base);
  ASSERT_TRUE(straight.ok());

  TempDir dir;
  std::atomic<bool> stop{true};
  TrainerOptions first = Checkpointing(base, dir, 1000);
  first.stop_requested = &stop;
  auto stopped = Train(first);
  ASSERT_EQ(stopped.status().code(), StatusCode::kCancelled);

  TrainerOptions second = base;
  second.restore_from = first.checkpoint_dir;
  auto resumed = Train(second);
  ASSERT_NO_FATAL_FAILURE(ExpectResumedAt(resumed, 1, *straight));
}

TEST_F(DigitsTrainerTest, RestoreRejectsACheckpointOfAnotherModel) {
  TempDir dir;
  LocalGradientAverager averager;
  TrainerOptions first = QuietOptions();
  first.epochs = 1;
  first.checkpoint_dir = dir.Join("checkpoints");
  first.checkpoint_every = 10;
  ASSERT_TRUE(Trainer(first, *train_, *test_, &averager).Run().ok());

  TrainerOptions other = QuietOptions();
  other.hidden = 16;
  other.restore_from = first.checkpoint_dir;
  EXPECT_EQ(Trainer(other, *train_, *test_, &averager).Run().status().code(),
            StatusCode::kInvalidArgument);
  other = QuietOptions();
  other.batch_size = 64;
  other.restore_from = first.checkpoint_dir;
  EXPECT_EQ(Trainer(other, *train_, *test_, &averager).Run().status().code(),
            StatusCode::kInvalidArgument);
  other = QuietOptions();
  other.optimizer = Optimizer::kSgd;
  other.restore_from = first.checkpoint_dir;
  EXPECT_EQ(Trainer(other, *train_, *test_, &averager).Run().status().code(),
            StatusCode::kInvalidArgument);
}

// The job files in examples/jobs/ pass the same validation `cohort submit` runs.
TEST(ExampleJobsTest, JobFilesAreValid) {
  const std::string jobs = std::string(COHORT_EXAMPLES_DIR) + "/jobs/";
  auto ddp = LoadJobSpec(jobs + "digits_ddp.yaml");
  ASSERT_TRUE(ddp.ok()) << ddp.status().ToString();
  EXPECT_EQ(ddp->pools.size(), 3u);
  ASSERT_NE(ddp->FindPool(Role::kReducer), nullptr);
  EXPECT_EQ(ddp->FindPool(Role::kReducer)->builtin, Builtin::kReducer);
  EXPECT_EQ(ddp->FindPool(Role::kWorker)->replicas, 2);
  auto single = LoadJobSpec(jobs + "digits_single.yaml");
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->TotalReplicas(), 1);
  auto seeds = LoadJobSpec(jobs + "digits_seeds.yaml");
  ASSERT_TRUE(seeds.ok()) << seeds.status().ToString();
  EXPECT_TRUE(seeds->IsArray());
  EXPECT_EQ(seeds->scheduling.array.indexes, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(seeds->scheduling.array.parallelism, 4);
}

// Every study in examples/studies/ is valid, and each of its parameters is a flag digits-trainer
// takes (trials pass `--<id>=<value>`; snake_case ids reach the dashed flags).
TEST(ExampleJobsTest, StudyParametersAreTrainerFlags) {
  std::string help;
  {
    FILE* pipe = ::popen((std::string(DIGITS_TRAINER_BINARY) + " --help").c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) help.append(buf, n);
    ASSERT_EQ(::pclose(pipe), 0);
  }
  int studies = 0;
  for (const auto& entry : fs::directory_iterator(std::string(COHORT_EXAMPLES_DIR) + "/studies")) {
    if (entry.path().extension() != ".yaml") continue;
    ++studies;
    SCOPED_TRACE(entry.path().string());
    auto study = LoadStudySpec(entry.path().string());
    ASSERT_TRUE(study.ok()) << study.status().ToString();
    for (const auto& parameter : study->parameters) {
      std::string flag = "--" + parameter.id;
      std::replace(flag.begin() + 2, flag.end(), '_', '-');
      if (flag == "--learning-rate") flag = "--lr";
      EXPECT_NE(help.find(flag + " "), std::string::npos) << flag << " is not a trainer flag";
    }
  }
  EXPECT_GT(studies, 0);
}

}  // namespace
}  // namespace cohort::examples
