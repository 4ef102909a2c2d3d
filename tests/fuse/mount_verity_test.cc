// Encrypted verity through a real mount: Debian's `fsverity enable|measure` and `lsattr` work on
// files in the mount, digests equal `fsverity digest` of the same plaintext, sealed files refuse
// changes with EPERM, and tampered or rolled-back ciphertext reads as EIO, never as data.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <linux/fsverity.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

// Linux forwards the fs-verity ioctls to FUSE servers with their payload from 6.10 on.
bool KernelForwardsVerity() {
  utsname u{};
  if (::uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 6 || (major == 6 && minor >= 10);
}

bool HaveFsverityTool() { return ::access("/usr/bin/fsverity", X_OK) == 0; }

#define SKIP_UNLESS_SUPPORTED()                                                    \
  do {                                                                             \
    SIGILFS_NEEDS_FUSE();                                                          \
    SIGILFS_NEEDS(KernelForwardsVerity(), "kernel before 6.10: no verity ioctls"); \
    SIGILFS_NEEDS(HaveFsverityTool(), "the fsverity tool is not installed");       \
  } while (0)

void WriteFile(const std::string& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

std::vector<uint8_t> ReadFile(const std::string& path, int* error = nullptr) {
  std::vector<uint8_t> out;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (error) *error = errno;
    return out;
  }
  uint8_t buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (error) *error = errno;
      break;
    }
    if (n == 0) {
      if (error) *error = 0;
      break;
    }
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return out;
}

// The first word of `fsverity <verb> ...`'s output ("sha256:<hex>"), or the error.
std::string Fsverity(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/fsverity"};
  argv.insert(argv.end(), args.begin(), args.end());
  test::ProcessResult r = test::RunProcess(argv);
  if (r.exit_code != 0) return "exit " + std::to_string(r.exit_code) + ": " + r.err;
  return r.out.substr(0, r.out.find(' '));
}

// The cipher file of the vault's only regular file (tests that use it keep one file).
std::string OnlyCipherFile(const test::MountedVault& vault) {
  std::string found;
  for (const auto& e : fs::directory_iterator(vault.cipher())) {
    const std::string name = e.path().filename().string();
    if (name.rfind("sigilfs.", 0) == 0 || !e.is_regular_file()) continue;
    EXPECT_TRUE(found.empty()) << "more than one cipher file";
    found = e.path().string();
  }
  return found;
}

void FlipByte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x20);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(MountVerityTest, DigestsEqualFsverityDigestOfThePlaintext) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  test::TempDir plain;
  const size_t sizes[] = {0, 1, 4096, 4097, 600000, 128 * 4096 + 1};
  for (size_t size : sizes) {
    for (const std::string salt : {"", "00112233aabbccdd"}) {
      const std::string name = "f" + std::to_string(size) + (salt.empty() ? "" : "s");
      const auto data = test::Pattern(size, static_cast<uint32_t>(size + salt.size()));
      WriteFile(vault.path(name), data);
      const std::string reference = (plain.path() / name).string();
      WriteFile(reference, data);
      std::vector<std::string> salt_arg;
      if (!salt.empty()) salt_arg.push_back("--salt=" + salt);
      std::vector<std::string> enable = {"enable", vault.path(name)};
      enable.insert(enable.end(), salt_arg.begin(), salt_arg.end());
      ASSERT_EQ(Fsverity(enable), "") << name;  // prints nothing on success
      std::vector<std::string> digest = {"digest", reference};
      digest.insert(digest.end(), salt_arg.begin(), salt_arg.end());
      const std::string expect = Fsverity(digest);
      ASSERT_EQ(expect.rfind("sha256:", 0), 0u) << expect;
      EXPECT_EQ(Fsverity({"measure", vault.path(name)}), expect) << name;
      EXPECT_TRUE(ReadFile(vault.path(name)) == data) << name;
    }
  }
  // After a remount: the same digests, sizes and contents.
  vault.Remount();
  for (size_t size : sizes) {
    const std::string name = "f" + std::to_string(size);
    EXPECT_EQ(fs::file_size(vault.path(name)), size);
    EXPECT_EQ(Fsverity({"measure", vault.path(name)}),
              Fsverity({"digest", (plain.path() / name).string()}));
    EXPECT_TRUE(ReadFile(vault.path(name)) == test::Pattern(size, static_cast<uint32_t>(size)));
  }
}

TEST(MountVerityTest, ABackupOfTheCipherDirectoryKeepsFilesSealed) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  test::TempDir backup;
  const auto data = test::Pattern(300000, 21);
  WriteFile(vault.path("a"), data);
  ASSERT_EQ(Fsverity({"enable", "--salt=0102", vault.path("a")}), "");
  const std::string digest = Fsverity({"measure", vault.path("a")});
  vault.Unmount();
  // Back the cipher files up with cp -a, wipe them, restore them.
  const std::string saved = (backup.path() / "cipher").string();
  ASSERT_EQ(test::RunProcess({"/bin/cp", "-a", vault.cipher(), saved}).exit_code, 0);
  fs::remove_all(vault.cipher());
  ASSERT_EQ(test::RunProcess({"/bin/cp", "-a", saved, vault.cipher()}).exit_code, 0);
  vault.Mount();
  EXPECT_EQ(Fsverity({"measure", vault.path("a")}), digest);
  EXPECT_TRUE(ReadFile(vault.path("a")) == data);
  errno = 0;
  EXPECT_LT(::open(vault.path("a").c_str(), O_WRONLY), 0);
  EXPECT_EQ(errno, EPERM);
}

TEST(MountVerityTest, LsattrShowsSealedFiles) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  WriteFile(vault.path("sealed"), test::Pattern(100, 1));
  WriteFile(vault.path("open"), test::Pattern(100, 2));
  ASSERT_EQ(Fsverity({"enable", vault.path("sealed")}), "");
  test::ProcessResult r = test::RunProcess({"/usr/bin/lsattr", vault.path("sealed")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.substr(0, r.out.find(' ')).find('V'), std::string::npos) << r.out;
  r = test::RunProcess({"/usr/bin/lsattr", vault.path("open")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.substr(0, r.out.find(' ')).find('V'), std::string::npos) << r.out;
}

TEST(MountVerityTest, SealedFilesRefuseChangesWithEperm) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  const auto data = test::Pattern(10000, 3);
  WriteFile(vault.path("a"), data);
  WriteFile(vault.path("b"), data);
  ASSERT_EQ(Fsverity({"enable", vault.path("a")}), "");
  for (int pass = 0; pass < 2; ++pass) {
    errno = 0;
    EXPECT_LT(::open(vault.path("a").c_str(), O_WRONLY), 0);
    EXPECT_EQ(errno, EPERM);
    EXPECT_LT(::open(vault.path("a").c_str(), O_RDWR | O_APPEND), 0);
    EXPECT_EQ(errno, EPERM);
    EXPECT_LT(::open(vault.path("a").c_str(), O_RDWR | O_TRUNC), 0);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(::truncate(vault.path("a").c_str(), 5), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_NE(Fsverity({"enable", vault.path("a")}), "");  // already sealed: EEXIST
    EXPECT_TRUE(ReadFile(vault.path("a")) == data);
    // Renaming and linking a sealed file keep it sealed; the other file is writable.
    int fd = ::open(vault.path("b").c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(::write(fd, "x", 1), 1);
    ::close(fd);
    vault.Remount();
  }
  ASSERT_EQ(::rename(vault.path("a").c_str(), vault.path("c").c_str()), 0);
  EXPECT_EQ(Fsverity({"measure", vault.path("c")}).rfind("sha256:", 0), 0u);
  EXPECT_NE(Fsverity({"measure", vault.path("b")}).rfind("sha256:", 0), 0u);  // ENODATA
  EXPECT_EQ(::unlink(vault.path("c").c_str()), 0);  // sealed files can be removed
}

// Each verity ioctl answers with the errno the kernel documents for ext4
// (Documentation/filesystems/fsverity.rst), as `fsverity` and other tools read them.
TEST(MountVerityTest, EachVerityIoctlAnswersTheKernelsErrno) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  WriteFile(vault.path("plain"), test::Pattern(10000, 1));
  WriteFile(vault.path("sealed"), test::Pattern(10000, 2));
  ASSERT_EQ(Fsverity({"enable", vault.path("sealed")}), "");
  ASSERT_EQ(::mkdir(vault.path("dir").c_str(), 0755), 0);
  const auto measure = [&](const std::string& name, uint16_t room) {
    const int fd = ::open(vault.path(name).c_str(), O_RDONLY);
    if (fd < 0) return -errno;
    std::vector<uint8_t> buf(sizeof(fsverity_digest) + 64);
    auto* d = reinterpret_cast<fsverity_digest*>(buf.data());
    d->digest_size = room;
    const int rc = ::ioctl(fd, FS_IOC_MEASURE_VERITY, d) == 0 ? 0 : errno;
    ::close(fd);
    return rc;
  };
  const auto enable = [&](const std::string& name, fsverity_enable_arg arg, int flags) {
    const int fd = ::open(vault.path(name).c_str(), flags);
    if (fd < 0) return -errno;
    const int rc = ::ioctl(fd, FS_IOC_ENABLE_VERITY, &arg) == 0 ? 0 : errno;
    ::close(fd);
    return rc;
  };
  fsverity_enable_arg good{};
  good.version = 1;
  good.hash_algorithm = FS_VERITY_HASH_ALG_SHA256;
  good.block_size = 4096;

  EXPECT_EQ(measure("plain", 32), ENODATA);     // not sealed
  EXPECT_EQ(measure("sealed", 16), EOVERFLOW);  // no room for the digest
  EXPECT_EQ(measure("sealed", 32), 0);
  EXPECT_EQ(enable("sealed", good, O_RDONLY), EEXIST);
  EXPECT_EQ(enable("dir", good, O_RDONLY | O_DIRECTORY), EISDIR);
  fsverity_enable_arg bad = good;
  bad.version = 2;
  EXPECT_EQ(enable("plain", bad, O_RDONLY), EINVAL);
  bad = good;
  bad.hash_algorithm = 99;
  EXPECT_EQ(enable("plain", bad, O_RDONLY), EINVAL);
  bad = good;
  bad.block_size = 3000;
  EXPECT_EQ(enable("plain", bad, O_RDONLY), EINVAL);
  bad = good;
  bad.hash_algorithm = FS_VERITY_HASH_ALG_SHA512;
  EXPECT_EQ(enable("plain", bad, O_RDONLY), EOPNOTSUPP);  // a kernel hash sigilfs does not use
  bad = good;
  std::vector<uint8_t> salt(64, 0x5a);
  bad.salt_ptr = reinterpret_cast<uint64_t>(salt.data());
  bad.salt_size = 33;  // past FS_VERITY_MAX_SALT_SIZE (32)
  EXPECT_EQ(enable("plain", bad, O_RDONLY), EMSGSIZE);
  EXPECT_EQ(enable("plain", good, O_RDWR), ETXTBSY);  // the caller's own writable descriptor
  EXPECT_EQ(measure("plain", 32), ENODATA);           // none of these sealed it
  EXPECT_EQ(enable("plain", good, O_RDONLY), 0);
  EXPECT_EQ(measure("plain", 32), 0);
}

TEST(MountVerityTest, AFileOpenForWritingCannotBeSealed) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  WriteFile(vault.path("a"), test::Pattern(5000, 4));
  int writer = ::open(vault.path("a").c_str(), O_WRONLY);
  ASSERT_GE(writer, 0);
  int reader = ::open(vault.path("a").c_str(), O_RDONLY);
  ASSERT_GE(reader, 0);
  fsverity_enable_arg arg{};
  arg.version = 1;
  arg.hash_algorithm = FS_VERITY_HASH_ALG_SHA256;
  arg.block_size = 4096;
  errno = 0;
  EXPECT_EQ(::ioctl(reader, FS_IOC_ENABLE_VERITY, &arg), -1);
  EXPECT_EQ(errno, ETXTBSY);
  ::close(writer);
  EXPECT_EQ(::ioctl(reader, FS_IOC_ENABLE_VERITY, &arg), 0) << std::strerror(errno);
  // A salt over 32 bytes is refused as the kernel refuses it.
  ::close(reader);
  WriteFile(vault.path("b"), test::Pattern(10, 5));
  reader = ::open(vault.path("b").c_str(), O_RDONLY);
  std::vector<uint8_t> salt(33, 1);
  arg.salt_size = 33;
  arg.salt_ptr = reinterpret_cast<uintptr_t>(salt.data());
  EXPECT_EQ(::ioctl(reader, FS_IOC_ENABLE_VERITY, &arg), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  ::close(reader);
}

// Reads `path` in 4 KiB pages: which pages fail with EIO (and that the others are right).
std::vector<size_t> BadPages(const std::string& path, const std::vector<uint8_t>& expect) {
  std::vector<size_t> bad;
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return {SIZE_MAX};
  for (size_t page = 0; page * 4096 < expect.size(); ++page) {
    uint8_t buf[4096];
    const ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(page * 4096));
    if (n < 0) {
      EXPECT_EQ(errno, EIO);
      bad.push_back(page);
      continue;
    }
    const size_t want = std::min<size_t>(4096, expect.size() - page * 4096);
    EXPECT_EQ(static_cast<size_t>(n), want);
    EXPECT_EQ(std::memcmp(buf, expect.data() + page * 4096, want), 0) << "page " << page;
  }
  ::close(fd);
  return bad;
}

constexpr uint64_t kUnit = 4096 + 12 + 16;  // AES-256-GCM, the default cipher
uint64_t UnitOffset(uint64_t i) { return 32 + i * kUnit; }

// A damaged data page fails its reads, and so do the pages below a damaged tree block; damaged
// pins fail the pages they cover. `sigilfs fsck` reports each.
TEST(MountVerityTest, TamperedDataPageTreeBlockOrPinsReadAsEio) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  const auto data = test::Pattern(130 * 4096, 6);  // level 0: two blocks, level 1: one
  WriteFile(vault.path("a"), data);
  ASSERT_EQ(Fsverity({"enable", vault.path("a")}), "");
  vault.Unmount();
  const std::string cipher = OnlyCipherFile(vault);
  FlipByte(cipher, UnitOffset(5) + 200);  // data page 5
  // Tree: units from 144 (130 rounded up to 16); stored block 0 is level 1, 1-2 level 0.
  FlipByte(cipher, UnitOffset(144 + 2) + 300);  // level-0 block 1: pages 128 and 129
  vault.Mount();
  EXPECT_EQ(BadPages(vault.path("a"), data), (std::vector<size_t>{5, 128, 129}));
  EXPECT_NE(vault.log().find("page 5"), std::string::npos) << vault.log();
  vault.Unmount();
  auto fsck = [&] {
    return test::RunProcess(
        {SIGILFS_BINARY, "fsck", vault.cipher(), "--passfile", vault.passfile()});
  };
  test::ProcessResult r = fsck();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("verity tree block 2"), std::string::npos) << r.out;
  // The tree restored: fsck reports the page; the page restored, the pins (unit 148, after the
  // record) damaged: every page they cover (all 130) fails.
  FlipByte(cipher, UnitOffset(144 + 2) + 300);
  r = fsck();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("page 5"), std::string::npos) << r.out;
  FlipByte(cipher, UnitOffset(5) + 200);
  FlipByte(cipher, UnitOffset(148) + 100);
  r = fsck();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("verity pin block 0"), std::string::npos) << r.out;
  vault.Mount();
  EXPECT_EQ(BadPages(vault.path("a"), data).size(), 130u);
}

TEST(MountVerityTest, AnOlderCiphertextOfAPageReadsAsEio) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  auto data = test::Pattern(8 * 4096, 7);
  WriteFile(vault.path("a"), data);
  vault.Unmount();
  std::vector<char> old_unit(kUnit);
  {
    std::ifstream in(OnlyCipherFile(vault), std::ios::binary);
    in.seekg(static_cast<std::streamoff>(UnitOffset(3)));
    in.read(old_unit.data(), static_cast<std::streamsize>(kUnit));
  }
  vault.Mount();
  const auto page = test::Pattern(4096, 8);
  std::copy(page.begin(), page.end(), data.begin() + 3 * 4096);
  WriteFile(vault.path("a"), data);
  ASSERT_EQ(Fsverity({"enable", vault.path("a")}), "");
  vault.Unmount();
  {
    std::fstream out(OnlyCipherFile(vault), std::ios::in | std::ios::out | std::ios::binary);
    out.seekp(static_cast<std::streamoff>(UnitOffset(3)));
    out.write(old_unit.data(), static_cast<std::streamsize>(kUnit));
  }
  vault.Mount();
  EXPECT_EQ(BadPages(vault.path("a"), data), (std::vector<size_t>{3}));
}

TEST(MountVerityTest, ATamperedRecordOrCutFileFailsTheOpen) {
  SKIP_UNLESS_SUPPORTED();
  test::MountedVault vault;
  WriteFile(vault.path("a"), test::Pattern(20000, 9));
  ASSERT_EQ(Fsverity({"enable", vault.path("a")}), "");
  vault.Unmount();
  const std::string cipher = OnlyCipherFile(vault);
  const auto size = fs::file_size(cipher);
  // The last units: the record, then one pin block (20000 bytes are 5 pages), then the trailer.
  const uint64_t record = size - 8 - 2 * kUnit;
  FlipByte(cipher, record + 100);
  vault.Mount();
  int error = 0;
  EXPECT_TRUE(ReadFile(vault.path("a"), &error).empty());
  EXPECT_EQ(error, EIO);
  // The open itself fails, not only the reads.
  EXPECT_LT(::open(vault.path("a").c_str(), O_RDONLY), 0);
  EXPECT_EQ(errno, EIO);
  vault.Unmount();
  FlipByte(cipher, record + 100);  // repaired
  fs::resize_file(cipher, size - 4096);
  vault.Mount();
  EXPECT_TRUE(ReadFile(vault.path("a"), &error).empty());
  EXPECT_NE(error, 0);
}

}  // namespace
}  // namespace sigilfs
