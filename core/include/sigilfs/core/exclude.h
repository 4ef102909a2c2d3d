// Exclusion rules in the syntax of .gitignore, for what a backup leaves out (reverse mode's
// --exclude and --exclude-from, and verify-backup, which must leave out the same).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sigilfs/status.h"

namespace sigilfs::core {

// Patterns, each as a line of .gitignore:
// - blank lines and lines starting with '#' are no patterns; trailing spaces are dropped;
// - a leading '!' takes the entries the pattern matches back in (not below an excluded
//   directory: what is inside one is never looked at);
// - a trailing '/' matches directories only;
// - a pattern with a '/' elsewhere is matched against the whole path below the root (a
//   leading '/' only anchors it there); one without is matched against the entry's name, at
//   any depth;
// - '*' matches any run of characters but '/', '?' one, "[a-z]" and "[!a-z]" a class, '\'
//   escapes; "**/" matches any number of directories, a trailing "/**" everything inside (a
//   "**" that is not a whole component is a '*');
// The last pattern that matches an entry decides. Matching takes time in proportion to the
// pattern's length times the path's, whatever the pattern.
// Thread-safety: immutable once parsed; safe for concurrent access.
class ExcludeRules {
 public:
  // kInvalidArgument for a pattern that matches nothing by construction ("/", "!", one ending
  // in a backslash that escapes nothing).
  static Result<ExcludeRules> Parse(const std::vector<std::string>& lines);

  bool empty() const { return rules_.empty(); }
  // Whether the entry at `path` ("a/b/c", below the root) is left out; `is_dir` tells
  // directory-only patterns where they apply. Its parent directories are not looked at.
  bool Excluded(std::string_view path, bool is_dir) const;

 private:
  struct Rule {
    std::string pattern;
    bool negate = false;
    bool dir_only = false;
    bool anchored = false;  // against the whole path, not the name
  };
  std::vector<Rule> rules_;
};

}  // namespace sigilfs::core
