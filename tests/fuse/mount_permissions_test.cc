// What ext4 users take for granted about permissions, through a root-run mount with
// allow_other and default_permissions, exercised by an unprivileged user: setgid directories
// pass their group on, a write by a non-owner clears set-user-ID and set-group-ID, and modes
// are enforced (EACCES).
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
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
#include "test_support/temp_dir.h"

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
// caller without CAP_FSETID clear set-user-ID, and set-group-ID where the group may execute or
// the caller is not in the file's group (the kernel's setattr_should_drop_sgid, what ext4 does
// here); set-group-ID without group execute stays for a member of the group, and root's writes
// clear nothing, as on ext4.
TEST_F(MountPermissionsTest, TruncatesByANonOwnerClearSetIdBitsAsTheKernelWould) {
  struct Case {
    mode_t before, after;
    bool open_truncates;  // O_TRUNC rather than ftruncate
    gid_t group = 0;
  };
  for (const Case& c : {Case{06777, 0777, false}, Case{06777, 0777, true}, Case{02767, 0767, false},
                        Case{02767, 02767, false, kNogroup}, Case{02777, 0777, true, kNogroup},
                        Case{04766, 0766, true}}) {
    const std::string f = vault_->path("t");
    std::ofstream(f) << "data";
    ASSERT_EQ(::chown(f.c_str(), 0, c.group), 0);
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
    EXPECT_EQ(st.st_mode & 07777, c.after)
        << std::oct << c.before << " " << c.open_truncates << " group " << std::dec << c.group;
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

// fallocate changes a file as a write does, and the kernel leaves clearing set-ID bits to the
// daemon here too (under FUSE_HANDLE_KILLPRIV_V2 it sends no flag with a FALLOCATE): every mode
// of fallocate by a caller without CAP_FSETID clears set-user-ID, and set-group-ID where the
// group may execute or the caller is not in the file's group; root's clear nothing. The same
// steps on the backing filesystem (ext4 here) give the modes to expect.
TEST_F(MountPermissionsTest, FallocateClearsSetIdBitsAsTheKernelsFilesystemDoes) {
  test::TempDir reference;
  std::filesystem::permissions(reference.path(), std::filesystem::perms::others_exec,
                               std::filesystem::perm_options::add);
  struct Case {
    mode_t mode;
    gid_t group;
  };
  const Case cases[] = {{06777, 0}, {02767, 0}, {02767, kNogroup}, {02777, kNogroup}, {04766, 0}};
  const int modes[] = {0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                       FALLOC_FL_ZERO_RANGE};
  // The mode `f` is left with after a fallocate of `mode` by the unprivileged user (or root).
  auto after = [](const std::string& f, const Case& c, int mode, bool as_root) -> mode_t {
    std::ofstream(f) << std::string(3 * 4096, 'x');
    if (::chown(f.c_str(), 0, c.group) != 0 || ::chmod(f.c_str(), c.mode) != 0) return 01;
    auto body = [&] {
      const int fd = ::open(f.c_str(), O_RDWR);
      if (fd < 0) return errno;
      const int rc = ErrnoOf(::fallocate(fd, mode, 4096, 8192));
      ::close(fd);
      return rc;
    };
    if ((as_root ? body() : AsNobody(body)) != 0) return 02;
    struct stat st;
    if (::stat(f.c_str(), &st) != 0) return 03;
    const mode_t got = st.st_mode & 07777;
    ::unlink(f.c_str());
    return got;
  };
  for (const Case& c : cases) {
    for (const int mode : modes) {
      for (const bool as_root : {false, true}) {
        const mode_t expected = after((reference.path() / "f").string(), c, mode, as_root);
        ASSERT_GT(expected, 03u) << "the same steps failed on the backing filesystem";
        const mode_t got = after(vault_->path("f"), c, mode, as_root);
        EXPECT_EQ(got, expected) << std::oct << got << " instead of " << expected << " for "
                                 << c.mode << " group " << std::dec << c.group
                                 << ", fallocate mode " << mode
                                 << (as_root ? ", as root" : ", as nobody");
      }
    }
  }
  // And the kernel does not go on showing the old mode from its cache.
  const std::string f = vault_->path("cached");
  std::ofstream(f) << "data";
  ASSERT_EQ(::chmod(f.c_str(), 06777), 0);
  struct stat st;
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  ASSERT_EQ(AsNobody([&] {
              const int fd = ::open(f.c_str(), O_RDWR);
              if (fd < 0) return errno;
              const int rc = ErrnoOf(::fallocate(fd, 0, 0, 100));
              ::close(fd);
              return rc;
            }),
            0);
  ASSERT_EQ(::stat(f.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0777u);
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
