// Status helpers: code names, errno mapping and context.
#include "sigilfs/status.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sigilfs {

std::string_view CodeName(Code code) {
  switch (code) {
    case Code::kOk:
      return "ok";
    case Code::kNotFound:
      return "not found";
    case Code::kIoError:
      return "I/O error";
    case Code::kCorrupt:
      return "corrupt";
    case Code::kAuthFailed:
      return "authentication failed";
    case Code::kInvalidArgument:
      return "invalid argument";
    case Code::kExists:
      return "already exists";
    case Code::kNotEmpty:
      return "not empty";
    case Code::kPermissionDenied:
      return "permission denied";
    case Code::kNoSpace:
      return "no space left";
    case Code::kNotSupported:
      return "not supported";
    case Code::kNameTooLong:
      return "name too long";
    case Code::kWrongPassphrase:
      return "wrong passphrase";
    case Code::kInternal:
      return "internal error";
  }
  return "unknown error";
}

Status Status::FromErrno(int err, std::string_view what) {
  Code code = Code::kIoError;
  switch (err) {
    case ENOENT:
      code = Code::kNotFound;
      break;
    case EEXIST:
      code = Code::kExists;
      break;
    case ENOTEMPTY:
      code = Code::kNotEmpty;
      break;
    case EACCES:
    case EPERM:
      code = Code::kPermissionDenied;
      break;
    case ENOSPC:
    case EDQUOT:
      code = Code::kNoSpace;
      break;
    case EINVAL:
      code = Code::kInvalidArgument;
      break;
    case ENAMETOOLONG:
      code = Code::kNameTooLong;
      break;
    case ENOTSUP:
      code = Code::kNotSupported;
      break;
    default:
      break;
  }
  std::string message(what);
  message += ": ";
  // strerrordesc_np, unlike strerror, never writes a shared buffer (glibc 2.32).
  const char* description = ::strerrordesc_np(err);
  message += description != nullptr ? std::string(description) : "error " + std::to_string(err);
  return Status(code, std::move(message), err);
}

namespace {

bool ContainsIgnoringCase(std::string_view text, std::string_view part) {
  return std::search(text.begin(), text.end(), part.begin(), part.end(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) ==
                  std::tolower(static_cast<unsigned char>(b));
         }) != text.end();
}

// Whether `message` already says what the code's name would: the name itself, other words for
// it ("X does not exist" is not found), or the system's words for its errno, which messages
// also give in a sentence of their own ("X is not a directory").
bool SaysTheCode(std::string_view message, Code code, int sys_errno) {
  if (ContainsIgnoringCase(message, CodeName(code))) return true;
  if (code == Code::kNotFound && message.find("does not exist") != std::string_view::npos)
    return true;
  if (code == Code::kExists && message.find(" exists") != std::string_view::npos) return true;
  const char* system_words = sys_errno != 0 ? ::strerrordesc_np(sys_errno) : nullptr;
  return system_words != nullptr && ContainsIgnoringCase(message, system_words);
}

}  // namespace

std::string Status::ToString() const {
  if (ok()) return "ok";
  const std::string_view name = CodeName(code_);
  if (message_.empty()) return std::string(name);
  if (SaysTheCode(message_, code_, sys_errno_)) return message_;
  std::string s(name);
  s += ": ";
  s += message_;
  return s;
}

namespace detail {

void DieForValueOf(const Status& status) {
  std::fprintf(stderr, "sigilfs: the value of a failed Result was used: %s\n",
               status.ToString().c_str());
  std::abort();
}

Status NoValueGiven() {
  return Status(Code::kInternal, "a Result was made from an OK status, without a value");
}

}  // namespace detail

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  // A message that starts with this context already (a callee named the same path) keeps it
  // once: "a: a: No such file or directory" says nothing more than "a: No such ...".
  if (message_.size() > context.size() + 1 && message_.starts_with(context) &&
      message_.compare(context.size(), 2, ": ") == 0)
    return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m), sys_errno_);
}

}  // namespace sigilfs
