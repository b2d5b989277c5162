#include "agent/torn_checkpoints.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/logging.h"
#include "common/script_checkpoints.h"

namespace cohort::agent {
namespace {

// Renames torn checkpoints into .cohort-torn/attempt-<K>/ under the checkpoint folder.
class TornCheckpointPass {
 public:
  TornCheckpointPass(std::string dir, int attempt, const std::optional<RunAs>& run_as)
      : dir_(std::move(dir)),
        attempt_(attempt),
        attempt_folder_(std::string(kTornCheckpointsDir) + "/attempt-" + std::to_string(attempt)),
        run_as_(run_as) {}

  TornCheckpoints Run() {
    UniqueFd top = OpenCheckpointFolder(dir_);
    if (!top.ok()) return {};  // no checkpoint dir yet (or not a folder): nothing to look at
    top_ = top.get();
    const bool complete = WalkScriptCheckpoints(
        top_, WalkScope::kNewest,
        [this](int parent_fd, const std::string& name, const ScriptCheckpoint& checkpoint) {
          if (checkpoint.torn.empty()) return;
          const std::string& path = checkpoint.path;
          const std::string rel =
              path.size() > name.size() ? path.substr(0, path.size() - name.size() - 1) : "";
          SetAside(parent_fd, rel, name, checkpoint.torn);
        });
    if (!complete) {
      result_.notes.push_back("torn-checkpoint check of " + dir_ + " stopped after " +
                              std::to_string(kScriptCheckpointMaxEntries) +
                              " entries; the rest was not looked at");
    }
    return std::move(result_);
  }

 private:
  // Opens (making what is missing) .cohort-torn/attempt-<K>/<rel> under the top folder.
  UniqueFd OpenDestination(const std::string& rel) {
    std::vector<std::string> parts = {std::string(kTornCheckpointsDir),
                                      "attempt-" + std::to_string(attempt_)};
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
      UniqueFd next = OpenNoFollow(at.get(), part, true, &st);  // a link planted there is refused
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
             attempt_folder_ + " in " + dir_;
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
        note = "set aside torn checkpoint " + path + " (" + why + ") as " + attempt_folder_ + "/" +
               (rel.empty() ? "" : rel + "/") + target;
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
  const std::string attempt_folder_;  // .cohort-torn/attempt-<K>
  const std::optional<RunAs>& run_as_;
  int top_ = -1;
  TornCheckpoints result_;
};

}  // namespace

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
