#include "common/status.h"

#include <cerrno>
#include <cstring>

#include "common/enum_names.h"

namespace cohort {

namespace {

constexpr EnumName<StatusCode> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {StatusCode::kNotFound, "NOT_FOUND"},
    {StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
    {StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"},
    {StatusCode::kUnavailable, "UNAVAILABLE"},
    {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {StatusCode::kAborted, "ABORTED"},
    {StatusCode::kDataLoss, "DATA_LOSS"},
    {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {StatusCode::kCancelled, "CANCELLED"},
    {StatusCode::kInternal, "INTERNAL"},
    {StatusCode::kPermissionDenied, "PERMISSION_DENIED"},
    {StatusCode::kUnauthenticated, "UNAUTHENTICATED"}};

}  // namespace

std::string_view StatusCodeName(StatusCode code) {
  return NameIn(kStatusCodeNames, code, "UNKNOWN");
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(code_));
  s += ": ";
  s += message_;
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m));
}

Status ErrnoStatus(std::string_view what, int err) {
  std::string m(what);
  m += ": ";
  m += std::strerror(err);
  return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kInternal, std::move(m));
}

}  // namespace cohort
