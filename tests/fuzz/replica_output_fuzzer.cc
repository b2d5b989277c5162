// Fuzz target: arbitrary bytes as what a replica writes and its agent (running as root) reads. The
// first byte picks the reader, the second is for the reader's choices, the rest is the text:
//   0  a line of the hypertune metric file (ParseMetricLine): an accepted line must come back
//      from FormatMetricLine as a line that parses, with the same step, trial, checkpoint path
//      and number of metrics;
//   1  the end of a failed replica's log (FailureExcerpt, TorchrunKillSignal);
//   2  torch's error file (ErrorFileMessage);
//   3  a script's checkpoint file, named by the second byte (.safetensors, .pt, a Trainer
//      folder's trainer_state.json, a .distcp shard), judged torn or whole
//      (InspectScriptCheckpoints);
//   4  the MANIFEST of a Cohort checkpoint: the text as JSON with its checksum set (so the fuzzer
//      gets past it) and as is (FindLatestValidCheckpoint, InspectCheckpoints).
// The excerpts must be printable, well-formed UTF-8 of at most kMaxFailureExcerptBytes. Nothing may
// crash, hang or read past the text.
#include <spdlog/spdlog.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "agent/failure_excerpt.h"
#include "common/checkpoint.h"
#include "common/hypertune.h"
#include "common/script_checkpoints.h"
#include "common/utf8.h"

namespace {

namespace fs = std::filesystem;

void CheckExcerpt(const std::string& excerpt) {
  if (excerpt.size() > cohort::agent::kMaxFailureExcerptBytes) std::abort();
  if (cohort::ValidUtf8(excerpt, /*printable=*/true) != excerpt) std::abort();
}

// A folder of its own for this process, emptied before each input and removed at exit.
struct ScratchFolder {
  ScratchFolder() {
    std::string tmpl = (fs::temp_directory_path() / "cohort-fuzz-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path = tmpl;
  }
  ~ScratchFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path path;
};

const fs::path& Scratch() {
  static const ScratchFolder folder;
  return folder.path;
}

void Write(const fs::path& path, std::string_view bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void MetricLine(std::string_view text) {
  auto record = cohort::ParseMetricLine(text);
  if (!record.ok()) return;
  auto again = cohort::ParseMetricLine(cohort::FormatMetricLine(*record));
  if (!again.ok() || again->metrics.size() != record->metrics.size() ||
      again->step != record->step || again->trial != record->trial ||
      again->checkpoint_path != record->checkpoint_path) {
    std::abort();
  }
}

void LogTail(std::string_view text) {
  for (bool whole : {false, true}) {
    CheckExcerpt(cohort::agent::FailureExcerpt(text, whole, /*any_last_line=*/true));
    CheckExcerpt(cohort::agent::FailureExcerpt(text, whole, /*any_last_line=*/false));
    int signal = cohort::agent::TorchrunKillSignal(text, whole);
    if (signal < 0) std::abort();
  }
}

void ScriptCheckpoint(uint8_t kind, std::string_view bytes) {
  const fs::path& dir = Scratch();
  switch (kind % 4) {
    case 0:
      Write(dir / "model.safetensors", bytes);
      break;
    case 1:
      Write(dir / "epoch_3.pt", bytes);
      break;
    case 2:
      Write(dir / "checkpoint-500" / "trainer_state.json", bytes);
      Write(dir / "checkpoint-500" / "training_args.bin", "x");
      break;
    default:
      Write(dir / "step_7" / "__0_0.distcp", bytes);
      Write(dir / "step_7" / ".metadata", bytes);
      break;
  }
  cohort::ScriptCheckpointInventory inventory = cohort::InspectScriptCheckpoints(dir.string());
  if (inventory.checkpoints.empty()) std::abort();  // each case writes one
}

void Manifest(std::string_view text) {
  const fs::path& dir = Scratch();
  Write(dir / "ckpt-1" / "MANIFEST", text);
  nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_object()) {  // parsed, so its strings are UTF-8 and it dumps
    m.erase("manifest_crc32");
    const std::string body = m.dump();
    m["manifest_crc32"] = ::crc32_z(0, reinterpret_cast<const Bytef*>(body.data()), body.size());
    Write(dir / "ckpt-2" / "MANIFEST", m.dump());
  }
  Write(dir / "ckpt-2" / "weights.bin", "0123456789");
  (void)cohort::FindLatestValidCheckpoint(dir.string());
  auto inventory = cohort::InspectCheckpoints(dir.string());
  if (!inventory.ok()) std::abort();  // the folder is there
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = (spdlog::set_level(spdlog::level::off), true);  // skipped checkpoints
  (void)quiet;
  if (size < 2) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(Scratch())) fs::remove_all(entry.path(), ec);
  switch (data[0] % 5) {
    case 0:
      MetricLine(text);
      break;
    case 1:
      LogTail(text);
      break;
    case 2:
      CheckExcerpt(cohort::agent::ErrorFileMessage(text));
      break;
    case 3:
      ScriptCheckpoint(data[1], text);
      break;
    default:
      Manifest(text);
      break;
  }
  return 0;
}
