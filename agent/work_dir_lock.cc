#include "agent/work_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>

#include "agent/replica_env.h"
#include "common/fnv.h"

namespace cohort::agent {

StatusOr<WorkDirLock> WorkDirLock::Take(const std::string& work_dir) {
  COHORT_RETURN_IF_ERROR(MakeDirs(work_dir).WithContext("--work-dir"));
  const std::string path = work_dir + "/.agent.lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.ok()) return ErrnoStatus("open the work dir's lock " + path, errno);
  int rc;
  do {
    rc = ::flock(fd.get(), LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) return ErrnoStatus("lock " + path, err);
    std::string holder;
    (void)ReadAt(fd.get(), 0, 32, &holder, "read " + path);  // a pid, or nothing to say
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == '\0')) holder.pop_back();
    const bool pid = !holder.empty() && holder.find_first_not_of("0123456789") == std::string::npos;
    return FailedPrecondition("work dir " + work_dir + " is in use by another cohort-agent (" +
                              (pid ? "pid " + holder : "its pid not yet written") +
                              "): each agent on a host needs a --work-dir of its own");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 ||
      ::pwrite(fd.get(), pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    return ErrnoStatus("write this agent's pid into " + path, errno);
  }
  return WorkDirLock(std::move(fd));
}

std::string AgentTag(const std::string& work_dir) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(work_dir, ec);
  if (ec) absolute = work_dir;
  std::string path = absolute.lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const uint64_t h = Fnv1a().Add(path).value();
  char tag[9];
  std::snprintf(tag, sizeof tag, "%08x", static_cast<unsigned>(h ^ (h >> 32)));
  return tag;
}

}  // namespace cohort::agent
