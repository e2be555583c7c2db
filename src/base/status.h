// Status and StatusOr<T>: how every layer reports an error caused by its input.
//
// Untrusted input (files, HTTP bodies, upstream replies, flags) never CHECK-fails;
// it returns a Status whose message says what is wrong and where, in words a user
// can act on. Broken internal invariants use CHECK (check.h) instead.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "base/check.h"

namespace tachyon {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,    // the caller's input is malformed (bad flag, bad JSON, bad file)
  kNotFound,           // a named thing (file, key, model) does not exist
  kOutOfRange,         // a value or offset lies outside what is allowed
  kDataLoss,           // a file is truncated or corrupt
  kUnimplemented,      // valid input that this build cannot handle yet
  kResourceExhausted,  // out of memory, blocks, queue slots
  kFailedPrecondition, // the system is not in a state to do this
  kUnavailable,        // an I/O or network resource failed
  kInternal,           // a bug; should never reach a user
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "DATA_LOSS: tensor blk.0.attn_q.weight: data ends past the end of the file".
  std::string ToString() const;

  // Returns a copy whose message is "context: message" (no-op on ok()).
  Status WithContext(const std::string& context) const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
inline Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status ResourceExhaustedError(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
inline Status FailedPreconditionError(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

// Either a T or a non-ok Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    CHECK(!status_.ok()) << "StatusOr built from an ok Status without a value";
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  T& value() & {
    CHECK(ok()) << "StatusOr::value() on error: " << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    CHECK(ok()) << "StatusOr::value() on error: " << status_.ToString();
    return *value_;
  }
  T&& value() && {
    CHECK(ok()) << "StatusOr::value() on error: " << status_.ToString();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace tachyon

#define TACHYON_CONCAT_INNER(a, b) a##b
#define TACHYON_CONCAT(a, b) TACHYON_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is not ok.
#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    ::tachyon::Status tachyon_status_ = (expr);        \
    if (!tachyon_status_.ok()) return tachyon_status_; \
  } while (0)

// ASSIGN_OR_RETURN(auto x, MakeX()); declares x from the value or returns the error.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(TACHYON_CONCAT(tachyon_statusor_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
