// Name encryption and the long-name scheme (docs/format.md, "Names").
#include "sigilfs/core/names.h"

#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/secure_bytes.h"
#include "sigilfs/crypt/sha256.h"

namespace sigilfs::core {

using crypt::Base64Variant;

Result<std::unique_ptr<NameCodec>> NameCodec::Create(ByteSpan names_key) {
  if (names_key.size() != 64) return Status(Code::kInvalidArgument, "names key must be 64 bytes");
  SIGILFS_ASSIGN_OR_RETURN(auto siv, crypt::AesSiv::Create(names_key));
  // The vault's salt for file-handle generations: sealed once here, not once per node.
  static constexpr std::string_view kRole = "file handle";
  const ByteSpan ad[] = {AsBytes(kRole)};
  const uint8_t zeros[8] = {};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed, siv->Seal(ad, ByteSpan(zeros)));
  uint64_t salt = 0;
  for (size_t i = 0; i < 8; ++i) salt |= uint64_t{sealed[i]} << (8 * i);
  return std::unique_ptr<NameCodec>(new NameCodec(std::move(siv), salt));
}

Result<std::string> NameCodec::Encrypt(const DirIv& iv, std::string_view plain) const {
  if (plain.empty() || plain == "." || plain == ".." ||
      plain.find_first_of(std::string_view("/\0", 2)) != std::string_view::npos)
    return Status(Code::kInvalidArgument, "invalid file name");
  if (plain.size() > kMaxPlainNameLength)
    return Status(Code::kNameTooLong, "file name longer than 255 bytes");
  const ByteSpan ad[] = {iv};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed, siv_->Seal(ad, AsBytes(plain)));
  return crypt::Base64Encode(sealed, Base64Variant::kUrlSafeUnpadded);
}

Result<std::string> NameCodec::Decrypt(const DirIv& iv, std::string_view cipher) const {
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed,
                           crypt::Base64Decode(cipher, Base64Variant::kUrlSafeUnpadded));
  const ByteSpan ad[] = {iv};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> plain, siv_->Open(ad, sealed));
  std::string name(plain.begin(), plain.end());
  // A valid tag over an invalid name can only come from a bug, but it must never reach the
  // kernel as a path component.
  if (name.empty() || name == "." || name == ".." ||
      name.find_first_of(std::string_view("/\0", 2)) != std::string::npos ||
      name.size() > kMaxPlainNameLength)
    return Status(Code::kCorrupt, "decrypted name is not a valid file name");
  return name;
}

namespace {
constexpr std::string_view kTargetRole = "symlink";
constexpr std::string_view kXattrNameRole = "xattr name";
constexpr std::string_view kXattrValueRole = "xattr value";
constexpr size_t kXattrNonceSize = 16;
constexpr size_t kMaxXattrName = 255;  // XATTR_NAME_MAX
}  // namespace

Result<std::string> NameCodec::XattrStoredName(std::string_view name) const {
  if (name.empty() || name.size() > kMaxXattrName || name.find('\0') != std::string_view::npos)
    return Status(Code::kInvalidArgument, "invalid extended attribute name");
  const ByteSpan ad[] = {AsBytes(kXattrNameRole)};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed, siv_->Seal(ad, AsBytes(name)));
  return std::string(kXattrPrefix) + crypt::Base64Encode(ByteSpan(sealed).first(crypt::kSivTagSize),
                                                         Base64Variant::kUrlSafeUnpadded);
}

Result<std::vector<uint8_t>> NameCodec::SealXattr(std::string_view stored, std::string_view name,
                                                  ByteSpan value, const SealNonce* given) const {
  if (name.empty() || name.size() > kMaxXattrName)
    return Status(Code::kInvalidArgument, "invalid extended attribute name");
  std::vector<uint8_t> plain;
  plain.reserve(1 + name.size() + value.size());
  plain.push_back(static_cast<uint8_t>(name.size()));
  plain.insert(plain.end(), name.begin(), name.end());
  plain.insert(plain.end(), value.begin(), value.end());
  static_assert(sizeof(SealNonce) == kXattrNonceSize);
  SealNonce nonce;
  if (given != nullptr) {
    nonce = *given;
  } else {
    crypt::RandomBytes(nonce);
  }
  const ByteSpan ad[] = {nonce, AsBytes(kXattrValueRole), AsBytes(stored)};
  auto sealed = siv_->Seal(ad, plain);
  crypt::SecureWipe(plain);
  if (!sealed.ok()) return sealed.status();
  sealed->insert(sealed->begin(), nonce.begin(), nonce.end());
  return sealed;
}

Result<NameCodec::Xattr> NameCodec::OpenXattr(std::string_view stored, ByteSpan sealed) const {
  if (sealed.size() < kXattrNonceSize + crypt::kSivTagSize + 2)
    return Status(Code::kCorrupt, "extended attribute value too short");
  const ByteSpan ad[] = {sealed.first(kXattrNonceSize), AsBytes(kXattrValueRole), AsBytes(stored)};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> plain,
                           siv_->Open(ad, sealed.subspan(kXattrNonceSize)));
  const size_t n = plain[0];
  if (n == 0 || 1 + n > plain.size())
    return Status(Code::kCorrupt, "extended attribute value malformed");
  Xattr out;
  out.name.assign(plain.begin() + 1, plain.begin() + 1 + static_cast<long>(n));
  out.value.assign(plain.begin() + 1 + static_cast<long>(n), plain.end());
  crypt::SecureWipe(plain);
  // The name must be the one the stored name was made from (not another attribute's value).
  SIGILFS_ASSIGN_OR_RETURN(std::string expect, XattrStoredName(out.name));
  if (expect != stored) return Status(Code::kCorrupt, "extended attribute under another name");
  return out;
}

uint32_t NameCodec::HandleGeneration(uint64_t nodeid) const {
  // splitmix64 of the id under the vault's salt: cheap on every lookup that makes a node (a
  // seal per node was measurable in a cold `ls -l`), and different in every vault, which is
  // all the kernel's generation check needs (a handle is no secret: opening one takes privilege).
  uint64_t z = nodeid + handle_salt_ + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  const auto g = static_cast<uint32_t>(z);
  return g == 0 ? 1 : g;
}

Result<std::string> NameCodec::EncryptTarget(std::string_view target,
                                             const SealNonce* given) const {
  if (target.empty() || target.find('\0') != std::string_view::npos)
    return Status(Code::kInvalidArgument, "invalid symlink target");
  SealNonce nonce;
  if (given != nullptr) {
    nonce = *given;
  } else {
    crypt::RandomBytes(nonce);
  }
  const ByteSpan ad[] = {nonce, AsBytes(kTargetRole)};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> sealed, siv_->Seal(ad, AsBytes(target)));
  sealed.insert(sealed.begin(), nonce.begin(), nonce.end());
  return crypt::Base64Encode(sealed, Base64Variant::kUrlSafeUnpadded);
}

Result<std::string> NameCodec::DecryptTarget(std::string_view cipher) const {
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> raw,
                           crypt::Base64Decode(cipher, Base64Variant::kUrlSafeUnpadded));
  if (raw.size() < 16 + crypt::kSivTagSize)
    return Status(Code::kCorrupt, "symlink target too short");
  const ByteSpan ad[] = {ByteSpan(raw).first(16), AsBytes(kTargetRole)};
  SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> plain, siv_->Open(ad, ByteSpan(raw).subspan(16)));
  return std::string(plain.begin(), plain.end());
}

std::string NameCodec::StoredName(std::string_view cipher_name) {
  if (cipher_name.size() <= kMaxStoredNameLength) return std::string(cipher_name);
  const crypt::Sha256Digest h = crypt::Sha256(AsBytes(cipher_name));
  return kLongNamePrefix + crypt::Base64Encode(h, Base64Variant::kUrlSafeUnpadded);
}

bool NameCodec::IsLongName(std::string_view stored) {
  // The prefix and a base64url SHA-256: not its side file, not a conflict copy of it.
  constexpr size_t kHashChars = 43;
  if (!stored.starts_with(kLongNamePrefix)) return false;
  const std::string_view hash = stored.substr(sizeof(kLongNamePrefix) - 1);
  return hash.size() == kHashChars && hash.find('.') == std::string_view::npos;
}

std::string NameCodec::SideFileName(std::string_view stored) {
  return std::string(stored) + kLongNameSideSuffix;
}

bool NameCodec::IsReserved(std::string_view stored) {
  return stored.find('.') != std::string_view::npos;
}

namespace {
constexpr std::string_view kConflictMark = ".sync-conflict-";
// "YYYYMMDD-HHMMSS-DEVICE": digits, then the device's short id (7 of [A-Z0-9]).
bool IsConflictStamp(std::string_view s) {
  constexpr std::string_view kShape = "99999999-999999-XXXXXXX";
  if (s.size() != kShape.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i], want = kShape[i];
    const bool ok = want == '-'   ? c == '-'
                    : want == '9' ? (c >= '0' && c <= '9')
                                  : ((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
    if (!ok) return false;
  }
  return true;
}
// Where the extension of `name` starts (its last '.'), or its end.
size_t ExtensionAt(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name.size() : dot;
}
}  // namespace

std::optional<NameCodec::ConflictCopy> NameCodec::ParseConflictCopy(std::string_view name) {
  constexpr size_t kStamp = 23;  // YYYYMMDD-HHMMSS-DEVICE
  for (size_t at = name.rfind(kConflictMark); at != std::string_view::npos;
       at = at == 0 ? std::string_view::npos : name.rfind(kConflictMark, at - 1)) {
    const size_t stamp = at + kConflictMark.size();
    const size_t end = stamp + kStamp;
    if (end > name.size() || !IsConflictStamp(name.substr(stamp, kStamp))) continue;
    // The extension follows, whole: nothing, or a '.' and no other '.'.
    const std::string_view ext = name.substr(end);
    if (!ext.empty() && (ext[0] != '.' || ext.find('.', 1) != std::string_view::npos)) continue;
    ConflictCopy c;
    c.original = std::string(name.substr(0, at)) + std::string(ext);
    c.tag = std::string(name.substr(at + 1, end - at - 1));
    if (c.original.empty() || ConflictCopyName(c.original, c.tag) != name) continue;
    return c;
  }
  return std::nullopt;
}

std::string NameCodec::ConflictCopyName(std::string_view name, std::string_view tag) {
  const size_t ext = ExtensionAt(name);
  return std::string(name.substr(0, ext)) + "." + std::string(tag) + std::string(name.substr(ext));
}

}  // namespace sigilfs::core
