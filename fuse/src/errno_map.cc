// Status -> errno, in one function, so every FUSE reply agrees on what an error means.
#include "sigilfs/fuse/errno_map.h"

#include <cerrno>

namespace sigilfs::fuse {

int ErrnoFor(const Status& status) {
  const int kept = status.sys_errno();
  switch (status.code()) {
    case Code::kOk:
      return 0;
    // Damaged data and failed tags are an error, never data, and never anything but EIO (the
    // errno kept with them is of a read that worked).
    case Code::kCorrupt:
    case Code::kAuthFailed:
    case Code::kInternal:
      return EIO;
    case Code::kWrongPassphrase:
      return EACCES;
    case Code::kPermissionDenied:
      return kept == EACCES ? EACCES : EPERM;
    case Code::kNoSpace:
      return kept == EDQUOT ? EDQUOT : ENOSPC;
    default:
      break;
  }
  // The errno an error came with is the precise one (ENODATA for the descriptor of a file that
  // is not sealed, ENOTDIR, ELOOP, EXDEV, ESTALE): it wins over the code's usual errno.
  if (kept != 0) return kept;
  switch (status.code()) {
    case Code::kNotFound:
      return ENOENT;
    case Code::kInvalidArgument:
      return EINVAL;
    case Code::kExists:
      return EEXIST;
    case Code::kNotEmpty:
      return ENOTEMPTY;
    case Code::kNotSupported:
      return EOPNOTSUPP;
    case Code::kNameTooLong:
      return ENAMETOOLONG;
    default:
      return EIO;
  }
}

}  // namespace sigilfs::fuse
