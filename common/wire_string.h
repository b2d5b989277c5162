// Str(field): the text of an optional FlatBuffers string field of a wire message, "" when the
// sender left it out (the daemons' handlers read every string field through it).
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <string>

namespace cohort {

inline std::string Str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

}  // namespace cohort
