// POSIX behaviour of a mounted vault through real system calls: files, directories, names,
// rename, links, special files, open-but-unlinked files and statvfs.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "test_support/daemon_stats.h"
#include "test_support/kernel_caches.h"
#include "test_support/mount.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

using test::ErrnoName;
using test::FailsWith;
using test::ListDir;
using test::Ok;

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;
using ::testing::UnorderedElementsAreArray;

constexpr size_t kPage = 4096;

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }

  int get() const { return fd_; }
  bool ok() const { return fd_ >= 0; }
  // Closes now and returns close()'s result (errno kept on failure).
  int Close() { return ::close(std::exchange(fd_, -1)); }
  void Reset() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }

 private:
  int fd_;
};

// Deterministic pseudo-random bytes.
std::string Pattern(size_t size, uint32_t seed) {
  std::string s(size, '\0');
  uint32_t x = seed * 2654435761u + 12345u;
  for (char& c : s) {
    x = x * 1103515245u + 12345u;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

// Equal byte strings; otherwise says the sizes and where they first differ.
AssertionResult SameBytes(std::string_view actual, std::string_view expected) {
  if (actual == expected) return AssertionSuccess();
  size_t i = 0;
  while (i < actual.size() && i < expected.size() && actual[i] == expected[i]) ++i;
  AssertionResult r = AssertionFailure();
  r << "got " << actual.size() << " bytes, expected " << expected.size();
  if (i < actual.size() && i < expected.size()) {
    r << "; first difference at byte " << i << ": got 0x" << std::hex
      << (static_cast<unsigned>(actual[i]) & 0xff) << ", expected 0x"
      << (static_cast<unsigned>(expected[i]) & 0xff) << std::dec;
  } else {
    r << "; the shorter is a prefix of the longer";
  }
  if (actual.size() <= 64 && expected.size() <= 64) {
    r << "; got \"" << actual << "\", expected \"" << expected << "\"";
  }
  return r;
}

// Writes `data` to `path` with open/write/close.
AssertionResult WriteFile(const std::string& path, std::string_view data,
                          int flags = O_WRONLY | O_CREAT | O_TRUNC, mode_t mode = 0644) {
  Fd fd(::open(path.c_str(), flags | O_CLOEXEC, mode));
  if (!fd.ok()) return AssertionFailure() << "open(" << path << "): " << ErrnoName(errno);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return AssertionFailure() << "write(" << path << ") at " << done << ": " << ErrnoName(errno);
    }
    if (n == 0) return AssertionFailure() << "write(" << path << ") returned 0 at " << done;
    done += static_cast<size_t>(n);
  }
  if (fd.Close() != 0) return AssertionFailure() << "close(" << path << "): " << ErrnoName(errno);
  return AssertionSuccess();
}

// Reads all of `path` with open/read/close into `out`.
AssertionResult ReadFile(const std::string& path, std::string* out) {
  out->clear();
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.ok()) return AssertionFailure() << "open(" << path << "): " << ErrnoName(errno);
  std::vector<char> buf(256 * 1024);
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return AssertionFailure() << "read(" << path << ") at " << out->size() << ": "
                                << ErrnoName(errno);
    }
    if (n == 0) break;
    out->append(buf.data(), static_cast<size_t>(n));
  }
  if (fd.Close() != 0) return AssertionFailure() << "close(" << path << "): " << ErrnoName(errno);
  return AssertionSuccess();
}

// The file at `path` reads back as exactly `expected`.
AssertionResult HasContent(const std::string& path, std::string_view expected) {
  std::string actual;
  AssertionResult r = ReadFile(path, &actual);
  if (!r) return r;
  r = SameBytes(actual, expected);
  if (!r) r << " (reading " << path << ")";
  return r;
}

// pread of exactly `size` bytes at `offset` into `out` (a short read is a failure).
AssertionResult PreadExactly(int fd, size_t size, off_t offset, std::string* out) {
  out->assign(size, '\0');
  const ssize_t n = ::pread(fd, out->data(), size, offset);
  if (n < 0) return AssertionFailure() << "pread at " << offset << ": " << ErrnoName(errno);
  if (static_cast<size_t>(n) != size) {
    return AssertionFailure() << "pread at " << offset << " returned " << n << " of " << size;
  }
  return AssertionSuccess();
}

AssertionResult PwriteAll(int fd, std::string_view data, off_t offset) {
  const ssize_t n = ::pwrite(fd, data.data(), data.size(), offset);
  if (n < 0) return AssertionFailure() << "pwrite at " << offset << ": " << ErrnoName(errno);
  if (static_cast<size_t>(n) != data.size()) {
    return AssertionFailure() << "pwrite at " << offset << " wrote " << n << " of " << data.size();
  }
  return AssertionSuccess();
}

// stat(path) succeeds and shows `n` links.
AssertionResult HasLinkCount(const std::string& path, nlink_t n) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return AssertionFailure() << "stat(" << path << "): " << ErrnoName(errno);
  }
  if (st.st_nlink != n) return AssertionFailure() << "st_nlink " << st.st_nlink << ", not " << n;
  return AssertionSuccess();
}

// "." and ".." plus `names`.
std::vector<std::string> WithDots(std::vector<std::string> names) {
  names.push_back(".");
  names.push_back("..");
  return names;
}

class MountPosixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::umask(022);
    if (test::FuseAvailable()) vault_ = std::make_unique<test::MountedVault>();
  }

  // A path inside the mount.
  std::string P(const std::string& rel) const { return vault_->path(rel); }
  // The names readdir returns for a directory inside the mount ("" for the root).
  std::vector<std::string> List(const std::string& rel) {
    std::vector<std::string> names;
    EXPECT_TRUE(ListDir(rel.empty() ? vault_->plain() : P(rel), &names));
    return names;
  }

  std::unique_ptr<test::MountedVault> vault_;
};

// ---------------------------------------------------------------------------------------------
// Files

TEST_F(MountPosixTest, WriteAndReadBackVariousSizes) {
  SIGILFS_NEEDS_FUSE();
  const std::vector<size_t> sizes = {0, 1, 4095, 4096, 4097, (1 << 20) + 3};
  for (size_t size : sizes) {
    SCOPED_TRACE("size " + std::to_string(size));
    const std::string name = "f" + std::to_string(size);
    const std::string data = Pattern(size, static_cast<uint32_t>(size));
    ASSERT_TRUE(WriteFile(P(name), data));
    EXPECT_TRUE(HasContent(P(name), data));
    struct stat st;
    ASSERT_TRUE(Ok(::stat(P(name).c_str(), &st)));
    EXPECT_EQ(st.st_size, static_cast<off_t>(size)) << "st_size is the plaintext size";
    EXPECT_TRUE(S_ISREG(st.st_mode));
  }
  vault_->Remount();
  for (size_t size : sizes) {
    SCOPED_TRACE("after remount, size " + std::to_string(size));
    const std::string name = "f" + std::to_string(size);
    struct stat st;
    ASSERT_TRUE(Ok(::stat(P(name).c_str(), &st)));
    EXPECT_EQ(st.st_size, static_cast<off_t>(size)) << "st_size is the plaintext size";
    EXPECT_TRUE(HasContent(P(name), Pattern(size, static_cast<uint32_t>(size))));
  }
}

TEST_F(MountPosixTest, WritesAtOddOffsets) {
  SIGILFS_NEEDS_FUSE();
  std::string model = Pattern(3 * kPage + 100, 1);
  ASSERT_TRUE(WriteFile(P("odd"), model));
  Fd fd(::open(P("odd").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  const std::vector<std::pair<off_t, size_t>> writes = {
      {1, 3}, {4093, 10}, {8191, 4099}, {12345, 1}, {77, 5000}, {3 * kPage + 99, 1}};
  uint32_t seed = 100;
  for (const auto& [offset, size] : writes) {
    const std::string piece = Pattern(size, ++seed);
    ASSERT_TRUE(PwriteAll(fd.get(), piece, offset));
    model.replace(static_cast<size_t>(offset), size, piece);
  }
  // Also through the file offset: lseek + write.
  ASSERT_EQ(::lseek(fd.get(), 5555, SEEK_SET), 5555);
  ASSERT_EQ(::write(fd.get(), "xyz", 3), 3);
  model.replace(5555, 3, "xyz");
  ASSERT_TRUE(Ok(fd.Close()));
  EXPECT_TRUE(HasContent(P("odd"), model));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("odd"), model)) << "after remount";
}

TEST_F(MountPosixTest, WritesPastEndOfFileLeaveZeros) {
  SIGILFS_NEEDS_FUSE();
  Fd fd(::open(P("sparse").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_EQ(::write(fd.get(), "head", 4), 4);
  ASSERT_EQ(::lseek(fd.get(), 10000, SEEK_SET), 10000);
  ASSERT_EQ(::write(fd.get(), "mid", 3), 3);
  ASSERT_TRUE(PwriteAll(fd.get(), "tail", (1 << 20) + 5));
  std::string expected((1 << 20) + 9, '\0');
  expected.replace(0, 4, "head");
  expected.replace(10000, 3, "mid");
  expected.replace((1 << 20) + 5, 4, "tail");
  struct stat st;
  ASSERT_TRUE(Ok(::fstat(fd.get(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(expected.size()));
  std::string got;
  ASSERT_TRUE(PreadExactly(fd.get(), 20, 9995, &got));
  EXPECT_TRUE(SameBytes(got, expected.substr(9995, 20)));
  ASSERT_TRUE(Ok(fd.Close()));
  EXPECT_TRUE(HasContent(P("sparse"), expected));
  vault_->Remount();
  ASSERT_TRUE(Ok(::stat(P("sparse").c_str(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(expected.size())) << "after remount";
  EXPECT_TRUE(HasContent(P("sparse"), expected)) << "after remount";
}

TEST_F(MountPosixTest, ExclusiveCreateOfAnExistingFileFailsWithEexist) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(WriteFile(P("exists"), "keep me"));
  EXPECT_TRUE(FailsWith(::open(P("exists").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST));
  ASSERT_TRUE(Ok(::mkdir(P("dir").c_str(), 0755)));
  EXPECT_TRUE(FailsWith(::open(P("dir").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST));
  EXPECT_TRUE(HasContent(P("exists"), "keep me")) << "a refused O_EXCL must not touch the file";
}

TEST_F(MountPosixTest, TruncatingOpenEmptiesTheFile) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(WriteFile(P("t"), Pattern(3 * kPage + 7, 2)));
  Fd fd(::open(P("t").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  struct stat st;
  ASSERT_TRUE(Ok(::fstat(fd.get(), &st)));
  EXPECT_EQ(st.st_size, 0);
  ASSERT_TRUE(Ok(fd.Close()));
  EXPECT_TRUE(HasContent(P("t"), ""));
  ASSERT_TRUE(WriteFile(P("t"), "short"));  // O_TRUNC then a shorter write: no old tail
  EXPECT_TRUE(HasContent(P("t"), "short"));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("t"), "short")) << "after remount";
}

TEST_F(MountPosixTest, AppendWritesAtTheEndEvenAfterASeek) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(WriteFile(P("log"), "0123456789"));
  Fd fd(::open(P("log").c_str(), O_RDWR | O_APPEND | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_EQ(::lseek(fd.get(), 0, SEEK_SET), 0);
  ASSERT_EQ(::write(fd.get(), "abc", 3), 3);
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 13) << "the offset follows the appended data";
  ASSERT_EQ(::lseek(fd.get(), 2, SEEK_SET), 2);
  ASSERT_EQ(::write(fd.get(), "de", 2), 2);
  // Another descriptor grows the file; the next append still lands at the (new) end.
  ASSERT_TRUE(WriteFile(P("log"), "XY", O_WRONLY | O_APPEND));
  ASSERT_EQ(::write(fd.get(), "f", 1), 1);
  const std::string big = Pattern(2 * kPage + 1, 3);
  ASSERT_EQ(::write(fd.get(), big.data(), big.size()), static_cast<ssize_t>(big.size()));
  ASSERT_TRUE(Ok(fd.Close()));
  const std::string expected = "0123456789abcdeXYf" + big;
  EXPECT_TRUE(HasContent(P("log"), expected));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("log"), expected)) << "after remount";
}

TEST_F(MountPosixTest, PreadAndPwriteAtOffsets) {
  SIGILFS_NEEDS_FUSE();
  std::string model = Pattern(5 * kPage + 321, 4);
  ASSERT_TRUE(WriteFile(P("p"), model));
  Fd fd(::open(P("p").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  for (const auto& [offset, size] : std::vector<std::pair<off_t, size_t>>{
           {0, 1}, {4095, 2}, {4096, 4096}, {100, 3 * kPage}, {5 * kPage + 320, 1}}) {
    SCOPED_TRACE("pread at " + std::to_string(offset));
    std::string got;
    ASSERT_TRUE(PreadExactly(fd.get(), size, offset, &got));
    EXPECT_TRUE(SameBytes(got, model.substr(static_cast<size_t>(offset), size)));
  }
  // pread does not move the file offset; a read across EOF is short, at EOF it is 0.
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 0);
  std::string buf(1000, '\0');
  EXPECT_EQ(::pread(fd.get(), buf.data(), buf.size(), static_cast<off_t>(model.size()) - 10), 10);
  EXPECT_EQ(::pread(fd.get(), buf.data(), buf.size(), static_cast<off_t>(model.size())), 0);
  EXPECT_EQ(::pread(fd.get(), buf.data(), buf.size(), static_cast<off_t>(model.size()) + 5000), 0);
  // pwrite at offsets inside, across pages, and then reads of the same and other ranges.
  uint32_t seed = 40;
  for (const auto& [offset, size] : std::vector<std::pair<off_t, size_t>>{
           {3, 7}, {4090, 20}, {2 * kPage, kPage}, {5 * kPage + 300, 100}}) {
    const std::string piece = Pattern(size, ++seed);
    ASSERT_TRUE(PwriteAll(fd.get(), piece, offset));
    if (model.size() < offset + size) model.resize(offset + size, '\0');
    model.replace(static_cast<size_t>(offset), size, piece);
    std::string got;
    ASSERT_TRUE(PreadExactly(fd.get(), size, offset, &got));
    EXPECT_TRUE(SameBytes(got, piece)) << "pread right after pwrite at " << offset;
  }
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), 0) << "pwrite does not move the file offset";
  std::string all;
  ASSERT_TRUE(PreadExactly(fd.get(), model.size(), 0, &all));
  EXPECT_TRUE(SameBytes(all, model));
  ASSERT_TRUE(Ok(fd.Close()));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("p"), model)) << "after remount";
}

TEST_F(MountPosixTest, TruncateDownAndUp) {
  SIGILFS_NEEDS_FUSE();
  std::string model = Pattern(4 * kPage + 50, 5);
  ASSERT_TRUE(WriteFile(P("tr"), model));
  Fd fd(::open(P("tr").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  struct stat st;
  // ftruncate down into the middle of a page, then up past several pages: zeros appear.
  for (off_t size : {off_t{5000}, off_t{3 * kPage + 17}, off_t{kPage}, off_t{kPage + 1}}) {
    SCOPED_TRACE("ftruncate to " + std::to_string(size));
    ASSERT_TRUE(Ok(::ftruncate(fd.get(), size)));
    model.resize(static_cast<size_t>(size), '\0');
    ASSERT_TRUE(Ok(::fstat(fd.get(), &st)));
    EXPECT_EQ(st.st_size, size);
    std::string got;
    ASSERT_TRUE(PreadExactly(fd.get(), model.size(), 0, &got));
    EXPECT_TRUE(SameBytes(got, model));
  }
  ASSERT_TRUE(Ok(fd.Close()));
  // truncate by path, down and up, with no descriptor open.
  for (off_t size : {off_t{100}, off_t{9000}, off_t{0}, off_t{2 * kPage}}) {
    SCOPED_TRACE("truncate to " + std::to_string(size));
    ASSERT_TRUE(Ok(::truncate(P("tr").c_str(), size)));
    model.resize(static_cast<size_t>(size), '\0');
    ASSERT_TRUE(Ok(::stat(P("tr").c_str(), &st)));
    EXPECT_EQ(st.st_size, size);
    EXPECT_TRUE(HasContent(P("tr"), model));
  }
  ASSERT_TRUE(WriteFile(P("tr"), "data", O_WRONLY));
  model.replace(0, 4, "data");
  ASSERT_TRUE(Ok(::truncate(P("tr").c_str(), 3 * kPage + 9)));
  model.resize(3 * kPage + 9, '\0');
  vault_->Remount();
  ASSERT_TRUE(Ok(::stat(P("tr").c_str(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(model.size())) << "after remount";
  EXPECT_TRUE(HasContent(P("tr"), model)) << "after remount";
}

TEST_F(MountPosixTest, FsyncSucceeds) {
  SIGILFS_NEEDS_FUSE();
  Fd fd(::open(P("s").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(Ok(fd.get()));
  const std::string data = Pattern(3 * kPage + 5, 6);
  ASSERT_TRUE(PwriteAll(fd.get(), data, 0));
  EXPECT_TRUE(Ok(::fsync(fd.get())));
  EXPECT_TRUE(Ok(::fdatasync(fd.get())));
  EXPECT_TRUE(Ok(::fsync(fd.get()))) << "fsync with nothing dirty";
  ASSERT_TRUE(Ok(fd.Close()));
  EXPECT_TRUE(HasContent(P("s"), data));
}

TEST_F(MountPosixTest, ModeOwnerAndTimesAreAsSet) {
  SIGILFS_NEEDS_FUSE();
  Fd fd(::open(P("m").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_TRUE(Ok(fd.Close()));
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0750)));
  struct stat st;
  ASSERT_TRUE(Ok(::stat(P("m").c_str(), &st)));
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFREG | 0640)) << std::oct << st.st_mode;
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_gid, ::getegid());
  ASSERT_TRUE(Ok(::stat(P("d").c_str(), &st)));
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFDIR | 0750)) << std::oct << st.st_mode;

  ASSERT_TRUE(Ok(::chmod(P("m").c_str(), 0604)));
  ASSERT_TRUE(Ok(::chmod(P("d").c_str(), 0711)));
  ASSERT_TRUE(Ok(::chown(P("m").c_str(), 1234, 5678)));
  ASSERT_TRUE(Ok(::chown(P("d").c_str(), -1, 4321)));  // -1: keep the owner
  const timespec times[2] = {{1000000000, 123456789}, {1500000000, 987654321}};
  ASSERT_TRUE(Ok(::utimensat(AT_FDCWD, P("m").c_str(), times, 0)));
  ASSERT_TRUE(Ok(::stat(P("m").c_str(), &st)));
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFREG | 0604)) << std::oct << st.st_mode;
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  EXPECT_EQ(st.st_atim.tv_sec, times[0].tv_sec);
  EXPECT_EQ(st.st_atim.tv_nsec, times[0].tv_nsec);
  EXPECT_EQ(st.st_mtim.tv_sec, times[1].tv_sec);
  EXPECT_EQ(st.st_mtim.tv_nsec, times[1].tv_nsec);
  ASSERT_TRUE(Ok(::stat(P("d").c_str(), &st)));
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFDIR | 0711)) << std::oct << st.st_mode;
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_gid, 4321u);

  // fchmod/fstat through a descriptor, and mtime alone (UTIME_OMIT keeps atime).
  fd = Fd(::open(P("m").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_TRUE(Ok(::fchmod(fd.get(), 0600)));
  const timespec mtime_only[2] = {{0, UTIME_OMIT}, {1600000000, 5}};
  ASSERT_TRUE(Ok(::futimens(fd.get(), mtime_only)));
  ASSERT_TRUE(Ok(::fstat(fd.get(), &st)));
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFREG | 0600)) << std::oct << st.st_mode;
  EXPECT_EQ(st.st_mtim.tv_sec, 1600000000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 5);
  EXPECT_EQ(st.st_atim.tv_sec, times[0].tv_sec) << "UTIME_OMIT must keep atime";
  ASSERT_TRUE(Ok(fd.Close()));

  vault_->Remount();
  ASSERT_TRUE(Ok(::stat(P("m").c_str(), &st)));
  EXPECT_EQ(st.st_mode, static_cast<mode_t>(S_IFREG | 0600)) << "after remount";
  EXPECT_EQ(st.st_uid, 1234u) << "after remount";
  EXPECT_EQ(st.st_gid, 5678u) << "after remount";
  EXPECT_EQ(st.st_mtim.tv_sec, 1600000000) << "after remount";
  EXPECT_EQ(st.st_mtim.tv_nsec, 5) << "after remount";
}

// ---------------------------------------------------------------------------------------------
// Directories

TEST_F(MountPosixTest, MkdirAndNestedDirectories) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("a").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("a/b").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("a/b/c").c_str(), 0700)));
  ASSERT_TRUE(WriteFile(P("a/b/c/leaf"), "deep"));
  ASSERT_TRUE(WriteFile(P("a/top"), "shallow"));
  struct stat st;
  ASSERT_TRUE(Ok(::stat(P("a/b/c").c_str(), &st)));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_THAT(List("a"), UnorderedElementsAreArray(WithDots({"b", "top"})));
  EXPECT_THAT(List("a/b/c"), UnorderedElementsAreArray(WithDots({"leaf"})));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("a/b/c/leaf"), "deep")) << "after remount";
  EXPECT_TRUE(HasContent(P("a/top"), "shallow")) << "after remount";
  EXPECT_THAT(List("a/b"), UnorderedElementsAreArray(WithDots({"c"})));
  // Empty directories can be removed again, innermost first.
  ASSERT_TRUE(Ok(::unlink(P("a/b/c/leaf").c_str())));
  EXPECT_TRUE(Ok(::rmdir(P("a/b/c").c_str())));
  EXPECT_TRUE(Ok(::rmdir(P("a/b").c_str())));
  EXPECT_TRUE(FailsWith(::stat(P("a/b").c_str(), &st), ENOENT));
}

TEST_F(MountPosixTest, MkdirOnAnExistingNameFailsWithEexist) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("d/inner"), "x"));
  ASSERT_TRUE(WriteFile(P("f"), "y"));
  EXPECT_TRUE(FailsWith(::mkdir(P("d").c_str(), 0755), EEXIST));
  EXPECT_TRUE(FailsWith(::mkdir(P("f").c_str(), 0755), EEXIST));
  EXPECT_TRUE(HasContent(P("d/inner"), "x"));
  EXPECT_TRUE(HasContent(P("f"), "y"));
}

TEST_F(MountPosixTest, RmdirAndUnlinkRefuseTheWrongKindOfEntry) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("full").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("full/f"), "x"));
  ASSERT_TRUE(Ok(::mkdir(P("full/sub").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("empty").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("file"), "y"));
  EXPECT_TRUE(FailsWith(::rmdir(P("full").c_str()), ENOTEMPTY));
  EXPECT_TRUE(FailsWith(::rmdir(P("file").c_str()), ENOTDIR));
  EXPECT_TRUE(FailsWith(::unlink(P("empty").c_str()), EISDIR));
  EXPECT_TRUE(FailsWith(::unlink(P("full").c_str()), EISDIR));
  EXPECT_TRUE(FailsWith(::rmdir(P("missing").c_str()), ENOENT));
  EXPECT_TRUE(FailsWith(::unlink(P("missing").c_str()), ENOENT));
  EXPECT_THAT(List("full"), UnorderedElementsAreArray(WithDots({"f", "sub"})))
      << "refused calls must not remove anything";
  EXPECT_TRUE(HasContent(P("file"), "y"));
  EXPECT_TRUE(Ok(::rmdir(P("empty").c_str())));
}

TEST_F(MountPosixTest, MissingNamesAndPathsThroughFiles) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(WriteFile(P("file"), "x"));
  struct stat st;
  EXPECT_TRUE(FailsWith(::open(P("missing").c_str(), O_RDONLY), ENOENT));
  EXPECT_TRUE(FailsWith(::stat(P("missing").c_str(), &st), ENOENT));
  EXPECT_TRUE(FailsWith(::open(P("nodir/f").c_str(), O_WRONLY | O_CREAT, 0644), ENOENT));
  EXPECT_TRUE(FailsWith(::mkdir(P("nodir/d").c_str(), 0755), ENOENT));
  EXPECT_TRUE(FailsWith(::open(P("file/x").c_str(), O_RDONLY), ENOTDIR));
  EXPECT_TRUE(FailsWith(::open(P("file/x").c_str(), O_WRONLY | O_CREAT, 0644), ENOTDIR));
  EXPECT_TRUE(FailsWith(::stat(P("file/x").c_str(), &st), ENOTDIR));
  EXPECT_TRUE(FailsWith(::mkdir(P("file/x").c_str(), 0755), ENOTDIR));
  EXPECT_TRUE(FailsWith(::open(P("file").c_str(), O_RDONLY | O_DIRECTORY), ENOTDIR));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"file"})));
}

TEST_F(MountPosixTest, ReaddirListsExactlyTheCreatedNames) {
  SIGILFS_NEEDS_FUSE();
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({})))
      << "a new vault's root is empty: none of the vault's own files show";
  ASSERT_TRUE(WriteFile(P("one"), "1"));
  ASSERT_TRUE(WriteFile(P("two"), ""));
  ASSERT_TRUE(Ok(::mkdir(P("dir").c_str(), 0755)));
  ASSERT_TRUE(Ok(::symlink("one", P("link").c_str())));
  ASSERT_TRUE(WriteFile(P(std::string(255, 'L')), "long name"));
  ASSERT_TRUE(WriteFile(P("dir/inside"), "2"));
  ASSERT_TRUE(Ok(::mkdir(P("dir/" + std::string(250, 'D')).c_str(), 0755)));
  const std::vector<std::string> root = {"one", "two", "dir", "link", std::string(255, 'L')};
  const std::vector<std::string> dir = {"inside", std::string(250, 'D')};
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots(root)));
  EXPECT_THAT(List("dir"), UnorderedElementsAreArray(WithDots(dir)));
  EXPECT_THAT(List("dir/" + std::string(250, 'D')), UnorderedElementsAreArray(WithDots({})));
  ASSERT_TRUE(Ok(::unlink(P("two").c_str())));
  EXPECT_THAT(List(""),
              UnorderedElementsAreArray(WithDots({"one", "dir", "link", std::string(255, 'L')})));
  vault_->Remount();
  EXPECT_THAT(List(""),
              UnorderedElementsAreArray(WithDots({"one", "dir", "link", std::string(255, 'L')})))
      << "after remount";
  EXPECT_THAT(List("dir"), UnorderedElementsAreArray(WithDots(dir))) << "after remount";
}

TEST_F(MountPosixTest, DirectoryOfAThousandFiles) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("many").c_str(), 0755)));
  std::vector<std::string> names;
  for (int i = 0; i < 1000; ++i) {
    names.push_back("file-" + std::to_string(i));
    Fd fd(::open(P("many/" + names.back()).c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    ASSERT_TRUE(Ok(fd.get())) << names.back();
  }
  std::vector<std::string> listed = List("many");
  EXPECT_EQ(listed.size(), 1002u);
  EXPECT_THAT(listed, UnorderedElementsAreArray(WithDots(names)));
  vault_->Remount();
  listed = List("many");
  EXPECT_EQ(listed.size(), 1002u) << "after remount";
  EXPECT_THAT(listed, UnorderedElementsAreArray(WithDots(names))) << "after remount";
}

TEST_F(MountPosixTest, TelldirAndSeekdirResumeAtTheSavedPosition) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("big").c_str(), 0755)));
  std::vector<std::string> names;
  for (int i = 0; i < 600; ++i) {
    names.push_back("entry-with-a-longish-name-" + std::to_string(i));
    ASSERT_TRUE(WriteFile(P("big/" + names.back()), ""));
  }
  const size_t total = names.size() + 2;
  DIR* dir = ::opendir(P("big").c_str());
  ASSERT_NE(dir, nullptr) << ErrnoName(errno);
  std::unique_ptr<DIR, int (*)(DIR*)> closer(dir, ::closedir);
  auto read_rest = [dir](std::vector<std::string>* out) {
    for (;;) {
      errno = 0;
      const dirent* e = ::readdir(dir);
      if (e == nullptr) break;
      out->push_back(e->d_name);
    }
    return errno;
  };
  std::vector<std::string> first;
  while (first.size() < total / 2) {
    errno = 0;
    const dirent* e = ::readdir(dir);
    ASSERT_NE(e, nullptr) << "readdir ended after " << first.size()
                          << " entries: " << ErrnoName(errno);
    first.push_back(e->d_name);
  }
  const long pos = ::telldir(dir);
  ASSERT_NE(pos, -1) << ErrnoName(errno);
  std::vector<std::string> rest;
  ASSERT_EQ(read_rest(&rest), 0);
  ASSERT_EQ(first.size() + rest.size(), total);
  std::vector<std::string> all = first;
  all.insert(all.end(), rest.begin(), rest.end());
  EXPECT_THAT(all, UnorderedElementsAreArray(WithDots(names)));

  ::seekdir(dir, pos);
  std::vector<std::string> again;
  ASSERT_EQ(read_rest(&again), 0);
  EXPECT_EQ(again, rest) << "seekdir to the telldir position gives the same remaining entries";

  // rewinddir starts over and lists everything again, in the same order.
  ::rewinddir(dir);
  std::vector<std::string> from_start;
  ASSERT_EQ(read_rest(&from_start), 0);
  EXPECT_EQ(from_start, all) << "rewinddir gives the same listing in the same order";
}

// ---------------------------------------------------------------------------------------------
// Names

TEST_F(MountPosixTest, UnusualNamesWork) {
  SIGILFS_NEEDS_FUSE();
  std::string euros;
  for (int i = 0; i < 85; ++i) euros += "\u20ac";  // 3 bytes each: 255 bytes
  ASSERT_EQ(euros.size(), 255u);
  const std::vector<std::string> names = {"with space",
                                          " leading and trailing ",
                                          "\u00fcn\u00efc\u00f8d\u00e9 \u6587\u4ef6 \U0001F642",
                                          ".hidden",
                                          "..two-dots",
                                          "...",
                                          "new\nline",
                                          "back\\slash:colon*?",
                                          std::string(255, 'a'),
                                          euros};
  // A different name of the same length (at most 255 bytes) for the rename.
  auto renamed = [](const std::string& name) {
    if (name.size() + 2 <= 255) return name + "-2";
    std::string r = name;
    r.replace(0, 3, "abc");
    return r;
  };
  for (const std::string& name : names) {
    SCOPED_TRACE("name of " + std::to_string(name.size()) + " bytes: " + name.substr(0, 40));
    ASSERT_TRUE(WriteFile(P(name), "content of " + name));
    struct stat st;
    ASSERT_TRUE(Ok(::stat(P(name).c_str(), &st)));
    EXPECT_EQ(st.st_size, static_cast<off_t>(name.size() + 11));
    EXPECT_TRUE(HasContent(P(name), "content of " + name));
  }
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots(names)));

  // Directories with such names, holding files with such names.
  ASSERT_TRUE(Ok(::mkdir(P(std::string(255, 'd')).c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P(std::string(255, 'd') + "/" + euros), "nested"));
  ASSERT_TRUE(Ok(::mkdir(P("\u00fcmlaut dir").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("\u00fcmlaut dir/.x"), "dotfile"));

  vault_->Remount();
  std::vector<std::string> expected = names;
  expected.push_back(std::string(255, 'd'));
  expected.push_back("\u00fcmlaut dir");
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots(expected))) << "after remount";
  EXPECT_TRUE(HasContent(P(std::string(255, 'd') + "/" + euros), "nested"));
  EXPECT_TRUE(HasContent(P("\u00fcmlaut dir/.x"), "dotfile"));

  std::vector<std::string> after_rename;
  for (const std::string& name : names) {
    SCOPED_TRACE("renaming a name of " + std::to_string(name.size()) + " bytes");
    ASSERT_TRUE(Ok(::rename(P(name).c_str(), P(renamed(name)).c_str())));
    struct stat st;
    EXPECT_TRUE(FailsWith(::stat(P(name).c_str(), &st), ENOENT));
    EXPECT_TRUE(HasContent(P(renamed(name)), "content of " + name));
    after_rename.push_back(renamed(name));
  }
  ASSERT_TRUE(Ok(::rename(P(std::string(255, 'd')).c_str(), P(std::string(255, 'e')).c_str())));
  EXPECT_TRUE(HasContent(P(std::string(255, 'e') + "/" + euros), "nested"))
      << "a directory with a 255-byte name keeps its contents when renamed";
  after_rename.push_back(std::string(255, 'e'));
  after_rename.push_back("\u00fcmlaut dir");
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots(after_rename)));

  for (const std::string& name : names) {
    EXPECT_TRUE(Ok(::unlink(P(renamed(name)).c_str()))) << renamed(name).substr(0, 40);
  }
  EXPECT_TRUE(Ok(::unlink(P(std::string(255, 'e') + "/" + euros).c_str())));
  EXPECT_TRUE(Ok(::rmdir(P(std::string(255, 'e')).c_str())));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"\u00fcmlaut dir"})));
}

TEST_F(MountPosixTest, NamesOf256BytesFailWithEnametoolong) {
  SIGILFS_NEEDS_FUSE();
  const std::string too_long = P(std::string(256, 'n'));
  ASSERT_TRUE(WriteFile(P("src"), "x"));
  struct stat st;
  EXPECT_TRUE(FailsWith(::open(too_long.c_str(), O_WRONLY | O_CREAT, 0644), ENAMETOOLONG));
  EXPECT_TRUE(FailsWith(::mkdir(too_long.c_str(), 0755), ENAMETOOLONG));
  EXPECT_TRUE(FailsWith(::stat(too_long.c_str(), &st), ENAMETOOLONG));
  EXPECT_TRUE(FailsWith(::rename(P("src").c_str(), too_long.c_str()), ENAMETOOLONG));
  EXPECT_TRUE(FailsWith(::symlink("target", too_long.c_str()), ENAMETOOLONG));
  EXPECT_TRUE(FailsWith(::link(P("src").c_str(), too_long.c_str()), ENAMETOOLONG));
  EXPECT_TRUE(HasContent(P("src"), "x"));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"src"})));
}

// ---------------------------------------------------------------------------------------------
// rename

TEST_F(MountPosixTest, RenameFileToANewName) {
  SIGILFS_NEEDS_FUSE();
  const std::string data = Pattern(2 * kPage + 3, 7);
  ASSERT_TRUE(WriteFile(P("old"), data));
  ASSERT_TRUE(Ok(::rename(P("old").c_str(), P("new").c_str())));
  struct stat st;
  EXPECT_TRUE(FailsWith(::stat(P("old").c_str(), &st), ENOENT));
  EXPECT_TRUE(HasContent(P("new"), data));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"new"})));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("new"), data)) << "after remount";
}

TEST_F(MountPosixTest, RenameFileOverAnExistingFileReplacesIt) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(WriteFile(P("src"), "new content"));
  ASSERT_TRUE(WriteFile(P("dst"), Pattern(3 * kPage, 8)));
  ASSERT_TRUE(Ok(::rename(P("src").c_str(), P("dst").c_str())));
  struct stat st;
  ASSERT_TRUE(Ok(::stat(P("dst").c_str(), &st)));
  EXPECT_EQ(st.st_size, 11);
  EXPECT_TRUE(HasContent(P("dst"), "new content")) << "the target's old content is gone";
  EXPECT_TRUE(FailsWith(::stat(P("src").c_str(), &st), ENOENT));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"dst"})));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("dst"), "new content")) << "after remount";
}

TEST_F(MountPosixTest, RenameAcrossDirectories) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("a").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("b").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("b/c").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("a/f"), "moving"));
  ASSERT_TRUE(WriteFile(P("top"), "to a subdirectory"));
  ASSERT_TRUE(Ok(::rename(P("a/f").c_str(), P("b/c/g").c_str())))
      << "renames inside the mount never return EXDEV";
  ASSERT_TRUE(Ok(::rename(P("top").c_str(), P("a/top").c_str())));
  ASSERT_TRUE(Ok(::rename(P("b/c/g").c_str(), P("g").c_str())));
  EXPECT_TRUE(HasContent(P("g"), "moving"));
  EXPECT_TRUE(HasContent(P("a/top"), "to a subdirectory"));
  EXPECT_THAT(List("a"), UnorderedElementsAreArray(WithDots({"top"})));
  EXPECT_THAT(List("b/c"), UnorderedElementsAreArray(WithDots({})));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"a", "b", "g"})));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("g"), "moving")) << "after remount";
  EXPECT_TRUE(HasContent(P("a/top"), "to a subdirectory")) << "after remount";
}

TEST_F(MountPosixTest, RenameDirectoryKeepsItsContents) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("d/sub").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("d/f"), "file in d"));
  ASSERT_TRUE(WriteFile(P("d/sub/g"), "file in sub"));
  ASSERT_TRUE(Ok(::symlink("../f", P("d/sub/link").c_str())));
  ASSERT_TRUE(Ok(::rename(P("d").c_str(), P("e").c_str())));
  EXPECT_TRUE(HasContent(P("e/f"), "file in d"));
  EXPECT_TRUE(HasContent(P("e/sub/g"), "file in sub"));
  EXPECT_TRUE(HasContent(P("e/sub/link"), "file in d"));
  EXPECT_THAT(List("e"), UnorderedElementsAreArray(WithDots({"f", "sub"})));
  EXPECT_THAT(List("e/sub"), UnorderedElementsAreArray(WithDots({"g", "link"})));
  // Into another directory, several levels down.
  ASSERT_TRUE(Ok(::mkdir(P("x").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("x/y").c_str(), 0755)));
  ASSERT_TRUE(Ok(::rename(P("e").c_str(), P("x/y/moved").c_str())))
      << "renames inside the mount never return EXDEV";
  EXPECT_TRUE(HasContent(P("x/y/moved/sub/g"), "file in sub"));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"x"})));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("x/y/moved/f"), "file in d")) << "after remount";
  EXPECT_TRUE(HasContent(P("x/y/moved/sub/g"), "file in sub")) << "after remount";
  char buf[64];
  EXPECT_EQ(::readlink(P("x/y/moved/sub/link").c_str(), buf, sizeof buf), 4) << "after remount";
  EXPECT_THAT(List("x/y/moved/sub"), UnorderedElementsAreArray(WithDots({"g", "link"})));
}

TEST_F(MountPosixTest, RenameDirectoryOverAnEmptyDirectory) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("src").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("src/f"), "kept"));
  ASSERT_TRUE(Ok(::mkdir(P("empty").c_str(), 0755)));
  ASSERT_TRUE(Ok(::rename(P("src").c_str(), P("empty").c_str())));
  EXPECT_TRUE(HasContent(P("empty/f"), "kept"));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"empty"})));
  vault_->Remount();
  EXPECT_TRUE(HasContent(P("empty/f"), "kept")) << "after remount";
}

TEST_F(MountPosixTest, RenameDirectoryOverANonEmptyDirectoryFailsWithEnotempty) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("src").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("src/f"), "source"));
  ASSERT_TRUE(Ok(::mkdir(P("full").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("full/g"), "target"));
  EXPECT_TRUE(FailsWith(::rename(P("src").c_str(), P("full").c_str()), ENOTEMPTY));
  EXPECT_TRUE(HasContent(P("src/f"), "source"));
  EXPECT_TRUE(HasContent(P("full/g"), "target"));
  EXPECT_THAT(List("full"), UnorderedElementsAreArray(WithDots({"g"})));
}

TEST_F(MountPosixTest, RenameNoreplaceOntoAnExistingNameFailsWithEexist) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(WriteFile(P("a"), "aaa"));
  ASSERT_TRUE(WriteFile(P("b"), "bbbb"));
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  EXPECT_TRUE(FailsWith(
      ::renameat2(AT_FDCWD, P("a").c_str(), AT_FDCWD, P("b").c_str(), RENAME_NOREPLACE), EEXIST));
  EXPECT_TRUE(FailsWith(
      ::renameat2(AT_FDCWD, P("a").c_str(), AT_FDCWD, P("d").c_str(), RENAME_NOREPLACE), EEXIST));
  EXPECT_TRUE(HasContent(P("a"), "aaa")) << "nothing changed";
  EXPECT_TRUE(HasContent(P("b"), "bbbb")) << "nothing changed";
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"a", "b", "d"})));
  // Onto a free name it is an ordinary rename.
  EXPECT_TRUE(
      Ok(::renameat2(AT_FDCWD, P("a").c_str(), AT_FDCWD, P("d/c").c_str(), RENAME_NOREPLACE)));
  EXPECT_TRUE(HasContent(P("d/c"), "aaa"));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"b", "d"})));
}

TEST_F(MountPosixTest, RenameExchangeSwapsTwoEntries) {
  SIGILFS_NEEDS_FUSE();
  const std::string big = Pattern(2 * kPage + 11, 9);
  ASSERT_TRUE(WriteFile(P("x"), "small x"));
  ASSERT_TRUE(WriteFile(P("y"), big));
  ASSERT_TRUE(Ok(::renameat2(AT_FDCWD, P("x").c_str(), AT_FDCWD, P("y").c_str(), RENAME_EXCHANGE)));
  EXPECT_TRUE(HasContent(P("x"), big));
  EXPECT_TRUE(HasContent(P("y"), "small x"));
  struct stat st;
  ASSERT_TRUE(Ok(::stat(P("x").c_str(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(big.size()));

  // A file with a directory, across directories.
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("d/inner"), "inside d"));
  ASSERT_TRUE(Ok(::mkdir(P("other").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("other/f"), "a file"));
  ASSERT_TRUE(
      Ok(::renameat2(AT_FDCWD, P("other/f").c_str(), AT_FDCWD, P("d").c_str(), RENAME_EXCHANGE)));
  ASSERT_TRUE(Ok(::stat(P("d").c_str(), &st)));
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "d is now the file";
  EXPECT_TRUE(HasContent(P("d"), "a file"));
  ASSERT_TRUE(Ok(::stat(P("other/f").c_str(), &st)));
  EXPECT_TRUE(S_ISDIR(st.st_mode)) << "other/f is now the directory";
  EXPECT_TRUE(HasContent(P("other/f/inner"), "inside d"));
  EXPECT_THAT(List("other/f"), UnorderedElementsAreArray(WithDots({"inner"})));

  vault_->Remount();
  EXPECT_TRUE(HasContent(P("x"), big)) << "after remount";
  EXPECT_TRUE(HasContent(P("y"), "small x")) << "after remount";
  EXPECT_TRUE(HasContent(P("d"), "a file")) << "after remount";
  EXPECT_TRUE(HasContent(P("other/f/inner"), "inside d")) << "after remount";
  // Exchanging with a missing name fails and changes nothing.
  EXPECT_TRUE(FailsWith(
      ::renameat2(AT_FDCWD, P("x").c_str(), AT_FDCWD, P("nope").c_str(), RENAME_EXCHANGE), ENOENT));
  EXPECT_TRUE(HasContent(P("x"), big));
}

// ---------------------------------------------------------------------------------------------
// Links and special files

TEST_F(MountPosixTest, HardLinks) {
  SIGILFS_NEEDS_FUSE();
  const std::string data = Pattern(kPage + 10, 10);
  ASSERT_TRUE(WriteFile(P("a"), data));
  ASSERT_TRUE(Ok(::link(P("a").c_str(), P("b").c_str())));
  EXPECT_TRUE(HasContent(P("a"), data));
  EXPECT_TRUE(HasContent(P("b"), data));
  EXPECT_TRUE(HasLinkCount(P("a"), 2));
  EXPECT_TRUE(HasLinkCount(P("b"), 2));
  struct stat st;
  ASSERT_TRUE(Ok(::stat(P("b").c_str(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
  EXPECT_TRUE(FailsWith(::link(P("a").c_str(), P("b").c_str()), EEXIST));

  // A write through one name is seen through the other, both ways.
  std::string model = data;
  {
    Fd fd(::open(P("b").c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(Ok(fd.get()));
    ASSERT_TRUE(PwriteAll(fd.get(), "through b", 5));
    ASSERT_TRUE(PwriteAll(fd.get(), "grown", static_cast<off_t>(data.size())));
    ASSERT_TRUE(Ok(fd.Close()));
    model.replace(5, 9, "through b");
    model += "grown";
  }
  EXPECT_TRUE(HasContent(P("a"), model)) << "a write through b is seen through a";
  ASSERT_TRUE(WriteFile(P("a"), "rewritten through a"));
  EXPECT_TRUE(HasContent(P("b"), "rewritten through a")) << "a write through a is seen through b";

  // A link in another directory.
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(Ok(::link(P("a").c_str(), P("d/c").c_str())));
  EXPECT_TRUE(HasContent(P("d/c"), "rewritten through a"));
  EXPECT_TRUE(HasLinkCount(P("d/c"), 3));

  vault_->Remount();
  EXPECT_TRUE(HasContent(P("b"), "rewritten through a")) << "after remount";
  EXPECT_TRUE(HasContent(P("d/c"), "rewritten through a")) << "after remount";
  ASSERT_TRUE(Ok(::unlink(P("a").c_str())));
  ASSERT_TRUE(Ok(::unlink(P("d/c").c_str())));
  EXPECT_TRUE(HasContent(P("b"), "rewritten through a")) << "unlinking one name keeps the other";
  EXPECT_TRUE(HasLinkCount(P("b"), 1)) << "unlinking one name keeps the other";
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"b", "d"})));
}

TEST_F(MountPosixTest, HardLinkSurvivesTheUnlinkOfEitherName) {
  SIGILFS_NEEDS_FUSE();
  // The newer name goes; the older one, already looked up, stays usable.
  ASSERT_TRUE(WriteFile(P("first"), "first content"));
  ASSERT_TRUE(Ok(::link(P("first").c_str(), P("second").c_str())));
  EXPECT_TRUE(HasContent(P("first"), "first content"));
  ASSERT_TRUE(Ok(::unlink(P("second").c_str())));
  EXPECT_TRUE(HasContent(P("first"), "first content")) << "after unlinking the newer name";
  EXPECT_TRUE(HasLinkCount(P("first"), 1)) << "after unlinking the newer name";
  // The older name goes; the newer one stays usable.
  ASSERT_TRUE(WriteFile(P("old"), "old content"));
  ASSERT_TRUE(Ok(::link(P("old").c_str(), P("new").c_str())));
  EXPECT_TRUE(HasContent(P("new"), "old content"));
  EXPECT_TRUE(HasContent(P("old"), "old content"));
  ASSERT_TRUE(Ok(::unlink(P("old").c_str())));
  EXPECT_TRUE(HasContent(P("new"), "old content")) << "after unlinking the older name";
  EXPECT_TRUE(HasLinkCount(P("new"), 1)) << "after unlinking the older name";
  // A name renamed away from a linked file leaves the other name usable too.
  ASSERT_TRUE(Ok(::link(P("new").c_str(), P("third").c_str())));
  ASSERT_TRUE(Ok(::rename(P("third").c_str(), P("fourth").c_str())));
  ASSERT_TRUE(Ok(::unlink(P("fourth").c_str())));
  EXPECT_TRUE(HasContent(P("new"), "old content")) << "after renaming and unlinking a link";
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"first", "new"})));
}

TEST_F(MountPosixTest, SymlinksAndReadlink) {
  SIGILFS_NEEDS_FUSE();
  std::vector<std::string> targets = {"t",
                                      "relative/path/../to/file",
                                      "/absolute/path/elsewhere",
                                      "../../up/and/over",
                                      "spaces and \u00fcnicode \U0001F642",
                                      std::string(100, 'x'),
                                      std::string(255, 'y'),
                                      std::string(256, 'z')};
  std::string long_target;
  while (long_target.size() < 1000) long_target += "component/";
  long_target.resize(1000);
  targets.push_back(long_target);
  for (size_t i = 0; i < targets.size(); ++i) {
    const std::string name = "link" + std::to_string(i);
    SCOPED_TRACE(name + ": target of " + std::to_string(targets[i].size()) + " bytes");
    ASSERT_TRUE(Ok(::symlink(targets[i].c_str(), P(name).c_str())));
    std::string buf(4096, '\0');
    const ssize_t n = ::readlink(P(name).c_str(), buf.data(), buf.size());
    ASSERT_TRUE(Ok(n));
    EXPECT_TRUE(SameBytes(buf.substr(0, static_cast<size_t>(n)), targets[i]));
    struct stat st;
    ASSERT_TRUE(Ok(::lstat(P(name).c_str(), &st)));
    EXPECT_TRUE(S_ISLNK(st.st_mode)) << std::oct << st.st_mode;
    EXPECT_EQ(st.st_size, static_cast<off_t>(targets[i].size()))
        << "lstat st_size of a symlink is its target's length";
    if (targets[i].size() != 256) {  // (a 256-byte single component: ENAMETOOLONG)
      EXPECT_TRUE(FailsWith(::stat(P(name).c_str(), &st), ENOENT)) << "dangling";
    }
  }
  EXPECT_TRUE(FailsWith(::symlink("again", P("link0").c_str()), EEXIST));

  // stat follows a symlink, relative or absolute, to a file or directory in the mount.
  ASSERT_TRUE(WriteFile(P("target"), "pointed at"));
  ASSERT_TRUE(Ok(::mkdir(P("dir").c_str(), 0755)));
  ASSERT_TRUE(Ok(::symlink("target", P("rel").c_str())));
  ASSERT_TRUE(Ok(::symlink(P("target").c_str(), P("abs").c_str())));
  ASSERT_TRUE(Ok(::symlink("../target", P("dir/up").c_str())));
  ASSERT_TRUE(Ok(::symlink("dir", P("dirlink").c_str())));
  for (const char* link : {"rel", "abs", "dir/up"}) {
    SCOPED_TRACE(link);
    struct stat st;
    ASSERT_TRUE(Ok(::stat(P(link).c_str(), &st)));
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_size, 10);
    EXPECT_TRUE(HasContent(P(link), "pointed at"));
  }
  struct stat st;
  ASSERT_TRUE(Ok(::stat(P("dirlink").c_str(), &st)));
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_TRUE(HasContent(P("dirlink/up"), "pointed at"));

  vault_->Remount();
  for (size_t i = 0; i < targets.size(); ++i) {
    SCOPED_TRACE("after remount, link" + std::to_string(i));
    std::string buf(4096, '\0');
    const ssize_t n = ::readlink(P("link" + std::to_string(i)).c_str(), buf.data(), buf.size());
    ASSERT_TRUE(Ok(n));
    EXPECT_TRUE(SameBytes(buf.substr(0, static_cast<size_t>(n)), targets[i]));
    ASSERT_TRUE(Ok(::lstat(P("link" + std::to_string(i)).c_str(), &st)));
    EXPECT_EQ(st.st_size, static_cast<off_t>(targets[i].size()));
  }
  EXPECT_TRUE(HasContent(P("dir/up"), "pointed at")) << "after remount";
  EXPECT_TRUE(Ok(::unlink(P("rel").c_str())));
  EXPECT_TRUE(HasContent(P("target"), "pointed at")) << "unlinking a symlink keeps its target";
}

TEST_F(MountPosixTest, MknodFifoAndSocketHaveTheRightType) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mknod(P("fifo").c_str(), S_IFIFO | 0640, 0)));
  ASSERT_TRUE(Ok(::mknod(P("sock").c_str(), S_IFSOCK | 0600, 0)));
  ASSERT_TRUE(Ok(::mkfifo(P("fifo2").c_str(), 0644)));
  EXPECT_TRUE(FailsWith(::mknod(P("fifo").c_str(), S_IFIFO | 0640, 0), EEXIST));
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "mounted" : "after remount");
    struct stat st;
    ASSERT_TRUE(Ok(::lstat(P("fifo").c_str(), &st)));
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << std::oct << st.st_mode;
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    ASSERT_TRUE(Ok(::lstat(P("sock").c_str(), &st)));
    EXPECT_TRUE(S_ISSOCK(st.st_mode)) << std::oct << st.st_mode;
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    ASSERT_TRUE(Ok(::stat(P("fifo2").c_str(), &st)));
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << std::oct << st.st_mode;
    EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"fifo", "sock", "fifo2"})));
    if (pass == 0) vault_->Remount();
  }
  EXPECT_TRUE(Ok(::unlink(P("fifo").c_str())));
  EXPECT_TRUE(Ok(::unlink(P("sock").c_str())));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"fifo2"})));
}

// ---------------------------------------------------------------------------------------------
// Open files whose name goes away

TEST_F(MountPosixTest, OpenFileStaysUsableAfterUnlink) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  const std::string data = Pattern(2 * kPage + 77, 11);
  ASSERT_TRUE(WriteFile(P("d/gone"), data));
  Fd fd(::open(P("d/gone").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_TRUE(Ok(::unlink(P("d/gone").c_str())));
  struct stat st;
  EXPECT_TRUE(FailsWith(::stat(P("d/gone").c_str(), &st), ENOENT));
  EXPECT_THAT(List("d"), UnorderedElementsAreArray(WithDots({})))
      << "the unlinked name (or any stand-in for it) is not listed";

  std::string got;
  ASSERT_TRUE(PreadExactly(fd.get(), data.size(), 0, &got));
  EXPECT_TRUE(SameBytes(got, data)) << "reading through the descriptor after unlink";
  std::string model = data;
  const std::string more = Pattern(kPage + 1, 12);
  ASSERT_TRUE(PwriteAll(fd.get(), more, 100));
  ASSERT_TRUE(PwriteAll(fd.get(), "end", static_cast<off_t>(4 * kPage)));
  model.replace(100, more.size(), more);
  model.resize(4 * kPage, '\0');
  model += "end";
  ASSERT_TRUE(Ok(::fsync(fd.get())));
  ASSERT_TRUE(Ok(::fstat(fd.get(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(model.size()));
  EXPECT_EQ(st.st_nlink, 0u);
  ASSERT_TRUE(PreadExactly(fd.get(), model.size(), 0, &got));
  EXPECT_TRUE(SameBytes(got, model)) << "reading back writes made after unlink";
  ASSERT_TRUE(Ok(::ftruncate(fd.get(), 50)));
  ASSERT_TRUE(PreadExactly(fd.get(), 50, 0, &got));
  EXPECT_TRUE(SameBytes(got, model.substr(0, 50)));
  ASSERT_TRUE(Ok(fd.Close()));

  // A new file under the same name is a different file.
  ASSERT_TRUE(WriteFile(P("d/gone"), "new"));
  EXPECT_TRUE(HasContent(P("d/gone"), "new"));
  ASSERT_TRUE(Ok(::unlink(P("d/gone").c_str())));
  EXPECT_TRUE(Ok(::rmdir(P("d").c_str()))) << "nothing is left behind in the directory";
}

TEST_F(MountPosixTest, OpenFileStaysUsableAfterAnotherFileIsRenamedOverIt) {
  SIGILFS_NEEDS_FUSE();
  const std::string old_data = Pattern(3 * kPage + 1, 13);
  ASSERT_TRUE(WriteFile(P("victim"), old_data));
  ASSERT_TRUE(WriteFile(P("replacement"), "the replacement"));
  Fd fd(::open(P("victim").c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_TRUE(Ok(::rename(P("replacement").c_str(), P("victim").c_str())));
  EXPECT_TRUE(HasContent(P("victim"), "the replacement"));

  std::string got;
  ASSERT_TRUE(PreadExactly(fd.get(), old_data.size(), 0, &got));
  EXPECT_TRUE(SameBytes(got, old_data)) << "the old descriptor still reads the old file";
  std::string model = old_data;
  ASSERT_TRUE(PwriteAll(fd.get(), "written late", kPage - 3));
  model.replace(kPage - 3, 12, "written late");
  ASSERT_TRUE(PwriteAll(fd.get(), "!", static_cast<off_t>(old_data.size())));
  model += "!";
  ASSERT_TRUE(PreadExactly(fd.get(), model.size(), 0, &got));
  EXPECT_TRUE(SameBytes(got, model)) << "writes through the old descriptor read back";
  struct stat st;
  ASSERT_TRUE(Ok(::fstat(fd.get(), &st)));
  EXPECT_EQ(st.st_size, static_cast<off_t>(model.size()));
  ASSERT_TRUE(Ok(fd.Close()));
  EXPECT_TRUE(HasContent(P("victim"), "the replacement"))
      << "writes through the old descriptor do not reach the new file";
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"victim"})));
}

// What a descriptor still does once its object lost its name: a file opened for writing and one
// opened with O_PATH only, each replaced by a rename; a directory replaced by a rename and one
// removed, each open; a file unlinked while only an O_PATH descriptor holds it. fstat (after the
// kernel's attribute cache ran out, so the daemon is asked), fchmod, ftruncate, write, read,
// chmod and reopening through /proc/self/fd, and the attributes each shows: the same on the
// mount as on the kernel's own filesystem (ext4 here) for the same steps.
std::vector<std::string> UseRemovedObjects(const std::string& dir) {
  std::vector<std::string> log;
  auto note = [&log](const std::string& what, long rc) {
    log.push_back(what + ": " + (rc < 0 ? ErrnoName(errno) : std::to_string(rc)));
  };
  auto stat_of = [&log](const std::string& what, int fd) {
    struct stat st;
    if (::fstat(fd, &st) != 0) {
      log.push_back(what + " fstat: " + ErrnoName(errno));
      return;
    }
    char mode[16];
    std::snprintf(mode, sizeof mode, "%o", st.st_mode);
    log.push_back(what + " fstat: mode " + mode + " nlink " + std::to_string(st.st_nlink) +
                  (S_ISREG(st.st_mode) ? " size " + std::to_string(st.st_size) : ""));
  };
  auto contents = [&log](const std::string& what, int fd) {
    std::string buf(64, '\0');
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), 0);
    log.push_back(what + " read: " + (n < 0 ? ErrnoName(errno) : buf.substr(0, n)));
  };
  auto proc = [](int fd) { return "/proc/self/fd/" + std::to_string(fd); };
  const std::string p = dir + "/";
  if (!WriteFile(p + "victim", "old victim data") || !WriteFile(p + "new", "new") ||
      !WriteFile(p + "path-only", "old path-only data") || !WriteFile(p + "new2", "new2") ||
      !WriteFile(p + "unlinked", "unlinked data") ||
      !WriteFile(p + "unlinked-open", "unlinked open data") ||
      ::mkdir((p + "dir").c_str(), 0750) != 0 || ::mkdir((p + "empty").c_str(), 0700) != 0 ||
      ::mkdir((p + "gone").c_str(), 0705) != 0)
    return {"setup failed"};
  Fd rw(::open((p + "victim").c_str(), O_RDWR | O_CLOEXEC));
  Fd path_only(::open((p + "path-only").c_str(), O_PATH | O_CLOEXEC));
  Fd unlinked(::open((p + "unlinked").c_str(), O_PATH | O_CLOEXEC));
  Fd unlinked_rw(::open((p + "unlinked-open").c_str(), O_RDWR | O_CLOEXEC));
  Fd replaced_dir(::open((p + "dir").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  Fd removed_dir(::open((p + "gone").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!rw.ok() || !path_only.ok() || !unlinked.ok() || !unlinked_rw.ok() || !replaced_dir.ok() ||
      !removed_dir.ok())
    return {"open failed"};
  note("rename over the open file", ::rename((p + "new").c_str(), (p + "victim").c_str()));
  note("rename over the O_PATH file", ::rename((p + "new2").c_str(), (p + "path-only").c_str()));
  note("rename over the open directory", ::rename((p + "empty").c_str(), (p + "dir").c_str()));
  note("rmdir of the open directory", ::rmdir((p + "gone").c_str()));
  note("unlink of the O_PATH file", ::unlink((p + "unlinked").c_str()));
  note("unlink of the open file", ::unlink((p + "unlinked-open").c_str()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // past the attribute cache

  stat_of("open file", rw.get());
  stat_of("O_PATH file", path_only.get());
  stat_of("unlinked O_PATH file", unlinked.get());
  stat_of("unlinked open file", unlinked_rw.get());
  stat_of("replaced directory", replaced_dir.get());
  stat_of("removed directory", removed_dir.get());

  note("fchmod of the open file", ::fchmod(rw.get(), 0600));
  note("ftruncate of the open file", ::ftruncate(rw.get(), 9));
  note("write to the open file", ::pwrite(rw.get(), "NEW", 3, 4));
  contents("open file", rw.get());
  stat_of("open file", rw.get());
  note("fchmod of the unlinked open file", ::fchmod(unlinked_rw.get(), 0604));
  note("ftruncate of the unlinked open file", ::ftruncate(unlinked_rw.get(), 30));
  note("write to the unlinked open file", ::pwrite(unlinked_rw.get(), "late", 4, 26));
  contents("unlinked open file", unlinked_rw.get());
  stat_of("unlinked open file", unlinked_rw.get());
  note("chmod of the O_PATH file", ::chmod(proc(path_only.get()).c_str(), 0640));
  stat_of("O_PATH file", path_only.get());
  Fd reopened(::open(proc(path_only.get()).c_str(), O_RDWR | O_CLOEXEC));
  note("reopen of the O_PATH file", reopened.ok() ? 0 : -1);
  if (reopened.ok()) {
    contents("reopened O_PATH file", reopened.get());
    note("write to the reopened file", ::pwrite(reopened.get(), "xx", 2, 0));
    contents("reopened O_PATH file", reopened.get());
  }
  Fd reopened_unlinked(::open(proc(unlinked.get()).c_str(), O_RDONLY | O_CLOEXEC));
  note("reopen of the unlinked O_PATH file", reopened_unlinked.ok() ? 0 : -1);
  if (reopened_unlinked.ok()) contents("reopened unlinked file", reopened_unlinked.get());
  note("fchmod of the replaced directory", ::fchmod(replaced_dir.get(), 0700));
  note("fchmod of the removed directory", ::fchmod(removed_dir.get(), 0700));
  stat_of("replaced directory", replaced_dir.get());
  stat_of("removed directory", removed_dir.get());
  return log;
}

TEST_F(MountPosixTest, RemovedObjectsStayUsableThroughTheirDescriptors) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir reference;
  const std::vector<std::string> expected = UseRemovedObjects(reference.path().string());
  const std::vector<std::string> got = UseRemovedObjects(vault_->plain());
  EXPECT_EQ(got, expected);
  // Nothing is left behind, and the replacements are what the names show.
  EXPECT_TRUE(HasContent(P("victim"), "new"));
  EXPECT_TRUE(HasContent(P("path-only"), "new2"));
  EXPECT_THAT(List(""), UnorderedElementsAreArray(WithDots({"victim", "path-only", "dir"})));
  EXPECT_THAT(List("dir"), UnorderedElementsAreArray(WithDots({})));
}

// ---------------------------------------------------------------------------------------------
// statvfs

TEST_F(MountPosixTest, StatvfsReportsASize) {
  SIGILFS_NEEDS_FUSE();
  struct statvfs sv;
  ASSERT_TRUE(Ok(::statvfs(vault_->plain().c_str(), &sv)));
  EXPECT_GT(sv.f_bsize, 0u);
  EXPECT_GT(sv.f_blocks, 0u);
  ASSERT_TRUE(WriteFile(P("f"), "x"));
  Fd fd(::open(P("f").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(Ok(fd.get()));
  ASSERT_TRUE(Ok(::fstatvfs(fd.get(), &sv)));
  EXPECT_GT(sv.f_bsize, 0u);
  EXPECT_GT(sv.f_blocks, 0u);
}

// The kernel drops the inodes nobody uses (memory pressure; here drop_caches) while it keeps the
// mount's nodes held by descriptors. A store that numbers its inodes afresh when they come back
// (sshfs and other FUSE stores) must not make those nodes unreachable; on the others this holds
// anyway.
TEST_F(MountPosixTest, NodesStayUsableWhenTheKernelDropsItsCaches) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS(test::CanDropKernelCaches(), "dropping the kernel's caches needs root");
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("d/f"), "kept"));
  Fd dir(::open(P("d").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  Fd file(::open(P("d/f").c_str(), O_PATH | O_CLOEXEC));
  ASSERT_TRUE(Ok(dir.get()));
  ASSERT_TRUE(Ok(file.get()));
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    test::DropKernelCaches();
    struct stat st;
    ASSERT_TRUE(Ok(::fstat(file.get(), &st)));
    EXPECT_EQ(st.st_size, 4);
    ASSERT_TRUE(Ok(::fstat(dir.get(), &st)));
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    const char* from = round == 0 ? "f" : "g";
    const char* to = round == 0 ? "g" : "f";
    ASSERT_TRUE(Ok(::renameat(dir.get(), from, dir.get(), to)));
    EXPECT_TRUE(HasContent(P(std::string("d/") + to), "kept"));
    test::DropKernelCaches();
    Fd made(::openat(dir.get(), round == 0 ? "new0" : "new1", O_CREAT | O_EXCL | O_WRONLY, 0644));
    EXPECT_TRUE(Ok(made.get()));
  }
  test::DropKernelCaches();
  ASSERT_TRUE(Ok(::rename(P("d").c_str(), P("e").c_str())));
  EXPECT_TRUE(HasContent(P("e/f"), "kept"));
  EXPECT_THAT(List("e"), UnorderedElementsAreArray({".", "..", "f", "new0", "new1"}));
}

// ---------------------------------------------------------------------------------------------
// Names that are not there

// The kernel keeps a missing name as missing for as long as it keeps one that is there, so
// probes of a missing name (include paths, $PATH) cost one request, not one each. Whatever then
// makes the name through the mount shows at once, whichever call makes it.
TEST(MountNegativeEntryTest, AMissingNameIsAskedForOnceAndShowsAtOnceWhenMade) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir out;
  const std::string stats = (out.path() / "s.json").string();
  test::MountedVault vault({"--stats-file", stats});
  const auto lookups = [&] {
    return test::StatsCounter(test::RequestStats(vault.pid(), stats), "lookups");
  };
  const auto missing = [&](const std::string& name) {
    struct stat st;
    return ::lstat(vault.path(name).c_str(), &st) != 0 && errno == ENOENT;
  };
  ASSERT_TRUE(WriteFile(vault.path("source"), "data"));
  const long long before = lookups();
  ASSERT_GE(before, 0);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(missing("gone"));
  // One request, two should the entry's second run out in between.
  EXPECT_LE(lookups() - before, 2);

  // Each way of making a name, right after the kernel was told it is missing.
  const std::vector<std::pair<std::string, mode_t>> made = {{"file", S_IFREG},  {"dir", S_IFDIR},
                                                            {"link", S_IFLNK},  {"hard", S_IFREG},
                                                            {"moved", S_IFREG}, {"fifo", S_IFIFO}};
  for (const auto& [name, type] : made) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(missing(name));
    const std::string path = vault.path(name);
    if (name == "file") {
      Fd fd(::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644));
      ASSERT_TRUE(Ok(fd.get()));
    } else if (name == "dir") {
      ASSERT_TRUE(Ok(::mkdir(path.c_str(), 0755)));
    } else if (name == "link") {
      ASSERT_TRUE(Ok(::symlink("source", path.c_str())));
    } else if (name == "hard") {
      ASSERT_TRUE(Ok(::link(vault.path("source").c_str(), path.c_str())));
    } else if (name == "moved") {
      ASSERT_TRUE(WriteFile(vault.path("to-move"), "moved"));
      ASSERT_TRUE(Ok(::rename(vault.path("to-move").c_str(), path.c_str())));
      EXPECT_TRUE(missing("to-move"));
    } else {
      ASSERT_TRUE(Ok(::mkfifo(path.c_str(), 0644)));
    }
    struct stat st;
    ASSERT_TRUE(Ok(::lstat(path.c_str(), &st)));
    EXPECT_EQ(st.st_mode & S_IFMT, type);
  }
  EXPECT_TRUE(HasContent(vault.path("moved"), "moved"));
  EXPECT_TRUE(HasContent(vault.path("hard"), "data"));
  // Removed, the name is missing again at once, and can be made again.
  ASSERT_TRUE(Ok(::unlink(vault.path("file").c_str())));
  EXPECT_TRUE(missing("file"));
  ASSERT_TRUE(WriteFile(vault.path("file"), "again"));
  EXPECT_TRUE(HasContent(vault.path("file"), "again"));
  // And after a remount (the daemon's own view, not the kernel's cache).
  vault.Remount();
  EXPECT_TRUE(missing("gone"));
  EXPECT_TRUE(HasContent(vault.path("file"), "again"));
}

}  // namespace
}  // namespace sigilfs
