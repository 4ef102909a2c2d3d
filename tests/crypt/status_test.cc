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

// A callee that named the path already: the context is not added a second time.
TEST(StatusTest, WithContextNamesAThingOnce) {
  const Status s = Status::FromErrno(ENOENT, "a/b").WithContext("a/b");
  EXPECT_EQ(s.message(), "a/b: No such file or directory");
  EXPECT_EQ(Status(Code::kCorrupt, "a/bc: torn").WithContext("a/b").message(), "a/b: a/bc: torn");
  EXPECT_EQ(Status(Code::kCorrupt, "a/b").WithContext("a/b").message(), "a/b: a/b");
}

// Each thing once: the code's name where the message does not say it already.
TEST(StatusTest, ToStringSaysEachThingOnce) {
  EXPECT_EQ(Status(Code::kWrongPassphrase, "wrong passphrase").ToString(), "wrong passphrase");
  EXPECT_EQ(Status(Code::kWrongPassphrase, "Wrong passphrase for v").ToString(),
            "Wrong passphrase for v");
  EXPECT_EQ(Status(Code::kNotFound, "").ToString(), "not found");
  EXPECT_EQ(Status(Code::kNotFound, "no key 3").ToString(), "not found: no key 3");
  EXPECT_EQ(Status::FromErrno(ENOENT, "open x").ToString(), "open x: No such file or directory");
  EXPECT_EQ(Status::FromErrno(ENOSPC, "write y").ToString(), "write y: No space left on device");
  // The same said in other words, or the system's words in a sentence.
  EXPECT_EQ(Status(Code::kNotFound, "d does not exist", ENOENT).ToString(), "d does not exist");
  EXPECT_EQ(Status(Code::kExists, "f exists and is a directory", EEXIST).ToString(),
            "f exists and is a directory");
  EXPECT_EQ(Status(Code::kInvalidArgument, "x is not a directory", ENOTDIR).ToString(),
            "x is not a directory");
  EXPECT_EQ(Status(Code::kInvalidArgument, "x is not a directory").ToString(),
            "invalid argument: x is not a directory");
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

// A program that skips the check learns why it failed, never reads garbage: value(), `*` and
// `->` of an error end it with the status's words.
TEST(ResultDeathTest, TheValueOfAnErrorEndsTheProgramWithItsWords) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Result<std::string> r = Status(Code::kWrongPassphrase, "wrong passphrase");
  EXPECT_DEATH((void)r.value(), "value of a failed Result was used: wrong passphrase");
  EXPECT_DEATH((void)r->size(), "wrong passphrase");
  EXPECT_DEATH((void)*Result<std::unique_ptr<int>>(Status(Code::kNotFound, "no vault in d")),
               "not found: no vault in d");
}

// An OK status given where a value was due is a caller's bug: an error, not an empty value.
TEST(ResultTest, AnOkStatusInsteadOfAValueIsAnInternalError) {
  const Result<int> r = Status::Ok();
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace sigilfs
