#include "common/script_checkpoints.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "common/checkpoint.h"
#include "common/file_util.h"

namespace cohort {
namespace {

// A zip file's end-of-central-directory record: 22 bytes and a comment of up to 65535.
constexpr uint64_t kEocdSize = 22;
constexpr uint64_t kMaxZipTail = kEocdSize + 65535;
constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;  // the format's own limit
constexpr uint64_t kMaxTrainerState = 64u << 20;

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// Hugging Face's Trainer names its checkpoints checkpoint-<step>.
bool IsTrainerCheckpointName(std::string_view name) {
  constexpr std::string_view kPrefix = "checkpoint-";
  return name.starts_with(kPrefix) && AllDigits(name.substr(kPrefix.size()));
}

// checkpoint-500, ckpt_3, step_10, global_step7, epoch=3, iter-200 (see the header).
bool IsStepFolderName(std::string_view name) {
  const std::string lower = Lower(name);
  for (std::string_view stem :
       {"checkpoint", "ckpt", "global_step", "step", "epoch", "iteration", "iter"}) {
    if (!lower.starts_with(stem)) continue;
    std::string_view rest = std::string_view(lower).substr(stem.size());
    if (!rest.empty() && (rest[0] == '-' || rest[0] == '_' || rest[0] == '=')) {
      rest.remove_prefix(1);
    }
    if (AllDigits(rest)) return true;
  }
  return false;
}

bool HasCheckpointExtension(std::string_view name) {
  const std::string lower = Lower(name);
  for (std::string_view ext : {".pt", ".pth", ".ckpt", ".bin", ".safetensors", ".tar"}) {
    if (lower.ends_with(ext)) return true;
  }
  return false;
}

uint64_t LittleEndian(const std::string& bytes, size_t at, size_t width) {
  uint64_t v = 0;
  for (size_t i = 0; i < width; ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
  }
  return v;
}

int64_t ModifiedMs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

std::string ZipWhyTorn(int fd, uint64_t size) {
  if (size < kEocdSize)
    return "a torch.save archive (zip) cut short: " + std::to_string(size) +
           " bytes, no end-of-central-directory record";
  const uint64_t tail_size = std::min(size, kMaxZipTail);
  std::string tail;
  if (!ReadAt(fd, size - tail_size, tail_size, &tail, "zip tail").ok() ||
      tail.size() != tail_size) {
    return "";  // unreadable here: not judged
  }
  // The record is the signature, 16 bytes of fields, the comment's length, then the comment,
  // which ends the file.
  for (size_t p = tail.size() - kEocdSize + 1; p-- > 0;) {
    if (tail.compare(p, 4, "PK\x05\x06") != 0) continue;
    if (p + kEocdSize + LittleEndian(tail, p + 20, 2) == tail.size()) return "";
  }
  return "a torch.save archive (zip) cut short: no end-of-central-directory record at its end";
}

std::string SafetensorsWhyTorn(int fd, uint64_t size) {
  std::string head;
  if (!ReadAt(fd, 0, 8, &head, "safetensors header").ok()) return "";
  if (head.size() < 8) return "a .safetensors file cut short inside its header's length";
  const uint64_t header_len = LittleEndian(head, 0, 8);
  if (header_len > kMaxSafetensorsHeader) return "";  // not what the format writes: not judged
  if (size - 8 < header_len) return "a .safetensors file cut short inside its header";
  std::string header;
  if (!ReadAt(fd, 8, header_len, &header, "safetensors header").ok()) return "";
  nlohmann::json tensors = nlohmann::json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!tensors.is_object()) return "";
  uint64_t data_end = 0;
  for (const auto& [key, tensor] : tensors.items()) {
    if (key == "__metadata__" || !tensor.is_object()) continue;
    auto offsets = tensor.find("data_offsets");
    if (offsets == tensor.end() || !offsets->is_array() || offsets->size() != 2 ||
        !(*offsets)[1].is_number_unsigned()) {
      continue;
    }
    data_end = std::max(data_end, (*offsets)[1].get<uint64_t>());
  }
  if (size - 8 - header_len >= data_end) return "";
  return "a .safetensors file cut short: " + std::to_string(size) + " bytes of the " +
         std::to_string(8 + header_len + data_end) + " its header describes";
}

// Of the regular file open at `fd`, named `name`: whether it is a script's checkpoint (named as
// one, or a torch.save archive), and if so why it is torn ("" when nothing says so).
struct FileVerdict {
  bool checkpoint = false;
  std::string torn;
};

FileVerdict JudgeFile(const std::string& name, int fd, uint64_t size) {
  FileVerdict verdict;
  verdict.checkpoint = HasCheckpointExtension(name);
  if (size == 0) {
    if (verdict.checkpoint) verdict.torn = "an empty file";
    return verdict;
  }
  if (Lower(name).ends_with(".safetensors")) {
    verdict.torn = SafetensorsWhyTorn(fd, size);
    return verdict;
  }
  std::string magic;
  if (ReadAt(fd, 0, 4, &magic, "file head").ok() && magic == "PK\x03\x04") {
    verdict.checkpoint = true;
    verdict.torn = ZipWhyTorn(fd, size);
  }
  return verdict;
}

// Whether `folder` holds a trainer_state.json, and whether it parses.
struct TrainerState {
  bool present = false;
  bool parses = false;
};

TrainerState ReadTrainerState(int folder_fd) {
  TrainerState state;
  struct stat st;
  UniqueFd fd = OpenNoFollow(folder_fd, "trainer_state.json", false, &st);
  if (!fd.ok()) return state;
  state.present = true;
  if (static_cast<uint64_t>(st.st_size) > kMaxTrainerState) return state;
  std::string text;
  if (!ReadAt(fd.get(), 0, kMaxTrainerState, &text, "trainer_state.json").ok()) return state;
  state.parses = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_object();
  return state;
}

bool HoldsRegularFile(int folder_fd, const char* name) {
  struct stat st;
  return ::fstatat(folder_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
}

// The names in the folder open at `fd` ("." and ".." left out), sorted; at most one more than
// a walk looks at in all. False where it cannot be read.
bool ListFolder(int fd, std::vector<std::string>* names) {
  const int copy = ::dup(fd);
  if (copy < 0) return false;
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return false;
  }
  while (const dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name != "." && name != "..") names->emplace_back(name);
    if (names->size() > static_cast<size_t>(kScriptCheckpointMaxEntries)) break;
  }
  ::closedir(dir);
  std::sort(names->begin(), names->end());
  return true;
}

// torch.distributed.checkpoint writes its shards (*.distcp), then its metadata under a temporary
// name, renamed last to .metadata (or __<rank>.metadata, each rank its own): shards without it
// are a save cut short, which dcp.load refuses.
std::string WhyTornDcpFolder(int folder_fd, const std::vector<std::string>& names) {
  bool shards = false;
  for (const std::string& name : names) {
    if (name == ".metadata") return "";
    if (name.size() > 11 && name.starts_with("__") && name.ends_with(".metadata") &&
        AllDigits(std::string_view(name).substr(2, name.size() - 11))) {
      return "";
    }
    if (name.ends_with(".distcp") && HoldsRegularFile(folder_fd, name.c_str())) shards = true;
  }
  return shards ? "torch.distributed.checkpoint shards (.distcp) without the .metadata written "
                  "last"
                : "";
}

class Walker {
 public:
  Walker(WalkScope scope, const ScriptCheckpointVisitor& visit) : scope_(scope), visit_(visit) {}

  // False when it stopped at its bounds.
  bool Run(int top_fd) {
    Walk(top_fd, "", 0);
    return !stopped_;
  }

 private:
  bool Count() {
    if (++entries_ > kScriptCheckpointMaxEntries) stopped_ = true;
    return !stopped_;
  }

  // An entry of a folder, as fstatat saw it (not through a link).
  struct Entry {
    std::string name;
    struct stat st;
  };

  // Which of `entries` are judged: all, or with kNewest the newest files and step folders.
  std::vector<bool> Judged(const std::vector<Entry>& entries) const {
    if (scope_ == WalkScope::kAll) return std::vector<bool>(entries.size(), true);
    std::vector<std::pair<int64_t, size_t>> files, folders;  // (-mtime ns, index)
    for (size_t i = 0; i < entries.size(); ++i) {
      const struct stat& st = entries[i].st;
      const int64_t ns =
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
      if (S_ISREG(st.st_mode)) files.emplace_back(-ns, i);
      if (S_ISDIR(st.st_mode) && IsStepFolderName(entries[i].name)) folders.emplace_back(-ns, i);
    }
    std::vector<bool> judged(entries.size(), false);
    for (auto* list : {&files, &folders}) {
      std::sort(list->begin(), list->end());
      for (size_t k = 0; k < list->size() && k < kScriptCheckpointNewestPerFolder; ++k) {
        judged[(*list)[k].second] = true;
      }
    }
    return judged;
  }

  // Visits the checkpoints of the folder `fd` at `rel` ("" for the top) and below it.
  void Walk(int fd, const std::string& rel, int depth) {
    std::vector<std::string> names;
    if (!ListFolder(fd, &names)) return;
    std::vector<Entry> entries;
    for (std::string& name : names) {
      if (depth == 0 &&
          (name == kTornCheckpointsDir || name == "LATEST" || name.starts_with("LATEST."))) {
        continue;  // those set aside, and Cohort's own LATEST (common/checkpoint.h)
      }
      Entry entry{std::move(name), {}};
      if (::fstatat(fd, entry.name.c_str(), &entry.st, AT_SYMLINK_NOFOLLOW) == 0) {
        entries.push_back(std::move(entry));
      }
    }
    const std::vector<bool> judged = Judged(entries);
    bool trainer_sibling = false;  // a checkpoint-<N> here with its trainer_state.json
    for (const Entry& e : entries) {
      if (!S_ISDIR(e.st.st_mode) || !IsTrainerCheckpointName(e.name)) continue;
      struct stat st;
      UniqueFd sub = OpenNoFollow(fd, e.name, true, &st);
      if (sub.ok() && HoldsRegularFile(sub.get(), "trainer_state.json")) trainer_sibling = true;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!Count()) return;
      const std::string& name = entries[i].name;
      ScriptCheckpoint checkpoint;
      checkpoint.path = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (S_ISREG(entries[i].st.st_mode)) {
        if (!judged[i]) continue;
        UniqueFd file = OpenNoFollow(fd, name, false, &st);
        if (!file.ok()) continue;
        FileVerdict verdict = JudgeFile(name, file.get(), static_cast<uint64_t>(st.st_size));
        if (!verdict.checkpoint) continue;
        checkpoint.bytes = static_cast<uint64_t>(st.st_size);
        checkpoint.modified_ms = ModifiedMs(st);
        checkpoint.torn = std::move(verdict.torn);
        visit_(fd, name, checkpoint);
        continue;
      }
      if (!S_ISDIR(entries[i].st.st_mode)) continue;
      if (IsStepFolderName(name) && !judged[i]) continue;
      UniqueFd sub = OpenNoFollow(fd, name, true, &st);
      if (!sub.ok()) continue;
      if (IsStagingName(name) ||
          (ParseCheckpointName(name) >= 0 && HoldsRegularFile(sub.get(), "MANIFEST"))) {
        continue;  // Cohort's own: its MANIFEST check decides (common/checkpoint.h)
      }
      if (IsStepFolderName(name)) {
        checkpoint.folder = true;
        checkpoint.modified_ms = ModifiedMs(st);
        checkpoint.torn = WhyTornStepFolder(sub.get(), name, trainer_sibling, &checkpoint.bytes);
        visit_(fd, name, checkpoint);
      } else if (depth + 1 < kScriptCheckpointMaxDepth) {
        Walk(sub.get(), checkpoint.path, depth + 1);
      }
    }
  }

  std::string WhyTornStepFolder(int fd, const std::string& name, bool trainer_sibling,
                                uint64_t* bytes) {
    std::string why;
    if (IsTrainerCheckpointName(name)) {
      const TrainerState state = ReadTrainerState(fd);
      if (state.present && !state.parses) {
        why =
            "a Hugging Face Trainer checkpoint whose trainer_state.json, written last, does "
            "not parse";
      } else if (!state.present && (trainer_sibling || HoldsRegularFile(fd, "training_args.bin"))) {
        why = "a Hugging Face Trainer checkpoint without its trainer_state.json, written last";
      }
    }
    std::string inside;
    Inside(fd, "", 0, bytes, &inside);
    if (why.empty() && !inside.empty()) why = "holds " + inside;
    return why;
  }

  // Sums into `bytes` the regular files of the folder `fd` and below it, and sets `torn` (when
  // still "") to "<path>, <why>" of the first torn file or torch.distributed.checkpoint folder.
  void Inside(int fd, const std::string& rel, int depth, uint64_t* bytes, std::string* torn) {
    std::vector<std::string> names;
    if (!ListFolder(fd, &names)) return;
    if (std::string why = WhyTornDcpFolder(fd, names); !why.empty() && torn->empty()) {
      *torn = (rel.empty() ? "" : rel + "/, ") + why;
    }
    for (const std::string& name : names) {
      if (!Count()) return;
      const std::string path = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISREG(st.st_mode)) {
        *bytes += static_cast<uint64_t>(st.st_size);
        if (!torn->empty()) continue;
        UniqueFd file = OpenNoFollow(fd, name, false, &st);
        if (!file.ok()) continue;
        FileVerdict verdict = JudgeFile(name, file.get(), static_cast<uint64_t>(st.st_size));
        if (!verdict.torn.empty()) *torn = path + ", " + verdict.torn;
      } else if (S_ISDIR(st.st_mode) && depth + 1 < kScriptCheckpointMaxDepth) {
        UniqueFd sub = OpenNoFollow(fd, name, true, &st);
        if (sub.ok()) Inside(sub.get(), path, depth + 1, bytes, torn);
      }
    }
  }

  const WalkScope scope_;
  const ScriptCheckpointVisitor& visit_;
  int entries_ = 0;
  bool stopped_ = false;
};

}  // namespace

bool WalkScriptCheckpoints(int dir_fd, WalkScope scope, const ScriptCheckpointVisitor& visit) {
  return Walker(scope, visit).Run(dir_fd);
}

UniqueFd OpenCheckpointFolder(const std::string& dir) {
  // Without its trailing slash (AIP_CHECKPOINT_DIR has one), so that O_NOFOLLOW refuses a
  // checkpoint dir that is itself a symbolic link.
  std::string path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) return UniqueFd();
  struct stat st;
  return OpenNoFollow(AT_FDCWD, path, true, &st);
}

ScriptCheckpointInventory InspectScriptCheckpoints(const std::string& dir) {
  ScriptCheckpointInventory inventory;
  UniqueFd top = OpenCheckpointFolder(dir);
  if (!top.ok()) return inventory;
  auto collect = [](std::vector<ScriptCheckpoint>* into, const std::string& prefix) {
    return [into, prefix](int, const std::string&, const ScriptCheckpoint& checkpoint) {
      into->push_back(checkpoint);
      into->back().path = prefix + checkpoint.path;
    };
  };
  inventory.stopped =
      !WalkScriptCheckpoints(top.get(), WalkScope::kAll, collect(&inventory.checkpoints, ""));
  std::sort(inventory.checkpoints.begin(), inventory.checkpoints.end(),
            [](const ScriptCheckpoint& a, const ScriptCheckpoint& b) {
              return std::tie(a.modified_ms, a.path) < std::tie(b.modified_ms, b.path);
            });

  // Set aside: .cohort-torn/attempt-<K>/, by K.
  struct stat st;
  UniqueFd torn = OpenNoFollow(top.get(), std::string(kTornCheckpointsDir), true, &st);
  std::vector<std::string> names;
  if (!torn.ok() || !ListFolder(torn.get(), &names)) return inventory;
  std::vector<std::pair<int64_t, std::string>> attempts;
  for (const std::string& name : names) {
    constexpr std::string_view kPrefix = "attempt-";
    if (name.starts_with(kPrefix) && AllDigits(std::string_view(name).substr(kPrefix.size()))) {
      attempts.emplace_back(std::stoll(name.substr(kPrefix.size())), name);
    }
  }
  std::sort(attempts.begin(), attempts.end());
  for (const auto& [k, name] : attempts) {
    UniqueFd attempt = OpenNoFollow(torn.get(), name, true, &st);
    if (!attempt.ok()) continue;
    if (!WalkScriptCheckpoints(attempt.get(), WalkScope::kAll,
                               collect(&inventory.set_aside, name + "/"))) {
      inventory.stopped = true;
    }
  }
  return inventory;
}

}  // namespace cohort
