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
#include "common/text_join.h"

namespace cohort::agent {
namespace {

// Renames torn checkpoints into .cohort-torn/attempt-<K>/ under the checkpoint folder.
class TornCheckpointPass {
 public:
  TornCheckpointPass(std::string dir, int attempt, const std::optional<RunAs>& run_as)
      : dir_(std::move(dir)),
        attempt_folder_(std::string(kTornCheckpointsDir) + "/attempt-" + std::to_string(attempt)),
        run_as_(run_as) {}

  TornCheckpoints Run() {
    UniqueFd top = OpenCheckpointFolder(dir_);
    if (!top.ok()) return {};  // no checkpoint dir yet (or not a folder): nothing to look at
    top_ = top.get();
    const bool complete = WalkScriptCheckpoints(
        top_, WalkScope::kNewest,
        [this](int parent_fd, const std::string& name, const ScriptCheckpoint& checkpoint) {
          if (!checkpoint.torn.empty()) SetAside(parent_fd, name, checkpoint);
        });
    if (!complete) {
      result_.notes.push_back("torn-checkpoint check of " + dir_ + " stopped after " +
                              std::to_string(kScriptCheckpointMaxEntries) +
                              " entries; the rest was not looked at");
    }
    return std::move(result_);
  }

 private:
  // Opens (making what is missing) `folder`, a path under the top folder ("a/b/"), one
  // component at a time.
  UniqueFd OpenDestination(const std::string& folder) {
    std::vector<std::string> parts;
    for (size_t start = 0; start < folder.size();) {
      size_t slash = folder.find('/', start);
      if (slash == std::string::npos) slash = folder.size();
      if (slash > start) parts.push_back(folder.substr(start, slash - start));
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

  // Renames `checkpoint`, `name` in the folder open at `parent_fd`, to the same path under the
  // attempt's folder.
  void SetAside(int parent_fd, const std::string& name, const ScriptCheckpoint& checkpoint) {
    const std::string& path = checkpoint.path;
    const std::string& why = checkpoint.torn;
    // Where it goes: .cohort-torn/attempt-<K>/, then the folders of its path ("run1/").
    const std::string folder = attempt_folder_ + "/" + path.substr(0, path.size() - name.size());
    UniqueFd dest = OpenDestination(folder);
    std::string note;
    if (!dest.ok()) {
      note = "could not set aside torn checkpoint " + path + " (" + why + "): cannot make " +
             folder + " in " + dir_;
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
        note = "set aside torn checkpoint " + path + " (" + why + ") as " + folder + target;
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
  return (n == 1 ? "set aside torn checkpoint " : "set aside torn checkpoints ") +
         JoinFirst(torn.set_aside, 3) + " (cohort logs says why)";
}

}  // namespace cohort::agent
