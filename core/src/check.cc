// Check: the read-only walk behind `sigilfs fsck`, over the vault's Tree.
#include "sigilfs/core/check.h"

#include <set>
#include <utility>
#include <vector>

#include "sigilfs/core/format.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {
namespace {

// Plaintext is read in steps of this size: large enough for read-ahead, small enough to wipe.
constexpr size_t kReadStep = 1 << 20;

class Checker {
 public:
  Checker(Tree& tree, const std::function<void(const std::string&, const Status&)>& problem,
          uint64_t max_pages_listed, const ByteProgress& progress)
      : tree_(tree),
        report_(problem),
        max_pages_listed_(max_pages_listed),
        progress_(progress),
        buffer_(kReadStep) {}
  ~Checker() { crypt::SecureWipe(buffer_); }
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  CheckSummary Run() {
    bool from_attribute = false;
    auto root = tree_.Root(Volume::DirIvCopies::kCompare, &from_attribute);
    if (!root.ok()) {
      ++summary_.directories;
      Problem(".", root.status());
    } else {
      CheckDirectory(**root, from_attribute);
    }
    return summary_;
  }

 private:
  void Problem(const std::string& path, const Status& s) {
    ++summary_.problems;
    if (report_) report_(path, s);
  }

  // One level holds one open directory.
  void CheckDirectory(const Tree::Dir& dir, bool from_attribute) {
    ++summary_.directories;
    if (from_attribute)  // readable, but a backup that drops attributes would lose its names
      Problem(dir.path(), Status(Code::kCorrupt,
                                 "IV file torn; its copy in the directory's attribute is "
                                 "used (mounting the vault restores the file)"));
    std::vector<DirEntry> entries;
    Status listed = tree_.ListSorted(dir, entries, [&](const std::string& stored, const Status& s) {
      Problem(dir.PathOf(stored) + " (stored name)", s);
    });
    if (!listed.ok()) Problem(dir.path(), listed);
    for (const DirEntry& e : entries) CheckEntry(dir, tree_.NameOf(dir, e));
  }

  void CheckEntry(const Tree::Dir& dir, const EntryName& name) {
    const std::string path = dir.PathOf(name.plain());
    auto st = tree_.StatStored(dir, name);
    if (!st.ok()) {
      Problem(path, st.status());
      return;
    }
    if (S_ISDIR(st->st_mode)) {
      bool from_attribute = false;
      auto sub = tree_.OpenDir(dir, name, Volume::DirIvCopies::kCompare, &from_attribute);
      if (!sub.ok()) {
        ++summary_.directories;
        Problem(path, sub.status());  // without its IV no name in it can be read
        return;
      }
      CheckDirectory(**sub, from_attribute);
    } else if (S_ISREG(st->st_mode)) {
      // A file with several names is read once.
      if (st->st_nlink > 1 && !seen_.insert({st->st_dev, st->st_ino}).second) return;
      ++summary_.files;
      CheckFile(dir, name, *st);
    } else if (S_ISLNK(st->st_mode)) {
      ++summary_.symlinks;
      if (auto target = tree_.ReadLink(dir, name); !target.ok())
        Problem(path, target.status().WithContext("symlink target"));
    }
    // FIFOs, sockets and device nodes have nothing encrypted but their names.
  }

  void CheckFile(const Tree::Dir& dir, const EntryName& name, const struct stat& st) {
    const std::string path = dir.PathOf(name.plain());
    auto file = tree_.OpenFile(dir, name, /*write=*/false, &st);
    if (!file.ok()) {
      Problem(path, file.status().sys_errno() == ESTALE
                        ? Status(Code::kCorrupt, "changed while being checked")
                        : file.status());
      return;
    }
    FileContents& contents = **file;
    if (contents.sealed()) {
      ++summary_.sealed;
      if (contents.seal_unflagged())
        Problem(path, Status(Code::kCorrupt,
                             "sealed, but its header's flags are clear (a seal stopped after its "
                             "commit point, or a changed header): it reads as sealed"));
      // Reads every tree block and every data page, each checked as a read would: a full
      // read on top would find nothing new.
      if (Status s = contents.VerifyAll(progress_); !s.ok()) Problem(path, s);
      return;
    }
    // Every damaged page is listed (after a crash: the page that was being written), the
    // reading going on at the next page; past the limit only a count, since a file whose
    // every page fails (another file's header, say) would otherwise give one line per page.
    const uint64_t size = contents.size();
    uint64_t damaged = 0;
    for (uint64_t offset = 0; offset < size;) {
      auto n = contents.Read(offset, buffer_);
      if (!n.ok()) {
        if (++damaged <= max_pages_listed_) Problem(path, n.status());
        offset = (offset / kPageSize + 1) * kPageSize;
        continue;
      }
      if (*n == 0) {
        Problem(path, Status(Code::kCorrupt, "ends at " + std::to_string(offset) + " of " +
                                                 std::to_string(size) + " bytes"));
        return;
      }
      offset += *n;
      if (progress_) progress_(*n);
    }
    if (damaged > max_pages_listed_)
      Problem(path, Status(Code::kCorrupt, std::to_string(damaged - max_pages_listed_) +
                                               " more damaged pages not listed"));
  }

  Tree& tree_;
  const std::function<void(const std::string&, const Status&)>& report_;
  const uint64_t max_pages_listed_;
  const ByteProgress& progress_;
  std::vector<uint8_t> buffer_;  // plaintext: wiped when the walk is done
  std::set<std::pair<dev_t, ino_t>> seen_;
  CheckSummary summary_;
};

}  // namespace

CheckSummary CheckTree(Tree& tree,
                       const std::function<void(const std::string&, const Status&)>& problem,
                       uint64_t max_pages_listed, const ByteProgress& progress) {
  return Checker(tree, problem, max_pages_listed, progress).Run();
}

}  // namespace sigilfs::core
