#include "agent/working_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "agent/replica_env.h"
#include "common/text_join.h"

namespace cohort::agent {

namespace fs = std::filesystem;

CarriedFiles CarryWorkingFiles(const std::string& work_dir, const std::string& job,
                               const std::string& replica, int attempt) {
  CarriedFiles out;
  const fs::path to = AttemptWorkingDir(work_dir, job, replica, attempt);
  for (int earlier = attempt - 1; earlier >= 0; --earlier) {
    const fs::path from = AttemptWorkingDir(work_dir, job, replica, earlier);
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(from, ec))) continue;  // never ran here, or swept
    out.from_attempt = earlier;
    for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (IsAgentAttemptEntry(name)) continue;
      std::error_code taken;
      if (fs::exists(fs::symlink_status(to / name, taken))) continue;
      std::error_code moved;
      fs::rename(it->path(), to / name, moved);
      if (moved) {
        out.errors.push_back(name + ": " + moved.message());
      } else {
        out.moved.push_back(name);
      }
    }
    if (ec) out.errors.push_back(from.string() + ": " + ec.message());
    std::sort(out.moved.begin(), out.moved.end());
    return out;
  }
  return out;
}

std::string CarriedFilesNote(const CarriedFiles& carried) {
  std::string note;
  if (!carried.moved.empty()) {
    note = "carried attempt " + std::to_string(carried.from_attempt) +
           "'s working files into this attempt's (" + JoinFirst(carried.moved, 3) +
           "), as torchrun restarts a worker where it ran";
  }
  for (const std::string& error : carried.errors) {
    note += (note.empty() ? "" : "; ") + std::string("could not carry ") + error;
  }
  return note;
}

}  // namespace cohort::agent
