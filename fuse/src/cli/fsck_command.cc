// `sigilfs fsck`: reads a whole unmounted vault and reports everything that does not decrypt.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "commands.h"
#include "sigilfs/core/unique_fd.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::cli {
namespace {

constexpr int kExitClean = 0;
constexpr int kExitProblems = 1;
constexpr int kExitUsage = 2;

// Plaintext is read in steps of this size: large enough for read-ahead, small enough to wipe.
constexpr size_t kReadStep = 1 << 20;
// Damaged pages of one file listed one by one; past this many, only their number.
constexpr uint64_t kMaxPagesListed = 16;

struct FsckOptions {
  std::string dir;
  bool quiet = false;
  fuse::PassphraseSource pass;
};

using Fd = core::UniqueFd;

// One walk over the vault. Opens everything read-only and never follows a symlink.
class Checker {
 public:
  explicit Checker(core::Volume& volume) : volume_(volume), buffer_(kReadStep) {}
  ~Checker() { crypt::SecureWipe(buffer_); }
  Checker(const Checker&) = delete;
  Checker& operator=(const Checker&) = delete;

  void CheckTree() {
    const int root = ::dup(volume_.root_fd());
    if (root < 0) {
      Problem(".", Status::FromErrno(errno, "dup"));
      return;
    }
    CheckDirectory(".", Fd(root));
  }

  void PrintSummary() const {
    fmt::print("{} directories, {} files ({} sealed), {} symlinks checked; {} problems\n",
               directories_, files_, sealed_, symlinks_, problems_);
  }
  uint64_t problems() const { return problems_; }

 private:
  static std::string Join(const std::string& dir, const std::string& name) {
    return dir == "." ? name : dir + "/" + name;
  }

  // "<path>: <code name>: <message>", without the path a second time when the message
  // already starts with it (the page layer names the file it reads).
  void Problem(const std::string& path, const Status& s) {
    ++problems_;
    std::string message = s.message();
    if (message.rfind(path + ": ", 0) == 0) message.erase(0, path.size() + 2);
    fmt::print("{}: {}: {}\n", path, CodeName(s.code()), message);
  }

  // Depth first, entries in name order (a stable report); holds one descriptor per level.
  void CheckDirectory(const std::string& path, const Fd& dir) {
    ++directories_;
    bool from_attribute = false;
    auto iv = volume_.ReadDirIv(dir.get(), &from_attribute, core::Volume::DirIvCopies::kCompare);
    if (!iv.ok()) {
      Problem(path, iv.status());  // without its IV no name in it can be read
      return;
    }
    if (from_attribute)  // readable, but a backup that drops attributes would lose its names
      Problem(path, Status(Code::kCorrupt,
                           "IV file torn; its copy in the directory's attribute is "
                           "used (mounting the vault restores the file)"));
    std::vector<core::DirEntry> entries;
    Status listed = volume_.ListSorted(dir.get(), *iv, entries,
                                       [&](const std::string& stored, const Status& s) {
                                         Problem(Join(path, stored) + " (stored name)", s);
                                       });
    if (!listed.ok()) Problem(path, listed);
    for (const core::DirEntry& e : entries) CheckEntry(path, dir, e);
  }

  void CheckEntry(const std::string& dir_path, const Fd& dir, const core::DirEntry& e) {
    const std::string path = Join(dir_path, e.name);
    struct stat st;
    if (::fstatat(dir.get(), e.stored.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      Problem(path, Status::FromErrno(errno, "stat"));
      return;
    }
    if (S_ISDIR(st.st_mode)) {
      const int fd =
          ::openat(dir.get(), e.stored.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) {
        Problem(path, Status::FromErrno(errno, "open directory"));
        return;
      }
      CheckDirectory(path, Fd(fd));
    } else if (S_ISREG(st.st_mode)) {
      // A file with several names is read once.
      if (st.st_nlink > 1 && !seen_.insert({st.st_dev, st.st_ino}).second) return;
      ++files_;
      CheckFile(path, dir, e.stored);
    } else if (S_ISLNK(st.st_mode)) {
      ++symlinks_;
      CheckSymlink(path, dir, e.stored);
    }
    // FIFOs, sockets and device nodes have nothing encrypted but their names.
  }

  void CheckFile(const std::string& path, const Fd& dir, const std::string& stored) {
    // O_NONBLOCK: should the entry have become a FIFO since the stat, the open must not hang.
    const int fd = ::openat(dir.get(), stored.c_str(),
                            O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
      Problem(path, Status::FromErrno(errno, "open"));
      return;
    }
    struct stat st;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      Problem(path, Status(Code::kCorrupt, "changed while being checked"));
      return;
    }
    auto file = volume_.pages().Open(core::NewPosixBackingFile(fd), path);
    if (!file.ok()) {
      Problem(path, file.status());
      return;
    }
    if ((*file)->sealed()) {
      ++sealed_;
      if ((*file)->seal_unflagged())
        Problem(path, Status(Code::kCorrupt,
                             "sealed, but its header's flags are clear (a seal stopped after its "
                             "commit point, or a changed header): it reads as sealed"));
      // Reads every tree block and every data page, each checked as a read would: a full
      // read on top would find nothing new.
      if (Status s = (*file)->VerifyAll(); !s.ok()) Problem(path, s);
      return;
    }
    // Every damaged page is listed (after a crash: the page that was being written), the
    // reading going on at the next page; past kMaxPagesListed only a count, since a file whose
    // every page fails (another file's header, say) would otherwise print one line per page.
    const uint64_t size = (*file)->size();
    uint64_t damaged = 0;
    for (uint64_t offset = 0; offset < size;) {
      auto n = (*file)->Read(offset, buffer_);
      if (!n.ok()) {
        if (++damaged <= kMaxPagesListed) Problem(path, n.status());
        offset = (offset / core::kPageSize + 1) * core::kPageSize;
        continue;
      }
      if (*n == 0) {
        Problem(path, Status(Code::kCorrupt, fmt::format("ends at {} of {} bytes", offset, size)));
        return;
      }
      offset += *n;
    }
    if (damaged > kMaxPagesListed)
      Problem(path, Status(Code::kCorrupt, fmt::format("{} more damaged pages not listed",
                                                       damaged - kMaxPagesListed)));
  }

  void CheckSymlink(const std::string& path, const Fd& dir, const std::string& stored) {
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(dir.get(), stored.c_str(), target.data(), target.size());
    if (n < 0) {
      Problem(path, Status::FromErrno(errno, "readlink"));
      return;
    }
    target.resize(static_cast<size_t>(n));
    if (auto plain = volume_.DecryptSymlinkTarget(target); !plain.ok())
      Problem(path, plain.status().WithContext("symlink target"));
  }

  core::Volume& volume_;
  std::vector<uint8_t> buffer_;  // plaintext: wiped when the walk is done
  std::set<std::pair<dev_t, ino_t>> seen_;
  uint64_t directories_ = 0;
  uint64_t files_ = 0;
  uint64_t sealed_ = 0;
  uint64_t symlinks_ = 0;
  uint64_t problems_ = 0;
};

int RunFsck(const FsckOptions& o) {
  fuse::VaultLock lock;
  auto volume = OpenVolume(o.dir, o.pass, VaultAccess::kRead, lock);
  if (!volume.ok()) {
    (void)Fail(volume.status());  // its one line on stderr; the exit status tells it apart
    return kExitUsage;
  }
  Checker checker(**volume);
  checker.CheckTree();
  if (!o.quiet) checker.PrintSummary();
  return checker.problems() == 0 ? kExitClean : kExitProblems;
}

}  // namespace

void RegisterFsckCommand(CLI::App& app, Action& action) {
  auto o = std::make_shared<FsckOptions>();
  auto* cmd = app.add_subcommand(
      "fsck", "Check an unmounted vault: every name, file page, verity tree and symlink target");
  cmd->add_option("CIPHERDIR", o->dir, "The vault's cipher directory")->required();
  cmd->add_flag("-q,--quiet", o->quiet, "Print only the problems, not the summary line");
  AddPassphraseOptions(*cmd, o->pass, "", "passphrase");
  cmd->footer(
      "Reads everything, changes nothing. Prints one line per problem, then a summary. A vault\n"
      "that is mounted gets a warning: the mount may not have written back yet.\n"
      "Exit status: 0 no problems, 1 problems found, 2 usage error or the vault did not unlock.");
  cmd->callback([&action, o] { action = [o] { return RunFsck(*o); }; });
}

}  // namespace sigilfs::cli
