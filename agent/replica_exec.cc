#include "agent/replica_exec.h"

#include <unistd.h>

#include <cerrno>

namespace cohort::agent {

void WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

std::vector<std::string> ExecCandidates(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return {name};
  std::vector<std::string> candidates;
  std::string::size_type start = 0;
  while (true) {
    auto end = path.find(':', start);
    std::string dir = path.substr(start, end == std::string::npos ? end : end - start);
    candidates.push_back((dir.empty() ? "." : dir) + "/" + name);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return candidates;
}

void ExecCommand(const std::vector<std::string>& candidates, char* const argv[], char* const envp[],
                 int report_fd) {
  bool saw_eacces = false;
  int last = ENOENT;
  for (const auto& candidate : candidates) {
    ::execve(candidate.c_str(), argv, envp);
    last = errno;
    if (last == EACCES) saw_eacces = true;
    if (last != ENOENT && last != ENOTDIR && last != EACCES) break;
  }
  if (saw_eacces && (last == ENOENT || last == ENOTDIR)) last = EACCES;
  ChildError error{ChildError::kExec, last};
  WriteAll(report_fd, &error, sizeof(error));
  ::_exit(last == EACCES || last == ENOEXEC ? 126 : 127);
}

}  // namespace cohort::agent
