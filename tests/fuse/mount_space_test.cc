// fallocate (reserve, punch hole, zero range) and SEEK_DATA / SEEK_HOLE through a real mount,
// and cp --sparse, which uses them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

constexpr off_t kPage = 4096;

struct Fd {
  int fd;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

void WriteAt(int fd, off_t at, const std::vector<uint8_t>& data) {
  ASSERT_EQ(::pwrite(fd, data.data(), data.size(), at), static_cast<ssize_t>(data.size()));
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::string s = test::ReadAll(path);
  return {s.begin(), s.end()};
}

TEST(MountSpaceTest, FallocateReservesPunchesAndZeros) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string f = vault.path("f");
  auto model = test::Pattern(16 * kPage, 1);
  {
    Fd fd(::open(f.c_str(), O_RDWR | O_CREAT, 0644));
    ASSERT_GE(fd.fd, 0);
    WriteAt(fd.fd, 0, model);
    ASSERT_EQ(::fallocate(fd.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, kPage + 10, 6 * kPage),
              0)
        << std::strerror(errno);
    std::fill(model.begin() + kPage + 10, model.begin() + 7 * kPage + 10, 0);
    ASSERT_EQ(::fallocate(fd.fd, FALLOC_FL_ZERO_RANGE, 9 * kPage, 100), 0) << std::strerror(errno);
    std::fill(model.begin() + 9 * kPage, model.begin() + 9 * kPage + 100, 0);
    // Reserving past the end grows the file (zeros); with KEEP_SIZE it does not.
    ASSERT_EQ(::fallocate(fd.fd, 0, 16 * kPage, 4 * kPage), 0) << std::strerror(errno);
    model.resize(20 * kPage, 0);
    ASSERT_EQ(::fallocate(fd.fd, FALLOC_FL_KEEP_SIZE, 0, 40 * kPage), 0);
    struct stat st;
    ASSERT_EQ(::fstat(fd.fd, &st), 0);
    EXPECT_EQ(st.st_size, 20 * kPage);
    // Modes Linux filesystems commonly lack are refused, not faked.
    EXPECT_EQ(::fallocate(fd.fd, FALLOC_FL_COLLAPSE_RANGE, 0, kPage), -1);
    EXPECT_EQ(errno, EOPNOTSUPP);
  }
  EXPECT_EQ(ReadFile(f), model);
  vault.Remount();
  EXPECT_EQ(ReadFile(f), model);
  // posix_fallocate, as installers and databases call it.
  Fd fd(::open(f.c_str(), O_RDWR));
  ASSERT_EQ(::posix_fallocate(fd.fd, 0, 30 * kPage), 0);
  struct stat st;
  ASSERT_EQ(::fstat(fd.fd, &st), 0);
  EXPECT_EQ(st.st_size, 30 * kPage);
}

TEST(MountSpaceTest, SeekDataAndHoleFollowTheHoles) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string f = vault.path("sparse");
  Fd fd(::open(f.c_str(), O_RDWR | O_CREAT, 0644));
  ASSERT_GE(fd.fd, 0);
  WriteAt(fd.fd, 0, test::Pattern(2 * kPage, 2));
  WriteAt(fd.fd, 100 * kPage, test::Pattern(kPage, 3));
  ASSERT_EQ(::ftruncate(fd.fd, 200 * kPage), 0);
  EXPECT_EQ(::lseek(fd.fd, 0, SEEK_DATA), 0);
  const off_t hole = ::lseek(fd.fd, 0, SEEK_HOLE);
  EXPECT_GE(hole, 2 * kPage);
  EXPECT_LE(hole, 3 * kPage);
  const off_t data = ::lseek(fd.fd, hole, SEEK_DATA);
  EXPECT_GE(data, 99 * kPage);
  EXPECT_LE(data, 100 * kPage);
  const off_t hole2 = ::lseek(fd.fd, 100 * kPage, SEEK_HOLE);
  EXPECT_GE(hole2, 101 * kPage);
  EXPECT_LE(hole2, 102 * kPage);
  EXPECT_EQ(::lseek(fd.fd, 200 * kPage, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  EXPECT_EQ(::lseek(fd.fd, 199 * kPage + 1, SEEK_HOLE), 200 * kPage);

  // cp --sparse=always finds the holes; the copy reads the same.
  const std::string copy = vault.path("copy");
  ASSERT_EQ(test::RunProcess({"/bin/cp", "--sparse=always", f, copy}).exit_code, 0);
  EXPECT_EQ(ReadFile(copy), ReadFile(f));
  // Both cipher files keep the holes: far fewer blocks than bytes.
  int sparse = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(vault.cipher())) {
    struct stat st;
    if (!e.is_regular_file() || ::stat(e.path().c_str(), &st) != 0 || st.st_size < 100 * kPage)
      continue;
    EXPECT_LT(st.st_blocks * 512, st.st_size / 4) << e.path();
    ++sparse;
  }
  EXPECT_EQ(sparse, 2);
}

// SEEK_DATA / SEEK_HOLE give what the kernel's own filesystem gives for a file whose holes and
// data lie on page boundaries (sigilfs holes are whole pages): data, a hole left by a write
// past the end, data, a punched hole, data to the end; from every offset around the edges,
// past the end and negative (ENXIO, as ext4 and tmpfs: the kernel passes negative offsets on).
TEST(MountSpaceTest, SeekAnswersAsTheKernelsFilesystemDoes) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  test::TempDir reference_dir;
  auto answers = [](const std::string& path) {
    std::vector<std::string> out;
    Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644));
    if (fd.fd < 0) return std::vector<std::string>{std::string("open: ") + std::strerror(errno)};
    WriteAt(fd.fd, 0, test::Pattern(2 * kPage, 21));
    WriteAt(fd.fd, 100 * kPage, test::Pattern(20 * kPage, 22));  // pages 100-119
    if (::fallocate(fd.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 105 * kPage, 5 * kPage) != 0)
      return std::vector<std::string>{std::string("punch: ") + std::strerror(errno)};
    const off_t size = 120 * kPage;
    for (const off_t at : {off_t{0},
                           off_t{1},
                           2 * kPage - 1,
                           2 * kPage,
                           2 * kPage + 1,
                           50 * kPage,
                           100 * kPage - 1,
                           100 * kPage,
                           100 * kPage + 1,
                           105 * kPage - 1,
                           105 * kPage,
                           107 * kPage,
                           110 * kPage - 1,
                           110 * kPage,
                           size - 1,
                           size,
                           size + 1,
                           size + 100 * kPage,
                           off_t{-1},
                           -kPage,
                           std::numeric_limits<off_t>::min()}) {
      for (const int whence : {SEEK_DATA, SEEK_HOLE}) {
        errno = 0;
        const off_t r = ::lseek(fd.fd, at, whence);
        out.push_back(std::string(whence == SEEK_DATA ? "SEEK_DATA " : "SEEK_HOLE ") +
                      std::to_string(at) + " -> " +
                      (r < 0 ? std::string(strerrorname_np(errno)) : std::to_string(r)));
      }
    }
    return out;
  };
  const std::vector<std::string> expected = answers((reference_dir.path() / "f").string());
  const std::vector<std::string> got = answers(vault.path("f"));
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]);
}

}  // namespace
}  // namespace sigilfs
