// Tests of the one mountinfo parser the mount, the CLI, the vault lock and the PAM module share.
#include "sigilfs/core/mountinfo.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

TEST(MountInfoTest, ALineWithOptionalFieldsAndEscapedPaths) {
  const auto e = ParseMountInfoLine(
      "412 29 0:71 / /home/al\\040ice rw,nosuid,nodev,relatime shared:230 master:1 - "
      "fuse.sigilfs sigilfs:/home/.al\\134ice rw,user_id=1000,group_id=1000");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->device, "0:71");
  EXPECT_EQ(e->mount_point, "/home/al ice");
  EXPECT_EQ(e->options, "rw,nosuid,nodev,relatime");
  EXPECT_EQ(e->type, "fuse.sigilfs");
  EXPECT_EQ(e->source, "sigilfs:/home/.al\\ice");
  EXPECT_EQ(e->super_options, "rw,user_id=1000,group_id=1000");
}

TEST(MountInfoTest, LinesOfAnotherShapeAreSkipped) {
  EXPECT_FALSE(ParseMountInfoLine("").has_value());
  EXPECT_FALSE(ParseMountInfoLine("1 2 0:3 / /x rw").has_value());         // no " - "
  EXPECT_FALSE(ParseMountInfoLine("1 2 0:3 / /x rw - ext4").has_value());  // no source
  test::TempDir tmp;
  const std::string table = tmp.path() / "mountinfo";
  std::ofstream(table) << "garbage\n"
                          "22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
                          "23 22 0:5 / /mnt rw - fuse.sigilfs sigilfs:/v rw\n";
  const std::vector<MountInfoEntry> mounts = ReadMountInfo(table);
  ASSERT_EQ(mounts.size(), 2u);
  EXPECT_EQ(mounts[0].mount_point, "/");
  EXPECT_EQ(mounts[1].source, "sigilfs:/v");
}

TEST(MountInfoTest, ASigilfsMountNamesItsVaultByPathOrByTheOldPrefix) {
  auto vault_of = [](const std::string& line) { return SigilfsVaultOf(*ParseMountInfoLine(line)); };
  EXPECT_EQ(vault_of("23 22 0:5 / /mnt rw - fuse.sigilfs /v\\040w rw"), "/v w");
  EXPECT_EQ(vault_of("23 22 0:5 / /mnt rw - fuse.sigilfs sigilfs:/old rw"), "/old");
  EXPECT_EQ(vault_of("23 22 0:5 / /mnt rw - fuse.gocryptfs /v rw"), std::nullopt);
  EXPECT_EQ(vault_of("22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw"), std::nullopt);
}

// The live table of this process has the root mount.
TEST(MountInfoTest, TheLiveTableHasTheRoot) {
  bool root = false;
  for (const MountInfoEntry& m : ReadMountInfo()) root = root || m.mount_point == "/";
  EXPECT_TRUE(root);
}

}  // namespace
}  // namespace sigilfs::core
