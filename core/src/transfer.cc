// Import and export of plain trees: a plain directory store on one side, the vault's Tree on the
// other; every entry is made under a temporary name and renamed into place.
#include "sigilfs/core/transfer.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <map>
#include <memory>
#include <optional>
#include <system_error>
#include <utility>
#include <vector>

#include "plain_tree.h"
#include "sigilfs/core/acl.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/source.h"
#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/secure_bytes.h"

namespace sigilfs::core {
namespace {

// Plaintext is moved in steps of this size: never a whole file in memory.
constexpr size_t kStep = 1 << 20;
// Plain entries being written before they are renamed into place.
constexpr std::string_view kExportTemp = ".sigilfs-export.";

using InodeKey = std::pair<dev_t, ino_t>;

std::string Join(const std::string& dir, std::string_view name) {
  if (name.empty()) return dir;
  return dir.empty() || dir == "." ? std::string(name) : dir + "/" + std::string(name);
}

Status Exists(const std::string& path) { return Status(Code::kExists, path, EEXIST); }

// `s` about `shown`: the path first, the store's own words after it.
Status About(const std::string& shown, const Status& s) { return s.WithContext(shown); }

// A plain entry made under a temporary name in `dir`, removed again unless it was placed.
class PlainTemp {
 public:
  explicit PlainTemp(BackingDir& dir) : dir_(dir), name_(Volume::HiddenName(kExportTemp)) {}
  ~PlainTemp() {
    if (!name_.empty()) (void)dir_.Unlink(name_);
  }
  PlainTemp(const PlainTemp&) = delete;
  PlainTemp& operator=(const PlainTemp&) = delete;

  const std::string& name() const { return name_; }

  // Renames it to `target`: over an existing non-directory with `replace`, else only if the name
  // is free.
  Status Place(std::string_view target, bool replace, const std::string& shown) {
    Status s = dir_.Rename(name_, dir_, target, replace ? 0u : unsigned{BackingDir::kNoReplace});
    if (!s.ok() && s.sys_errno() == EINVAL && !replace)  // no RENAME_NOREPLACE: a link refuses
      s = dir_.Link(name_, dir_, target);
    // Gone after a rename, but left by a link, or by a rename onto another name of its inode.
    (void)dir_.Unlink(name_);
    name_.clear();
    if (!s.ok() && s.sys_errno() == EEXIST) return Exists(shown);
    return s.ok() ? s : About(shown, s);
  }

 private:
  BackingDir& dir_;
  std::string name_;
};

// Owner (when asked), permission bits, then times of plain entry `name` of `dir`: times last,
// as the others change the ctime only and everything before them (contents, a directory's
// entries) the mtime.
Status SetPlainMetadata(BackingDir& dir, std::string_view name, const struct stat& st, bool owner) {
  if (owner) SIGILFS_RETURN_IF_ERROR(dir.SetOwner(name, st.st_uid, st.st_gid));
  // A symlink's permissions mean nothing (and Linux cannot change them).
  if (!S_ISLNK(st.st_mode)) SIGILFS_RETURN_IF_ERROR(dir.SetMode(name, st.st_mode & 07777));
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  return dir.SetTimes(name, times);
}

// ---------------------------------------------------------------------------------------------
// export

// One export. Problems with what the vault holds are reported and skipped; a failure to write
// the destination ends it.
class Exporter {
 public:
  Exporter(Tree& tree, BackingDir& top, const ExportOptions& options)
      : tree_(tree), top_(top), options_(options), buffer_(kStep) {}
  ~Exporter() { crypt::SecureWipe(buffer_); }
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  uint64_t problems() const { return problems_; }

  // Vault entry `name` of `src` (vault path `path`) to `to_name` in `dst`, a directory at
  // `place` below the export's top (its names, for hard links), shown as `dest`.
  Status Entry(const std::string& path, const Tree::Dir& src, const EntryName& name,
               BackingDir& dst, const std::vector<std::string>& place, std::string_view to_name,
               const std::string& dest) {
    auto stat = tree_.StatStored(src, name);
    if (!stat.ok()) {
      Problem(path, stat.status());
      return Status::Ok();
    }
    const struct stat& st = *stat;
    if (S_ISDIR(st.st_mode)) {
      auto dir = tree_.OpenDir(src, name);
      if (!dir.ok()) {
        // Without its IV no name in it can be read: the directory is still made, with its
        // attributes, and reported.
        Problem(path, dir.status());
        SIGILFS_ASSIGN_OR_RETURN(auto out, MakeDir(dst, to_name, dest));
        SIGILFS_RETURN_IF_ERROR(Xattrs(path, src, name, *out, "", dest));
        return About(dest, SetPlainMetadata(*out, "", st, options_.owner));
      }
      return Directory(path, **dir, st, dst, place, to_name, dest);
    }
    const InodeKey key{st.st_dev, st.st_ino};
    if (st.st_nlink > 1) {
      if (auto it = links_.find(key); it != links_.end())
        return Link(path, it->second, dst, to_name, dest);
    }
    bool exported = false;
    if (S_ISREG(st.st_mode)) {
      SIGILFS_ASSIGN_OR_RETURN(exported, File(path, src, name, st, dst, to_name, dest));
    } else if (S_ISLNK(st.st_mode)) {
      SIGILFS_ASSIGN_OR_RETURN(exported, Symlink(path, src, name, st, dst, to_name, dest));
    } else {
      SIGILFS_RETURN_IF_ERROR(Node(path, src, name, st, dst, to_name, dest));
      exported = true;
    }
    if (st.st_nlink > 1) {
      std::vector<std::string> at = place;
      at.emplace_back(to_name);
      links_[key] = Linked{path, std::move(at), exported};
    }
    if (exported && options_.progress)
      options_.progress(path, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0);
    return Status::Ok();
  }

  // A directory (already open as `src`, with stat `st`): made or, with `replace`, reused.
  // Plain directory `to_name` of `dst`: made or, with `replace`, reused.
  Result<std::unique_ptr<BackingDir>> MakeDir(BackingDir& dst, std::string_view to_name,
                                              const std::string& dest) {
    if (Status made = dst.MakeDir(to_name, 0700); !made.ok()) {
      if (made.code() != Code::kExists) return About(dest, made);
      if (!options_.replace) return Exists(dest);
      SIGILFS_ASSIGN_OR_RETURN(struct stat existing, dst.Stat(to_name));
      if (!S_ISDIR(existing.st_mode))
        return Status(Code::kExists, dest + " exists and is not a directory", EEXIST);
    }
    auto opened = dst.OpenDir(to_name);
    if (!opened.ok()) return About(dest, opened.status());
    return opened;
  }

  Status Directory(const std::string& path, const Tree::Dir& src, const struct stat& st,
                   BackingDir& dst, const std::vector<std::string>& place, std::string_view to_name,
                   const std::string& dest) {
    SIGILFS_ASSIGN_OR_RETURN(auto opened, MakeDir(dst, to_name, dest));
    BackingDir& out = *opened;
    std::vector<std::string> inner = place;
    inner.emplace_back(to_name);
    std::vector<DirEntry> entries;
    Status listed = tree_.ListSorted(src, entries, [&](const std::string& stored, const Status& s) {
      Problem(Join(path, stored) + " (stored name)", s);
    });
    if (!listed.ok()) Problem(path, listed);
    for (const DirEntry& e : entries) {
      SIGILFS_RETURN_IF_ERROR(Entry(Join(path, e.name), src, tree_.NameOf(src, e), out, inner,
                                    e.name, dest + "/" + e.name));
    }
    SIGILFS_RETURN_IF_ERROR(Xattrs(path, src, "", out, "", dest));
    return About(dest, SetPlainMetadata(out, "", st, options_.owner));
  }

  // Streams regular file `name` of `src` to `out` from offset 0; false if it was damaged.
  Result<bool> Stream(const std::string& path, const Tree::Dir& src, const EntryName& name,
                      const struct stat& st, BackingFile& out, const std::string& shown) {
    auto file = tree_.OpenFile(src, name, /*write=*/false, &st);
    if (!file.ok()) {
      Problem(path, Opened(file.status()));
      return false;
    }
    Status damage;
    SIGILFS_RETURN_IF_ERROR(Copy(**file, out, shown, damage));
    if (!damage.ok()) Problem(path, damage);
    return damage.ok();
  }

 private:
  struct Linked {
    std::string path;               // in the vault
    std::vector<std::string> dest;  // where it was exported, below the export's top
    bool exported;
  };

  void Problem(const std::string& path, const Status& s) {
    ++problems_;
    if (options_.problem) options_.problem(path, s);
  }

  static Status Opened(const Status& s) {
    if (s.sys_errno() == ESTALE) return Status(Code::kCorrupt, "changed while being exported");
    return s;
  }

  // The plaintext of `file` to `out`: a failure to read the vault is returned in `damage`, a
  // failure to write `out` as the result.
  Status Copy(FileContents& file, BackingFile& out, const std::string& shown, Status& damage) {
    const uint64_t size = file.size();
    for (uint64_t offset = 0; offset < size;) {
      auto n = file.Read(offset, buffer_);
      if (!n.ok()) {
        damage = n.status();  // the first bad page; the rest of the file is not read
        return Status::Ok();
      }
      if (*n == 0) {
        damage = Status(Code::kCorrupt, "ends at " + std::to_string(offset) + " of " +
                                            std::to_string(size) + " bytes");
        return Status::Ok();
      }
      const ByteSpan parts[] = {ByteSpan(buffer_).first(*n)};
      SIGILFS_RETURN_IF_ERROR(About(shown, out.WriteAt(parts, offset)));
      offset += *n;
      if (options_.copied) options_.copied(*n);
    }
    return Status::Ok();
  }

  // A damaged file is not created: no file that looks complete and is not.
  Result<bool> File(const std::string& path, const Tree::Dir& src, const EntryName& name,
                    const struct stat& st, BackingDir& dst, std::string_view to_name,
                    const std::string& dest) {
    PlainTemp tmp(dst);
    auto out = dst.OpenFile(tmp.name(), {.create = true, .exclusive = true, .mode = 0600});
    if (!out.ok()) return About(dest, out.status());
    SIGILFS_ASSIGN_OR_RETURN(bool whole, Stream(path, src, name, st, **out, dest));
    if (!whole) return false;
    SIGILFS_RETURN_IF_ERROR(About(dest, (*out)->Sync(false)));
    out->reset();
    SIGILFS_RETURN_IF_ERROR(Xattrs(path, src, name, dst, tmp.name(), dest));
    SIGILFS_RETURN_IF_ERROR(About(dest, SetPlainMetadata(dst, tmp.name(), st, options_.owner)));
    SIGILFS_RETURN_IF_ERROR(tmp.Place(to_name, options_.replace, dest));
    return true;
  }

  Result<bool> Symlink(const std::string& path, const Tree::Dir& src, const EntryName& name,
                       const struct stat& st, BackingDir& dst, std::string_view to_name,
                       const std::string& dest) {
    auto target = tree_.ReadLink(src, name);
    if (!target.ok()) {
      Problem(path, target.status().WithContext("symlink target"));
      return false;
    }
    PlainTemp tmp(dst);
    SIGILFS_RETURN_IF_ERROR(About(dest, dst.MakeSymlink(tmp.name(), *target)));
    SIGILFS_RETURN_IF_ERROR(About(dest, SetPlainMetadata(dst, tmp.name(), st, options_.owner)));
    SIGILFS_RETURN_IF_ERROR(tmp.Place(to_name, options_.replace, dest));
    return true;
  }

  // FIFOs, sockets and device nodes: nothing in them is encrypted but their names.
  Status Node(const std::string& path, const Tree::Dir& src, const EntryName& name,
              const struct stat& st, BackingDir& dst, std::string_view to_name,
              const std::string& dest) {
    PlainTemp tmp(dst);
    SIGILFS_RETURN_IF_ERROR(
        About(dest, dst.MakeNode(tmp.name(), (st.st_mode & S_IFMT) | 0600, st.st_rdev)));
    // The vault keeps no attributes on these (the mount refuses ACLs on them): this removes
    // what the new node inherited from a default ACL at the destination.
    SIGILFS_RETURN_IF_ERROR(Xattrs(path, src, name, dst, tmp.name(), dest));
    SIGILFS_RETURN_IF_ERROR(About(dest, SetPlainMetadata(dst, tmp.name(), st, options_.owner)));
    return tmp.Place(to_name, options_.replace, dest);
  }

  // Another name of an inode exported before: a hard link to it.
  Status Link(const std::string& path, const Linked& first, BackingDir& dst,
              std::string_view to_name, const std::string& dest) {
    if (!first.exported) {
      Problem(path, Status(Code::kCorrupt,
                           "not exported: the same file as " + first.path + ", which is damaged"));
      return Status::Ok();
    }
    // Its directory, opened again from the export's top (no descriptor held per link).
    std::unique_ptr<BackingDir> held;
    BackingDir* dir = &top_;
    for (size_t i = 0; i + 1 < first.dest.size(); ++i) {
      auto next = dir->OpenDir(first.dest[i]);
      if (!next.ok()) return About(dest, next.status());
      held = std::move(next).value();
      dir = held.get();
    }
    PlainTemp tmp(dst);
    SIGILFS_RETURN_IF_ERROR(About(dest, dir->Link(first.dest.back(), dst, tmp.name())));
    return tmp.Place(to_name, options_.replace, dest);
  }

  // The `user.*` attributes and (with `acls`) POSIX ACLs of vault entry `name` of `src`, onto
  // plain entry `out_name` of `out`, which keeps no ACL the vault entry lacks. One that does not
  // open is a problem; the others are still copied.
  Status Xattrs(const std::string& path, const Tree::Dir& src, const EntryName& name,
                BackingDir& out, std::string_view out_name, const std::string& dest) {
    auto list = tree_.ListXattrs(src, name, [&](const std::string& stored, const Status& s) {
      Problem(path, s.WithContext("extended attribute " + stored));
    });
    if (!list.ok()) Problem(path, list.status());  // none copied; inherited ACLs still removed
    // The ACLs written: any other the entry has (inherited, or kept by a directory merged into)
    // is removed below, also after a failed write, so that no ACL grants more than the vault's.
    bool has_access = false, has_default = false;
    for (const std::string& attr : list.ok() ? *list : std::vector<std::string>{}) {
      const bool is_acl = acl::IsAclName(attr);
      if (is_acl && !options_.acls) continue;
      if (!is_acl && !attr.starts_with(kUserNamespace)) {
        Problem(path, Status(Code::kCorrupt, "extended attribute outside user.*: " + attr));
        continue;
      }
      auto value = tree_.GetXattr(src, name, attr);
      if (!value.ok()) {
        Problem(path, value.status().WithContext("extended attribute " + attr));
        continue;
      }
      Status s = out.SetXattr(out_name, attr, *value);
      crypt::SecureWipe(*value);
      if (is_acl) {
        // The entry is still exported, without it; the export fails as for damage.
        if (s.ok()) {
          (attr == acl::kAccessName ? has_access : has_default) = true;
        } else {
          const char* which = attr == acl::kAccessName ? "access ACL" : "default ACL";
          Problem(path, Status(s.code(),
                               std::string(which) + " not written to " + dest + ": " +
                                   std::generic_category().message(s.sys_errno()),
                               s.sys_errno()));
        }
        continue;
      }
      SIGILFS_RETURN_IF_ERROR(About(dest, s));
    }
    if (!options_.acls || !dest_acls_) return Status::Ok();
    // New entries inherit the destination's default ACL, and a merged-into directory keeps its
    // own: neither is the vault's.
    for (const auto& [attr, kept] :
         {std::pair{acl::kAccessName, has_access}, std::pair{acl::kDefaultName, has_default}}) {
      if (kept) continue;
      Status s = out.RemoveXattr(out_name, attr);
      const int e = s.sys_errno();
      if (s.ok() || e == ENODATA) continue;
      if (e == EOPNOTSUPP || e == ENOTSUP) {
        dest_acls_ = false;  // a destination without ACLs: none to remove from now on
        break;
      }
      return About(dest, s.WithContext(std::string(attr)));
    }
    return Status::Ok();
  }

  Tree& tree_;
  BackingDir& top_;
  const ExportOptions& options_;
  std::vector<uint8_t> buffer_;  // plaintext: wiped when the export is done
  std::map<InodeKey, Linked> links_;
  uint64_t problems_ = 0;
  bool dest_acls_ = true;  // false once the destination said it keeps no ACLs
};

// ---------------------------------------------------------------------------------------------
// import

class Importer {
 public:
  Importer(Tree& tree, const ImportOptions& options) : tree_(tree), options_(options) {}

  Status Init() {
    SIGILFS_ASSIGN_OR_RETURN(auto root, tree_.Root());
    SIGILFS_ASSIGN_OR_RETURN(root_, root->backing().Stat(""));
    return Status::Ok();
  }

  // Plain entry `name` of `src` (shown as `shown`) to entry `to_name` of `to`.
  Status Entry(const std::string& shown, BackingDir& src, std::string_view name,
               const Tree::Dir& to, std::string_view to_name) {
    SIGILFS_RETURN_IF_ERROR(Stopped());
    const std::string path = Join(to.path(), to_name);
    auto looked = src.Stat(name);
    if (!looked.ok()) return About(shown, looked.status());
    const struct stat st = *looked;
    auto existing = tree_.StatStored(to, to_name);
    if (!existing.ok() && existing.status().code() != Code::kNotFound)
      return About(path, existing.status());
    const bool exists = existing.ok();
    if (exists) {
      const bool both_dirs = S_ISDIR(existing->st_mode) && S_ISDIR(st.st_mode);
      if (options_.resume && !both_dirs) {
        SIGILFS_ASSIGN_OR_RETURN(const bool same, InPlace(shown, src, name, st, to, to_name, path));
        if (same) {
          if (st.st_nlink > 1 && !links_.contains({st.st_dev, st.st_ino}))
            links_[{st.st_dev, st.st_ino}] = {to.path(), std::string(to_name)};
          if (options_.skipped)
            options_.skipped(path, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0);
          return Status::Ok();
        }
      }
      if (!options_.replace && !(options_.resume && both_dirs)) return Exists(path);
      if (S_ISDIR(existing->st_mode) && !S_ISDIR(st.st_mode))
        return Status(Code::kExists, path + " exists and is a directory", EEXIST);
      if (!S_ISDIR(existing->st_mode) && S_ISDIR(st.st_mode))
        return Status(Code::kExists, path + " exists and is not a directory", EEXIST);
    }
    if (S_ISDIR(st.st_mode)) {
      auto dir = src.OpenDir(name);
      if (!dir.ok()) return About(shown, dir.status());
      if (!exists) SIGILFS_RETURN_IF_ERROR(About(path, tree_.MakeDir(to, to_name, 0700)));
      auto out = tree_.OpenDir(to, to_name);
      if (!out.ok()) return About(path, out.status());
      return Directory(shown, **dir, st, **out);
    }
    const InodeKey key{st.st_dev, st.st_ino};
    std::unique_ptr<Tree::Staged> staged;
    if (auto it = links_.find(key); st.st_nlink > 1 && it != links_.end()) {
      SIGILFS_ASSIGN_OR_RETURN(staged, Link(it->second, to, path));
    } else if (S_ISREG(st.st_mode)) {
      SIGILFS_ASSIGN_OR_RETURN(staged, File(shown, src, name, st, to, path));
    } else if (S_ISLNK(st.st_mode)) {
      auto target = src.ReadSymlink(name);
      if (!target.ok()) return About(shown, target.status());
      auto link = tree_.StageSymlink(to, *target);
      if (!link.ok()) return About(path, link.status());
      staged = std::move(link).value();
    } else {
      auto node = tree_.StageNode(to, (st.st_mode & S_IFMT) | 0600, st.st_rdev);
      if (!node.ok()) return About(path, node.status());
      staged = std::move(node).value();
    }
    if (options_.owner) staged->SetOwner(st.st_uid, st.st_gid);
    staged->SetMode(st.st_mode);
    staged->SetTimes(st.st_atim, st.st_mtim);
    if (Status placed = staged->Place(to_name, options_.replace); !placed.ok())
      return placed.code() == Code::kExists ? Exists(path) : About(path, placed);
    if (st.st_nlink > 1 && !links_.contains(key)) links_[key] = {to.path(), std::string(to_name)};
    if (options_.progress)
      options_.progress(path, S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size) : 0);
    return Status::Ok();
  }

  // The entries of plain directory `src` (stat `st`) into `out`, then its attributes onto it.
  Status Directory(const std::string& shown, BackingDir& src, const struct stat& st,
                   const Tree::Dir& out) {
    if (SameObject(st, root_))
      return Status(Code::kInvalidArgument, shown + " is the vault's own cipher directory");
    // What a killed import left staged here would stay, unseen, for good.
    if (options_.resume)
      SIGILFS_RETURN_IF_ERROR(About(out.path(), tree_.RemoveLeftovers(out).status()));
    auto names = SortedNames(src);
    if (!names.ok()) return About(shown, names.status());
    for (const std::string& name : *names)
      SIGILFS_RETURN_IF_ERROR(Entry(Join(shown, name), src, name, out, name));
    SIGILFS_ASSIGN_OR_RETURN(std::vector<PlainXattr> list, PlainXattrs(src, "", options_.acls));
    bool has_access = false, has_default = false;
    for (PlainXattr& x : list) {
      const bool stored = Stored(x);
      has_access |= stored && x.name == acl::kAccessName;
      has_default |= stored && x.name == acl::kDefaultName;
      Status s = stored ? tree_.SetXattr(out, "", x.name, x.value) : Status::Ok();
      crypt::SecureWipe(x.value);
      SIGILFS_RETURN_IF_ERROR(About(out.path(), s.WithContext("extended attribute " + x.name)));
    }
    // A directory merged into keeps no ACL the source lacks.
    for (const auto& [attr, has] :
         {std::pair{acl::kAccessName, has_access}, std::pair{acl::kDefaultName, has_default}}) {
      if (!options_.acls || has) continue;
      Status s = tree_.RemoveXattr(out, "", attr);
      if (!s.ok() && s.sys_errno() != ENODATA) return About(out.path(), s.WithContext(attr));
    }
    if (options_.owner)
      SIGILFS_RETURN_IF_ERROR(About(out.path(), tree_.SetOwner(out, "", st.st_uid, st.st_gid)));
    SIGILFS_RETURN_IF_ERROR(About(out.path(), tree_.SetMode(out, "", st.st_mode)));
    const struct timespec times[2] = {st.st_atim, st.st_mtim};
    SIGILFS_RETURN_IF_ERROR(About(out.path(), tree_.SetTimes(out, "", times)));
    return About(out.path(), out.backing().Sync());
  }

 private:
  struct FirstName {
    std::string dir;  // its directory's vault path
    std::string name;
  };

  Status Stopped() const {
    if (options_.stop && options_.stop()) return Status(Code::kIoError, "interrupted", EINTR);
    return Status::Ok();
  }

  // Whether vault entry `to_name` of `to` is already what plain entry `name` of `src` (stat
  // `st`) would become (ImportOptions::resume).
  Result<bool> InPlace(const std::string& shown, BackingDir& src, std::string_view name,
                       const struct stat& st, const Tree::Dir& to, std::string_view to_name,
                       const std::string& path) {
    auto shows = tree_.Stat(to, to_name);
    if (!shows.ok()) return About(path, shows.status());
    const struct stat& v = *shows;
    if ((v.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) return false;
    if (!S_ISLNK(st.st_mode) && (v.st_mode & 07777) != (st.st_mode & 07777)) return false;
    if (options_.owner && (v.st_uid != st.st_uid || v.st_gid != st.st_gid)) return false;
    if (S_ISREG(st.st_mode))
      return v.st_size == st.st_size && v.st_mtim.tv_sec == st.st_mtim.tv_sec &&
             v.st_mtim.tv_nsec == st.st_mtim.tv_nsec;
    if (S_ISLNK(st.st_mode)) {
      auto plain = src.ReadSymlink(name);
      if (!plain.ok()) return About(shown, plain.status());
      auto stored = tree_.ReadLink(to, to_name);
      if (!stored.ok()) return About(path, stored.status());
      return *plain == *stored;
    }
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return v.st_rdev == st.st_rdev;
    return true;
  }

  // Contents through the page layer, attributes, then (by the caller) the rest.
  Result<std::unique_ptr<Tree::Staged>> File(const std::string& shown, BackingDir& src,
                                             std::string_view name, const struct stat& st,
                                             const Tree::Dir& to, const std::string& path) {
    auto in = src.OpenFile(name, {.write = false, .keep_atime = true, .same_as = &st});
    if (!in.ok()) {
      if (in.status().sys_errno() == ESTALE)
        return Status(Code::kIoError, shown + ": changed while being imported");
      return About(shown, in.status());
    }
    auto staged = tree_.StageFile(to);
    if (!staged.ok()) return About(path, staged.status());
    FileContents& file = *(*staged)->contents();
    StepSource source(**in, kStep);
    for (uint64_t offset = 0;;) {
      SIGILFS_RETURN_IF_ERROR(Stopped());
      auto n = source.Fill();
      if (!n.ok()) return About(shown, n.status());
      if (*n == 0) break;
      SIGILFS_ASSIGN_OR_RETURN(size_t written, file.Write(offset, source, *n));
      if (written != *n) return Status(Code::kIoError, path + ": short write");
      offset += *n;
      if (options_.copied) options_.copied(*n);
    }
    SIGILFS_ASSIGN_OR_RETURN(std::vector<PlainXattr> list, PlainXattrs(src, name, options_.acls));
    for (PlainXattr& x : list) {
      if (x.name == acl::kDefaultName || !Stored(x)) continue;  // (a file has no default ACL)
      Status s = (*staged)->SetXattr(x.name, x.value);
      crypt::SecureWipe(x.value);
      if (!s.ok()) return About(shown, s.WithContext("extended attribute " + x.name));
    }
    return staged;
  }

  // False for an access ACL that says no more than the mode: it is not stored, as on ext4 and
  // through the mount (a plain store other than the kernel's may hold one).
  static bool Stored(const PlainXattr& x) {
    if (x.name != acl::kAccessName) return true;
    auto parsed = acl::Parse(x.value);
    mode_t perms = 0;
    return !parsed.ok() || !acl::EquivalentMode(*parsed, &perms);
  }

  // Another name of a plain inode imported before: a hard link to its vault inode.
  Result<std::unique_ptr<Tree::Staged>> Link(const FirstName& first, const Tree::Dir& to,
                                             const std::string& path) {
    auto dir = tree_.Walk(first.dir);
    if (!dir.ok()) return About(path, dir.status());
    auto staged = tree_.StageLink(**dir, first.name, to);
    if (!staged.ok()) return About(path, staged.status());
    return staged;
  }

  Tree& tree_;
  const ImportOptions& options_;
  struct stat root_ {};  // the vault's root directory
  std::map<InodeKey, FirstName> links_;
};

}  // namespace

Status ImportEntry(Tree& tree, BackingDir& from, std::string_view name, const std::string& shown,
                   const Tree::Dir& to, std::string_view to_name, const ImportOptions& options) {
  Importer importer(tree, options);
  SIGILFS_RETURN_IF_ERROR(importer.Init());
  SIGILFS_RETURN_IF_ERROR(importer.Entry(shown, from, name, to, to_name));
  return About(to.path(), to.backing().Sync());
}

Status ImportInto(Tree& tree, BackingDir& from, const std::string& shown, const Tree::Dir& to,
                  const ImportOptions& options) {
  Importer importer(tree, options);
  SIGILFS_RETURN_IF_ERROR(importer.Init());
  SIGILFS_ASSIGN_OR_RETURN(struct stat st, from.Stat(""));
  return importer.Directory(shown, from, st, to);
}

Result<uint64_t> ExportEntry(Tree& tree, const Tree::Dir& from, std::string_view name,
                             BackingDir& to, std::string_view to_name, const std::string& shown,
                             const ExportOptions& options) {
  Exporter exporter(tree, to, options);
  const std::string path = Join(from.path(), name);
  SIGILFS_RETURN_IF_ERROR(exporter.Entry(path, from, name, to, {}, to_name, shown));
  return exporter.problems();
}

}  // namespace sigilfs::core
