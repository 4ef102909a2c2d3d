// `sigilfs home setup` and `sigilfs home undo`: a user's encrypted home directory, created (and
// an existing home moved into it) or taken back out, for pam_sigilfs.so to mount at login.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>

#include "commands.h"
#include "home.h"
#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/unique_fd.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/fuse/home_vault.h"
#include "transfer.h"

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Fd = core::UniqueFd;

struct HomeOptions {
  std::string user;
  std::string vault;  // empty: the default template
  bool migrate = false;
  bool quiet = false;  // no progress line
  std::string cipher = "aes-256-gcm";
  KdfOptions kdf;
  fuse::PassphraseSource pass;
};

Status SysError(const std::string& path, const std::string& what) {
  const int err = errno;
  return Status::FromErrno(err, path + ": " + what);
}

std::string MiB(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// The vault's directory: --vault, or the default template for the account.
Result<std::string> VaultFor(const home::Account& account, const std::string& given) {
  if (!given.empty()) {
    fs::path p = fs::absolute(given).lexically_normal();
    if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "dir/"
    return p.string();
  }
  auto expanded =
      fuse::ExpandHomeVault(fuse::kDefaultHomeVaultTemplate, account.name, account.home);
  if (!expanded) return Status(Code::kInvalidArgument, "no vault path for " + account.name);
  return *expanded;
}

// The home must be a real directory of the user's own, not "/" and not a mount point (the
// mount goes on it; contents are removed from it).
Status CheckHome(const home::Account& a, struct stat& st) {
  if (a.home.empty() || a.home[0] != '/' || fs::path(a.home).lexically_normal() == "/")
    return Status(Code::kInvalidArgument, a.name + "'s home directory is '" + a.home +
                                              "': not one a vault can be mounted on");
  if (::lstat(a.home.c_str(), &st) != 0) {
    if (errno == EACCES)  // a FUSE mount of the user's answers root with EACCES
      return Status(Code::kPermissionDenied,
                    a.home + " cannot be examined (is it mounted by " + a.name + "?)", EACCES);
    return SysError(a.home, "home directory");
  }
  if (S_ISLNK(st.st_mode))
    return Status(Code::kInvalidArgument,
                  a.home + " is a symbolic link: give " + a.name + " the real directory as home");
  if (!S_ISDIR(st.st_mode)) return Status(Code::kInvalidArgument, a.home + " is not a directory");
  if (st.st_uid != a.uid)
    return Status(Code::kInvalidArgument, a.home + " does not belong to " + a.name);
  struct stat parent;
  const std::string up = fs::path(a.home).lexically_normal().parent_path().string();
  if (::stat(up.c_str(), &parent) != 0) return SysError(up, "stat");
  if (parent.st_dev != st.st_dev)
    return Status(Code::kInvalidArgument,
                  a.home + " is a mount point (is the vault mounted?): unmount it first");
  return Status::Ok();
}

// Neither inside the other: the mount would hide a vault inside the home.
Status CheckVaultPlace(const std::string& vault, const home::Account& a) {
  std::error_code ec;
  const fs::path v = fs::weakly_canonical(vault, ec);
  const fs::path h = fs::weakly_canonical(a.home, ec);
  auto inside = [](const fs::path& inner, const fs::path& outer) {
    auto [end, unused] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
    return end == outer.end();
  };
  if (inside(v, h))
    return Status(Code::kInvalidArgument,
                  "the vault " + vault + " would be inside " + a.home +
                      ", hidden by its own mount: put it elsewhere (--vault)");
  if (inside(h, v))
    return Status(Code::kInvalidArgument, a.home + " is inside the vault directory " + vault);
  return Status::Ok();
}

Status CheckLoggedOut(const home::Account& a) {
  const std::vector<pid_t> pids = home::ProcessesOf(a.uid);
  if (pids.empty()) return Status::Ok();
  return Status(Code::kPermissionDenied,
                fmt::format("{} is logged in ({} process{} running as {}, e.g. pid {}): log them "
                            "out and try again",
                            a.name, pids.size(), pids.size() == 1 ? "" : "es", a.name, pids[0]),
                EBUSY);
}

// The closest existing directory at or above `path` (where a new vault's space comes from).
std::string ExistingAncestor(const std::string& path) {
  fs::path p = fs::path(path).lexically_normal();
  std::error_code ec;
  while (p.has_parent_path() && p != p.root_path() && !fs::is_directory(p, ec)) p = p.parent_path();
  return p.string();
}

// Makes the missing parents of the vault: root's, mode 0711, so that each user reaches their
// own vault but nobody lists whose vaults there are.
Status MakeParents(const std::string& vault) {
  std::vector<fs::path> missing;
  std::error_code ec;
  for (fs::path p = fs::path(vault).parent_path(); !fs::exists(p, ec); p = p.parent_path())
    missing.push_back(p);
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0711) != 0 && errno != EEXIST) return SysError(*it, "mkdir");
    if (::chmod(it->c_str(), 0711) != 0) return SysError(*it, "chmod");
  }
  return Status::Ok();
}

// Gives the new vault and what is in it (config, root IV) to the user: their own daemon mounts
// it and their own `sigilfs passwd` re-wraps its key.
Status GiveToUser(const std::string& vault, const home::Account& a) {
  SIGILFS_ASSIGN_OR_RETURN(auto dir, core::OpenPosixBackingDir(vault));
  SIGILFS_RETURN_IF_ERROR(dir->SetOwner("", a.uid, a.gid).WithContext(vault));
  std::vector<std::string> names;
  SIGILFS_RETURN_IF_ERROR(dir->List(0, [&](const core::BackingEntry& e) {
    names.push_back(e.name);
    return true;
  }));
  for (const std::string& name : names) {
    std::string shown = vault;
    shown.append("/").append(name);
    SIGILFS_RETURN_IF_ERROR(dir->SetOwner(name, a.uid, a.gid).WithContext(shown));
  }
  return Status::Ok();
}

// A new, empty directory beside `vault` whose name pam_sigilfs.so never looks for (it expands
// the vault template with a user name, and no user name starts with a dot):
// DIR/.NAME.WHAT-XXXXXX. On the same filesystem, so rename(2) moves a vault between it and
// `vault` atomically.
Result<std::string> MakeTempSibling(const std::string& vault, const std::string& what) {
  const fs::path v(vault);
  const std::string name = v.filename().string().substr(0, 200);
  std::string temp = (v.parent_path() / ("." + name + "." + what + "-XXXXXX")).string();
  if (::mkdtemp(temp.data()) == nullptr) return SysError(temp, "mkdir");
  return temp;
}

// Removes the vault a setup builds under its temporary name unless told it is in place: a
// failed setup leaves no vault behind (and the plain home untouched), so it can simply be run
// again.
class NewVault {
 public:
  explicit NewVault(std::string dir) : dir_(std::move(dir)) {}
  ~NewVault() {
    if (dir_.empty()) return;
    std::error_code ec;
    fs::remove_all(dir_, ec);
    if (!ec) std::fprintf(stderr, "sigilfs: removed the incomplete vault %s\n", dir_.c_str());
  }
  NewVault(const NewVault&) = delete;
  NewVault& operator=(const NewVault&) = delete;
  void Keep() { dir_.clear(); }

 private:
  std::string dir_;
};

// Puts a vault that undo moved to a temporary name back in its place unless told it is done
// with it.
class MovedVault {
 public:
  MovedVault(std::string temp, std::string vault)
      : temp_(std::move(temp)), vault_(std::move(vault)) {}
  ~MovedVault() {
    if (temp_.empty()) return;
    if (::rename(temp_.c_str(), vault_.c_str()) == 0) {
      std::fprintf(stderr, "sigilfs: the vault %s was kept\n", vault_.c_str());
    } else {
      const int err = errno;
      std::fprintf(stderr,
                   "sigilfs: the vault was kept, but could not be moved back from %s to %s (%s): "
                   "rename it by hand\n",
                   temp_.c_str(), vault_.c_str(), std::generic_category().message(err).c_str());
    }
  }
  MovedVault(const MovedVault&) = delete;
  MovedVault& operator=(const MovedVault&) = delete;
  void Release() { temp_.clear(); }

 private:
  std::string temp_;
  std::string vault_;
};

// The volume takes the vault's lock, unless given `lock` (taken already, or held by the caller).
Result<std::unique_ptr<core::Volume>> Unlock(const std::string& vault, ByteSpan pass,
                                             std::optional<core::VaultLock> lock = std::nullopt) {
  SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Vault> v, core::Vault::Unlock(vault, pass));
  core::VolumeOptions options;
  options.lock = std::move(lock);
  return core::Volume::Open(std::move(v), std::move(options));
}

// Copies the home into the vault (still under its temporary name), then checks the copy by
// reading it back through a freshly unlocked vault; `verified` gets what was compared.
Status Migrate(const home::Account& a, const std::string& vault, ByteSpan pass,
               const home::TreeSize& tree, bool quiet, home::VerifiedTree& verified) {
  {
    SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Volume> volume, Unlock(vault, pass));
    ProgressLine line("copying into the vault", tree.file_bytes, tree.entries, quiet);
    SIGILFS_RETURN_IF_ERROR(ImportContents(*volume, a.home, /*owner=*/true, line));
    line.Clear();
    fmt::print("copied into the vault: {} in {} entries\n", MiB(tree.file_bytes), tree.entries);
  }
  SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Volume> volume, Unlock(vault, pass));
  SIGILFS_ASSIGN_OR_RETURN(uint64_t entries, home::CompareWithVault(*volume, a.home, &verified));
  fmt::print(
      "verified {} entries: names, contents, modes, owners, times, links and attributes match\n",
      entries);
  return Status::Ok();
}

// Test-only: SIGILFS_TEST_AFTER_VERIFY, when set, is a shell command run between the
// verification of the copy and the removal of the originals, so that the tests can change the
// home in that window. Nothing outside the tests sets it.
void RunTestHookAfterVerify() {
  const char* hook = std::getenv("SIGILFS_TEST_AFTER_VERIFY");  // NOLINT(concurrency-mt-unsafe)
  if (hook == nullptr || *hook == '\0') return;
  std::fflush(stdout);
  // NOLINTNEXTLINE(cert-env33-c,concurrency-mt-unsafe): test-only hook, see above
  (void)std::system(hook);
}

// The home, once more right before the vault goes live: the same directory as at the start,
// not mounted, its user logged out. Open, for the removal of the originals.
Result<std::unique_ptr<core::BackingDir>> RecheckHome(const home::Account& a,
                                                      const struct stat& at_start) {
  struct stat now {};
  SIGILFS_RETURN_IF_ERROR(CheckHome(a, now));
  if (now.st_dev != at_start.st_dev || now.st_ino != at_start.st_ino)
    return Status(Code::kInvalidArgument, a.home + " was replaced during the copy");
  SIGILFS_RETURN_IF_ERROR(CheckLoggedOut(a).WithContext("during the copy"));
  SIGILFS_ASSIGN_OR_RETURN(auto home, core::OpenPosixBackingDir(a.home));
  SIGILFS_ASSIGN_OR_RETURN(struct stat opened, home->Stat(""));
  if (opened.st_dev != at_start.st_dev || opened.st_ino != at_start.st_ino)
    return Status(Code::kInvalidArgument, a.home + " was replaced during the copy");
  return home;
}

int RunSetup(const HomeOptions& o) {
  if (::geteuid() != 0)
    return Fail(Status(Code::kPermissionDenied, "sigilfs home setup must be run as root"));
  auto account = home::LookUpUser(o.user);
  if (!account.ok()) return Fail(account.status());
  const home::Account& a = *account;
  auto vault = VaultFor(a, o.vault);
  if (!vault.ok()) return Fail(vault.status());
  struct stat home_st;
  if (Status s = CheckHome(a, home_st); !s.ok()) return Fail(s);
  if (Status s = CheckVaultPlace(*vault, a); !s.ok()) return Fail(s);
  const std::string config_path = *vault + "/" + core::kConfigFileName;
  const auto existing_vault = [&]() -> Status {
    std::error_code ec;
    if (fs::exists(config_path, ec))
      return Status(Code::kExists,
                    a.name + " already has a vault in " + *vault + " ('sigilfs home undo " +
                        a.name + "' takes the files back out of it)",
                    EEXIST);
    if (fs::exists(*vault, ec) && !fs::is_empty(*vault, ec))
      return Status(Code::kExists, *vault + " exists and is not empty", EEXIST);
    return Status::Ok();
  };
  if (Status s = existing_vault(); !s.ok()) return Fail(s);
  if (Status s = CheckLoggedOut(a); !s.ok()) return Fail(s);
  auto kdf = ResolveKdf(o.kdf);
  if (!kdf.ok()) return Fail(kdf.status());
  auto cipher = crypt::ParseAeadAlgorithm(o.cipher);
  if (!cipher.ok()) return Fail(cipher.status());

  home::TreeSize tree;
  if (o.migrate) {
    const core::PageGeometry geometry(crypt::AeadNonceSize(*cipher));
    auto measured =
        home::MeasureTree(a.home, [&geometry](uint64_t n) { return geometry.CipherSize(n); });
    if (!measured.ok()) return Fail(measured.status());
    tree = *measured;
    // Both copies exist until the vault's is verified: the room is checked beside the originals.
    if (Status s = home::CheckRoom(
            ExistingAncestor(*vault), tree,
            "the encrypted copy of " + a.home + " (the originals stay until the copy is verified)");
        !s.ok())
      return Fail(s);
  }

  auto pass = fuse::ReadPassphrase(o.pass, a.name + "'s login password", fuse::PromptMode::kNew);
  if (!pass.ok()) return Fail(pass.status());
  if (home::CheckLoginPassword(a.name, pass->span()) == home::LoginPassword::kDiffers)
    std::fprintf(stderr,
                 "sigilfs: warning: this is not %s's login password: the home will not unlock at "
                 "login until they match (sigilfs passwd %s)\n",
                 a.name.c_str(), vault->c_str());

  // The vault is built, filled and verified under a temporary name pam_sigilfs.so does not
  // know: a login meanwhile finds no vault and mounts nothing; only a verified vault is renamed
  // into place (atomically), and only then are the originals removed.
  if (Status s = MakeParents(*vault); !s.ok()) return Fail(s);
  auto temp = MakeTempSibling(*vault, "setup");
  if (!temp.ok()) return Fail(temp.status());
  NewVault made(*temp);
  core::VaultCreateOptions create;
  create.cipher = *cipher;
  create.kdf = *kdf;
  if (Status s = core::Vault::Create(*temp, pass->span(), create); !s.ok()) return Fail(s);
  if (Status s = GiveToUser(*temp, a); !s.ok()) return Fail(s);

  home::VerifiedTree verified;
  std::unique_ptr<core::BackingDir> home_dir;
  if (o.migrate) {
    if (Status s = Migrate(a, *temp, pass->span(), tree, o.quiet, verified); !s.ok()) {
      Fail(s);
      std::fprintf(stderr, "sigilfs: %s was not changed\n", a.home.c_str());
      return 1;
    }
    RunTestHookAfterVerify();
    // Whoever logged in meanwhile may have changed files after they were compared.
    auto opened = RecheckHome(a, home_st);
    if (!opened.ok()) {
      Fail(opened.status());
      std::fprintf(stderr, "sigilfs: %s was not changed\n", a.home.c_str());
      return 1;
    }
    home_dir = std::move(*opened);
  }
  if (Status s = existing_vault(); !s.ok()) return Fail(s);
  if (::rename(temp->c_str(), vault->c_str()) != 0) {
    Fail(SysError(*vault, "move the new vault " + *temp + " into place"));
    if (o.migrate) std::fprintf(stderr, "sigilfs: %s was not changed\n", a.home.c_str());
    return 1;
  }
  made.Keep();
  fmt::print("Created {}'s vault in {}.\n", a.name, *vault);

  if (o.migrate) {
    if (Status s = home::RemoveVerified(*home_dir, a.home, verified); !s.ok()) {
      Fail(s);
      std::fprintf(stderr,
                   "sigilfs: the vault %s holds the verified copy of %s (of anything listed above "
                   "as changed, the version from before the change); what is left in %s is not "
                   "in the vault and is hidden while the vault is mounted on it: move it into "
                   "the vault (mount it elsewhere) or delete it, until %s is empty\n",
                   vault->c_str(), a.home.c_str(), a.home.c_str(), a.home.c_str());
      return 1;
    }
    fmt::print("Moved {} into the vault; {} is now an empty mount point.\n", a.home, a.home);
  } else {
    std::error_code ec;
    if (!fs::is_empty(a.home, ec))
      fmt::print(
          "Note: {} is not empty; its files are hidden while the vault is mounted on it "
          "(--migrate moves them in).\n",
          a.home);
  }
  fmt::print("pam_sigilfs.so mounts it on {} when {} logs in with this password (docs/home.md).\n",
             a.home, a.name);
  return 0;
}

// Refuses while `a` is logged in or the vault (under either name) or a sigilfs mount on the
// home is mounted.
Status CheckNotInUse(const home::Account& a, const std::vector<std::string>& vaults) {
  struct stat st;
  SIGILFS_RETURN_IF_ERROR(CheckHome(a, st));
  SIGILFS_RETURN_IF_ERROR(CheckLoggedOut(a));
  const std::string home = fs::path(a.home).lexically_normal().string();
  if (auto point = home::FindSigilfsMount(vaults, home))
    return Status(Code::kPermissionDenied,
                  "the vault " + vaults.front() + " is mounted on " + *point + ": unmount it first",
                  EBUSY);
  return Status::Ok();
}

// Takes the files back out of the vault into the (empty) home, verifies them and removes the
// vault. The vault is first moved to a temporary name, so that no login mounts it while it is
// exported; it is moved back if anything fails.
int RunUndo(const HomeOptions& o) {
  if (::geteuid() != 0)
    return Fail(Status(Code::kPermissionDenied, "sigilfs home undo must be run as root"));
  auto account = home::LookUpUser(o.user);
  if (!account.ok()) return Fail(account.status());
  const home::Account& a = *account;
  auto vault = VaultFor(a, o.vault);
  if (!vault.ok()) return Fail(vault.status());
  if (auto config = core::Vault::LoadConfig(*vault); !config.ok()) return Fail(config.status());
  struct stat vault_st;
  if (::lstat(vault->c_str(), &vault_st) != 0) return Fail(SysError(*vault, "stat"));
  if (!S_ISDIR(vault_st.st_mode))
    return Fail(Status(Code::kInvalidArgument,
                       *vault + " is a symbolic link: give the vault's real directory (--vault)"));
  if (Status s = CheckNotInUse(a, {*vault}); !s.ok()) return Fail(s);
  // The vault goes at the end: held exclusively until then, so that no mount (in another mount
  // namespace too, or by another path) or command uses it meanwhile.
  auto lock = LockVault(*vault, VaultAccess::kWrite);
  if (!lock.ok()) return Fail(lock.status());
  std::error_code ec;
  if (!fs::is_empty(a.home, ec))
    return Fail(Status(Code::kNotEmpty,
                       a.home + " is not empty (files made while the vault was not mounted?): "
                                "move them away first",
                       ENOTEMPTY));
  auto tree = home::MeasureTree(*vault, [](uint64_t n) { return n; });
  if (!tree.ok()) return Fail(tree.status());
  if (Status s = home::CheckRoom(a.home, *tree, "the decrypted files"); !s.ok()) return Fail(s);

  auto pass =
      fuse::ReadPassphrase(o.pass, a.name + "'s vault passphrase", fuse::PromptMode::kExisting);
  if (!pass.ok()) return Fail(pass.status());

  // Out of pam_sigilfs.so's sight, then checked again: a login just before the rename may
  // have mounted it.
  auto temp = MakeTempSibling(*vault, "undo");
  if (!temp.ok()) return Fail(temp.status());
  if (::rename(vault->c_str(), temp->c_str()) != 0) {
    Status s = SysError(*vault, "move to " + *temp);
    ::rmdir(temp->c_str());
    return Fail(s);
  }
  MovedVault moved(*temp, *vault);
  if (Status s = CheckNotInUse(a, {*vault, *temp}); !s.ok()) return Fail(s);

  // The lock stays this command's (`lock`, an unheld one for the volume): it is held until the
  // vault is gone, after the volume is closed.
  auto volume = Unlock(*temp, pass->span(), core::VaultLock());
  if (!volume.ok()) return Fail(volume.status());
  uint64_t problems = 0;
  // The cipher sizes: a little more than the plaintext, enough for a time left.
  ProgressLine line("exporting from the vault", tree->file_bytes, tree->entries, o.quiet);
  Status s = ExportAll(**volume, a.home, /*owner=*/true, problems, line);
  line.Clear();
  if (s.ok() && problems > 0)
    s = Status(Code::kCorrupt, fmt::format("{} damaged entr{} left out", problems,
                                           problems == 1 ? "y was" : "ies were"));
  if (s.ok()) {
    auto entries = home::CompareWithVault(**volume, a.home);
    if (entries.ok())
      fmt::print("exported and verified {} entries into {}\n", *entries, a.home);
    else
      s = entries.status();
  }
  volume->reset();
  if (!s.ok()) return Fail(s);
  // Nothing may have it mounted when it goes.
  if (auto point = home::FindSigilfsMount({*vault, *temp}, "")) {
    return Fail(Status(Code::kPermissionDenied,
                       "the vault is mounted on " + *point + ": it was not removed", EBUSY));
  }
  moved.Release();
  fs::remove_all(*temp, ec);
  if (ec) return Fail(Status::FromErrno(ec.value(), "remove " + *temp));
  fmt::print(
      "Removed the vault {}; {} holds the plain files again. Remove pam_sigilfs.so from "
      "the PAM configuration if no other user has a vault.\n",
      *vault, a.home);
  return 0;
}

}  // namespace

void RegisterHomeCommands(CLI::App& app, Action& action) {
  auto* home = app.add_subcommand("home", "Encrypted home directories unlocked at login");
  home->require_subcommand(1);
  {
    auto o = std::make_shared<HomeOptions>();
    auto* cmd = home->add_subcommand(
        "setup",
        "Create USER's vault, wrapped by their login password (--migrate: move the home in)");
    cmd->add_option("USER", o->user, "The account")->required();
    cmd->add_option("--vault", o->vault,
                    "The vault's directory (default: /home/.sigilfs/USER, beside the homes)");
    cmd->add_flag(
        "--migrate", o->migrate,
        "Copy the home's contents into the vault, verify them, then remove the originals");
    cmd->add_option("--cipher", o->cipher, "Page cipher: aes-256-gcm or xchacha20-poly1305")
        ->capture_default_str();
    cmd->add_flag("-q,--quiet", o->quiet, "No progress line (shown only on a terminal)");
    AddKdfOptions(*cmd, o->kdf, "moderate");
    AddPassphraseOptions(*cmd, o->pass, "", "login password");
    cmd->footer(
        "Run as root while USER is logged out. Refuses when USER does not exist, is logged in, or\n"
        "already has a vault, and (--migrate) when the disk lacks room for the copy. The "
        "originals\n"
        "are removed only after every entry was read back through the vault and compared.");
    cmd->callback([&action, o] { action = [o] { return RunSetup(*o); }; });
  }
  {
    auto o = std::make_shared<HomeOptions>();
    auto* cmd = home->add_subcommand(
        "undo", "Export USER's vault back into their (empty) home, verify it, remove the vault");
    cmd->add_option("USER", o->user, "The account")->required();
    cmd->add_option("--vault", o->vault, "The vault's directory (default: /home/.sigilfs/USER)");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress line (shown only on a terminal)");
    AddPassphraseOptions(*cmd, o->pass, "", "vault passphrase");
    cmd->callback([&action, o] { action = [o] { return RunUndo(*o); }; });
  }
}

}  // namespace sigilfs::cli
