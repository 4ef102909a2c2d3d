// `sigilfs mount` and `sigilfs unmount`.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../daemon/options.h"
#include "../daemon/process.h"
#include "../daemon/uring_transport.h"
#include "../mount/daemon.h"
#include "commands.h"
#include "holders.h"
#include "mounts.h"
#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/mountinfo.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/fuse/mount_record.h"

namespace sigilfs::cli {
namespace {

struct MountArgs {
  std::string dir;
  std::string mountpoint;
  bool foreground = false;
  std::string stats_file;
  std::string idle;                  // "90", "90s", "10m", "2h"
  std::string handle_cache;          // a count of nodes
  std::string readahead;             // KiB
  std::string transport;             // auto, uring, dev
  std::vector<std::string> options;  // -o values, each possibly comma-separated
  bool shared = false;               // several mounts of one vault (--shared, -o shared)
  fuse::PassphraseSource pass;
};

// A count: decimal digits only.
Result<size_t> ParseCount(const std::string& text, const char* what) {
  // At most 12 digits, so stoull cannot overflow or throw.
  if (text.empty() || text.size() > 12 ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Status(Code::kInvalidArgument, std::string(what) + " is not a count: " + text);
  return static_cast<size_t>(std::stoull(text));
}

// A duration in seconds: a number with an optional s, m or h.
Result<std::chrono::seconds> ParseDuration(const std::string& text) {
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    n = -1;
  }
  const std::string unit = text.substr(used);
  const long long scale = unit.empty() || unit == "s" ? 1
                          : unit == "m"               ? 60
                          : unit == "h"               ? 3600
                                                      : 0;
  if (n <= 0 || scale == 0)
    return Status(Code::kInvalidArgument, "not a duration (like 90s, 10m, 2h): " + text);
  return std::chrono::seconds(n * scale);
}

// `mount -o remount,ro|rw MOUNTPOINT` reaches here through mount.fuse3 (as `sigilfs SOURCE
// MOUNTPOINT -o ...,remount,...`): the running daemon stays, and the kernel flips the mount's
// read-only flag (FUSE supports that; writes then fail with EROFS before reaching the daemon).
// The flags the mount has (nosuid, nodev, ...) are passed again: a remount drops those omitted.
// Access-time options given (noatime, relatime, strictatime, atime; nodiratime, diratime)
// replace the mount's; the daemon, which keeps access times, follows them (docs/design/mount.md).
struct AtimeOptions {
  std::optional<unsigned long> mode;  // MS_NOATIME, MS_RELATIME or MS_STRICTATIME
  std::optional<bool> nodiratime;
  // Notes `opt` if it is one of these; the last one given counts.
  void Take(const std::string& opt) {
    if (opt == "noatime") {
      mode = MS_NOATIME;
    } else if (opt == "relatime" || opt == "atime") {
      mode = MS_RELATIME;
    } else if (opt == "strictatime") {
      mode = MS_STRICTATIME;
    } else if (opt == "nodiratime" || opt == "diratime") {
      nodiratime = opt == "nodiratime";
    }
  }
};

int RunRemount(const std::string& mountpoint, std::optional<bool> read_only,
               const AtimeOptions& atime) {
  constexpr long kFuseSuperMagic = 0x65735546;
  constexpr unsigned long kStNoSymfollow = 0x2000;  // ST_NOSYMFOLLOW: Linux 5.10, glibc 2.37
  struct statfs sf;
  if (::statfs(mountpoint.c_str(), &sf) != 0)
    return Fail(Status::FromErrno(errno, "remount " + mountpoint));
  if (sf.f_type != kFuseSuperMagic)
    return Fail(
        Status(Code::kInvalidArgument, "remount: " + mountpoint + " is not a sigilfs mount"));
  struct statvfs sv;
  if (::statvfs(mountpoint.c_str(), &sv) != 0)
    return Fail(Status::FromErrno(errno, "remount " + mountpoint));
  // Neither ro nor rw given: the mount stays as it is.
  const bool ro = read_only.value_or((sv.f_flag & ST_RDONLY) != 0);
  unsigned long flags = MS_REMOUNT | (ro ? MS_RDONLY : 0);
  const std::pair<unsigned long, unsigned long> kept[] = {
      {ST_NOSUID, MS_NOSUID},           {ST_NODEV, MS_NODEV},
      {ST_NOEXEC, MS_NOEXEC},           {ST_NOATIME, MS_NOATIME},
      {ST_NODIRATIME, MS_NODIRATIME},   {ST_RELATIME, MS_RELATIME},
      {ST_SYNCHRONOUS, MS_SYNCHRONOUS}, {kStNoSymfollow, MS_NOSYMFOLLOW}};
  for (const auto& [has, keep] : kept)
    if ((sv.f_flag & has) != 0) flags |= keep;
  if (atime.mode) flags = (flags & ~(MS_NOATIME | MS_RELATIME | MS_STRICTATIME)) | *atime.mode;
  if (atime.nodiratime) flags = *atime.nodiratime ? flags | MS_NODIRATIME : flags & ~MS_NODIRATIME;
  if (::mount(nullptr, mountpoint.c_str(), nullptr, flags, nullptr) != 0)
    return Fail(Status::FromErrno(errno, "remount " + mountpoint));
  return 0;
}

int RunMount(MountArgs a) {
  fuse::DaemonOptions d;
  // The daemon changes to / (fuse_daemonize does, even in the foreground): the unmount at
  // exit needs the mount point's absolute path.
  std::error_code ec;
  d.mountpoint = std::filesystem::absolute(a.mountpoint, ec).lexically_normal().string();
  if (ec) return Fail(Status::FromErrno(ec.value(), "mount point " + a.mountpoint));
  d.foreground = a.foreground;
  // Options of sigilfs's own also come this way from /etc/fstab (through mount.fuse3).
  const auto given = fuse::GivenOptions::Parse(fuse::OptionsFor::kMount, a.options);
  std::optional<bool> read_only;  // the last ro or rw given
  if (auto last = given.LastOf({"ro", "rw"})) read_only = *last == "ro";
  std::optional<bool> acl;  // the last acl or noacl given
  if (auto last = given.LastOf({"acl", "noacl"})) acl = *last == "acl";
  if (given.Has("noxattr")) d.xattrs = false;
  if (given.Has("shared")) a.shared = true;
  const std::pair<const char*, std::string*> values[] = {{"passfile", &a.pass.passfile},
                                                         {"stats_file", &a.stats_file},
                                                         {"idle", &a.idle},
                                                         {"handle_cache", &a.handle_cache},
                                                         {"readahead", &a.readahead},
                                                         {"transport", &a.transport}};
  for (const auto& [key, value] : values)
    if (auto given_value = given.Value(key)) *value = *given_value;
  d.fuse_options = given.kernel();
  // A remount (mount(8) hands the helper the mount's current options) takes only what it knows;
  // the access-time options given replace the mount's.
  if (given.Has("remount")) {
    AtimeOptions atime;
    for (const std::string& opt : d.fuse_options) atime.Take(opt);
    return RunRemount(d.mountpoint, read_only, atime);
  }
  if (given.Has("reverse"))  // an /etc/fstab line of an encrypted view
    return RunReverse({a.dir, a.mountpoint, a.foreground, a.options, {}, {}, 0, a.pass});
  if (std::string refusal = given.Refusal(); !refusal.empty()) {
    std::fprintf(stderr, "sigilfs: %s\n", refusal.c_str());
    return 2;
  }
  d.read_only = read_only.value_or(false);
  // POSIX ACLs are kept unless turned off (-o noacl). The kernel checks permissions against
  // them where the mount has it check permissions at all (default_permissions, or allow_other,
  // where other users come in), or with -o acl; a mount of one user's own files leaves them
  // unchecked, as it leaves the mode bits, and so spares the kernel fetching a directory's
  // attributes again after each new entry, one request per file that `cp -a` creates
  // (docs/design/xattrs-and-acls.md, "POSIX ACLs").
  d.acls = acl.value_or(true);
  const auto has = [&](const char* o) {
    return std::find(d.fuse_options.begin(), d.fuse_options.end(), o) != d.fuse_options.end();
  };
  d.kernel_acls = acl.value_or(has("default_permissions") || has("allow_other"));
  fuse::KeepSecretsOutOfDumps();  // before the passphrase is read
  // A value an option cannot take is a usage error, as CLI11's own are.
  if (!a.idle.empty()) {
    auto idle = ParseDuration(a.idle);
    if (!idle.ok()) return FailUsage(idle.status());
    d.idle = *idle;
  }
  if (!a.handle_cache.empty()) {
    auto n = ParseCount(a.handle_cache, "the handle cache");
    if (!n.ok()) return FailUsage(n.status());
    d.handle_cache = *n;
  }
  if (!a.readahead.empty()) {
    auto n = ParseCount(a.readahead, "the read-ahead");
    if (!n.ok()) return FailUsage(n.status());
    if (*n > 65536)
      return FailUsage(Status(Code::kInvalidArgument, "the read-ahead is at most 65536 KiB"));
    d.readahead_kib = *n;
  }
  if (!a.transport.empty()) {
    auto transport = fuse::ChooseTransport(a.transport);
    if (!transport.ok()) return FailUsage(transport.status());
    d.transport = *transport;
  }
  if (!a.stats_file.empty()) {
    // The daemon changes to / when it detaches: keep the path absolute.
    d.stats_file = std::filesystem::absolute(a.stats_file, ec).string();
    if (ec) return Fail(Status::FromErrno(ec.value(), "stats file " + a.stats_file));
  }
  if (Status s = CheckMountPoint(a.mountpoint); !s.ok()) return Fail(s);
  // Unlock before daemonizing: the passphrase prompt needs the terminal. (The config's load
  // names a vault directory that is missing or no directory.)
  auto config = core::Vault::LoadConfig(a.dir);
  if (!config.ok()) return Fail(config.status());
  // One mount per vault (docs/design/mount.md): the lock is taken before the passphrase is asked
  // for, and this process's descriptor, shared by the fork of fuse_daemonize, keeps it until the
  // serving process ends. A second mount, stacked or elsewhere, stops here.
  // Shared mode: other shared mounts (and no other) may serve the vault at the same time.
  auto lock = LockVault(a.dir, a.shared ? VaultAccess::kSharedMount : VaultAccess::kWrite);
  if (!lock.ok()) {
    // Refused by shared mounts only (a shared lock can be had): it can join them.
    if (!a.shared && lock.status().sys_errno() == EBUSY &&
        !core::MountPointsOfVault(a.dir).empty() &&
        core::VaultLock::Acquire(a.dir, core::LockMode::kSharedMount).ok())
      return Fail(Status(Code::kPermissionDenied,
                         lock.status().message() + "; use --shared to mount it too", EBUSY));
    return Fail(lock.status());
  }
  if (Status s = CheckNothingHidden(a.mountpoint, given.Has("nonempty"), "mount"); !s.ok())
    return Fail(s);
  // The mount's source names the vault by its canonical path, by which a refused mount or
  // command finds where it is mounted.
  std::string dir = std::filesystem::canonical(a.dir, ec).string();
  if (ec) dir = a.dir;
  auto pass = fuse::ReadPassphrase(a.pass, "Passphrase", fuse::PromptMode::kExisting);
  if (!pass.ok()) return Fail(pass.status());
  auto vault = core::Vault::Unlock(dir, pass->span());
  if (!vault.ok()) return Fail(vault.status());
  core::VolumeOptions volume_options;
  volume_options.pages.shared = a.shared;
  volume_options.lock = std::move(lock).value();
  auto volume = core::Volume::Open(std::move(vault).value(), std::move(volume_options));
  if (!volume.ok()) return Fail(volume.status());
  // A root without its IV would mount and fail every name with EIO: refused, with the way out.
  if (auto root = core::OpenPosixBackingDir(dir); root.ok()) {
    if (auto iv = (*volume)->ReadDirIv(**root); !iv.ok()) {
      // "directory has no IV file (sigilfs.diriv)", "directory IV has the wrong size", or a
      // store's error
      const std::string& why = iv.status().message();
      const std::string what = why.starts_with("directory ")
                                   ? "its root " + why
                                   : "its root directory's IV cannot be read (" + why + ")";
      std::fprintf(stderr,
                   "sigilfs: the vault %s cannot be mounted: %s, so no name in it can be read; "
                   "'sigilfs fsck --repair %s' restores what can be restored\n",
                   a.dir.c_str(), what.c_str(), a.dir.c_str());
      return 1;
    }
  }
  d.shared = a.shared;
  // The serving process names itself in the lock file, for `sigilfs unmount` to wait on. Shared
  // mounts, several to one file, leave it as it is.
  if (!a.shared) d.on_serving = [v = volume->get()] { (void)v->lock().RecordHolder(); };
  return fuse::RunDaemon(std::move(volume).value(), d);
}

// What fusermount3 -u MOUNTPOINT did: its exit status and what it wrote on stderr.
struct FusermountResult {
  int code = 0;
  std::string words;
  // Refused because something still uses the mount (EBUSY): worth another try.
  bool busy() const {
    return code != 0 && words.find("Device or resource busy") != std::string::npos;
  }
};

FusermountResult Fusermount(const std::string& mountpoint) {
  // Its words in English whatever the locale, so that a busy mount is told apart.
  std::vector<std::string> env = {"LC_ALL=C"};
  for (char** e = environ; *e != nullptr; ++e)
    if (!std::string_view(*e).starts_with("LC_ALL=")) env.emplace_back(*e);
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  int words[2];
  if (::pipe2(words, O_CLOEXEC) != 0) return {1, std::string("pipe: ") + strerrordesc_np(errno)};
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(words[0]);
    ::close(words[1]);
    return {1, std::string("fork: ") + strerrordesc_np(errno)};
  }
  if (pid == 0) {
    ::dup2(words[1], STDERR_FILENO);
    const char* const argv[] = {"fusermount3", "-u", mountpoint.c_str(), nullptr};
    ::execvpe("fusermount3", const_cast<char* const*>(argv), envp.data());
    // NOLINTNEXTLINE(concurrency-mt-unsafe): the child of a fork, one thread
    std::fprintf(stderr, "sigilfs: cannot run fusermount3: %s\n", std::strerror(errno));
    ::_exit(127);
  }
  ::close(words[1]);
  FusermountResult r;
  char buffer[512];
  for (ssize_t n; (n = ::read(words[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.words.append(buffer, static_cast<size_t>(n));
  }
  ::close(words[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  return r;
}

// fusermount3 -u MOUNTPOINT, tried again until `deadline` while something uses the mount (a
// process's open file or current directory there, a mount below it), whose users are named once
// at the start of the wait and again if it ends without the unmount. Its exit status.
int UnmountWhenFree(const std::string& mountpoint, std::chrono::steady_clock::time_point deadline,
                    int timeout_seconds) {
  bool told = false;
  for (auto pause = std::chrono::milliseconds(10);;
       pause = std::min(pause * 2, std::chrono::milliseconds(200))) {
    const FusermountResult r = Fusermount(mountpoint);
    if (r.code == 0) return 0;
    if (!r.busy()) {
      std::fputs(r.words.c_str(), stderr);  // fusermount3's own words: it says what it refused
      return r.code;
    }
    const auto mount = MountOn(mountpoint);
    const std::string who =
        mount ? DescribeHolders(HoldersOf(*mount)) : "a process this user cannot see";
    if (std::chrono::steady_clock::now() >= deadline) {
      if (timeout_seconds == 0)
        std::fprintf(stderr, "sigilfs: %s is in use by %s: it was not unmounted\n",
                     mountpoint.c_str(), who.c_str());
      else
        std::fprintf(stderr,
                     "sigilfs: %s is still in use after %d s, by %s: it was not unmounted\n",
                     mountpoint.c_str(), timeout_seconds, who.c_str());
      return 1;
    }
    if (!told)
      std::fprintf(stderr, "sigilfs: %s is in use by %s; waiting up to %d s\n", mountpoint.c_str(),
                   who.c_str(), timeout_seconds);
    told = true;
    std::this_thread::sleep_for(pause);
  }
}

// Whether the mount on `mountpoint` is left by a daemon that has ended (killed, crashed): it
// answers "Transport endpoint is not connected". Asked only where nothing says the daemon runs,
// and in a child given two seconds, so that a daemon that runs but does not answer holds up no
// unmount.
bool DaemonEnded(const std::string& mountpoint) {
  const pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    struct stat st;
    ::_exit(::stat(mountpoint.c_str(), &st) != 0 && errno == ENOTCONN ? 0 : 1);
  }
  int status = 0;
  for (int waited_ms = 0; ::waitpid(pid, &status, WNOHANG) == 0; waited_ms += 10) {
    if (waited_ms >= 2000) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// fusermount3 -u returns once the kernel let go of the mount; the daemon may still be writing
// back what its last requests left. So that the vault can be used at once (mounted again,
// imported into) and the disk under it unmounted, this waits until the daemon has ended: its
// lock on the vault free (other shared mounts aside) and its process gone. The one timeout
// covers both waits: for the mount to be let go, and for the daemon.
int RunUnmount(const std::string& mountpoint, int timeout_seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  const std::optional<std::string> vault = core::VaultMountedOn(mountpoint);
  if (!vault) {
    const auto mount = MountOn(mountpoint);
    if (mount && mount->type == "fuse.sigilfs-reverse")
      return UnmountWhenFree(mountpoint, deadline, timeout_seconds);  // nothing more to wait for
  }
  if (!vault)
    return Fail(Status(Code::kInvalidArgument,
                       mountpoint + " is not a sigilfs mount (nothing of sigilfs to unmount)",
                       EINVAL));
  // Found before the unmount, while the daemon holds its record: its lock is what is waited on.
  // The lock file names an exclusive mount's daemon too, once it has detached.
  const Result<fuse::RecordedDaemon> record = RecordOf(mountpoint);
  const std::optional<core::VaultLock::Process> holder = core::VaultLock::HolderOf(*vault);
  // An exclusive mount's daemon holds the vault lock until it ends, so the wait for the lock is a
  // wait for it; shared mounts hold it together, and it cannot tell.
  const bool lock_held = [&] {
    auto lock = core::VaultLock::Acquire(*vault, core::LockMode::kShared);
    return !lock.ok() && lock.status().sys_errno() == EBUSY;
  }();
  const bool no_daemon_seen = !record.ok() && !holder && !lock_held;
  const bool ended = no_daemon_seen && DaemonEnded(mountpoint);
  if (const int rc = UnmountWhenFree(mountpoint, deadline, timeout_seconds); rc != 0) return rc;
  if (ended) {
    std::fprintf(stderr,
                 "sigilfs: the daemon of %s had ended (what it had not written back is lost); "
                 "its mount is cleared\n",
                 mountpoint.c_str());
    return 0;
  }
  if (no_daemon_seen) {
    std::fprintf(stderr,
                 "sigilfs: %s is unmounted, but its daemon cannot be waited for (%s): the vault "
                 "may not be free yet\n",
                 mountpoint.c_str(), record.status().message().c_str());
    return 1;
  }
  for (auto pause = std::chrono::milliseconds(1);;
       pause = std::min(pause * 2, std::chrono::milliseconds(100))) {
    auto lock = core::VaultLock::Acquire(*vault, core::LockMode::kShared);
    const bool free = lock.ok() || lock.status().sys_errno() != EBUSY;
    if (free && (!record.ok() || record->Ended()) && (!holder || holder->Ended())) return 0;
    if (std::chrono::steady_clock::now() > deadline) {
      std::optional<core::VaultLock::Process> daemon = holder;
      if (auto recorded = record.ok() ? record->Process() : std::nullopt) daemon = recorded;
      const std::string who =
          daemon ? "its daemon (process " + std::to_string(daemon->pid) + ")" : "its daemon";
      std::fprintf(stderr,
                   "sigilfs: %s is unmounted, but %s has not ended after %d s (it may still be "
                   "writing back; the vault is not free yet)\n",
                   mountpoint.c_str(), who.c_str(), timeout_seconds);
      return 1;
    }
    std::this_thread::sleep_for(pause);
  }
}

}  // namespace

void RegisterMountCommands(CLI::App& app, Action& action) {
  {
    auto a = std::make_shared<MountArgs>();
    auto* cmd = app.add_subcommand("mount", "Mount a vault's plaintext view on a directory");
    cmd->add_option("CIPHERDIR", a->dir, "The vault's cipher directory")->required();
    cmd->add_option("MOUNTPOINT", a->mountpoint, "Where the plaintext appears")->required();
    cmd->add_flag("-f,--foreground", a->foreground, "Stay in the foreground (log to stderr)");
    cmd->add_option(
        "-o", a->options,
        "Mount options: ro, noxattr (no extended attributes: faster small writes), noacl (no POSIX "
        "ACLs: extended attributes only), acl (the kernel checks permissions against ACLs, as it "
        "does with default_permissions or allow_other), nonempty (mount over a directory that "
        "holds "
        "entries, hiding them), allow_other, "
        "default_permissions, and other FUSE options; remount,ro or remount,rw on a mounted "
        "vault (root) switches it as `mount -o remount,ro` does");
    AddPassphraseOptions(*cmd, a->pass, "", "passphrase");
    cmd->add_flag("--shared", a->shared,
                  "Let other --shared mounts (on this host or others) serve the vault at the same "
                  "time: writes are stored before they return, each file's changes are "
                  "coordinated by locks on the cipher file, and other mounts' changes show on the "
                  "next open (close-to-open, as NFS); for vaults on NFS, sshfs or synced folders "
                  "(also -o shared)");
    cmd->add_option("--stats-file", a->stats_file,
                    "Also write the mount's figures (as `sigilfs stats --json` prints them) to "
                    "this file on SIGUSR1 and on unmount");
    cmd->add_option("--idle", a->idle,
                    "Unmount after this long without use and with no file open (90s, 10m, 2h)");
    cmd->add_option("--handle-cache", a->handle_cache,
                    "How many files and directories the kernel forgot stay known, so that file "
                    "handles (open_by_handle_at, NFS export) naming them still open "
                    "(default 32768; each takes about 0.7 KiB)");
    cmd->add_option("--readahead", a->readahead,
                    "The kernel's read-ahead for the mount in KiB, which bounds the size of "
                    "sequential read requests (default 2048; 0 keeps the kernel's 128; set only "
                    "when mounting as root)");
    cmd->add_option(
        "--transport", a->transport,
        "How the kernel hands requests to the daemon: uring (FUSE over io_uring, "
        "Linux 6.14+ with the fuse module's enable_uring on), dev (/dev/fuse), or auto "
        "(the default: io_uring where the kernel offers it); `sigilfs stats` shows which");
    cmd->footer(
        "From /etc/fstab: CIPHERDIR MOUNTPOINT fuse.sigilfs passfile=FILE[,OPTIONS] 0 0\n"
        "(also idle=, stats_file=, handle_cache=, readahead=, transport=, shared, noxattr, noacl, "
        "ro and FUSE "
        "options "
        "such as "
        "allow_other).");
    cmd->callback([&action, a] { action = [a] { return RunMount(*a); }; });
  }
  {
    auto mp = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("unmount", "Unmount a mounted vault (flushes everything)");
    auto timeout = std::make_shared<int>(60);
    cmd->add_option("MOUNTPOINT", *mp, "The mount point")->required();
    cmd->add_option("--timeout", *timeout,
                    "How long to wait for a busy mount to be let go and for the daemon to finish "
                    "writing back and end, in seconds (then exit 1)")
        ->default_val(60)
        ->check(CLI::Range(0, 86400));
    cmd->footer(
        "Returns once the daemon has ended: the vault and the disk under it are free. A mount in\n"
        "use (a process's open file or current directory there) is named with what holds it,\n"
        "and tried again until the timeout. A mount whose daemon has ended is cleared.");
    cmd->callback(
        [&action, mp, timeout] { action = [mp, timeout] { return RunUnmount(*mp, *timeout); }; });
  }
}

}  // namespace sigilfs::cli
