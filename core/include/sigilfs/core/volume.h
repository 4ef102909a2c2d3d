// Volume: an unlocked vault over its cipher directory — directory IVs, name mapping, listings,
// symlink targets, sizes and file contents. Used by the FUSE daemon and the offline tools alike.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/reverse_keys.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/vault_lock.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

struct VolumeOptions {
  PageLayerOptions pages;
  // The vault lock the volume holds for its life. Unset, Open takes it (but for a reverse view's
  // vault, whose plain tree gets no lock file): exclusive, or beside other shared mounts with
  // `pages.shared`; a vault a mount or another program holds is refused
  // (kPermissionDenied with EBUSY, saying where it is mounted), so a program cannot write into a
  // mounted vault. A caller that took the lock already (a mount takes it before it detaches, a
  // reader may go on without one) passes it here.
  std::optional<VaultLock> lock;
};

// One entry of a decrypted directory listing.
struct DirEntry {
  std::string name;        // plaintext name
  std::string stored;      // the entry's name in the cipher directory
  uint64_t ino = 0;        // the cipher entry's inode number
  unsigned char type = 0;  // DT_* of the cipher entry
  off_t next_offset = 0;   // telldir() cookie of the entry after this one
};

// Its directory calls take a BackingDir of the vault's tree (its own cipher directory or any
// store holding one).
// Thread-safety: safe for concurrent access without external synchronization.
class Volume {
 public:
  // Opens the cipher directory of an unlocked vault.
  static Result<std::unique_ptr<Volume>> Open(std::unique_ptr<Vault> vault, VolumeOptions options);
  ~Volume();

  int root_fd() const { return root_fd_; }  // O_RDONLY | O_DIRECTORY
  const VaultLock& lock() const { return lock_; }
  PageLayer& pages() { return *pages_; }
  const NameCodec& names() const { return *names_; }
  const Vault& vault() const { return *vault_; }

  // How ReadDirIv treats a directory that has both copies of its IV.
  enum class DirIvCopies {
    kAttributeFirst,  // the attribute, with only the file's size checked (no read of its data)
    kCompare,         // both read; a difference is kCorrupt (fsck)
  };
  // The IV of cipher directory `dir`: the copy in the
  // directory's kDirIvAttrName attribute, or, without one, its IV file. `*from_attribute` is
  // set where the file is torn (shorter: a crash before its data reached the disk) and only the
  // attribute holds the IV. kCorrupt if the file is missing or too long, if it is torn without
  // an attribute copy, or (kCompare) if the two differ.
  Result<DirIv> ReadDirIv(BackingDir& dir, bool* from_attribute = nullptr,
                          DirIvCopies copies = DirIvCopies::kAttributeFirst) const;
  // Writes the IV file of a directory whose IV came from its attribute, durably (under a
  // temporary name, flushed, then renamed over the torn one).
  Status RestoreDirIvFile(BackingDir& dir, const DirIv& iv) const;
  // Creates directory `plain` in `dir`, IV included, atomically: made under a temporary name,
  // given its IV, then renamed into place (kExists if the name is taken).
  Status MakeDirectory(BackingDir& dir, const DirIv& iv, std::string_view plain, mode_t mode);
  // Removes cipher directory `stored` of `dir` if it holds nothing but its IV (kNotEmpty
  // otherwise): the IV file goes first, read before, and comes back should the rmdir fail, so
  // the directory stays usable.
  Status RemoveDirectory(BackingDir& dir, const std::string& stored) const;
  // Whether `sub`, a cipher directory, holds nothing but its IV (kNotEmpty otherwise); files a
  // network store keeps for descriptors still open are waited out for up to 2 s.
  static Status CheckEmptyDirectory(BackingDir& sub);
  // For a rename over cipher directory `stored` of `dir`: an "empty" one still holds its IV
  // file, so the store would refuse to replace it. It goes aside under a hidden name
  // (returned; kNotEmpty if it holds entries), to be removed (RemoveDirectory) once the rename
  // took its place, or renamed back if it failed: a failed rename leaves the tree as it was.
  Result<std::string> MoveEmptyDirectoryAside(BackingDir& dir, const std::string& stored) const;
  // A hidden name for an entry in the making or on its way out, `prefix` and random hex: it has
  // a '.', which no stored name has, so no listing of the vault shows it.
  static std::string HiddenName(std::string_view prefix);

  // The stored name of `plain` in a directory with IV `iv`.
  Result<std::string> StoredName(const DirIv& iv, std::string_view plain) const;
  // The name entry `plain` of `dir` has there: StoredName, or, for the plain name a listing
  // gives a synchronizer's conflict copy (NameCodec::ParseConflictCopy), that copy's name where
  // it exists and nothing holds the name itself (docs/design/shared.md, "Synced folders").
  Result<std::string> StoredNameIn(BackingDir& dir, const DirIv& iv, std::string_view plain) const;
  // For a long stored name, writes its side file (before the entry is created); no-op otherwise.
  Status PrepareName(BackingDir& dir, const DirIv& iv, std::string_view plain) const;
  // Removes the side file of a long stored name (after its entry is gone); no-op otherwise.
  void ReleaseName(BackingDir& dir, const std::string& stored) const;
  // Shared mode, after an entry of long name `plain` (stored as `stored`) was made: its side
  // file written again if a removal of the name by another host took it meanwhile (between
  // PrepareName and the create); no-op otherwise. Errors are the store's.
  Status ConfirmName(BackingDir& dir, const DirIv& iv, std::string_view plain,
                     const std::string& stored) const;
  // The plaintext name of entry `stored` of `dir` (a long one's through its side file);
  // kAuthFailed or kCorrupt if it was not made for this directory.
  Result<std::string> PlainName(BackingDir& dir, const DirIv& iv, const std::string& stored) const;

  // The entries of `dir` after cursor `from` (0: the start; BackingDir::List's cursors, in
  // DirEntry::next_offset), "." and ".." only from a listing handle (BackingDir::OpenListing,
  // as they are, name and stored name alike), the vault's own entries never; damaged names
  // go to `damaged`. Stops when `emit` returns false.
  Status List(BackingDir& dir, const DirIv& iv, uint64_t from,
              const std::function<bool(const DirEntry&)>& emit,
              const std::function<void(const std::string& stored, const Status&)>& damaged) const;

  // The whole listing of `dir` without "." and "..", sorted by plaintext name, into `out`
  // (for offline tools that walk a tree); damaged entries go to `damaged`. The status is the
  // listing's own (entries read before a failure are kept).
  Status ListSorted(
      BackingDir& dir, const DirIv& iv, std::vector<DirEntry>& out,
      const std::function<void(const std::string& stored, const Status&)>& damaged) const;

  // Symlink targets (NameCodec::EncryptTarget, docs/format.md "Symlinks"). Up to
  // kMaxInlineTarget plaintext bytes the sealed text is the cipher link's own target; a longer
  // one (up to kMaxSymlinkTarget, the kernel's limit) would not fit the backing PATH_MAX, so
  // its sealed text goes into a side file of the vault root, `sigilfs.target.<hash>`, and the
  // link's target is that file's name.
  static constexpr size_t kMaxInlineTarget = 3000;
  static constexpr size_t kMaxSymlinkTarget = 4095;
  // What to store as a cipher link's target for plaintext `target`; a long one's side file is
  // written (durably) first, and the caller releases it (ReleaseSymlinkTarget) if the link is
  // then not made.
  // The forms without `root` keep side files in the volume's own cipher directory.
  Result<std::string> EncryptSymlinkTarget(std::string_view target) const;
  Result<std::string> EncryptSymlinkTarget(BackingDir& root, std::string_view target) const;
  // The plaintext target of a cipher link whose own target is `stored`.
  Result<std::string> DecryptSymlinkTarget(std::string_view stored) const;
  Result<std::string> DecryptSymlinkTarget(BackingDir& root, std::string_view stored) const;
  // The target of cipher link `stored` of `dir` (an empty name: `dir` is the link) when
  // removing that name deletes the link (`st`, its stat, says one link) and the target is held
  // in a side file; empty otherwise. Read before the removal, released after it.
  std::string TargetToRelease(BackingDir& dir, const std::string& stored,
                              const struct stat& st) const;
  // Removes the side file of a long target (a no-op for an inline one).
  void ReleaseSymlinkTarget(std::string_view stored) const;
  void ReleaseSymlinkTarget(BackingDir& root, std::string_view stored) const;

  // The plaintext size of entry `stored` of `dir` (an empty name: `dir` itself), whose stat
  // is `st`: files from the cipher size (a sealed file's from its 8-byte trailer), others as is.
  Result<uint64_t> PlainSize(BackingDir& dir, const std::string& stored,
                             const struct stat& st) const;

 private:
  Volume(std::unique_ptr<Vault> vault, int root_fd, std::unique_ptr<NameCodec> names,
         std::unique_ptr<PageLayer> pages);
  // True if `dir` holds nothing but files a network store keeps for descriptors still open
  // (and its IV file).
  static bool OnlyKeptOpen(BackingDir& dir);
  // If `dir` holds nothing but such files (and its IV file) and `waited_ms` is under 2 s: waits
  // a step, counted in `waited_ms`, now and then removes the FUSE store's files of them that
  // nothing holds (RemoveOrphanedFuseHidden), and returns true, to try again.
  static bool AwaitKeptOpen(BackingDir& dir, int& waited_ms);
  // Unlinks `dir`'s .fuse_hiddenXXXX files through the store, which keeps those still open.
  static void RemoveOrphanedFuseHidden(BackingDir& dir);
  // The plaintext name of listed entry `stored`, or none: the vault's own entries, and those
  // whose names do not open (passed to `damaged`).
  std::optional<std::string> ListedName(
      BackingDir& dir, const DirIv& iv, const std::string& stored,
      const std::function<void(const std::string&, const Status&)>& damaged) const;

  std::unique_ptr<Vault> vault_;
  VaultLock lock_;
  int root_fd_;
  std::unique_ptr<BackingDir> root_;  // the same directory (symlink target side files)
  // The backing filesystem journals metadata in order (ext4, XFS) or keeps nothing across a
  // crash (tmpfs): an IV in the new directory's attribute is then stored no later than the
  // rename that makes the directory visible, and the IV file needs no fsync.
  bool ordered_metadata_ = false;
  std::unique_ptr<NameCodec> names_;
  std::unique_ptr<PageLayer> pages_;
  // Shared mode: new directories' IVs derived, not drawn (ReverseKeys::DirIvOfEntry).
  std::unique_ptr<ReverseKeys> derived_;
};

}  // namespace sigilfs::core
