// SignalName(11) == "SIGSEGV": how the daemons and the CLI name the signal that ended a replica.
#pragma once

#include <signal.h>
#include <string.h>

#include <string>

namespace cohort {

// glibc's abbreviation with "SIG" before it; "" for a number that names no signal.
inline std::string SignalName(int sig) {
  const char* abbreviation = sig > 0 && sig < NSIG ? ::sigabbrev_np(sig) : nullptr;
  return abbreviation ? std::string("SIG") + abbreviation : std::string();
}

}  // namespace cohort
