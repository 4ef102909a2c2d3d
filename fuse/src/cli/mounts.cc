// The mounts the mount table shows, and their daemons asked through their records.
#include "mounts.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <utility>

#include "sigilfs/core/vault_lock.h"

namespace sigilfs::cli {
namespace {

// The mode the vault's lock shows to a reader: an exclusive holder keeps a shared lock out;
// shared mounts let one be had beside them. Empty where the lock file cannot be opened.
std::string ModeFromLock(const std::string& dir) {
  auto lock = core::VaultLock::Acquire(dir, core::LockMode::kShared);
  if (!lock.ok()) return lock.status().sys_errno() == EBUSY ? "exclusive" : "";
  return lock->held() ? "shared" : "";
}

// "POINT (exclusive, process 1234)": one mount of a vault and its mode, as its daemon says, or
// as the vault's lock shows where the daemon cannot be asked.
std::string DescribeMount(const core::MountInfoEntry& m, const std::string& dir) {
  const DaemonAnswer answer = AskDaemon(m, std::chrono::seconds(2));
  if (answer.state == DaemonAnswer::State::kEnded)
    return m.mount_point + " (its daemon has ended: `sigilfs unmount " + m.mount_point +
           "` clears it)";
  if (answer.state == DaemonAnswer::State::kAnswered) {
    const nlohmann::json stats = nlohmann::json::parse(answer.stats, nullptr, false);
    const auto shared = stats.find("shared");
    const auto pid = stats.find("pid");
    const bool is_shared = shared != stats.end() && shared->is_boolean() && *shared;
    std::string text = m.mount_point + " (" + (is_shared ? "shared" : "exclusive");
    if (pid != stats.end() && pid->is_number_integer())
      text += ", process " + std::to_string(pid->get<int64_t>());
    return text + ")";
  }
  const std::string mode = ModeFromLock(dir);
  return m.mount_point + " (" +
         (mode.empty() ? "mode not known: its daemon cannot be asked" : mode) + ")";
}

}  // namespace

std::optional<core::MountInfoEntry> MountOn(const std::string& mountpoint) {
  const auto [point, resolved] = core::MountTableForms(mountpoint);
  std::optional<core::MountInfoEntry> found;
  for (core::MountInfoEntry& m : core::ReadMountInfo())
    if (m.mount_point == point || m.mount_point == resolved) found = std::move(m);
  return found;
}

std::optional<uid_t> MountUser(const core::MountInfoEntry& m) {
  std::istringstream options(m.super_options);
  for (std::string option; std::getline(options, option, ',');)
    if (option.starts_with("user_id=")) {
      uid_t uid = 0;
      const auto [end, ec] = std::from_chars(option.data() + 8, option.data() + option.size(), uid);
      if (ec == std::errc() && end == option.data() + option.size()) return uid;
    }
  return std::nullopt;
}

Result<fuse::RecordedDaemon> RecordOf(const std::string& mountpoint) {
  const auto mount = MountOn(mountpoint);
  if (!mount) return Status(Code::kNotFound, "it is not in the mount table", ENOENT);
  const auto user = MountUser(*mount);
  if (!user) return Status(Code::kNotFound, "the mount names no user_id", ENOENT);
  return fuse::RecordedDaemon::Find(mount->device, *user);
}

DaemonAnswer AskDaemon(const core::MountInfoEntry& m, std::chrono::milliseconds timeout) {
  DaemonAnswer a;
  const std::string& point = m.mount_point;
  const auto user = MountUser(m);
  if (!user) {
    a.why = point + ": the mount names no user_id";
    return a;
  }
  // Another user's daemon would not be reached (its record is in that user's directory), and
  // should it be, its answer would be that user's word about that user's mount.
  if (const uid_t me = ::geteuid(); me != 0 && me != *user) {
    a.why = point + " is a mount of uid " + std::to_string(*user) +
            ": only that user or root may ask its daemon";
    return a;
  }
  auto record = fuse::RecordedDaemon::Find(m.device, *user);
  if (!record.ok()) {
    if (record.status().code() != Code::kNotFound) {
      a.why = point + ": " + record.status().message();
      return a;
    }
    // No daemon holds a record. An exclusive mount made where its user had no runtime directory
    // keeps none, while its daemon holds the vault's lock and is named in it.
    const auto vault = core::SigilfsVaultOf(m);
    if (const auto holder = vault ? core::VaultLock::HolderOf(*vault) : std::nullopt) {
      a.why = point + ": its daemon (process " + std::to_string(holder->pid) +
              ") keeps no mount record to be asked through (" + record.status().message() + ")";
      return a;
    }
    a.state = DaemonAnswer::State::kEnded;
    a.why =
        point + ": its daemon has ended; `sigilfs unmount " + point + "` clears the mount it left";
    return a;
  }
  auto text = record->Ask(timeout);
  if (!text.ok()) {
    a.why = point + ": " + text.status().message();
    return a;
  }
  const auto daemon = record->Process();
  const std::string who =
      daemon ? "its daemon (process " + std::to_string(daemon->pid) + ")" : "its daemon";
  const nlohmann::json stats = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!stats.is_object()) {
    a.why = point + ": " + who + " answered with something other than its stats";
    return a;
  }
  // Sent by the process the record names (its socket came with the record).
  const auto pid = stats.find("pid");
  if (daemon &&
      (pid == stats.end() || !pid->is_number_integer() || pid->get<int64_t>() != daemon->pid)) {
    a.why = point + ": the answer did not come from " + who + ": not believed";
    return a;
  }
  a.state = DaemonAnswer::State::kAnswered;
  a.stats = std::move(text).value();
  return a;
}

std::vector<std::string> MountsOfVault(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path vault = std::filesystem::canonical(dir, ec);
  if (ec) vault = std::filesystem::absolute(dir, ec).lexically_normal();
  std::vector<std::string> lines;
  for (const core::MountInfoEntry& m : core::ReadMountInfo())
    if (core::SigilfsVaultOf(m) == vault.string()) lines.push_back(DescribeMount(m, dir));
  return lines;
}

}  // namespace sigilfs::cli
