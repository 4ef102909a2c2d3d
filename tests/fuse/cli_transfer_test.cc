// End-to-end tests of `sigilfs import` and `sigilfs export`: a plain tree imported into a vault
// reads back identical (exported again, or through a mount), damaged files are named and left
// out, existing entries are only replaced with --force.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "sigilfs/core/names.h"
#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/encoding.h"
#include "test_support/acls.h"
#include "test_support/cipher_path.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"
#include "test_support/tree_snapshot.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;
using test::Snapshot;

constexpr char kPassphrase[] = "hunter2";

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

void WriteFile(const fs::path& p, const std::vector<uint8_t>& data, mode_t mode) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << p;
  ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  ::close(fd);
  ASSERT_EQ(::chmod(p.c_str(), mode), 0);
}

void SetXattr(const fs::path& p, const std::string& name, const std::string& value) {
  ASSERT_EQ(::lsetxattr(p.c_str(), name.c_str(), value.data(), value.size(), 0), 0)
      << p << " " << name << ": errno " << errno;
}

void SetTimes(const fs::path& p, struct timespec atime, struct timespec mtime) {
  const struct timespec ts[2] = {atime, mtime};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, AT_SYMLINK_NOFOLLOW), 0) << p;
}

bool Root() { return ::geteuid() == 0; }

// Names of entries anywhere under `dir` that start with `prefix`.
std::vector<std::string> Leftovers(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().string());
  return found;
}

const std::string kUnicodeName =
    "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac.txt";
std::string LongUnicodeName() {  // 85 three-byte characters: 255 bytes
  std::string s;
  for (int i = 0; i < 85; ++i) s += "\xe6\x97\xa5";
  return s;
}

class CliTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(Pass()) << kPassphrase << "\n";
    ProcessResult r = Sigilfs({"init", Vault(), "--kdf", "test", "--passfile", Pass()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  ProcessResult Sigilfs(std::vector<std::string> args) {
    args.insert(args.begin(), SIGILFS_BINARY);
    return RunProcess(args);
  }
  ProcessResult Import(const std::string& source, std::vector<std::string> extra = {},
                       const std::string& vault = "") {
    std::vector<std::string> args = {"import", vault.empty() ? Vault() : vault, source};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--passfile", Pass()});
    return Sigilfs(args);
  }
  ProcessResult Export(const std::string& path, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"export", Vault(), path};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--passfile", Pass()});
    return Sigilfs(args);
  }

  fs::path Tmp(const std::string& rel) const { return tmp_.path() / rel; }
  std::string Pass() const { return Tmp("pw").string(); }
  std::string Vault() const { return Tmp("vault").string(); }

  // The cipher path of vault entry `path`, through the library.
  std::string CipherPath(const std::string& path) {
    auto vault = core::Vault::Unlock(Vault(), AsBytes(kPassphrase));
    EXPECT_TRUE(vault.ok()) << vault.status().ToString();
    if (!vault.ok()) return "";
    auto volume = core::Volume::Open(std::move(vault).value(), core::VolumeOptions{});
    EXPECT_TRUE(volume.ok());
    if (!volume.ok()) return "";
    return test::CipherPathOf(**volume, path);
  }

  // A tree with every kind of entry, name and attribute the vault keeps.
  void BuildTree(const fs::path& t) {
    fs::create_directories(t / "a" / "b" / "c");
    fs::create_directories(t / "ro");
    fs::create_directories(t / "shared");
    fs::create_directories(t / LongUnicodeName());
    WriteFile(t / "big.bin", test::Pattern(3 << 20, 1), 0644);
    WriteFile(t / "empty", {}, 0600);
    WriteFile(t / "odd.bin", test::Pattern((1 << 20) + 12345, 2), 0640);
    WriteFile(t / "small.txt", test::Pattern(4095, 3), 0444);
    WriteFile(t / "tool", test::Pattern(70, 4), 0755);
    WriteFile(t / "a" / "b" / "c" / "deep.txt", test::Pattern(5000, 5), 0640);
    WriteFile(t / "a" / kUnicodeName, test::Pattern(77, 6), 0644);
    WriteFile(t / "a" / std::string(255, 'x'), test::Pattern(300, 7), 0600);
    WriteFile(t / LongUnicodeName() / "inner", test::Pattern(10, 8), 0644);
    WriteFile(t / "ro" / "kept", test::Pattern(20, 9), 0644);
    WriteFile(t / "hard1", test::Pattern(9000, 10), 0640);
    fs::create_hard_link(t / "hard1", t / "a" / "hard2");
    fs::create_symlink("a/b/c/deep.txt", t / "link");
    fs::create_symlink("/nowhere/" + std::string(200, 'q'), t / "a" / "dangling");
    ASSERT_EQ(::mkfifo((t / "fifo").c_str(), 0640), 0);
    ASSERT_EQ(::mknod((t / "sock").c_str(), S_IFSOCK | 0600, 0), 0);

    const fs::path deep = t / "a" / "b" / "c" / "deep.txt";
    SetXattr(deep, "user.comment", "hello");
    SetXattr(deep, "user.empty", "");
    SetXattr(deep, "user.binary", std::string("\0\x01\xff zero\0", 9) + std::string(300, 'v'));
    SetXattr(deep, "user." + std::string(250, 'n'), "long name");
    SetXattr(t / "a", "user.dir", "yes");
    SetXattr(t / "big.bin", "user.big", std::string(2000, 'b'));

    if (Root()) {
      ASSERT_EQ(::lchown((t / "tool").c_str(), 1234, 5678), 0);
      ASSERT_EQ(::chmod((t / "tool").c_str(), 04755), 0);  // after the chown, which clears it
      ASSERT_EQ(::lchown((t / "link").c_str(), 4321, 8765), 0);
      ASSERT_EQ(::lchown((t / "shared").c_str(), 1111, 2222), 0);
    }
    ASSERT_EQ(::chmod((t / "shared").c_str(), 02775), 0);
    ASSERT_EQ(::chmod((t / "a" / "b").c_str(), 0750), 0);
    ASSERT_EQ(::chmod((t / "a" / "b" / "c").c_str(), 0700), 0);

    // Distinct times with nanoseconds on everything, directories last (entries change them).
    std::vector<fs::path> all = {t};
    for (const auto& e : fs::recursive_directory_iterator(t)) all.push_back(e.path());
    std::sort(all.begin(), all.end(), std::greater<>());
    for (size_t i = 0; i < all.size(); ++i) {
      const auto n = static_cast<long>(i);
      SetTimes(all[i], {1500000000 + n * 7, n * 11}, {1000000000 + n * 1000, 123456789 - n});
    }
    ASSERT_EQ(::chmod((t / "ro").c_str(), 0555), 0);  // changes the ctime only
  }

  test::TempDir tmp_;
};

TEST_F(CliTransferTest, ImportThenExportGivesTheSameTree) {
  const fs::path src = Tmp("src/tree");
  BuildTree(src);
  const auto before = Snapshot(src);
  // Reading it moved its access time: a distinctive one again, kept through import and export.
  struct stat orig;
  ASSERT_EQ(::lstat((src / "big.bin").c_str(), &orig), 0);
  orig.st_atim = {1234567890, 987654321};
  SetTimes(src / "big.bin", orig.st_atim, orig.st_mtim);

  ProcessResult r = Import(src.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Snapshot(src), before);  // the source is left alone
  EXPECT_EQ(Leftovers(Vault(), ".sigilfs.new."), std::vector<std::string>{});

  fs::create_directories(Tmp("out"));
  r = Export("tree", {Tmp("out/tree").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
  // Access times (checked before anything reads the exported files).
  struct stat st;
  ASSERT_EQ(::lstat(Tmp("out/tree/big.bin").c_str(), &st), 0);
  EXPECT_EQ(st.st_atim.tv_sec, orig.st_atim.tv_sec);
  EXPECT_EQ(st.st_atim.tv_nsec, orig.st_atim.tv_nsec);

  EXPECT_EQ(Snapshot(Tmp("out/tree")), before);
  EXPECT_EQ(Leftovers(Tmp("out"), ".sigilfs-export."), std::vector<std::string>{});
  r = Sigilfs({"fsck", Vault(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 0) << r.out;

  // The whole vault, and without ownership.
  r = Export(".", {Tmp("whole").string(), "--no-owner"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto whole = Snapshot(Tmp("whole/tree"));
  if (Root()) {
    ASSERT_EQ(::lstat(Tmp("whole/tree/tool").c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, ::geteuid());
    EXPECT_EQ(st.st_mode & 07777, 04755u);
    EXPECT_NE(whole, before);
  } else {
    EXPECT_EQ(whole, before);
  }
}

TEST_F(CliTransferTest, ImportedTreeReadsTheSameThroughAMount) {
  SIGILFS_NEEDS_FUSE();
  const fs::path src = Tmp("src/tree");
  BuildTree(src);
  const auto before = Snapshot(src);
  test::MountedVault v;
  v.Unmount();
  ProcessResult r = Sigilfs({"import", v.cipher(), src.string(), "--passfile", v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v.Mount();
  EXPECT_EQ(Snapshot(v.path("tree")), before);
  // Files written through the mount come out again.
  WriteFile(v.path("tree/new.bin"), test::Pattern(100000, 11), 0600);
  v.Unmount();
  r = Sigilfs({"export", v.cipher(), "tree/new.bin", "-", "--passfile", v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto expect = test::Pattern(100000, 11);
  EXPECT_EQ(r.out, std::string(expect.begin(), expect.end()));
}

TEST_F(CliTransferTest, ExportOfOneFileToStandardOutput) {
  const auto data = test::Pattern((2 << 20) + 777, 21);
  WriteFile(Tmp("f.bin"), data, 0644);
  ASSERT_EQ(Import(Tmp("f.bin").string(), {"docs/f.bin"}).exit_code, 1);  // no docs/ yet
  fs::create_directories(Tmp("docs"));
  ASSERT_EQ(Import(Tmp("docs").string()).exit_code, 0);
  ProcessResult r = Import(Tmp("f.bin").string(), {"docs"});  // into an existing directory
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Export("docs/f.bin", {"-"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, std::string(data.begin(), data.end()));
  r = Export("docs", {"-"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("docs is not a regular file"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  r = Export("docs/missing", {"-"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("docs/missing: No such file or directory"), std::string::npos) << r.err;
}

TEST_F(CliTransferTest, TamperedFileIsNamedAndTheRestExported) {
  const fs::path src = Tmp("src/tree");
  BuildTree(src);
  auto expect = Snapshot(src);
  ASSERT_EQ(Import(src.string()).exit_code, 0);

  // A flipped byte in page 1 of odd.bin (aes-256-gcm units: 12-byte nonce, 16-byte tag).
  const std::string cipher = CipherPath("tree/odd.bin");
  ASSERT_FALSE(cipher.empty());
  const int fd = ::open(cipher.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const off_t at = static_cast<off_t>(core::PageGeometry(12).UnitOffset(1) + 100);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, at), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
  ::close(fd);

  ProcessResult r = Export("tree", {Tmp("out").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("sigilfs: tree/odd.bin: authentication failed"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(Tmp("out/odd.bin"))));  // never a partial file
  expect.erase("odd.bin");
  EXPECT_EQ(Snapshot(Tmp("out")), expect);
  EXPECT_EQ(Leftovers(Tmp("out"), ".sigilfs-export."), std::vector<std::string>{});

  r = Export("tree/odd.bin", {"-"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_EQ(r.out.size(), 4096u);  // the good page before the bad one
}

TEST_F(CliTransferTest, DamagedNamesTargetsAndHardLinksAreReported) {
  fs::create_directories(Tmp("t/sub"));
  WriteFile(Tmp("t/good"), test::Pattern(10, 1), 0644);
  WriteFile(Tmp("t/renamed"), test::Pattern(10, 2), 0644);
  WriteFile(Tmp("t/sub/one"), test::Pattern(10000, 3), 0644);
  fs::create_hard_link(Tmp("t/sub/one"), Tmp("t/two"));
  fs::create_symlink("good", Tmp("t/link"));
  ASSERT_EQ(Import(Tmp("t").string()).exit_code, 0);

  const fs::path renamed = CipherPath("t/renamed");
  const std::string garbage = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
  fs::rename(renamed, renamed.parent_path() / garbage);
  const fs::path link = CipherPath("t/link");
  fs::remove(link);
  fs::create_symlink("not-an-encrypted-target", link);
  const std::string one = CipherPath("t/sub/one");
  ASSERT_EQ(::truncate(one.c_str(), 100), 0);

  ProcessResult r = Export("t", {Tmp("out").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 4u) << r.err;
  EXPECT_NE(r.err.find("sigilfs: t/" + garbage + " (stored name): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sigilfs: t/link: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sigilfs: t/sub/one: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sigilfs: t/two: corrupt: not exported: the same file as t/sub/one"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(test::ReadAll(Tmp("out/good")), test::ReadAll(Tmp("t/good")));
  std::set<std::string> names;
  for (const auto& e : fs::recursive_directory_iterator(Tmp("out")))
    names.insert(fs::relative(e.path(), Tmp("out")).string());
  EXPECT_EQ(names, (std::set<std::string>{"good", "sub"}));
}

TEST_F(CliTransferTest, ExistingEntriesAreReplacedOnlyWithForce) {
  fs::create_directories(Tmp("one"));
  fs::create_directories(Tmp("two"));
  const auto a = test::Pattern(50000, 1), b = test::Pattern(7000, 2);
  WriteFile(Tmp("one/f"), a, 0644);
  WriteFile(Tmp("two/f"), b, 0600);
  WriteFile(Tmp("two/extra"), b, 0600);
  ASSERT_EQ(Import(Tmp("one").string(), {"d"}).exit_code, 0);
  const std::string cipher_before = CipherPath("d/f");
  struct stat old_inode;
  ASSERT_EQ(::stat(cipher_before.c_str(), &old_inode), 0);

  // A file over a file.
  ProcessResult r = Import(Tmp("two/f").string(), {"d/f"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("already exists: d/f (--force replaces it)"), std::string::npos) << r.err;
  EXPECT_EQ(Export("d/f", {"-"}).out, std::string(a.begin(), a.end()));
  r = Import(Tmp("two/f").string(), {"d/f", "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Export("d/f", {"-"}).out, std::string(b.begin(), b.end()));
  struct stat new_inode;
  ASSERT_EQ(::stat(CipherPath("d/f").c_str(), &new_inode), 0);
  EXPECT_NE(new_inode.st_ino, old_inode.st_ino);  // a new file renamed over the old one
  EXPECT_EQ(new_inode.st_mode & 07777, 0600u);

  // A directory over a directory: merged with --force, refused without.
  r = Import(Tmp("two").string(), {"d2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Import(Tmp("two").string(), {"d2"});  // d2 exists: imported into it, as d2/two
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Import(Tmp("two").string(), {"d2"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists: d2/two"), std::string::npos) << r.err;
  r = Import(Tmp("one/.").string(), {"d2"});  // contents of one/ merged into d2: f collides
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already exists: d2/f"), std::string::npos) << r.err;
  r = Import(Tmp("one/.").string(), {"d2", "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Export("d2/f", {"-"}).out, std::string(a.begin(), a.end()));
  EXPECT_EQ(Export("d2/extra", {"-"}).out, std::string(b.begin(), b.end()));

  // Never a file over a directory or the other way round, even with --force.
  WriteFile(Tmp("f"), a, 0644);
  r = Import(Tmp("f").string(), {"d2/two", "--force"});  // into d2/two, over its f: fine
  EXPECT_EQ(r.exit_code, 0) << r.err;
  fs::create_directories(Tmp("x/f"));
  r = Import(Tmp("x/f").string(), {"d2/two", "--force"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("d2/two/f exists and is not a directory"), std::string::npos) << r.err;
  fs::create_directories(Tmp("y"));
  WriteFile(Tmp("y/two"), a, 0644);
  r = Import(Tmp("y/two").string(), {"d2", "--force"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("d2/two exists and is a directory"), std::string::npos) << r.err;
  EXPECT_EQ(Leftovers(Vault(), ".sigilfs.new."), std::vector<std::string>{});
  EXPECT_EQ(Sigilfs({"fsck", Vault(), "--passfile", Pass()}).exit_code, 0);

  // Export refuses an existing DEST unless --force.
  fs::create_directories(Tmp("out"));
  WriteFile(Tmp("out/f"), {}, 0644);
  r = Export("d/f", {Tmp("out/f").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  EXPECT_TRUE(test::ReadAll(Tmp("out/f")).empty());
  r = Export("d/f", {Tmp("out/f").string(), "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadAll(Tmp("out/f")), std::string(b.begin(), b.end()));
}

TEST_F(CliTransferTest, ImportOfTheVaultIntoItselfIsRefused) {
  ProcessResult r = Import(Tmp("").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("contains the vault's cipher directory"), std::string::npos) << r.err;
  r = Export(".", {Tmp("vault/plain").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is inside the vault's cipher directory"), std::string::npos) << r.err;
  r = Export(".");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
}

TEST_F(CliTransferTest, ImportGivesTheVaultsOwnFilesToItsOwner) {
  SIGILFS_NEEDS_ROOT("needs root to change owners");
  ASSERT_EQ(::chown(Vault().c_str(), 4242, 4343), 0);
  fs::create_directories(Tmp("t") / std::string(200, 'd'));
  ASSERT_EQ(Import(Tmp("t").string()).exit_code, 0);
  const fs::path dir = CipherPath("t/" + std::string(200, 'd'));
  ASSERT_TRUE(core::NameCodec::IsLongName(dir.filename().string()));
  for (const fs::path& p :
       {dir / core::kDirIvFileName,
        dir.parent_path() / core::NameCodec::SideFileName(dir.filename().string()),
        fs::path(CipherPath("t")) / core::kDirIvFileName}) {
    struct stat st;
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    EXPECT_EQ(st.st_uid, 4242u) << p;
    EXPECT_EQ(st.st_gid, 4343u) << p;
  }
}

TEST_F(CliTransferTest, WrongPassphraseIsOneLine) {
  WriteFile(Tmp("f"), test::Pattern(10, 1), 0644);
  ASSERT_EQ(Import(Tmp("f").string()).exit_code, 0);
  const fs::path bad = Tmp("bad");
  std::ofstream(bad) << "nope\n";
  ProcessResult r = Sigilfs({"import", Vault(), Tmp("f").string(), "g", "--passfile", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n");
  r = Sigilfs({"export", Vault(), "f", Tmp("out").string(), "--passfile", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n");
  EXPECT_FALSE(fs::exists(Tmp("out")));
  r = Sigilfs({"export", Vault(), "f", "-", "--passfile", bad});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Sigilfs({"export", Vault()}).exit_code, 2);
  EXPECT_EQ(Sigilfs({"import"}).exit_code, 2);
}

TEST_F(CliTransferTest, PosixAclsSurviveExportAndImportAsGetfaclShows) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  const std::string team = v.path("team");
  fs::create_directories(team + "/sub");
  WriteFile(team + "/f", test::Pattern(100, 1), 0640);
  WriteFile(team + "/plain", test::Pattern(10, 2), 0600);
  test::Setfacl({"-m", "u:nobody:r--", team + "/f"});  // the group class becomes the mask
  test::Setfacl({"-m", "g:nogroup:rwx", team + "/sub"});
  test::Setfacl({"-d", "-m", "u:nobody:r-x,g:nogroup:r-x", team + "/sub"});
  WriteFile(team + "/sub/inherited", test::Pattern(10, 3), 0644);  // takes sub's default ACL
  ASSERT_EQ(::chmod((team + "/f").c_str(), 0600), 0);  // the mask follows: u:nobody's r is not
  const std::string want = test::AclsOf(team);
  ASSERT_NE(want.find("user:nobody:r--\t#effective:---"), std::string::npos) << want;
  ASSERT_NE(want.find("default:group:nogroup:r-x"), std::string::npos) << want;
  v.Unmount();

  // Exported: getfacl shows the same ACLs, effective rights included.
  ProcessResult r = RunProcess({SIGILFS_BINARY, "export", v.cipher(), "team", Tmp("out").string(),
                                "--passfile", v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::AclsOf(Tmp("out").string()), want);

  // Imported again, under another name: the mount shows them too.
  r = RunProcess({SIGILFS_BINARY, "import", v.cipher(), Tmp("out").string(), "again", "--passfile",
                  v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v.Mount();
  EXPECT_EQ(test::AclsOf(v.path("again")), want);
  v.Unmount();

  // --no-acl, both ways: no entry has more than its mode.
  r = RunProcess({SIGILFS_BINARY, "export", v.cipher(), "team", Tmp("bare").string(), "--no-acl",
                  "--passfile", v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::AclsOf(Tmp("bare").string(), "--skip-base"), "");
  r = RunProcess({SIGILFS_BINARY, "import", v.cipher(), Tmp("out").string(), "bare", "--no-acl",
                  "--passfile", v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  v.Mount();
  EXPECT_EQ(test::AclsOf(v.path("bare"), "--skip-base"), "");
  v.Unmount();

  // Into a mount that keeps no ACLs: each ACL left behind is named, and the exit status is 1.
  test::MountedVault no_acl({"-o", "noacl"});
  r = RunProcess({SIGILFS_BINARY, "export", v.cipher(), "team", no_acl.path("copy"), "--passfile",
                  v.passfile()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("team/f: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("team/sub: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("team/sub/inherited: "), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(no_acl.path("copy/sub/inherited")));
}

}  // namespace
}  // namespace sigilfs
