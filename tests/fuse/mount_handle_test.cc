// File handles through a real mount (name_to_handle_at / open_by_handle_at, what an NFS export
// uses): they open files and directories after the kernel forgot them and after a remount,
// follow renames, and are ESTALE — never another object — once their object is gone or
// replaced, or from another vault.
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "test_support/daemon_stats.h"
#include "test_support/kernel_caches.h"
#include "test_support/mount.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"
#include "test_support/temp_dir.h"

#ifndef AT_HANDLE_CONNECTABLE
#define AT_HANDLE_CONNECTABLE 0x002  // Linux 6.13: a handle with its parent's (non-directories)
#endif

namespace sigilfs {
namespace {

using test::Ok;

// A file handle as name_to_handle_at gives it. FUSE's (fs/fuse/inode.c, fuse_encode_fh) is
// three 32-bit words: the node id's high and low halves and the inode's generation.
struct Handle {
  std::vector<unsigned char> bytes;
  file_handle* get() { return reinterpret_cast<file_handle*>(bytes.data()); }
  uint32_t word(int i) {
    uint32_t w;
    std::memcpy(&w, get()->f_handle + 4 * i, 4);
    return w;
  }
  void set_word(int i, uint32_t w) { std::memcpy(get()->f_handle + 4 * i, &w, 4); }
  uint64_t node() { return (uint64_t{word(0)} << 32) | word(1); }
  void set_node(uint64_t id) {
    set_word(0, static_cast<uint32_t>(id >> 32));
    set_word(1, static_cast<uint32_t>(id));
  }
  uint32_t generation() { return word(2); }
};

Handle HandleOf(const std::string& path, int flags = 0) {
  Handle h;
  h.bytes.resize(sizeof(file_handle) + MAX_HANDLE_SZ);
  h.get()->handle_bytes = MAX_HANDLE_SZ;
  int mount_id = 0;
  if (::name_to_handle_at(AT_FDCWD, path.c_str(), h.get(), &mount_id, flags) != 0) h.bytes.clear();
  return h;
}

void WriteFile(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ASSERT_TRUE(Ok(fd));
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ASSERT_TRUE(Ok(::close(fd)));
}

std::string ReadFd(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(out.size()))) > 0)
    out.append(buf, static_cast<size_t>(n));
  return n < 0 ? "<read: " + test::ErrnoName(errno) + ">" : out;
}

// What a descriptor's /proc link names.
std::string PathOfFd(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return n < 0 ? "" : std::string(buf, static_cast<size_t>(n));
}

std::set<std::string> ListFd(int fd) {
  std::set<std::string> names;
  DIR* d = ::fdopendir(::dup(fd));
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.insert(e->d_name);
  ::closedir(d);
  return names;
}

// A mount with a stats file, and the mount's root open for open_by_handle_at.
class MountHandleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SIGILFS_NEEDS_FUSE();
    SIGILFS_NEEDS(test::CanDropKernelCaches(),
                  "needs root: dropping the kernel's caches, open_by_handle_at");
    Mount({});
  }
  void TearDown() override {
    if (root_ >= 0) ::close(root_);
  }
  void Mount(std::vector<std::string> extra) {
    if (root_ >= 0) ::close(root_);
    root_ = -1;
    vault_.reset();
    extra.insert(extra.end(), {"--stats-file", stats_});
    vault_ = std::make_unique<test::MountedVault>(std::move(extra));
    root_ = ::open(vault_->plain().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_TRUE(Ok(root_));
  }
  // Opens by handle; -1 with errno set on failure.
  int Open(Handle& h, int flags) { return ::open_by_handle_at(root_, h.get(), flags | O_CLOEXEC); }
  long long Stat(const std::string& name) {
    return test::StatsCounter(test::RequestStats(vault_->pid(), stats_), name);
  }

  test::TempDir out_;
  const std::string stats_ = (out_.path() / "stats.json").string();
  std::unique_ptr<test::MountedVault> vault_;
  int root_ = -1;
};

TEST_F(MountHandleTest, FilesAndDirectoriesOpenAfterTheKernelForgotThem) {
  test::MountedVault& vault = *vault_;
  ASSERT_TRUE(Ok(::mkdir(vault.path("d").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(vault.path("d/sub").c_str(), 0755)));
  WriteFile(vault.path("d/sub/f"), "contents of f");
  Handle file = HandleOf(vault.path("d/sub/f"));
  Handle sub = HandleOf(vault.path("d/sub"));
  ASSERT_FALSE(file.bytes.empty()) << test::ErrnoName(errno);
  ASSERT_FALSE(sub.bytes.empty()) << test::ErrnoName(errno);

  // Forgotten, then the directory renamed (the kernel looks up d and sub again for that), then
  // forgotten again: d, sub and f are all unknown to the kernel.
  ASSERT_TRUE(test::DropKernelCaches());
  ASSERT_TRUE(Ok(::rename(vault.path("d/sub").c_str(), vault.path("d/moved").c_str())));
  ASSERT_TRUE(test::DropKernelCaches());
  const long long before = Stat("handle_lookups");
  ASSERT_GE(before, 0);

  int fd = Open(file, O_RDONLY);
  ASSERT_TRUE(Ok(fd));
  EXPECT_EQ(ReadFd(fd), "contents of f");
  ::close(fd);
  // Writable through the handle too, and the change is seen by name.
  fd = Open(file, O_WRONLY);
  ASSERT_TRUE(Ok(fd));
  ASSERT_EQ(::pwrite(fd, "C", 1, 0), 1);
  ASSERT_TRUE(Ok(::close(fd)));
  EXPECT_EQ(test::ReadAll(vault.path("d/moved/f")), "Contents of f");

  // A directory opened by handle is reconnected to its path (the kernel asks for ".." and lists
  // the parent to find its name): its descriptor names where it is now.
  ASSERT_TRUE(test::DropKernelCaches());
  int dir = Open(sub, O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(Ok(dir));
  EXPECT_EQ(PathOfFd(dir), vault.path("d/moved"));
  EXPECT_EQ(ListFd(dir), std::set<std::string>{"f"});
  ::close(dir);

  // The daemon did resolve them by node id: the kernel had forgotten them.
  EXPECT_GE(Stat("handle_lookups"), before + 2);
}

TEST_F(MountHandleTest, HandlesOfRemovedOrReplacedObjectsAreStale) {
  test::MountedVault& vault = *vault_;
  WriteFile(vault.path("gone"), "gone");
  WriteFile(vault.path("replaced"), "old");
  WriteFile(vault.path("new"), "new");
  WriteFile(vault.path("linked"), "linked");
  ASSERT_TRUE(Ok(::mkdir(vault.path("dir").c_str(), 0755)));
  ASSERT_TRUE(Ok(::link(vault.path("linked").c_str(), vault.path("dir/other").c_str())));
  Handle gone = HandleOf(vault.path("gone"));
  Handle replaced = HandleOf(vault.path("replaced"));
  Handle linked = HandleOf(vault.path("linked"));
  Handle dir = HandleOf(vault.path("dir"));
  ASSERT_TRUE(test::DropKernelCaches());
  ASSERT_TRUE(Ok(::unlink(vault.path("gone").c_str())));
  ASSERT_TRUE(Ok(::rename(vault.path("new").c_str(), vault.path("replaced").c_str())));
  ASSERT_TRUE(Ok(::unlink(vault.path("linked").c_str())));  // lives on as dir/other
  ASSERT_TRUE(test::DropKernelCaches());

  errno = 0;
  EXPECT_EQ(Open(gone, O_RDONLY), -1);
  EXPECT_EQ(errno, ESTALE);
  errno = 0;
  EXPECT_EQ(Open(replaced, O_RDONLY), -1);
  EXPECT_EQ(errno, ESTALE);
  // A hard link that is left keeps the handle valid.
  int fd = Open(linked, O_RDONLY);
  ASSERT_TRUE(Ok(fd));
  EXPECT_EQ(ReadFd(fd), "linked");
  ::close(fd);

  ASSERT_TRUE(Ok(::unlink(vault.path("dir/other").c_str())));
  ASSERT_TRUE(Ok(::rmdir(vault.path("dir").c_str())));
  ASSERT_TRUE(test::DropKernelCaches());
  errno = 0;
  EXPECT_EQ(Open(dir, O_RDONLY | O_DIRECTORY), -1);
  EXPECT_EQ(errno, ESTALE);
}

TEST_F(MountHandleTest, HandlesOfAnotherMountAreStale) {
  WriteFile(vault_->path("a"), "a");
  WriteFile(vault_->path("b"), "b");
  Handle a = HandleOf(vault_->path("a"));
  Mount({});  // another vault, with files of the same names: not what the handle names
  WriteFile(vault_->path("a"), "not a");
  WriteFile(vault_->path("b"), "not b");
  ASSERT_TRUE(test::DropKernelCaches());
  errno = 0;
  EXPECT_EQ(Open(a, O_RDONLY), -1);
  EXPECT_EQ(errno, ESTALE);
}

// Handles outlive the daemon: made before an unmount, they open their objects after the next
// mount, which finds them through the backing filesystem's own handles (a root daemon) and
// reaches them again by path from the cipher root. Hard-linked files too, through either name,
// and connectable handles (with the parent's) where the kernel makes them.
TEST_F(MountHandleTest, HandlesOpenTheirObjectsAfterARemount) {
  test::MountedVault& vault = *vault_;
  ASSERT_TRUE(Ok(::mkdir(vault.path("d").c_str(), 0755)));
  ASSERT_TRUE(Ok(::mkdir(vault.path("d/sub").c_str(), 0755)));
  WriteFile(vault.path("d/sub/f"), "a plain file");
  WriteFile(vault.path("linked"), "a hard-linked file");
  ASSERT_TRUE(Ok(::link(vault.path("linked").c_str(), vault.path("d/other").c_str())));
  struct Case {
    std::string what, content;
    Handle handle;
  };
  std::vector<Case> cases = {
      {"plain file", "a plain file", HandleOf(vault.path("d/sub/f"))},
      {"hard link, first name", "a hard-linked file", HandleOf(vault.path("linked"))},
      {"hard link, second name", "a hard-linked file", HandleOf(vault.path("d/other"))},
  };
  Handle connectable = HandleOf(vault.path("d/other"), AT_HANDLE_CONNECTABLE);
  if (!connectable.bytes.empty())
    cases.push_back({"hard link, connectable", "a hard-linked file", connectable});
  else
    std::cerr << "no connectable handles here: " << test::ErrnoName(errno) << "\n";
  Handle dir = HandleOf(vault.path("d/sub"));
  for (Case& c : cases) ASSERT_FALSE(c.handle.bytes.empty()) << c.what;
  ASSERT_FALSE(dir.bytes.empty());

  ::close(root_);  // an open descriptor would keep the old mount (and its daemon) alive
  root_ = -1;
  vault.Remount();
  root_ = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_TRUE(Ok(root_));
  ASSERT_TRUE(test::DropKernelCaches());
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    const int fd = Open(c.handle, O_RDONLY);
    ASSERT_TRUE(Ok(fd));
    EXPECT_EQ(ReadFd(fd), c.content);
    ::close(fd);
  }
  // Written through a handle of one name, read through the other name.
  ASSERT_TRUE(test::DropKernelCaches());
  int fd = Open(cases[1].handle, O_WRONLY);
  ASSERT_TRUE(Ok(fd));
  ASSERT_EQ(::pwrite(fd, "A", 1, 0), 1);
  ASSERT_TRUE(Ok(::close(fd)));
  EXPECT_EQ(test::ReadAll(vault.path("d/other")), "A hard-linked file");
  // A directory, reconnected to its path.
  ASSERT_TRUE(test::DropKernelCaches());
  fd = Open(dir, O_RDONLY | O_DIRECTORY);
  ASSERT_TRUE(Ok(fd));
  EXPECT_EQ(PathOfFd(fd), vault.path("d/sub"));
  EXPECT_EQ(ListFd(fd), std::set<std::string>{"f"});
  ::close(fd);
  // Removed while unmounted: stale, as any removed object's.
  Handle gone = HandleOf(vault.path("d/sub/f"));
  ASSERT_TRUE(Ok(::unlink(vault.path("d/sub/f").c_str())));
  ::close(root_);
  root_ = -1;
  vault.Remount();
  root_ = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_TRUE(Ok(root_));
  errno = 0;
  EXPECT_EQ(Open(gone, O_RDONLY), -1);
  EXPECT_EQ(errno, ESTALE);
}

// A handle is a node id the kernel passes on to the daemon, and the kernel checks the generation
// the daemon answers with: changed ones (stale or forged) are ESTALE, and the daemon serves on.
TEST_F(MountHandleTest, ForgedHandlesAreStale) {
  WriteFile(vault_->path("a"), "a");
  WriteFile(vault_->path("b"), "b");
  Handle a = HandleOf(vault_->path("a"));
  Handle b = HandleOf(vault_->path("b"));
  ASSERT_EQ(a.get()->handle_bytes, 12u);
  // Every node its own generation (the root's is 0): a freed node's address, reused by a new
  // node, does not make an old handle open the new object.
  EXPECT_NE(a.generation(), b.generation());
  EXPECT_NE(a.generation(), 0u);
  ASSERT_TRUE(test::DropKernelCaches());
  const long long before = Stat("handle_lookups");

  auto expect_stale = [&](Handle h, const std::string& what) {
    errno = 0;
    const int fd = Open(h, O_RDONLY);
    EXPECT_EQ(fd, -1) << what << " opened: " << ReadFd(fd);
    EXPECT_EQ(errno, ESTALE) << what;
    if (fd >= 0) ::close(fd);
  };
  Handle h = a;
  h.set_word(2, a.generation() + 1);
  expect_stale(h, "another generation");
  h = a;
  h.set_word(2, b.generation());
  expect_stale(h, "b's generation");
  h = b;
  h.set_word(2, a.generation());
  expect_stale(h, "a's generation on b");
  for (const uint64_t id : {a.node() + 8, a.node() - 8, a.node() ^ (uint64_t{1} << 40),
                            uint64_t{0x0123456789abcdef}, ~uint64_t{0}, uint64_t{2}}) {
    h = a;
    h.set_node(id);
    expect_stale(h, "node id " + std::to_string(id));
  }
  // They reached the daemon (the kernel held none of those nodes), which serves on.
  EXPECT_GE(Stat("handle_lookups"), before + 6);
  for (Handle* real : {&a, &b}) {
    const int fd = Open(*real, O_RDONLY);
    ASSERT_TRUE(Ok(fd));
    EXPECT_EQ(ReadFd(fd).size(), 1u);
    ::close(fd);
  }
}

// The daemon remembers a bounded number of forgotten nodes, the most recently forgotten; the
// others it finds again through the backing filesystem's handles (a root daemon).
TEST_F(MountHandleTest, OnlyTheMostRecentlyForgottenNodesAreRemembered) {
  constexpr int kFiles = 16, kKept = 4;
  Mount({"--handle-cache", std::to_string(kKept)});
  std::vector<Handle> handles;
  for (int i = 0; i < kFiles; ++i) {
    const std::string path = vault_->path("f" + std::to_string(i));
    WriteFile(path, "file " + std::to_string(i));
    handles.push_back(HandleOf(path));
    ASSERT_FALSE(handles.back().bytes.empty());
  }
  ASSERT_TRUE(test::DropKernelCaches());
  // Waited for by the node count: the remembered ones reach kKept after kKept forgets, while
  // the kernel may still be sending the others.
  const std::string json = test::WaitForStat(vault_->pid(), stats_, "nodes", kKept);
  ASSERT_EQ(test::StatsCounter(json, "nodes"), kKept) << json;  // the kernel holds none
  ASSERT_EQ(test::StatsCounter(json, "nodes_remembered"), kKept) << json;
  int opened = 0;
  for (int i = 0; i < kFiles; ++i) {
    errno = 0;
    const int fd = Open(handles[static_cast<size_t>(i)], O_RDONLY);
    if (fd < 0) {
      EXPECT_EQ(errno, ESTALE) << i;
      continue;
    }
    ++opened;
    EXPECT_EQ(ReadFd(fd), "file " + std::to_string(i));  // never another file
    ::close(fd);
  }
  EXPECT_EQ(opened, kFiles);
}

}  // namespace
}  // namespace sigilfs
