// When this process started, as the kernel keeps it (/proc/self/stat's starttime): unchanged by an
// execve, so a daemon that re-executes itself in place (the agent's live restart) keeps it, while
// a forked child has its own.
//
// Thread safety: plain functions; each call reads /proc anew.
#pragma once

#include <cstdint>
#include <string>

namespace cohort {

// This process's start, in clock ticks since boot (field 22 of /proc/self/stat); 0 where it
// cannot be read.
uint64_t ProcessStartTicks();

// How long ago this process started, in milliseconds of CLOCK_BOOTTIME (time asleep included);
// 0 where it cannot be told.
int64_t ProcessUptimeMs();

// This process among all that ran on this host: "<boot id>/<pid>/<start ticks>" (the boot id from
// /proc/sys/kernel/random/boot_id, so a reboot that reuses a pid and start is another). The same
// for the whole life of the process, execve included; "" where /proc cannot tell.
std::string ProcessInstance();

}  // namespace cohort
