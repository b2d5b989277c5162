#include "agent/torn_checkpoints.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "common/checkpoint.h"
#include "common/file_util.h"
#include "common/logging.h"

namespace cohort::agent {
namespace {

constexpr std::string_view kTornDir = ".cohort-torn";
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

// Opens `name` in `dir_fd` without following a symbolic link and without blocking on a FIFO;
// only a regular file (st filled) or a folder (`folder`) is kept open.
UniqueFd OpenIn(int dir_fd, const std::string& name, bool folder, struct stat* st) {
  const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (folder ? O_DIRECTORY : 0);
  UniqueFd fd(::openat(dir_fd, name.c_str(), flags));
  if (!fd.ok() || ::fstat(fd.get(), st) != 0) return UniqueFd();
  if (folder ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode)) return UniqueFd();
  return fd;
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

// Whether `folder` holds a trainer_state.json, and whether it parses.
struct TrainerState {
  bool present = false;
  bool parses = false;
};

TrainerState ReadTrainerState(int folder_fd) {
  TrainerState state;
  struct stat st;
  UniqueFd fd = OpenIn(folder_fd, "trainer_state.json", false, &st);
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
// the pass looks at in all. False where it cannot be read.
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
    if (names->size() > static_cast<size_t>(kTornCheckMaxEntries)) break;
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

// One pass over a checkpoint directory.
class TornCheckpointPass {
 public:
  TornCheckpointPass(std::string dir, int attempt, const std::optional<RunAs>& run_as)
      : dir_(std::move(dir)), attempt_(attempt), run_as_(run_as) {}

  TornCheckpoints Run() {
    // Without its trailing slash (AIP_CHECKPOINT_DIR has one), so that O_NOFOLLOW refuses a
    // checkpoint dir that is itself a symbolic link.
    std::string top_path = dir_;
    while (top_path.size() > 1 && top_path.back() == '/') top_path.pop_back();
    struct stat st;
    UniqueFd top = OpenIn(AT_FDCWD, top_path, true, &st);
    if (!top.ok()) return {};  // no checkpoint dir yet (or not a folder): nothing to look at
    top_ = top.get();
    Walk(top_, "", 0);
    if (stopped_) {
      result_.notes.push_back("torn-checkpoint check of " + dir_ + " stopped after " +
                              std::to_string(kTornCheckMaxEntries) +
                              " entries; the rest was not looked at");
    }
    return std::move(result_);
  }

 private:
  bool Count() {
    if (++entries_ > kTornCheckMaxEntries) stopped_ = true;
    return !stopped_;
  }

  // An entry of a folder, as fstatat saw it (not through a link).
  struct Entry {
    std::string name;
    struct stat st;
  };

  // Marks `judged` the newest kTornCheckNewestPerFolder regular files and as many step folders
  // of `entries`, by modification time: the ones a pass reads.
  static std::vector<bool> NewestOf(const std::vector<Entry>& entries) {
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
      for (size_t k = 0; k < list->size() && k < kTornCheckNewestPerFolder; ++k) {
        judged[(*list)[k].second] = true;
      }
    }
    return judged;
  }

  // Sets aside the torn entries of the folder `fd` at `rel` ("" for the top) and below it.
  void Walk(int fd, const std::string& rel, int depth) {
    std::vector<std::string> names;
    if (!ListFolder(fd, &names)) return;
    std::vector<Entry> entries;
    for (std::string& name : names) {
      if (depth == 0 && (name == kTornDir || name == "LATEST" || name.starts_with("LATEST."))) {
        continue;  // ours, and Cohort's own LATEST (common/checkpoint.h)
      }
      Entry entry{std::move(name), {}};
      if (::fstatat(fd, entry.name.c_str(), &entry.st, AT_SYMLINK_NOFOLLOW) == 0) {
        entries.push_back(std::move(entry));
      }
    }
    const std::vector<bool> judged = NewestOf(entries);
    bool trainer_sibling = false;  // a checkpoint-<N> here with its trainer_state.json
    for (const Entry& e : entries) {
      if (!S_ISDIR(e.st.st_mode) || !IsTrainerCheckpointName(e.name)) continue;
      struct stat st;
      UniqueFd sub = OpenIn(fd, e.name, true, &st);
      if (sub.ok() && HoldsRegularFile(sub.get(), "trainer_state.json")) trainer_sibling = true;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!Count()) return;
      const std::string& name = entries[i].name;
      const std::string path = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (S_ISREG(entries[i].st.st_mode)) {
        if (!judged[i]) continue;
        UniqueFd file = OpenIn(fd, name, false, &st);
        if (!file.ok()) continue;
        std::string why = WhyTornFile(name, file.get());
        if (!why.empty()) SetAside(fd, rel, name, why);
        continue;
      }
      if (!S_ISDIR(entries[i].st.st_mode)) continue;
      if (IsStepFolderName(name) && !judged[i]) continue;
      UniqueFd sub = OpenIn(fd, name, true, &st);
      if (!sub.ok()) continue;
      if (IsStagingName(name) ||
          (ParseCheckpointName(name) >= 0 && HoldsRegularFile(sub.get(), "MANIFEST"))) {
        continue;  // Cohort's own: its MANIFEST check decides (common/checkpoint.h)
      }
      if (IsStepFolderName(name)) {
        std::string why = WhyTornStepFolder(sub.get(), name, trainer_sibling);
        if (!why.empty()) SetAside(fd, rel, name, why);
      } else if (depth + 1 < kTornCheckMaxDepth) {
        Walk(sub.get(), path, depth + 1);
      }
    }
  }

  std::string WhyTornStepFolder(int fd, const std::string& name, bool trainer_sibling) {
    if (IsTrainerCheckpointName(name)) {
      const TrainerState state = ReadTrainerState(fd);
      if (state.present && !state.parses) {
        return "a Hugging Face Trainer checkpoint whose trainer_state.json, written last, does not "
               "parse";
      }
      if (!state.present && (trainer_sibling || HoldsRegularFile(fd, "training_args.bin"))) {
        return "a Hugging Face Trainer checkpoint without its trainer_state.json, written last";
      }
    }
    std::string inside = FirstTornInside(fd, "", 0);
    if (inside.empty()) return "";
    return "holds " + inside;
  }

  // "<path>, <why>" of the first torn file or torch.distributed.checkpoint folder in the folder
  // `fd` and below, or "".
  std::string FirstTornInside(int fd, const std::string& rel, int depth) {
    std::vector<std::string> names;
    if (!ListFolder(fd, &names)) return "";
    if (std::string why = WhyTornDcpFolder(fd, names); !why.empty()) {
      return (rel.empty() ? "" : rel + "/, ") + why;
    }
    for (const std::string& name : names) {
      if (!Count()) return "";
      const std::string path = rel.empty() ? name : rel + "/" + name;
      struct stat st;
      if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (S_ISREG(st.st_mode)) {
        UniqueFd file = OpenIn(fd, name, false, &st);
        if (!file.ok()) continue;
        std::string why = WhyTornFile(name, file.get());
        if (!why.empty()) return path + ", " + why;
      } else if (S_ISDIR(st.st_mode) && depth + 1 < kTornCheckMaxDepth) {
        UniqueFd sub = OpenIn(fd, name, true, &st);
        if (!sub.ok()) continue;
        std::string why = FirstTornInside(sub.get(), path, depth + 1);
        if (!why.empty()) return why;
      }
    }
    return "";
  }

  // Opens (making what is missing) .cohort-torn/attempt-<K>/<rel> under the top folder.
  UniqueFd OpenDestination(const std::string& rel) {
    std::vector<std::string> parts = {std::string(kTornDir), "attempt-" + std::to_string(attempt_)};
    for (size_t start = 0; !rel.empty() && start <= rel.size();) {
      size_t slash = rel.find('/', start);
      if (slash == std::string::npos) slash = rel.size();
      parts.push_back(rel.substr(start, slash - start));
      start = slash + 1;
    }
    UniqueFd at(::dup(top_));
    for (const std::string& part : parts) {
      if (!at.ok()) return UniqueFd();
      const bool made = ::mkdirat(at.get(), part.c_str(), 0755) == 0;
      if (!made && errno != EEXIST) return UniqueFd();
      struct stat st;
      UniqueFd next = OpenIn(at.get(), part, true, &st);  // a link planted there is refused
      if (made && next.ok() && run_as_ && ::fchown(next.get(), run_as_->uid, run_as_->gid) != 0) {
        spdlog::warn("chown {} in {}: {}", part, dir_, std::strerror(errno));
      }
      at = std::move(next);
    }
    return at;
  }

  void SetAside(int parent_fd, const std::string& rel, const std::string& name,
                const std::string& why) {
    const std::string path = rel.empty() ? name : rel + "/" + name;
    UniqueFd dest = OpenDestination(rel);
    std::string note;
    if (!dest.ok()) {
      note = "could not set aside torn checkpoint " + path + " (" + why + "): cannot make " +
             std::string(kTornDir) + "/attempt-" + std::to_string(attempt_) + " in " + dir_;
    } else {
      std::string target = name;
      int rc = -1;
      int error = EEXIST;  // no free name
      for (int n = 2; n <= 100; ++n) {
        struct stat st;
        if (::fstatat(dest.get(), target.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 &&
            errno == ENOENT) {
          rc = ::renameat(parent_fd, name.c_str(), dest.get(), target.c_str());
          error = errno;
          break;
        }
        target = name + "-" + std::to_string(n);
      }
      if (rc == 0) {
        result_.set_aside.push_back(path);
        note = "set aside torn checkpoint " + path + " (" + why + ") as " + std::string(kTornDir) +
               "/attempt-" + std::to_string(attempt_) + "/" + (rel.empty() ? "" : rel + "/") +
               target;
      } else if (error == ENOENT) {
        return;  // another replica's agent moved it first
      } else {
        note = "could not set aside torn checkpoint " + path + " (" + why +
               "): " + std::strerror(error);
      }
    }
    spdlog::warn("{}: {}", dir_, note);
    result_.notes.push_back(std::move(note));
  }

  const std::string dir_;
  const int attempt_;
  const std::optional<RunAs>& run_as_;
  int top_ = -1;
  int entries_ = 0;
  bool stopped_ = false;
  TornCheckpoints result_;
};

}  // namespace

std::string WhyTornFile(const std::string& name, int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return "";
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return HasCheckpointExtension(name) ? "an empty file" : "";
  if (Lower(name).ends_with(".safetensors")) return SafetensorsWhyTorn(fd, size);
  std::string magic;
  if (!ReadAt(fd, 0, 4, &magic, "file head").ok()) return "";
  if (magic == "PK\x03\x04") return ZipWhyTorn(fd, size);
  return "";
}

TornCheckpoints SetAsideTornCheckpoints(const std::string& dir, int attempt,
                                        const std::optional<RunAs>& run_as) {
  if (dir.empty()) return {};
  return TornCheckpointPass(dir, attempt, run_as).Run();
}

std::string TornCheckpointsSummary(const TornCheckpoints& torn) {
  const size_t n = torn.set_aside.size();
  if (n == 0) return "";
  std::string out = n == 1 ? "set aside torn checkpoint " : "set aside torn checkpoints ";
  for (size_t i = 0; i < n && i < 3; ++i) out += (i == 0 ? "" : ", ") + torn.set_aside[i];
  if (n > 3) out += " and " + std::to_string(n - 3) + " more";
  return out + " (cohort logs says why)";
}

}  // namespace cohort::agent
