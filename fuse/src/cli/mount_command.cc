// `sigilfs mount` and `sigilfs unmount`.
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <sstream>

#include "../mount/daemon.h"
#include "commands.h"
#include "sigilfs/core/vault.h"
#include "sigilfs/core/volume.h"

namespace sigilfs::cli {
namespace {

struct MountArgs {
  std::string dir;
  std::string mountpoint;
  bool foreground = false;
  std::vector<std::string> options;  // -o values, each possibly comma-separated
  fuse::PassphraseSource pass;
};

int RunMount(const MountArgs& a) {
  fuse::DaemonOptions d;
  d.mountpoint = a.mountpoint;
  d.foreground = a.foreground;
  for (const std::string& group : a.options) {
    std::stringstream in(group);
    std::string opt;
    while (std::getline(in, opt, ',')) {
      if (opt == "ro")
        d.read_only = true;
      else if (opt == "noxattr")
        d.xattrs = false;
      else if (opt == "rw" || opt == "xattr" || opt.empty())
        continue;
      else
        d.fuse_options.push_back(opt);
    }
  }
  struct stat st;
  if (::stat(a.mountpoint.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Fail(Status(Code::kNotFound, "mount point " + a.mountpoint + " is not a directory"));
  // Unlock before daemonizing: the passphrase prompt needs the terminal.
  auto config = core::Vault::LoadConfig(a.dir);
  if (!config.ok()) return Fail(config.status());
  auto pass = fuse::ReadPassphrase(a.pass, "Passphrase", fuse::PromptMode::kExisting);
  if (!pass.ok()) return Fail(pass.status());
  auto vault = core::Vault::Unlock(a.dir, pass->span());
  if (!vault.ok()) return Fail(vault.status());
  auto volume = core::Volume::Open(std::move(vault).value(), core::VolumeOptions{});
  if (!volume.ok()) return Fail(volume.status());
  return fuse::RunDaemon(std::move(volume).value(), d);
}

int RunUnmount(const std::string& mountpoint) {
  execlp("fusermount3", "fusermount3", "-u", mountpoint.c_str(), static_cast<char*>(nullptr));
  return Fail(Status::FromErrno(errno, "run fusermount3"));
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
        "Mount options: ro, noxattr (no extended attributes: faster small writes), allow_other, "
        "default_permissions, and other FUSE options");
    AddPassphraseOptions(*cmd, a->pass, "", "passphrase");
    cmd->callback([&action, a] { action = [a] { return RunMount(*a); }; });
  }
  {
    auto mp = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("unmount", "Unmount a mounted vault (flushes everything)");
    cmd->add_option("MOUNTPOINT", *mp, "The mount point")->required();
    cmd->callback([&action, mp] { action = [mp] { return RunUnmount(*mp); }; });
  }
}

}  // namespace sigilfs::cli
