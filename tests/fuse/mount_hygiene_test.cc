// What a mounted vault leaves in its cipher directory: no plaintext names, targets or data,
// and damaged ciphertext or names are refused (EIO, hidden) without bringing the daemon down.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/core/names.h"
#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"

namespace sigilfs {
namespace {

using test::ErrnoName;
using test::FailsWith;
using test::ListDir;
using test::Ok;

namespace fs = std::filesystem;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;
using ::testing::UnorderedElementsAre;

constexpr size_t kPage = 4096;
constexpr size_t kHeaderSize = 32;
constexpr size_t kUnitSize = 12 + kPage + 16;  // AES-256-GCM: nonce, page, tag

std::string Repeat(std::string_view s, size_t times) {
  std::string out;
  for (size_t i = 0; i < times; ++i) out += s;
  return out;
}

// Writes `data` to a new or truncated file with open/write/close.
AssertionResult WriteFile(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return AssertionFailure() << "open(" << path << "): " << ErrnoName(errno);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      return AssertionFailure() << "write(" << path << ") at " << done << ": " << ErrnoName(e);
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return AssertionFailure() << "close(" << path << "): " << ErrnoName(errno);
  return AssertionSuccess();
}

// The file at `path` reads back (open/read/close) as exactly `expected`.
AssertionResult HasContent(const std::string& path, std::string_view expected) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return AssertionFailure() << "open(" << path << "): " << ErrnoName(errno);
  std::string actual;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return AssertionFailure() << "read(" << path << "): " << ErrnoName(e);
    }
    if (n == 0) break;
    actual.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (actual == expected) return AssertionSuccess();
  return AssertionFailure() << path << " holds " << actual.size() << " bytes, expected "
                            << expected.size() << " (or the bytes differ)";
}

// pread of page `index` of `fd` returns exactly that page of `data`.
AssertionResult PreadsPage(int fd, size_t index, const std::string& data) {
  std::string buf(kPage, '\0');
  const ssize_t n = ::pread(fd, buf.data(), kPage, static_cast<off_t>(index * kPage));
  if (n < 0) return AssertionFailure() << "pread of page " << index << ": " << ErrnoName(errno);
  if (static_cast<size_t>(n) != kPage) {
    return AssertionFailure() << "pread of page " << index << " returned " << n << " bytes, not "
                              << kPage;
  }
  if (buf != data.substr(index * kPage, kPage)) {
    return AssertionFailure() << "page " << index << " holds the wrong bytes";
  }
  return AssertionSuccess();
}

bool IsBase64Url(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    if (!ok) return false;
  }
  return true;
}

// Regular files directly in `dir` whose names have no '.' (encrypted names, not the vault's).
std::vector<fs::path> EncryptedFilesIn(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string().find('.') == std::string::npos) {
      out.push_back(e.path());
    }
  }
  return out;
}

class MountHygieneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (test::FuseAvailable()) vault_ = std::make_unique<test::MountedVault>();
  }
  std::string P(const std::string& rel) const { return vault_->path(rel); }

  std::unique_ptr<test::MountedVault> vault_;
};

TEST_F(MountHygieneTest, CipherDirectoryHoldsNoPlaintext) {
  SIGILFS_NEEDS_FUSE();
  const std::string data = Repeat("MARKERDATA", 1000);  // several pages
  ASSERT_TRUE(Ok(::mkdir(P("MARKERNAME-dir").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("MARKERNAME-dir/MARKERNAME-subdir").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("MARKERNAME-dir/MARKERNAME-subdir/MARKERNAME-file"), data));
  ASSERT_TRUE(WriteFile(P("MARKERNAME-small"), "MARKERDATA"));
  ASSERT_TRUE(WriteFile(P("MARKERNAME-dir/MARKERNAME-renamed-from"), "MARKERDATA renamed"));
  ASSERT_TRUE(Ok(::rename(P("MARKERNAME-dir/MARKERNAME-renamed-from").c_str(),
                          P("MARKERNAME-renamed-to").c_str())));
  // A 255-byte name goes to a long-name side file; a long directory name too.
  const std::string long_name = Repeat("MARKERNAME", 25) + "-long";
  ASSERT_EQ(long_name.size(), 255u);
  ASSERT_TRUE(WriteFile(P(long_name), data));
  ASSERT_TRUE(Ok(::mkdir(P("MARKERNAME-dir/" + Repeat("MARKERNAME", 25) + "-ldir").c_str(), 0755)));
  ASSERT_TRUE(
      WriteFile(P("MARKERNAME-dir/" + Repeat("MARKERNAME", 25) + "-ldir/MARKERNAME-f"), data));
  // Symlinks: short, long (past the backing name limit), relative and absolute targets.
  ASSERT_TRUE(Ok(::symlink("MARKERNAME-target", P("MARKERNAME-link").c_str())));
  ASSERT_TRUE(Ok(::symlink(("/MARKERDATA/" + Repeat("MARKERNAME/", 80)).c_str(),
                           P("MARKERNAME-dir/MARKERNAME-longlink").c_str())));
  ASSERT_TRUE(Ok(::link(P("MARKERNAME-small").c_str(), P("MARKERNAME-hardlink").c_str())));
  ASSERT_TRUE(Ok(::mknod(P("MARKERNAME-fifo").c_str(), S_IFIFO | 0644, 0)));
  // Data far into a file (after a hole) and in a file written in small pieces.
  {
    const int fd = ::open(P("MARKERNAME-sparse").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_TRUE(Ok(fd));
    EXPECT_TRUE(Ok(::pwrite(fd, "MARKERDATA", 10, 5 * kPage + 3)));
    for (int i = 0; i < 50; ++i) EXPECT_TRUE(Ok(::pwrite(fd, "MARKERDATA", 10, 10 * i)));
    EXPECT_TRUE(Ok(::fsync(fd)));
    EXPECT_TRUE(Ok(::close(fd)));
  }
  EXPECT_TRUE(HasContent(P("MARKERNAME-dir/MARKERNAME-subdir/MARKERNAME-file"), data));
  vault_->Unmount();

  const std::vector<std::string> markers = {"MARKERNAME", "MARKERDATA", "MARKER",
                                            "test passphrase"};
  auto leaks = [&markers](std::string_view where, std::string_view bytes) {
    std::string found;
    for (const std::string& m : markers) {
      if (bytes.find(m) != std::string_view::npos) found += " \"" + m + "\"";
    }
    return found.empty() ? std::string() : std::string(where) + " contains" + found;
  };
  size_t files = 0, dirs = 0, links = 0, others = 0;
  std::vector<std::string> problems;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(vault_->cipher())) {
    const std::string rel = e.path().lexically_relative(vault_->cipher()).string();
    const std::string name = e.path().filename().string();
    if (std::string p = leaks("the name " + rel, name); !p.empty()) problems.push_back(p);
    if (name.find('.') != std::string::npos) {
      if (name.rfind("sigilfs.", 0) != 0) {
        problems.push_back(rel + ": a name with a '.' that is not the vault's own (sigilfs.*)");
      }
    } else if (!IsBase64Url(name)) {
      problems.push_back(rel + ": an encrypted name outside [A-Za-z0-9_-]");
    }
    const fs::file_status st = e.symlink_status();
    if (fs::is_symlink(st)) {
      ++links;
      const std::string target = fs::read_symlink(e.path()).string();
      if (std::string p = leaks("the symlink target of " + rel, target); !p.empty()) {
        problems.push_back(p);
      }
    } else if (fs::is_regular_file(st)) {
      ++files;
      if (std::string p = leaks("the bytes of " + rel, test::ReadAll(e.path())); !p.empty()) {
        problems.push_back(p);
      }
    } else if (fs::is_directory(st)) {
      ++dirs;
    } else {
      ++others;
    }
  }
  EXPECT_THAT(problems, ::testing::IsEmpty());
  // The walk saw the tree: 3 directories, 2 symlinks, a FIFO and the files.
  EXPECT_GE(dirs, 3u);
  EXPECT_GE(links, 2u);
  EXPECT_GE(others, 1u);
  EXPECT_GE(files, 7u);
}

TEST_F(MountHygieneTest, TamperedPageFailsWithEioAndOnlyThatPage) {
  SIGILFS_NEEDS_FUSE();
  std::string data(3 * kPage, '\0');
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>('a' + (i * 7 + i / kPage) % 26);
  }
  ASSERT_TRUE(WriteFile(P("pages"), data));
  vault_->Unmount();

  const std::vector<fs::path> encrypted = EncryptedFilesIn(vault_->cipher());
  ASSERT_EQ(encrypted.size(), 1u) << "the only encrypted file in the cipher directory";
  ASSERT_EQ(fs::file_size(encrypted[0]), kHeaderSize + 3 * kUnitSize)
      << "3 full AES-256-GCM page units after the header";
  const off_t flip_at = static_cast<off_t>(kHeaderSize + kUnitSize + kUnitSize / 2);
  {
    const int fd = ::open(encrypted[0].c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_TRUE(Ok(fd));
    char byte;
    ASSERT_EQ(::pread(fd, &byte, 1, flip_at), 1);
    byte ^= 0x01;
    ASSERT_EQ(::pwrite(fd, &byte, 1, flip_at), 1);
    ASSERT_TRUE(Ok(::close(fd)));
  }
  vault_->Remount();

  const int fd = ::open(P("pages").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_TRUE(Ok(fd)) << "opening a file with a damaged page still works";
  EXPECT_TRUE(PreadsPage(fd, 0, data)) << "page 0 reads correctly";
  std::string buf(kPage, '\0');
  EXPECT_TRUE(FailsWith(::pread(fd, buf.data(), kPage, kPage), EIO)) << "page 1 was tampered with";
  EXPECT_TRUE(buf == std::string(kPage, '\0')) << "no bytes of a failed page reach the caller";
  EXPECT_TRUE(FailsWith(::pread(fd, buf.data(), 10, kPage + 100), EIO))
      << "a part of page 1, asked for again";
  EXPECT_TRUE(PreadsPage(fd, 2, data)) << "page 2 reads correctly, after the failed page";
  ::close(fd);
  struct stat st;
  EXPECT_TRUE(Ok(::stat(P("pages").c_str(), &st))) << "the daemon is still up";
  EXPECT_EQ(st.st_size, static_cast<off_t>(3 * kPage));
}

TEST_F(MountHygieneTest, DamagedNameIsHiddenAndTheOthersAreListed) {
  SIGILFS_NEEDS_FUSE();
  // Different sizes tell the cipher files apart: 60 + n bytes for n bytes of plaintext.
  ASSERT_TRUE(WriteFile(P("alpha"), "1"));
  ASSERT_TRUE(WriteFile(P("beta"), "22"));
  ASSERT_TRUE(WriteFile(P("gamma"), "333"));
  vault_->Unmount();

  fs::path beta;
  for (const fs::path& p : EncryptedFilesIn(vault_->cipher())) {
    if (fs::file_size(p) == kHeaderSize + 12 + 2 + 16) beta = p;
  }
  ASSERT_FALSE(beta.empty()) << "no cipher file of beta's size";
  // Flip the first character within the alphabet: still canonical base64url, wrong SIV tag.
  std::string damaged = beta.filename().string();
  damaged[0] = damaged[0] == 'A' ? 'B' : 'A';
  ASSERT_TRUE(IsBase64Url(damaged));
  fs::rename(beta, beta.parent_path() / damaged);
  vault_->Remount();

  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> names;
    ASSERT_TRUE(ListDir(vault_->plain(), &names)) << "readdir with a damaged entry";
    EXPECT_THAT(names, UnorderedElementsAre(".", "..", "alpha", "gamma"))
        << "the damaged entry is not listed; the others are";
  }
  struct stat st;
  EXPECT_TRUE(FailsWith(::stat(P("beta").c_str(), &st), ENOENT));
  EXPECT_TRUE(Ok(::stat(P("alpha").c_str(), &st))) << "the daemon is still up";
  EXPECT_TRUE(HasContent(P("alpha"), "1"));
  EXPECT_TRUE(HasContent(P("gamma"), "333"));
  struct statfs sf;
  ASSERT_TRUE(Ok(::statfs(vault_->plain().c_str(), &sf)));
  EXPECT_EQ(sf.f_type, test::kFuseSuperMagic) << "still mounted";
  // New files can still be made next to the damaged entry.
  EXPECT_TRUE(WriteFile(P("delta"), "4444"));
  std::vector<std::string> names;
  ASSERT_TRUE(ListDir(vault_->plain(), &names));
  EXPECT_THAT(names, UnorderedElementsAre(".", "..", "alpha", "gamma", "delta"));
}

// A crash can keep a new directory but not its IV file's data, which mkdir no longer flushes (ext4,
// XFS, tmpfs): the IV is also in the directory's attribute, written with the directory itself.
// The names read through it, and the mount puts the file back.
TEST_F(MountHygieneTest, ADirectoryWhoseIvFileWasLostReadsThroughItsAttributeAndGetsItBack) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("d/inner"), "contents"));
  ASSERT_TRUE(Ok(::mkdir(P("e").c_str(), 0755)));
  vault_->Unmount();

  std::vector<fs::path> dirs;
  for (const fs::directory_entry& e : fs::directory_iterator(vault_->cipher()))
    if (e.is_directory()) dirs.push_back(e.path());
  ASSERT_EQ(dirs.size(), 2u);
  for (const fs::path& d : dirs) {
    const fs::path iv_file = d / core::kDirIvFileName;
    ASSERT_EQ(fs::file_size(iv_file), core::kDirIvSize);
    std::array<uint8_t, core::kDirIvSize> attr;
    ASSERT_EQ(::getxattr(d.c_str(), core::kDirIvAttrName, attr.data(), attr.size()),
              static_cast<ssize_t>(attr.size()))
        << "no IV attribute on " << d;
    EXPECT_EQ(test::ReadAll(iv_file), std::string(attr.begin(), attr.end()));
    fs::resize_file(iv_file, 0);  // what a crash leaves of a file created but never flushed
  }
  // The empty one ("e": nothing but its IV file) loses its attribute as well: it has no IV left.
  const auto entries = [](const fs::path& d) {
    return std::distance(fs::directory_iterator(d), fs::directory_iterator());
  };
  const fs::path lost = entries(dirs[0]) == 1 ? dirs[0] : dirs[1];
  ASSERT_EQ(entries(lost), 1);
  ASSERT_EQ(::removexattr(lost.c_str(), core::kDirIvAttrName), 0);
  vault_->Remount();

  EXPECT_TRUE(HasContent(P("d/inner"), "contents")) << "read through the attribute's IV";
  std::vector<std::string> names;
  ASSERT_TRUE(ListDir(P("d"), &names));
  EXPECT_THAT(names, UnorderedElementsAre(".", "..", "inner"));
  ASSERT_TRUE(WriteFile(P("d/new"), "n"));
  struct stat st;
  EXPECT_TRUE(FailsWith(::stat(P("e/x").c_str(), &st), EIO)) << "a directory without any IV";
  vault_->Unmount();
  for (const fs::path& d : dirs)
    if (d != lost) {
      EXPECT_EQ(fs::file_size(d / core::kDirIvFileName), core::kDirIvSize);
    }
  EXPECT_NE(vault_->log().find("file restored"), std::string::npos) << vault_->log();
  vault_->Mount();
}

// Each long name's side file put in the other's place: a side file must hash to its entry's
// stored name, so neither entry is listed (a log line names each). A lookup derives the stored
// name from the plaintext name and reads no side file: each name still opens its own file.
TEST_F(MountHygieneTest, SwappedLongNameSideFilesHideBothEntries) {
  SIGILFS_NEEDS_FUSE();
  const std::string first = Repeat("f", 200), second = Repeat("s", 200);
  ASSERT_TRUE(WriteFile(P(first), "first"));
  ASSERT_TRUE(WriteFile(P(second), "second"));
  ASSERT_TRUE(WriteFile(P("short"), "short"));
  vault_->Unmount();

  std::vector<fs::path> sides;
  for (const fs::directory_entry& e : fs::directory_iterator(vault_->cipher())) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("sigilfs.long.") && name.ends_with(".name")) sides.push_back(e.path());
  }
  ASSERT_EQ(sides.size(), 2u);
  ASSERT_NE(test::ReadAll(sides[0]), test::ReadAll(sides[1]));
  ASSERT_TRUE(
      Ok(::renameat2(AT_FDCWD, sides[0].c_str(), AT_FDCWD, sides[1].c_str(), RENAME_EXCHANGE)));
  vault_->Mount();

  std::vector<std::string> names;
  ASSERT_TRUE(ListDir(vault_->plain(), &names));
  EXPECT_THAT(names, UnorderedElementsAre(".", "..", "short"));
  for (const fs::path& side : sides) {
    const std::string stored = side.stem().string();  // without ".name"
    EXPECT_NE(
        vault_->log().find("left out of listings, as its name does not decrypt: " + stored + " ("),
        std::string::npos)
        << vault_->log();
  }
  EXPECT_TRUE(HasContent(P(first), "first"));
  EXPECT_TRUE(HasContent(P(second), "second"));
}

// Two cipher files of one directory, each renamed to the other's stored name: names are bound
// to their directory, not to the contents, and each file's pages authenticate under its own
// header, so the files trade places whole (not caught). A sealed file's digest goes with it.
TEST_F(MountHygieneTest, SwappedCipherFilesTradePlacesWhole) {
  SIGILFS_NEEDS_FUSE();
  const std::string one = Repeat("one ", 3000);  // 3 pages: sizes tell the cipher files apart
  const std::string two = "two";
  ASSERT_TRUE(WriteFile(P("one"), one));
  ASSERT_TRUE(WriteFile(P("two"), two));
  vault_->Unmount();
  auto verity = [&](const std::string& verb, const std::string& name) {
    return test::RunProcess(
        {SIGILFS_BINARY, "verity", verb, vault_->cipher(), name, "--passfile", vault_->passfile()});
  };
  const test::ProcessResult sealed = verity("enable", "one");
  ASSERT_EQ(sealed.exit_code, 0) << sealed.err;
  const std::string digest = sealed.out.substr(0, sealed.out.find(' '));
  ASSERT_TRUE(digest.starts_with("sha256:")) << sealed.out;

  const std::vector<fs::path> encrypted = EncryptedFilesIn(vault_->cipher());
  ASSERT_EQ(encrypted.size(), 2u);
  ASSERT_NE(fs::file_size(encrypted[0]), fs::file_size(encrypted[1]));
  ASSERT_TRUE(Ok(::renameat2(AT_FDCWD, encrypted[0].c_str(), AT_FDCWD, encrypted[1].c_str(),
                             RENAME_EXCHANGE)));

  const test::ProcessResult moved = verity("measure", "two");
  ASSERT_EQ(moved.exit_code, 0) << moved.err;
  EXPECT_EQ(moved.out.substr(0, moved.out.find(' ')), digest);
  const test::ProcessResult unsealed = verity("measure", "one");
  EXPECT_EQ(unsealed.exit_code, 1);
  EXPECT_NE(unsealed.err.find("not sealed"), std::string::npos) << unsealed.err;

  vault_->Mount();
  std::vector<std::string> names;
  ASSERT_TRUE(ListDir(vault_->plain(), &names));
  EXPECT_THAT(names, UnorderedElementsAre(".", "..", "one", "two"));
  EXPECT_TRUE(HasContent(P("one"), two));
  EXPECT_TRUE(HasContent(P("two"), one));
}

// Another actor removes a directory from the cipher tree while the mount works in it (the
// daemon keeps the handles of directories in use open): new entries there fail, none lands
// anywhere else in the vault, and the rest of the vault is as it was.
TEST_F(MountHygieneTest, ADirectoryRemovedFromTheCipherTreeWhileInUseTakesNoNewEntries) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_TRUE(Ok(::mkdir(P("d").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(P("keep").c_str(), 0755)));
  ASSERT_TRUE(WriteFile(P("d/x"), std::string(1000, 'x')));
  ASSERT_TRUE(WriteFile(P("keep/y"), "y"));
  // d's cipher directory: the one whose file is the larger.
  fs::path removed;
  uintmax_t largest = 0;
  for (const fs::directory_entry& e : fs::directory_iterator(vault_->cipher())) {
    if (!e.is_directory()) continue;
    const std::vector<fs::path> files = EncryptedFilesIn(e.path());
    if (files.size() == 1 && fs::file_size(files[0]) > largest) {
      largest = fs::file_size(files[0]);
      removed = e.path();
    }
  }
  ASSERT_FALSE(removed.empty());
  fs::remove_all(removed);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::recursive_directory_iterator(vault_->cipher()))
    ++entries;

  const int fd = ::open(P("d/new").c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  const int e = errno;
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(e, ENOENT) << test::ErrnoName(e);
  EXPECT_EQ(::mkdir(P("d/sub").c_str(), 0755), -1);
  size_t after = 0;
  for ([[maybe_unused]] const auto& f : fs::recursive_directory_iterator(vault_->cipher())) ++after;
  EXPECT_EQ(after, entries) << "nothing was made elsewhere";
  EXPECT_TRUE(HasContent(P("keep/y"), "y"));
}

}  // namespace
}  // namespace sigilfs
