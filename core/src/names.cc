// Name encryption and the long-name scheme (docs/format.md, "Names").
#include "sigilfs/core/names.h"

#include "sigilfs/crypt/encoding.h"
#include "sigilfs/crypt/random.h"
#include "sigilfs/crypt/sha256.h"

namespace sigilfs::core {

using crypt::Base64Variant;

Result<std::unique_ptr<NameCodec>> NameCodec::Create(ByteSpan names_key) {
  if (names_key.size() != 64) return Status(Code::kInvalidArgument, "names key must be 64 bytes");
  SIGILFS_ASSIGN_OR_RETURN(auto siv, crypt::AesSiv::Create(names_key));
  return std::unique_ptr<NameCodec>(new NameCodec(std::move(siv)));
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
}  // namespace

Result<std::string> NameCodec::EncryptTarget(std::string_view target) const {
  if (target.empty() || target.find('\0') != std::string_view::npos)
    return Status(Code::kInvalidArgument, "invalid symlink target");
  std::array<uint8_t, 16> nonce;
  crypt::RandomBytes(nonce);
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
  return stored.starts_with(kLongNamePrefix) && !stored.ends_with(kLongNameSideSuffix);
}

std::string NameCodec::SideFileName(std::string_view stored) {
  return std::string(stored) + kLongNameSideSuffix;
}

bool NameCodec::IsReserved(std::string_view stored) {
  return stored.find('.') != std::string_view::npos;
}

}  // namespace sigilfs::core
