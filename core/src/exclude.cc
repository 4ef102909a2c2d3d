// .gitignore-style exclusion rules: parsing, and a glob matcher with '**'.
#include "sigilfs/core/exclude.h"

#include <cstdint>

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

// Glob `p` against all of `s` ('/' separates names; only a "**" that is a whole component
// crosses it: "**/" at the start, "/**/" inside, "/**" at the end; any other "**" is a '*').
// Memoised on (pattern position, text position), so a pattern of many stars costs at most
// |p| x |s| steps, never the exponential backtracking of a naive matcher.
class Glob {
 public:
  Glob(std::string_view p, std::string_view s)
      : p_(p), s_(s), memo_((p.size() + 1) * (s.size() + 1), kUnknown) {}
  bool Match() { return At(0, 0); }

 private:
  static constexpr uint8_t kUnknown = 2;

  bool At(size_t pi, size_t si) {
    uint8_t& m = memo_[pi * (s_.size() + 1) + si];
    if (m == kUnknown) m = Compute(pi, si) ? 1 : 0;
    return m == 1;
  }

  // A "**" at `pi` that is a whole component of the pattern.
  bool DoubleStar(size_t pi) const {
    return p_.substr(pi, 2) == "**" && (pi == 0 || p_[pi - 1] == '/') &&
           (pi + 2 == p_.size() || p_[pi + 2] == '/');
  }

  bool Compute(size_t pi, size_t si) {
    if (pi == p_.size()) return si == s_.size();
    if (DoubleStar(pi)) {
      if (pi + 2 < p_.size()) {  // "**/": zero or more whole directories
        for (size_t i = si; i <= s_.size(); ++i)
          if ((i == si || s_[i - 1] == '/') && At(pi + 3, i)) return true;
        return false;
      }
      return true;  // a trailing "**": everything
    }
    const char c = p_[pi];
    if (c == '*') {
      size_t next = pi + 1;
      while (next < p_.size() && p_[next] == '*') ++next;  // "***" is one star
      for (size_t i = si; i <= s_.size(); ++i) {
        if (At(next, i)) return true;
        if (i < s_.size() && s_[i] == '/') break;
      }
      return false;
    }
    if (si == s_.size()) return false;
    if (c == '?') return s_[si] != '/' && At(pi + 1, si + 1);
    if (c == '[') {
      std::string_view rest = p_.substr(pi + 1);
      bool closed = false;
      const bool ok = ClassMatches(rest, s_[si], closed);
      if (!closed) return s_[si] == '[' && At(pi + 1, si + 1);  // no ']': a literal '['
      return ok && s_[si] != '/' && At(p_.size() - rest.size(), si + 1);
    }
    if (c == '\\' && pi + 1 < p_.size()) return s_[si] == p_[pi + 1] && At(pi + 2, si + 1);
    return s_[si] == c && At(pi + 1, si + 1);
  }

  std::string_view p_, s_;
  std::vector<uint8_t> memo_;
};

// Whether `p` ends with a backslash that escapes nothing: such a pattern matches nothing, as in
// git.
bool DanglingEscape(std::string_view p) {
  size_t n = 0;
  while (n < p.size() && p[p.size() - 1 - n] == '\\') ++n;
  return n % 2 == 1;
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
    if (p.empty() || DanglingEscape(p))
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
    if (Glob(r.pattern, r.anchored ? path : name).Match()) excluded = !r.negate;
  }
  return excluded;
}

}  // namespace sigilfs::core
