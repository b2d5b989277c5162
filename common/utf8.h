// Text from outside the daemons (a replica's log, an agent's report of it) made safe to store and
// show: JSON writers refuse ill-formed UTF-8, terminals act on control characters.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace cohort {

// `text` with each byte that is not part of a well-formed UTF-8 sequence (Unicode's table 3-7:
// no overlong forms, no surrogates, nothing past U+10FFFF) replaced by U+FFFD, and each control
// character (C0 but tab, and DEL) by a space when `printable` (tabs too). Well-formed printable
// text comes back unchanged.
std::string ValidUtf8(std::string_view text, bool printable = false);

// The longest prefix of the well-formed UTF-8 `text` of at most `max_bytes` bytes that ends on a
// character boundary, with "..." in place of what was cut (the result then has at most
// max_bytes bytes; max_bytes >= 3).
std::string TruncateUtf8(std::string_view text, size_t max_bytes);

// OK when `text` is printable UTF-8 (ValidUtf8's, tabs excluded) of at most `max_bytes`; else
// kInvalidArgument naming `what`: "<what>: 300 bytes; at most 255", "<what>: 'caf\uFFFD' is not
// printable UTF-8" (the text shown made printable).
Status CheckPrintableText(std::string_view text, size_t max_bytes, std::string_view what);

}  // namespace cohort
