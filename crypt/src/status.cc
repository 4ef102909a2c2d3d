// Status helpers: code names, errno mapping and context.
#include "sigilfs/status.h"

#include <cerrno>
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

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string s(CodeName(code_));
  if (!message_.empty()) {
    s += ": ";
    s += message_;
  }
  return s;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string m(context);
  m += ": ";
  m += message_;
  return Status(code_, std::move(m), sys_errno_);
}

}  // namespace sigilfs
