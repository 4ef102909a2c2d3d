// What ext4 users take for granted about permissions, through a root-run mount with
// allow_other and default_permissions, exercised by an unprivileged user: setgid directories
// pass their group on, a write by a non-owner clears set-user-ID and set-group-ID, and modes
// are enforced (EACCES).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "test_support/as_nobody.h"
#include "test_support/mount.h"
#include "test_support/requirements.h"

namespace sigilfs {
namespace {

using test::kNobody;
using test::kNogroup;
constexpr gid_t kOtherGroup = 100;  // "users": a group the unprivileged user is not in

using test::AsNobody;
using test::ErrnoOf;

class MountPermissionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS_ROOT("needs root (to serve another user)");
    vault_ = std::make_unique<test::MountedVault>(
        std::vector<std::string>{"-o", "allow_other,default_permissions"});
    // The unprivileged user must be able to reach the mount point.
    std::filesystem::permissions(std::filesystem::path(vault_->plain()).parent_path(),
                                 std::filesystem::perms::others_exec,
                                 std::filesystem::perm_options::add);
  }

  std::unique_ptr<test::MountedVault> vault_;
};

TEST_F(MountPermissionsTest, SetgidDirectoriesPassTheirGroupOn) {
  const std::string d = vault_->path("shared");
  ASSERT_EQ(::mkdir(d.c_str(), 0777), 0);
  ASSERT_EQ(::chown(d.c_str(), 0, kOtherGroup), 0);
  ASSERT_EQ(::chmod(d.c_str(), 02777), 0);
  ASSERT_EQ(AsNobody([&] {
              const int fd = ::open((d + "/file").c_str(), O_WRONLY | O_CREAT, 0644);
              if (fd < 0) return errno;
              ::close(fd);
              return ErrnoOf(::mkdir((d + "/sub").c_str(), 0755));
            }),
            0);
  struct stat st;
  ASSERT_EQ(::stat((d + "/file").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);
  EXPECT_EQ(st.st_gid, kOtherGroup);
  ASSERT_EQ(::stat((d + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, kOtherGroup);
  EXPECT_NE(st.st_mode & S_ISGID, 0u) << "a subdirectory inherits the setgid bit";
  vault_->Remount();
  ASSERT_EQ(::stat((d + "/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, kOtherGroup);
  EXPECT_NE(st.st_mode & S_ISGID, 0u);
}

TEST_F(MountPermissionsTest, AWriteByANonOwnerClearsSetuidAndSetgid) {
  const std::string f = vault_->path("tool");
  std::ofstream(f) << "#!/bin/sh\n";
  ASSERT_EQ(::chmod(f.c_str(), 06777), 0);
  ASSERT_EQ(AsNobody([&] {
              const int fd = ::open(f.c_str(), O_WRONLY | O_APPEND);
              if (fd < 0) return errno;
              const int rc = ::write(fd, "exit 0\n", 7) == 7 ? 0 : (errno != 0 ? errno : EIO);
              ::close(fd);
              return rc;
            }),
            0);
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
  vault_->Remount();
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
}

// The kernel leaves clearing set-ID bits to the daemon (FUSE_HANDLE_KILLPRIV_V2, so that it
// need not ask for security.capability before every write): a truncate and an O_TRUNC open by a
// caller without CAP_FSETID clear set-user-ID, and set-group-ID where the group may execute;
// set-group-ID without group execute (mandatory locking's mark) stays, and root's writes clear
// nothing, as on ext4.
TEST_F(MountPermissionsTest, TruncatesByANonOwnerClearSetIdBitsAsTheKernelWould) {
  struct Case {
    mode_t before, after;
    bool open_truncates;  // O_TRUNC rather than ftruncate
  };
  for (const Case& c : {Case{06777, 0777, false}, Case{06777, 0777, true},
                        Case{02767, 02767, false}, Case{04766, 0766, true}}) {
    const std::string f = vault_->path("t");
    std::ofstream(f) << "data";
    ASSERT_EQ(::chmod(f.c_str(), c.before), 0);
    ASSERT_EQ(AsNobody([&] {
                const int fd = ::open(f.c_str(), O_WRONLY | (c.open_truncates ? O_TRUNC : 0));
                if (fd < 0) return errno;
                const int rc = c.open_truncates ? 0 : ErrnoOf(::ftruncate(fd, 1));
                ::close(fd);
                return rc;
              }),
              0);
    struct stat st;
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, c.after) << std::oct << c.before << " " << c.open_truncates;
    ASSERT_EQ(::unlink(f.c_str()), 0);
  }
  // Root keeps them (CAP_FSETID).
  const std::string f = vault_->path("root");
  std::ofstream(f) << "x";
  ASSERT_EQ(::chmod(f.c_str(), 06755), 0);
  const int fd = ::open(f.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "y", 1), 1);
  ASSERT_EQ(::ftruncate(fd, 1), 0);
  ::close(fd);
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 06755u);
}

TEST_F(MountPermissionsTest, ModesAreEnforcedForOtherUsers) {
  const std::string secret = vault_->path("secret"), priv = vault_->path("private");
  std::ofstream(secret) << "for root";
  ASSERT_EQ(::chmod(secret.c_str(), 0600), 0);
  ASSERT_EQ(::mkdir(priv.c_str(), 0700), 0);
  EXPECT_EQ(AsNobody([&] { return ErrnoOf(::open(secret.c_str(), O_RDONLY)); }), EACCES);
  EXPECT_EQ(
      AsNobody([&] { return ErrnoOf(::open((priv + "/x").c_str(), O_CREAT | O_WRONLY, 0644)); }),
      EACCES);
  EXPECT_EQ(AsNobody([&] { return ErrnoOf(::unlink(secret.c_str())); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return ErrnoOf(::chmod(secret.c_str(), 0666)); }), EPERM);
  EXPECT_EQ(AsNobody([&] { return ErrnoOf(::chown(secret.c_str(), kNobody, kNogroup)); }), EPERM);
}

}  // namespace
}  // namespace sigilfs
