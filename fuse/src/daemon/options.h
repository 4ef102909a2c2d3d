// The -o options of the mount and of the reverse view: one table of what each takes, one parser.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sigilfs::fuse {

// Which command's options: `sigilfs mount`'s, or `sigilfs reverse`'s (also reached from an
// /etc/fstab line with -o reverse).
enum class OptionsFor { kMount, kView };

// -o values as given on a command line or an /etc/fstab line (through mount.fuse3), sorted by
// the table in options.cc: sigilfs's own, what goes on to the kernel mount, and what is refused.
// Refused options are found before the passphrase is asked for, and named in one line.
class GivenOptions {
 public:
  // `groups`: the -o values, each possibly comma-separated.
  static GivenOptions Parse(OptionsFor command, const std::vector<std::string>& groups);

  // Whether an own flag (nonempty, shared, ...) was given.
  bool Has(std::string_view flag) const;
  // Which of `flags` was given last (of ro and rw, as with mount(8), the last counts), if any.
  std::optional<std::string> LastOf(std::initializer_list<std::string_view> flags) const;
  // The value of the last `key=` given (a key given bare has the empty value); all of them.
  std::optional<std::string> Value(std::string_view key) const;
  std::vector<std::string> Values(std::string_view key) const;
  // The options for the kernel mount, in the order given.
  const std::vector<std::string>& kernel() const { return kernel_; }
  // Why the options are refused (after "sigilfs: "; the command exits 2), or empty.
  std::string Refusal() const;

 private:
  OptionsFor command_ = OptionsFor::kMount;
  std::vector<std::pair<std::string, std::string>> own_;  // name (a key without '='), value
  std::vector<std::string> kernel_;
  std::string unknown_;       // the first option the command does not take
  std::string sigilfs_sets_;  // the last of those sigilfs sets itself (fsname=, subtype=)
};

}  // namespace sigilfs::fuse
