// Directory listings through a real mount (readdirplus): the attributes they carry are right,
// and the lookup references they hand the kernel are counted exactly — the kernel forgets them
// when its caches are dropped, and every entry stays reachable afterwards.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <string>

#include "test_support/daemon_stats.h"
#include "test_support/kernel_caches.h"
#include "test_support/mount.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

std::map<std::string, unsigned char> List(const std::string& dir) {
  std::map<std::string, unsigned char> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) names[e->d_name] = e->d_type;
  ::closedir(d);
  return names;
}

TEST(MountListingTest, ListingsCarryTheRightAttributes) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault vault;
  const std::string dir = vault.path("d");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  constexpr int kFiles = 300;
  for (int i = 0; i < kFiles; ++i) {
    std::ofstream(dir + "/f" + std::to_string(i)) << std::string(static_cast<size_t>(i) * 37, 'x');
    ASSERT_EQ(::chmod((dir + "/f" + std::to_string(i)).c_str(), 0600 | (i % 2 ? 0044 : 0)), 0);
  }
  ASSERT_EQ(::symlink("f1", (dir + "/link").c_str()), 0);
  ASSERT_EQ(::mkdir((dir + "/sub").c_str(), 0700), 0);
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0640), 0);
  vault.Remount();  // nothing cached: the stats below come from the listing

  const auto names = List(dir);
  EXPECT_EQ(names.size(), kFiles + 3u + 2u);
  for (int i = 0; i < kFiles; ++i) {
    const std::string name = "f" + std::to_string(i);
    ASSERT_EQ(names.count(name), 1u) << name;
    EXPECT_EQ(names.at(name), DT_REG);
    struct stat st;
    ASSERT_EQ(::lstat((dir + "/" + name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_size, i * 37) << name;
    EXPECT_EQ(st.st_mode, S_IFREG | 0600 | (i % 2 ? 0044 : 0)) << name;
  }
  struct stat st;
  ASSERT_EQ(::lstat((dir + "/link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_size, 2);
  ASSERT_EQ(::lstat((dir + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFDIR | 0700);
  ASSERT_EQ(::lstat((dir + "/fifo").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode, S_IFIFO | 0640);
  EXPECT_EQ(names.at("link"), DT_LNK);
  EXPECT_EQ(names.at("sub"), DT_DIR);
  EXPECT_EQ(names.at("fifo"), DT_FIFO);
}

TEST(MountListingTest, LookupReferencesFromListingsAreCountedExactly) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS(test::CanDropKernelCaches(), "dropping the kernel's caches needs root");
  // Without the handle cache, forgotten nodes leave the table, so a leaked reference shows as a
  // node left over.
  test::TempDir out;
  const std::string stats = (out.path() / "stats.json").string();
  test::MountedVault vault({"--handle-cache", "0", "--stats-file", stats});
  const std::string dir = vault.path("big");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  // Long names fill replies fast, so many entries fall on a reply's edge and are given back.
  constexpr int kFiles = 2000;
  const std::string pad(150, 'n');
  for (int i = 0; i < kFiles; ++i) std::ofstream(dir + "/" + pad + std::to_string(i)) << i;
  for (int round = 0; round < 3; ++round) {
    test::DropKernelCaches();
    const auto names = List(dir);
    ASSERT_EQ(names.size(), kFiles + 2u) << round;
    test::DropKernelCaches();  // the kernel forgets every node it was handed
    // Every entry is still there and readable, through a fresh lookup.
    for (int i = 0; i < kFiles; i += 7) {
      std::ifstream in(dir + "/" + pad + std::to_string(i));
      std::string content;
      in >> content;
      ASSERT_EQ(content, std::to_string(i)) << round << " " << i;
    }
  }
  // Once the kernel forgot everything, the daemon knows no node: no reference leaked or was
  // given back twice (that would have dropped a node in use, and the reads above would fail).
  test::DropKernelCaches();
  const std::string json = test::WaitForStat(vault.pid(), stats, "nodes", 0);
  EXPECT_EQ(test::StatsCounter(json, "nodes"), 0) << json;
  // Renames and unlinks after all that forgetting still find the right nodes.
  ASSERT_EQ(::rename((dir + "/" + pad + "1").c_str(), (dir + "/renamed").c_str()), 0);
  ASSERT_EQ(::unlink((dir + "/" + pad + "2").c_str()), 0);
  const auto names = List(dir);
  EXPECT_EQ(names.size(), kFiles + 1u);
  EXPECT_EQ(names.count("renamed"), 1u);
  vault.Unmount();
  EXPECT_EQ(vault.log().find("rror"), std::string::npos) << vault.log();
}

}  // namespace
}  // namespace sigilfs
