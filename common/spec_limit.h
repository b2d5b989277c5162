// The size limit on job and study specs. A spec travels in one request and is stored whole with
// its job, so the coordinator refuses one over its --max-spec-size (default 1 MiB) at submit, and
// the CLI checks the same default (or COHORT_MAX_SPEC_SIZE) before sending.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cohort {

inline constexpr uint64_t kDefaultMaxSpecBytes = 1u << 20;

// "1048576", "64KiB", "1MiB", "2M" (K/M/G and KiB/MiB/GiB are powers of 1024) -> bytes; at
// least 1.
StatusOr<uint64_t> ParseByteSize(std::string_view text);
// "512 bytes", "64 KiB", "3.2 MiB".
std::string FormatBytes(uint64_t bytes);
// OK when `bytes` <= `limit`; else INVALID_ARGUMENT naming both, e.g. "job spec is 34 MiB
// (35651584 bytes), over the limit of 1 MiB (the coordinator's --max-spec-size)". `what`: "job
// spec", "study spec"; `limit_name`: where the limit is set, for the message.
Status CheckSpecSize(std::string_view what, uint64_t bytes, uint64_t limit,
                     std::string_view limit_name);

}  // namespace cohort
