// Tamper battery through a real mount: every byte of a small vault's cipher files, every
// character of its cipher names and link targets and every byte of its stored attribute values
// changed in turn. Reads through the mount give the stored data or an error, never other data;
// the daemon keeps serving, and reading never changes the cipher directory.
// The default run changes a sample of the bytes of the larger files; SIGILFS_LONG=1 all of them.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/core/names.h"
#include "test_support/kernel_caches.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

constexpr size_t kFileHeader = 32;  // docs/format.md, "Header"

bool LongRun() {
  const char* v = std::getenv("SIGILFS_LONG");
  return v != nullptr && std::string(v) == "1";
}

// What the plaintext tree holds: per relative path, its type and contents.
struct Expected {
  char type = 'f';   // 'f', 'd' or 'l'
  std::string data;  // file contents or link target
  std::map<std::string, std::string> xattrs;
};
using Tree = std::map<std::string, Expected>;

std::vector<std::string> XattrNames(const std::string& path) {
  std::vector<std::string> names;
  std::string buf(4096, '\0');
  const ssize_t n = ::llistxattr(path.c_str(), buf.data(), buf.size());
  if (n <= 0) return names;
  for (size_t at = 0; at < static_cast<size_t>(n);) {
    names.emplace_back(buf.c_str() + at);
    at += names.back().size() + 1;
  }
  return names;
}

std::optional<std::string> Xattr(const std::string& path, const std::string& name) {
  std::string buf(65536, '\0');
  const ssize_t n = ::lgetxattr(path.c_str(), name.c_str(), buf.data(), buf.size());
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<size_t>(n));
  return buf;
}

// The cipher directory byte for byte (names, contents, link targets, attributes), to prove that
// reading through the mount never writes to it.
std::map<std::string, std::string> CipherSnapshot(const std::string& root) {
  std::map<std::string, std::string> snap;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string p = e.path().string();
    std::string repr;
    if (e.is_symlink()) {
      repr = "l" + fs::read_symlink(e.path()).string();
    } else if (e.is_directory()) {
      repr = "d";
    } else {
      repr = "f" + test::ReadAll(e.path());
    }
    for (const std::string& name : XattrNames(p)) repr += "\n" + name + "=" + *Xattr(p, name);
    snap[p.substr(root.size())] = repr;
  }
  return snap;
}

class MountTamperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS_ROOT("dropping the kernel's caches needs root");
    vault_ = std::make_unique<test::MountedVault>();
    auto put = [&](const std::string& rel, const std::string& data) {
      std::ofstream(vault_->path(rel), std::ios::binary) << data;
      expected_[rel] = Expected{'f', data, {}};
    };
    auto bytes = [](size_t n, uint32_t seed) {
      const auto v = test::Pattern(n, seed);
      return std::string(v.begin(), v.end());
    };
    put("a", "x");
    put("empty", "");
    put("pages", bytes(2 * 4096 + 100, 1));
    put("sealed", bytes(5000, 2));
    ASSERT_TRUE(test::Ok(::mkdir(vault_->path("d").c_str(), 0755)));
    expected_["d"] = Expected{'d', "", {}};
    put("d/inner", bytes(300, 3));
    ASSERT_TRUE(test::Ok(::setxattr(vault_->path("d/inner").c_str(), "user.k", "value", 5, 0)));
    expected_["d/inner"].xattrs["user.k"] = "value";
    put("d/" + std::string(200, 'n'), "long name");
    ASSERT_TRUE(test::Ok(::symlink("pages", vault_->path("l").c_str())));
    expected_["l"] = Expected{'l', "pages", {}};
    vault_->Unmount();
    const test::ProcessResult r =
        test::RunProcess({SIGILFS_BINARY, "verity", "enable", vault_->cipher(), "sealed",
                          "--passfile", vault_->passfile()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    vault_->Mount();
    idle_fds_ = vault_->DaemonOpenFiles();
    pristine_ = CipherSnapshot(vault_->cipher());
    ASSERT_EQ(Check(), Outcome::kSame) << "the untouched vault must read back whole";
  }

  enum class Outcome { kSame, kDetected, kDifferent };

  // Reads everything through the mount, from cold caches. kDifferent (with a test failure
  // naming what) if anything reads back other than it was stored; kDetected if some read
  // failed or some name is missing.
  Outcome Check(const std::string& what = "") {
    // The kernel caches names, attributes and pages: drop its dentries and inodes (the pages
    // of a FUSE inode go with it), so every read reaches the daemon, which forgets the nodes
    // the kernel forgets, and their directory IVs.
    test::DropKernelCachesNow();
    // And the daemon must have let go of the last check's files (their plaintext is cached).
    vault_->WaitForReleases(idle_fds_);
    bool detected = false;
    bool different = false;
    auto differ = [&](const std::string& rel, const std::string& how) {
      ADD_FAILURE() << what << ": " << rel << " " << how;
      different = true;
    };
    std::set<std::string> seen;
    std::function<void(const std::string&)> walk = [&](const std::string& dir) {
      std::vector<std::string> names;
      if (!test::ListDir(vault_->path(dir), &names)) {
        detected = true;
        return;
      }
      for (const std::string& name : names) {
        if (name == "." || name == "..") continue;
        const std::string rel = dir.empty() ? name : dir + "/" + name;
        const auto want = expected_.find(rel);
        if (want == expected_.end()) {
          differ(rel, "appeared");
          continue;
        }
        seen.insert(rel);
        if (!CheckEntry(rel, want->second, &detected, differ)) continue;
        if (want->second.type == 'd') walk(rel);
      }
    };
    walk("");
    if (seen.size() != expected_.size()) detected = true;
    struct statfs sf;
    if (::statfs(vault_->plain().c_str(), &sf) != 0 || sf.f_type != test::kFuseSuperMagic) {
      ADD_FAILURE() << what << ": the mount stopped serving: " << test::ErrnoName(errno);
      different = true;
    }
    return different ? Outcome::kDifferent : detected ? Outcome::kDetected : Outcome::kSame;
  }

  // One entry: its type, contents page by page, link target and attributes. False if it
  // could not be looked at.
  bool CheckEntry(const std::string& rel, const Expected& want, bool* detected,
                  const std::function<void(const std::string&, const std::string&)>& differ) {
    const std::string p = vault_->path(rel);
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      *detected = true;
      return false;
    }
    const char type = S_ISDIR(st.st_mode) ? 'd' : S_ISLNK(st.st_mode) ? 'l' : 'f';
    if (type != want.type) {
      differ(rel, std::string("has type ") + type);
      return false;
    }
    if (type == 'l') {
      char target[4096];
      const ssize_t n = ::readlink(p.c_str(), target, sizeof target);
      if (n < 0)
        *detected = true;
      else if (std::string(target, static_cast<size_t>(n)) != want.data)
        differ(rel, "links elsewhere");
      return true;
    }
    if (type == 'f') {
      if (static_cast<size_t>(st.st_size) != want.data.size())
        differ(rel, "has size " + std::to_string(st.st_size));
      const int fd = ::open(p.c_str(), O_RDONLY);
      if (fd < 0) {
        *detected = true;
      } else {
        // The kernel keeps a file's pages across opens (keep_cache): drop them.
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        // Page by page: each page reads whole and right, or fails; nothing after the end.
        char page[4096];
        for (size_t at = 0; at <= want.data.size(); at += sizeof page) {
          const size_t len = std::min(sizeof page, want.data.size() - at);
          const ssize_t n = ::pread(fd, page, sizeof page, static_cast<off_t>(at));
          if (n < 0) {
            *detected = true;
          } else if (static_cast<size_t>(n) != len ||
                     std::string(page, len) != want.data.substr(at, len)) {
            differ(rel, "reads other data at " + std::to_string(at));
          }
        }
        ::close(fd);
      }
    }
    for (const std::string& name : XattrNames(p)) {
      if (want.xattrs.count(name) == 0) differ(rel, "has attribute " + name);
    }
    for (const auto& [name, value] : want.xattrs) {
      const auto got = Xattr(p, name);
      if (!got)
        *detected = true;
      else if (*got != value)
        differ(rel, "has another value of " + name);
    }
    return true;
  }

  // Applies `change` to the cipher directory, checks through the mount, undoes it, and checks
  // that the cipher directory is as before. Counts outcomes.
  Outcome Try(const std::string& what, const std::function<void()>& change,
              const std::function<void()>& undo) {
    change();
    const Outcome o = Check(what);
    undo();
    ++tried_;
    if (o == Outcome::kDetected) ++detected_;
    if (o == Outcome::kDifferent) ++different_;
    const auto now = CipherSnapshot(vault_->cipher());
    if (now != pristine_) {
      ADD_FAILURE() << what << ": reading through the mount changed the cipher directory";
      pristine_ = now;
    }
    return o;
  }

  // Byte offsets to change in a cipher file: all in the long run; by default the first 96 and
  // last 384 (header, first nonce, a sealed file's pins and trailer), the first and last 96 of
  // [dense_from, dense_to) (a sealed file's record) and every 211th in between.
  static std::vector<size_t> Offsets(size_t size, size_t dense_from = 0, size_t dense_to = 0) {
    std::vector<size_t> out;
    for (size_t i = 0; i < size; ++i) {
      const bool dense =
          i >= dense_from && i < dense_to && (i < dense_from + 96 || i + 96 >= dense_to);
      if (LongRun() || i < 96 || i + 384 >= size || dense || i % 211 == 0) out.push_back(i);
    }
    return out;
  }

  // Flips bit `at` % 8 of the byte at `at`: one bit, a different one from byte to byte (in the
  // sealed file's flags, header byte 10, the bound flag). Cleared flags would not change the
  // cipher directory either: the record authenticates and binds the last page, so the file
  // stays sealed and its open writes nothing (docs/design/verity.md, "Binding the seal";
  // VerityTest.ASealedFileWhoseFlagsWereClearedStaysSealed).
  static void FlipByte(const std::string& path, size_t at) {
    const int fd = ::open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0) << path;
    unsigned char b;
    ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(at)), 1);
    b ^= static_cast<unsigned char>(1u << (at % 8));  // one bit, a different one each time
    ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(at)), 1);
    ::close(fd);
  }

  // Another base64url character, so the changed name is still well formed.
  static char OtherChar(char c) {
    static const std::string kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const size_t i = kAlphabet.find(c);
    return i == std::string::npos ? 'A' : kAlphabet[(i + 1) % kAlphabet.size()];
  }

  // The config, the root's IV and the lock file (empty; its name is never a plaintext name).
  bool IsMountTimeFile(const fs::path& p) const {
    return p.parent_path() == fs::path(vault_->cipher()) &&
           (p.filename() == "sigilfs.conf" || p.filename() == "sigilfs.diriv" ||
            p.filename() == "sigilfs.lock");
  }

  // Whether the directory of this IV file also holds its IV in an attribute.
  static bool HasIvAttribute(const fs::path& iv_file) {
    std::array<uint8_t, core::kDirIvSize> attr;
    return ::getxattr(iv_file.parent_path().c_str(), core::kDirIvAttrName, attr.data(),
                      attr.size()) == static_cast<ssize_t>(attr.size());
  }

  // Whether `sigilfs fsck` of the cipher directory fails with `problem` in its report.
  bool FsckReports(const std::string& problem) const {
    const test::ProcessResult r = test::RunProcess(
        {SIGILFS_BINARY, "fsck", vault_->cipher(), "--passfile", vault_->passfile()});
    return r.exit_code == 1 && r.out.find(problem) != std::string::npos;
  }

  void Report() {
    std::printf("tamper battery: %zu changes, %zu detected, %zu without effect, %zu different\n",
                tried_, detected_, tried_ - detected_ - different_, different_);
    RecordProperty("changes", static_cast<int>(tried_));
    RecordProperty("detected", static_cast<int>(detected_));
  }

  std::unique_ptr<test::MountedVault> vault_;
  Tree expected_;
  std::map<std::string, std::string> pristine_;
  size_t idle_fds_ = 0;  // the daemon's open files (DaemonOpenFiles) with nothing open
  size_t tried_ = 0, detected_ = 0, different_ = 0;
};

TEST_F(MountTamperTest, EveryChangedByteOfAFileGivesTheDataOrAnError) {
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(vault_->cipher()))
    if (e.is_regular_file() && !e.is_symlink() && !IsMountTimeFile(e.path()))
      files.push_back(e.path());
  size_t padding = 0;
  size_t iv_copies = 0;
  for (const fs::path& file : files) {
    const size_t size = fs::file_size(file);
    // Every byte of an unsealed file is a header byte or inside an authenticated unit. The
    // sealed file (5000 bytes) holds data page 0, data page 1 (904 bytes: a short unit), unused
    // room up to unit 16 (its tree starts at the next 64 KiB of plaintext), one tree block, the
    // record, one pin block and an 8-byte trailer: nothing reads the unused room.
    const bool sealed = size > 64 * 1024;
    const size_t unit = (size - kFileHeader - 8) / 19;
    const size_t padding_from = kFileHeader + unit + (5000 - 4096) + (unit - 4096);
    const size_t padding_to = kFileHeader + 16 * unit;
    const size_t record_from = kFileHeader + 17 * unit;
    for (const size_t at :
         sealed ? Offsets(size, record_from, record_from + unit) : Offsets(size)) {
      const std::string what = file.filename().string() + " byte " + std::to_string(at);
      // A directory's IV file beside its attribute copy is the copy for backups that drop
      // attributes: the mount reads the attribute, so a change leaves the data whole, and
      // fsck, which compares the two, must report it.
      const bool iv_copy = file.filename() == core::kDirIvFileName && HasIvAttribute(file);
      bool fsck_saw = false;
      const Outcome o = Try(
          what,
          [&] {
            FlipByte(file, at);
            if (iv_copy) fsck_saw = FsckReports("IV file and attribute differ");
          },
          [&] { FlipByte(file, at); });
      if (iv_copy) {
        ++iv_copies;
        EXPECT_EQ(o, Outcome::kSame) << what;
        EXPECT_TRUE(fsck_saw) << what << ": fsck did not report the differing IV copies";
        continue;
      }
      if (o != Outcome::kSame) continue;
      if (sealed && at >= padding_from && at < padding_to)
        ++padding;
      else
        ADD_FAILURE() << what << ": the change went unseen";
      if (different_ > 3) return;
    }
  }
  Report();
  std::printf("changes without effect (all in the sealed file's padding): %zu\n", padding);
  std::printf("changes of IV files kept beside an attribute copy (fsck reported each): %zu\n",
              iv_copies);
  EXPECT_EQ(different_, 0u);
  EXPECT_EQ(Check("after"), Outcome::kSame);
}

TEST_F(MountTamperTest, EveryChangedNameLinkAndAttributeGivesTheDataOrAnError) {
  std::vector<fs::path> entries;
  for (const auto& e : fs::recursive_directory_iterator(vault_->cipher()))
    if (!IsMountTimeFile(e.path())) entries.push_back(e.path());
  for (const fs::path& entry : entries) {
    // The stored name, one character at a time.
    const std::string name = entry.filename().string();
    for (size_t i = 0; i < name.size(); ++i) {
      std::string changed = name;
      changed[i] = OtherChar(name[i]);
      const fs::path to = entry.parent_path() / changed;
      Try(
          "name " + name + " char " + std::to_string(i), [&] { fs::rename(entry, to); },
          [&] { fs::rename(to, entry); });
    }
    // The stored link target, one character at a time.
    if (fs::is_symlink(entry)) {
      const std::string target = fs::read_symlink(entry).string();
      for (size_t i = 0; i < target.size(); ++i) {
        std::string changed = target;
        changed[i] = OtherChar(target[i]);
        auto relink = [&](const std::string& t) {
          fs::remove(entry);
          fs::create_symlink(t, entry);
        };
        Try(
            "link " + name + " char " + std::to_string(i), [&] { relink(changed); },
            [&] { relink(target); });
      }
    }
    // Stored attribute values, one bit of each byte at a time.
    for (const std::string& attr : XattrNames(entry.string())) {
      const std::string value = *Xattr(entry.string(), attr);
      for (size_t i = 0; i < value.size(); ++i) {
        std::string changed = value;
        changed[i] = static_cast<char>(changed[i] ^ (1 << (i % 8)));
        auto set = [&](const std::string& v) {
          ASSERT_EQ(::lsetxattr(entry.c_str(), attr.c_str(), v.data(), v.size(), 0), 0);
        };
        Try(
            "attribute " + attr + " of " + name + " byte " + std::to_string(i),
            [&] { set(changed); }, [&] { set(value); });
      }
    }
    if (different_ > 3) break;
  }
  Report();
  EXPECT_EQ(different_, 0u);
  // A stored name is its ciphertext: any change is noticed (the entry is skipped).
  EXPECT_EQ(detected_, tried_);
  EXPECT_EQ(Check("after"), Outcome::kSame);
}

// A sealed file whose size cannot be established (its trailer changed) still has a name: stat
// and open fail, but it can be renamed and removed, as any damaged file can.
TEST_F(MountTamperTest, ADamagedSealedFileCanBeRenamedAndRemoved) {
  fs::path sealed;
  for (const auto& e : fs::recursive_directory_iterator(vault_->cipher()))
    if (e.is_regular_file() && e.file_size() > 64 * 1024) sealed = e.path();
  ASSERT_FALSE(sealed.empty());
  FlipByte(sealed.string(), fs::file_size(sealed) - 3);  // in the trailer
  ASSERT_TRUE(test::DropKernelCachesNow());
  struct stat st;
  EXPECT_TRUE(test::FailsWith(::stat(vault_->path("sealed").c_str(), &st), EIO));
  EXPECT_TRUE(test::FailsWith(::open(vault_->path("sealed").c_str(), O_RDONLY), EIO));
  ASSERT_TRUE(test::Ok(::rename(vault_->path("sealed").c_str(), vault_->path("moved").c_str())));
  ASSERT_TRUE(test::Ok(::unlink(vault_->path("moved").c_str())));
  EXPECT_FALSE(fs::exists(sealed));
}

// The vault's own files are read when it is mounted: a changed byte of the configuration or of
// the root directory's IV makes the mount fail with a message, or leaves the data unchanged.
TEST_F(MountTamperTest, EveryChangedByteOfTheVaultFilesFailsTheMountOrChangesNothing) {
  size_t refused = 0;
  for (const char* file : {"sigilfs.diriv", "sigilfs.conf"}) {
    const std::string path = vault_->cipher() + "/" + file;
    const size_t size = fs::file_size(path);
    for (size_t at = 0; at < size; at += LongRun() ? 1 : 9) {
      vault_->Unmount();
      FlipByte(path, at);
      bool mounted = true;
      try {
        vault_->Mount();
      } catch (const std::runtime_error& e) {
        mounted = false;
        ++refused;
        EXPECT_NE(std::string(e.what()).find("sigilfs"), std::string::npos) << e.what();
      }
      const std::string what = std::string(file) + " byte " + std::to_string(at);
      const Outcome o = mounted ? Check(what) : Outcome::kDetected;
      ++tried_;
      if (o == Outcome::kDetected) ++detected_;
      if (o == Outcome::kDifferent) ++different_;
      vault_->Unmount();
      FlipByte(path, at);
      if (different_ > 3) break;
    }
  }
  vault_->Mount();
  Report();
  std::printf("mounts refused: %zu\n", refused);
  EXPECT_EQ(different_, 0u);
  EXPECT_GT(refused, 0u);
  EXPECT_EQ(Check("after"), Outcome::kSame);
}

}  // namespace
}  // namespace sigilfs
