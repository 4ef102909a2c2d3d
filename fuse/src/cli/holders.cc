// What keeps a mount busy: a scan of /proc as `fuser -m` makes it, without a look at the mount.
#include "holders.h"

#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <system_error>
#include <utility>

namespace sigilfs::cli {
namespace {

namespace fs = std::filesystem;

// "major:minor", decimal as mountinfo gives it or hexadecimal as /proc/PID/maps does.
std::pair<unsigned, unsigned> DeviceNumbers(std::string_view text, int base) {
  unsigned major = 0, minor = 0;
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos) return {~0u, ~0u};
  const auto a = std::from_chars(text.data(), text.data() + colon, major, base);
  const auto b = std::from_chars(text.data() + colon + 1, text.data() + text.size(), minor, base);
  if (a.ec != std::errc() || b.ec != std::errc()) return {~0u, ~0u};
  return {major, minor};
}

// Whether absolute path `path` is `point` or lies below it.
bool Under(std::string path, const std::string& point) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
  return path == point || (point != "/" && path.starts_with(point + "/"));
}

// The target of symbolic link `link` (one of /proc/PID's), or "" (gone, or not ours to read).
std::string LinkTarget(const fs::path& link) {
  std::error_code ec;
  fs::path target = fs::read_symlink(link, ec);
  return ec ? std::string() : target.string();
}

// What process `dir` (/proc/PID) has on the mount; false if it cannot be looked into.
bool UsesOf(const fs::path& dir, const core::MountInfoEntry& mount,
            std::pair<unsigned, unsigned> device, std::vector<std::string>& uses) {
  const std::pair<const char*, const char*> links[] = {
      {"cwd", "current directory"}, {"root", "root directory"}, {"exe", "program"}};
  bool seen = false;
  for (const auto& [name, use] : links) {
    const std::string target = LinkTarget(dir / name);
    seen |= !target.empty();
    if (!target.empty() && Under(target, mount.mount_point)) uses.emplace_back(use);
  }
  size_t files = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir / "fdinfo", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    std::ifstream info(it->path());
    for (std::string line; std::getline(info, line);)
      if (line.starts_with("mnt_id:")) {
        std::istringstream value(line.substr(7));
        std::string id;
        if (value >> id && id == mount.id) ++files;
        break;
      }
  }
  if (files == 1) uses.emplace_back("open file");
  if (files > 1) uses.push_back(std::to_string(files) + " open files");
  std::ifstream maps(dir / "maps");
  for (std::string line; std::getline(maps, line);) {
    // address perms offset dev inode path
    std::istringstream fields(line);
    std::string address, perms, offset, dev;
    if (fields >> address >> perms >> offset >> dev && DeviceNumbers(dev, 16) == device) {
      uses.emplace_back("mapped file");
      break;
    }
  }
  return seen;
}

// "a", "a and b", "a, b and c".
std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i)
    out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

}  // namespace

MountHolders HoldersOf(const core::MountInfoEntry& mount) {
  MountHolders holders;
  const std::pair<unsigned, unsigned> device = DeviceNumbers(mount.device, 10);
  const std::string self = std::to_string(::getpid());
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos || name == self)
      continue;
    MountHolder holder;
    if (!UsesOf(it->path(), mount, device, holder.uses) || holder.uses.empty()) continue;
    holder.pid = static_cast<pid_t>(std::stol(name));
    std::ifstream comm(it->path() / "comm");
    std::getline(comm, holder.command);
    holders.processes.push_back(std::move(holder));
  }
  for (const core::MountInfoEntry& m : core::ReadMountInfo())
    if (m.mount_point != mount.mount_point && Under(m.mount_point, mount.mount_point))
      holders.mounts.push_back(m.mount_point);
  return holders;
}

std::string DescribeHolders(const MountHolders& holders) {
  std::vector<std::string> parts;
  for (const MountHolder& p : holders.processes)
    parts.push_back(std::to_string(p.pid) + " (" + p.command + ": " + Join(p.uses) + ")");
  std::string text;
  if (!parts.empty()) text = (parts.size() == 1 ? "process " : "processes ") + Join(parts);
  if (!holders.mounts.empty()) {
    std::vector<std::string> mounts;
    for (const std::string& m : holders.mounts) mounts.push_back("the mount on " + m);
    text += (text.empty() ? "" : " and ") + Join(mounts);
  }
  if (!text.empty()) return text;
  // Root sees every process: what is left is the kernel's own use.
  return ::geteuid() == 0 ? "something that is no process (a loop device, an NFS export?)"
                          : "a process this user cannot see";
}

}  // namespace sigilfs::cli
