// End-to-end tests of `sigilfs verity` and `sigilfs fsck`: digests equal what `fsverity digest`
// computes over the same plaintext, tampered pages and damaged names are found, nothing changes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "sigilfs/core/config.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/tree.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/vault_lock.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/crypt/encoding.h"
#include "test_support/cipher_path.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

constexpr char kPassphrase[] = "hunter2";
constexpr char kFsverity[] = "/usr/bin/fsverity";

size_t Lines(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

// The digest field ("sha256:<hex>") of `fsverity digest`'s output line.
std::string DigestField(const std::string& line) { return line.substr(0, line.find(' ')); }

// Flips the lowest bit of the byte at `offset` of `path`.
void FlipByte(const std::string& path, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(offset)), 1);
  b ^= 1;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(offset)), 1);
  ::close(fd);
}

// Every entry under `root` with its type, mode, times and contents (or link target).
std::map<std::string, std::string> Snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    struct stat st;
    if (::lstat(e.path().c_str(), &st) != 0) continue;
    std::string v = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                    std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode)) v += " " + test::ReadAll(e.path());
    if (S_ISLNK(st.st_mode)) v += " -> " + fs::read_symlink(e.path()).string();
    out[fs::relative(e.path(), root).string()] = v;
  }
  return out;
}

class CliVerityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ProcessResult r =
        Sigilfs({"init", Vault(), "--kdf", "test", "--passfile", PassFile("pw", kPassphrase)});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  ProcessResult Sigilfs(std::vector<std::string> args) {
    args.insert(args.begin(), SIGILFS_BINARY);
    return RunProcess(args);
  }
  // `sigilfs <words...> VAULT <rest...> --passfile PASS`.
  ProcessResult Verity(const std::string& cmd, const std::string& path,
                       std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"verity", cmd, Vault(), path, "--passfile", Pass()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Sigilfs(args);
  }
  ProcessResult Fsck(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"fsck", Vault(), "--passfile", Pass()};
    args.insert(args.end(), extra.begin(), extra.end());
    return Sigilfs(args);
  }

  std::string PassFile(const std::string& name, const std::string& contents) {
    const fs::path p = tmp_.path() / name;
    std::ofstream(p) << contents << "\n";
    return p.string();
  }
  std::string Pass() const { return (tmp_.path() / "pw").string(); }
  std::string Vault() const { return (tmp_.path() / "vault").string(); }

  // What `fsverity digest` prints for `data` in a plain file ("sha256:<hex>").
  std::string OracleDigest(const std::vector<uint8_t>& data, const std::string& salt = "") {
    const fs::path plain = tmp_.path() / "plain-copy";
    {
      std::ofstream out(plain, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(data.data()),
                static_cast<std::streamsize>(data.size()));
    }
    std::vector<std::string> args = {kFsverity, "digest", plain.string()};
    if (!salt.empty()) args.push_back("--salt=" + salt);
    ProcessResult r = RunProcess(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.rfind("sha256:", 0), 0u) << r.out;
    return DigestField(r.out);
  }

  // The vault opened through the library, as the daemon opens it.
  std::unique_ptr<core::Volume> Open() {
    auto vault = core::Vault::Unlock(Vault(), AsBytes(kPassphrase));
    EXPECT_TRUE(vault.ok()) << vault.status().ToString();
    if (!vault.ok()) return nullptr;
    auto volume = core::Volume::Open(std::move(vault).value(), core::VolumeOptions{});
    EXPECT_TRUE(volume.ok()) << volume.status().ToString();
    return volume.ok() ? std::move(volume).value() : nullptr;
  }

  // Where vault entry `path` goes, through the library: its directory and name.
  struct At {
    std::unique_ptr<core::Volume> volume;
    std::unique_ptr<core::Tree> tree;
    core::Tree::Located where;
  };
  At Locate(const std::string& path) {
    At at;
    at.volume = Open();
    EXPECT_NE(at.volume, nullptr);
    if (at.volume == nullptr) return at;
    auto tree = core::Tree::Open(*at.volume);
    EXPECT_TRUE(tree.ok()) << tree.status().ToString();
    if (!tree.ok()) return at;
    at.tree = std::move(tree).value();
    auto where = at.tree->Locate(path);
    EXPECT_TRUE(where.ok()) << where.status().ToString();
    if (where.ok()) at.where = std::move(where).value();
    return at;
  }

  // Creates file `path` of the vault holding `data`, through the library.
  void Put(const std::string& path, const std::vector<uint8_t>& data) {
    At at = Locate(path);
    ASSERT_NE(at.where.dir, nullptr);
    auto file = at.tree->CreateFile(*at.where.dir, at.where.name, 0600);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    if (!data.empty()) {
      ASSERT_EQ(*(*file)->Write(0, data), data.size());
    }
    ASSERT_TRUE((*file)->Sync(false).ok());
  }
  void MakeDir(const std::string& path) {
    At at = Locate(path);
    ASSERT_NE(at.where.dir, nullptr);
    Status s = at.tree->MakeDir(*at.where.dir, at.where.name, 0700);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  void Symlink(const std::string& path, const std::string& target) {
    At at = Locate(path);
    ASSERT_NE(at.where.dir, nullptr);
    Status s = at.tree->MakeSymlink(*at.where.dir, at.where.name, target);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  // The cipher path of vault entry `path`.
  std::string CipherPath(const std::string& path) {
    auto volume = Open();
    return volume == nullptr ? "" : test::CipherPathOf(*volume, path);
  }
  // Where data page `page` of a cipher file starts (aes-256-gcm: 12-byte nonce, 16-byte tag).
  static uint64_t PageOffset(uint64_t page) { return core::PageGeometry(12).UnitOffset(page); }

  test::TempDir tmp_;
};

// The only regular file of a cipher directory besides the vault's own.
std::string OnlyCipherFile(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && name != core::kConfigFileName && name != core::kDirIvFileName &&
        name != core::kLockFileName)
      found.push_back(e.path().string());
  }
  EXPECT_EQ(found.size(), 1u);
  return found.empty() ? "" : found[0];
}

TEST_F(CliVerityTest, EnablePrintsTheDigestFsverityComputes) {
  const size_t sizes[] = {0, 1, 4096, 4097, 600000};
  for (size_t size : sizes) {
    const std::string name = "file" + std::to_string(size);
    const auto data = test::Pattern(size, static_cast<uint32_t>(size) + 1);
    Put(name, data);
    const std::string expect = OracleDigest(data) + " " + name + "\n";
    ProcessResult r = Verity("enable", name);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expect) << "size " << size;
    EXPECT_EQ(r.err, "");
    r = Verity("measure", name);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expect) << "size " << size;
  }
}

TEST_F(CliVerityTest, SaltedDigestsMatchFsverity) {
  const auto data = test::Pattern(70000, 7);
  const std::string salts[] = {"00", "5a17ed", std::string(64, 'c')};  // 1, 3 and 32 bytes
  for (size_t i = 0; i < std::size(salts); ++i) {
    const std::string name = "salted" + std::to_string(i);
    Put(name, data);
    const std::string expect = OracleDigest(data, salts[i]) + " " + name + "\n";
    EXPECT_NE(expect, OracleDigest(data) + " " + name + "\n");
    ProcessResult r = Verity("enable", name, {"--salt", salts[i]});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expect);
    EXPECT_EQ(Verity("measure", name).out, expect);
  }
}

TEST_F(CliVerityTest, EnableRefusals) {
  Put("f", test::Pattern(5000, 1));
  MakeDir("d");
  ASSERT_EQ(Verity("enable", "f").exit_code, 0);
  struct Case {
    std::string path;
    std::vector<std::string> extra;
    std::string expect;
  } cases[] = {
      {"f", {}, "f is already sealed"},
      {"d", {}, "d is not a regular file"},
      {"missing", {}, "missing: No such file or directory"},
      {"d/missing/deeper", {}, "No such file or directory"},
      {"f", {"--salt", "xyz"}, "--salt is not hex"},
      {"f", {"--salt", std::string(66, 'a')}, "--salt is 33 bytes; at most 32"},
  };
  for (const Case& c : cases) {
    ProcessResult r = Verity("enable", c.path, c.extra);
    EXPECT_EQ(r.exit_code, 1) << c.expect;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.out, "");
  }
  EXPECT_EQ(Sigilfs({"verity", "enable", Vault()}).exit_code, 2);
  EXPECT_EQ(Sigilfs({"verity"}).exit_code, 2);
}

TEST_F(CliVerityTest, MeasureAndVerifyRefuseUnsealedFiles) {
  Put("plain.txt", test::Pattern(100, 1));
  for (const char* cmd : {"measure", "verify"}) {
    ProcessResult r = Verity(cmd, "plain.txt");
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_NE(r.err.find("plain.txt is not sealed"), std::string::npos) << r.err;
    EXPECT_EQ(Lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.out, "");
  }
}

TEST_F(CliVerityTest, VerifyPassesThenFindsAFlippedByte) {
  const auto data = test::Pattern(600000, 3);
  Put("big.bin", data);
  ProcessResult r = Verity("enable", "big.bin");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string digest = DigestField(r.out);
  r = Verity("verify", "big.bin");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "big.bin: OK " + digest + "\n");

  FlipByte(OnlyCipherFile(Vault()), PageOffset(100) + 500);
  r = Verity("verify", "big.bin");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("big.bin: page 100"), std::string::npos) << r.err;
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
  // The record is intact: the digest can still be read, the data no longer matches it.
  EXPECT_EQ(DigestField(Verity("measure", "big.bin").out), digest);
}

TEST_F(CliVerityTest, FsckCleanVaultChangesNothing) {
  MakeDir("docs");
  MakeDir("docs/old");
  Put("docs/report.pdf", test::Pattern(300000, 1));
  Put("docs/old/empty", {});
  Put("docs/" + std::string(200, 'n'), test::Pattern(10, 2));  // a long stored name
  Put("sealed.bin", test::Pattern(9000, 3));
  Symlink("link", "docs/report.pdf");
  ASSERT_EQ(Verity("enable", "sealed.bin").exit_code, 0);
  const auto before = Snapshot(Vault());
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "3 directories, 4 files (1 sealed), 1 symlink checked; 0 problems\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Snapshot(Vault()), before);
  r = Fsck({"--quiet"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "");
}

TEST_F(CliVerityTest, FsckNamesAFileWithAFlippedByte) {
  MakeDir("docs");
  Put("docs/report.pdf", test::Pattern(300000, 1));
  Put("docs/fine.txt", test::Pattern(3000, 2));
  FlipByte(CipherPath("docs/report.pdf"), PageOffset(20) + 100);
  const auto before = Snapshot(Vault());
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("docs/report.pdf: authentication failed: page 20"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("fine.txt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 directories, 2 files (0 sealed), 0 symlinks checked; 1 problem\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Snapshot(Vault()), before);
}

TEST_F(CliVerityTest, FsckListsEveryDamagedPageAndATornTail) {
  Put("report.pdf", test::Pattern(300000, 1));
  Put("log.txt", test::Pattern(10 * 4096, 2));
  Put("many.bin", test::Pattern(40 * 4096, 3));
  FlipByte(CipherPath("report.pdf"), PageOffset(3) + 7);
  FlipByte(CipherPath("report.pdf"), PageOffset(50) + 70);
  // As a crash leaves a file that was growing: 5 bytes of page 9's unit, no room for a tag.
  fs::resize_file(CipherPath("log.txt"), PageOffset(9) + 5);
  for (uint64_t page = 0; page < 20; ++page) FlipByte(CipherPath("many.bin"), PageOffset(page) + 1);
  const auto before = Snapshot(Vault());
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  // Both damaged pages, not only the first; the pages after them were read.
  EXPECT_NE(r.out.find("report.pdf: authentication failed: page 3:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("report.pdf: authentication failed: page 50:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("log.txt: corrupt: page 9: torn: the cipher file ends inside this page"),
            std::string::npos)
      << r.out;
  // Past 16 pages of one file, a count.
  EXPECT_NE(r.out.find("many.bin: authentication failed: page 15:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("many.bin: authentication failed: page 16:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("many.bin: corrupt: 4 more damaged pages not listed"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 directory, 3 files (0 sealed), 0 symlinks checked; 20 problems\n"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Snapshot(Vault()), before);
}

// A torn tail of 8 bytes has a sealed file's length; `stat` must size it as opening it does
// (a torn last page of 1 byte), not fail on a trailer that accounts for nothing.
TEST_F(CliVerityTest, ATornTailOfEightBytesStatsAsItOpens) {
  Put("grown.bin", test::Pattern(18 * 4096, 4));
  fs::resize_file(CipherPath("grown.bin"), PageOffset(17) + 8);
  At at = Locate("grown.bin");
  ASSERT_NE(at.where.dir, nullptr);
  auto st = at.tree->Stat(*at.where.dir, at.where.name);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(st->st_size, 17 * 4096 + 1);
  ProcessResult r = Fsck();
  EXPECT_NE(r.out.find("grown.bin: corrupt: page 17: torn"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; 1 problem\n"), std::string::npos) << r.out;
}

TEST_F(CliVerityTest, FsckFindsATamperedSealedFile) {
  Put("sealed.bin", test::Pattern(600000, 4));
  ASSERT_EQ(Verity("enable", "sealed.bin").exit_code, 0);
  FlipByte(OnlyCipherFile(Vault()), PageOffset(3) + 50);
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("sealed.bin: authentication failed: page 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 file (1 sealed)"), std::string::npos) << r.out;
}

TEST_F(CliVerityTest, FsckFindsDamagedNames) {
  MakeDir("docs");
  Put("docs/a.txt", test::Pattern(10, 1));
  Put("docs/" + std::string(200, 'n'), test::Pattern(10, 2));
  Put("b.txt", test::Pattern(10, 3));
  ASSERT_EQ(Fsck().exit_code, 0);

  // A name that is well-formed base64url but was never encrypted under this directory's IV.
  const std::string garbage = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
  const fs::path b = CipherPath("b.txt");
  fs::rename(b, b.parent_path() / garbage);
  // A long name whose side file is gone.
  const fs::path long_name = CipherPath("docs/" + std::string(200, 'n'));
  ASSERT_TRUE(core::NameCodec::IsLongName(long_name.filename().string()));
  fs::remove(long_name.parent_path() /
             core::NameCodec::SideFileName(long_name.filename().string()));

  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(garbage + " (stored name): "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("docs/" + long_name.filename().string() + " (stored name): "),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("; 2 problems\n"), std::string::npos) << r.out;
}

TEST_F(CliVerityTest, FsckFindsBadSymlinkTargetsAndMissingDirectoryIvs) {
  MakeDir("sub");
  Put("sub/x", test::Pattern(10, 1));
  Symlink("link", "sub/x");
  ASSERT_EQ(Fsck().exit_code, 0);
  const fs::path link = CipherPath("link");
  fs::remove(link);
  fs::create_symlink("not-an-encrypted-target", link);
  const fs::path sub = CipherPath("sub");
  fs::remove(sub / core::kDirIvFileName);
  ::removexattr(sub.c_str(), core::kDirIvAttrName);  // its copy, where the filesystem has one
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("link: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sub: corrupt: directory has no IV file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 directories, 0 files (0 sealed), 1 symlink checked; 2 problems"),
            std::string::npos)
      << r.out;
}

// After a crash that kept a directory but not its (unflushed) IV file, the IV in the
// directory's attribute still opens its names; fsck says so, and changes nothing.
TEST_F(CliVerityTest, FsckReportsAnIvFileKeptOnlyInTheDirectorysAttribute) {
  MakeDir("sub");
  Put("sub/x", test::Pattern(10, 1));
  const fs::path sub = CipherPath("sub");
  std::array<uint8_t, core::kDirIvSize> attr;
  SIGILFS_NEEDS(::getxattr(sub.c_str(), core::kDirIvAttrName, attr.data(), attr.size()) ==
                    static_cast<ssize_t>(attr.size()),
                "the backing filesystem keeps no user attributes");
  fs::resize_file(sub / core::kDirIvFileName, 0);
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("sub: corrupt: IV file torn"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 directories, 1 file (0 sealed), 0 symlinks checked; 1 problem"),
            std::string::npos)
      << "the names in it were read and checked: " << r.out;
  EXPECT_EQ(fs::file_size(sub / core::kDirIvFileName), 0u) << "fsck changes nothing";
}

// A sealed file whose header flags were cleared still verifies (it stays sealed), but fsck names
// it; one stripped of everything after its data as well does not open at all, and fsck names it.
// Neither check changes the vault.
TEST_F(CliVerityTest, FsckNamesASealedFileWhoseSealWasTamperedWith) {
  const auto data = test::Pattern(5 * 4096 + 10, 4);
  Put("flags.bin", data);
  Put("stripped.bin", data);
  ASSERT_EQ(Verity("enable", "flags.bin").exit_code, 0);
  ASSERT_EQ(Verity("enable", "stripped.bin").exit_code, 0);
  auto clear_flags = [](const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << path;
    const uint8_t zero[2] = {0, 0};
    ASSERT_EQ(::pwrite(fd, zero, 2, 10), 2);
    ::close(fd);
  };
  clear_flags(CipherPath("flags.bin"));
  clear_flags(CipherPath("stripped.bin"));
  fs::resize_file(CipherPath("stripped.bin"), PageOffset(5) + 10 + 12 + 16);
  EXPECT_EQ(Verity("verify", "flags.bin").exit_code, 0);
  const auto before = Snapshot(Vault());
  ProcessResult r = Fsck();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("flags.bin: corrupt: sealed, but its header's flags are clear"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("stripped.bin: corrupt: a sealed file whose seal was removed"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(Snapshot(Vault()), before);
}

TEST_F(CliVerityTest, WrongPassphraseIsOneLine) {
  Put("f", test::Pattern(10, 1));
  const std::string bad = PassFile("bad", "nope");
  for (const char* cmd : {"enable", "measure", "verify"}) {
    ProcessResult r = Sigilfs({"verity", cmd, Vault(), "f", "--passfile", bad});
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n");
  }
  ProcessResult r = Sigilfs({"fsck", Vault(), "--passfile", bad});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n");
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(Sigilfs({"fsck"}).exit_code, 2);
  r = Sigilfs({"fsck", (tmp_.path() / "nowhere").string(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(Lines(r.err), 1u) << r.err;
}

// Files written through a real mount, sealed offline, then read and measured through the mount.
TEST(CliVerityMountTest, SealFilesWrittenThroughAMount) {
  SIGILFS_NEEDS_FUSE();
  test::MountedVault v;
  const auto data = test::Pattern(123457, 9);
  {
    std::ofstream out(v.path("notes.bin"), std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
  }
  v.Unmount();
  ProcessResult r = RunProcess(
      {SIGILFS_BINARY, "verity", "enable", v.cipher(), "notes.bin", "--passfile", v.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  test::TempDir tmp;
  const fs::path copy = tmp.path() / "copy";
  {
    std::ofstream out(copy, std::ios::binary);
    out.write(reinterpret_cast<const char*>(data.data()),
              static_cast<std::streamsize>(data.size()));
  }
  ProcessResult oracle = RunProcess({kFsverity, "digest", copy.string()});
  ASSERT_EQ(oracle.exit_code, 0) << oracle.err;
  EXPECT_EQ(r.out, DigestField(oracle.out) + " notes.bin\n");
  r = RunProcess({SIGILFS_BINARY, "fsck", v.cipher(), "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 file (1 sealed)"), std::string::npos) << r.out;

  v.Mount();
  EXPECT_EQ(test::ReadAll(v.path("notes.bin")),
            std::string(reinterpret_cast<const char*>(data.data()), data.size()));
  r = RunProcess({kFsverity, "measure", v.path("notes.bin")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(DigestField(r.out), DigestField(oracle.out));
}

}  // namespace
}  // namespace sigilfs
