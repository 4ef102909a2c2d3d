// Vault creation, unlocking and passphrase change: the master-key wrap under Argon2id.
#include "sigilfs/core/vault.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <optional>

#include "file_util.h"
#include "sigilfs/core/names.h"
#include "sigilfs/crypt/aead.h"
#include "sigilfs/crypt/kdf.h"
#include "sigilfs/crypt/random.h"

namespace sigilfs::core {
namespace {

constexpr size_t kMaxConfigSize = size_t{64} << 10;

std::string ConfigPath(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// Fills the KDF fields with a fresh salt and wraps `master_key` under `passphrase`.
Status WrapMasterKey(ByteSpan master_key, ByteSpan passphrase, const crypt::Argon2Params& kdf,
                     VaultConfig& config) {
  config.kdf = kdf;
  crypt::RandomBytes(config.kdf_salt);
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes kek,
                           crypt::Argon2id(passphrase, config.kdf_salt, kdf, crypt::kAeadKeySize));
  SIGILFS_ASSIGN_OR_RETURN(auto aead,
                           crypt::Aead::Create(crypt::AeadAlgorithm::kAes256Gcm, kek.span()));
  config.wrap_nonce.assign(aead->nonce_size(), 0);
  crypt::RandomBytes(config.wrap_nonce);
  config.wrapped_key.assign(kMasterKeySize + crypt::kAeadTagSize, 0);
  const std::vector<uint8_t> ad = ConfigAssociatedData(config);
  MutableByteSpan out(config.wrapped_key);
  return aead->Seal(config.wrap_nonce, ad, master_key, out.first(kMasterKeySize),
                    out.last(crypt::kAeadTagSize));
}

Result<crypt::SecureBytes> UnwrapMasterKey(const VaultConfig& config, ByteSpan passphrase) {
  SIGILFS_ASSIGN_OR_RETURN(
      crypt::SecureBytes kek,
      crypt::Argon2id(passphrase, config.kdf_salt, config.kdf, crypt::kAeadKeySize));
  SIGILFS_ASSIGN_OR_RETURN(auto aead,
                           crypt::Aead::Create(crypt::AeadAlgorithm::kAes256Gcm, kek.span()));
  crypt::SecureBytes master(kMasterKeySize);
  const std::vector<uint8_t> ad = ConfigAssociatedData(config);
  ByteSpan wrapped(config.wrapped_key);
  Status s = aead->Open(config.wrap_nonce, ad, wrapped.first(kMasterKeySize),
                        wrapped.last(crypt::kAeadTagSize), master.mutable_span());
  if (s.code() == Code::kAuthFailed) return Status(Code::kWrongPassphrase, "wrong passphrase");
  if (!s.ok()) return s;
  return master;
}

// Why `dir` holds no file that could be opened, where the cause is the directory itself:
// missing, or no directory. `what` names it ("vault", "plain tree").
std::optional<Status> DirectoryProblem(const std::string& dir, const char* what) {
  const std::string named = std::string("the ") + what + " " + dir;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status(Code::kNotFound, named + " does not exist", ENOENT);
    if (errno != ENOTDIR) return std::nullopt;
  } else if (S_ISDIR(st.st_mode)) {
    return std::nullopt;
  }
  return Status(Code::kInvalidArgument, named + " is not a directory", ENOTDIR);
}

// `made` is set where the directory was made here.
Status CheckEmptyOrCreate(const std::string& dir, bool& made) {
  made = ::mkdir(dir.c_str(), 0700) == 0;
  if (made) return Status::Ok();
  if (errno != EEXIST) return Status::FromErrno(errno, "create " + dir);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    if (auto problem = DirectoryProblem(dir, "vault"); problem && err == ENOTDIR) return *problem;
    return Status::FromErrno(err, "open " + dir);
  }
  bool empty = true;
  while (const dirent* e = ::readdir(d)) {  // NOLINT(concurrency-mt-unsafe): private DIR stream
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty) return Status(Code::kNotEmpty, dir + " is not empty");
  return Status::Ok();
}

}  // namespace

Status Vault::Create(const std::string& dir, ByteSpan passphrase, const VaultCreateOptions& opts) {
  SIGILFS_RETURN_IF_ERROR(crypt::ValidateArgon2Params(opts.kdf));
  bool made = false;
  SIGILFS_RETURN_IF_ERROR(CheckEmptyOrCreate(dir, made));
  bool iv_written = false;
  Status s = [&]() -> Status {
    VaultConfig config;
    config.cipher = opts.cipher;
    crypt::SecureBytes master(kMasterKeySize);
    crypt::RandomBytes(master.mutable_span());
    SIGILFS_RETURN_IF_ERROR(WrapMasterKey(master.span(), passphrase, opts.kdf, config));
    // The root directory's name IV first: a config is only ever found next to it. Its copy in
    // an attribute of the directory, as every other directory has one, is what `sigilfs fsck
    // --repair` puts the file back from should it be lost (a store without attributes keeps
    // the file alone).
    DirIv root_iv;
    crypt::RandomBytes(root_iv);
    SIGILFS_RETURN_IF_ERROR(WriteFileAtomic(
        dir, kDirIvFileName, std::string(root_iv.begin(), root_iv.end()), /*exclusive=*/true));
    iv_written = true;
    (void)::setxattr(dir.c_str(), kDirIvAttrName, root_iv.data(), root_iv.size(), XATTR_CREATE);
    // Exclusive: two concurrent inits of one directory cannot both succeed.
    return WriteFileAtomic(dir, kConfigFileName, SerializeConfig(config), /*exclusive=*/true);
  }();
  if (s.ok() || s.code() == Code::kExists) return s;  // kExists: another init's vault, kept
  // A half-made vault (a full disk) is none: what this made goes, so that the directory is as
  // it was, or not there, and init can be run again.
  if (iv_written) {
    (void)::removexattr(dir.c_str(), kDirIvAttrName);
    (void)::unlink((dir + "/" + kDirIvFileName).c_str());
  }
  if (made) (void)::rmdir(dir.c_str());
  return s.WithContext("no vault was made in " + dir);
}

Status Vault::CreateReverse(const std::string& plain_dir, ByteSpan passphrase,
                            const VaultCreateOptions& opts) {
  SIGILFS_RETURN_IF_ERROR(crypt::ValidateArgon2Params(opts.kdf));
  VaultConfig config;
  config.cipher = opts.cipher;
  crypt::SecureBytes master(kMasterKeySize);
  crypt::RandomBytes(master.mutable_span());
  SIGILFS_RETURN_IF_ERROR(WrapMasterKey(master.span(), passphrase, opts.kdf, config));
  // No IV file: the view derives every directory's IV (ReverseKeys).
  Status s = WriteFileAtomic(plain_dir, kReverseConfigFileName, SerializeConfig(config),
                             /*exclusive=*/true);
  if (s.code() == Code::kExists)
    return Status(Code::kExists,
                  plain_dir + " already has a reverse config (" + kReverseConfigFileName + ")");
  return s;
}

Result<VaultConfig> Vault::LoadConfig(const std::string& dir, const std::string& config_name) {
  const std::string path = ConfigPath(dir, config_name);
  auto text = ReadSmallFile(path, kMaxConfigSize);
  if (!text.ok()) {
    const int err = text.status().sys_errno();
    if (err == ENOENT || err == ENOTDIR) {
      const bool reverse = config_name == kReverseConfigFileName;
      if (auto problem = DirectoryProblem(dir, reverse ? "plain tree" : "vault")) return *problem;
    }
    if (text.status().code() == Code::kNotFound) {
      if (config_name == kReverseConfigFileName)
        return Status(Code::kNotFound,
                      "no reverse config " + path + " (make one with 'sigilfs init --reverse')");
      return Status(
          Code::kNotFound,
          "no vault config " + path + " (is this a sigilfs vault? create one with 'sigilfs init')");
    }
    return text.status();
  }
  auto config = ParseConfig(*text);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

Result<std::unique_ptr<Vault>> Vault::Unlock(const std::string& dir, ByteSpan passphrase,
                                             const std::string& config_name) {
  SIGILFS_ASSIGN_OR_RETURN(VaultConfig config, LoadConfig(dir, config_name));
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes master, UnwrapMasterKey(config, passphrase));
  SIGILFS_ASSIGN_OR_RETURN(VolumeKeys keys, DeriveVolumeKeys(master.span()));
  return std::unique_ptr<Vault>(
      new Vault(dir, config_name == kReverseConfigFileName, std::move(config), std::move(keys)));
}

Status Vault::ChangePassphrase(const std::string& dir, ByteSpan old_passphrase,
                               ByteSpan new_passphrase, std::optional<crypt::Argon2Params> new_kdf,
                               const std::string& config_name) {
  SIGILFS_ASSIGN_OR_RETURN(VaultConfig config, LoadConfig(dir, config_name));
  SIGILFS_ASSIGN_OR_RETURN(crypt::SecureBytes master, UnwrapMasterKey(config, old_passphrase));
  const crypt::Argon2Params kdf = new_kdf.value_or(config.kdf);
  SIGILFS_RETURN_IF_ERROR(crypt::ValidateArgon2Params(kdf));
  SIGILFS_RETURN_IF_ERROR(WrapMasterKey(master.span(), new_passphrase, kdf, config));
  // Rename over the old config: a crash leaves either the old or the new one, never neither.
  return WriteFileAtomic(dir, config_name, SerializeConfig(config), /*exclusive=*/false);
}

}  // namespace sigilfs::core
