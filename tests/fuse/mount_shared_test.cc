// Shared mode: several `mount --shared` daemons serving one vault at once. What one writes the
// others read on their next open; partial writes of one page by two mounts both stay; appends
// go to the end whoever wrote last; an exclusive mount and shared mounts refuse each other; and
// a checker runs writers, appenders, creators, renamers and readers on 2 and 4 mounts against a
// model, then fsck.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "sigilfs/core/vault_lock.h"
#include "test_support/acls.h"
#include "test_support/kernel_caches.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::Pattern;
using test::RunProcess;

// A vault and `n` shared mounts of it, the first made with the vault.
class SharedMounts {
 public:
  explicit SharedMounts(size_t n, std::vector<std::string> extra = {}) {
    extra.insert(extra.begin(), "--shared");
    mounts_.push_back(std::make_unique<test::MountedVault>(extra));
    for (size_t i = 1; i < n; ++i) {
      const std::string point = (dir_.path() / ("m" + std::to_string(i))).string();
      fs::create_directory(point);
      mounts_.push_back(std::make_unique<test::MountedVault>(mounts_[0]->cipher(), point,
                                                             mounts_[0]->passfile(), extra));
    }
  }
  test::MountedVault& operator[](size_t i) { return *mounts_[i]; }
  size_t size() const { return mounts_.size(); }
  // Unmounts all (each waits for its daemon); the vault stays.
  void UnmountAll() {
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) (*it)->Unmount();
  }

 private:
  test::TempDir dir_;
  std::vector<std::unique_ptr<test::MountedVault>> mounts_;
};

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool PWriteAll(int fd, const void* data, size_t n, off_t at) {
  return ::pwrite(fd, data, n, at) == static_cast<ssize_t>(n);
}

TEST(MountSharedTest, WhatOneMountWritesTheOtherReadsOnItsNextOpen) {
  SIGILFS_NEEDS_FUSE();
  SharedMounts m(2);
  std::ofstream(m[0].path("a")) << "from the first";
  EXPECT_EQ(Contents(m[1].path("a")), "from the first");
  ASSERT_EQ(::mkdir(m[1].path("d").c_str(), 0755), 0);
  std::ofstream(m[1].path("d/b")) << "from the second";
  EXPECT_EQ(Contents(m[0].path("d/b")), "from the second");
  // Rewritten in place (same size), then cut short by the other.
  std::ofstream(m[0].path("d/b"), std::ios::in | std::ios::out) << "FROM";
  EXPECT_EQ(Contents(m[1].path("d/b")), "FROM the second");
  ASSERT_EQ(::truncate(m[1].path("d/b").c_str(), 4), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the kernel's attribute cache
  EXPECT_EQ(Contents(m[0].path("d/b")), "FROM");
  // Hard links stay hard links.
  ASSERT_EQ(::link(m[0].path("a").c_str(), m[0].path("d/a2").c_str()), 0);
  struct stat st;
  ASSERT_EQ(::stat(m[1].path("d/a2").c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_EQ(Contents(m[1].path("d/a2")), "from the first");
}

// A name missing on one mount and then made by another is there at the first look after: the
// kernel keeps no negative entry for a shared mount (an exclusive one keeps it for a second).
TEST(MountSharedTest, ANameMissingHereAndMadeByAnotherMountShowsAtOnce) {
  SIGILFS_NEEDS_FUSE();
  SharedMounts m(2);
  struct stat st;
  for (int i = 0; i < 3; ++i) ASSERT_NE(::stat(m[1].path("late").c_str(), &st), 0);
  std::ofstream(m[0].path("late")) << "made by the first";
  ASSERT_EQ(::stat(m[1].path("late").c_str(), &st), 0) << std::strerror(errno);
  EXPECT_EQ(Contents(m[1].path("late")), "made by the first");
}

// Another mount replaces a directory this one holds (`rm -rf D; mkdir D`; ext4 gives the new D
// the old inode number, so the kernel here takes it for the same node). The directories were
// made by an exclusive mount, with drawn IVs (a shared mount derives them, and would make the
// new D's IV equal to the old one). A name made here in D afterwards is encrypted under the IV
// the store holds now, not the one this mount read before: the other mount lists it, and so
// does a fresh mount.
TEST(MountSharedTest, ANameMadeInADirectoryAnotherMountReplacedIsSeenEverywhere) {
  SIGILFS_NEEDS_FUSE();
  constexpr int kRounds = 3;
  test::MountedVault exclusive;
  for (int round = 0; round < kRounds; ++round) {
    const std::string d = "d" + std::to_string(round);
    ASSERT_EQ(::mkdir(exclusive.path(d).c_str(), 0755), 0);
    std::ofstream(exclusive.path(d + "/old")) << "old";
  }
  exclusive.Unmount();
  test::TempDir points;
  fs::create_directory(points.path() / "b");
  test::MountedVault a(exclusive.cipher(), exclusive.plain(), exclusive.passfile(), {"--shared"});
  test::MountedVault b(exclusive.cipher(), (points.path() / "b").string(), exclusive.passfile(),
                       {"--shared"});
  for (int round = 0; round < kRounds; ++round) {
    const std::string d = "d" + std::to_string(round);
    // Held as a shell holds its working directory: the kernel keeps the node, the daemon opens
    // nothing (an open directory would keep the cipher inode, and its number, from reuse).
    const int held = ::open(a.path(d).c_str(), O_PATH | O_DIRECTORY);
    ASSERT_GE(held, 0);
    ASSERT_EQ(Contents(a.path(d + "/old")), "old");
    fs::remove_all(b.path(d));
    ASSERT_EQ(::mkdir(b.path(d).c_str(), 0755), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the kernel's entry cache
    std::ofstream(a.path(d + "/new")) << "made after the replacement";
    ::close(held);
    std::set<std::string> seen;
    for (const auto& e : fs::directory_iterator(b.path(d))) seen.insert(e.path().filename());
    EXPECT_EQ(seen, std::set<std::string>{"new"}) << "round " << round;
    EXPECT_EQ(Contents(b.path(d + "/new")), "made after the replacement");
  }
  a.Unmount();
  b.Unmount();
  test::MountedVault fresh(exclusive.cipher(), exclusive.plain(), exclusive.passfile());
  for (int round = 0; round < kRounds; ++round)
    EXPECT_EQ(Contents(fresh.path("d" + std::to_string(round) + "/new")),
              "made after the replacement");
  fresh.Unmount();
  auto check =
      RunProcess({SIGILFS_BINARY, "fsck", exclusive.cipher(), "--passfile", exclusive.passfile()});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

// `sigilfs unmount` of a shared mount returns once that mount's daemon has ended, as for an
// exclusive one, though the vault lock names no process (the others hold it too); one that does
// not end in time (here: stopped) is named, with exit 1. The other mount goes on serving.
TEST(MountSharedTest, UnmountReturnsOnceTheSharedDaemonHasEnded) {
  SIGILFS_NEEDS_FUSE();
  SharedMounts m(3);
  for (int i = 0; i < 20; ++i) std::ofstream(m[1].path("f" + std::to_string(i))) << "contents";
  auto r = RunProcess({SIGILFS_BINARY, "unmount", m[1].plain()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(core::VaultLock::ProcessOf(m[1].pid()), std::nullopt) << "the daemon still runs";
  m[1].Unmount();

  ASSERT_EQ(::kill(m[2].pid(), SIGSTOP), 0);
  r = RunProcess({SIGILFS_BINARY, "unmount", m[2].plain(), "--timeout", "1"});
  ASSERT_EQ(::kill(m[2].pid(), SIGCONT), 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + m[2].plain() + " is unmounted, but its daemon (process " +
                       std::to_string(m[2].pid()) +
                       ") has not ended after 1 s (it may still be writing back; the vault is "
                       "not free yet)\n");
  m[2].Unmount();
  EXPECT_EQ(Contents(m[0].path("f19")), "contents");
}

TEST(MountSharedTest, PartialWritesOfOnePageByTwoMountsBothStay) {
  SIGILFS_NEEDS_FUSE();
  SharedMounts m(2);
  std::ofstream(m[0].path("f")) << "";
  const int a = ::open(m[0].path("f").c_str(), O_WRONLY);
  const int b = ::open(m[1].path("f").c_str(), O_WRONLY);  // opened while the file is empty
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  const auto x = Pattern(100, 1), y = Pattern(100, 2);
  ASSERT_TRUE(PWriteAll(a, x.data(), x.size(), 0));
  ASSERT_TRUE(PWriteAll(b, y.data(), y.size(), 200));
  ASSERT_EQ(::close(a), 0);
  ASSERT_EQ(::close(b), 0);
  std::string want(300, '\0');
  std::memcpy(want.data(), x.data(), x.size());
  std::memcpy(want.data() + 200, y.data(), y.size());
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(Contents(m[0].path("f")), want);
  EXPECT_EQ(Contents(m[1].path("f")), want);
}

TEST(MountSharedTest, AppendsFromTwoMountsGoToTheEnd) {
  SIGILFS_NEEDS_FUSE();
  SharedMounts m(2);
  const int a = ::open(m[0].path("log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ASSERT_GE(a, 0);
  const int b = ::open(m[1].path("log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(b, 0);
  std::string want;
  for (int i = 0; i < 20; ++i) {
    const std::string line = (i % 2 == 0 ? "first " : "second ") + std::to_string(i) + "\n";
    ASSERT_EQ(::write(i % 2 == 0 ? a : b, line.data(), line.size()),
              static_cast<ssize_t>(line.size()));
    want += line;
  }
  ::close(a);
  ::close(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  EXPECT_EQ(Contents(m[0].path("log")), want);
  EXPECT_EQ(Contents(m[1].path("log")), want);
}

TEST(MountSharedTest, ExclusiveAndSharedMountsRefuseEachOther) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir tmp;
  const std::string other = (tmp.path() / "other").string();
  fs::create_directory(other);
  {
    SharedMounts m(1);
    // A mount without --shared, and an import, are refused while a shared mount serves.
    auto r =
        RunProcess({SIGILFS_BINARY, "mount", m[0].cipher(), other, "--passfile", m[0].passfile()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is mounted --shared on"), std::string::npos) << r.err;
    const std::string src = (tmp.path() / "src").string();
    fs::create_directory(src);
    r = RunProcess({SIGILFS_BINARY, "import", m[0].cipher(), src, "--passfile", m[0].passfile()});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("is mounted --shared on"), std::string::npos) << r.err;
  }
  test::MountedVault v;
  auto r = RunProcess(
      {SIGILFS_BINARY, "mount", "--shared", v.cipher(), other, "--passfile", v.passfile()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is mounted on"), std::string::npos) << r.err;
}

// The checker. Each mount runs three threads:
// - slots: 512-byte records written into its own slots of a shared 64 KiB file (the other
//   slots of each page are other mounts'), every one also read back on a fresh open;
// - log: records appended to a shared log with O_APPEND;
// - names: files made in two shared directories, renamed between them and removed;
// - names also makes hard links of its files, in either directory;
// - replacer: its directory, held open, replaced by the next mount (removed and made again, or
//   an empty one renamed over it) before each file it makes there, which that mount must see;
// - truncator: a file cut and grown while the next mount reads it (every byte its own or 0);
// - attributes: a file's mode and a `user.` attribute changed while the next mount reads them;
// - ACLs: access and default ACLs changed while the next mount reads them and makes entries
//   that inherit them.
// Readers, on fresh opens (close-to-open), must find every slot a whole record of that slot by
// its owner (or zeros), never older than one they saw before. At the end (all unmounted, the
// vault mounted once more): every slot holds its owner's last record, the log every record
// once, whole, and the directories exactly the files each mount left, with their contents;
// `sigilfs fsck` finds nothing.
constexpr size_t kSlot = 512;
constexpr size_t kDataSize = 64 * 1024;
constexpr size_t kSlots = kDataSize / kSlot;
constexpr size_t kLogRecord = 128;

std::string SlotRecord(uint32_t mount, uint32_t seq, uint32_t slot) {
  const auto p = Pattern(kSlot, mount * 1000003u + seq * 31u + slot);
  std::string r(p.begin(), p.end());
  std::memcpy(r.data(), &mount, 4);
  std::memcpy(r.data() + 4, &seq, 4);
  std::memcpy(r.data() + 8, &slot, 4);
  return r;
}

std::string LogRecord(uint32_t mount, uint32_t index) {
  const auto p = Pattern(kLogRecord, mount * 7919u + index);
  std::string r(p.begin(), p.end());
  std::memcpy(r.data(), &mount, 4);
  std::memcpy(r.data() + 4, &index, 4);
  return r;
}

// The sequence number slot `slot` holds in `bytes` (0: zeros), or an error.
bool SlotSeq(const std::string& bytes, uint32_t slot, uint32_t owner, uint32_t& seq,
             std::string& why) {
  if (bytes.find_first_not_of('\0') == std::string::npos) {
    seq = 0;
    return true;
  }
  uint32_t m, s, sl;
  std::memcpy(&m, bytes.data(), 4);
  std::memcpy(&s, bytes.data() + 4, 4);
  std::memcpy(&sl, bytes.data() + 8, 4);
  if (sl != slot || m != owner || bytes != SlotRecord(m, s, sl)) {
    why = "slot " + std::to_string(slot) + " holds no record of its owner " + std::to_string(owner);
    return false;
  }
  seq = s;
  return true;
}

struct CheckerCounts {
  std::atomic<uint64_t> slot_writes{0}, slot_reads{0}, appends{0}, creates{0}, renames{0},
      removes{0}, bytes_checked{0}, cache_drops{0}, replaced_dirs{0}, made_in_replaced{0},
      made_through_hold{0}, links{0}, truncates{0}, truncated_reads{0}, attribute_changes{0},
      attribute_reads{0}, acl_changes{0}, acl_reads{0}, acl_inherited{0}, acl_settled_checks{0};
};

void RunChecker(size_t mounts) {
  const bool long_run = std::getenv("SIGILFS_LONG") != nullptr;
  const auto duration = std::chrono::seconds(long_run ? 60 : 6);
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::printf("[ checker ] %zu mounts, seed %u, %lld s\n", mounts, seed,
              static_cast<long long>(duration.count()));
  SharedMounts m(mounts);
  {
    const int fd = ::open(m[0].path("data").c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, kDataSize), 0);  // the size stays: every slot is always there
    ::close(fd);
  }
  ASSERT_EQ(::mkdir(m[0].path("x").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(m[0].path("y").c_str(), 0755), 0);
  const uint32_t n = static_cast<uint32_t>(mounts);
  for (uint32_t w = 0; w < n; ++w)
    ASSERT_EQ(::mkdir(m[0].path("z" + std::to_string(w)).c_str(), 0755), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));

  std::vector<std::vector<uint32_t>> last(n, std::vector<uint32_t>(kSlots, 0));
  std::vector<uint32_t> appended(n, 0);
  // Per mount: its files, name -> (directory, contents seed).
  std::vector<std::map<std::string, std::pair<std::string, uint32_t>>> files(n);
  std::atomic<bool> failed{false};
  CheckerCounts counts;
  const auto deadline = std::chrono::steady_clock::now() + duration;
  auto fail = [&](const std::string& why) {
    if (!failed.exchange(true)) ADD_FAILURE() << why;
  };

  auto slots = [&](uint32_t w) {
    std::mt19937 rng(seed + w);
    std::vector<uint32_t> newest(kSlots, 0);
    uint32_t seq = 0;
    const int fd = ::open(m[w].path("data").c_str(), O_WRONLY);
    if (fd < 0) return fail("open data for writing");
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      if (rng() % 2 == 0) {
        const uint32_t slot = static_cast<uint32_t>(rng() % (kSlots / n)) * n + w;
        const std::string rec = SlotRecord(w, ++seq, slot);
        if (!PWriteAll(fd, rec.data(), rec.size(), static_cast<off_t>(slot) * kSlot))
          return fail("slot write: " + std::string(std::strerror(errno)));
        if (rng() % 8 == 0 && ::fsync(fd) != 0) return fail("fsync");
        last[w][slot] = seq;
        ++counts.slot_writes;
        continue;
      }
      // A fresh open (close-to-open), now and then past the kernel's cache altogether.
      const bool direct = rng() % 4 == 0;
      const int rd = ::open(m[w].path("data").c_str(), O_RDONLY | (direct ? O_DIRECT : 0));
      if (rd < 0) return fail("open data for reading");
      const uint32_t first = static_cast<uint32_t>(rng() % kSlots);
      const uint32_t count =
          1 + static_cast<uint32_t>(rng() % std::min<size_t>(24, kSlots - first));
      void* raw = nullptr;
      if (::posix_memalign(&raw, 4096, count * kSlot) != 0) return fail("memory");
      std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char*>(raw), &std::free);
      const ssize_t got = ::pread(rd, buf.get(), count * kSlot, static_cast<off_t>(first) * kSlot);
      ::close(rd);
      if (got != static_cast<ssize_t>(count * kSlot))
        return fail("read of " + std::to_string(count) + " slots: " +
                    (got < 0 ? std::strerror(errno) : "short, " + std::to_string(got)));
      for (uint32_t i = 0; i < count; ++i) {
        const uint32_t slot = first + i;
        uint32_t s = 0;
        std::string why;
        if (!SlotSeq(std::string(buf.get() + i * kSlot, kSlot), slot, slot % n, s, why))
          return fail(why);
        if (s < newest[slot])
          return fail("slot " + std::to_string(slot) + " went back from " +
                      std::to_string(newest[slot]) + " to " + std::to_string(s));
        newest[slot] = s;
      }
      counts.bytes_checked += count * kSlot;
      ++counts.slot_reads;
    }
    ::close(fd);
  };

  auto log = [&](uint32_t w) {
    const int fd = ::open(m[w].path("log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return fail("open log");
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      const std::string rec = LogRecord(w, appended[w]);
      if (::write(fd, rec.data(), rec.size()) != static_cast<ssize_t>(rec.size()))
        return fail("append: " + std::string(std::strerror(errno)));
      ++appended[w];
      ++counts.appends;
    }
    ::close(fd);
  };

  // Names are reached through descriptors of the two directories held all along, as a shell's
  // working directory is: the mount's nodes of them stay while the store's may be dropped.
  auto names = [&](uint32_t w) {
    std::mt19937 rng(seed * 3 + w);
    uint32_t next = 0;
    bool links = true;
    auto& mine = files[w];
    std::map<std::string, int> dirs;
    for (const char* d : {"x", "y"}) {
      dirs[d] = ::open(m[w].path(d).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dirs[d] < 0) return fail("open " + std::string(d));
    }
    struct Closer {
      std::map<std::string, int>& fds;
      ~Closer() {
        for (auto& [d, fd] : fds) ::close(fd);
      }
    } closer{dirs};
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      const int op = static_cast<int>(rng() % 5);
      if (op < 2 || mine.empty()) {
        const std::string name = "w" + std::to_string(w) + "-" + std::to_string(next++);
        const std::string dir = rng() % 2 == 0 ? "x" : "y";
        const uint32_t content = static_cast<uint32_t>(rng());
        const auto bytes = Pattern(100 + content % 9000, content);
        const int fd = ::openat(dirs[dir], name.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0) return fail("create " + dir + "/" + name + ": " + std::strerror(errno));
        if (!PWriteAll(fd, bytes.data(), bytes.size(), 0) || ::close(fd) != 0)
          return fail("write " + name);
        mine[name] = {dir, content};
        ++counts.creates;
        continue;
      }
      auto it = mine.begin();
      std::advance(it, static_cast<long>(rng() % mine.size()));
      const std::string from = it->second.first + "/" + it->first;
      if (op == 4) {
        // Another name for one of its files, in either directory (where the store has links).
        if (!links) continue;
        const std::string name = "w" + std::to_string(w) + "-" + std::to_string(next++);
        const std::string dir = rng() % 2 == 0 ? "x" : "y";
        if (::linkat(dirs[it->second.first], it->first.c_str(), dirs[dir], name.c_str(), 0) != 0) {
          if (errno == EPERM || errno == ENOSYS || errno == EOPNOTSUPP) {
            links = false;  // sshfs without its hard-link option
            continue;
          }
          return fail("link " + from + ": " + std::strerror(errno));
        }
        mine[name] = {dir, it->second.second};
        ++counts.links;
      } else if (op == 2) {
        const std::string dir = it->second.first == "x" ? "y" : "x";
        if (::renameat(dirs[it->second.first], it->first.c_str(), dirs[dir], it->first.c_str()) !=
            0)
          return fail("rename " + from + ": " + std::strerror(errno));
        it->second.first = dir;
        ++counts.renames;
      } else {
        if (::unlinkat(dirs[it->second.first], it->first.c_str(), 0) != 0)
          return fail("unlink " + from + ": " + std::strerror(errno));
        mine.erase(it);
        ++counts.removes;
      }
    }
  };

  // A file cut and grown by one mount while the next reads it: mount w sets t<w> to a random
  // length and writes the pattern's bytes up to it, again and again; mount w+1 reads it on
  // fresh opens. Every byte read is the pattern's at its place or a zero (a part cut away and
  // grown back before it was written again), never anything else, and no read fails.
  const auto truncated_pattern = Pattern(256 * 1024, seed ^ 0x7472756e);
  auto truncator = [&](uint32_t w) {
    std::mt19937 rng(seed * 7 + w);
    const std::string name = "t" + std::to_string(w);
    const int fd = ::open(m[w].path(name).c_str(), O_RDWR | O_CREAT, 0644);
    if (fd < 0) return fail("open " + name);
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      const size_t length = rng() % truncated_pattern.size();
      if (::ftruncate(fd, static_cast<off_t>(length)) != 0)
        return fail("truncate " + name + ": " + std::strerror(errno));
      const size_t from = length == 0 ? 0 : rng() % length;
      if (!PWriteAll(fd, truncated_pattern.data() + from, length - from, static_cast<off_t>(from)))
        return fail("write " + name + ": " + std::strerror(errno));
      ++counts.truncates;
    }
    ::close(fd);
  };
  auto truncated_reader = [&](uint32_t w) {
    const uint32_t v = (w + 1) % n;
    const std::string name = "t" + std::to_string(w);
    std::vector<char> buf(truncated_pattern.size() + 4096);
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      const int fd = ::open(m[v].path(name).c_str(), O_RDONLY);
      if (fd < 0) {
        if (errno == ENOENT) continue;  // not made yet
        return fail("open " + name + " on mount " + std::to_string(v) + ": " +
                    std::strerror(errno));
      }
      const ssize_t got = ::pread(fd, buf.data(), buf.size(), 0);
      ::close(fd);
      if (got < 0) return fail("read " + name + ": " + std::strerror(errno));
      if (static_cast<size_t>(got) > truncated_pattern.size())
        return fail(name + " is longer than any length it was given");
      for (ssize_t i = 0; i < got; ++i)
        if (buf[i] != 0 && static_cast<uint8_t>(buf[i]) != truncated_pattern[i])
          return fail(name + " byte " + std::to_string(i) + " is neither its own nor a zero");
      ++counts.truncated_reads;
    }
  };

  // Attributes changed by one mount while the next reads them: mount w sets the mode and a
  // `user.` attribute of a<w> to one of a few values; mount w+1 must always find one of them
  // (the kernel's attribute cache may show the one before for a second), never an error.
  const std::vector<mode_t> modes = {0600, 0640, 0644, 0700, 0755};
  const std::vector<std::string> tags = {"red", "green", "blue-and-longer-than-the-others"};
  auto attributes = [&](uint32_t w) {
    std::mt19937 rng(seed * 11 + w);
    const std::string name = m[w].path("a" + std::to_string(w));
    std::ofstream(name) << "attributes";
    bool xattrs = true;
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      if (::chmod(name.c_str(), modes[rng() % modes.size()]) != 0)
        return fail("chmod " + name + ": " + std::strerror(errno));
      const std::string& tag = tags[rng() % tags.size()];
      if (xattrs && ::setxattr(name.c_str(), "user.tag", tag.data(), tag.size(), 0) != 0) {
        if (errno != ENOTSUP) return fail("setxattr " + name + ": " + std::strerror(errno));
        xattrs = false;  // a store without them
      }
      ++counts.attribute_changes;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  auto attribute_reader = [&](uint32_t w) {
    const uint32_t v = (w + 1) % n;
    const std::string name = m[v].path("a" + std::to_string(w));
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      struct stat st;
      if (::stat(name.c_str(), &st) != 0) {
        if (errno == ENOENT) continue;  // not made yet
        return fail("stat " + name + ": " + std::strerror(errno));
      }
      if (std::find(modes.begin(), modes.end(), st.st_mode & 07777) == modes.end())  // 0644: made
        return fail(name + " has mode " + std::to_string(st.st_mode & 07777));
      char value[64];
      const ssize_t got = ::getxattr(name.c_str(), "user.tag", value, sizeof value);
      if (got >= 0 && std::find(tags.begin(), tags.end(),
                                std::string(value, static_cast<size_t>(got))) == tags.end())
        return fail(name + " has a tag no mount set");
      if (got < 0 && errno != ENODATA && errno != ENOTSUP)
        return fail("getxattr " + name + ": " + std::strerror(errno));
      ++counts.attribute_reads;
    }
  };

  // POSIX ACLs changed by one mount while the next reads them: mount w sets, in turns, access
  // ACLs on its file p<w> and its directory q<w> (one of them the mode said in full, which is
  // stored as the mode alone) and default ACLs on q<w> (one turn removes it); mount w+1 reads
  // them and makes files and directories in q<w>. The mounts keep ACLs (on unless `-o noacl`)
  // without the kernel checking permissions: it caches no ACL and asks the daemon at each read
  // (with `-o acl` it would keep them for a second, as attributes, and a read find older ones).
  // So an ACL read is whole and one that was set since the last change done before the read
  // began; an entry made in q<w> inherits the default ACL of such a change; a mode, whose group
  // bits are an access ACL's mask, is one some change gave (the kernel keeps attributes for a
  // second). Now and then the setting mount stops; once the attribute cache has passed, the
  // reading one finds the last ACLs and the mode that goes with them, together.
  struct AclState {
    std::vector<test::AclEntry> entries;  // none: removed
    bool stored;                          // read back (else ENODATA: the mode alone, or none)
  };
  using test::kAclGroup, test::kAclGroupObj, test::kAclMask, test::kAclOther, test::kAclUser,
      test::kAclUserObj;
  const std::vector<AclState> file_acls = {
      {{{kAclUserObj, 6}, {kAclGroupObj, 4}, {kAclOther, 0}}, false},
      {{{kAclUserObj, 6}, {kAclUser, 4, 65534}, {kAclGroupObj, 4}, {kAclMask, 6}, {kAclOther, 4}},
       true},
      {{{kAclUserObj, 7},
        {kAclUser, 7, 65534},
        {kAclGroupObj, 5},
        {kAclGroup, 6, 100},
        {kAclMask, 7},
        {kAclOther, 0}},
       true},
      // The mode of the first, another ACL.
      {{{kAclUserObj, 6}, {kAclGroupObj, 4}, {kAclGroup, 4, 100}, {kAclMask, 4}, {kAclOther, 0}},
       true}};
  const std::vector<AclState> dir_acls = {
      {{{kAclUserObj, 7}, {kAclGroupObj, 5}, {kAclOther, 5}}, false},
      {{{kAclUserObj, 7}, {kAclUser, 7, 65534}, {kAclGroupObj, 5}, {kAclMask, 7}, {kAclOther, 5}},
       true},
      {{{kAclUserObj, 7}, {kAclGroupObj, 0}, {kAclGroup, 5, 100}, {kAclMask, 5}, {kAclOther, 0}},
       true}};
  const std::vector<AclState> default_acls = {
      {{}, false},
      {{{kAclUserObj, 7}, {kAclUser, 6, 65534}, {kAclGroupObj, 5}, {kAclMask, 7}, {kAclOther, 4}},
       true},
      {{{kAclUserObj, 6}, {kAclGroupObj, 4}, {kAclGroup, 7, 100}, {kAclMask, 7}, {kAclOther, 0}},
       true}};
  // One ACL of one object, and what its mount set there: the states in order (the last may be
  // being set), of which `done` were set.
  struct AclTarget {
    std::string name;
    const char* attr;
    const std::vector<AclState>* states;
    std::mutex mu;
    std::vector<size_t> set;
    size_t done = 0;
    // The states that a read between these points may find: from the last one done at `begin`
    // to the last one begun at `end`.
    size_t Begin() {
      std::lock_guard<std::mutex> lock(mu);
      return done == 0 ? 0 : done - 1;
    }
    std::vector<size_t> Since(size_t begin) {
      std::lock_guard<std::mutex> lock(mu);
      return {set.begin() + static_cast<long>(begin), set.end()};
    }
  };
  constexpr char kAccessAcl[] = "system.posix_acl_access";
  constexpr char kDefaultAcl[] = "system.posix_acl_default";
  std::vector<std::unique_ptr<AclTarget>> acl_targets;  // per mount: file, directory, default
  for (uint32_t w = 0; w < n; ++w) {
    const std::string p = "p" + std::to_string(w), q = "q" + std::to_string(w);
    for (auto [name, attr, states] :
         {std::tuple(p, kAccessAcl, &file_acls), std::tuple(q, kAccessAcl, &dir_acls),
          std::tuple(q, kDefaultAcl, &default_acls)}) {
      acl_targets.push_back(std::make_unique<AclTarget>());
      acl_targets.back()->name = name;
      acl_targets.back()->attr = attr;
      acl_targets.back()->states = states;
    }
  }
  std::vector<std::atomic<bool>> acl_pause(n);
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  // The attribute as read: its value, "" where there is none (ENODATA), or an error.
  auto read_acl = [](const std::string& path, const char* attr, std::string& value) {
    value.assign(256, '\0');
    const ssize_t got = ::getxattr(path.c_str(), attr, value.data(), value.size());
    value.resize(got < 0 ? 0 : static_cast<size_t>(got));
    return got >= 0 || errno == ENODATA;
  };
  auto acl_value = [](const AclState& s) { return s.stored ? test::AclXattr(s.entries) : ""; };
  auto acl_setter = [&](uint32_t w) {
    std::mt19937 rng(seed * 13 + w);
    AclTarget* mine[3] = {acl_targets[3 * w].get(), acl_targets[3 * w + 1].get(),
                          acl_targets[3 * w + 2].get()};
    std::ofstream(m[w].path(mine[0]->name)) << "ACLs";
    if (::mkdir(m[w].path(mine[1]->name).c_str(), 0755) != 0)
      return fail("mkdir " + mine[1]->name + ": " + std::strerror(errno));
    auto set = [&](AclTarget& t, size_t state) {
      {
        std::lock_guard<std::mutex> lock(t.mu);
        t.set.push_back(state);
      }
      const std::string path = m[w].path(t.name);
      const AclState& s = (*t.states)[state];
      const std::string value = test::AclXattr(s.entries);
      if (s.entries.empty()
              ? ::removexattr(path.c_str(), t.attr) != 0
              : ::setxattr(path.c_str(), t.attr, value.data(), value.size(), 0) != 0) {
        fail("set " + std::string(t.attr) + " of " + t.name + " to state " + std::to_string(state) +
             ": " + std::strerror(errno));
        return false;
      }
      std::lock_guard<std::mutex> lock(t.mu);
      t.done = t.set.size();
      return true;
    };
    for (AclTarget* t : mine)
      if (!set(*t, 0)) return;
    auto last_pause = std::chrono::steady_clock::now();
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      AclTarget& t = *mine[rng() % 3];
      const size_t count = t.states->size();
      if (!set(t, (t.set.back() + 1 + rng() % (count - 1)) % count)) return;  // another state
      ++counts.acl_changes;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      const auto now = std::chrono::steady_clock::now();
      if (now - last_pause > std::chrono::milliseconds(1500) &&
          deadline - now > std::chrono::seconds(3)) {
        acl_pause[w] = true;  // the reader looks at the last ACLs once its cache has passed
        while (acl_pause[w] && !failed && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        last_pause = std::chrono::steady_clock::now();
      }
    }
  };
  auto acl_reader = [&](uint32_t w) {
    const uint32_t v = (w + 1) % n;
    AclTarget* theirs[3] = {acl_targets[3 * w].get(), acl_targets[3 * w + 1].get(),
                            acl_targets[3 * w + 2].get()};
    const std::string on = " on mount " + std::to_string(v);
    // The mode of the file or directory is one an access ACL of it gives.
    auto mode_allowed = [&](const AclTarget& t, mode_t mode) {
      for (const AclState& s : *t.states)
        if (test::AclMode(s.entries) == mode) return true;
      return false;
    };
    for (uint32_t made = 0; !failed && std::chrono::steady_clock::now() < deadline;) {
      bool ready;
      {
        std::lock_guard<std::mutex> lock(theirs[2]->mu);
        ready = theirs[2]->done > 0;  // (the setter sets the default ACL last)
      }
      if (!ready) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      if (acl_pause[w]) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the attribute cache
        for (AclTarget* t : theirs) {
          const AclState& last = (*t->states)[t->Since(0).back()];
          const std::string path = m[v].path(t->name);
          std::string value;
          if (!read_acl(path, t->attr, value))
            return fail("getxattr " + t->name + on + ": " + std::strerror(errno));
          if (value != acl_value(last))
            return fail(std::string(t->attr) + " of " + t->name + on +
                        " is not the last one set, a second after");
          struct stat st;
          if (::stat(path.c_str(), &st) != 0)
            return fail("stat " + t->name + on + ": " + std::strerror(errno));
          if (t->attr == kAccessAcl && (st.st_mode & 07777) != test::AclMode(last.entries))
            return fail(t->name + on + " has mode " + std::to_string(st.st_mode & 07777) +
                        " a second after an access ACL gave it " +
                        std::to_string(test::AclMode(last.entries)));
        }
        ++counts.acl_settled_checks;
        acl_pause[w] = false;
      }
      for (AclTarget* t : theirs) {
        const std::string path = m[v].path(t->name);
        const size_t begin = t->Begin();
        std::string value;
        if (!read_acl(path, t->attr, value))
          return fail("getxattr " + t->name + on + ": " + std::strerror(errno));
        bool known = false;
        for (size_t s : t->Since(begin)) known |= value == acl_value((*t->states)[s]);
        if (!known)
          return fail(std::string(t->attr) + " of " + t->name + on + " (" +
                      std::to_string(value.size()) + " bytes) is none set since the read began");
        struct stat st;
        if (::stat(path.c_str(), &st) != 0)
          return fail("stat " + t->name + on + ": " + std::strerror(errno));
        if (t->attr == kAccessAcl && !mode_allowed(*t, st.st_mode & 07777))
          return fail(t->name + on + " has mode " + std::to_string(st.st_mode & 07777));
        ++counts.acl_reads;
      }
      // A file or directory made here in q<w> inherits its default ACL, as set then.
      const bool dir = made % 3 == 2;
      const std::string name = theirs[1]->name + "/n" + std::to_string(made++);
      const std::string path = m[v].path(name);
      const mode_t asked = dir ? 0777 : 0666;
      const size_t begin = theirs[2]->Begin();
      const int fd = dir ? ::mkdir(path.c_str(), asked)
                         : ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, asked);
      if (fd < 0) return fail("make " + name + on + ": " + std::strerror(errno));
      if (!dir) ::close(fd);
      std::string access, inherited;
      struct stat st;
      if (!read_acl(path, kAccessAcl, access) || (dir && !read_acl(path, kDefaultAcl, inherited)) ||
          ::stat(path.c_str(), &st) != 0)
        return fail("look at " + name + on + ": " + std::strerror(errno));
      bool known = false;
      for (size_t s : theirs[2]->Since(begin)) {
        const AclState& d = default_acls[s];
        mode_t mode = asked & ~umask_now;
        std::string want;
        if (d.stored) {
          mode = asked;
          want = test::AclXattr(test::AclCreateMasq(d.entries, mode));
        }
        known |=
            access == want && (st.st_mode & 07777) == mode && (!dir || inherited == acl_value(d));
      }
      if (!known)
        return fail(name + on + " inherited no default ACL its directory had (mode " +
                    std::to_string(st.st_mode & 07777) + ")");
      if ((dir ? ::rmdir(path.c_str()) : ::unlink(path.c_str())) != 0)
        return fail("remove " + name + on + ": " + std::strerror(errno));
      ++counts.acl_inherited;
    }
  };

  // Hostile moves on directories: mount w holds its directory z<w> (as a shell's working
  // directory) and makes a file in it through that hold, while the next mount replaces the
  // directory underneath: removed and made again, removed and another moved there (the store
  // may give either the old inode number), or emptied and another renamed over it. Turns alternate:
  // replace, make, look from the replacing mount. A file made must be seen there, whole, under its
  // name; a make may also fail as in a removed directory (ENOENT, ESTALE), and then the name must
  // not be there.
  std::vector<std::string> last_made(n);  // per directory: the file made since its last replacement
  auto replacer = [&](uint32_t w) {
    std::mt19937 rng(seed * 5 + w);
    const uint32_t v = (w + 1) % n;  // the mount that replaces z<w>
    const std::string dir = "z" + std::to_string(w);
    int held = ::open(m[w].path(dir).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (held < 0) return fail("open " + dir);
    for (uint32_t round = 0; !failed && std::chrono::steady_clock::now() < deadline; ++round) {
      // The other mount replaces the directory.
      std::error_code ec;
      const std::string fresh = dir + ".new";
      switch (rng() % 3) {
        case 0:  // removed and made again: the same derived IV, perhaps the same inode number
          fs::remove_all(m[v].path(dir), ec);
          if (ec || ::mkdir(m[v].path(dir).c_str(), 0755) != 0)
            return fail("replace " + dir + ": " + (ec ? ec.message() : std::strerror(errno)));
          break;
        case 1:  // removed, and another made and moved there: another IV, perhaps the number
          fs::remove_all(m[v].path(dir), ec);
          if (ec || ::mkdir(m[v].path(fresh).c_str(), 0755) != 0 ||
              ::rename(m[v].path(fresh).c_str(), m[v].path(dir).c_str()) != 0)
            return fail("move over " + dir + ": " + (ec ? ec.message() : std::strerror(errno)));
          break;
        default:  // emptied, and another renamed over it
          if (::mkdir(m[v].path(fresh).c_str(), 0755) != 0)
            return fail("mkdir " + fresh + ": " + std::strerror(errno));
          for (const auto& e : fs::directory_iterator(m[v].path(dir), ec))
            fs::remove_all(e.path(), ec);
          if (ec || ::rename(m[v].path(fresh).c_str(), m[v].path(dir).c_str()) != 0)
            return fail("rename over " + dir + ": " + (ec ? ec.message() : std::strerror(errno)));
      }
      last_made[w].clear();
      ++counts.replaced_dirs;
      // This mount makes a file through the directory it holds; where the hold leads nowhere
      // now, as a shell would, it takes the directory again by its path.
      const std::string name = "f" + std::to_string(round);
      const auto bytes = Pattern(100 + round % 5000, seed + round + w);
      // (The kernel's entry for it may lead to the node of the removed directory for up to its
      // 1 s timeout.)
      int fd = ::openat(held, name.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      if (fd >= 0) ++counts.made_through_hold;
      const auto retake_until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (fd < 0 && (errno == ENOENT || errno == ESTALE) &&
             std::chrono::steady_clock::now() < retake_until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        ::close(held);
        held = ::open(m[w].path(dir).c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (held < 0) return fail("open " + dir + " again: " + std::strerror(errno));
        fd = ::openat(held, name.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
      }
      if (fd < 0) return fail("create " + dir + "/" + name + ": " + std::strerror(errno));
      if (!PWriteAll(fd, bytes.data(), bytes.size(), 0) || ::close(fd) != 0)
        return fail("write " + dir + "/" + name);
      last_made[w] = name;
      ++counts.made_in_replaced;
      // The replacing mount sees it, by name and in a listing.
      const std::string seen = Contents(m[v].path(dir + "/" + name));
      if (seen != std::string(bytes.begin(), bytes.end()))
        return fail(dir + "/" + name + " made by mount " + std::to_string(w) +
                    " is not whole on mount " + std::to_string(v) + " (" +
                    std::to_string(seen.size()) + " bytes)");
      size_t listed = 0;
      for (const auto& e : fs::directory_iterator(m[v].path(dir), ec))
        listed += e.path().filename() == name ? 1 : 0;
      if (listed != 1)
        return fail(dir + "/" + name + " is not listed on mount " + std::to_string(v));
    }
    ::close(held);
  };

  // Memory pressure, where this may make it: the kernel drops the dentries and inodes nobody
  // holds, of the mounts and of the store, which may number its objects afresh (sshfs).
  auto pressure = [&] {
    while (!failed && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      if (test::DropKernelCachesNow()) ++counts.cache_drops;
    }
  };

  std::vector<std::thread> threads;
  for (uint32_t w = 0; w < n; ++w) {
    threads.emplace_back(slots, w);
    threads.emplace_back(log, w);
    threads.emplace_back(names, w);
    // (On sshfs too: a file removed right after its last close is at times left there hidden,
    // `.fuse_hidden…`, with nothing holding it, which the directory's removal clears; see
    // Volume::RemoveOrphanedFuseHidden.)
    if (n > 1) threads.emplace_back(replacer, w);
    threads.emplace_back(truncator, w);
    threads.emplace_back(truncated_reader, w);
    threads.emplace_back(attributes, w);
    threads.emplace_back(attribute_reader, w);
    // (Not on sshfs: it forwards no extended attributes, SFTP version 3 has none, so the mount
    // keeps no ACLs there; an ACL that says more than a mode is refused, EOPNOTSUPP.)
    if (std::getenv("SIGILFS_TEST_CIPHER_ROOT") == nullptr) {
      threads.emplace_back(acl_setter, w);
      threads.emplace_back(acl_reader, w);
    }
  }
  if (test::CanDropKernelCaches()) threads.emplace_back(pressure);
  for (auto& t : threads) t.join();
  ASSERT_FALSE(failed);
  m.UnmountAll();

  test::MountedVault& any = m[0];
  auto r = RunProcess({SIGILFS_BINARY, "fsck", any.cipher(), "--passfile", any.passfile()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  test::TempDir check_dir;
  test::MountedVault check(any.cipher(), check_dir.path().string(), any.passfile());
  const std::string data = Contents(check.path("data"));
  ASSERT_EQ(data.size(), kDataSize);
  for (uint32_t slot = 0; slot < kSlots; ++slot) {
    uint32_t s = 0;
    std::string why;
    ASSERT_TRUE(SlotSeq(data.substr(slot * kSlot, kSlot), slot, slot % n, s, why)) << why;
    EXPECT_EQ(s, last[slot % n][slot]) << "slot " << slot;
  }
  const std::string logged = Contents(check.path("log"));
  ASSERT_EQ(logged.size() % kLogRecord, 0u);
  std::vector<uint32_t> next(n, 0);
  for (size_t at = 0; at < logged.size(); at += kLogRecord) {
    uint32_t w, index;
    std::memcpy(&w, logged.data() + at, 4);
    std::memcpy(&index, logged.data() + at + 4, 4);
    ASSERT_LT(w, n) << "log record at " << at;
    ASSERT_EQ(index, next[w]) << "log record at " << at;
    ASSERT_EQ(logged.substr(at, kLogRecord), LogRecord(w, index)) << "log record at " << at;
    ++next[w];
  }
  EXPECT_EQ(next, appended);
  std::set<std::string> want_names, have_names;
  for (uint32_t w = 0; w < n; ++w) {
    for (const auto& [name, where] : files[w]) {
      want_names.insert(where.first + "/" + name);
      const auto bytes = Pattern(100 + where.second % 9000, where.second);
      EXPECT_EQ(Contents(check.path(where.first + "/" + name)),
                std::string(bytes.begin(), bytes.end()))
          << name;
    }
  }
  for (const std::string dir : {"x", "y"})
    for (const auto& e : fs::directory_iterator(check.path(dir)))
      have_names.insert(dir + "/" + e.path().filename().string());
  EXPECT_EQ(have_names, want_names);
  for (uint32_t w = 0; w < n; ++w) {
    const std::string dir = "z" + std::to_string(w);
    std::set<std::string> have, want;
    if (!last_made[w].empty()) want.insert(last_made[w]);
    for (const auto& e : fs::directory_iterator(check.path(dir))) have.insert(e.path().filename());
    EXPECT_EQ(have, want) << dir;
  }
  // Each ACL is the last one its mount set, and each mode goes with it.
  for (const auto& t : acl_targets) {
    if (t->set.empty()) continue;  // the move did not run (sshfs)
    const AclState& last = (*t->states)[t->set.back()];
    std::string value;
    EXPECT_TRUE(read_acl(check.path(t->name), t->attr, value)) << t->name;
    EXPECT_EQ(value, acl_value(last)) << t->attr << " of " << t->name;
    struct stat st;
    ASSERT_EQ(::stat(check.path(t->name).c_str(), &st), 0) << t->name;
    if (t->attr == kAccessAcl) {
      EXPECT_EQ(st.st_mode & 07777, test::AclMode(last.entries)) << t->name;
    }
  }
  std::printf(
      "[ checker ] %zu mounts: %llu slot writes, %llu slot reads (%llu bytes checked), %llu "
      "appends (%zu log bytes), %llu creates, %llu renames, %llu removes, %llu cache drops, "
      "%llu directories replaced under a holder, %llu files made in them (%llu through the "
      "hold), %llu links, %llu truncates, %llu reads of truncated files, %llu attribute "
      "changes, %llu attribute reads, %llu ACL changes, %llu ACL reads (%llu settled), %llu "
      "entries made with an inherited ACL\n",
      mounts, static_cast<unsigned long long>(counts.slot_writes.load()),
      static_cast<unsigned long long>(counts.slot_reads.load()),
      static_cast<unsigned long long>(counts.bytes_checked.load()),
      static_cast<unsigned long long>(counts.appends.load()), logged.size(),
      static_cast<unsigned long long>(counts.creates.load()),
      static_cast<unsigned long long>(counts.renames.load()),
      static_cast<unsigned long long>(counts.removes.load()),
      static_cast<unsigned long long>(counts.cache_drops.load()),
      static_cast<unsigned long long>(counts.replaced_dirs.load()),
      static_cast<unsigned long long>(counts.made_in_replaced.load()),
      static_cast<unsigned long long>(counts.made_through_hold.load()),
      static_cast<unsigned long long>(counts.links.load()),
      static_cast<unsigned long long>(counts.truncates.load()),
      static_cast<unsigned long long>(counts.truncated_reads.load()),
      static_cast<unsigned long long>(counts.attribute_changes.load()),
      static_cast<unsigned long long>(counts.attribute_reads.load()),
      static_cast<unsigned long long>(counts.acl_changes.load()),
      static_cast<unsigned long long>(counts.acl_reads.load()),
      static_cast<unsigned long long>(counts.acl_settled_checks.load()),
      static_cast<unsigned long long>(counts.acl_inherited.load()));
}

TEST(MountSharedCheckerTest, TwoMounts) {
  SIGILFS_NEEDS_FUSE();
  RunChecker(2);
}

TEST(MountSharedCheckerTest, FourMounts) {
  SIGILFS_NEEDS_FUSE();
  RunChecker(4);
}

}  // namespace
}  // namespace sigilfs
