// A vault in a folder that two Syncthing instances sync, each side mounted --shared: a file
// written on one side reads on the other; a file both sides change before they sync leaves the
// conflict copy Syncthing makes, which the plain view shows as a readable file with Syncthing's
// name for it; a directory both sides make before they sync is one directory after.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/syncthing.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::SyncthingPair;

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "<missing>";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void Put(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::set<std::string> Names(const std::string& dir) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.insert(e.path().filename().string());
  return out;
}

TEST(MountSyncedTest, TwoHostsSyncingAVaultSeeEachOthersFilesAndConflicts) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS(test::SyncthingAvailable(), "no syncthing here");
  test::TempDir tmp;
  const std::string pass = (tmp.path() / "pass").string();
  Put(pass, "test passphrase\n");
  std::unique_ptr<SyncthingPair> sync;
  try {
    sync = std::make_unique<SyncthingPair>();
  } catch (const std::exception& e) {
    FAIL() << e.what();
  }
  const std::string a = sync->folder(0), b = sync->folder(1);
  // The vault is made on one host; the other receives it. (Syncthing's folder marker, a
  // directory with a '.', is nothing the vault lists.)
  sync->Stop(0);
  sync->Stop(1);
  auto r = test::RunProcess({SIGILFS_BINARY, "init", a, "--kdf", "test", "--passfile", pass});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // As README's recipe: each host's lock file is its own.
  for (const std::string& dir : {a, b}) {
    fs::create_directory(dir + "/.stfolder");
    Put(dir + "/.stignore", "sigilfs.lock\n");
  }
  sync->Start(0);
  sync->Start(1);
  ASSERT_TRUE(SyncthingPair::WaitFor([&] {
    return fs::exists(b + "/sigilfs.conf") && fs::exists(b + "/sigilfs.diriv");
  })) << sync->log(1);

  const std::string pa = (tmp.path() / "pa").string(), pb = (tmp.path() / "pb").string();
  fs::create_directory(pa);
  fs::create_directory(pb);
  auto ma = std::make_unique<test::MountedVault>(a, pa, pass, std::vector<std::string>{"--shared"});
  auto mb = std::make_unique<test::MountedVault>(b, pb, pass, std::vector<std::string>{"--shared"});

  // One side writes; the other reads it once synced.
  Put(pa + "/hello.txt", "written on the first host");
  EXPECT_TRUE(SyncthingPair::WaitFor([&] {
    return Contents(pb + "/hello.txt") == "written on the first host";
  })) << sync->log(1);

  // Both sides change one file, and make one directory, while they cannot sync.
  Put(pa + "/both.txt", "before");
  ASSERT_TRUE(SyncthingPair::WaitFor([&] { return Contents(pb + "/both.txt") == "before"; }));
  sync->Stop(1);
  Put(pa + "/both.txt", "changed on the first host");
  ASSERT_EQ(::mkdir((pa + "/made-on-both").c_str(), 0755), 0);
  Put(pa + "/made-on-both/from-a", "a");
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // a later mtime on b
  Put(pb + "/both.txt", "changed on the second host");
  ASSERT_EQ(::mkdir((pb + "/made-on-both").c_str(), 0755), 0);
  Put(pb + "/made-on-both/from-b", "b");
  sync->Start(1);

  // Syncthing keeps one version as both.txt and the other as a conflict copy, on both sides;
  // each side's plain view shows both, readable, the copy under Syncthing's own plain name.
  for (const std::string& view : {pa, pb}) {
    std::string copy;
    EXPECT_TRUE(SyncthingPair::WaitFor(
        [&] {
          for (const std::string& n : Names(view))
            if (n.starts_with("both.sync-conflict-") && n.ends_with(".txt")) copy = n;
          return !copy.empty();
        },
        60))
        << view << ": " << ::testing::PrintToString(Names(view))
        << "\ncipher: " << ::testing::PrintToString(Names(a)) << "\n"
        << ::testing::PrintToString(Names(b)) << "\n"
        << sync->log(0) << sync->log(1);
    if (copy.empty()) continue;
    const std::set<std::string> versions = {Contents(view + "/both.txt"),
                                            Contents(view + "/" + copy)};
    EXPECT_EQ(versions,
              (std::set<std::string>{"changed on the first host", "changed on the second host"}))
        << view;
  }
  // The directory both made is one directory with both files, readable on both sides.
  for (const std::string& view : {pa, pb}) {
    EXPECT_TRUE(SyncthingPair::WaitFor([&] {
      return Contents(view + "/made-on-both/from-a") == "a" &&
             Contents(view + "/made-on-both/from-b") == "b";
    })) << view
        << ": " << ::testing::PrintToString(Names(view + "/made-on-both"));
  }
  ma.reset();
  mb.reset();
  for (const std::string& dir : {a, b}) {
    r = test::RunProcess({SIGILFS_BINARY, "fsck", dir, "--passfile", pass});
    EXPECT_EQ(r.exit_code, 0) << dir << "\n" << r.out << r.err;
  }
}

}  // namespace
}  // namespace sigilfs
