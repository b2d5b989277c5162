// The row checksums of SqliteStateStore's tables, shared by its writing and reading sides: every
// row carries a CRC-32 (zlib) over its columns, each framed (integers as 8 bytes, text with its
// length) so that moving bytes between columns changes it; a row whose stored checksum differs is
// damaged. A column added by a later schema version (owner, cause_signal, fenced_until_ms, idle)
// counts only when not empty, so rows written before it keep their checksums. Also the text form of
// a replica's GPU list ("0,2,3") and the wall clock in milliseconds the store stamps rows with.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "coordinator/state.h"

namespace cohort::coordinator::rows {

// CRC-32 (zlib) over a row's columns, each framed (integers as 8 bytes, little-endian; text
// with its length as such an integer first) so that moving bytes between columns changes it.
class RowCrc {
 public:
  RowCrc& Add(int64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i)
      b[i] = static_cast<unsigned char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff);
    crc_ = crc32(crc_, b, 8);
    return *this;
  }
  RowCrc& Add(std::string_view s) {
    Add(static_cast<int64_t>(s.size()));
    crc_ = crc32_z(crc_, reinterpret_cast<const Bytef*>(s.data()), s.size());
    return *this;
  }
  // Columns added by a later schema version, empty in the rows written before it: an empty value
  // adds nothing, so those rows keep their checksums.
  RowCrc& AddIfNotEmpty(std::string_view s) { return s.empty() ? *this : Add(s); }
  RowCrc& AddIfNotZero(int64_t v) { return v == 0 ? *this : Add(v); }
  // A second optional column of a row: its name goes in first, so that a value cannot pass for
  // another optional column's.
  RowCrc& AddNamedIfNotZero(std::string_view name, int64_t v) {
    return v == 0 ? *this : Add(name).Add(v);
  }
  uint32_t value() const { return static_cast<uint32_t>(crc_); }

 private:
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

// CRC-32 of a text (a stored spec or study record).
uint32_t TextCrc(std::string_view s);

uint32_t JobRowCrc(const JobRecord& j, uint32_t spec_crc);
uint32_t ReplicaRowCrc(const std::string& job, const ReplicaRecord& r, int ord);
uint32_t EventRowCrc(const std::string& job, const JobEventRecord& e);
uint32_t StudyRowCrc(const std::string& name, uint32_t spec_crc, int64_t create_ms, int64_t end_ms,
                     const std::string& owner);
uint32_t StudyEventRowCrc(const std::string& study, int64_t pos, const std::string& body);
uint32_t TrialRowCrc(const std::string& study, const std::string& trial, const std::string& job,
                     const std::string& parameters, int64_t ended, int64_t succeeded,
                     const std::string& message);

// "0,2,3".
std::string GpuList(const std::vector<int>& gpus);

// Milliseconds since the Unix epoch, now.
int64_t NowMs();

}  // namespace cohort::coordinator::rows
