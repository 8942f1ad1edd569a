// Status and Result<T>: the error vocabulary of wal/, server/ and client/ (docs/conventions.md,
// "Errors"). Shaped like leveldb::Status: cheap when OK (no allocation), a code plus a message
// otherwise, and an optional identity (ErrorId, epoch/etcd_errors.h) for the errors callers must
// tell apart — compare identities, never messages. Both are [[nodiscard]] so an ignored error is a
// compiler warning.
//
// Thread-safety: values; safe to copy between threads.
#pragma once

#include <fmt/format.h>

#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace epoch {

enum class StatusCode {
  kOk = 0,
  kNotFound,
  kCorruption,
  kIOError,
  kInvalidArgument,
  kNotLeader,
  kUnavailable,
  kTimeout,
  kAborted,
  kFailedPrecondition,
};

std::string_view StatusCodeName(StatusCode code);

// An error's identity; the values and their table are in epoch/etcd_errors.h. 0: none.
enum class ErrorId : std::uint16_t;

class [[nodiscard]] Status {
 public:
  Status() = default;

  static Status Ok() { return Status(); }
  // A status whose code is chosen at run time (stored records, error tables); kOk gives Ok().
  static Status FromCode(StatusCode code, std::string msg, ErrorId id = ErrorId{}) {
    if (code == StatusCode::kOk) return Status();
    Status s(code, std::move(msg));
    s.id_ = id;
    return s;
  }
  static Status NotFound(std::string msg) { return Status(StatusCode::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) {
    return Status(StatusCode::kCorruption, std::move(msg));
  }
  static Status IOError(std::string msg) { return Status(StatusCode::kIOError, std::move(msg)); }
  static Status InvalidArgument(std::string msg) {
    return Status(StatusCode::kInvalidArgument, std::move(msg));
  }
  static Status NotLeader(std::string msg) {
    return Status(StatusCode::kNotLeader, std::move(msg));
  }
  static Status Unavailable(std::string msg) {
    return Status(StatusCode::kUnavailable, std::move(msg));
  }
  static Status Timeout(std::string msg) { return Status(StatusCode::kTimeout, std::move(msg)); }
  static Status Aborted(std::string msg) { return Status(StatusCode::kAborted, std::move(msg)); }
  static Status FailedPrecondition(std::string msg) {
    return Status(StatusCode::kFailedPrecondition, std::move(msg));
  }

  [[nodiscard]] bool ok() const { return code_ == StatusCode::kOk; }
  [[nodiscard]] StatusCode code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }
  [[nodiscard]] bool Is(StatusCode code) const { return code_ == code; }
  // The identity of an error that has one (etcd's errors and Epoch's own), else ErrorId{}.
  [[nodiscard]] ErrorId id() const { return id_; }
  [[nodiscard]] bool Is(ErrorId id) const { return id_ == id && id != ErrorId{}; }

  // "Corruption: bad crc in 00000001.wal at offset 4096"; "OK" when ok().
  [[nodiscard]] std::string ToString() const {
    if (ok()) return "OK";
    return fmt::format("{}: {}", StatusCodeName(code_), message_);
  }

  // Adds context in front of the message, keeping the code: "open wal: <original>".
  [[nodiscard]] Status Annotate(std::string_view context) const {
    if (ok()) return *this;
    Status s(code_, fmt::format("{}: {}", context, message_));
    s.id_ = id_;
    return s;
  }

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  Status(StatusCode code, std::string msg) : code_(code), message_(std::move(msg)) {}

  StatusCode code_ = StatusCode::kOk;
  ErrorId id_{};
  std::string message_;
};

inline std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kCorruption: return "Corruption";
    case StatusCode::kIOError: return "IOError";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotLeader: return "NotLeader";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kTimeout: return "Timeout";
    case StatusCode::kAborted: return "Aborted";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
  }
  return "Unknown";
}

// Result<T>: a T or a non-OK Status. Constructing one from an OK Status is a programming error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : storage_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : storage_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(storage_).ok()) std::abort();   // an OK status carries no value
  }

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(storage_); }
  explicit operator bool() const { return ok(); }

  [[nodiscard]] const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(storage_);
  }

  T& value() & { return Checked(); }
  const T& value() const& { return const_cast<Result*>(this)->Checked(); }
  T&& value() && { return std::move(Checked()); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return const_cast<Result*>(this)->Checked(); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &const_cast<Result*>(this)->Checked(); }

 private:
  T& Checked() {
    if (!ok()) {
      fmt::print(stderr, "Result::value() on error: {}\n", std::get<Status>(storage_).ToString());
      std::abort();
    }
    return std::get<T>(storage_);
  }

  std::variant<T, Status> storage_;
};

}  // namespace epoch

// EPOCH_RETURN_IF_ERROR(expr): propagate a non-OK Status.
#define EPOCH_RETURN_IF_ERROR(expr)                \
  do {                                             \
    ::epoch::Status epoch_status_ = (expr);        \
    if (!epoch_status_.ok()) return epoch_status_; \
  } while (0)
