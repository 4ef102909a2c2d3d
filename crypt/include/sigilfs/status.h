// The one error model of sigilfs: Status for fallible calls, Result<T> for fallible values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sigilfs {

// What went wrong, in terms a caller can act on. fuse/ maps each code to one errno.
enum class Code {
  kOk = 0,
  kNotFound,          // no such file, directory, name or key
  kIoError,           // the backing store failed (errno kept in Status::sys_errno())
  kCorrupt,           // stored data is malformed (bad header, truncated config, ...)
  kAuthFailed,        // an authentication tag did not verify: tampered or wrong key
  kInvalidArgument,   // the caller asked for something malformed
  kExists,            // the target already exists
  kNotEmpty,          // directory (or vault dir) not empty
  kPermissionDenied,  // not allowed (also: write to a sealed file)
  kNoSpace,           // the backing store is full
  kNotSupported,      // a feature, version or operation this build does not do
  kNameTooLong,       // a name exceeds what can be stored
  kWrongPassphrase,   // the passphrase does not unwrap the master key
  kInternal,          // a bug or a library failure that should not happen
};

// Human-readable name of a code ("not found", "authentication failed", ...).
std::string_view CodeName(Code code);

// Outcome of a fallible call. Cheap to move; the OK status carries no allocation.
// Thread-safety: a value type; distinct objects may be used concurrently.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message, int sys_errno = 0)
      : code_(code), sys_errno_(sys_errno), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  // Maps an errno from a system call to the matching code, keeping the errno itself.
  static Status FromErrno(int err, std::string_view what);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  // The errno that caused this status, or 0 if it did not come from a system call.
  int sys_errno() const { return sys_errno_; }
  const std::string& message() const { return message_; }
  // For logs and command-line errors, saying each thing once: "<code name>: <message>", or the
  // message alone where it says the code already: its name ("wrong passphrase"), other words for
  // it ("d does not exist", "f exists and is a directory") or the system's words for its errno
  // ("open x: No such file or directory", "x is not a directory").
  std::string ToString() const;

  // Prefixes the message with context ("config: " + message), keeping code and errno; a message
  // that starts with that context already is left as it is.
  Status WithContext(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  int sys_errno_ = 0;
  std::string message_;
};

namespace detail {
// Ends the program with `status` on stderr: the value of an error Result was asked for.
[[noreturn]] void DieForValueOf(const Status& status);
// The status a Result made from an OK status (a caller's bug) holds instead: kInternal.
Status NoValueGiven();
}  // namespace detail

// A value or the Status explaining why there is none. Asking an error for its value (value(),
// `*`, `->`) ends the program with the status's words, as std::expected's value() throws and
// absl::StatusOr's dies: a program that skipped the check learns why, never reads garbage.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status)                          // NOLINT(google-explicit-constructor)
      : status_(status.ok() ? detail::NoValueGiven() : std::move(status)) {}

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return Checked(); }
  const T& value() const& { return Checked(); }
  T&& value() && { return std::move(Checked()); }
  T* operator->() { return &Checked(); }
  const T* operator->() const { return &Checked(); }
  T& operator*() & { return Checked(); }
  const T& operator*() const& { return Checked(); }

 private:
  T& Checked() {
    if (!value_.has_value()) detail::DieForValueOf(status_);
    return *value_;
  }
  const T& Checked() const {
    if (!value_.has_value()) detail::DieForValueOf(status_);
    return *value_;
  }

  Status status_;  // OK exactly when value_ holds a value
  std::optional<T> value_;
};

}  // namespace sigilfs

// Returns early from the enclosing function if `expr` (a Status) is not OK.
#define SIGILFS_RETURN_IF_ERROR(expr)                  \
  do {                                                 \
    ::sigilfs::Status sigilfs_status_ = (expr);        \
    if (!sigilfs_status_.ok()) return sigilfs_status_; \
  } while (0)

#define SIGILFS_CONCAT_INNER_(a, b) a##b
#define SIGILFS_CONCAT_(a, b) SIGILFS_CONCAT_INNER_(a, b)
// Declares `lhs` from a Result<T> expression, or returns its Status from the enclosing function.
#define SIGILFS_ASSIGN_OR_RETURN(lhs, expr) \
  SIGILFS_ASSIGN_OR_RETURN_IMPL_(SIGILFS_CONCAT_(sigilfs_result_, __LINE__), lhs, expr)
// `lhs` is a declaration and `tmp` a generated name: neither can be parenthesized.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define SIGILFS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
