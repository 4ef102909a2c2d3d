// The backing-directory interface, one suite run against the POSIX and the memory store: the
// memory store must answer every call as a real filesystem does.
#include "sigilfs/core/backing_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "test_support/pattern.h"
#include "test_support/requirements.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

class BackingDirTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override { root_ = test::NewStore(GetParam(), temp_.path()); }

  std::unique_ptr<BackingDir> Dir(BackingDir& in, const std::string& name) {
    auto d = in.OpenDir(name);
    EXPECT_TRUE(d.ok()) << name << ": " << d.status().ToString();
    return d.ok() ? std::move(d).value() : nullptr;
  }

  void WriteFile(BackingDir& in, const std::string& name, const std::vector<uint8_t>& data) {
    auto f = in.OpenFile(name, {.create = true, .mode = 0644});
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const ByteSpan parts[] = {data};
    ASSERT_TRUE((*f)->WriteAt(parts, 0).ok());
  }

  std::vector<uint8_t> ReadFile(BackingDir& in, const std::string& name) {
    auto f = in.OpenFile(name, {.write = false});
    if (!f.ok()) return {};
    std::vector<uint8_t> out(*(*f)->Size());
    EXPECT_EQ(*(*f)->ReadAt(out, 0), out.size());
    return out;
  }

  // Every entry, by name, with its type.
  std::map<std::string, mode_t> Names(BackingDir& dir) {
    std::map<std::string, mode_t> names;
    EXPECT_TRUE(dir.List(0,
                         [&](const BackingEntry& e) {
                           EXPECT_TRUE(names.emplace(e.name, e.type).second) << e.name << " twice";
                           return true;
                         })
                    .ok());
    return names;
  }

  // The errno of a failed call (0 if it succeeded).
  static int Errno(const Status& s) { return s.ok() ? 0 : s.sys_errno(); }
  template <typename T>
  static int Errno(const Result<T>& r) {
    return r.ok() ? 0 : r.status().sys_errno();
  }

  test::TempDir temp_;
  std::unique_ptr<BackingDir> root_;
};

TEST_P(BackingDirTest, MakesEachKindOfEntryAndListsAndStatsIt) {
  ASSERT_TRUE(root_->MakeDir("d", 0755).ok());
  WriteFile(*root_, "f", test::Pattern(5000, 1));
  ASSERT_TRUE(root_->MakeSymlink("l", "some/target").ok());
  ASSERT_TRUE(root_->MakeNode("p", S_IFIFO | 0644, 0).ok());

  const std::map<std::string, mode_t> want = {
      {"d", S_IFDIR}, {"f", S_IFREG}, {"l", S_IFLNK}, {"p", S_IFIFO}};
  EXPECT_EQ(Names(*root_), want);
  for (const auto& [name, type] : want) {
    auto st = root_->Stat(name);
    ASSERT_TRUE(st.ok()) << name;
    EXPECT_EQ(st->st_mode & S_IFMT, type) << name;
  }
  EXPECT_EQ(root_->Stat("f")->st_size, 5000);
  EXPECT_EQ(root_->Stat("f")->st_mode & 07777, 0644u);
  EXPECT_EQ(root_->Stat("d")->st_nlink, 2u);
  EXPECT_EQ(*root_->ReadSymlink("l"), "some/target");
  EXPECT_EQ(root_->Stat("l")->st_size, 11);
  EXPECT_EQ(ReadFile(*root_, "f"), test::Pattern(5000, 1));
  // Inode numbers tell objects apart, and a directory's own attributes come with an empty name.
  EXPECT_NE(root_->Stat("f")->st_ino, root_->Stat("d")->st_ino);
  auto d = Dir(*root_, "d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->Stat("")->st_ino, root_->Stat("d")->st_ino);
  EXPECT_EQ(root_->Stat("")->st_nlink, 3u) << "the root and its subdirectory's '..'";
  EXPECT_TRUE(Names(*d).empty());
}

TEST_P(BackingDirTest, ErrorsAreThePosixOnes) {
  ASSERT_TRUE(root_->MakeDir("d", 0755).ok());
  WriteFile(*root_, "f", {1, 2, 3});
  ASSERT_TRUE(root_->MakeSymlink("l", "f").ok());
  auto d = Dir(*root_, "d");
  ASSERT_NE(d, nullptr);
  WriteFile(*d, "inner", {4});

  EXPECT_EQ(Errno(root_->Stat("missing")), ENOENT);
  EXPECT_EQ(Errno(root_->MakeDir("f", 0755)), EEXIST);
  EXPECT_EQ(Errno(root_->MakeSymlink("d", "x")), EEXIST);
  EXPECT_EQ(Errno(root_->OpenDir("f")), ENOTDIR);
  EXPECT_EQ(Errno(root_->OpenDir("l")), ENOTDIR) << "a symlink is never followed";
  EXPECT_EQ(Errno(root_->OpenDir("missing")), ENOENT);
  EXPECT_EQ(Errno(root_->OpenFile("d", {})), EISDIR);
  EXPECT_EQ(Errno(root_->OpenFile("l", {})), ELOOP) << "a symlink is never followed";
  EXPECT_EQ(Errno(root_->OpenFile("missing", {})), ENOENT);
  EXPECT_EQ(Errno(root_->OpenFile("f", {.create = true, .exclusive = true})), EEXIST);
  EXPECT_EQ(Errno(root_->ReadSymlink("f")), EINVAL);
  EXPECT_EQ(Errno(root_->Unlink("d")), EISDIR);
  EXPECT_EQ(Errno(root_->Unlink("missing")), ENOENT);
  EXPECT_EQ(Errno(root_->RemoveDir("f")), ENOTDIR);
  EXPECT_EQ(Errno(root_->RemoveDir("d")), ENOTEMPTY);
  EXPECT_EQ(Errno(root_->Link("d", *root_, "d2")), EPERM);
  EXPECT_EQ(Errno(root_->Link("f", *root_, "l")), EEXIST);
  EXPECT_EQ(Errno(root_->GetXattr("f", "user.none")), ENODATA);
  EXPECT_EQ(Errno(root_->RemoveXattr("f", "user.none")), ENODATA);
  // Nothing of those changed anything.
  EXPECT_EQ(Names(*root_).size(), 3u);
  EXPECT_EQ(ReadFile(*root_, "f"), (std::vector<uint8_t>{1, 2, 3}));
  // An existing file opens without `exclusive`, as it was.
  auto again = root_->OpenFile("f", {.create = true});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*(*again)->Size(), 3u);
}

TEST_P(BackingDirTest, HardLinksNameOneFile) {
  ASSERT_TRUE(root_->MakeDir("d", 0755).ok());
  auto d = Dir(*root_, "d");
  ASSERT_NE(d, nullptr);
  WriteFile(*root_, "a", test::Pattern(100, 2));
  ASSERT_TRUE(root_->Link("a", *d, "b").ok());
  EXPECT_EQ(root_->Stat("a")->st_nlink, 2u);
  EXPECT_EQ(root_->Stat("a")->st_ino, d->Stat("b")->st_ino);
  WriteFile(*d, "b", test::Pattern(100, 3));  // through the other name
  EXPECT_EQ(ReadFile(*root_, "a"), test::Pattern(100, 3));
  ASSERT_TRUE(root_->Unlink("a").ok());
  EXPECT_EQ(d->Stat("b")->st_nlink, 1u);
  EXPECT_EQ(ReadFile(*d, "b"), test::Pattern(100, 3));
}

TEST_P(BackingDirTest, RenameMovesReplacesRefusesAndExchanges) {
  ASSERT_TRUE(root_->MakeDir("a", 0755).ok());
  ASSERT_TRUE(root_->MakeDir("b", 0755).ok());
  auto a = Dir(*root_, "a");
  auto b = Dir(*root_, "b");
  ASSERT_TRUE(a && b);
  WriteFile(*a, "x", {1});
  WriteFile(*b, "y", {2});
  ASSERT_TRUE(a->MakeDir("sub", 0755).ok());

  // A file moves, then replaces another.
  ASSERT_TRUE(a->Rename("x", *b, "x2").ok());
  EXPECT_EQ(Errno(a->Stat("x")), ENOENT);
  EXPECT_EQ(ReadFile(*b, "x2"), std::vector<uint8_t>{1});
  EXPECT_EQ(Errno(b->Rename("x2", *b, "y", BackingDir::kNoReplace)), EEXIST);
  ASSERT_TRUE(b->Rename("x2", *b, "y").ok());
  EXPECT_EQ(ReadFile(*b, "y"), std::vector<uint8_t>{1});
  EXPECT_EQ(Names(*b).size(), 1u);

  // A directory moves to another parent: the link counts follow.
  ASSERT_TRUE(a->Rename("sub", *b, "sub").ok());
  EXPECT_EQ(root_->Stat("a")->st_nlink, 2u);
  EXPECT_EQ(root_->Stat("b")->st_nlink, 3u);
  auto sub = Dir(*b, "sub");
  ASSERT_NE(sub, nullptr);
  // Not below itself, not over a file, not over a non-empty directory; a file not over one.
  EXPECT_EQ(Errno(root_->Rename("b", *sub, "b")), EINVAL);
  EXPECT_EQ(Errno(root_->Rename("b", *b, "sub")), EINVAL);
  EXPECT_EQ(Errno(b->Rename("sub", *b, "y")), ENOTDIR);
  EXPECT_EQ(Errno(b->Rename("y", *b, "sub")), EISDIR);
  WriteFile(*sub, "z", {3});
  ASSERT_TRUE(a->MakeDir("empty", 0755).ok());
  EXPECT_EQ(Errno(a->Rename("empty", *b, "sub")), ENOTEMPTY);
  ASSERT_TRUE(sub->Unlink("z").ok());
  ASSERT_TRUE(a->Rename("empty", *b, "sub").ok()) << "over an empty directory";
  EXPECT_EQ(sub->Stat("")->st_nlink, 0u) << "the replaced directory is gone";
  EXPECT_EQ(Errno(sub->MakeDir("late", 0755)), ENOENT);
  EXPECT_EQ(root_->Stat("b")->st_nlink, 3u);

  // Exchange: a file and a directory trade places.
  EXPECT_EQ(Errno(b->Rename("y", *a, "none", BackingDir::kExchange)), ENOENT);
  const uint64_t file_ino = b->Stat("y")->st_ino, dir_ino = b->Stat("sub")->st_ino;
  ASSERT_TRUE(b->Rename("y", *b, "sub", BackingDir::kExchange).ok());
  EXPECT_EQ(b->Stat("y")->st_ino, dir_ino);
  EXPECT_EQ(b->Stat("sub")->st_ino, file_ino);

  // Two names of one file: renaming one over the other changes nothing.
  WriteFile(*a, "h1", {9});
  ASSERT_TRUE(a->Link("h1", *a, "h2").ok());
  ASSERT_TRUE(a->Rename("h1", *a, "h2").ok());
  EXPECT_TRUE(a->Stat("h1").ok());
  EXPECT_EQ(a->Stat("h2")->st_nlink, 2u);
}

TEST_P(BackingDirTest, AListingResumesFromItsCursorWhileEntriesComeAndGo) {
  for (int i = 0; i < 40; ++i) WriteFile(*root_, "e" + std::to_string(i), {});
  std::vector<std::string> seen;
  uint64_t cursor = 0;
  ASSERT_TRUE(root_
                  ->List(0,
                         [&](const BackingEntry& e) {
                           seen.push_back(e.name);
                           cursor = e.next;
                           return seen.size() < 15;
                         })
                  .ok());
  ASSERT_EQ(seen.size(), 15u);
  // Meanwhile: an entry not yet listed goes, new ones come.
  std::string gone;
  for (int i = 0; i < 40 && gone.empty(); ++i) {
    const std::string name = "e" + std::to_string(i);
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) gone = name;
  }
  ASSERT_TRUE(root_->Unlink(gone).ok());
  for (int i = 0; i < 5; ++i) WriteFile(*root_, "new" + std::to_string(i), {});
  ASSERT_TRUE(root_
                  ->List(cursor,
                         [&](const BackingEntry& e) {
                           seen.push_back(e.name);
                           return true;
                         })
                  .ok());
  // Every entry there for the whole listing, once; the removed one never; new ones at most once.
  std::set<std::string> unique(seen.begin(), seen.end());
  EXPECT_EQ(unique.size(), seen.size()) << "an entry was listed twice";
  for (int i = 0; i < 40; ++i) {
    const std::string name = "e" + std::to_string(i);
    EXPECT_EQ(unique.count(name), name == gone ? 0u : 1u) << name;
  }
}

TEST_P(BackingDirTest, ExtendedAttributesOfEntriesAndOfTheDirectory) {
  WriteFile(*root_, "f", {});
  const std::vector<uint8_t> value = {1, 2, 3, 0, 5};
  ASSERT_TRUE(root_->SetXattr("f", "user.a", value).ok());
  ASSERT_TRUE(root_->SetXattr("", "user.dir", value).ok());
  EXPECT_EQ(*root_->GetXattr("f", "user.a"), value);
  EXPECT_EQ(*root_->GetXattr("", "user.dir"), value);
  EXPECT_EQ(Errno(root_->SetXattr("f", "user.a", value, XATTR_CREATE)), EEXIST);
  EXPECT_EQ(Errno(root_->SetXattr("f", "user.b", value, XATTR_REPLACE)), ENODATA);
  ASSERT_TRUE(root_->SetXattr("f", "user.a", std::vector<uint8_t>{7}, XATTR_REPLACE).ok());
  ASSERT_TRUE(root_->SetXattr("f", "user.b", {}).ok());
  auto names = root_->ListXattrs("f");
  ASSERT_TRUE(names.ok());
  std::set<std::string> user;
  for (const std::string& n : *names)
    if (n.rfind("user.", 0) == 0) user.insert(n);
  EXPECT_EQ(user, (std::set<std::string>{"user.a", "user.b"}));
  EXPECT_EQ(*root_->GetXattr("f", "user.a"), std::vector<uint8_t>{7});
  EXPECT_TRUE(root_->GetXattr("f", "user.b")->empty());
  ASSERT_TRUE(root_->RemoveXattr("f", "user.a").ok());
  EXPECT_EQ(Errno(root_->GetXattr("f", "user.a")), ENODATA);
}

TEST_P(BackingDirTest, ModesTimesAndOwners) {
  WriteFile(*root_, "f", {});
  ASSERT_TRUE(root_->MakeSymlink("l", "f").ok());
  ASSERT_TRUE(root_->SetMode("f", 04751).ok());
  EXPECT_EQ(root_->Stat("f")->st_mode & 07777, 04751u);
  EXPECT_EQ(Errno(root_->SetMode("l", 0600)), EOPNOTSUPP) << "never through a symlink";
  EXPECT_EQ(root_->Stat("f")->st_mode & 07777, 04751u);
  const struct timespec times[2] = {{1000, 5}, {2000, 7}};
  ASSERT_TRUE(root_->SetTimes("f", times).ok());
  ASSERT_TRUE(root_->SetTimes("l", times).ok()) << "a symlink's own times";
  for (const char* name : {"f", "l"}) {
    auto st = root_->Stat(name);
    EXPECT_EQ(st->st_atim.tv_sec, 1000) << name;
    EXPECT_EQ(st->st_mtim.tv_sec, 2000) << name;
    EXPECT_EQ(st->st_mtim.tv_nsec, 7) << name;
  }
  const struct timespec only_atime[2] = {{3000, 0}, {0, UTIME_OMIT}};
  ASSERT_TRUE(root_->SetTimes("", only_atime).ok());
  EXPECT_EQ(root_->Stat("")->st_atim.tv_sec, 3000);
  // Giving an entry to its owner (any caller may) keeps it theirs.
  const uid_t uid = root_->Stat("f")->st_uid;
  const gid_t gid = root_->Stat("f")->st_gid;
  ASSERT_TRUE(root_->SetOwner("f", uid, gid).ok());
  EXPECT_EQ(root_->Stat("f")->st_uid, uid);
}

TEST_P(BackingDirTest, ARemovedDirectoryAnswersNotFoundToEntriesAndStatsWithoutLinks) {
  ASSERT_TRUE(root_->MakeDir("d", 0755).ok());
  auto d = Dir(*root_, "d");
  ASSERT_NE(d, nullptr);
  ASSERT_TRUE(root_->RemoveDir("d").ok());
  // As through a descriptor: the directory itself still answers, with no link.
  ASSERT_TRUE(d->Stat("").ok());
  EXPECT_EQ(d->Stat("")->st_nlink, 0u);
  EXPECT_TRUE(d->SetMode("", 0700).ok());
  EXPECT_EQ(Errno(d->MakeDir("x", 0755)), ENOENT);
  EXPECT_EQ(Errno(d->OpenFile("x", {.create = true})), ENOENT);
  EXPECT_TRUE(Names(*root_).empty());
  EXPECT_EQ(Errno(d->List(0, [](const BackingEntry&) { return true; })), ENOENT);
  // The name is free again, for a new directory; the old handle still names the removed one.
  ASSERT_TRUE(root_->MakeDir("d", 0755).ok());
  EXPECT_EQ(d->Stat("")->st_nlink, 0u);
  EXPECT_EQ(Errno(d->MakeDir("x", 0755)), ENOENT);
}

TEST_P(BackingDirTest, HandlesReachAnyObjectByPathAndOutliveItsRemoval) {
  ASSERT_TRUE(root_->MakeDir("a", 0755).ok());
  auto a = Dir(*root_, "a");
  ASSERT_TRUE(a->MakeDir("b", 0755).ok());
  auto b = Dir(*a, "b");
  WriteFile(*b, "f", test::Pattern(100, 1));
  ASSERT_TRUE(b->MakeSymlink("l", "elsewhere").ok());
  ASSERT_TRUE(a->MakeSymlink("s", "b").ok());

  auto f = root_->OpenObject("a/b/f");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto st = (*f)->Stat("");
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISREG(st->st_mode));
  EXPECT_EQ(st->st_size, 100);
  // Only the object's own calls: it has no entries.
  EXPECT_EQ(Errno((*f)->Stat("x")), ENOTDIR);
  EXPECT_EQ(Errno((*f)->MakeDir("x", 0755)), ENOTDIR);
  // Its contents, through the handle, with no name.
  {
    auto file = (*f)->OpenFile("", {.write = false});
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    std::vector<uint8_t> got(100);
    EXPECT_EQ(*(*file)->ReadAt(got, 0), 100u);
    EXPECT_EQ(got, test::Pattern(100, 1));
  }
  auto link = root_->OpenObject("a/b/l");  // the link itself, not followed
  ASSERT_TRUE(link.ok());
  EXPECT_TRUE(S_ISLNK((*link)->Stat("")->st_mode));
  EXPECT_EQ(*(*link)->ReadSymlink(""), "elsewhere");
  EXPECT_EQ(Errno((*link)->OpenFile("", {.write = false})), ELOOP);
  // No symlink on the way, and no missing entry.
  EXPECT_NE(Errno(root_->OpenObject("a/s/f")), 0);
  EXPECT_EQ(Errno(root_->OpenObject("a/b/none")), ENOENT);
  EXPECT_EQ(Errno(root_->OpenObject("a/b/f/x")), ENOTDIR);
  // The empty path: this object again.
  auto again = (*f)->OpenObject("");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Stat("")->st_ino, st->st_ino);

  // Removed, the object still answers through its handle, with no link, as a descriptor does.
  ASSERT_TRUE(b->Unlink("f").ok());
  auto gone = (*f)->Stat("");
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->st_nlink, 0u);
  EXPECT_TRUE((*f)->SetMode("", 0600).ok());
  auto file = (*f)->OpenFile("", {.write = true});
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(*(*file)->Size(), 100u);
}

TEST_P(BackingDirTest, AStoreHandleOpensTheObjectAgainAndItsPathIsKnown) {
  ASSERT_TRUE(root_->MakeDir("a", 0755).ok());
  auto a = Dir(*root_, "a");
  ASSERT_TRUE(a->MakeDir("b", 0755).ok());
  WriteFile(*a, "f", test::Pattern(10, 2));
  auto handle = a->Handle("b");
  // Skipped on a developer's machine without them; CI (root, ext4) must have both.
  SIGILFS_NEEDS(handle.ok() || handle.status().sys_errno() != EOPNOTSUPP,
                "the backing filesystem has no file handles");
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  auto b = root_->OpenByHandle(*handle);
  SIGILFS_NEEDS(b.ok() || b.status().sys_errno() != EPERM,
                "opening by handle needs CAP_DAC_READ_SEARCH");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ((*b)->Stat("")->st_ino, a->Stat("b")->st_ino);
  EXPECT_EQ(root_->PathTo(**b), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(a->PathTo(*root_).empty());  // not below
  // A handle of the object itself; and a removed object's handle is stale.
  auto of_file = a->Handle("f");
  ASSERT_TRUE(of_file.ok());
  auto f = root_->OpenObject("a/f");
  ASSERT_TRUE(f.ok());
  auto own = (*f)->Handle("");
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->bytes, of_file->bytes);
  ASSERT_TRUE(a->Unlink("f").ok());
  f->reset();
  EXPECT_EQ(Errno(root_->OpenByHandle(*of_file)), ESTALE);
}

TEST_P(BackingDirTest, AListingHandleReadsOneStreamWithDotsFromAnyCursor) {
  for (const char* name : {"x", "y", "z"}) WriteFile(*root_, name, {});
  auto listing = root_->OpenListing(true);
  ASSERT_TRUE(listing.ok()) << listing.status().ToString();
  std::vector<BackingEntry> all;
  ASSERT_TRUE((*listing)
                  ->List(0,
                         [&](const BackingEntry& e) {
                           all.push_back(e);
                           return true;
                         })
                  .ok());
  std::set<std::string> names;
  for (const BackingEntry& e : all) names.insert(e.name);
  EXPECT_EQ(names, (std::set<std::string>{".", "..", "x", "y", "z"}));
  ASSERT_EQ(all.size(), 5u);
  // From each cursor, the rest, in the same order.
  for (size_t i = 0; i < all.size(); ++i) {
    std::vector<std::string> rest;
    ASSERT_TRUE((*listing)
                    ->List(all[i].next,
                           [&](const BackingEntry& e) {
                             rest.push_back(e.name);
                             return true;
                           })
                    .ok());
    std::vector<std::string> want;
    for (size_t j = i + 1; j < all.size(); ++j) want.push_back(all[j].name);
    EXPECT_EQ(rest, want) << "from entry " << i;
  }
  EXPECT_TRUE((*listing)->Sync().ok());
  // A plain handle's listing has no dots.
  EXPECT_EQ(Names(*root_).size(), 3u);
}

SIGILFS_INSTANTIATE_FOR_STORES(BackingDirTest);

}  // namespace
}  // namespace sigilfs::core
