// Randomized comparison: the same random operations on a sigilfs mount and on a plain
// directory must give the same results, errnos and trees (also after remounts).
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "test_support/mount.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

// The outcome of one system call: its result (or -errno).
long Outcome(long rc) { return rc < 0 ? -errno : rc; }

// Every entry below `root`: "path type size" and, for files, the contents; for links, targets.
std::map<std::string, std::string> Snapshot(const std::string& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    // Lexically: fs::relative() resolves symlinks, which would file a link under its target.
    const std::string rel = e.path().lexically_relative(root).string();
    struct stat st;
    ::lstat(e.path().c_str(), &st);
    std::string v = std::to_string(st.st_mode & S_IFMT) + " " + std::to_string(st.st_nlink);
    if (S_ISREG(st.st_mode)) {
      v += " " + std::to_string(st.st_size) + " " + test::ReadAll(e.path());
    } else if (S_ISLNK(st.st_mode)) {
      v += " " + fs::read_symlink(e.path()).string();
    }
    out[rel] = v;
  }
  return out;
}

// Equal trees, or a short account of the first difference.
::testing::AssertionResult SameTrees(const std::map<std::string, std::string>& a,
                                     const std::map<std::string, std::string>& b) {
  if (a == b) return ::testing::AssertionSuccess();
  for (const auto& [path, value] : a) {
    auto it = b.find(path);
    if (it == b.end()) return ::testing::AssertionFailure() << path << " only on the mount";
    if (it->second != value) {
      size_t i = 0;
      while (i < value.size() && i < it->second.size() && value[i] == it->second[i]) ++i;
      return ::testing::AssertionFailure()
             << path << " differs: mount " << value.size() << " bytes of description, plain "
             << it->second.size() << ", first difference at " << i << " (mount: \""
             << value.substr(0, std::min<size_t>(value.find(' ', value.find(' ') + 1), 40))
             << "\" plain: \""
             << it->second.substr(
                    0, std::min<size_t>(it->second.find(' ', it->second.find(' ') + 1), 40))
             << "\")";
    }
  }
  for (const auto& [path, value] : b)
    if (a.count(path) == 0)
      return ::testing::AssertionFailure() << path << " only in the plain directory";
  return ::testing::AssertionFailure() << "trees differ";
}

class MountRandomTest : public ::testing::Test {};

TEST_F(MountRandomTest, SameOperationsSameResultsAsAPlainDirectory) {
  SIGILFS_NEEDS_FUSE();
  const char* env_seed = std::getenv("SIGILFS_SEED");
  const uint32_t seed = env_seed ? static_cast<uint32_t>(std::strtoul(env_seed, nullptr, 10))
                                 : static_cast<uint32_t>(std::random_device{}());
  const int ops = std::getenv("SIGILFS_LONG") != nullptr ? 20000 : 1500;
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with SIGILFS_SEED=" + std::to_string(seed) + ")");
  std::mt19937 rng(seed);
  auto pick = [&](uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng); };

  test::MountedVault vault;
  test::TempDir plain_dir;
  const std::string roots[2] = {vault.plain(), plain_dir.path().string()};
  // A small name space so operations collide: files f0..f5 and directories d0..d2 (one level).
  auto name = [&]() {
    std::string dir = pick(3) == 0 ? "" : "d" + std::to_string(pick(3)) + "/";
    return dir + (pick(4) == 0 ? "d" + std::to_string(pick(3)) : "f" + std::to_string(pick(6)));
  };

  for (int i = 0; i < ops; ++i) {
    const uint32_t op = pick(100);
    const std::string a = name(), b = name();
    const uint64_t off = pick(4) == 0 ? pick(3) * 4096 : pick(3 * 4096 + 100);
    const size_t len = 1 + pick(pick(5) == 0 ? 3 * 4096 : 600);
    std::string data(len, '\0');
    for (char& c : data) c = static_cast<char>(pick(256));
    if (std::getenv("SIGILFS_TRACE") != nullptr)
      std::fprintf(stderr, "op %d: %u %s %s off %llu len %zu\n", i, op, a.c_str(), b.c_str(),
                   static_cast<unsigned long long>(off), len);
    long results[2];
    std::string reads[2];
    for (int side = 0; side < 2; ++side) {
      const std::string pa = roots[side] + "/" + a, pb = roots[side] + "/" + b;
      long rc = 0;
      if (op < 30) {  // write at an offset
        int fd = ::open(pa.c_str(), O_WRONLY | O_CREAT, 0644);
        rc = fd < 0 ? Outcome(fd)
                    : Outcome(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(off)));
        if (fd >= 0) ::close(fd);
      } else if (op < 45) {  // read at an offset
        int fd = ::open(pa.c_str(), O_RDONLY);
        if (fd < 0) {
          rc = Outcome(fd);
        } else {
          std::string buf(len, '\0');
          rc = Outcome(::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off)));
          if (rc > 0) reads[side] = buf.substr(0, static_cast<size_t>(rc));
          ::close(fd);
        }
      } else if (op < 53) {
        rc = Outcome(::truncate(pa.c_str(), static_cast<off_t>(off)));
      } else if (op < 63) {
        rc = Outcome(::rename(pa.c_str(), pb.c_str()));
      } else if (op < 68) {
        rc = Outcome(::link(pa.c_str(), pb.c_str()));
      } else if (op < 76) {
        rc = Outcome(::unlink(pa.c_str()));
      } else if (op < 84) {
        rc = Outcome(::mkdir(pa.c_str(), 0755));
      } else if (op < 90) {
        rc = Outcome(::rmdir(pa.c_str()));
      } else if (op < 94) {
        rc = Outcome(::symlink(b.c_str(), pa.c_str()));
      } else {  // append
        int fd = ::open(pa.c_str(), O_WRONLY | O_APPEND | O_CREAT, 0644);
        rc = fd < 0 ? Outcome(fd) : Outcome(::write(fd, data.data(), data.size()));
        if (fd >= 0) ::close(fd);
      }
      results[side] = rc;
    }
    if (std::getenv("SIGILFS_TRACE") != nullptr)
      std::fprintf(stderr, "  -> %ld %ld\n", results[0], results[1]);
    ASSERT_EQ(results[0], results[1]) << "op " << i << " (" << op << ") on " << a << " / " << b
                                      << " at " << off << "+" << len << "\n"
                                      << vault.log();
    ASSERT_EQ(reads[0], reads[1]) << "op " << i << " read of " << a;
    // SIGILFS_CHECK_EACH=1 compares the trees after every operation, to find the first one
    // whose effects differ (slow; for investigating a divergence).
    if (std::getenv("SIGILFS_CHECK_EACH") != nullptr) {
      ASSERT_TRUE(SameTrees(Snapshot(roots[0]), Snapshot(roots[1])))
          << "after op " << i << " (" << op << ") on " << a << " / " << b << "\n"
          << vault.log();
    }
    if (pick(300) == 0) {
      vault.Remount();
      ASSERT_TRUE(SameTrees(Snapshot(roots[0]), Snapshot(roots[1])))
          << "after remount at op " << i << "\n"
          << vault.log();
    }
  }
  EXPECT_TRUE(SameTrees(Snapshot(roots[0]), Snapshot(roots[1]))) << vault.log();
  vault.Remount();
  EXPECT_TRUE(SameTrees(Snapshot(roots[0]), Snapshot(roots[1])));
}

}  // namespace
}  // namespace sigilfs
