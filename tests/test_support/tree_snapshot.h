// Test helper: a whole tree as text, one line per entry, for comparing two trees (a source and
// its copy through a vault) with one EXPECT_EQ that names every difference.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sigilfs/crypt/bytes.h"
#include "sigilfs/crypt/encoding.h"
#include "test_support/process.h"

namespace sigilfs::test {

namespace snapshot_detail {

// FNV-1a: contents compare by a short digest, so a mismatch prints readably.
inline std::string Digest(const std::string& data) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : data) h = (h ^ c) * 1099511628211ull;
  return std::to_string(data.size()) + ":" + std::to_string(h);
}

}  // namespace snapshot_detail

// Every entry under `root` ("." is root itself): type and mode, owner, size, mtime, contents,
// link target, user.* attributes, and which other name it shares its inode with.
inline std::map<std::string, std::string> Snapshot(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  using snapshot_detail::Digest;
  std::map<std::string, std::string> out;
  std::map<std::pair<dev_t, ino_t>, std::string> first_name;
  std::vector<fs::path> paths = {root};
  for (const auto& e : fs::recursive_directory_iterator(root)) paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) {
      ADD_FAILURE() << "lstat " << p;
      continue;
    }
    std::string v = "mode=" + std::to_string(st.st_mode) + " owner=" + std::to_string(st.st_uid) +
                    ":" + std::to_string(st.st_gid) +
                    " mtime=" + std::to_string(st.st_mtim.tv_sec) + "." +
                    std::to_string(st.st_mtim.tv_nsec);
    if (!S_ISDIR(st.st_mode))
      v += " size=" + std::to_string(st.st_size) + " nlink=" + std::to_string(st.st_nlink);
    if (S_ISREG(st.st_mode)) v += " data=" + Digest(ReadAll(p));
    if (S_ISLNK(st.st_mode)) v += " -> " + fs::read_symlink(p).string();
    if (!S_ISLNK(st.st_mode)) {
      std::string names(65536, '\0');
      const ssize_t n = ::llistxattr(p.c_str(), names.data(), names.size());
      names.resize(n < 0 ? 0 : static_cast<size_t>(n));
      std::set<std::string> xattrs;
      for (size_t at = 0; at < names.size();) {
        const std::string name = names.c_str() + at;
        at += name.size() + 1;
        if (name.rfind("user.", 0) != 0) continue;
        std::string value(65536, '\0');
        const ssize_t got = ::lgetxattr(p.c_str(), name.c_str(), value.data(), value.size());
        value.resize(got < 0 ? 0 : static_cast<size_t>(got));
        xattrs.insert(name + "=" + crypt::HexEncode(AsBytes(value)));
      }
      for (const std::string& x : xattrs) v += " " + x;
    }
    // Lexical: fs::relative() resolves symlinks, which would file a link under its target.
    const std::string rel = p == root ? "." : p.lexically_relative(root).string();
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      auto [it, fresh] = first_name.emplace(std::make_pair(st.st_dev, st.st_ino), rel);
      if (!fresh) v += " same-inode-as=" + it->second;
    }
    out[rel] = v;
  }
  return out;
}

}  // namespace sigilfs::test
