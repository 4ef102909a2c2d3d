// Tests of the Status/Result error model.
#include "sigilfs/status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <memory>

namespace sigilfs {
namespace {

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, FromErrnoMapsCodesAndKeepsErrno) {
  struct Case {
    int err;
    Code code;
  } cases[] = {{ENOENT, Code::kNotFound},    {EEXIST, Code::kExists},
               {ENOTEMPTY, Code::kNotEmpty}, {EACCES, Code::kPermissionDenied},
               {ENOSPC, Code::kNoSpace},     {ENAMETOOLONG, Code::kNameTooLong},
               {EIO, Code::kIoError},        {EBADF, Code::kIoError}};
  for (const Case& c : cases) {
    Status s = Status::FromErrno(c.err, "open x");
    EXPECT_EQ(s.code(), c.code) << c.err;
    EXPECT_EQ(s.sys_errno(), c.err);
    EXPECT_NE(s.message().find("open x: "), std::string::npos);
  }
}

TEST(StatusTest, WithContextPrefixesAndKeepsCode) {
  Status s = Status(Code::kCorrupt, "bad magic").WithContext("file a");
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_EQ(s.message(), "file a: bad magic");
  EXPECT_EQ(s.ToString(), "corrupt: file a: bad magic");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

Result<int> Half(int x) {
  if (x % 2 != 0) return Status(Code::kInvalidArgument, "odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  SIGILFS_ASSIGN_OR_RETURN(int h, Half(x));
  SIGILFS_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  SIGILFS_RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(ResultTest, ValueAndErrorPropagate) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), Code::kInvalidArgument);
  EXPECT_TRUE(Result<int>(3).status().ok());
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(7));
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace sigilfs
