// POSIX ACLs through a real mount, as on ext4: setfacl/getfacl round trips on files and
// directories (kept across remount and rename), default ACLs inherited by new files and
// subdirectories (the umask ignored then, applied otherwise), chmod moving the mask, equivalent
// ACLs kept as mode bits only, named entries enforced for another user, nothing in clear in the
// cipher directory, and EOPNOTSUPP under -o noxattr. Where the temporary directory's own
// filesystem has ACLs, the same steps run there too and must give the same answers.
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/core/names.h"
#include "test_support/acls.h"
#include "test_support/as_nobody.h"
#include "test_support/daemon_stats.h"
#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

using test::kNobody;
using test::kNogroup;
constexpr gid_t kUsers = 100;              // a group nobody is not in
constexpr uint32_t kMarkerUid = 0xC0FFEE;  // recognizable in raw attribute values

constexpr char kSetfacl[] = "/usr/bin/setfacl";
constexpr char kGetfacl[] = "/usr/bin/getfacl";
constexpr char kAccess[] = "system.posix_acl_access";
constexpr char kDefault[] = "system.posix_acl_default";

bool AclToolsPresent() { return ::access(kSetfacl, X_OK) == 0 && ::access(kGetfacl, X_OK) == 0; }

// setfacl with its arguments; "" on success, else what it said.
std::string Setfacl(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kSetfacl};
  argv.insert(argv.end(), args.begin(), args.end());
  test::ProcessResult r = test::RunProcess(argv);
  return r.exit_code == 0 ? "" : "setfacl failed (" + std::to_string(r.exit_code) + "): " + r.err;
}

// The ACL as getfacl prints it: numeric ids, no header, no "#effective" comments.
std::string Getfacl(const std::string& path) {
  test::ProcessResult r = test::RunProcess({kGetfacl, "-c", "-n", "-E", path});
  if (r.exit_code != 0) return "getfacl failed: " + r.err;
  while (!r.out.empty() && r.out.back() == '\n') r.out.pop_back();
  return r.out;
}

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return static_cast<mode_t>(-1);
  return st.st_mode & 07777;
}

std::vector<std::string> XattrNames(const std::string& path) {
  std::string buf(65536, '\0');
  const ssize_t n = ::llistxattr(path.c_str(), buf.data(), buf.size());
  std::vector<std::string> out;
  for (size_t at = 0; n > 0 && at < static_cast<size_t>(n); at += out.back().size() + 1)
    out.emplace_back(buf.c_str() + at);
  return out;
}

bool HasXattr(const std::string& path, const std::string& name) {
  for (const std::string& n : XattrNames(path))
    if (n == name) return true;
  return false;
}

// user::rw- user:ID:r-- group::r-- mask::r-- other::r--
std::string NamedReadAcl(uint32_t id) {
  return test::AclXattr({{0x01, 6}, {0x02, 4, id}, {0x04, 4}, {0x10, 4}, {0x20, 4}});
}

int SetRaw(const std::string& path, const char* name, const std::string& value) {
  return ::setxattr(path.c_str(), name, value.data(), value.size(), 0) == 0 ? 0 : errno;
}

// Sets the process umask for a scope.
class ScopedUmask {
 public:
  explicit ScopedUmask(mode_t mask) : old_(::umask(mask)) {}
  ~ScopedUmask() { ::umask(old_); }
  ScopedUmask(const ScopedUmask&) = delete;
  ScopedUmask& operator=(const ScopedUmask&) = delete;

 private:
  mode_t old_;
};

using test::AsNobody;
using test::ErrnoOf;

int OpenErrno(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

// A plain directory of the temporary directory's own filesystem, if it keeps ACLs (ext4 and
// tmpfs do): the reference the mount is compared with.
class Reference {
 public:
  Reference() {
    const std::string probe = (dir_.path() / "probe").string();
    std::ofstream(probe) << "x";
    available_ = Setfacl({"-m", "u:" + std::to_string(kNobody) + ":r", probe}).empty();
    fs::remove(probe);
  }
  bool available() const { return available_; }
  std::string root() const { return dir_.path().string(); }

 private:
  test::TempDir dir_;
  bool available_ = false;
};

class MountAclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS(AclToolsPresent(), "no setfacl/getfacl (Debian package acl)");
  }
};

TEST_F(MountAclTest, SetAndGetOnFilesAndDirectoriesSurviveRemountAndRename) {
  test::MountedVault vault;
  const std::string f = vault.path("file"), d = vault.path("dir");
  std::ofstream(f) << "contents";
  ASSERT_EQ(::chmod(f.c_str(), 0640), 0);
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ASSERT_EQ(Setfacl({"-m", "u:65534:rw,g:100:r", f}), "");
  ASSERT_EQ(Setfacl({"-m", "u:65534:rwx", d}), "");
  ASSERT_EQ(Setfacl({"-d", "-m", "u:65534:rx,g:100:rwx", d}), "");
  const std::string file_acl =
      "user::rw-\nuser:65534:rw-\ngroup::r--\ngroup:100:r--\nmask::rw-\nother::---";
  const std::string dir_acl =
      "user::rwx\nuser:65534:rwx\ngroup::r-x\nmask::rwx\nother::r-x\n"
      "default:user::rwx\ndefault:user:65534:r-x\ndefault:group::r-x\ndefault:group:100:rwx\n"
      "default:mask::rwx\ndefault:other::r-x";
  for (int pass = 0; pass < 2; ++pass) {
    SCOPED_TRACE(pass == 0 ? "mounted" : "remounted");
    EXPECT_EQ(Getfacl(f), file_acl);
    EXPECT_EQ(Getfacl(d), dir_acl);
    // The group bits of the mode are the mask.
    EXPECT_EQ(ModeOf(f), 0660u);
    EXPECT_EQ(ModeOf(d), 0775u);
    EXPECT_TRUE(HasXattr(f, kAccess));
    EXPECT_TRUE(HasXattr(d, kDefault));
    vault.Remount();
  }
  // They belong to the file, not its name.
  ASSERT_EQ(::rename(f.c_str(), (d + "/moved").c_str()), 0);
  ASSERT_EQ(::rename(d.c_str(), vault.path("renamed").c_str()), 0);
  EXPECT_EQ(Getfacl(vault.path("renamed/moved")), file_acl);
  EXPECT_EQ(Getfacl(vault.path("renamed")), dir_acl);
  vault.Remount();
  EXPECT_EQ(Getfacl(vault.path("renamed/moved")), file_acl);
  // A default ACL is for directories only, as on ext4.
  EXPECT_EQ(SetRaw(vault.path("renamed/moved"), kDefault, NamedReadAcl(kNobody)), EACCES);
  EXPECT_NE(Setfacl({"-d", "-m", "u:65534:r", vault.path("renamed/moved")}), "");
}

std::string ModeString(const std::string& path) {
  char mode[16];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(ModeOf(path)));
  return mode;
}

// Creates files, FIFOs and directories under `root`, in a directory with a default ACL and in
// one without, under umasks of 077 and 027. "" on success, else what failed.
std::string CreateInheritanceTree(const std::string& root) {
  const std::string with = root + "/with", without = root + "/without";
  if (::mkdir(with.c_str(), 0750) != 0 || ::mkdir(without.c_str(), 0755) != 0) return "mkdir";
  const std::string set = Setfacl({"-d", "-m", "u:65534:rwx,g:100:r-x,o::r", with});
  if (!set.empty()) return set;
  auto create = [](const std::string& path, mode_t mode) {
    const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, mode);
    if (fd >= 0) ::close(fd);
    return fd >= 0;
  };
  {
    ScopedUmask mask(077);  // ignored where a default ACL is inherited
    for (const std::string& dir : {with, without}) {
      if (!create(dir + "/file", 0666) || !create(dir + "/tool", 0750)) return "create";
      if (::mkdir((dir + "/sub").c_str(), 0777) != 0) return "mkdir sub";
      if (::mkfifo((dir + "/fifo").c_str(), 0666) != 0) return "mkfifo";
    }
    // Inherited again one level down.
    if (::mkdir((with + "/sub/deeper").c_str(), 0700) != 0) return "mkdir deeper";
    if (!create(with + "/sub/deeper/file", 0640)) return "create deeper";
  }
  {
    ScopedUmask mask(027);
    if (!create(without + "/masked", 0666)) return "create masked";
    if (::mkdir((without + "/maskeddir").c_str(), 0777) != 0) return "mkdir maskeddir";
  }
  return "";
}

// Mode and ACL of everything CreateInheritanceTree made. FIFOs by mode only: the mount keeps
// no ACL entries on special files (the backing filesystem has no `user.*` attributes there).
std::string DescribeInheritanceTree(const std::string& root) {
  std::string report;
  for (const char* rel :
       {"with", "with/file", "with/tool", "with/sub", "with/sub/deeper", "with/sub/deeper/file",
        "without/file", "without/tool", "without/sub", "without/masked", "without/maskeddir"})
    report += "== " + std::string(rel) + " " + ModeString(root + "/" + rel) + "\n" +
              Getfacl(root + "/" + rel) + "\n";
  for (const char* rel : {"with/fifo", "without/fifo"})
    report += "== " + std::string(rel) + " " + ModeString(root + "/" + rel) + "\n";
  return report;
}

TEST_F(MountAclTest, DefaultAclsAreInheritedAndTheUmaskAppliesOnlyWithoutThem) {
  test::MountedVault vault;
  ASSERT_EQ(CreateInheritanceTree(vault.plain()), "");
  const std::string report = DescribeInheritanceTree(vault.plain());
  // The access ACL is the default ACL masked by the mode asked for (posix_acl_create), the mode
  // follows it, and the umask (077) plays no part.
  EXPECT_NE(report.find("== with/file 0664\nuser::rw-\nuser:65534:rwx\ngroup::r-x\n"
                        "group:100:r-x\nmask::rw-\nother::r--\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("== with/sub 0774\nuser::rwx\nuser:65534:rwx\ngroup::r-x\ngroup:100:r-x\n"
                        "mask::rwx\nother::r--\ndefault:user::rwx\ndefault:user:65534:rwx\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("== with/sub/deeper/file 0640\nuser::rw-\nuser:65534:rwx\n"),
            std::string::npos)
      << report;
  // A FIFO cannot keep the named entries (the backing filesystem has no `user.*` attributes on
  // special files): its group bits are what the owning group may do (r-x masked by rw-), not
  // the mask, which would give the group what only the named entries had.
  EXPECT_NE(report.find("== with/fifo 0644\n"), std::string::npos) << report;
  // Without a default ACL the umask applies: 0666 & ~077, 0777 & ~027.
  EXPECT_NE(report.find("== without/file 0600\nuser::rw-\ngroup::---\nother::---\n"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("== without/maskeddir 0750\n"), std::string::npos) << report;
  EXPECT_NE(report.find("== without/fifo 0600\n"), std::string::npos) << report;
  vault.Remount();
  EXPECT_EQ(DescribeInheritanceTree(vault.plain()), report);
  // The same steps on the local filesystem give the same answers.
  Reference ext;
  SIGILFS_NEEDS(ext.available(), "the temporary directory's filesystem has no ACLs");
  ASSERT_EQ(CreateInheritanceTree(ext.root()), "");
  // ext4 keeps the FIFO's ACL, so its mode shows the mask (0664); the rest is the same.
  std::string on_ext4 = DescribeInheritanceTree(ext.root());
  const size_t fifo = on_ext4.find("== with/fifo 0664\n");
  ASSERT_NE(fifo, std::string::npos) << on_ext4;
  on_ext4.replace(fifo, 18, "== with/fifo 0644\n");
  EXPECT_EQ(on_ext4, report);
}

TEST_F(MountAclTest, ChmodMovesTheMaskAndEquivalentAclsAreJustModeBits) {
  test::MountedVault vault;
  const std::string f = vault.path("file"), d = vault.path("dir");
  std::ofstream(f) << "x";
  ASSERT_EQ(::chmod(f.c_str(), 0644), 0);
  ASSERT_EQ(Setfacl({"-m", "u:65534:rwx,g:100:rw", f}), "");
  EXPECT_EQ(ModeOf(f), 0674u);
  // chmod sets the mask (not the owning group's entry); the named entries stay.
  ASSERT_EQ(::chmod(f.c_str(), 0640), 0);
  const std::string after =
      "user::rw-\nuser:65534:rwx\ngroup::r--\ngroup:100:rw-\nmask::r--\nother::---";
  EXPECT_EQ(Getfacl(f), after);
  test::ProcessResult effective = test::RunProcess({kGetfacl, "-c", "-n", f});
  EXPECT_NE(effective.out.find("user:65534:rwx\t#effective:r--"), std::string::npos)
      << effective.out;
  vault.Remount();
  EXPECT_EQ(Getfacl(f), after);
  EXPECT_EQ(ModeOf(f), 0640u);
  ASSERT_EQ(::chmod(f.c_str(), 0770), 0);
  EXPECT_EQ(Getfacl(f),
            "user::rwx\nuser:65534:rwx\ngroup::r--\ngroup:100:rw-\nmask::rwx\nother::---");

  // setfacl -b: the base entries remain, as mode bits only (group from the owning group's entry).
  ASSERT_EQ(Setfacl({"-b", f}), "");
  EXPECT_EQ(Getfacl(f), "user::rwx\ngroup::r--\nother::---");
  EXPECT_EQ(ModeOf(f), 0740u);
  EXPECT_FALSE(HasXattr(f, kAccess));
  // An ACL the mode says in full is not stored: it sets the mode.
  ASSERT_EQ(Setfacl({"-m", "u::rw,g::r,o::r", f}), "");
  EXPECT_EQ(ModeOf(f), 0644u);
  EXPECT_FALSE(HasXattr(f, kAccess));
  // Directories: chmod moves the mask of the access ACL and leaves the default ACL alone.
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  ASSERT_EQ(Setfacl({"-m", "u:65534:rwx", "-m", "d:u:65534:rwx", d}), "");
  ASSERT_EQ(::chmod(d.c_str(), 0700), 0);
  EXPECT_EQ(Getfacl(d),
            "user::rwx\nuser:65534:rwx\ngroup::r-x\nmask::---\nother::---\n"
            "default:user::rwx\ndefault:user:65534:rwx\ndefault:group::r-x\ndefault:mask::rwx\n"
            "default:other::r-x");
  // -k removes the default ACL, -b the rest.
  ASSERT_EQ(Setfacl({"-k", d}), "");
  EXPECT_FALSE(HasXattr(d, kDefault));
  ASSERT_EQ(Setfacl({"-b", d}), "");
  EXPECT_EQ(XattrNames(d), std::vector<std::string>{});
  EXPECT_EQ(ModeOf(d), 0700u);  // the owning group's entry was masked to nothing
  // Removing an ACL that is not there is no error, as on ext4.
  EXPECT_EQ(::removexattr(d.c_str(), kDefault), 0);
  EXPECT_EQ(::removexattr(f.c_str(), kAccess), 0);

  Reference ext;
  if (!ext.available()) return;
  // The same chmod and setfacl -b on the local filesystem.
  const std::string g = ext.root() + "/file";
  std::ofstream(g) << "x";
  ASSERT_EQ(::chmod(g.c_str(), 0644), 0);
  ASSERT_EQ(Setfacl({"-m", "u:65534:rwx,g:100:rw", g}), "");
  ASSERT_EQ(::chmod(g.c_str(), 0640), 0);
  EXPECT_EQ(Getfacl(g), after);
  ASSERT_EQ(::chmod(g.c_str(), 0770), 0);
  ASSERT_EQ(Setfacl({"-b", g}), "");
  EXPECT_EQ(ModeOf(g), 0740u);
}

// An exclusive mount remembers which files and directories have no ACL (`ls -l` asks for each
// file's, a create for its directory's default one) and answers without the store: whatever it
// learned, by asking or by making the entry, never hides an ACL set later, on the entry or on
// its directory, nor one another thread sets while it is asked for.
TEST_F(MountAclTest, KnowingThatAnAclIsNotThereNeverHidesOneSetLaterOrConcurrently) {
  test::MountedVault vault;
  const std::string d = vault.path("d"), f1 = vault.path("d/f1"), f2 = vault.path("d/f2");
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  std::ofstream(f1) << "1";  // d now known to have no default ACL, f1 no ACL at all
  char buf[256];
  EXPECT_EQ(::getxattr(f1.c_str(), kAccess, buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENODATA);
  EXPECT_EQ(::getxattr(d.c_str(), kDefault, buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENODATA);
  // On the file itself.
  ASSERT_EQ(Setfacl({"-m", "u:65534:r", f1}), "");
  EXPECT_NE(Getfacl(f1).find("user:65534:r--"), std::string::npos) << Getfacl(f1);
  ASSERT_EQ(Setfacl({"-b", f1}), "");
  EXPECT_EQ(::getxattr(f1.c_str(), kAccess, buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENODATA);
  ASSERT_EQ(Setfacl({"-m", "u::rw,g::r,o::-", f1}), "");  // one the mode says: not stored
  EXPECT_EQ(ModeOf(f1), 0640u);
  ASSERT_EQ(Setfacl({"-m", "u:65534:rw", f1}), "");
  EXPECT_NE(Getfacl(f1).find("user:65534:rw-"), std::string::npos) << Getfacl(f1);
  ASSERT_EQ(::chmod(f1.c_str(), 0600), 0);  // the mask follows: the ACL is read, not assumed away
  EXPECT_NE(Getfacl(f1).find("mask::---"), std::string::npos) << Getfacl(f1);
  // On its directory: a default ACL set after creates there is inherited by the next one.
  ASSERT_EQ(Setfacl({"-d", "-m", "u:65534:rwx", d}), "");
  std::ofstream(f2) << "2";
  EXPECT_NE(Getfacl(f2).find("user:65534:rwx"), std::string::npos) << Getfacl(f2);
  ASSERT_EQ(::mkdir((d + "/sub").c_str(), 0755), 0);
  EXPECT_NE(Getfacl(d + "/sub").find("default:user:65534:rwx"), std::string::npos);
  ASSERT_EQ(Setfacl({"-k", d}), "");
  std::ofstream(d + "/f3") << "3";
  EXPECT_EQ(::getxattr((d + "/f3").c_str(), kAccess, buf, sizeof buf), -1);
  EXPECT_EQ(errno, ENODATA);
  // Another thread asks all along while this one sets and removes: once a set has returned,
  // every answer shows the ACL.
  std::atomic<bool> stop{false};
  std::thread asker([&] {
    char b[256];
    while (!stop.load()) (void)::getxattr(f1.c_str(), kAccess, b, sizeof b);
  });
  int hidden = 0;
  for (int round = 0; round < 40; ++round) {
    ASSERT_EQ(Setfacl({"-m", "u:65534:r", f1}), "");
    for (int look = 0; look < 5; ++look)
      hidden += ::getxattr(f1.c_str(), kAccess, buf, sizeof buf) > 0 ? 0 : 1;
    ASSERT_EQ(Setfacl({"-b", f1}), "");
  }
  stop.store(true);
  asker.join();
  EXPECT_EQ(hidden, 0);
}

TEST_F(MountAclTest, TheCipherDirectoryHoldsNoAclInClear) {
  test::MountedVault vault;
  const std::string f = vault.path("file"), d = vault.path("dir");
  std::ofstream(f) << "x";
  ASSERT_EQ(::mkdir(d.c_str(), 0755), 0);
  const std::string value = NamedReadAcl(kMarkerUid);
  ASSERT_EQ(SetRaw(f, kAccess, value), 0);
  ASSERT_EQ(SetRaw(d, kDefault, value), 0);
  ASSERT_EQ(SetRaw(d, kAccess, value), 0);
  std::string back(256, '\0');
  back.resize(static_cast<size_t>(::getxattr(f.c_str(), kAccess, back.data(), back.size())));
  EXPECT_EQ(back, value);
  vault.Unmount();
  const std::string marker = value.substr(12, 8);  // the named entry: tag, perm, uid
  int seen = 0;
  for (const auto& e : fs::recursive_directory_iterator(vault.cipher())) {
    const std::string path = e.path().string();
    for (const std::string& name : XattrNames(path)) {
      EXPECT_EQ(name.find("posix_acl"), std::string::npos) << path << " " << name;
      EXPECT_NE(name.rfind("system.", 0), 0u) << path << " " << name;
      std::string raw(65536, '\0');
      const ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), raw.data(), raw.size());
      ASSERT_GE(n, 0) << path << " " << name;
      raw.resize(static_cast<size_t>(n));
      EXPECT_EQ(raw.find(marker), std::string::npos) << path << " " << name;
      if (name != core::kDirIvAttrName) ++seen;  // a directory's IV copy is no ACL
    }
  }
  EXPECT_EQ(seen, 3) << "one sealed attribute per ACL";
}

TEST_F(MountAclTest, NoxattrMountsHaveNoAcls) {
  test::MountedVault vault({"-o", "noxattr"});
  const std::string f = vault.path("file");
  std::ofstream(f) << "x";
  EXPECT_EQ(SetRaw(f, kAccess, NamedReadAcl(kNobody)), EOPNOTSUPP);
  EXPECT_NE(Setfacl({"-m", "u:65534:r", f}), "");
  // The kernel applies the umask itself then.
  ScopedUmask mask(027);
  ASSERT_EQ(::mkdir(vault.path("dir").c_str(), 0777), 0);
  EXPECT_EQ(ModeOf(vault.path("dir")), 0750u);
}

// Without ACLs, copying tools still set one on every file (the mode as an ACL) and remove every
// directory's default ACL: an ACL the mode says in full is that mode, removing one finds none,
// so `cp -a` keeps every mode without a warning (it would chmod after a refusal, one request
// more per file, and report a refused removal as an error).
TEST_F(MountAclTest, WithoutAclsAModeAsAnAclIsTheModeAndCopiesKeepModesQuietly) {
  test::MountedVault vault({"-o", "noacl"});
  const std::string f = vault.path("file");
  std::ofstream(f) << "x";
  // user::r-x group::-w- other::--x
  EXPECT_EQ(SetRaw(f, kAccess, test::AclXattr({{0x01, 5}, {0x04, 2}, {0x20, 1}})), 0);
  EXPECT_EQ(ModeOf(f), 0521u);
  EXPECT_FALSE(HasXattr(f, kAccess));
  EXPECT_EQ(::removexattr(f.c_str(), kAccess), -1);
  EXPECT_EQ(errno, ENODATA);

  test::TempDir src;
  fs::create_directories(src.path() / "t" / "sub");
  std::ofstream(src.path() / "t" / "a") << "a";
  std::ofstream(src.path() / "t" / "sub" / "b") << "b";
  fs::permissions(src.path() / "t" / "a", static_cast<fs::perms>(0640));
  fs::permissions(src.path() / "t" / "sub", static_cast<fs::perms>(0710));
  const test::ProcessResult r =
      test::RunProcess({"/bin/cp", "-a", (src.path() / "t").string(), vault.path("t")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(ModeOf(vault.path("t/a")), 0640u);
  EXPECT_EQ(ModeOf(vault.path("t/sub")), 0710u);
  EXPECT_EQ(test::ReadAll(vault.path("t/sub/b")), "b");
}

// With ACLs checked by the kernel, it fetches a directory's attributes again after every entry
// made in it (default_permissions needs fresh ones): one request per file created. A mount
// whose kernel checks no permission keeps ACLs (stored, inherited, shown) without that cost;
// default_permissions, allow_other or -o acl bring the kernel's checks, and the requests.
TEST_F(MountAclTest, OnlyMountsThatCheckPermissionsPayAGetattrPerNewFile) {
  for (const auto& [options, checked] : std::vector<std::pair<std::vector<std::string>, bool>>{
           {{}, false}, {{"-o", "default_permissions"}, true}, {{"-o", "acl"}, true}}) {
    test::TempDir out;
    const std::string stats = (out.path() / "s.json").string();
    std::vector<std::string> args = options;
    args.insert(args.end(), {"--stats-file", stats});
    test::MountedVault vault(args);
    ASSERT_TRUE(fs::create_directory(vault.path("d")));
    const long long before = test::StatsCounter(test::RequestStats(vault.pid(), stats), "getattrs");
    for (int i = 0; i < 40; ++i) std::ofstream(vault.path("d/f" + std::to_string(i))) << i;
    const long long made =
        test::StatsCounter(test::RequestStats(vault.pid(), stats), "getattrs") - before;
    const std::string what = options.empty() ? "(no options)" : options[1];
    if (checked)
      EXPECT_GE(made, 40) << what;
    else
      EXPECT_LT(made, 10) << what;
    // ACLs work either way.
    EXPECT_EQ(SetRaw(vault.path("d/f0"), kAccess, NamedReadAcl(kNobody)), 0) << what;
    EXPECT_TRUE(HasXattr(vault.path("d/f0"), kAccess)) << what;
  }
}

// ACLs are on unless -o noacl turns them off; `user.*` attributes work either way.
TEST_F(MountAclTest, NoaclTurnsAclsOffAndKeepsAttributes) {
  struct Case {
    std::vector<std::string> options;
    bool acls;
  };
  for (const Case& c :
       {Case{{}, true}, Case{{"-o", "noacl"}, false}, Case{{"-o", "noacl,acl"}, true},
        Case{{"-o", "default_permissions,noacl"}, false}}) {
    test::MountedVault vault(c.options);
    const std::string what = c.options.empty() ? "(no options)" : c.options[1];
    const std::string f = vault.path("file");
    std::ofstream(f) << "x";
    EXPECT_EQ(SetRaw(f, kAccess, NamedReadAcl(kNobody)), c.acls ? 0 : EOPNOTSUPP) << what;
    EXPECT_EQ(::setxattr(f.c_str(), "user.k", "v", 1, 0), 0) << what;
  }
}

// As another user, through a root-run mount with allow_other: the kernel checks named entries
// (with or without default_permissions: ACLs turn it on), and only the owner may set ACLs.
class MountAclOtherUserTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS(AclToolsPresent(), "no setfacl/getfacl (Debian package acl)");
    SIGILFS_NEEDS_ROOT("needs root (to serve another user)");
    vault_ = std::make_unique<test::MountedVault>(std::vector<std::string>{"-o", GetParam()});
    fs::permissions(fs::path(vault_->plain()).parent_path(), fs::perms::others_exec,
                    fs::perm_options::add);
  }

  std::unique_ptr<test::MountedVault> vault_;
};

TEST_P(MountAclOtherUserTest, NamedEntriesAreEnforced) {
  const std::string granted = vault_->path("granted"), denied = vault_->path("denied");
  std::ofstream(granted) << "for nobody too";
  std::ofstream(denied) << "for everyone but nobody";
  ASSERT_EQ(::chmod(granted.c_str(), 0600), 0);
  ASSERT_EQ(::chmod(denied.c_str(), 0644), 0);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(granted, O_RDONLY); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(denied, O_RDONLY); }), 0);
  ASSERT_EQ(Setfacl({"-m", "u:65534:r", granted}), "");
  ASSERT_EQ(Setfacl({"-m", "u:65534:---", denied}), "");
  EXPECT_EQ(AsNobody([&] { return OpenErrno(granted, O_RDONLY); }), 0);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(granted, O_WRONLY); }), EACCES);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(denied, O_RDONLY); }), EACCES);
  // The mask limits the named entry: chmod g-r takes nobody's read away.
  ASSERT_EQ(::chmod(granted.c_str(), 0600), 0);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(granted, O_RDONLY); }), EACCES);
  ASSERT_EQ(::chmod(granted.c_str(), 0640), 0);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(granted, O_RDONLY); }), 0);

  // Inherited: a private directory whose default ACL lets nobody in.
  const std::string shared = vault_->path("shared");
  ASSERT_EQ(::mkdir(shared.c_str(), 0700), 0);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(shared + "/x", O_CREAT | O_WRONLY); }), EACCES);
  ASSERT_EQ(Setfacl({"-m", "u:65534:rwx", "-m", "d:u:65534:rwx", shared}), "");
  {
    ScopedUmask mask(077);
    std::ofstream(shared + "/made by root") << "x";
  }
  EXPECT_EQ(AsNobody([&] { return OpenErrno(shared + "/made by root", O_RDWR); }), 0);
  EXPECT_EQ(AsNobody([&] { return OpenErrno(shared + "/by nobody", O_CREAT | O_WRONLY); }), 0);
  struct stat st {};
  ASSERT_EQ(::stat((shared + "/by nobody").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);

  // Only the owner (or CAP_FOWNER) sets ACLs.
  EXPECT_EQ(AsNobody([&] { return SetRaw(granted, kAccess, NamedReadAcl(kNobody)); }), EPERM);
  EXPECT_EQ(AsNobody([&] { return ErrnoOf(::removexattr(granted.c_str(), kAccess)); }), EPERM);
  EXPECT_EQ(AsNobody([&] { return SetRaw(shared + "/by nobody", kAccess, NamedReadAcl(0)); }), 0);
}

TEST_P(MountAclOtherUserTest, SettingAnAclDropsSetgidForOwnersOutsideTheGroup) {
  const std::string f = vault_->path("setgid");
  std::ofstream(f) << "x";
  ASSERT_EQ(::chown(f.c_str(), kNobody, kUsers), 0);
  ASSERT_EQ(::chmod(f.c_str(), 02770), 0);
  EXPECT_EQ(AsNobody([&] { return SetRaw(f, kAccess, NamedReadAcl(0)); }), 0);
  EXPECT_EQ(ModeOf(f), 0644u);  // the mask became the group bits, and set-group-ID went
  // Root may keep it.
  ASSERT_EQ(::chmod(f.c_str(), 02770), 0);
  ASSERT_EQ(SetRaw(f, kAccess, NamedReadAcl(0)), 0);
  EXPECT_EQ(ModeOf(f), 02644u);
}

INSTANTIATE_TEST_SUITE_P(Mounts, MountAclOtherUserTest,
                         ::testing::Values("allow_other,default_permissions", "allow_other"),
                         [](const auto& info) {
                           return std::string(info.index == 0 ? "DefaultPermissions"
                                                              : "WithoutDefaultPermissions");
                         });

}  // namespace
}  // namespace sigilfs
