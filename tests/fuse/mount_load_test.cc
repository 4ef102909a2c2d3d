// Load: eight processes run a random mix of file operations on one mount, each checking every
// result against a model of its own files, while the daemon's memory and descriptors are sampled
// and must stay bounded; then the vault is remounted and checked against the models, and fsck
// finds nothing. 15 s of load by default, 5 minutes under SIGILFS_LONG=1; SIGILFS_SEED replays
// the workers' operation sequences.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/encoding.h"
#include "test_support/mount.h"
#include "test_support/pattern.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/syscall_assert.h"
#include "test_support/temp_dir.h"
#include "test_support/tree_snapshot.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using test::snapshot_detail::Digest;

constexpr int kWorkers = 8;
constexpr uint64_t kPage = 4096;
constexpr uint64_t kMaxFileBytes = 4 << 20;
constexpr uint64_t kMaxWorkerBytes = 16 << 20;  // all of one worker's files together
constexpr size_t kMaxFiles = 40;                // names, hard links included
constexpr size_t kMaxSubdirs = 6;
constexpr size_t kMaxHeld = 4;  // descriptors a worker keeps open from one operation to the next
constexpr int kXattrNames = 4;
constexpr size_t kMaxXattrValue = 100;

// Files every worker reads and nobody writes: their contents are Pattern(size, seed).
struct SharedFile {
  const char* name;
  size_t size;
  uint32_t seed;
};
constexpr SharedFile kShared[] = {{"one", 1, 11},
                                  {"page", 4096, 12},
                                  {"odd", 12345, 13},
                                  {"medium", 300007, 14},
                                  {"large", (2 << 20) + 3, 15}};
constexpr size_t kSharedCount = sizeof kShared / sizeof kShared[0];

enum Op {
  kCreate,
  kWrite,
  kAppend,
  kRead,
  kTruncate,
  kRename,
  kLink,
  kUnlink,
  kMkdir,
  kRmdir,
  kReaddir,
  kFsync,
  kXattr,
  kStat,
  kSharedRead,
  kExpectedError,  // a call that must fail with one particular errno
  kOpCount,
};
constexpr const char* kOpNames[kOpCount] = {
    "create", "write", "append",  "read",  "truncate", "rename", "link",        "unlink",
    "mkdir",  "rmdir", "readdir", "fsync", "xattr",    "stat",   "shared_read", "expected_error"};
constexpr uint32_t kOpWeights[kOpCount] = {8, 20, 8, 18, 6, 6, 4, 6, 3, 3, 5, 4, 6, 6, 8, 3};

std::string ErrnoText(int e) { return test::ErrnoName(e); }

// The parent of a model path ("w3/d1/f7" -> "w3/d1").
std::string Parent(const std::string& path) { return path.substr(0, path.rfind('/')); }

// --- The worker: a child process that checks everything it does and ends with _exit. ---

struct Node {
  int id = 0;
  std::string data;
  std::map<std::string, std::string> xattrs;
};

class Worker {
 public:
  Worker(std::string root, int index, uint64_t seed, Clock::time_point deadline, std::string out)
      : root_(std::move(root)),
        own_("w" + std::to_string(index)),
        index_(index),
        seed_(seed),
        rng_(seed),
        deadline_(deadline),
        out_(std::move(out)) {}

  [[noreturn]] void Run() {
    Check(::mkdir(Full(own_).c_str(), 0755), "mkdir", own_);
    dirs_.insert(own_);
    for (const SharedFile& s : kShared) {
      const std::vector<uint8_t> p = test::Pattern(s.size, s.seed);
      shared_.emplace_back(p.begin(), p.end());
    }
    std::discrete_distribution<int> pick_op(std::begin(kOpWeights), std::end(kOpWeights));
    while (Clock::now() < deadline_) {
      ++ops_;
      Dispatch(static_cast<Op>(pick_op(rng_)));
      // Held descriptors come and go, so files are opened and released all the time.
      if (!held_.empty() && Chance(8)) CloseHeld(std::next(held_.begin(), Pick(held_.size())));
    }
    Finish();
  }

 private:
  // --- Randomness. ---
  uint64_t Pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }
  uint64_t Between(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  bool Chance(int percent) { return Pick(100) < static_cast<uint64_t>(percent); }
  std::string Bytes(size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; i += 8) {
      const uint64_t w = rng_();
      for (size_t b = 0; b < 8 && i + b < n; ++b) s[i + b] = static_cast<char>(w >> (8 * b));
    }
    return s;
  }

  // Extents of every kind the daemon treats differently: a few bytes (one page read, changed
  // and sealed again), whole aligned pages, tens of KiB across page boundaries, and runs of 16
  // pages or more, which go past its cache, aligned or not.
  std::pair<uint64_t, uint64_t> Extent(uint64_t size) {
    const uint64_t kind = Pick(20);
    uint64_t len = 0;
    bool aligned = false;
    if (kind < 6) {
      len = Between(1, 600);
    } else if (kind < 10) {
      len = kPage * Between(1, 8);
      aligned = true;
    } else if (kind < 15) {
      len = Between(600, 40000);
    } else if (kind < 18) {
      len = kPage * Between(16, 256);
      aligned = true;
    } else {
      len = Between(64 << 10, 1 << 20);
    }
    // Mostly inside the file or at its end, sometimes past it (the gap reads as zeros).
    uint64_t off = Chance(15) ? size + Between(1, 64 << 10) : Between(0, size);
    if (off >= kMaxFileBytes) off = Between(0, kMaxFileBytes / 2);
    if (aligned) off -= off % kPage;
    return {off, std::min(len, kMaxFileBytes - off)};
  }

  // --- Reporting. ---
  std::string Full(const std::string& path) const { return root_ + "/" + path; }
  void Append(const std::string& line) { std::ofstream(out_, std::ios::app) << line << "\n"; }
  [[noreturn]] void Fail(const std::string& op, const std::string& path, const std::string& what) {
    std::string text = "FAIL " + op + " " + path + ": " + what + " (worker " +
                       std::to_string(index_) + ", seed " + std::to_string(seed_) + ", operation " +
                       std::to_string(ops_) + "); the calls before it:";
    for (const std::string& call : recent_) text += "\n| " + call;
    Append(text);
    ::_exit(1);
  }
  // The last calls made, for the report of a failure.
  void Note(const std::string& call) {
    recent_.push_back(std::to_string(ops_) + ": " + call);
    if (recent_.size() > 40) recent_.pop_front();
  }
  long Check(long rc, const std::string& op, const std::string& path) {
    if (rc < 0) Fail(op, path, ErrnoText(errno));
    Note(op + " " + path + " = " + std::to_string(rc));
    return rc;
  }
  // The call must fail with `want`: the errors the test provokes on purpose.
  void CheckFails(long rc, int want, const std::string& op, const std::string& path) {
    const int e = errno;
    ++counts_[kExpectedError];
    Note(op + " " + path + " fails");
    if (rc >= 0) Fail(op, path, "succeeded, expected " + ErrnoText(want));
    if (e != want) Fail(op, path, "failed with " + ErrnoText(e) + ", expected " + ErrnoText(want));
  }
  // Compares what a read returned with the model.
  void CheckBytes(const std::string& got, const std::string& want, uint64_t off,
                  const std::string& op, const std::string& path) {
    if (got == want) return;
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    Fail(op, path,
         "read " + std::to_string(got.size()) + " bytes at " + std::to_string(off) + ", expected " +
             std::to_string(want.size()) + "; first difference at byte " + std::to_string(off + i));
  }

  // --- I/O that must succeed. ---
  void WriteFully(int fd, const std::string& data, uint64_t off, bool append, const std::string& op,
                  const std::string& path) {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = append ? ::write(fd, data.data() + done, data.size() - done)
                               : ::pwrite(fd, data.data() + done, data.size() - done,
                                          static_cast<off_t>(off + done));
      Check(n, op, path);
      if (n == 0) Fail(op, path, "wrote nothing");
      done += static_cast<size_t>(n);
    }
    bytes_written_ += data.size();
  }
  // Up to `len` bytes at `off`; fewer only at the end of the file.
  std::string ReadAt(int fd, uint64_t off, uint64_t len, const std::string& op,
                     const std::string& path) {
    std::string out(len, '\0');
    size_t done = 0;
    while (done < len) {
      const ssize_t n = ::pread(fd, out.data() + done, len - done, static_cast<off_t>(off + done));
      Check(n, op, path);
      if (n == 0) break;
      done += static_cast<size_t>(n);
    }
    out.resize(done);
    bytes_read_ += done;
    return out;
  }
  // The whole file through a new descriptor, in reads of `chunk` bytes.
  std::string ReadWhole(const std::string& path, size_t chunk, const std::string& op) {
    const int fd = static_cast<int>(Check(::open(Full(path).c_str(), O_RDONLY), op, path));
    std::string out;
    std::string buf(chunk, '\0');
    for (;;) {
      const ssize_t n = Check(::read(fd, buf.data(), buf.size()), op, path);
      if (n == 0) break;
      out.append(buf, 0, static_cast<size_t>(n));
    }
    Check(::close(fd), "close", path);
    bytes_read_ += out.size();
    return out;
  }

  // --- The model. ---
  using Files = std::map<std::string, std::shared_ptr<Node>>;
  Files::iterator PickFile() { return std::next(files_.begin(), Pick(files_.size())); }
  std::string PickDir() { return *std::next(dirs_.begin(), Pick(dirs_.size())); }
  std::string NewName(const std::string& dir, const char* prefix) {
    return dir + "/" + prefix + std::to_string(next_name_++);
  }
  size_t Links(const Node* node) const {
    return static_cast<size_t>(std::count_if(
        files_.begin(), files_.end(), [&](const auto& f) { return f.second.get() == node; }));
  }
  uint64_t TotalBytes() const {
    std::set<const Node*> seen;
    uint64_t total = 0;
    for (const auto& [path, node] : files_)
      if (seen.insert(node.get()).second) total += node->data.size();
    return total;
  }
  bool Empty(const std::string& dir) const {
    for (const auto& [path, node] : files_)
      if (Parent(path) == dir) return false;
    for (const std::string& d : dirs_)
      if (d != dir && Parent(d) == dir) return false;
    return true;
  }
  std::vector<std::string> Subdirs() const {
    std::vector<std::string> out;
    for (const std::string& d : dirs_)
      if (d != own_) out.push_back(d);
    return out;
  }

  // A descriptor for `node`: the one held open, or a new one that the caller gives back with
  // Release (some are kept: files stay open across other operations, renames and unlinks).
  std::pair<int, bool> FdFor(const std::shared_ptr<Node>& node, const std::string& path,
                             const std::string& op) {
    auto it = held_.find(node->id);
    if (it != held_.end()) return {it->second.second, true};
    const int fd = static_cast<int>(Check(::open(Full(path).c_str(), O_RDWR), op, path));
    if (held_.size() < kMaxHeld && Chance(40)) {
      held_[node->id] = {node, fd};
      return {fd, true};
    }
    return {fd, false};
  }
  void Release(std::pair<int, bool> fd, const std::string& path) {
    if (!fd.second) Check(::close(fd.first), "close", path);
  }
  void CloseHeld(std::map<int, std::pair<std::shared_ptr<Node>, int>>::iterator it) {
    Check(::close(it->second.second), "close",
          "held descriptor of node " + std::to_string(it->first));
    held_.erase(it);
  }
  // A node that lost its last name: if it is open, it still reads as it was; then it is closed.
  void Orphaned(const std::shared_ptr<Node>& node, const std::string& path) {
    if (Links(node.get()) != 0) return;
    auto it = held_.find(node->id);
    if (it == held_.end()) return;
    const std::string got =
        ReadAt(it->second.second, 0, node->data.size() + 1, "read after unlink", path);
    CheckBytes(got, node->data, 0, "read after unlink", path);
    CloseHeld(it);
  }

  // --- Operations. ---
  void Dispatch(Op op) {
    // Over its budget, a worker only shrinks: cuts or removes files.
    const bool grows = op == kCreate || op == kWrite || op == kAppend || op == kLink;
    if (grows && TotalBytes() > kMaxWorkerBytes) op = Chance(50) ? kTruncate : kUnlink;
    if (files_.empty() && op != kMkdir && op != kRmdir && op != kSharedRead) op = kCreate;
    switch (op) {
      case kCreate:
        return Create();
      case kWrite:
        return Write();
      case kAppend:
        return AppendTo();
      case kRead:
        return Read();
      case kTruncate:
        return Truncate();
      case kRename:
        return Rename();
      case kLink:
        return Link();
      case kUnlink:
        return Unlink();
      case kMkdir:
        return Mkdir();
      case kRmdir:
        return Rmdir();
      case kReaddir:
        return Readdir();
      case kFsync:
        return Fsync();
      case kXattr:
        return Xattr();
      case kStat:
        return Stat();
      case kSharedRead:
        return SharedRead();
      case kExpectedError:
        return ExpectedError();
      case kOpCount:
        break;
    }
  }

  void Create() {
    if (files_.size() >= kMaxFiles) return Unlink();
    ++counts_[kCreate];
    const std::string path = NewName(PickDir(), "f");
    const int fd = static_cast<int>(
        Check(::open(Full(path).c_str(), O_RDWR | O_CREAT | O_EXCL, 0644), "create", path));
    auto node = std::make_shared<Node>();
    node->id = next_node_++;
    node->data = Chance(15) ? "" : Bytes(Extent(0).second);
    WriteFully(fd, node->data, 0, false, "create", path);
    files_[path] = node;
    if (held_.size() < kMaxHeld && Chance(40)) {
      held_[node->id] = {node, fd};
    } else {
      Check(::close(fd), "close", path);
    }
  }

  void Write() {
    ++counts_[kWrite];
    const auto [path, node] = *PickFile();
    const auto [off, len] = Extent(node->data.size());
    const std::string data = Bytes(len);
    const auto fd = FdFor(node, path, "write");
    WriteFully(fd.first, data, off, false, "write", path);
    if (node->data.size() < off + len) node->data.resize(off + len, '\0');
    node->data.replace(off, len, data);
    Release(fd, path);
  }

  void AppendTo() {
    ++counts_[kAppend];
    const auto [path, node] = *PickFile();
    const uint64_t len = std::min(Extent(0).second, kMaxFileBytes - node->data.size());
    if (len == 0) return;
    const std::string data = Bytes(len);
    const int fd =
        static_cast<int>(Check(::open(Full(path).c_str(), O_WRONLY | O_APPEND), "append", path));
    WriteFully(fd, data, 0, true, "append", path);
    Check(::close(fd), "close", path);
    node->data += data;
  }

  void Read() {
    ++counts_[kRead];
    const auto [path, node] = *PickFile();
    if (Chance(40)) {
      static constexpr size_t kChunks[] = {4096, 65537, 1 << 20};
      CheckBytes(ReadWhole(path, kChunks[Pick(3)], "read"), node->data, 0, "read", path);
      return;
    }
    const uint64_t size = node->data.size();
    const uint64_t off = Chance(10) ? size + Between(0, 10000) : Between(0, size);
    const uint64_t len = Extent(size).second;
    const auto fd = FdFor(node, path, "read");
    const std::string got = ReadAt(fd.first, off, len, "read", path);
    CheckBytes(got, off >= size ? "" : node->data.substr(off, len), off, "read", path);
    Release(fd, path);
  }

  void Truncate() {
    ++counts_[kTruncate];
    const auto [path, node] = *PickFile();
    const uint64_t size = node->data.size();
    const uint64_t kind = Pick(4);
    uint64_t to = kind == 0   ? 0
                  : kind == 1 ? Between(0, size)
                  : kind == 2 ? (Between(0, size + 3 * kPage) / kPage) * kPage
                              : size + Between(1, 200000);
    if (TotalBytes() > kMaxWorkerBytes) to = Between(0, size / 2);
    to = std::min(to, kMaxFileBytes);
    if (held_.count(node->id) != 0 || Chance(40)) {
      const auto fd = FdFor(node, path, "ftruncate");
      Check(::ftruncate(fd.first, static_cast<off_t>(to)), "ftruncate", path);
      Release(fd, path);
    } else {
      Check(::truncate(Full(path).c_str(), static_cast<off_t>(to)), "truncate", path);
    }
    node->data.resize(to, '\0');
  }

  void Rename() {
    ++counts_[kRename];
    const std::vector<std::string> subdirs = Subdirs();
    if (!subdirs.empty() && Chance(20)) return RenameDir(subdirs);
    const auto [from, node] = *PickFile();
    std::string to;
    if (files_.size() > 1 && Chance(40)) {
      do to = PickFile()->first;
      while (to == from);
    } else {
      to = NewName(PickDir(), "f");
    }
    Check(::rename(Full(from).c_str(), Full(to).c_str()), "rename to " + to, from);
    auto target = files_.find(to);
    if (target != files_.end() && target->second == node) return;  // two links to one file
    std::shared_ptr<Node> replaced = target == files_.end() ? nullptr : target->second;
    files_[to] = node;
    files_.erase(from);
    if (replaced) Orphaned(replaced, to);
  }

  // A subdirectory to a new name or over an empty one (done), or over one that is not empty
  // (ENOTEMPTY).
  void RenameDir(const std::vector<std::string>& subdirs) {
    const std::string& from = subdirs[Pick(subdirs.size())];
    std::string to = NewName(own_, "d");
    if (subdirs.size() > 1 && Chance(40)) {
      do to = subdirs[Pick(subdirs.size())];
      while (to == from);
      if (!Empty(to)) {
        return CheckFails(::rename(Full(from).c_str(), Full(to).c_str()), ENOTEMPTY,
                          "rename to " + to, from);
      }
    }
    Check(::rename(Full(from).c_str(), Full(to).c_str()), "rename to " + to, from);
    dirs_.erase(from);
    dirs_.insert(to);
    Files moved;
    for (auto it = files_.begin(); it != files_.end();) {
      if (Parent(it->first) == from) {
        moved[to + it->first.substr(from.size())] = it->second;
        it = files_.erase(it);
      } else {
        ++it;
      }
    }
    files_.insert(moved.begin(), moved.end());
  }

  void Link() {
    if (files_.size() >= kMaxFiles) return Unlink();
    ++counts_[kLink];
    const auto [from, node] = *PickFile();
    const std::string to = NewName(PickDir(), "f");
    Check(::link(Full(from).c_str(), Full(to).c_str()), "link to " + to, from);
    files_[to] = node;
  }

  void Unlink() {
    ++counts_[kUnlink];
    const auto it = PickFile();
    const std::string path = it->first;
    const std::shared_ptr<Node> node = it->second;
    Check(::unlink(Full(path).c_str()), "unlink", path);
    files_.erase(it);
    Orphaned(node, path);
  }

  void Mkdir() {
    if (Subdirs().size() >= kMaxSubdirs) return Rmdir();
    ++counts_[kMkdir];
    const std::string path = NewName(own_, "d");
    Check(::mkdir(Full(path).c_str(), 0755), "mkdir", path);
    dirs_.insert(path);
  }

  void Rmdir() {
    const std::vector<std::string> subdirs = Subdirs();
    if (subdirs.empty()) return Mkdir();
    ++counts_[kRmdir];
    const std::string& path = subdirs[Pick(subdirs.size())];
    if (!Empty(path)) return CheckFails(::rmdir(Full(path).c_str()), ENOTEMPTY, "rmdir", path);
    Check(::rmdir(Full(path).c_str()), "rmdir", path);
    dirs_.erase(path);
  }

  void Readdir() {
    ++counts_[kReaddir];
    const std::string dir = PickDir();
    std::set<std::string> want = {".", ".."};
    for (const auto& [path, node] : files_)
      if (Parent(path) == dir) want.insert(path.substr(dir.size() + 1));
    for (const std::string& d : dirs_)
      if (d != dir && Parent(d) == dir) want.insert(d.substr(dir.size() + 1));
    Note("readdir " + dir);
    std::vector<std::string> names;
    const ::testing::AssertionResult listed = test::ListDir(Full(dir), &names);
    if (!listed) Fail("readdir", dir, listed.message());
    const std::set<std::string> got(names.begin(), names.end());
    if (got.size() != names.size()) Fail("readdir", dir, "a name listed twice");
    if (got != want) {
      std::string diff;
      for (const std::string& n : got)
        if (want.count(n) == 0) diff += " +" + n;
      for (const std::string& n : want)
        if (got.count(n) == 0) diff += " -" + n;
      Fail("readdir", dir, "listing differs from the model:" + diff);
    }
  }

  void Fsync() {
    ++counts_[kFsync];
    if (Chance(20)) {
      const std::string dir = PickDir();
      const int fd = static_cast<int>(
          Check(::open(Full(dir).c_str(), O_RDONLY | O_DIRECTORY), "open directory", dir));
      Check(::fsync(fd), "fsync directory", dir);
      Check(::close(fd), "close", dir);
      return;
    }
    const auto [path, node] = *PickFile();
    const auto fd = FdFor(node, path, "fsync");
    if (Chance(50)) {
      Check(::fsync(fd.first), "fsync", path);
    } else {
      Check(::fdatasync(fd.first), "fdatasync", path);
    }
    Release(fd, path);
  }

  void Xattr() {
    ++counts_[kXattr];
    const auto [path, node] = *PickFile();
    const std::string full = Full(path);
    const std::string name = "user.k" + std::to_string(Pick(kXattrNames));
    const bool exists = node->xattrs.count(name) != 0;
    const uint64_t kind = Pick(5);
    if (kind < 2) {
      const std::string value = Bytes(Between(0, kMaxXattrValue));
      int flags = 0;
      if (Chance(30)) flags = exists ? XATTR_REPLACE : XATTR_CREATE;
      if (Chance(10)) {  // the flag that must refuse
        return CheckFails(::setxattr(full.c_str(), name.c_str(), value.data(), value.size(),
                                     exists ? XATTR_CREATE : XATTR_REPLACE),
                          exists ? EEXIST : ENODATA, "setxattr " + name, path);
      }
      Check(::setxattr(full.c_str(), name.c_str(), value.data(), value.size(), flags),
            "setxattr " + name, path);
      node->xattrs[name] = value;
    } else if (kind == 2) {
      std::string value(kMaxXattrValue + 1, '\0');
      const ssize_t n = ::getxattr(full.c_str(), name.c_str(), value.data(), value.size());
      if (!exists) return CheckFails(n, ENODATA, "getxattr " + name, path);
      Check(n, "getxattr " + name, path);
      value.resize(static_cast<size_t>(n));
      if (value != node->xattrs[name]) Fail("getxattr " + name, path, "value differs");
    } else if (kind == 3) {
      std::string list(4096, '\0');
      const ssize_t n =
          Check(::listxattr(full.c_str(), list.data(), list.size()), "listxattr", path);
      std::set<std::string> got;
      for (size_t at = 0; at < static_cast<size_t>(n);) {
        const std::string one = list.c_str() + at;
        at += one.size() + 1;
        if (one.rfind("user.", 0) == 0) got.insert(one);
      }
      std::set<std::string> want;
      for (const auto& [k, v] : node->xattrs) want.insert(k);
      if (got != want)
        Fail("listxattr", path,
             std::to_string(got.size()) + " names, expected " + std::to_string(want.size()));
    } else {
      if (!exists)
        return CheckFails(::removexattr(full.c_str(), name.c_str()), ENODATA, "removexattr " + name,
                          path);
      Check(::removexattr(full.c_str(), name.c_str()), "removexattr " + name, path);
      node->xattrs.erase(name);
    }
  }

  void Stat() {
    ++counts_[kStat];
    struct stat st;
    if (Chance(15)) {
      const std::string dir = PickDir();
      Check(::stat(Full(dir).c_str(), &st), "stat", dir);
      if (!S_ISDIR(st.st_mode)) Fail("stat", dir, "not a directory");
      return;
    }
    const auto [path, node] = *PickFile();
    auto held = held_.find(node->id);
    if (held != held_.end() && Chance(50)) {
      Check(::fstat(held->second.second, &st), "fstat", path);
    } else {
      Check(::stat(Full(path).c_str(), &st), "stat", path);
    }
    if (!S_ISREG(st.st_mode)) Fail("stat", path, "not a regular file");
    if (static_cast<uint64_t>(st.st_size) != node->data.size())
      Fail(
          "stat", path,
          "size " + std::to_string(st.st_size) + ", expected " + std::to_string(node->data.size()));
    if (st.st_nlink != Links(node.get()))
      Fail("stat", path,
           "nlink " + std::to_string(st.st_nlink) + ", expected " +
               std::to_string(Links(node.get())));
  }

  // Another process's files, read at random places while every worker reads them.
  void SharedRead() {
    ++counts_[kSharedRead];
    const size_t i = Pick(kSharedCount);
    const std::string path = std::string("shared/") + kShared[i].name;
    const std::string& want = shared_[i];
    if (Chance(10)) {
      struct stat st;
      Check(::stat(Full(path).c_str(), &st), "stat", path);
      if (static_cast<uint64_t>(st.st_size) != want.size()) Fail("stat", path, "wrong size");
      return;
    }
    const int fd = static_cast<int>(Check(::open(Full(path).c_str(), O_RDONLY), "open", path));
    const uint64_t off = Between(0, want.size());
    const uint64_t len = Chance(20) ? want.size() : Extent(0).second;
    CheckBytes(ReadAt(fd, off, len, "read", path), want.substr(off, len), off, "read", path);
    Check(::close(fd), "close", path);
  }

  void ExpectedError() {
    const std::string file = PickFile()->first;
    const std::string dir = PickDir();
    switch (Pick(6)) {
      case 0: {
        const std::string missing = NewName(dir, "missing");
        return CheckFails(::open(Full(missing).c_str(), O_RDONLY), ENOENT, "open", missing);
      }
      case 1:
        return CheckFails(::open(Full(file).c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST,
                          "create exclusive", file);
      case 2:
        return CheckFails(::mkdir(Full(dir).c_str(), 0755), EEXIST, "mkdir", dir);
      case 3:
        return CheckFails(::rmdir(Full(file).c_str()), ENOTDIR, "rmdir", file);
      case 4:
        return CheckFails(::unlink(Full(dir).c_str()), EISDIR, "unlink", dir);
      default:
        return CheckFails(::link(Full(file).c_str(), Full(PickFile()->first).c_str()), EEXIST,
                          "link onto an existing name", file);
    }
  }

  // Closes everything, reads every file once more, and leaves the model and the counts for the
  // parent: "D dir", "F path node digest", "X node name hex", "C op count", "B written read ops".
  [[noreturn]] void Finish() {
    while (!held_.empty()) CloseHeld(held_.begin());
    for (const auto& [path, node] : files_)
      CheckBytes(ReadWhole(path, 1 << 20, "final read"), node->data, 0, "final read", path);
    std::ostringstream out;
    for (const std::string& d : dirs_) out << "D " << d << "\n";
    std::set<const Node*> nodes;
    for (const auto& [path, node] : files_) {
      out << "F " << path << " " << node->id << " " << Digest(node->data) << "\n";
      if (!nodes.insert(node.get()).second) continue;
      for (const auto& [name, value] : node->xattrs)
        out << "X " << node->id << " " << name << " " << crypt::HexEncode(AsBytes(value)) << "\n";
    }
    for (int op = 0; op < kOpCount; ++op) out << "C " << kOpNames[op] << " " << counts_[op] << "\n";
    out << "B " << bytes_written_ << " " << bytes_read_ << " " << ops_ << "\n";
    Append(out.str() + "END");
    ::_exit(0);
  }

  const std::string root_;
  const std::string own_;  // this worker's directory, relative to the root
  const int index_;
  const uint64_t seed_;
  std::mt19937_64 rng_;
  const Clock::time_point deadline_;
  const std::string out_;  // outside the mount
  std::vector<std::string> shared_;
  std::deque<std::string> recent_;
  Files files_;                                                // every name, relative to the root
  std::set<std::string> dirs_;                                 // own_ and its subdirectories
  std::map<int, std::pair<std::shared_ptr<Node>, int>> held_;  // node id -> (node, descriptor)
  int next_node_ = 1;
  uint64_t next_name_ = 0;
  uint64_t ops_ = 0;
  uint64_t counts_[kOpCount] = {};
  uint64_t bytes_written_ = 0, bytes_read_ = 0;
};

// --- The parent: samples the daemon, then checks the workers' models after a remount. ---

struct DaemonSample {
  double at = 0;         // seconds since the load began
  uint64_t rss_kib = 0;  // VmRSS
  uint64_t hwm_kib = 0;  // VmHWM: the peak so far
  uint64_t threads = 0;
  size_t fds = 0;          // descriptors, but for the directory handles it keeps
  size_t dir_handles = 0;  // O_PATH handles on directories that exist (its OpenDirCache)
};

// Whether the daemon's descriptor `fd` (under /proc/PID/fd) is a directory handle of the kind
// it keeps for requests: O_PATH, on a directory that still exists. A kept handle of a removed
// object, or anything else, is not.
bool IsKeptDirectoryHandle(const std::string& proc, const fs::path& fd) {
  std::ifstream info(proc + "/fdinfo/" + fd.filename().string());
  std::string line;
  unsigned long flags = 0;
  while (std::getline(info, line))
    if (line.rfind("flags:", 0) == 0) flags = std::stoul(line.substr(6), nullptr, 8);
  if ((flags & O_PATH) == 0) return false;
  std::error_code ec;
  const std::string target = fs::read_symlink(fd, ec).string();
  if (ec || target.ends_with(" (deleted)")) return false;
  struct stat st;
  return ::stat(fd.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink > 0;
}

DaemonSample SampleDaemon(pid_t pid, Clock::time_point start) {
  DaemonSample s;
  s.at = std::chrono::duration<double>(Clock::now() - start).count();
  const std::string proc = "/proc/" + std::to_string(pid);
  std::ifstream status(proc + "/status");
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    std::string key;
    uint64_t value = 0;
    if (!(fields >> key >> value)) continue;
    if (key == "VmRSS:") s.rss_kib = value;
    if (key == "VmHWM:") s.hwm_kib = value;
    if (key == "Threads:") s.threads = value;
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(proc + "/fd", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (IsKeptDirectoryHandle(proc, it->path()))
      ++s.dir_handles;
    else
      ++s.fds;
  }
  return s;
}

// One worker's model as it left it, and what it counted.
struct WorkerReport {
  std::string failure;  // its FAIL line, if any
  bool finished = false;
  std::map<std::string, std::string> files;  // path -> "node digest"
  std::set<std::string> dirs;
  std::map<std::string, std::set<std::string>> xattrs;  // node -> "name=hex"
  std::map<std::string, uint64_t> counts;
  uint64_t bytes_written = 0, bytes_read = 0, ops = 0;
};

WorkerReport ParseReport(const std::string& text) {
  WorkerReport r;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream w(line);
    std::string kind, a, b, c;
    w >> kind;
    if (kind == "FAIL") {
      r.failure = line.substr(5);
    } else if (kind == "|") {
      r.failure += "\n" + line;
    } else if (kind == "END") {
      r.finished = true;
    } else if (kind == "D" && w >> a) {
      r.dirs.insert(a);
    } else if (kind == "F" && w >> a >> b >> c) {
      r.files[a] = b.append(" ").append(c);
    } else if (kind == "X" && w >> a >> b) {
      w >> c;  // an empty value has no hex
      r.xattrs[a].insert(b.append("=").append(c));
    } else if (kind == "C" && w >> a >> b) {
      r.counts[a] = std::stoull(b);
    } else if (kind == "B" && w >> a >> b >> c) {
      r.bytes_written = std::stoull(a);
      r.bytes_read = std::stoull(b);
      r.ops = std::stoull(c);
    }
  }
  return r;
}

// The user.* attributes of `path` as "name=hex".
std::set<std::string> XattrsOf(const std::string& path) {
  std::set<std::string> out;
  std::string names(4096, '\0');
  const ssize_t n = ::listxattr(path.c_str(), names.data(), names.size());
  for (size_t at = 0; n > 0 && at < static_cast<size_t>(n);) {
    const std::string name = names.c_str() + at;
    at += name.size() + 1;
    if (name.rfind("user.", 0) != 0) continue;
    std::string value(kMaxXattrValue + 1, '\0');
    const ssize_t got = ::getxattr(path.c_str(), name.c_str(), value.data(), value.size());
    value.resize(got < 0 ? 0 : static_cast<size_t>(got));
    out.insert(name + "=" + crypt::HexEncode(AsBytes(value)));
  }
  return out;
}

// Every entry of worker `k`'s directory, as the remounted vault shows it, against its model:
// the same names, contents, attributes and hard links.
void CheckAgainstModel(const test::MountedVault& vault, int k, const WorkerReport& model) {
  SCOPED_TRACE("worker " + std::to_string(k));
  std::set<std::string> dirs = {"w" + std::to_string(k)};
  std::map<std::string, std::string> files;
  std::map<std::string, ino_t> inode_of_node;
  std::map<std::string, size_t> links_of_node;
  for (const auto& [path, value] : model.files) ++links_of_node[value.substr(0, value.find(' '))];
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(vault.path(*dirs.begin()), ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string rel = it->path().lexically_relative(vault.plain()).string();
    struct stat st;
    ASSERT_EQ(::lstat(it->path().c_str(), &st), 0) << rel << ": " << test::ErrnoName(errno);
    if (S_ISDIR(st.st_mode)) {
      dirs.insert(rel);
      continue;
    }
    ASSERT_TRUE(S_ISREG(st.st_mode)) << rel;
    auto want = model.files.find(rel);
    if (want == model.files.end()) {
      ADD_FAILURE() << rel << " is not in the model";
      continue;
    }
    const std::string node = want->second.substr(0, want->second.find(' '));
    files[rel] = node + " " + Digest(test::ReadAll(it->path()));
    EXPECT_EQ(files[rel], want->second) << rel << ": contents (node, size:hash)";
    auto [known, fresh] = inode_of_node.emplace(node, st.st_ino);
    EXPECT_EQ(known->second, st.st_ino) << rel << " is not the same file as its other names";
    EXPECT_EQ(st.st_nlink, links_of_node[node]) << rel;
    if (fresh) {
      auto attrs = model.xattrs.find(node);
      EXPECT_EQ(XattrsOf(it->path().string()),
                attrs == model.xattrs.end() ? std::set<std::string>{} : attrs->second)
          << rel << ": extended attributes";
    }
  }
  ASSERT_FALSE(ec) << "walking the tree: " << ec.message();
  EXPECT_EQ(dirs, model.dirs);
  for (const auto& [path, value] : model.files)
    EXPECT_NE(files.count(path), 0u) << path << " is in the model but not in the vault";
}

uint64_t Mib(uint64_t kib) { return kib / 1024; }

TEST(MountLoadTest, ProcessesUnderMixedLoadKeepTheDaemonBounded) {
  SIGILFS_NEEDS_FUSE();
  const bool long_run = std::getenv("SIGILFS_LONG") != nullptr;
  const std::chrono::seconds duration(long_run ? 300 : 15);
  const char* env_seed = std::getenv("SIGILFS_SEED");
  const uint64_t seed = env_seed ? std::strtoull(env_seed, nullptr, 10) : std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with SIGILFS_SEED=" + std::to_string(seed) + ")");

  test::MountedVault vault;
  test::TempDir outside;  // the workers' reports
  const pid_t daemon = vault.pid();
  ASSERT_GT(daemon, 0);
  ASSERT_EQ(::mkdir(vault.path("shared").c_str(), 0755), 0) << test::ErrnoName(errno);
  for (const SharedFile& s : kShared) {
    const std::vector<uint8_t> data = test::Pattern(s.size, s.seed);
    const int fd = ::open(vault.path(std::string("shared/") + s.name).c_str(),
                          O_WRONLY | O_CREAT | O_EXCL, 0444);
    ASSERT_GE(fd, 0) << test::ErrnoName(errno);
    ASSERT_EQ(::write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    ASSERT_EQ(::close(fd), 0);
  }
  // The release of a closed file reaches the daemon after close() returns: let it settle.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Clock::time_point start = Clock::now();
  const DaemonSample idle = SampleDaemon(daemon, start);

  std::mt19937_64 seeds(seed);
  std::vector<pid_t> workers;
  std::vector<uint64_t> worker_seeds;
  for (int k = 0; k < kWorkers; ++k) {
    worker_seeds.push_back(seeds());
    const std::string report = (outside.path() / ("w" + std::to_string(k))).string();
    const pid_t pid = ::fork();
    if (pid == 0) Worker(vault.plain(), k, worker_seeds.back(), start + duration, report).Run();
    ASSERT_GT(pid, 0);
    workers.push_back(pid);
  }

  // Sample every 200 ms until every worker has exited. A worker that fails stops the others;
  // one still running a minute past the deadline is stuck.
  std::vector<DaemonSample> samples;
  std::vector<int> status(workers.size(), 0);
  std::vector<bool> running(workers.size(), true);
  bool stopped_early = false;
  bool hung = false;
  for (size_t left = workers.size(); left > 0;) {
    samples.push_back(SampleDaemon(daemon, start));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (size_t k = 0; k < workers.size(); ++k) {
      if (!running[k] || ::waitpid(workers[k], &status[k], WNOHANG) != workers[k]) continue;
      running[k] = false;
      --left;
      if (!(WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 0) && !stopped_early) {
        stopped_early = true;
        for (size_t j = 0; j < workers.size(); ++j)
          if (running[j]) ::kill(workers[j], SIGKILL);
      }
    }
    if (left > 0 && Clock::now() > start + duration + std::chrono::seconds(60)) {
      hung = true;
      for (size_t j = 0; j < workers.size(); ++j)
        if (running[j]) ::kill(workers[j], SIGKILL);
    }
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_FALSE(hung) << "workers were still running a minute after the deadline\n" << vault.log();

  std::vector<WorkerReport> reports;
  for (int k = 0; k < kWorkers; ++k) {
    reports.push_back(ParseReport(test::ReadAll(outside.path() / ("w" + std::to_string(k)))));
    const WorkerReport& r = reports.back();
    EXPECT_TRUE(r.failure.empty()) << r.failure;
    EXPECT_TRUE(r.finished || !r.failure.empty() || stopped_early)
        << "worker " << k << " (seed " << worker_seeds[k] << ") ended without a report, status "
        << status[k];
  }
  if (::testing::Test::HasFailure()) {
    const std::string log = vault.log();
    ADD_FAILURE() << "daemon log (end):\n"
                  << log.substr(log.size() - std::min<size_t>(log.size(), 4000));
    return;
  }

  // Descriptors: once every worker is gone, the daemon is back to what it held idle, but for
  // the handles of directories it keeps (at most one per directory there is). An object
  // removed while the kernel held it keeps a descriptor until the kernel forgets its node,
  // which a loaded machine may put off: past 5 s, the kernel is asked to drop unused inodes.
  DaemonSample after = SampleDaemon(daemon, start);
  for (int i = 0; i < 100 && after.fds > idle.fds; ++i) {
    if (i == 50 && ::geteuid() == 0) std::ofstream("/proc/sys/vm/drop_caches") << "2" << std::flush;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = SampleDaemon(daemon, start);
  }
  std::string held;  // what the daemon still holds, for the failure message
  if (after.fds > idle.fds) {
    std::error_code ec;
    const std::string fd_dir = "/proc/" + std::to_string(daemon) + "/fd";
    for (auto it = fs::directory_iterator(fd_dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      // With its open flags (O_PATH is 010000000): a kept removed object, or an open file.
      std::ifstream info("/proc/" + std::to_string(daemon) + "/fdinfo/" +
                         it->path().filename().string());
      std::string line, flags;
      while (std::getline(info, line))
        if (line.rfind("flags:", 0) == 0) flags = line.substr(6);
      held += "\n  " + it->path().filename().string() + " " +
              fs::read_symlink(it->path(), ec).string() + " (flags" + flags + ")";
    }
  }

  // The figures.
  std::map<std::string, uint64_t> counts;
  uint64_t ops = 0, written = 0, read = 0;
  for (const WorkerReport& r : reports) {
    for (const auto& [op, n] : r.counts) counts[op] += n;
    ops += r.ops;
    written += r.bytes_written;
    read += r.bytes_read;
  }
  const double load_seconds = std::chrono::duration<double>(duration).count();
  uint64_t max_rss = 0, warm_rss = 0, final_rss = 0, max_threads = 0;
  size_t max_fds = 0;
  for (const DaemonSample& s : samples) {
    max_rss = std::max(max_rss, s.rss_kib);
    max_threads = std::max(max_threads, s.threads);
    max_fds = std::max(max_fds, s.fds);
    if (s.at <= load_seconds / 4) warm_rss = std::max(warm_rss, s.rss_kib);
    if (s.at <= load_seconds) final_rss = s.rss_kib;
  }
  const uint64_t hwm = after.hwm_kib;
  // What the daemon may hold: its idle footprint, the page cache's budget (the mount uses the
  // default), and as much again for everything else (page buffer pools of up to 8 MiB plus
  // 256 KiB per thread, one FUSE request buffer per thread, buffers of direct I/O, allocator
  // arenas, and cached pages of open files the eviction has not reached yet).
  const uint64_t cache_kib = core::PageLayerOptions{}.cache_bytes / 1024;
  const uint64_t hwm_bound = idle.rss_kib + 2 * cache_kib;
  [[maybe_unused]] const uint64_t growth_margin = 64 << 10;  // checked without sanitizers
  // Each worker holds at most kMaxHeld files open, plus one file, one directory and one shared
  // file in an operation, and the daemon needs one descriptor for each; a request in progress
  // opens the directories on its path for a moment, a few at most, on each of up to 16 FUSE
  // threads.
  const size_t fd_bound = idle.fds + size_t{kWorkers} * (kMaxHeld + 3) + 16 * 3;

  std::printf("load: %d processes for %.1f s (all exited after %.1f s), seed %llu\n", kWorkers,
              load_seconds, elapsed, static_cast<unsigned long long>(seed));
  std::printf("  %llu operations, %.0f/s; %.1f MiB written, %.1f MiB read\n",
              static_cast<unsigned long long>(ops), static_cast<double>(ops) / load_seconds,
              static_cast<double>(written) / (1 << 20), static_cast<double>(read) / (1 << 20));
  std::string per_op = " ";
  for (const auto& [op, n] : counts) per_op += " " + op + " " + std::to_string(n);
  std::printf("%s\n", per_op.c_str());
  size_t directories = 0;  // in the cipher tree now, its root too
  {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(vault.cipher(), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec)) ++directories;
    ++directories;
  }
  std::printf(
      "daemon: RSS idle %llu MiB, after warm-up %llu MiB, at the end %llu MiB, peak (VmHWM) %llu "
      "MiB (bound %llu MiB); descriptors idle %zu, max %zu (bound %zu), after %zu, and %zu "
      "directory handles kept (%zu directories); threads max %llu\n",
      static_cast<unsigned long long>(Mib(idle.rss_kib)),
      static_cast<unsigned long long>(Mib(warm_rss)),
      static_cast<unsigned long long>(Mib(final_rss)), static_cast<unsigned long long>(Mib(hwm)),
      static_cast<unsigned long long>(Mib(hwm_bound)), idle.fds, max_fds, fd_bound, after.fds,
      after.dir_handles, directories, static_cast<unsigned long long>(max_threads));
  ::testing::Test::RecordProperty("peak_rss_kib", std::to_string(hwm));
  ::testing::Test::RecordProperty("idle_rss_kib", std::to_string(idle.rss_kib));
  ::testing::Test::RecordProperty("warm_rss_kib", std::to_string(warm_rss));
  ::testing::Test::RecordProperty("final_rss_kib", std::to_string(final_rss));
  ::testing::Test::RecordProperty("ops", std::to_string(ops));
  ::testing::Test::RecordProperty("ops_per_second",
                                  std::to_string(static_cast<uint64_t>(ops / load_seconds)));
  ::testing::Test::RecordProperty("max_fds", std::to_string(max_fds));
  for (const auto& [op, n] : counts)
    ::testing::Test::RecordProperty("ops_" + op, std::to_string(n));

  EXPECT_LE(max_fds, fd_bound) << "daemon descriptors";
  EXPECT_LE(after.fds, idle.fds) << "descriptors still open in the daemon after the load:" << held;
  EXPECT_LE(after.dir_handles, directories) << "one handle at most per directory there is";
  for (const auto& [op, n] : counts) EXPECT_GT(n, 0u) << op << " never ran";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers' shadow memory and quarantine are most of the footprint there.
  std::printf("memory bounds not checked under a sanitizer\n");
#else
  EXPECT_LE(final_rss, warm_rss + growth_margin) << "the daemon's memory kept growing";
  EXPECT_LE(hwm, hwm_bound) << "the daemon's peak memory";
#endif
  if (::testing::Test::HasFailure()) {
    for (size_t i = 0; i < samples.size(); i += 5)
      std::printf("  %.1f s: RSS %llu MiB, %zu descriptors\n", samples[i].at,
                  static_cast<unsigned long long>(Mib(samples[i].rss_kib)), samples[i].fds);
  }

  // After a remount, every file as its worker left it, and the shared files untouched.
  vault.Remount();
  for (int k = 0; k < kWorkers; ++k) CheckAgainstModel(vault, k, reports[k]);
  for (const SharedFile& s : kShared) {
    const std::vector<uint8_t> want = test::Pattern(s.size, s.seed);
    EXPECT_TRUE(test::ReadAll(vault.path(std::string("shared/") + s.name)) ==
                std::string(want.begin(), want.end()))
        << s.name;
  }
  vault.Unmount();
  const test::ProcessResult fsck =
      test::RunProcess({SIGILFS_BINARY, "fsck", vault.cipher(), "--passfile", vault.passfile()});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
}

}  // namespace
}  // namespace sigilfs
