// The table of -o options each command takes, and the parser that sorts them by it.
#include "options.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

namespace sigilfs::fuse {
namespace {

enum class Role : uint8_t {
  kNo,       // not taken: refused as unknown
  kOwn,      // sigilfs's own, named in the mount's refusal of an unknown option
  kSwitch,   // sigilfs's own, not named there: it changes what the command does
  kIgnored,  // taken, and changes nothing
  kKernel,   // passed on to the kernel mount
  kSet,      // refused: sigilfs sets it itself
};

// Words: a flag, a key with its '=' (the value follows it), or a prefix ending in '*'. A word
// of sigilfs's own or of those it sets also matches bare ("passfile" as "passfile=").
struct Rule {
  std::string_view words;
  Role mount;
  Role view;
};

constexpr Rule kRules[] = {
    // mount(8) passes rw unless told ro: the view is read only either way.
    {"ro rw", Role::kOwn, Role::kIgnored},
    {"noxattr acl noacl", Role::kOwn, Role::kNo},
    {"nonempty", Role::kOwn, Role::kOwn},
    {"shared", Role::kOwn, Role::kNo},
    {"passfile=", Role::kOwn, Role::kOwn},
    {"stats_file= idle= handle_cache= readahead= transport=", Role::kOwn, Role::kNo},
    {"exclude_from=", Role::kNo, Role::kOwn},  // /etc/fstab's form of --exclude-from
    // `mount -o remount,...` through mount.fuse3, and an /etc/fstab line of an encrypted view.
    {"remount", Role::kSwitch, Role::kNo},
    {"reverse", Role::kSwitch, Role::kIgnored},
    {"xattr", Role::kIgnored, Role::kNo},  // the default
    // The mount table's source and type: the cipher directory, as fuse.sigilfs.
    {"fsname= subtype=", Role::kSet, Role::kNo},
    // The kernel's mount flags, FUSE's mount and session options, and what an /etc/fstab line
    // may carry that mount.fuse3 leaves in. The view takes who may look, and the access-time
    // and permission options mount(8) and /etc/fstab add.
    {"suid nosuid dev nodev exec noexec atime noatime diratime nodiratime relatime strictatime "
     "allow_other allow_root default_permissions auto noauto nofail user users _netdev comment= "
     "x-*",
     Role::kKernel, Role::kKernel},
    {"async sync dirsync norelatime nostrictatime lazytime nolazytime symfollow nosymfollow "
     "auto_unmount blkdev debug sync_read async_read writeback_cache no_writeback_cache defaults "
     "owner group max_read= blksize= max_write= max_readahead= max_background= "
     "congestion_threshold= time_gran= context= fscontext= defcontext= rootcontext= user= "
     "user_id= group_id= rootmode=",
     Role::kKernel, Role::kNo},
    {"nouser", Role::kNo, Role::kKernel},
};

// Calls `f(word)` for each word of `words`, until it returns true; whether one did.
template <typename F>
bool AnyWord(std::string_view words, F f) {
  while (!words.empty()) {
    const size_t end = std::min(words.find(' '), words.size());
    if (end > 0 && f(words.substr(0, end))) return true;
    words.remove_prefix(std::min(end + 1, words.size()));
  }
  return false;
}

// What `opt` is to `command`: its role, its name (a key without '='), its value.
struct Match {
  Role role = Role::kNo;
  std::string name;
  std::string value;
};
Match Find(OptionsFor command, const std::string& opt) {
  Match m;
  for (const Rule& rule : kRules) {
    const Role role = command == OptionsFor::kMount ? rule.mount : rule.view;
    if (role == Role::kNo) continue;
    const bool bare_keys = role != Role::kKernel && role != Role::kIgnored;
    const bool found = AnyWord(rule.words, [&](std::string_view w) {
      if (w.back() == '*') return opt.starts_with(w.substr(0, w.size() - 1));
      if (w.back() != '=') return opt == w;
      const std::string_view key = w.substr(0, w.size() - 1);
      if (opt.starts_with(w)) {
        m.value = opt.substr(w.size());
      } else if (!bare_keys || opt != key) {
        return false;
      }
      m.name = key;
      return true;
    });
    if (found) {
      m.role = role;
      if (m.name.empty()) m.name = opt;
      return m;
    }
  }
  return m;
}

}  // namespace

GivenOptions GivenOptions::Parse(OptionsFor command, const std::vector<std::string>& groups) {
  GivenOptions o;
  o.command_ = command;
  for (const std::string& group : groups) {
    std::stringstream in(group);
    for (std::string opt; std::getline(in, opt, ',');) {
      if (opt.empty()) continue;
      Match m = Find(command, opt);
      switch (m.role) {
        case Role::kOwn:
        case Role::kSwitch:
          o.own_.emplace_back(std::move(m.name), std::move(m.value));
          break;
        case Role::kKernel:
          o.kernel_.push_back(opt);
          break;
        case Role::kSet:
          o.sigilfs_sets_ = opt;
          break;
        case Role::kIgnored:
          break;
        case Role::kNo:
          if (o.unknown_.empty()) o.unknown_ = opt;
          break;
      }
    }
  }
  return o;
}

bool GivenOptions::Has(std::string_view flag) const {
  return std::any_of(own_.begin(), own_.end(), [&](const auto& o) { return o.first == flag; });
}

std::optional<std::string> GivenOptions::LastOf(
    std::initializer_list<std::string_view> flags) const {
  for (auto it = own_.rbegin(); it != own_.rend(); ++it)
    if (std::find(flags.begin(), flags.end(), it->first) != flags.end()) return it->first;
  return std::nullopt;
}

std::optional<std::string> GivenOptions::Value(std::string_view key) const {
  std::vector<std::string> all = Values(key);
  if (all.empty()) return std::nullopt;
  return std::move(all.back());
}

std::vector<std::string> GivenOptions::Values(std::string_view key) const {
  std::vector<std::string> all;
  for (const auto& [name, value] : own_)
    if (name == key) all.push_back(value);
  return all;
}

std::string GivenOptions::Refusal() const {
  if (command_ == OptionsFor::kView) {
    if (unknown_.empty()) return "";
    return "unknown option '" + unknown_ +
           "' for the encrypted view (it is read only; it takes passfile=, exclude_from=, "
           "nonempty, allow_other, allow_root and the mount table's access options)";
  }
  if (!sigilfs_sets_.empty())
    return "the mount option '" + sigilfs_sets_ +
           "' is sigilfs's own to set (the mount table shows the cipher directory, as "
           "fuse.sigilfs)";
  if (unknown_.empty()) return "";
  std::string own;
  for (const Rule& rule : kRules)
    if (rule.mount == Role::kOwn)
      AnyWord(rule.words, [&own](std::string_view w) {
        own.append(own.empty() ? "" : ", ").append(w);
        return false;
      });
  return "unknown mount option '" + unknown_ + "' (sigilfs's own: " + own +
         "; and FUSE's, as in mount.fuse3(8))";
}

}  // namespace sigilfs::fuse
