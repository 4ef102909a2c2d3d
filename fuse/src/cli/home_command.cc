// `sigilfs home setup` and `sigilfs home undo`: a user's encrypted home directory, created (and
// an existing home moved into it) or taken back out, for pam_sigilfs.so to mount at login.
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "commands.h"
#include "home.h"
#include "sigilfs/core/format.h"
#include "sigilfs/core/names.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/fuse/home_vault.h"
#include "transfer.h"

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct HomeOptions {
  std::string user;
  std::string vault;  // empty: the default template
  bool migrate = false;
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
  if (!given.empty()) return fs::absolute(given).lexically_normal().string();
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
  if (::chown(vault.c_str(), a.uid, a.gid) != 0) return SysError(vault, "chown");
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(vault, ec)) {
    if (::lchown(e.path().c_str(), a.uid, a.gid) != 0) return SysError(e.path(), "chown");
  }
  if (ec) return Status::FromErrno(ec.value(), vault + ": list");
  return Status::Ok();
}

// Removes a vault made by this run unless told to keep it: a failed setup leaves no vault
// behind (the plain home is untouched until the very end), so it can simply be run again.
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

// One progress line: rewritten in place on a terminal, at most one line every two seconds
// otherwise (logs of a scripted migration stay short).
class Progress {
 public:
  explicit Progress(uint64_t total_bytes)
      : total_(total_bytes), tty_(::isatty(STDOUT_FILENO) == 1), last_(Clock::now()) {}

  void Add(uint64_t bytes) {
    ++entries_;
    bytes_ += bytes;
    const auto now = Clock::now();
    if (now - last_ < (tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(2))) return;
    last_ = now;
    Print(false);
  }
  void Done() { Print(true); }

 private:
  void Print(bool last) {
    const std::string line = fmt::format("copying into the vault: {} of {} ({} entries)",
                                         MiB(bytes_), MiB(total_), entries_);
    fmt::print("{}{}{}", tty_ ? "\r" : "", line, tty_ && !last ? "" : "\n");
    std::fflush(stdout);
  }

  const uint64_t total_;
  const bool tty_;
  Clock::time_point last_;
  uint64_t entries_ = 0;
  uint64_t bytes_ = 0;
};

Result<std::unique_ptr<core::Volume>> Unlock(const std::string& vault, ByteSpan pass) {
  SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Vault> v, core::Vault::Unlock(vault, pass));
  return core::Volume::Open(std::move(v), core::VolumeOptions{});
}

// Copies the home into the vault, checks the copy by reading it back through a freshly unlocked
// vault, and only then removes the plain files.
Status Migrate(const home::Account& a, const std::string& vault, ByteSpan pass,
               const home::TreeSize& tree) {
  {
    SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Volume> volume, Unlock(vault, pass));
    Progress progress(tree.file_bytes);
    SIGILFS_RETURN_IF_ERROR(
        ImportContents(*volume, a.home, /*owner=*/true,
                       [&progress](const std::string&, uint64_t bytes) { progress.Add(bytes); }));
    progress.Done();
  }
  SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<core::Volume> volume, Unlock(vault, pass));
  SIGILFS_ASSIGN_OR_RETURN(uint64_t entries, home::CompareWithVault(*volume, a.home));
  fmt::print(
      "verified {} entries: names, contents, modes, owners, times, links and attributes match\n",
      entries);
  // Whoever logged in meanwhile may have changed files after they were compared.
  SIGILFS_RETURN_IF_ERROR(CheckLoggedOut(a).WithContext("during the copy"));
  return Status::Ok();
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
  std::error_code ec;
  if (fs::exists(*vault + "/" + core::kConfigFileName, ec))
    return Fail(Status(Code::kExists,
                       a.name + " already has a vault in " + *vault + " ('sigilfs home undo " +
                           a.name + "' takes the files back out of it)",
                       EEXIST));
  if (fs::exists(*vault, ec) && !fs::is_empty(*vault, ec))
    return Fail(Status(Code::kExists, *vault + " exists and is not empty", EEXIST));
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

  if (Status s = MakeParents(*vault); !s.ok()) return Fail(s);
  core::VaultCreateOptions create;
  create.cipher = *cipher;
  create.kdf = *kdf;
  if (Status s = core::Vault::Create(*vault, pass->span(), create); !s.ok()) return Fail(s);
  NewVault made(*vault);
  if (Status s = GiveToUser(*vault, a); !s.ok()) return Fail(s);
  fmt::print("Created {}'s vault in {}.\n", a.name, *vault);

  if (o.migrate) {
    if (Status s = Migrate(a, *vault, pass->span(), tree); !s.ok()) {
      Fail(s);
      std::fprintf(stderr, "sigilfs: %s was not changed\n", a.home.c_str());
      return 1;
    }
    made.Keep();
    if (Status s = home::RemoveContents(a.home); !s.ok()) {
      Fail(s);
      std::fprintf(stderr,
                   "sigilfs: the vault holds a verified copy of everything; remove what is left "
                   "in %s by hand before the vault is mounted on it\n",
                   a.home.c_str());
      return 1;
    }
    fmt::print("Moved {} into the vault; {} is now an empty mount point.\n", a.home, a.home);
  } else {
    made.Keep();
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

// Takes the files back out of the vault into the (empty) home, verifies them and removes the
// vault.
int RunUndo(const HomeOptions& o) {
  if (::geteuid() != 0)
    return Fail(Status(Code::kPermissionDenied, "sigilfs home undo must be run as root"));
  auto account = home::LookUpUser(o.user);
  if (!account.ok()) return Fail(account.status());
  const home::Account& a = *account;
  auto vault = VaultFor(a, o.vault);
  if (!vault.ok()) return Fail(vault.status());
  if (auto config = core::Vault::LoadConfig(*vault); !config.ok()) return Fail(config.status());
  struct stat home_st;
  if (Status s = CheckHome(a, home_st); !s.ok()) return Fail(s);
  if (Status s = CheckLoggedOut(a); !s.ok()) return Fail(s);
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
  auto volume = Unlock(*vault, pass->span());
  if (!volume.ok()) return Fail(volume.status());
  uint64_t problems = 0;
  Status s = ExportAll(**volume, a.home, /*owner=*/true, problems);
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
  if (!s.ok()) {
    Fail(s);
    std::fprintf(stderr, "sigilfs: the vault %s was kept\n", vault->c_str());
    return 1;
  }
  volume->reset();
  fs::remove_all(*vault, ec);
  if (ec) return Fail(Status::FromErrno(ec.value(), "remove " + *vault));
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
    AddPassphraseOptions(*cmd, o->pass, "", "vault passphrase");
    cmd->callback([&action, o] { action = [o] { return RunUndo(*o); }; });
  }
}

}  // namespace sigilfs::cli
