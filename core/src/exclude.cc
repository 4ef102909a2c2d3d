// .gitignore-style exclusion rules: parsing, and a glob matcher with '**'.
#include "sigilfs/core/exclude.h"

namespace sigilfs::core {
namespace {

// Whether character class `p` (after its '[') matches `c`; `p` is left after the ']'. A class
// with no closing ']' is the literal '[' (the caller's fallback), reported by returning false in
// `closed`.
bool ClassMatches(std::string_view& p, char c, bool& closed) {
  size_t i = 0;
  bool negate = false;
  if (i < p.size() && (p[i] == '!' || p[i] == '^')) {
    negate = true;
    ++i;
  }
  bool matched = false;
  bool first = true;
  for (; i < p.size() && (first || p[i] != ']'); first = false) {
    char lo = p[i];
    if (lo == '\\' && i + 1 < p.size()) lo = p[++i];
    char hi = lo;
    if (i + 2 < p.size() && p[i + 1] == '-' && p[i + 2] != ']') {
      hi = p[i + 2];
      if (hi == '\\' && i + 3 < p.size()) hi = p[++i + 2];
      i += 2;
    }
    if (c >= lo && c <= hi) matched = true;
    ++i;
  }
  closed = i < p.size();
  if (!closed) return false;
  p.remove_prefix(i + 1);
  return matched != negate;
}

// Glob `p` against all of `s` ('/' separates names; only "**" crosses it).
bool Glob(std::string_view p, std::string_view s) {
  while (!p.empty()) {
    if (p.starts_with("**")) {
      p.remove_prefix(2);
      if (p.starts_with('/')) {  // "**/": zero or more whole directories
        p.remove_prefix(1);
        for (size_t i = 0; i <= s.size(); ++i)
          if ((i == 0 || s[i - 1] == '/') && Glob(p, s.substr(i))) return true;
        return false;
      }
      for (size_t i = 0; i <= s.size(); ++i)  // anything, '/' included
        if (Glob(p, s.substr(i))) return true;
      return false;
    }
    const char c = p.front();
    if (c == '*') {
      p.remove_prefix(1);
      for (size_t i = 0; i <= s.size(); ++i) {
        if (Glob(p, s.substr(i))) return true;
        if (i < s.size() && s[i] == '/') break;
      }
      return false;
    }
    if (s.empty()) return false;
    if (c == '?') {
      if (s.front() == '/') return false;
      p.remove_prefix(1);
    } else if (c == '[') {
      std::string_view rest = p.substr(1);
      bool closed = false;
      const bool ok = ClassMatches(rest, s.front(), closed);
      if (closed) {
        if (!ok || s.front() == '/') return false;
        p = rest;
      } else {  // no closing ']': a literal '['
        if (s.front() != '[') return false;
        p.remove_prefix(1);
      }
    } else {
      char want = c;
      if (c == '\\' && p.size() > 1) {
        want = p[1];
        p.remove_prefix(1);
      }
      if (s.front() != want) return false;
      p.remove_prefix(1);
    }
    s.remove_prefix(1);
  }
  return s.empty();
}

}  // namespace

Result<ExcludeRules> ExcludeRules::Parse(const std::vector<std::string>& lines) {
  ExcludeRules out;
  for (const std::string& line : lines) {
    std::string_view p = line;
    // Trailing spaces go, unless escaped.
    while (!p.empty() && p.back() == ' ' && !(p.size() > 1 && p[p.size() - 2] == '\\'))
      p.remove_suffix(1);
    if (p.empty() || p.front() == '#') continue;
    Rule r;
    if (p.front() == '!') {
      r.negate = true;
      p.remove_prefix(1);
    } else if (p.starts_with("\\!") || p.starts_with("\\#")) {
      p.remove_prefix(1);
    }
    if (p.ends_with('/')) {
      r.dir_only = true;
      p.remove_suffix(1);
    }
    if (p.starts_with('/')) {
      r.anchored = true;
      p.remove_prefix(1);
    }
    if (p.find('/') != std::string_view::npos) r.anchored = true;
    if (p.empty())
      return Status(Code::kInvalidArgument, "exclude pattern '" + line + "' matches nothing");
    r.pattern = std::string(p);
    out.rules_.push_back(std::move(r));
  }
  return out;
}

bool ExcludeRules::Excluded(std::string_view path, bool is_dir) const {
  const size_t slash = path.rfind('/');
  const std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
  bool excluded = false;
  for (const Rule& r : rules_) {
    if (r.dir_only && !is_dir) continue;
    if (r.negate != excluded) continue;  // it could not change the outcome
    if (Glob(r.pattern, r.anchored ? path : name)) excluded = !r.negate;
  }
  return excluded;
}

}  // namespace sigilfs::core
