// Status -> errno, in one function, so every FUSE reply agrees on what an error means.
#include "sigilfs/fuse/errno_map.h"

#include <cerrno>

namespace sigilfs::fuse {

int ErrnoFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk:
      return 0;
    case Code::kNotFound:
      return ENOENT;
    case Code::kIoError:
      return status.sys_errno() != 0 ? status.sys_errno() : EIO;
    case Code::kCorrupt:  // damaged data and failed tags: an error, never data
    case Code::kAuthFailed:
      return EIO;
    case Code::kInvalidArgument:
      return EINVAL;
    case Code::kExists:
      return EEXIST;
    case Code::kNotEmpty:
      return ENOTEMPTY;
    case Code::kPermissionDenied:
      return status.sys_errno() == EACCES ? EACCES : EPERM;
    case Code::kNoSpace:
      return status.sys_errno() == EDQUOT ? EDQUOT : ENOSPC;
    case Code::kNotSupported:
      return EOPNOTSUPP;
    case Code::kNameTooLong:
      return ENAMETOOLONG;
    case Code::kWrongPassphrase:
      return EACCES;
    case Code::kInternal:
      return EIO;
  }
  return EIO;
}

}  // namespace sigilfs::fuse
