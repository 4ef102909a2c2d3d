// A vault on a small backing filesystem run out of space through a real mount: the writer sees
// ENOSPC, data stored before is intact, no page is left half-replaced, and the daemon keeps
// serving once space is freed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/small_fs.h"
#include "test_support/syscall_assert.h"

namespace sigilfs {
namespace {

constexpr size_t kMiB = 1 << 20;
constexpr uint64_t kBackingBytes = 8 * kMiB;

// A vault created on a fresh small tmpfs, mounted outside it.
class MountEnospcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS(test::SmallFilesystem::Available(), "mounting a tmpfs needs root");
    small_ = std::make_unique<test::SmallFilesystem>(kBackingBytes);
    cipher_ = (small_->path() / "cipher").string();
    plain_ = (work_.path() / "plain").string();
    passfile_ = (work_.path() / "pass").string();
    std::filesystem::create_directories(cipher_);
    std::filesystem::create_directories(plain_);
    std::ofstream(passfile_) << "test passphrase\n";
    test::ProcessResult r = test::RunProcess(
        {SIGILFS_BINARY, "init", cipher_, "--kdf", "test", "--passfile", passfile_});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    vault_ = std::make_unique<test::MountedVault>(cipher_, plain_, passfile_);
    idle_fds_ = vault_->DaemonOpenFiles();
  }
  void TearDown() override {
    vault_.reset();  // unmount before the tmpfs goes
    small_.reset();
  }

  std::string path(const std::string& rel) const { return plain_ + "/" + rel; }

  // Writes `data` to a new file and fsyncs it; the test fails on any error.
  void Store(const std::string& rel, const std::vector<uint8_t>& data) {
    const int fd = ::open(path(rel).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    ASSERT_TRUE(test::Ok(fd)) << rel;
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size())) << rel;
    ASSERT_TRUE(test::Ok(::fsync(fd))) << rel;
    ASSERT_TRUE(test::Ok(::close(fd))) << rel;
  }

  // Fills the backing store through the mount with writes of `chunk_size` to `rel` until a
  // write, an fsync or the close fails, which must be with ENOSPC. Returns the bytes whose write
  // returned success; the file then holds a prefix of them. A failed write-back gives back the
  // space it took, so what is left free is less than one write-back: fsync after every write
  // to leave less than a page.
  size_t FillUp(const std::string& rel, size_t chunk_size = 64 * 1024, bool sync_each = false) {
    const auto chunk = test::Pattern(chunk_size, 99);
    const int fd = ::open(path(rel).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    EXPECT_TRUE(test::Ok(fd)) << rel;
    if (fd < 0) return 0;
    size_t written = 0;
    int error = 0;
    // Bounded: twice the store's size, so a filesystem that never says ENOSPC fails the test.
    while (written < 2 * kBackingBytes) {
      const ssize_t n = ::write(fd, chunk.data(), chunk.size());
      if (n < 0) {
        error = errno;
        break;
      }
      // Counted before the fsync: a write that returned success may still be stored even if
      // the fsync after it fails, when the flush at close retries it and finds room (space a
      // failed write-back gave back can take a moment to show as free).
      written += static_cast<size_t>(n);
      if (sync_each && ::fsync(fd) != 0) {
        error = errno;
        break;
      }
    }
    if (error == 0 && ::fsync(fd) != 0) error = errno;
    if (::close(fd) != 0 && error == 0) error = errno;
    EXPECT_EQ(error, ENOSPC) << "filling " << rel << " after " << written
                             << " bytes: " << test::ErrnoName(error);
    return written;
  }

  // The whole file, or the errno of the first failing call.
  int ReadFile(const std::string& rel, std::vector<uint8_t>* out) {
    out->clear();
    const int fd = ::open(path(rel).c_str(), O_RDONLY);
    if (fd < 0) return errno;
    uint8_t buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0) {
        const int e = errno;
        ::close(fd);
        return e;
      }
      if (n == 0) break;
      out->insert(out->end(), buf, buf + n);
    }
    ::close(fd);
    return 0;
  }

  void ExpectContents(const std::string& rel, const std::vector<uint8_t>& expected) {
    std::vector<uint8_t> got;
    const int e = ReadFile(rel, &got);
    ASSERT_EQ(e, 0) << rel << ": " << test::ErrnoName(e);
    ASSERT_EQ(got.size(), expected.size()) << rel;
    EXPECT_TRUE(got == expected) << rel << " differs";
  }

  // What a file filled by FillUp reads back: a prefix of its chunk repeated, of at most
  // `written` bytes, without an error on any page.
  void ExpectFilledPrefix(const std::string& rel, size_t written, size_t chunk_size = 64 * 1024) {
    std::vector<uint8_t> got;
    const int e = ReadFile(rel, &got);
    ASSERT_EQ(e, 0) << rel << ": " << test::ErrnoName(e);
    EXPECT_LE(got.size(), written);
    const auto chunk = test::Pattern(chunk_size, 99);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], chunk[i % chunk.size()]) << rel << " differs at byte " << i;
  }

  void ExpectFsckClean() {
    vault_->Unmount();
    test::ProcessResult r =
        test::RunProcess({SIGILFS_BINARY, "fsck", cipher_, "--passfile", passfile_});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    vault_->Mount();
  }

  test::TempDir work_;
  std::unique_ptr<test::SmallFilesystem> small_;
  std::unique_ptr<test::MountedVault> vault_;
  std::string cipher_, plain_, passfile_;
  size_t idle_fds_ = 0;  // the daemon's open files (DaemonOpenFiles) with nothing open
};

TEST_F(MountEnospcTest, AFullDiskFailsTheWriterAndKeepsEarlierData) {
  const auto keep = test::Pattern(kMiB + 123, 1);
  const auto small = test::Pattern(3000, 2);
  Store("keep", keep);
  Store("small", small);

  const size_t written = FillUp("big");
  ASSERT_GT(written, 0u);
  ExpectContents("keep", keep);
  ExpectContents("small", small);
  ExpectFilledPrefix("big", written);
  const size_t rest = FillUp("rest", 4096, true);
  ExpectFilledPrefix("rest", rest, 4096);
  ExpectFilledPrefix("big", written);

  // Full: new files, directories, long names and attributes fail cleanly or work completely.
  const std::string long_name(250, 'n');
  for (const std::string& name : {std::string("fresh"), long_name}) {
    const int fd = ::open(path(name).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0) {
      EXPECT_EQ(errno, ENOSPC) << name.size() << "-byte name: " << test::ErrnoName(errno);
      EXPECT_FALSE(std::filesystem::exists(path(name))) << "a failed create left its entry";
      continue;
    }
    const auto data = test::Pattern(20000, 3);
    const ssize_t n = ::write(fd, data.data(), data.size());
    const int write_error = n < 0 ? errno : 0;
    const int sync_error = ::fsync(fd) != 0 ? errno : 0;
    ::close(fd);
    EXPECT_TRUE(write_error == ENOSPC || sync_error == ENOSPC)
        << "20000 bytes to a full disk: write " << test::ErrnoName(write_error) << ", fsync "
        << test::ErrnoName(sync_error);
    ASSERT_TRUE(test::Ok(::unlink(path(name).c_str())));
  }
  if (::mkdir(path("dir").c_str(), 0755) != 0) {
    EXPECT_EQ(errno, ENOSPC) << test::ErrnoName(errno);
    EXPECT_FALSE(std::filesystem::exists(path("dir"))) << "a failed mkdir left its entry";
  } else {
    EXPECT_TRUE(std::filesystem::is_empty(path("dir")));
  }
  const std::string value(3000, 'v');
  if (::setxattr(path("keep").c_str(), "user.note", value.data(), value.size(), 0) != 0) {
    EXPECT_EQ(errno, ENOSPC) << test::ErrnoName(errno);
  }

  // The daemon keeps serving: freeing the space makes writes work again. (Once the daemon has
  // let go of the filled files: the kernel sends their RELEASE in the background, and a removed
  // file still open keeps its space; on a busy machine that took more than a moment.)
  const auto released_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (vault_->DaemonOpenFiles() > idle_fds_ && std::chrono::steady_clock::now() < released_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(test::Ok(::unlink(path("big").c_str())));
  ASSERT_TRUE(test::Ok(::unlink(path("rest").c_str())));
  const auto after = test::Pattern(2 * kMiB, 4);
  Store("after", after);
  ExpectContents("keep", keep);
  ExpectContents("after", after);

  ExpectFsckClean();
  ExpectContents("keep", keep);
  ExpectContents("small", small);
  ExpectContents("after", after);
}

// The close that fails gives up what was not stored and has the kernel forget the file's
// cached size and names, the names decrypted from the cipher directory: a long one from its
// side file. Read at once, the file is what is stored, no zeros past it.
TEST_F(MountEnospcTest, AFailedCloseOfALongNamedFileReadsAsStoredAtOnce) {
  const std::string name(240, 'L');
  const size_t written = FillUp(name);
  ASSERT_GT(written, 0u);
  ExpectFilledPrefix(name, written);
  struct stat st;
  ASSERT_TRUE(test::Ok(::stat(path(name).c_str(), &st)));
  std::vector<uint8_t> got;
  ASSERT_EQ(ReadFile(name, &got), 0);
  EXPECT_EQ(static_cast<size_t>(st.st_size), got.size()) << "stat and read agree on the size";
}

// Appending re-seals the old last page (it is no longer last); running out of space on the way
// must leave the file as it was or as far as the writer was told, never cut or unreadable.
TEST_F(MountEnospcTest, AnAppendThatRunsOutOfSpaceLeavesTheFileReadable) {
  auto model = test::Pattern(10000, 5);  // last page partly filled
  Store("log", model);
  // Each write synced, so what is left free is less than one write: a write-back that fails
  // gives back what it had stored of its batch, and the daemon writes back 2 MiB at a time.
  const size_t filled = FillUp("filler", 64 * 1024, true);
  ASSERT_GT(filled, 0u);

  const auto more = test::Pattern(512 * 1024, 6);
  const int fd = ::open(path("log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_TRUE(test::Ok(fd));
  size_t appended = 0;
  int error = 0;
  while (appended < more.size()) {
    const ssize_t n =
        ::write(fd, more.data() + appended, std::min<size_t>(4096, more.size() - appended));
    if (n < 0) {
      error = errno;
      break;
    }
    appended += static_cast<size_t>(n);
  }
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  EXPECT_EQ(error, ENOSPC) << test::ErrnoName(error);
  // The pages that could not be stored stay in the daemon until its release, which the kernel
  // sends in the background: read what is stored, after that.
  vault_->WaitForReleases(idle_fds_);

  // Whatever length the file now has, every byte of it is the old data or the appended data.
  std::vector<uint8_t> got;
  const int e = ReadFile("log", &got);
  ASSERT_EQ(e, 0) << test::ErrnoName(e);
  ASSERT_GE(got.size(), model.size());
  ASSERT_LE(got.size(), model.size() + appended);
  model.insert(model.end(), more.begin(), more.begin() + (got.size() - model.size()));
  EXPECT_TRUE(got == model);

  ASSERT_TRUE(test::Ok(::unlink(path("filler").c_str())));
  ExpectFsckClean();
  std::vector<uint8_t> again;
  ASSERT_EQ(ReadFile("log", &again), 0);
  EXPECT_TRUE(again == got) << "the file changed across a remount";
}

// Overwriting pages in place needs no new space (tmpfs, like ext4, rewrites blocks where they
// are), so on a full disk it works and reads back.
TEST_F(MountEnospcTest, OverwritesInPlaceWorkOnAFullDisk) {
  auto model = test::Pattern(256 * 1024, 7);
  Store("data", model);
  ASSERT_GT(FillUp("filler"), 0u);

  const int fd = ::open(path("data").c_str(), O_WRONLY);
  ASSERT_TRUE(test::Ok(fd));
  const auto patch = test::Pattern(64 * 1024 + 100, 8);
  const ssize_t n = ::pwrite(fd, patch.data(), patch.size(), 4096 + 7);
  const int write_error = n < 0 ? errno : 0;
  const int sync_error = ::fsync(fd) != 0 ? errno : 0;
  ::close(fd);
  ASSERT_EQ(write_error, 0) << test::ErrnoName(write_error);
  ASSERT_EQ(sync_error, 0) << test::ErrnoName(sync_error);
  ASSERT_EQ(n, static_cast<ssize_t>(patch.size()));
  std::copy(patch.begin(), patch.end(), model.begin() + 4096 + 7);
  ExpectContents("data", model);
  ASSERT_TRUE(test::Ok(::unlink(path("filler").c_str())));
  ExpectFsckClean();
}

// A write that fails changes nothing: a 1 MiB write into a full disk fails with ENOSPC and
// leaves the file's size and bytes as they were; one that starts inside the file stores the
// pages it overwrote in place (no new space needed), returns their length, and changes nothing
// past them. (A 1 MiB write that failed used to leave the size grown and its data readable.)
TEST_F(MountEnospcTest, ALargeWriteIntoAFullDiskChangesNothingPastWhatItReturns) {
  auto model = test::Pattern(40 * 4096 + 5, 5);
  Store("data", model);
  ASSERT_GT(FillUp("filler", 64 * 1024, true), 0u);
  const auto big = test::Pattern(kMiB, 6);
  const int fd = ::open(path("data").c_str(), O_WRONLY);
  ASSERT_TRUE(test::Ok(fd));
  for (const off_t at : {static_cast<off_t>(model.size()), off_t{8 * 4096}}) {
    SCOPED_TRACE("a write at " + std::to_string(at));
    const ssize_t n = ::pwrite(fd, big.data(), big.size(), at);
    const int e = n < 0 ? errno : 0;
    if (n < 0) {
      EXPECT_EQ(e, ENOSPC) << test::ErrnoName(e);
    } else {
      // A short count: what it took (the cached head before the first whole page, the pages
      // overwritten in place), and nothing after.
      EXPECT_LT(n, static_cast<ssize_t>(big.size())) << "a full disk took a 1 MiB write";
      model.resize(std::max<size_t>(model.size(), at + n));
      std::copy_n(big.begin(), n, model.begin() + at);
    }
    struct stat st;
    ASSERT_TRUE(test::Ok(::fstat(fd, &st)));
    EXPECT_EQ(static_cast<size_t>(st.st_size), model.size())
        << "the write changed the size past what it returned (" << n << ")";
    ExpectContents("data", model);
  }
  ::close(fd);
  ASSERT_TRUE(test::Ok(::unlink(path("filler").c_str())));
  ExpectContents("data", model);
  ExpectFsckClean();
}

// A symlink whose target is too long for the cipher link itself keeps its sealed target in a
// side file of the vault root, written first: on a full disk the symlink fails with ENOSPC and
// leaves neither a link nor a side file; once space is back it works.
TEST_F(MountEnospcTest, ALongSymlinkOnAFullDiskLeavesNothingBehind) {
  ASSERT_GT(FillUp("filler", 64 * 1024, true), 0u);
  auto side_files = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(cipher_))
      n += e.path().filename().string().rfind("sigilfs.target.", 0) == 0;
    return n;
  };
  const std::string target(4000, 't');
  if (::symlink(target.c_str(), path("link").c_str()) != 0) {
    EXPECT_EQ(errno, ENOSPC) << test::ErrnoName(errno);
    EXPECT_FALSE(std::filesystem::is_symlink(path("link"))) << "a failed symlink left its link";
    EXPECT_EQ(side_files(), 0u) << "a failed symlink left its target's side file";
  } else {
    // The side file fit in what was left: then the link is whole.
    EXPECT_EQ(std::filesystem::read_symlink(path("link")).string(), target);
    ASSERT_TRUE(test::Ok(::unlink(path("link").c_str())));
    // The daemon keeps a removed link's target while the kernel still knows the link, and the
    // kernel's FORGET comes in the background, after the unlink returns.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (side_files() != 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(side_files(), 0u) << "removing the link left its target's side file";
  }
  ASSERT_TRUE(test::Ok(::unlink(path("filler").c_str())));
  // The daemon lets go of the filler's descriptor, and so of its space, after the unlink
  // returns (the kernel's release comes in the background): wait for the space.
  for (int i = 0; i < 500 && small_->FreeBytes() < kMiB; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(test::Ok(::symlink(target.c_str(), path("link").c_str())));
  EXPECT_EQ(std::filesystem::read_symlink(path("link")).string(), target);
  EXPECT_EQ(side_files(), 1u);
  ExpectFsckClean();
}

// The daemon's peak resident memory in KiB (VmHWM), or 0 if it cannot be read.
size_t PeakKib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoul(line.substr(6));
  return 0;
}

// Writes that go on into a full disk must not pile up in the daemon: once a write-back has
// failed, the dirty pages of a file are bounded (two batches, 4 MiB), and writes past the bound
// fail with ENOSPC and change nothing. So the daemon's memory stays within its budget: the
// cache's 64 MiB and those two batches (docs/design/crash-and-space.md, "A full backing
// store"). 10 s of 4 KiB appends (30 s under SIGILFS_LONG); before the bound, every write
// succeeded into the cache.
TEST_F(MountEnospcTest, WritesIntoAFullDiskStayWithinTheMemoryBudget) {
  ASSERT_GT(FillUp("filler", 64 * 1024, true), 0u);
  const size_t before = PeakKib(vault_->pid());
  ASSERT_GT(before, 0u);
  const auto seconds = std::chrono::seconds(std::getenv("SIGILFS_LONG") != nullptr ? 30 : 10);
  const int fd = ::open(path("pile").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_TRUE(test::Ok(fd));
  const auto page = test::Pattern(4096, 9);
  size_t ok = 0, failed = 0;
  int other = 0;
  const auto end = std::chrono::steady_clock::now() + seconds;
  for (uint64_t at = 0; std::chrono::steady_clock::now() < end; at += 4096) {
    const ssize_t n = ::pwrite(fd, page.data(), page.size(), static_cast<off_t>(at));
    if (n == static_cast<ssize_t>(page.size()))
      ++ok;
    else if (n < 0 && errno == ENOSPC)
      ++failed;
    else if (other == 0)
      other = n < 0 ? errno : -1;
  }
  struct stat st;
  ASSERT_TRUE(test::Ok(::fstat(fd, &st)));
  ::close(fd);  // its flush fails: the disk is still full
  const size_t peak = PeakKib(vault_->pid());
  EXPECT_EQ(other, 0) << "a write failed with " << test::ErrnoName(other);
  EXPECT_GT(failed, 0u) << ok << " writes into a full disk, none refused";
  EXPECT_LE(static_cast<uint64_t>(st.st_size), ok * 4096) << "a failed write grew the file";
  EXPECT_LE(ok * 4096, 2 * 2 * kMiB + 2 * kMiB) << "more accepted than the bound (two batches)";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' shadow memory and quarantine are most of the footprint there.
  std::printf("memory bound not checked under a sanitizer\n");
#else
  EXPECT_LE(peak, before + (64 + 4 + 16) * 1024)
      << "the daemon grew from " << before / 1024 << " to " << peak / 1024 << " MiB after " << ok
      << " writes accepted and " << failed << " refused";
#endif
  std::printf("full disk: %zu writes accepted, %zu refused; daemon peak %zu -> %zu MiB\n", ok,
              failed, before / 1024, peak / 1024);
  ASSERT_TRUE(test::Ok(::unlink(path("filler").c_str())));
  ASSERT_TRUE(test::Ok(::unlink(path("pile").c_str())));
  ExpectFsckClean();
}

}  // namespace
}  // namespace sigilfs
