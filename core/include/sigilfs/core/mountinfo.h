// /proc/self/mountinfo, parsed in one place for the mount, the CLI, the vault lock, the PAM
// module and the tests (header-only, as the module links none of sigilfs' libraries).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace sigilfs::core {

// Undoes the kernel's octal escapes (space, tab, newline, backslash) in a mountinfo field.
inline std::string UnescapeMountField(const std::string& field) {
  std::string out;
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size() && field[i + 1] >= '0' && field[i + 1] <= '3') {
      out += static_cast<char>((field[i + 1] - '0') * 64 + (field[i + 2] - '0') * 8 +
                               (field[i + 3] - '0'));
      i += 3;
    } else {
      out += field[i];
    }
  }
  return out;
}

// One mount, its paths unescaped.
struct MountInfoEntry {
  std::string device;         // "major:minor"
  std::string mount_point;    // "/home/alice"
  std::string options;        // per-mount: "rw,nosuid,nodev,relatime"
  std::string type;           // "fuse.sigilfs"
  std::string source;         // "/home/.alice.sigilfs"
  std::string super_options;  // "rw,user_id=1000,group_id=1000,default_permissions"
  std::string id;             // "36": the mount's id, as /proc/PID/fdinfo's mnt_id names it
};

// One line: id parent major:minor root mount-point options [optional fields...] - type source
// super-options. nullopt if it does not have that shape.
inline std::optional<MountInfoEntry> ParseMountInfoLine(const std::string& line) {
  std::istringstream head(line);
  std::string parent, root;
  MountInfoEntry e;
  if (!(head >> e.id >> parent >> e.device >> root >> e.mount_point >> e.options))
    return std::nullopt;
  const size_t dash = line.find(" - ");
  if (dash == std::string::npos) return std::nullopt;
  std::istringstream tail(line.substr(dash + 3));
  if (!(tail >> e.type >> e.source)) return std::nullopt;
  tail >> e.super_options;
  e.mount_point = UnescapeMountField(e.mount_point);
  e.source = UnescapeMountField(e.source);
  return e;
}

// Every mount the table lists, in mount order (so the last on a mount point is the one on top).
inline std::vector<MountInfoEntry> ReadMountInfo(const std::string& path = "/proc/self/mountinfo") {
  std::vector<MountInfoEntry> mounts;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    if (auto e = ParseMountInfoLine(line)) mounts.push_back(std::move(*e));
  return mounts;
}

// The forms in which the mount table may list mount point `mountpoint`: absolute and normal,
// and with the symlinks of its parent resolved (the table resolves them). Not the mount point's
// own: a look at it would wait on a daemon that does not answer.
inline std::pair<std::string, std::string> MountTableForms(const std::string& mountpoint) {
  std::error_code ec;
  std::string point = std::filesystem::absolute(mountpoint, ec).lexically_normal().string();
  while (point.size() > 1 && point.back() == '/') point.pop_back();
  std::filesystem::path p(point);
  if (!p.has_parent_path() || p == p.root_path()) return {point, point};
  // A symlink to the mount point: read, not followed (readlink(2) asks nothing of a mount's
  // root; std::filesystem::read_symlink would stat it first).
  char target[4096];
  if (const ssize_t n = ::readlink(point.c_str(), target, sizeof target);
      n > 0 && static_cast<size_t>(n) < sizeof target)
    p = (p.parent_path() / std::string(target, static_cast<size_t>(n))).lexically_normal();
  std::filesystem::path parent = std::filesystem::canonical(p.parent_path(), ec);
  if (ec) return {point, point};
  return {point, (parent / p.filename()).string()};
}

// The cipher directory a sigilfs mount serves (its source: the directory's absolute path, or
// "sigilfs:" and the path as given, for mounts made by versions before 0.2), or nullopt for a
// mount of another type.
inline std::optional<std::string> SigilfsVaultOf(const MountInfoEntry& m) {
  if (m.type != "fuse.sigilfs") return std::nullopt;
  constexpr std::string_view kOldPrefix = "sigilfs:";
  if (m.source.rfind(kOldPrefix, 0) == 0) return m.source.substr(kOldPrefix.size());
  return m.source;
}

}  // namespace sigilfs::core
