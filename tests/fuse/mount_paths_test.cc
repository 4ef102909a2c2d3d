// Long paths through a mounted vault: trees whose plain paths reach PATH_MAX - 1 bytes, with
// names of every length class, and symlink targets of up to PATH_MAX - 1 bytes behave as the
// same steps on the backing filesystem.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

using test::ErrnoName;

// The longest relative path the kernel takes (PATH_MAX counts the terminating NUL).
constexpr size_t kLongest = PATH_MAX - 1;

// A name of `length` bytes, distinct per `salt`, that is neither "." nor "..".
std::string Name(size_t length, int salt) {
  std::string name(length, static_cast<char>('a' + salt % 26));
  name[0] = static_cast<char>('A' + salt % 26);
  return name;
}

// Directory names cycling through `lengths`, as many as fit before a last name of at least
// `leaf_min` bytes; the last name is then sized so the whole path is exactly kLongest bytes.
struct Tree {
  std::vector<std::string> dirs;
  std::string leaf;                      // the file's name in the deepest directory
  std::string Dir(size_t depth) const {  // the path of dirs[0 .. depth)
    std::string p;
    for (size_t i = 0; i < depth; ++i) p += (i ? "/" : "") + dirs[i];
    return p;
  }
  std::string Deepest() const { return Dir(dirs.size()); }
  std::string File(const std::string& name) const { return Deepest() + "/" + name; }
};

Tree MakeTree(const std::vector<size_t>& lengths, size_t leaf_min) {
  Tree t;
  size_t used = 0;  // bytes of "d/d/.../" so far
  for (size_t i = 0;; ++i) {
    const size_t len = lengths[i % lengths.size()];
    if (used + len + 1 + leaf_min > kLongest) break;
    t.dirs.push_back(Name(len, static_cast<int>(i)));
    used += len + 1;
  }
  t.leaf = Name(kLongest - used, 7);
  return t;
}

// Runs the same steps under `root` (a directory descriptor) and returns what each gave, one line
// per step, so the mount's answers can be compared with the backing filesystem's. `between`
// runs once the tree is built (a remount for the mount) and returns the root descriptor to use
// from then on.
std::vector<std::string> Steps(int root, const Tree& t, const std::function<int()>& between) {
  std::vector<std::string> out;
  auto note = [&](const std::string& what, long rc) {
    out.push_back(what + " -> " + (rc < 0 ? ErrnoName(errno) : std::to_string(rc)));
  };
  // Built level by level from the level above (a walk from the root for each of 2,047 levels
  // would have the kernel revalidate every level, a lookup each, whose cipher paths the daemon
  // opens from the root: minutes), the last level by its whole path.
  int mkdirs_failed = 0;
  int at = ::dup(root);
  for (size_t d = 1; d < t.dirs.size() && at >= 0; ++d) {
    if (::mkdirat(at, t.dirs[d - 1].c_str(), 0755) != 0 && ++mkdirs_failed == 1)
      note("mkdir at depth " + std::to_string(d), -1);
    const int next = ::openat(at, t.dirs[d - 1].c_str(), O_PATH | O_DIRECTORY);
    ::close(at);
    at = next;
  }
  if (at >= 0) ::close(at);
  note("mkdirs failed", mkdirs_failed);
  note("mkdir deepest", ::mkdirat(root, t.Deepest().c_str(), 0755));
  const std::string file = t.File(t.leaf);
  note("path length", static_cast<long>(file.size()));
  const std::string content = "contents at the end of a path of " + std::to_string(file.size());
  {
    const int fd = ::openat(root, file.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0640);
    note("create", fd < 0 ? -1 : 0);
    if (fd >= 0) {
      note("write", ::write(fd, content.data(), content.size()));
      ::close(fd);
    }
  }
  root = between();
  struct stat st;
  const int rc = ::fstatat(root, file.c_str(), &st, AT_SYMLINK_NOFOLLOW);
  note("stat", rc);
  if (rc == 0) {
    note("stat size", st.st_size);
    note("stat mode", st.st_mode);
  }
  {
    const int fd = ::openat(root, file.c_str(), O_RDONLY);
    note("open", fd < 0 ? -1 : 0);
    if (fd >= 0) {
      std::string buf(content.size() + 10, '\0');
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      note("read back equal", n == static_cast<ssize_t>(content.size()) &&
                                  buf.compare(0, content.size(), content) == 0);
      ::close(fd);
    }
  }
  // Every directory on the way lists exactly its child (the deepest one: the file).
  int listings_wrong = 0;
  const long step = std::max<long>(1, static_cast<long>(t.dirs.size()) / 8);
  for (long depth = static_cast<long>(t.dirs.size()); depth >= 1; depth -= step) {
    const auto d = static_cast<size_t>(depth);
    const int fd = ::openat(root, t.Dir(d).c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) {
      note("opendir at depth " + std::to_string(d), -1);
      ++listings_wrong;
      continue;
    }
    DIR* dir = ::fdopendir(fd);
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(dir))  // NOLINT(concurrency-mt-unsafe)
      if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
        names.push_back(e->d_name);
    ::closedir(dir);
    const std::string expected = d == t.dirs.size() ? t.leaf : t.dirs[d];
    if (names != std::vector<std::string>{expected}) ++listings_wrong;
  }
  note("listings wrong", listings_wrong);
  // Rename within the deepest directory, to another name of the same length.
  std::string renamed = t.leaf;
  renamed[renamed.size() - 1] = 'Z';
  note("rename", ::renameat(root, file.c_str(), root, t.File(renamed).c_str()));
  note("stat old name", ::fstatat(root, file.c_str(), &st, 0));
  note("stat new name", ::fstatat(root, t.File(renamed).c_str(), &st, 0));
  // A hard link and a symlink beside it, a name one byte too long, and the deepest directory
  // renamed (its contents moving with it).
  note("link", ::linkat(root, t.File(renamed).c_str(), root, file.c_str(), 0));
  note("link count", ::fstatat(root, file.c_str(), &st, 0) == 0 ? st.st_nlink : -1);
  note("unlink", ::unlinkat(root, file.c_str(), 0));
  const std::string link = t.File("l");
  note("symlink", ::symlinkat("../target", root, link.c_str()));
  char target[64] = {};
  note("readlink", ::readlinkat(root, link.c_str(), target, sizeof target - 1));
  note("readlink target " + std::string(target), 0);
  note("unlink symlink", ::unlinkat(root, link.c_str(), 0));
  note("too long", ::mkdirat(root, (t.File(renamed) + "x").c_str(), 0755));
  const std::string parent = t.Dir(t.dirs.size() - 1);
  const std::string moved = parent + "/" + Name(1, 3);
  note("rename directory", ::renameat(root, t.Deepest().c_str(), root, moved.c_str()));
  note("stat moved file", ::fstatat(root, (moved + "/" + renamed).c_str(), &st, 0));
  if (::fstatat(root, (moved + "/" + renamed).c_str(), &st, 0) == 0) note("moved size", st.st_size);
  note("rename directory back", ::renameat(root, moved.c_str(), root, t.Deepest().c_str()));
  // Everything goes again, from the bottom up.
  note("unlink file", ::unlinkat(root, t.File(renamed).c_str(), 0));
  // The deepest level by its whole path, the others from the level below ("..").
  at = ::openat(root, t.Dir(t.dirs.size() - 1).c_str(), O_PATH | O_DIRECTORY);
  note("rmdir deepest", ::unlinkat(root, t.Deepest().c_str(), AT_REMOVEDIR));
  int rmdirs_failed = 0;
  for (size_t d = t.dirs.size() - 1; d >= 1 && at >= 0; --d) {
    const int up = ::openat(at, "..", O_PATH | O_DIRECTORY);
    ::close(at);
    at = up;
    if ((at < 0 || ::unlinkat(at, t.dirs[d - 1].c_str(), AT_REMOVEDIR) != 0) &&
        ++rmdirs_failed == 1)
      note("rmdir at depth " + std::to_string(d), -1);
  }
  if (at >= 0) ::close(at);
  note("rmdirs failed", rmdirs_failed);
  return out;
}

class MountPathsTest : public ::testing::Test {
 protected:
  // The steps on the backing filesystem (a directory beside the test's vault) and through the
  // mount (remounted once the tree is built, so nothing is left cached), compared.
  void Compare(const Tree& t) {
    SIGILFS_NEEDS_FUSE();
    test::TempDir plain;
    const int plain_root = ::open(plain.path().c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(plain_root, 0);
    const std::vector<std::string> expected = Steps(plain_root, t, [&] { return plain_root; });
    ::close(plain_root);

    test::MountedVault vault;
    int root = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY);
    ASSERT_GE(root, 0);
    const std::vector<std::string> got = Steps(root, t, [&] {
      ::close(root);
      vault.Remount();
      root = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY);
      return root;
    });
    ::close(root);
    EXPECT_EQ(got, expected);
    // The backing filesystem did all of it (so the comparison says something).
    EXPECT_NE(std::find(expected.begin(), expected.end(), "mkdirs failed -> 0"), expected.end());
    EXPECT_NE(std::find(expected.begin(), expected.end(), "read back equal -> 1"), expected.end());
    EXPECT_NE(std::find(expected.begin(), expected.end(), "rmdirs failed -> 0"), expected.end());
  }
};

// One-byte names: 2,047 levels, and the longest cipher path (24 bytes per level, about 49 KB).
TEST_F(MountPathsTest, AFullLengthPathOfOneByteNames) { Compare(MakeTree({1}, 1)); }

// Names of 175 bytes, the longest stored in full (255 encrypted bytes each).
TEST_F(MountPathsTest, AFullLengthPathOfTheLongestFullyStoredNames) {
  Compare(MakeTree({175}, 175));
}

// Names of 255 bytes, stored hashed with a side file each (docs/format.md, "Names").
TEST_F(MountPathsTest, AFullLengthPathOfLongNames) { Compare(MakeTree({255}, 1)); }

// Every length class mixed: short, the size where base64 pads, around the long-name limit.
TEST_F(MountPathsTest, AFullLengthPathOfMixedNames) {
  Compare(MakeTree({1, 13, 60, 174, 175, 176, 255, 2, 100}, 30));
}

// A symlink target of `length` bytes: path components of assorted bytes (no NUL), varying per
// `salt`.
std::string Target(size_t length, int salt) {
  std::string t;
  for (size_t i = 0; t.size() < length; ++i)
    t += (i % 17 == 16) ? '/' : static_cast<char>(1 + (i * 7 + static_cast<size_t>(salt)) % 255);
  t.resize(length);
  if (t.back() == '/') t.back() = 'x';
  return t;
}

std::string ReadLinkAt(int dir, const std::string& path) {
  std::string buf(PATH_MAX + 10, '\0');
  const ssize_t n = ::readlinkat(dir, path.c_str(), buf.data(), buf.size());
  return n < 0 ? "error " + ErrnoName(errno) : buf.substr(0, static_cast<size_t>(n));
}

// The vault's side files of long symlink targets.
size_t TargetFiles(const std::string& cipher) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(cipher))
    if (e.path().filename().string().starts_with("sigilfs.target.")) ++n;
  return n;
}

// Symlinks of every target length up to 4,095 bytes (longer ones in a side file) made, read,
// listed, renamed, linked, replaced and removed as on the backing filesystem; read again after a
// remount, and carried out and in by `sigilfs export` and `import`.
TEST_F(MountPathsTest, SymlinkTargetsUpToPathMax) {
  SIGILFS_NEEDS_FUSE();
  const std::vector<size_t> lengths = {1, 1000, 2999, 3000, 3001, 3500, 4000, 4094, 4095};
  auto steps = [&](int root, const std::function<int()>& between) {
    std::vector<std::string> out;
    auto note = [&](const std::string& what, long rc) {
      out.push_back(what + " -> " + (rc < 0 ? ErrnoName(errno) : std::to_string(rc)));
    };
    note("mkdir", ::mkdirat(root, "d", 0755));
    for (size_t i = 0; i < lengths.size(); ++i) {
      const std::string name = "l" + std::to_string(lengths[i]);
      note("symlink " + name,
           ::symlinkat(Target(lengths[i], static_cast<int>(i)).c_str(), root, name.c_str()));
    }
    note("symlink of 4096 bytes", ::symlinkat(Target(4096, 1).c_str(), root, "l4096"));
    root = between();
    for (size_t i = 0; i < lengths.size(); ++i) {
      const std::string name = "l" + std::to_string(lengths[i]);
      struct stat st;
      note("lstat size " + name,
           ::fstatat(root, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_size : -1);
      note("readlink " + name + " equal",
           ReadLinkAt(root, name) == Target(lengths[i], static_cast<int>(i)));
    }
    // Moved to another directory, linked a second time, one name removed: the other still
    // reads; a file renamed over a long link, and a long link over another.
    note("rename", ::renameat(root, "l4095", root, "d/moved"));
    note("link", ::linkat(root, "d/moved", root, "d/second", 0));
    note("unlink first", ::unlinkat(root, "d/moved", 0));
    note("second equal", ReadLinkAt(root, "d/second") == Target(4095, 8));
    note("create", ::close(::openat(root, "f", O_WRONLY | O_CREAT, 0644)));
    note("rename file over link", ::renameat(root, "f", root, "l4094"));
    note("rename link over link", ::renameat(root, "l4000", root, "l3500"));
    note("over equal", ReadLinkAt(root, "l3500") == Target(4000, 6));
    // Held open (O_PATH) while its last name goes: still readable through the descriptor.
    const int held = ::openat(root, "d/second", O_PATH | O_NOFOLLOW);
    note("unlink held", ::unlinkat(root, "d/second", 0));
    note("held equal", ReadLinkAt(held, "") == Target(4095, 8));
    ::close(held);
    return out;
  };
  test::TempDir plain;
  int plain_root = ::open(plain.path().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(plain_root, 0);
  const std::vector<std::string> expected = steps(plain_root, [&] { return plain_root; });
  ::close(plain_root);
  EXPECT_NE(std::find(expected.begin(), expected.end(), "readlink l4095 equal -> 1"),
            expected.end());

  test::MountedVault vault;
  int root = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(root, 0);
  const std::vector<std::string> got = steps(root, [&] {
    ::close(root);
    vault.Remount();
    root = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY);
    return root;
  });
  EXPECT_EQ(got, expected);
  // Side files are left only for the long links that remain (3001 and 3500), none for removed
  // or replaced ones (the held link's went with the kernel's last reference, by the unmount).
  ::close(root);
  vault.Unmount();
  EXPECT_EQ(TargetFiles(vault.cipher()), 2u);

  // Out with export and in again with import, next to a fresh one.
  const std::string out = (plain.path() / "out").string();
  test::ProcessResult r = test::RunProcess(
      {SIGILFS_BINARY, "export", vault.cipher(), ".", out, "--passfile", vault.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ReadLinkAt(AT_FDCWD, out + "/l3001") == Target(3001, 4));
  EXPECT_TRUE(ReadLinkAt(AT_FDCWD, out + "/l3500") == Target(4000, 6));
  const std::string in = (plain.path() / "in").string();
  ASSERT_EQ(::mkdir(in.c_str(), 0755), 0);
  ASSERT_EQ(::symlink(Target(4095, 20).c_str(), (in + "/fresh").c_str()), 0);
  r = test::RunProcess(
      {SIGILFS_BINARY, "import", vault.cipher(), in + "/.", "--passfile", vault.passfile()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  vault.Mount();
  EXPECT_TRUE(ReadLinkAt(AT_FDCWD, vault.path("fresh")) == Target(4095, 20));
  EXPECT_TRUE(ReadLinkAt(AT_FDCWD, vault.path("l3001")) == Target(3001, 4));
  ASSERT_EQ(::unlink(vault.path("fresh").c_str()), 0);
  ASSERT_EQ(::unlink(vault.path("l3001").c_str()), 0);
  ASSERT_EQ(::unlink(vault.path("l3500").c_str()), 0);
  vault.Unmount();
  EXPECT_EQ(TargetFiles(vault.cipher()), 0u);
}

}  // namespace
}  // namespace sigilfs
