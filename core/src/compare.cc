// CompareWithPlain: a plain tree against a vault tree, entry by entry, both read back through
// their stores (the proof `sigilfs home` needs before it removes plain files).
#include <sys/stat.h>

#include <map>
#include <set>
#include <utility>

#include "plain_tree.h"
#include "sigilfs/core/acl.h"
#include "sigilfs/core/transfer.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {
namespace {

using InodeKey = std::pair<dev_t, ino_t>;
constexpr size_t kStep = 1 << 20;

Status Differ(const std::string& path, const std::string& what) {
  return Status(Code::kCorrupt,
                path + ": " + what + " differ between the plain tree and the vault");
}

class Comparer {
 public:
  Comparer(Tree& tree, const CompareOptions& options)
      : tree_(tree), o_(options), plain_buf_(kStep), vault_buf_(kStep) {}
  ~Comparer() {
    crypt::SecureWipe(plain_buf_);
    crypt::SecureWipe(vault_buf_);
  }
  Comparer(const Comparer&) = delete;
  Comparer& operator=(const Comparer&) = delete;

  uint64_t entries() const { return entries_; }

  // `s` as the comparison's outcome: with a difference callback it is told there, and the
  // comparison goes on.
  Status Report(Status s) {
    if (s.ok() || !o_.difference) return s;
    o_.difference(s);
    return Status::Ok();
  }

  // Type, mode, owner, modification time and device number of a plain and a vault entry.
  static Status Attributes(const std::string& path, const struct stat& p, const struct stat& c) {
    if ((p.st_mode & S_IFMT) != (c.st_mode & S_IFMT)) return Differ(path, "types");
    if (!S_ISLNK(p.st_mode) && (p.st_mode & 07777) != (c.st_mode & 07777))
      return Differ(path, "permissions");
    if (p.st_uid != c.st_uid || p.st_gid != c.st_gid) return Differ(path, "owners");
    if (p.st_mtim.tv_sec != c.st_mtim.tv_sec || p.st_mtim.tv_nsec != c.st_mtim.tv_nsec)
      return Differ(path, "modification times");
    if ((S_ISCHR(p.st_mode) || S_ISBLK(p.st_mode)) && p.st_rdev != c.st_rdev)
      return Differ(path, "device numbers");
    return Status::Ok();
  }

  // The `user.*` attributes and POSIX ACLs of plain entry `name` of `plain` and vault entry
  // `name` of `vault` (empty names: the directories themselves).
  Status Xattrs(const std::string& path, const std::string& shown, BackingDir& plain,
                const Tree::Dir& vault, const EntryName& name) {
    auto want = PlainXattrs(plain, name.plain(), /*acls=*/true);
    if (!want.ok()) return want.status().WithContext(shown);
    Status s;
    auto names = tree_.ListXattrs(vault, name, [&](const std::string&, const Status& bad) {
      if (s.ok()) s = bad.WithContext(path + ": extended attribute");
    });
    if (!names.ok()) s = names.status().WithContext(path);
    std::map<std::string, std::vector<uint8_t>> have;
    for (const std::string& attr : names.ok() ? *names : std::vector<std::string>{}) {
      if (!s.ok()) break;
      auto value = tree_.GetXattr(vault, name, attr);
      if (!value.ok()) {
        s = value.status().WithContext(path + ": extended attribute");
        break;
      }
      if (acl::IsAclName(attr)) {  // as ACLs: the ids of unnamed entries do not count
        auto canonical = acl::Canonical(*value);
        if (!canonical.ok()) {
          std::string why = path;
          why += ": " + attr + ": ";
          why += canonical.status().ToString();
          s = Status(Code::kCorrupt, why);
          break;
        }
        *value = std::move(canonical).value();
      }
      have.emplace(attr, std::move(value).value());
    }
    if (s.ok() && have.size() != want->size()) s = Differ(path, "extended attributes");
    for (const PlainXattr& x : *want) {
      auto it = have.find(x.name);
      if (s.ok() && (it == have.end() || it->second != x.value))
        s = Differ(path, "extended attributes");
    }
    for (PlainXattr& x : *want) crypt::SecureWipe(x.value);
    for (auto& [attr, value] : have) crypt::SecureWipe(value);
    return s;
  }

  // The entries of plain directory `plain` against those of vault directory `vault`, whose
  // own attributes were compared by the caller.
  Status Directory(const std::string& shown, BackingDir& plain, const Tree::Dir& vault) {
    auto names = SortedNames(plain);
    if (!names.ok()) return names.status().WithContext(shown);
    std::vector<DirEntry> listed;
    Status damaged;
    SIGILFS_RETURN_IF_ERROR(
        tree_.ListSorted(vault, listed, [&](const std::string& stored, const Status& s) {
          if (damaged.ok()) damaged = s.WithContext(vault.PathOf(stored) + " (stored name)");
        }));
    if (!damaged.ok()) return damaged;
    std::map<std::string, const DirEntry*> in_vault;
    for (const DirEntry& e : listed) in_vault.emplace(e.name, &e);
    // Entries left out of the comparison, by plain name.
    std::vector<std::string> compared;
    for (const std::string& name : *names) {
      if (o_.skip) {
        auto st = plain.Stat(name);
        if (st.ok() && o_.skip(vault.PathOf(name), *st)) {
          in_vault.erase(name);
          continue;
        }
      }
      compared.push_back(name);
    }
    for (const std::string& name : compared) {
      if (in_vault.count(name) == 0)
        SIGILFS_RETURN_IF_ERROR(
            Report(Status(Code::kCorrupt, vault.PathOf(name) + ": missing from the vault")));
    }
    for (const auto& [name, entry] : in_vault) {
      if (!std::binary_search(compared.begin(), compared.end(), name))
        SIGILFS_RETURN_IF_ERROR(Report(Status(
            Code::kCorrupt, vault.PathOf(name) + ": in the vault but not in the plain tree")));
    }
    for (const std::string& name : compared) {
      auto it = in_vault.find(name);
      if (it == in_vault.end()) continue;
      std::string child = shown;
      child.append("/").append(name);
      SIGILFS_RETURN_IF_ERROR(
          Report(Entry(vault.PathOf(name), child, plain, vault, tree_.NameOf(vault, *it->second))));
    }
    return Status::Ok();
  }

 private:
  Status Entry(const std::string& path, const std::string& shown, BackingDir& plain_dir,
               const Tree::Dir& vault_dir, const EntryName& name) {
    ++entries_;
    auto p = plain_dir.Stat(name.plain());
    if (!p.ok()) return p.status().WithContext(shown);
    auto c = tree_.StatStored(vault_dir, name);
    if (!c.ok()) return c.status();
    // Entries of different types are not compared further; other differences of attributes
    // are reported and the comparison goes on into the entry.
    if ((p->st_mode & S_IFMT) != (c->st_mode & S_IFMT)) return Differ(path, "types");
    SIGILFS_RETURN_IF_ERROR(Report(Attributes(path, *p, *c)));
    // Recorded as first looked at: a change made while (or after) it is compared shows later.
    if (o_.seen) o_.seen(path, *p);
    if (S_ISDIR(p->st_mode)) {
      auto plain = plain_dir.OpenDir(name.plain());
      if (!plain.ok()) return plain.status().WithContext(shown);
      SIGILFS_ASSIGN_OR_RETURN(auto vault, tree_.OpenDir(vault_dir, name));
      SIGILFS_RETURN_IF_ERROR(Report(Xattrs(path, shown, **plain, *vault, "")));
      return Directory(shown, **plain, *vault);
    }
    // Hard links: the same plain inode is always the same vault inode, and the other way round.
    const InodeKey plain_key{p->st_dev, p->st_ino}, vault_key{c->st_dev, c->st_ino};
    const auto [to, fresh_plain] = plain_to_vault_.emplace(plain_key, vault_key);
    const auto [from, fresh_vault] = vault_to_plain_.emplace(vault_key, plain_key);
    if (to->second != vault_key || from->second != plain_key) return Differ(path, "hard links");
    if (!fresh_plain) return Status::Ok();  // another name of an inode already compared
    if (S_ISLNK(p->st_mode)) {
      auto want = plain_dir.ReadSymlink(name.plain());
      if (!want.ok()) return want.status().WithContext(shown);
      auto have = tree_.ReadLink(vault_dir, name);
      if (!have.ok()) return have.status().WithContext(path + ": symlink target");
      return *have == *want ? Status::Ok() : Differ(path, "symlink targets");
    }
    if (S_ISREG(p->st_mode)) return Contents(path, shown, plain_dir, vault_dir, name, *p, *c);
    return Status::Ok();  // FIFOs, sockets, devices: nothing but their attributes
  }

  Status Contents(const std::string& path, const std::string& shown, BackingDir& plain_dir,
                  const Tree::Dir& vault_dir, const EntryName& name, const struct stat& p,
                  const struct stat& c) {
    auto plain =
        plain_dir.OpenFile(name.plain(), {.write = false, .keep_atime = true, .same_as = &p});
    if (!plain.ok()) return plain.status().WithContext(shown);
    SIGILFS_ASSIGN_OR_RETURN(auto file, tree_.OpenFile(vault_dir, name, /*write=*/false, &c));
    if (file->size() != static_cast<uint64_t>(p.st_size)) return Differ(path, "sizes");
    for (uint64_t offset = 0; offset < file->size();) {
      SIGILFS_ASSIGN_OR_RETURN(size_t n, file->Read(offset, vault_buf_));
      if (n == 0) return Differ(path, "sizes");
      for (size_t got = 0; got < n;) {
        auto r = (*plain)->ReadAt(MutableByteSpan(plain_buf_).subspan(got, n - got), offset + got);
        if (!r.ok()) return r.status().WithContext(shown);
        if (*r == 0) return Differ(path, "sizes");
        got += *r;
      }
      if (!std::equal(vault_buf_.begin(), vault_buf_.begin() + static_cast<ptrdiff_t>(n),
                      plain_buf_.begin()))
        return Differ(path, "contents");
      offset += n;
      if (o_.compared) o_.compared(n);
    }
    uint8_t extra;
    auto more = (*plain)->ReadAt({&extra, 1}, static_cast<uint64_t>(p.st_size));
    if (!more.ok() || *more != 0) return Differ(path, "sizes");
    return Xattrs(path, shown, plain_dir, vault_dir, name);
  }

  Tree& tree_;
  const CompareOptions& o_;
  std::vector<uint8_t> plain_buf_, vault_buf_;  // plaintext: wiped when done
  std::map<InodeKey, InodeKey> plain_to_vault_, vault_to_plain_;
  uint64_t entries_ = 0;
};

}  // namespace

Result<uint64_t> CompareWithPlain(Tree& tree, const Tree::Dir& vault, BackingDir& plain,
                                  const std::string& shown, const CompareOptions& options) {
  auto p = plain.Stat("");
  if (!p.ok()) return p.status().WithContext(shown);
  SIGILFS_ASSIGN_OR_RETURN(struct stat c, tree.StatStored(vault, ""));
  Comparer comparer(tree, options);
  if (!options.root_times) c.st_mtim = p->st_mtim;
  SIGILFS_RETURN_IF_ERROR(comparer.Report(Comparer::Attributes(vault.path(), *p, c)));
  SIGILFS_RETURN_IF_ERROR(comparer.Report(comparer.Xattrs(vault.path(), shown, plain, vault, "")));
  SIGILFS_RETURN_IF_ERROR(comparer.Directory(shown, plain, vault));
  return comparer.entries();
}

Result<uint64_t> CompareWithPlain(
    Tree& tree, const Tree::Dir& vault, BackingDir& plain, const std::string& shown,
    const std::function<void(const std::string&, const struct stat&)>& seen) {
  CompareOptions options;
  options.seen = seen;
  return CompareWithPlain(tree, vault, plain, shown, options);
}

}  // namespace sigilfs::core
