// File names: AES-256-SIV under the names key with the directory's IV as associated data,
// unpadded base64url; names too long for the backing filesystem are stored hashed, with the
// full encrypted name in a side file.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/crypt/siv.h"
#include "sigilfs/status.h"

namespace sigilfs::core {

inline constexpr size_t kDirIvSize = 16;
using DirIv = std::array<uint8_t, kDirIvSize>;

// Files of the vault's own inside the cipher tree. Encrypted names use only [A-Za-z0-9_-], so
// anything with a '.' is the vault's and is never shown or clobbered.
inline constexpr char kDirIvFileName[] = "sigilfs.diriv";
// The same IV kept in an extended attribute of the directory, where the backing filesystem has
// them: written with the directory's own metadata, so it survives a crash that the IV file (not
// flushed, to spare an fsync per mkdir) may not. Outside NameCodec::kXattrPrefix, so listings
// of the user's attributes never see it.
inline constexpr char kDirIvAttrName[] = "user.sigilfs-diriv";
inline constexpr char kLongNamePrefix[] = "sigilfs.long.";
inline constexpr char kLongNameSideSuffix[] = ".name";
inline constexpr size_t kMaxPlainNameLength = 255;   // NAME_MAX, as the kernel enforces
inline constexpr size_t kMaxStoredNameLength = 255;  // NAME_MAX of the backing filesystem
// The nonce a symlink target or an attribute value is sealed with: random, or given (reverse
// mode's synthetic nonce, so that the same value at the same place seals to the same bytes).
using SealNonce = std::array<uint8_t, 16>;

// Thread-safety: safe for concurrent access without external synchronization.
class NameCodec {
 public:
  // `names_key` is the 64-byte AES-256-SIV key.
  static Result<std::unique_ptr<NameCodec>> Create(ByteSpan names_key);

  // The full encrypted name of `plain` in a directory with IV `iv` (may exceed 255 bytes).
  // kInvalidArgument for "", ".", ".." or a name with '/' or NUL; kNameTooLong past 255 bytes.
  Result<std::string> Encrypt(const DirIv& iv, std::string_view plain) const;
  // kAuthFailed (or kCorrupt for malformed base64) if `cipher` was not made for this directory.
  Result<std::string> Decrypt(const DirIv& iv, std::string_view cipher) const;

  // Symlink targets: base64url(nonce || SIV), sealed with a fresh random 16-byte nonce and the
  // role "symlink" as associated data. Not bound to a directory (a link keeps its target when
  // renamed elsewhere), never equal for equal targets, and never replayable as a name.
  // `nonce`: the nonce to use instead of a random one.
  Result<std::string> EncryptTarget(std::string_view target,
                                    const SealNonce* nonce = nullptr) const;
  Result<std::string> DecryptTarget(std::string_view cipher) const;

  // Extended attributes (`user.*`). A name is stored as kXattrPrefix + base64url of a 16-byte
  // pseudorandom function of it (the synthetic IV of the name sealed under the role
  // "xattr name"), whatever its length; the value stored is base64-free binary
  // nonce || SIV(AD: nonce, "xattr value", stored name; u8 length || name || value), so a
  // listing recovers the names and a value cannot be moved to another attribute name.
  // A 32-bit function of a mount's node id under the vault's salt (sealed once from the role
  // "file handle"), never 0: the generation of a node whose id persists across mounts, so that
  // a handle names the same object in every mount of this vault only.
  uint32_t HandleGeneration(uint64_t nodeid) const;

  static constexpr std::string_view kXattrPrefix = "user.sigilfs.";
  Result<std::string> XattrStoredName(std::string_view name) const;
  // `nonce`: the nonce to use instead of a random one.
  Result<std::vector<uint8_t>> SealXattr(std::string_view stored, std::string_view name,
                                         ByteSpan value, const SealNonce* nonce = nullptr) const;
  struct Xattr {
    std::string name;
    std::vector<uint8_t> value;
  };
  Result<Xattr> OpenXattr(std::string_view stored, ByteSpan sealed) const;

  // The directory entry name for a full encrypted name: itself if short enough, otherwise
  // "sigilfs.long." + base64url(SHA-256(cipher name)).
  static std::string StoredName(std::string_view cipher_name);
  static bool IsLongName(std::string_view stored);
  // The side file holding the full encrypted name of a long stored name.
  static std::string SideFileName(std::string_view stored);
  // True for the vault's own entries (IV files, long-name side files, config): never listed.
  static bool IsReserved(std::string_view stored);

  // Conflict copies of a file synchronizer (Syncthing): when two hosts changed one file, it
  // keeps one as NAME and renames the other to STEM.sync-conflict-YYYYMMDD-HHMMSS-DEVICE.EXT,
  // EXT being NAME's last '.' onwards (none without a '.'), STEM the rest. `tag` is the
  // "sync-conflict-..." part, `original` the NAME it was made from.
  struct ConflictCopy {
    std::string original;
    std::string tag;
  };
  static std::optional<ConflictCopy> ParseConflictCopy(std::string_view name);
  // The conflict copy's name for `name` and `tag`, made as the synchronizer makes it.
  static std::string ConflictCopyName(std::string_view name, std::string_view tag);

 private:
  NameCodec(std::unique_ptr<crypt::AesSiv> siv, uint64_t handle_salt)
      : siv_(std::move(siv)), handle_salt_(handle_salt) {}
  std::unique_ptr<crypt::AesSiv> siv_;
  uint64_t handle_salt_;  // the vault's, for HandleGeneration
};

}  // namespace sigilfs::core
