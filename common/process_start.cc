#include "common/process_start.h"

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cohort {

uint64_t ProcessStartTicks() {
  char stat[1024] = {};
  FILE* f = std::fopen("/proc/self/stat", "re");
  if (f == nullptr) return 0;
  const size_t n = std::fread(stat, 1, sizeof(stat) - 1, f);
  std::fclose(f);
  // The command, in parentheses, may itself hold ')' or spaces: fields are counted after the last.
  const char* close = static_cast<const char*>(memrchr(stat, ')', n));
  if (close == nullptr) return 0;
  // Fields from the 3rd (state) on; starttime is the 22nd field, the 20th after the parenthesis.
  const char* p = close + 1;
  for (int field = 3; field < 22 && *p != '\0'; ++field) {
    while (*p == ' ') ++p;
    while (*p != ' ' && *p != '\0') ++p;
  }
  return static_cast<uint64_t>(std::strtoull(p, nullptr, 10));
}

int64_t ProcessUptimeMs() {
  const uint64_t start = ProcessStartTicks();
  const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
  timespec now{};
  if (start == 0 || ticks_per_second <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return 0;
  const int64_t now_ms = int64_t{now.tv_sec} * 1000 + now.tv_nsec / 1'000'000;
  const int64_t start_ms =
      static_cast<int64_t>(start * 1000 / static_cast<uint64_t>(ticks_per_second));
  return now_ms > start_ms ? now_ms - start_ms : 0;
}

std::string ProcessInstance() {
  const uint64_t start = ProcessStartTicks();
  char boot[64] = {};
  FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f == nullptr) return "";
  const size_t n = std::fread(boot, 1, sizeof(boot) - 1, f);
  std::fclose(f);
  std::string boot_id(boot, n);
  while (!boot_id.empty() && (boot_id.back() == '\n' || boot_id.back() == ' ')) boot_id.pop_back();
  if (start == 0 || boot_id.empty()) return "";
  return boot_id + "/" + std::to_string(::getpid()) + "/" + std::to_string(start);
}

}  // namespace cohort
