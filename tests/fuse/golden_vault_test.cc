// The golden vault: a vault of format version 1 made once (tests/golden/make_golden_vault.sh) and
// committed; every build must mount it and read exactly its files, link, attribute, ACLs and
// sealed digest, and fsck must find it clean. A failure here is a format change.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fsverity.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

// What the script wrote: line k of a file is "<name> line <k>\n".
std::string Lines(const std::string& name, int count) {
  std::string s;
  for (int k = 0; k < count; ++k) s += name + " line " + std::to_string(k) + "\n";
  return s;
}

// `fsverity measure`'s digest of dir/sealed.txt when the vault was made.
constexpr char kSealedDigest[] = "fe44329e6804c406b3087926b82df3d24257edd47ad405ce5410fa95d72d9736";

std::string Hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

class GoldenVaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    fs::create_directories(vault());
    fs::create_directories(plain());
    const std::string archive =
        std::string(SIGILFS_SOURCE_DIR) + "/tests/golden/golden-vault-v1.tar";
    auto r = test::RunProcess(
        {"/bin/tar", "--xattrs", "--xattrs-include=*", "--acls", "-C", vault(), "-xf", archive});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ofstream(pass()) << "golden passphrase\n";
  }
  std::string vault() const { return (dir_.path() / "vault").string(); }
  std::string plain() const { return (dir_.path() / "plain").string(); }
  std::string pass() const { return (dir_.path() / "pass").string(); }

  test::TempDir dir_;
};

TEST_F(GoldenVaultTest, EveryBuildReadsTheGoldenVault) {
  {
    test::MountedVault m(vault(), plain(), pass());
    EXPECT_EQ(test::ReadAll(m.path("plain.txt")), Lines("plain", 1000));
    const std::string sparse_src = Lines("sparse", 300);
    std::string sparse = sparse_src.substr(0, 4096);
    sparse.resize(33 * 4096, '\0');
    sparse += sparse_src.substr(0, 5000);
    EXPECT_EQ(test::ReadAll(m.path("sparse.bin")), sparse);
    EXPECT_EQ(test::ReadAll(m.path("dir/sealed.txt")), Lines("sealed", 20000));
    EXPECT_EQ(test::ReadAll(m.path("dir/" + std::string(250, 'n'))), Lines("long", 3));
    EXPECT_EQ(fs::read_symlink(m.path("link")).string(), "dir/sealed.txt");
    EXPECT_EQ(test::ReadAll(m.path("dir/sub/attributes.txt")), Lines("attr", 2));

    // The sealed file's digest, as FS_IOC_MEASURE_VERITY reports it.
    const int fd = ::open(m.path("dir/sealed.txt").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    alignas(8) uint8_t buffer[sizeof(fsverity_digest) + 64] = {};
    auto* digest = reinterpret_cast<fsverity_digest*>(buffer);
    digest->digest_size = 64;
    const int rc = ::ioctl(fd, FS_IOC_MEASURE_VERITY, digest);
    ::close(fd);
    if (rc == 0) {
      EXPECT_EQ(Hex(digest->digest, digest->digest_size), kSealedDigest);
    } else {
      EXPECT_EQ(errno, ENOTTY) << "only a kernel that does not forward the ioctl may refuse it";
      // Where the mount suites are required (CI), the digest must be checked.
      EXPECT_NE(test::Decide(false), test::Verdict::kFail)
          << "the kernel does not forward FS_IOC_MEASURE_VERITY (before 6.10)";
    }

    char value[64] = {};
    const ssize_t n =
        ::getxattr(m.path("dir/sub/attributes.txt").c_str(), "user.golden", value, sizeof value);
    EXPECT_EQ(std::string(value, n > 0 ? static_cast<size_t>(n) : 0), "an attribute value");
    auto acl = test::RunProcess({"/usr/bin/getfacl", "-cp", m.path("dir/sub/attributes.txt")});
    EXPECT_NE(acl.out.find("user:nobody:r--"), std::string::npos) << acl.out << acl.err;
    acl = test::RunProcess({"/usr/bin/getfacl", "-cp", m.path("dir/sub")});
    EXPECT_NE(acl.out.find("default:group:nogroup:r-x"), std::string::npos) << acl.out << acl.err;
  }
  auto r = test::RunProcess({SIGILFS_BINARY, "fsck", vault(), "--passfile", pass()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("3 directories, 5 files (1 sealed), 1 symlink checked; 0 problems"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace sigilfs
