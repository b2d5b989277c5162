// Status and StatusOr<T>: how every Cohort function reports failure. No exception crosses a
// module boundary; wrappers around throwing libraries (cppzmq, yaml-cpp, nlohmann-json) catch and
// convert. A Status is cheap to copy when OK (no allocation).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace cohort {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (bad spec, bad flag, unknown key)
  kNotFound,            // no such job, node, key, checkpoint
  kAlreadyExists,       // a name that must be unique is taken
  kFailedPrecondition,  // the system is not in a state where the call can work
  kUnavailable,         // a peer is gone or unreachable
  kDeadlineExceeded,    // a deadline passed first
  kAborted,             // the communicator or channel is poisoned after an earlier error
  kDataLoss,            // a bad message or torn file: bytes that do not verify
  kResourceExhausted,   // a limit was hit (frame size, outstanding requests, capacity)
  kCancelled,
  kInternal,
  kPermissionDenied,  // the caller is known but may not do this (a node's key speaking for another)
  kUnauthenticated,   // the caller's key is not (or no longer) listed
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: worker_pools[1].replicas: must be at least 1"
  std::string ToString() const;
  // Prefixes the message with context: "loading job.yaml: <message>".
  Status WithContext(std::string_view context) const;

  bool operator==(const Status& other) const = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status Aborted(std::string m) { return {StatusCode::kAborted, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status ResourceExhausted(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status PermissionDenied(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}
inline Status Unauthenticated(std::string m) {
  return {StatusCode::kUnauthenticated, std::move(m)};
}
// An errno-carrying system call failure: "open /x: No such file or directory" as kInternal,
// or kNotFound for ENOENT.
Status ErrnoStatus(std::string_view what, int err);

// StatusOr<T> holds a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(const Status& status) : value_(status) {}        // NOLINT: implicit by design
  StatusOr(Status&& status) : value_(std::move(status)) {}  // NOLINT
  StatusOr(const T& value) : value_(value) {}               // NOLINT
  StatusOr(T&& value) : value_(std::move(value)) {}         // NOLINT

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status() : std::get<Status>(value_); }
  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace cohort

#define COHORT_STATUS_CONCAT_INNER(a, b) a##b
#define COHORT_STATUS_CONCAT(a, b) COHORT_STATUS_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function when `expr` is not OK.
#define COHORT_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::cohort::Status cohort_status_ = (expr);        \
    if (!cohort_status_.ok()) return cohort_status_; \
  } while (0)

// `COHORT_ASSIGN_OR_RETURN(auto x, Foo());` declares x from a StatusOr or returns its Status.
#define COHORT_ASSIGN_OR_RETURN(lhs, expr) \
  COHORT_ASSIGN_OR_RETURN_IMPL(COHORT_STATUS_CONCAT(cohort_statusor_, __LINE__), lhs, expr)
#define COHORT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
