// Tests of the single Status -> errno mapping used by every FUSE reply.
#include "sigilfs/fuse/errno_map.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace sigilfs::fuse {
namespace {

TEST(ErrnoMapTest, EveryCodeHasAnErrno) {
  EXPECT_EQ(ErrnoFor(Status::Ok()), 0);
  EXPECT_EQ(ErrnoFor(Status(Code::kNotFound, "")), ENOENT);
  EXPECT_EQ(ErrnoFor(Status(Code::kExists, "")), EEXIST);
  EXPECT_EQ(ErrnoFor(Status(Code::kNotEmpty, "")), ENOTEMPTY);
  EXPECT_EQ(ErrnoFor(Status(Code::kNameTooLong, "")), ENAMETOOLONG);
  EXPECT_EQ(ErrnoFor(Status(Code::kInvalidArgument, "")), EINVAL);
  EXPECT_EQ(ErrnoFor(Status(Code::kNotSupported, "")), EOPNOTSUPP);
  EXPECT_EQ(ErrnoFor(Status(Code::kNoSpace, "")), ENOSPC);
  EXPECT_EQ(ErrnoFor(Status(Code::kPermissionDenied, "sealed")), EPERM);
}

TEST(ErrnoMapTest, TamperingIsAlwaysEio) {
  EXPECT_EQ(ErrnoFor(Status(Code::kAuthFailed, "page 3")), EIO);
  EXPECT_EQ(ErrnoFor(Status(Code::kCorrupt, "header")), EIO);
  EXPECT_EQ(ErrnoFor(Status(Code::kInternal, "")), EIO);
}

TEST(ErrnoMapTest, SystemErrnoIsKept) {
  EXPECT_EQ(ErrnoFor(Status::FromErrno(EBADF, "x")), EBADF);
  EXPECT_EQ(ErrnoFor(Status::FromErrno(EDQUOT, "x")), EDQUOT);
  EXPECT_EQ(ErrnoFor(Status::FromErrno(EACCES, "x")), EACCES);
  EXPECT_EQ(ErrnoFor(Status::FromErrno(EROFS, "x")), EROFS);
}

// A code says what kind of error it is; the errno kept with it, where there is one, is the
// precise one the caller must see (every code but damage, which is always EIO).
TEST(ErrnoMapTest, AKeptErrnoWinsOverTheCodesUsualOne) {
  EXPECT_EQ(ErrnoFor(Status(Code::kNotFound, "not a verity file", ENODATA)), ENODATA);
  EXPECT_EQ(ErrnoFor(Status(Code::kInvalidArgument, "x", ENOTDIR)), ENOTDIR);
  EXPECT_EQ(ErrnoFor(Status(Code::kExists, "x", ENOTEMPTY)), ENOTEMPTY);
  EXPECT_EQ(ErrnoFor(Status(Code::kNotSupported, "x", ENOTTY)), ENOTTY);
  EXPECT_EQ(ErrnoFor(Status(Code::kNameTooLong, "x", ENAMETOOLONG)), ENAMETOOLONG);
  EXPECT_EQ(ErrnoFor(Status(Code::kAuthFailed, "x", ENODATA)), EIO);
  EXPECT_EQ(ErrnoFor(Status(Code::kCorrupt, "x", ENOENT)), EIO);
  EXPECT_EQ(ErrnoFor(Status(Code::kWrongPassphrase, "x", ENOENT)), EACCES);
  EXPECT_EQ(ErrnoFor(Status(Code::kPermissionDenied, "x", ENOENT)), EPERM);
}

}  // namespace
}  // namespace sigilfs::fuse
