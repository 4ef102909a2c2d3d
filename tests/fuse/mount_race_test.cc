// The inode table against the kernel forgetting nodes and looking them up again: a directory the
// kernel drops while a hard link elsewhere keeps one of its files alive, then renamed, must not
// cost the file its name.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support/kernel_caches.h"
#include "test_support/mount.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"

namespace sigilfs {
namespace {

using test::Ok;

constexpr int kLanes = 6;  // independent directories, run at once
constexpr int kRounds = 3;

std::string ReadFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "<open: " + test::ErrnoName(errno) + ">";
  char buf[256];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n < 0 ? "<read: " + test::ErrnoName(errno) + ">" : std::string(buf, n);
}

// One lane, in `base`: d1/a, also linked as d2/b and held open through that name.
struct Lane {
  std::string d1, d2, d9, content;
  int held = -1;

  Lane(const std::string& base, int round)
      : d1(base + "/d1"),
        d2(base + "/d2"),
        d9(base + "/d9"),
        content(base + " " + std::to_string(round)) {}

  void Prepare() {
    ASSERT_TRUE(Ok(::mkdir(d1.c_str(), 0755)));
    ASSERT_TRUE(Ok(::mkdir(d2.c_str(), 0755)));
    int fd = ::open((d1 + "/a").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    ASSERT_TRUE(Ok(fd));
    ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    ASSERT_TRUE(Ok(::close(fd)));
    ASSERT_TRUE(Ok(::link((d1 + "/a").c_str(), (d2 + "/b").c_str())));
    held = ::open((d2 + "/b").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_TRUE(Ok(held));
  }

  // After the kernel forgot d1 (the file lives on through the open d2/b): d1 is looked up again
  // and renamed, the other link goes, and the file must still be reached, through the open file
  // and by its name in the renamed directory.
  void Check() {
    ASSERT_TRUE(Ok(::rename(d1.c_str(), d9.c_str())));
    ASSERT_TRUE(Ok(::unlink((d2 + "/b").c_str())));
    // Through the open file first (no lookup of its name), then by its name.
    EXPECT_TRUE(Ok(::fsetxattr(held, "user.race", "1", 1, 0)));
    EXPECT_TRUE(Ok(::link((d9 + "/a").c_str(), (d2 + "/c").c_str())));
    struct stat st;
    EXPECT_TRUE(Ok(::stat((d9 + "/a").c_str(), &st)));
    EXPECT_TRUE(Ok(::chmod((d9 + "/a").c_str(), 0600)));
    EXPECT_EQ(ReadFile(d2 + "/c"), content);
  }

  ~Lane() {
    if (held >= 0) ::close(held);
    for (const char* name : {"/a", "/b", "/c"}) {
      ::unlink((d1 + name).c_str());
      ::unlink((d2 + name).c_str());
      ::unlink((d9 + name).c_str());
    }
    ::rmdir(d1.c_str());
    ::rmdir(d2.c_str());
    ::rmdir(d9.c_str());
  }
};

// The reported failure: link() of a file whose directory had been renamed returned ENOENT. The
// kernel had forgotten that directory once (its dentry pruned while a hard link in another
// directory kept the file alive) and got a new node for it on the next lookup; the file still
// named the old node, which the rename did not update, so its path went stale and the daemon
// dropped the file's valid name.
TEST(MountRaceTest, AFileKeepsItsNameWhenTheKernelForgetsItsDirectory) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS(test::CanDropKernelCaches(), "cannot make the kernel drop its caches (needs root)");
  // Without the handle cache, as the daemon was when this failed: forgotten nodes leave the
  // table at once (with it, a forgotten directory is remembered anyway, which hides the case).
  test::MountedVault vault({"--handle-cache", "0"});
  for (int lane = 0; lane < kLanes; ++lane)
    ASSERT_TRUE(Ok(::mkdir(vault.path("lane" + std::to_string(lane)).c_str(), 0755)));
  for (int round = 0; round < kRounds && !HasFailure(); ++round) {
    std::vector<std::unique_ptr<Lane>> lanes;
    for (int lane = 0; lane < kLanes; ++lane) {
      lanes.push_back(std::make_unique<Lane>(vault.path("lane" + std::to_string(lane)), round));
      lanes.back()->Prepare();
    }
    if (HasFailure()) break;
    ASSERT_TRUE(test::DropKernelCaches());
    // At once: the lanes' renames, unlinks and links meet on the daemon's threads.
    std::vector<std::thread> threads;
    for (auto& lane : lanes) threads.emplace_back([&lane] { lane->Check(); });
    for (auto& t : threads) t.join();
  }
}

}  // namespace
}  // namespace sigilfs
