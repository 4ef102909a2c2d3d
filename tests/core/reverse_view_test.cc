// Reverse mode's view (core/reverse.h) without FUSE: a copy of the view is a vault of the plain
// tree, the view is the same bytes every time, changes show as few units, and it takes no writes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "sigilfs/core/acl.h"
#include "sigilfs/core/reverse.h"
#include "sigilfs/core/transfer.h"
#include "sigilfs/core/tree.h"
#include "test_support/forwarding_backing_dir.h"
#include "test_support/pattern.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

namespace fs = std::filesystem;

ByteSpan Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

void WriteFile(const fs::path& p, const std::vector<uint8_t>& data) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// Everything a store holds below `dir`, as bytes: contents, targets, attributes, kinds, modes,
// times and which names share an inode; what a backup of it would copy.
void Snapshot(BackingDir& dir, const std::string& prefix, std::map<std::string, std::string>& out) {
  std::vector<std::string> names;
  ASSERT_TRUE(dir.List(0,
                       [&](const BackingEntry& e) {
                         names.push_back(e.name);
                         return true;
                       })
                  .ok());
  for (const std::string& name : names) {
    const std::string path = prefix + name;
    struct stat st = *dir.Stat(name);
    std::string text = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                       std::to_string(st.st_mtim.tv_sec) + " " + std::to_string(st.st_ino);
    if (S_ISREG(st.st_mode)) {
      auto file = std::move(dir.OpenFile(name, {.write = false})).value();
      std::string bytes(st.st_size, '\0');
      ASSERT_EQ(*file->ReadAt({reinterpret_cast<uint8_t*>(bytes.data()), bytes.size()}, 0),
                bytes.size())
          << path;
      text += " " + bytes;
    }
    if (S_ISLNK(st.st_mode)) text += " -> " + *dir.ReadSymlink(name);
    auto attrs = dir.ListXattrs(name);
    if (attrs.ok())
      for (const std::string& a : *attrs) {
        auto v = *dir.GetXattr(name, a);
        text += " " + a + "=" + std::string(v.begin(), v.end());
      }
    out[path] = text;
    if (S_ISDIR(st.st_mode)) Snapshot(**dir.OpenDir(name), path + "/", out);
  }
}

// Copies store `from` into `to` as a backup tool would (rsync -aHX): every entry, its bytes,
// mode, times, `user.*` attributes, and names of one inode as hard links.
void CopyStore(BackingDir& from, BackingDir& to,
               std::map<uint64_t, std::pair<BackingDir*, std::string>>& inodes,
               std::vector<std::unique_ptr<BackingDir>>& keep) {
  std::vector<BackingEntry> entries;
  ASSERT_TRUE(from.List(0,
                        [&](const BackingEntry& e) {
                          entries.push_back(e);
                          return true;
                        })
                  .ok());
  for (const BackingEntry& e : entries) {
    auto st = from.Stat(e.name);
    ASSERT_TRUE(st.ok()) << e.name << ": " << st.status().ToString();
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) {
      auto it = inodes.find(st->st_ino);
      if (it != inodes.end()) {
        ASSERT_TRUE(it->second.first->Link(it->second.second, to, e.name).ok());
        continue;
      }
    }
    if (S_ISDIR(st->st_mode)) {
      ASSERT_TRUE(to.MakeDir(e.name, 0700).ok());
      auto sub_from = std::move(from.OpenDir(e.name)).value();
      keep.push_back(std::move(to.OpenDir(e.name)).value());
      CopyStore(*sub_from, *keep.back(), inodes, keep);
    } else if (S_ISREG(st->st_mode)) {
      auto in = from.OpenFile(e.name, {.write = false});
      ASSERT_TRUE(in.ok()) << e.name << ": " << in.status().ToString();
      std::vector<uint8_t> bytes(st->st_size);
      ASSERT_EQ(*(*in)->ReadAt(bytes, 0), bytes.size());
      auto out = std::move(to.OpenFile(e.name, {.create = true, .exclusive = true})).value();
      const ByteSpan parts[] = {bytes};
      ASSERT_TRUE(out->WriteAt(parts, 0).ok());
    } else if (S_ISLNK(st->st_mode)) {
      ASSERT_TRUE(to.MakeSymlink(e.name, *from.ReadSymlink(e.name)).ok());
    } else {
      ASSERT_TRUE(to.MakeNode(e.name, st->st_mode, st->st_rdev).ok());
    }
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1) inodes[st->st_ino] = {&to, e.name};
    if (!S_ISLNK(st->st_mode)) {
      const std::vector<std::string> attrs = *from.ListXattrs(e.name);
      for (const std::string& a : attrs)
        ASSERT_TRUE(to.SetXattr(e.name, a, *from.GetXattr(e.name, a)).ok()) << a;
      ASSERT_TRUE(to.SetMode(e.name, st->st_mode & 07777).ok());
    }
    const struct timespec times[2] = {st->st_atim, st->st_mtim};
    ASSERT_TRUE(to.SetTimes(e.name, times).ok());
  }
}

// A plain store whose files cannot be opened for reading, as files of another user without read
// permission.
class UnreadableFiles : public test::ForwardingBackingDir {
 public:
  using ForwardingBackingDir::ForwardingBackingDir;
  Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view, const FileOpenMode&) override {
    return Status::FromErrno(EACCES, "open");
  }
  std::unique_ptr<BackingDir> Wrap(std::unique_ptr<BackingDir> inner) override {
    return std::make_unique<UnreadableFiles>(std::move(inner));
  }
};

class ReverseViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    plain_ = temp_.path() / "plain";
    fs::create_directories(plain_ / "docs" / "deep");
    WriteFile(plain_ / "empty", {});
    WriteFile(plain_ / "one", {'x'});
    WriteFile(plain_ / "page", test::Pattern(4096, 1));
    WriteFile(plain_ / "docs" / "big", test::Pattern(200000, 2));
    WriteFile(plain_ / "docs" / "deep" / "odd", test::Pattern(4097, 3));
    WriteFile(plain_ / "docs" / std::string(250, 'L'), test::Pattern(10, 4));
    fs::create_directory(plain_ / "docs" / std::string(240, 'D'));
    WriteFile(plain_ / "docs" / std::string(240, 'D') / "inside", test::Pattern(5, 5));
    fs::create_symlink("../page", plain_ / "docs" / "link");
    fs::create_symlink(std::string(300, 't'), plain_ / "dangling");
    fs::create_hard_link(plain_ / "docs" / "big", plain_ / "big-again");
    ASSERT_EQ(::mkfifo((plain_ / "fifo").c_str(), 0640), 0);
    ASSERT_EQ(::chmod((plain_ / "one").c_str(), 0751), 0);
    ASSERT_EQ(::setxattr((plain_ / "page").c_str(), "user.note", "hello", 5, 0), 0);
    ASSERT_EQ(::setxattr((plain_ / "docs").c_str(), "user.dir", "d", 1, 0), 0);
    const std::vector<uint8_t> access =
        acl::Serialize(acl::Acl({{acl::kUserObj, 6, acl::kUndefinedId},
                                 {acl::kUser, 4, 65534},
                                 {acl::kGroupObj, 4, acl::kUndefinedId},
                                 {acl::kMask, 4, acl::kUndefinedId},
                                 {acl::kOther, 0, acl::kUndefinedId}}));
    acls_ = ::setxattr((plain_ / "one").c_str(), std::string(acl::kAccessName).c_str(),
                       access.data(), access.size(), 0) == 0;
    VaultCreateOptions cheap;
    cheap.kdf = crypt::Argon2ParamsFor(crypt::KdfPreset::kTest);
    ASSERT_TRUE(Vault::CreateReverse(plain_.string(), Bytes("pass"), cheap).ok());
    vault_ =
        std::move(Vault::Unlock(plain_.string(), Bytes("pass"), kReverseConfigFileName)).value();
  }

  std::unique_ptr<BackingDir> View(const ReverseOptions& options = {}) {
    auto view =
        OpenReverseView(*vault_, std::move(OpenPosixBackingDir(plain_.string())).value(), options);
    EXPECT_TRUE(view.ok()) << view.status().ToString();
    return std::move(view).value();
  }

  std::map<std::string, std::string> SnapshotOfView() {
    std::map<std::string, std::string> snap;
    Snapshot(*View(), "", snap);
    return snap;
  }

  // The plain tree compared with the vault in `dir` (a copy of the view), through the vault's
  // own reader: the number of entries compared, or the first difference.
  Result<uint64_t> CompareCopy(const fs::path& dir) {
    SIGILFS_ASSIGN_OR_RETURN(auto vault, Vault::Unlock(dir.string(), Bytes("pass")));
    SIGILFS_ASSIGN_OR_RETURN(auto volume, Volume::Open(std::move(vault), {}));
    SIGILFS_ASSIGN_OR_RETURN(auto tree, Tree::Open(*volume));
    SIGILFS_ASSIGN_OR_RETURN(auto root, tree->Root());
    SIGILFS_ASSIGN_OR_RETURN(auto plain, OpenPosixBackingDir(plain_.string()));
    CompareOptions options;
    options.skip = [](const std::string& path, const struct stat&) {
      return path == kReverseConfigFileName;
    };
    return CompareWithPlain(*tree, *root, *plain, plain_.string(), options);
  }

  fs::path Copy() {
    const fs::path copy = temp_.path() / ("copy" + std::to_string(copies_++));
    fs::create_directory(copy);
    auto to = std::move(OpenPosixBackingDir(copy.string())).value();
    std::map<uint64_t, std::pair<BackingDir*, std::string>> inodes;
    std::vector<std::unique_ptr<BackingDir>> keep;
    auto view = View();
    CopyStore(*view, *to, inodes, keep);
    const struct stat root = *view->Stat("");
    EXPECT_TRUE(to->SetMode("", root.st_mode & 07777).ok());
    const struct timespec times[2] = {root.st_atim, root.st_mtim};
    EXPECT_TRUE(to->SetTimes("", times).ok());
    return copy;
  }

  // Writes root file `name` of the plain tree, and returns its stored name in `view` ("" if
  // not found).
  std::string PutPlainFile(BackingDir& view, const std::string& name,
                           const std::vector<uint8_t>& data) {
    WriteFile(plain_ / name, data);
    const uint64_t size = PageGeometry(12).CipherSize(data.size());
    std::string stored;
    EXPECT_TRUE(view.List(0,
                          [&](const BackingEntry& e) {
                            auto st = view.Stat(e.name);
                            if (st.ok() && S_ISREG(st->st_mode) &&
                                static_cast<uint64_t>(st->st_size) == size)
                              stored = e.name;
                            return true;
                          })
                    .ok());
    return stored;
  }

  // The plain pages of root file `name` as a copy whose file holds cipher bytes `cipher` gives
  // them back through the vault's own reader (a restore); an error names the first page that
  // does not open.
  Result<std::vector<std::vector<uint8_t>>> RestoredPages(const std::string& name,
                                                          const std::vector<uint8_t>& cipher) {
    const fs::path copy = Copy();
    std::string stored;
    for (const auto& e : fs::directory_iterator(copy))
      if (!e.is_symlink() && e.is_regular_file() && e.file_size() == cipher.size())
        stored = e.path().filename().string();
    if (stored.empty()) return Status::FromErrno(ENOENT, "no file of that size in the copy");
    {
      std::ofstream out(copy / stored, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(cipher.data()),
                static_cast<std::streamsize>(cipher.size()));
    }
    SIGILFS_ASSIGN_OR_RETURN(auto vault, Vault::Unlock(copy.string(), Bytes("pass")));
    SIGILFS_ASSIGN_OR_RETURN(auto volume, Volume::Open(std::move(vault), {}));
    SIGILFS_ASSIGN_OR_RETURN(auto tree, Tree::Open(*volume));
    SIGILFS_ASSIGN_OR_RETURN(auto root, tree->Root());
    SIGILFS_ASSIGN_OR_RETURN(auto contents, tree->OpenFile(*root, name, false));
    std::vector<std::vector<uint8_t>> pages;
    for (uint64_t at = 0;; at += 4096) {
      std::vector<uint8_t> page(4096);
      auto n = contents->Read(at, page);
      if (!n.ok())
        return Status::FromErrno(EIO,
                                 "page at " + std::to_string(at) + ": " + n.status().ToString());
      if (*n == 0) return pages;
      page.resize(*n);
      pages.push_back(std::move(page));
    }
  }

  // How many pages of root file `name` a copy holding `cipher` as its bytes restores as
  // `before`'s and how many as `after`'s. A page that does not open, or is neither, fails.
  std::pair<size_t, size_t> RestoredOldAndNew(const std::string& name,
                                              const std::vector<uint8_t>& cipher,
                                              const std::vector<uint8_t>& before,
                                              const std::vector<uint8_t>& after) {
    auto pages = RestoredPages(name, cipher);
    EXPECT_TRUE(pages.ok()) << pages.status().ToString();
    size_t old_pages = 0, new_pages = 0;
    for (size_t i = 0; pages.ok() && i < pages->size(); ++i) {
      const std::vector<uint8_t>& page = (*pages)[i];
      const auto at = static_cast<ptrdiff_t>(i * 4096);
      const bool is_old = std::equal(page.begin(), page.end(), before.begin() + at);
      const bool is_new = std::equal(page.begin(), page.end(), after.begin() + at);
      EXPECT_TRUE(is_old || is_new) << "page " << i;
      old_pages += is_old;
      new_pages += is_new && !is_old;
    }
    return {old_pages, new_pages};
  }

  test::TempDir temp_;
  fs::path plain_;
  std::unique_ptr<Vault> vault_;
  bool acls_ = false;
  int copies_ = 0;
};

TEST_F(ReverseViewTest, ACopyOfTheViewIsAVaultHoldingThePlainTree) {
  const fs::path copy = Copy();
  EXPECT_TRUE(fs::exists(copy / kConfigFileName));
  EXPECT_TRUE(fs::exists(copy / kDirIvFileName));
  EXPECT_FALSE(fs::exists(copy / kReverseConfigFileName));
  auto compared = CompareCopy(copy);
  ASSERT_TRUE(compared.ok()) << compared.status().ToString();
  EXPECT_EQ(*compared, 14u);  // every entry but the reverse config
  // The copy's names and bytes are ciphertext: no plain name or page shows in it.
  for (const auto& e : fs::recursive_directory_iterator(copy)) {
    EXPECT_EQ(e.path().filename().string().find("docs"), std::string::npos);
    EXPECT_EQ(e.path().filename().string().find("LLLL"), std::string::npos);
  }
}

TEST_F(ReverseViewTest, TheForwardTreeReadsThePlainTreeThroughTheView) {
  auto volume =
      std::move(Volume::Open(
                    std::move(Vault::Unlock(plain_.string(), Bytes("pass"), kReverseConfigFileName))
                        .value(),
                    {}))
          .value();
  auto tree = std::move(Tree::Open(*volume, View())).value();
  auto root = std::move(tree->Root()).value();
  auto plain = std::move(OpenPosixBackingDir(plain_.string())).value();
  CompareOptions options;
  options.skip = [](const std::string& path, const struct stat&) {
    return path == kReverseConfigFileName;
  };
  auto compared = CompareWithPlain(*tree, *root, *plain, plain_.string(), options);
  ASSERT_TRUE(compared.ok()) << compared.status().ToString();
  EXPECT_EQ(*compared, 14u);
}

TEST_F(ReverseViewTest, TheSameTreeIsTheSameBytesAndAChangedPageChangesOneUnit) {
  const auto first = SnapshotOfView();
  EXPECT_EQ(first, SnapshotOfView());
  // Another unlock of the same config derives the same keys, so the same view.
  vault_ = std::move(Vault::Unlock(plain_.string(), Bytes("pass"), kReverseConfigFileName)).value();
  EXPECT_EQ(first, SnapshotOfView());

  // One page of the 200,000-byte file changes: its cipher file changes in that unit only.
  std::vector<uint8_t> big = test::Pattern(200000, 2);
  big[5 * 4096 + 7] ^= 1;
  {
    std::fstream f(plain_ / "docs" / "big", std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(5 * 4096 + 7);
    f.put(static_cast<char>(big[5 * 4096 + 7]));
  }
  const auto second = SnapshotOfView();
  size_t changed_entries = 0;
  // Each entry's snapshot is its attributes, then (after the fourth space) its bytes. The write
  // moves the file's mtime, which may cross a second; the bytes must differ in one unit only.
  auto bytes_of = [](const std::string& text) {
    size_t at = 0;
    for (int field = 0; field < 4; ++field) at = text.find(' ', at) + 1;
    return text.substr(at);
  };
  for (const auto& [path, text] : first) {
    if (second.at(path) == text) continue;
    ++changed_entries;
    const std::string a = bytes_of(text), b = bytes_of(second.at(path));
    ASSERT_EQ(a.size(), b.size()) << path;
    size_t lo = 0, hi = a.size();
    while (lo < hi && a[lo] == b[lo]) ++lo;
    while (hi > lo && a[hi - 1] == b[hi - 1]) --hi;
    EXPECT_LE(hi - lo, 4096u + 28u) << path << ": bytes " << lo << " to " << hi;  // one unit
  }
  EXPECT_EQ(changed_entries, 2u);  // the file, under both of its names
}

TEST_F(ReverseViewTest, ExcludedEntriesAreNotInTheView) {
  ReverseOptions options;
  options.exclude = std::move(ExcludeRules::Parse({"deep/", "/one", "L*"})).value();
  auto volume =
      std::move(Volume::Open(
                    std::move(Vault::Unlock(plain_.string(), Bytes("pass"), kReverseConfigFileName))
                        .value(),
                    {}))
          .value();
  auto tree = std::move(Tree::Open(*volume, View(options))).value();
  auto root = std::move(tree->Root()).value();
  std::vector<DirEntry> listed;
  ASSERT_TRUE(tree->ListSorted(*root, listed).ok());
  for (const DirEntry& e : listed) EXPECT_NE(e.name, "one");
  auto docs = std::move(tree->Walk("docs")).value();
  EXPECT_EQ(tree->Stat(*docs, "deep").status().sys_errno(), ENOENT);
  EXPECT_EQ(tree->Stat(*docs, std::string(250, 'L')).status().sys_errno(), ENOENT);
  EXPECT_TRUE(tree->Stat(*docs, "big").ok());
  // The long name's side file goes with it.
  size_t sides = 0;
  ASSERT_TRUE(docs->backing()
                  .List(0,
                        [&](const BackingEntry& e) {
                          sides += e.name.ends_with(kLongNameSideSuffix) ? 1 : 0;
                          return true;
                        })
                  .ok());
  EXPECT_EQ(sides, 1u);  // the long directory name's only
  // What is left compares equal to the plain tree with the same rules.
  auto plain = std::move(OpenPosixBackingDir(plain_.string())).value();
  CompareOptions compare;
  compare.skip = [&](const std::string& path, const struct stat& st) {
    return path == kReverseConfigFileName || options.exclude.Excluded(path, S_ISDIR(st.st_mode));
  };
  auto compared = CompareWithPlain(*tree, *root, *plain, plain_.string(), compare);
  ASSERT_TRUE(compared.ok()) << compared.status().ToString();
  EXPECT_EQ(*compared, 10u);
}

TEST_F(ReverseViewTest, AnUnreadablePlainFileIsEACCESAndTheRestReads) {
  auto plain =
      std::make_unique<UnreadableFiles>(std::move(OpenPosixBackingDir(plain_.string())).value());
  auto view = std::move(OpenReverseView(*vault_, std::move(plain))).value();
  size_t files = 0, refused = 0;
  ASSERT_TRUE(view->List(0,
                         [&](const BackingEntry& e) {
                           if (e.type != S_IFREG) return true;
                           ++files;
                           auto f = view->OpenFile(e.name, {.write = false});
                           if (!f.ok() && f.status().sys_errno() == EACCES) ++refused;
                           // Its attributes still show, as a listing of unreadable files does.
                           EXPECT_TRUE(view->Stat(e.name).ok()) << e.name;
                           return true;
                         })
                  .ok());
  // Every plain file (sigilfs.conf is the plain config file) but the directory IV, the view's own.
  EXPECT_EQ(refused, files - 1);
}

TEST_F(ReverseViewTest, TheViewsOwnFilesAreReadableAsTheirDirectory) {
  ASSERT_EQ(::chmod(plain_.c_str(), 0750), 0);
  auto view = View();
  // Whoever may list a directory may read its IV and the config, so that a backup made by a
  // user other than the owner opens.
  EXPECT_EQ(view->Stat(kDirIvFileName)->st_mode, S_IFREG | 0440);
  EXPECT_EQ(view->Stat(kConfigFileName)->st_mode, S_IFREG | 0440);
  // The root has no IV attribute, as in a vault; other directories have one.
  EXPECT_EQ(view->GetXattr("", kDirIvAttrName).status().sys_errno(), ENODATA);
}

// Readers at once on one view and one open file (as the FUSE daemon's threads are): each sees
// the bytes a lone reader does, boundary units included.
TEST_F(ReverseViewTest, ConcurrentReadersOfOneViewSeeTheSameBytes) {
  const auto alone = SnapshotOfView();
  auto view = View();
  std::string big;
  for (const auto& [path, text] : alone)
    if (path.find('/') == std::string::npos && text.size() > 150000 && (big.empty() || path < big))
      big = path;
  ASSERT_FALSE(big.empty());
  auto file = std::move(view->OpenFile(big, {.write = false})).value();
  const uint64_t size = *file->Size();
  std::vector<uint8_t> want(size);
  {
    // From a view dropped at once: an open file outlives the view it came from.
    auto lone = std::move(View()->OpenFile(big, {.write = false})).value();
    ASSERT_EQ(*lone->ReadAt(want, 0), size);
  }
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::map<std::string, std::string> snap;
      Snapshot(*view, "", snap);
      if (snap != alone) ++bad;
      // Reads of odd sizes at odd places, each thread its own order.
      std::vector<uint8_t> buf(9001);
      for (uint64_t i = 0; i < 60; ++i) {
        const uint64_t at = ((i * 7919 + static_cast<uint64_t>(t) * 104729) % size);
        const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - at));
        auto got = file->ReadAt(MutableByteSpan(buf).first(n), at);
        if (!got.ok() || *got != n ||
            !std::equal(buf.begin(), buf.begin() + n, want.begin() + at)) {
          if (bad++ == 0)
            ADD_FAILURE() << "at " << at << " n " << n << " ok " << got.ok() << " "
                          << (got.ok() ? std::to_string(*got) : got.status().ToString());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST_F(ReverseViewTest, WritesAreRefusedWithEROFS) {
  auto view = View();
  EXPECT_EQ(view->MakeDir("x", 0700).sys_errno(), EROFS);
  EXPECT_EQ(view->Unlink(kDirIvFileName).sys_errno(), EROFS);
  EXPECT_EQ(view->SetMode("", 0700).sys_errno(), EROFS);
  std::string stored;
  ASSERT_TRUE(view->List(0,
                         [&](const BackingEntry& e) {
                           if (e.name != kDirIvFileName && e.name != kConfigFileName)
                             stored = e.name;
                           return stored.empty();
                         })
                  .ok());
  EXPECT_EQ(view->OpenFile(stored, {.write = true}).status().sys_errno(), EROFS);
  EXPECT_EQ(view->SetXattr(stored, "user.x", Bytes("v")).sys_errno(), EROFS);
  EXPECT_EQ(view->Stat("no.such").status().sys_errno(), ENOENT);
  EXPECT_EQ(view->Stat("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA").status().sys_errno(), ENOENT);
}

TEST_F(ReverseViewTest, AFileChangingWhileReadGivesUnitsThatEachOpen) {
  const fs::path copy = Copy();
  // The big file's stored path, found in the copy (the view has the same names).
  std::string big_stored;
  for (const auto& e : fs::recursive_directory_iterator(copy))
    if (!e.is_symlink() && e.is_regular_file() && e.file_size() > 150000 &&
        e.path().parent_path() != copy)
      big_stored = fs::relative(e.path(), copy).string();
  ASSERT_FALSE(big_stored.empty());
  auto object = View()->OpenObject(big_stored);
  ASSERT_TRUE(object.ok()) << object.status().ToString();
  auto file = std::move((*object)->OpenFile("", {.write = false})).value();
  const uint64_t size = *file->Size();
  std::vector<uint8_t> bytes(size);
  ASSERT_EQ(*file->ReadAt(MutableByteSpan(bytes).first(10000), 0), 10000u);
  WriteFile(plain_ / "docs" / "big", test::Pattern(200000, 9));
  for (uint64_t at = 10000; at < size; at += 70001) {
    const size_t n = std::min<uint64_t>(70001, size - at);
    ASSERT_EQ(*file->ReadAt(MutableByteSpan(bytes).subspan(at, n), at), n);
  }
  {
    std::ofstream out(copy / big_stored, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
  }
  // Every page of the copy opens, and is the old page or the new one.
  auto unlocked = std::move(Vault::Unlock(copy.string(), Bytes("pass"))).value();
  auto volume = std::move(Volume::Open(std::move(unlocked), {})).value();
  auto tree = std::move(Tree::Open(*volume)).value();
  auto dir = std::move(tree->Walk("docs")).value();
  auto contents = tree->OpenFile(*dir, "big", false);
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  const std::vector<uint8_t> before = test::Pattern(200000, 2), after = test::Pattern(200000, 9);
  std::vector<uint8_t> page(4096);
  size_t old_pages = 0, new_pages = 0;
  for (uint64_t at = 0; at < 200000; at += 4096) {
    auto n = (*contents)->Read(at, page);
    ASSERT_TRUE(n.ok()) << "page at " << at << ": " << n.status().ToString();
    const bool is_old = std::equal(page.begin(), page.begin() + *n, before.begin() + at);
    const bool is_new = std::equal(page.begin(), page.begin() + *n, after.begin() + at);
    ASSERT_TRUE(is_old || is_new) << "page at " << at;
    old_pages += is_old;
    new_pages += is_new;
  }
  EXPECT_EQ(old_pages, 3u);  // the pages the first read covered, the straddling one included
  EXPECT_GT(new_pages, 40u);

  // Reads in any order (as the kernel's read-ahead sends them, several at once) share the units
  // that straddle them: a later read of the first half of a straddling unit gets the bytes the
  // earlier read of its second half had, though the page changed in between.
  {
    auto file2 = std::move((*object)->OpenFile("", {.write = false})).value();
    const uint64_t split = 32 + 7 * 4124 + 2000;  // inside unit 7
    std::vector<uint8_t> tail(size - split), head(split);
    ASSERT_EQ(*file2->ReadAt(tail, split), tail.size());
    WriteFile(plain_ / "docs" / "big", test::Pattern(200000, 11));
    ASSERT_EQ(*file2->ReadAt(head, 0), head.size());
    std::copy(head.begin(), head.end(), bytes.begin());
    std::copy(tail.begin(), tail.end(), bytes.begin() + static_cast<ptrdiff_t>(split));
    std::ofstream out(copy / big_stored, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(size));
  }
  {
    auto reopened = std::move(Tree::Open(*volume)).value();
    auto docs = std::move(reopened->Walk("docs")).value();
    auto again = std::move(reopened->OpenFile(*docs, "big", false)).value();
    for (uint64_t at = 0; at < 200000; at += 4096) {
      auto n = again->Read(at, page);
      ASSERT_TRUE(n.ok()) << "page at " << at << ": " << n.status().ToString();
    }
  }

  // A file that shrinks while open fails the read rather than give units that do not open.
  auto again = std::move((*object)->OpenFile("", {.write = false})).value();
  fs::resize_file(plain_ / "docs" / "big", 1000);
  std::vector<uint8_t> tail(8192);
  EXPECT_EQ(again->ReadAt(tail, 100000).status().sys_errno(), EIO);
}

// Overwrites the plain file at `p` in place (same inode, same size), as an editor saving into
// the file or a database would.
void Rewrite(const fs::path& p, const std::vector<uint8_t>& data) {
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

// Two opens of one file, as a copier with several streams or one that resumes has: the first
// takes the start of unit 0, the page changes, the second (opened after the change) takes the
// rest. They share the unit, so the copy's unit 0 is one seal and opens.
TEST_F(ReverseViewTest, TwoOpensOfAFileServeTheSameBytesOfAUnitTheyEachTakeAPartOf) {
  const std::vector<uint8_t> before = test::Pattern(50000, 21), after = test::Pattern(50000, 22);
  auto view = View();
  const std::string stored = PutPlainFile(*view, "streamed", before);
  ASSERT_FALSE(stored.empty());
  auto first = std::move(view->OpenFile(stored, {.write = false})).value();
  const uint64_t size = *first->Size();
  std::vector<uint8_t> cipher(size);
  ASSERT_EQ(*first->ReadAt(MutableByteSpan(cipher).first(4096), 0), 4096u);
  Rewrite(plain_ / "streamed", after);
  auto second = std::move(view->OpenFile(stored, {.write = false})).value();
  ASSERT_EQ(*second->ReadAt(MutableByteSpan(cipher).subspan(4096), 4096), size - 4096);
  EXPECT_EQ(RestoredOldAndNew("streamed", cipher, before, after),
            std::make_pair(size_t{1}, size_t{12}));
}

// Streams that each copy a range of a file: the unit at the start of one range is taken in part
// when its stream starts, and in part only when the stream before it ends, after many other
// units were sealed and kept. Units a read took only a part of are the last to go, so it is
// still kept then.
TEST_F(ReverseViewTest, AUnitTakenInPartStaysKeptWhileManyOthersAreSealed) {
  const std::vector<uint8_t> before = test::Pattern(400000, 23), after = test::Pattern(400000, 24);
  auto view = View();
  const std::string stored = PutPlainFile(*view, "streamed", before);
  ASSERT_FALSE(stored.empty());
  auto second = std::move(view->OpenFile(stored, {.write = false})).value();
  const uint64_t size = *second->Size();
  std::vector<uint8_t> cipher(size);
  // Each stream reads as the kernel sends it: a page at a time.
  auto stream = [&](BackingFile& file, uint64_t from, uint64_t to) {
    for (uint64_t at = from; at < to; at = (at / 4096 + 1) * 4096) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>((at / 4096 + 1) * 4096, to) - at);
      ASSERT_EQ(*file.ReadAt(MutableByteSpan(cipher).subspan(at, n), at), n);
    }
  };
  const uint64_t split = 32 + 20 * 4124 + 1000;  // inside unit 20
  stream(*second, split, size);  // 78 reads: each unit two of them share is taken whole, but 20
  Rewrite(plain_ / "streamed", after);
  auto first = std::move(view->OpenFile(stored, {.write = false})).value();
  stream(*first, 0, split);
  EXPECT_EQ(RestoredOldAndNew("streamed", cipher, before, after),
            std::make_pair(size_t{78}, size_t{20}));
}

}  // namespace
}  // namespace sigilfs::core
