// The vault's namespace (core::Tree) without FUSE: names, directories, renames, links,
// attributes and staged entries, each against the POSIX and the memory store, and what a
// failing call leaves (nothing changed, nothing left behind).
#include "sigilfs/core/tree.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sigilfs/crypt/random.h"
#include "test_support/forwarding_backing_dir.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

ByteSpan Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

class TreeTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    std::unique_ptr<BackingDir> store = test::NewStore(GetParam(), temp_.path() / "store");
    ASSERT_TRUE(Tree::Format(*store).ok());
    store_ = std::move(store->OpenDir("")).value();  // a second view, to look at what is stored
    auto tree = Tree::Open(*volume_, std::move(store));
    ASSERT_TRUE(tree.ok()) << tree.status().ToString();
    tree_ = std::move(tree).value();
    root_ = std::move(tree_->Root()).value();
  }

  // Every backing entry below the store's root, as "stored/stored" paths, for "nothing left".
  std::vector<std::string> Stored(BackingDir* dir = nullptr, const std::string& prefix = "") {
    if (dir == nullptr) dir = store_.get();
    std::vector<std::string> out;
    EXPECT_TRUE(dir->List(0,
                          [&](const BackingEntry& e) {
                            out.push_back(prefix + e.name);
                            if (S_ISDIR(e.type) ||
                                (e.type == 0 && S_ISDIR(dir->Stat(e.name)->st_mode))) {
                              auto sub = dir->OpenDir(e.name);
                              EXPECT_TRUE(sub.ok());
                              for (auto& n : Stored(sub->get(), prefix + e.name + "/"))
                                out.push_back(n);
                            }
                            return true;
                          })
                    .ok());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::vector<std::string> Names(const Tree::Dir& dir) {
    std::vector<DirEntry> list;
    EXPECT_TRUE(tree_->ListSorted(dir, list).ok());
    std::vector<std::string> names;
    for (const DirEntry& e : list) names.push_back(e.name);
    return names;
  }

  void Write(const Tree::Dir& dir, const std::string& name, std::string_view text,
             bool create = true) {
    auto file = create ? tree_->CreateFile(dir, name, 0644, /*exclusive=*/false)
                       : tree_->OpenFile(dir, name, /*write=*/true);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    ASSERT_TRUE((*file)->Truncate(0).ok());
    ASSERT_EQ(*(*file)->Write(0, Bytes(text)), text.size());
    ASSERT_TRUE((*file)->Sync(false).ok());
  }

  std::string Read(const Tree::Dir& dir, const std::string& name) {
    auto file = tree_->OpenFile(dir, name, /*write=*/false);
    if (!file.ok()) return "<" + file.status().ToString() + ">";
    std::string out((*file)->size(), '\0');
    auto n = (*file)->Read(0, {reinterpret_cast<uint8_t*>(out.data()), out.size()});
    EXPECT_TRUE(n.ok());
    out.resize(n.ok() ? *n : 0);
    return out;
  }

  static int Err(const Status& s) { return s.sys_errno(); }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<BackingDir> store_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<Tree::Dir> root_;
};

TEST_P(TreeTest, NamesAreStoredEncryptedAndListBackInEveryKind) {
  Write(*root_, "notes.txt", "hello");
  ASSERT_TRUE(tree_->MakeDir(*root_, "photos", 0750).ok());
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "link", "notes.txt").ok());
  ASSERT_TRUE(tree_->MakeNode(*root_, "fifo", S_IFIFO | 0600, 0).ok());
  const std::string long_name(240, 'x');
  Write(*root_, long_name, "long");
  EXPECT_EQ(Names(*root_),
            (std::vector<std::string>{"fifo", "link", "notes.txt", "photos", long_name}));
  for (const std::string& s : Stored())
    for (const char* plain : {"notes", "photos", "link", "fifo", "xxxx"})
      EXPECT_EQ(s.find(plain), std::string::npos) << s;

  EXPECT_TRUE(S_ISREG(tree_->Stat(*root_, "notes.txt")->st_mode));
  EXPECT_EQ(tree_->Stat(*root_, "notes.txt")->st_size, 5);  // plaintext size
  EXPECT_TRUE(S_ISDIR(tree_->Stat(*root_, "photos")->st_mode));
  EXPECT_EQ(tree_->Stat(*root_, "photos")->st_mode & 07777, 0750u);
  EXPECT_TRUE(S_ISLNK(tree_->Stat(*root_, "link")->st_mode));
  EXPECT_TRUE(S_ISFIFO(tree_->Stat(*root_, "fifo")->st_mode));
  EXPECT_EQ(*tree_->ReadLink(*root_, "link"), "notes.txt");
  EXPECT_EQ(Read(*root_, long_name), "long");
  EXPECT_EQ(tree_->Stat(*root_, "absent").status().code(), Code::kNotFound);

  // Bad names fail before anything is stored.
  const std::vector<std::string> before = Stored();
  EXPECT_EQ(tree_->MakeDir(*root_, std::string(256, 'y'), 0700).code(), Code::kNameTooLong);
  EXPECT_EQ(tree_->MakeDir(*root_, "a/b", 0700).code(), Code::kInvalidArgument);
  EXPECT_EQ(tree_->CreateFile(*root_, "..", 0600).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Err(tree_->MakeNode(*root_, "plain", S_IFDIR | 0700, 0)), EINVAL);
  EXPECT_EQ(Err(tree_->MakeDir(*root_, "photos", 0700)), EEXIST);
  EXPECT_EQ(Err(tree_->MakeSymlink(*root_, long_name, "x")), EEXIST);
  EXPECT_EQ(tree_->MakeSymlink(*root_, "big", std::string(4096, 't')).code(), Code::kNameTooLong);
  EXPECT_EQ(tree_->CreateFile(*root_, long_name, 0600, /*exclusive=*/true).status().code(),
            Code::kExists);
  EXPECT_EQ(Stored(), before);
  EXPECT_EQ(Read(*root_, long_name), "long");

  // A long name's side file goes with its entry.
  ASSERT_TRUE(tree_->Unlink(*root_, long_name).ok());
  EXPECT_EQ(Stored().size(), before.size() - 2);
}

// A file synchronizer (Syncthing) that finds one file changed on two hosts keeps one and renames
// the other to a conflict copy, NAME.sync-conflict-DATE-TIME-DEVICE. In the vault that is a
// stored name with a '.': it lists as the plain name the synchronizer would have given the plain
// file, reads, and can be renamed over the original to settle the conflict or removed.
TEST_P(TreeTest, ASynchronizersConflictCopiesListAsReadableFilesWithTheirPlainName) {
  const std::string tag = "sync-conflict-20261204-051500-ABCD7EF";
  const std::string long_name = std::string(200, 'L') + ".txt";
  ASSERT_TRUE(tree_->MakeDir(*root_, "docs", 0755).ok());
  auto docs = std::move(tree_->OpenDir(*root_, "docs")).value();
  for (const std::string& name : {std::string("report.txt"), long_name}) {
    Write(*docs, name, "theirs");
    // What the synchronizer does: the other host's version lands under the conflict name.
    auto stored = tree_->Resolve(*docs, name);
    ASSERT_TRUE(stored.ok());
    const std::string copy = NameCodec::ConflictCopyName(stored->stored(), tag);
    ASSERT_TRUE(docs->backing().Rename(stored->stored(), docs->backing(), copy).ok());
    Write(*docs, name, "mine");
  }
  const std::string report_copy = "report." + tag + ".txt";
  const std::string long_copy = std::string(200, 'L') + "." + tag + ".txt";
  EXPECT_EQ(Names(*docs), (std::vector<std::string>{long_copy, std::string(200, 'L') + ".txt",
                                                    report_copy, "report.txt"}));
  EXPECT_EQ(Read(*docs, report_copy), "theirs");
  EXPECT_EQ(Read(*docs, "report.txt"), "mine");
  EXPECT_EQ(Read(*docs, long_copy), "theirs");
  // A conflict copy of the vault's own files (a directory's IV) is no entry.
  ASSERT_TRUE(
      docs->backing()
          .Link(kDirIvFileName, docs->backing(), NameCodec::ConflictCopyName(kDirIvFileName, tag))
          .ok());
  EXPECT_EQ(Names(*docs).size(), 4u);
  // Settled: the copy renamed over the original, and the other removed.
  ASSERT_TRUE(tree_->Rename(*docs, report_copy, *docs, "report.txt").ok());
  ASSERT_TRUE(tree_->Unlink(*docs, long_copy).ok());
  EXPECT_EQ(Names(*docs), (std::vector<std::string>{long_name, "report.txt"}));
  EXPECT_EQ(Read(*docs, "report.txt"), "theirs");
  // A user's own file of such a name is an ordinary entry, and comes first.
  Write(*docs, "notes." + tag + ".md", "a file named so");
  EXPECT_EQ(Read(*docs, "notes." + tag + ".md"), "a file named so");
  EXPECT_EQ(Names(*docs).size(), 3u);
}

TEST_P(TreeTest, AFailedFinishRemovesTheNewEntryWithWhatBelongsToIt) {
  const std::string long_name(240, 'f');
  const std::vector<std::string> before = Stored();
  const Tree::Finish refuse = [](BackingDir& object) {
    EXPECT_TRUE(object.Stat("").ok());  // a handle on the new entry itself
    return Status::FromErrno(ENOSPC, "no room for the ACL");
  };
  for (const std::string& name : {std::string("short"), long_name}) {
    EXPECT_EQ(Err(tree_->MakeDir(*root_, name, 0700, refuse)), ENOSPC) << name.size();
    EXPECT_EQ(Err(tree_->MakeNode(*root_, name, S_IFIFO | 0600, 0, refuse)), ENOSPC);
    EXPECT_EQ(Err(tree_->MakeSymlink(*root_, name, std::string(3500, 't'), refuse)), ENOSPC);
    EXPECT_EQ(Err(tree_->MakeFile(*root_, name, 0600, true, false, refuse).status()), ENOSPC);
    EXPECT_EQ(Stored(), before) << "a refused entry left something behind";
  }
  // Given, it runs once, on the new entry, and an existing file is not finished again.
  int finished = 0;
  const Tree::Finish count = [&](BackingDir& object) {
    ++finished;
    return object.SetMode("", 0640);
  };
  auto made = tree_->MakeFile(*root_, "f", 0600, false, false, count);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  EXPECT_TRUE(made->created);
  EXPECT_EQ(made->object->Stat("")->st_mode & 07777, 0640u);
  auto again = tree_->MakeFile(*root_, "f", 0600, false, false, count);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(again->object->Stat("")->st_ino, made->object->Stat("")->st_ino);
  EXPECT_EQ(Err(tree_->MakeFile(*root_, "f", 0600, true).status()), EEXIST);
}

TEST_P(TreeTest, ARemovalHandsBackTheObjectItWasAskedToKeep) {
  Write(*root_, "f", "kept contents");
  const std::string long_target(3500, 'l');
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "l", long_target).ok());
  ASSERT_TRUE(tree_->MakeDir(*root_, "d", 0700).ok());
  ASSERT_TRUE(tree_->MakeDir(*root_, "full", 0700).ok());
  auto full = tree_->OpenDir(*root_, "full");
  ASSERT_TRUE(full.ok());
  Write(**full, "x", "x");
  const std::vector<std::string> everything = Stored();

  Tree::Removed removed;
  removed.keep = [](const struct stat& st) { return S_ISREG(st.st_mode) || S_ISLNK(st.st_mode); };
  ASSERT_TRUE(tree_->Unlink(*root_, "f", &removed).ok());
  ASSERT_NE(removed.object, nullptr);
  EXPECT_TRUE(S_ISREG(removed.st.st_mode));
  EXPECT_EQ(removed.object->Stat("")->st_nlink, 0u);  // removed, and still reached
  EXPECT_TRUE(removed.object->OpenFile("", {.write = false}).ok());

  // A long target's side file is left to the caller while it keeps the link.
  Tree::Removed link;
  link.keep = removed.keep;
  ASSERT_TRUE(tree_->Unlink(*root_, "l", &link).ok());
  ASSERT_NE(link.object, nullptr);
  ASSERT_FALSE(link.target.empty());
  EXPECT_EQ(*volume_->DecryptSymlinkTarget(*store_, *link.object->ReadSymlink("")), long_target);
  volume_->ReleaseSymlinkTarget(*store_, link.target);

  // Not asked for, nothing kept; a refused removal keeps nothing and changes nothing.
  Tree::Removed dir;
  dir.keep = removed.keep;
  ASSERT_TRUE(tree_->RemoveDir(*root_, "d", &dir).ok());
  EXPECT_EQ(dir.object, nullptr);
  EXPECT_TRUE(S_ISDIR(dir.st.st_mode));
  const std::vector<std::string> left = Stored();
  Tree::Removed refused;
  refused.keep = [](const struct stat&) { return true; };
  EXPECT_EQ(Err(tree_->RemoveDir(*root_, "full", &refused)), ENOTEMPTY);
  EXPECT_EQ(refused.object, nullptr);
  EXPECT_EQ(Stored(), left);
  EXPECT_EQ(left.size(), everything.size() - 5);  // f, l and its side file, d and its IV
}

TEST_P(TreeTest, ARenameTellsWhatItMovedAndReplaced) {
  Write(*root_, "a", "a");
  Write(*root_, "b", "b");
  const ino_t a = tree_->StatStored(*root_, "a")->st_ino;
  const ino_t b = tree_->StatStored(*root_, "b")->st_ino;
  Tree::Renamed renamed;
  renamed.replaced.keep = [](const struct stat&) { return true; };
  ASSERT_TRUE(tree_->Rename(*root_, "a", *root_, "b", 0, &renamed).ok());
  EXPECT_TRUE(renamed.changed);
  EXPECT_EQ(renamed.moved.st_ino, a);
  EXPECT_EQ(renamed.replaced.st.st_ino, b);
  ASSERT_NE(renamed.replaced.object, nullptr);
  EXPECT_EQ(renamed.replaced.object->Stat("")->st_ino, b);
  EXPECT_EQ(Read(*root_, "b"), "a");

  // Two names of one file: nothing done, nothing told.
  ASSERT_TRUE(tree_->Link(*root_, "b", *root_, "c").ok());
  Tree::Renamed same;
  ASSERT_TRUE(tree_->Rename(*root_, "b", *root_, "c", 0, &same).ok());
  EXPECT_FALSE(same.changed);

  // An exchange moves both, removes neither.
  Write(*root_, "d", "d");
  Tree::Renamed swapped;
  ASSERT_TRUE(tree_->Rename(*root_, "b", *root_, "d", BackingDir::kExchange, &swapped).ok());
  EXPECT_TRUE(swapped.changed);
  EXPECT_EQ(swapped.moved.st_ino, a);
  EXPECT_EQ(swapped.replaced.object, nullptr);
  EXPECT_EQ(Read(*root_, "b"), "d");
  EXPECT_EQ(Read(*root_, "d"), "a");
}

TEST_P(TreeTest, AResolvedNameIsEncryptedOnceAndOnlyForItsDirectory) {
  ASSERT_TRUE(tree_->MakeDir(*root_, "sub", 0700).ok());
  auto sub = tree_->OpenDir(*root_, "sub");
  ASSERT_TRUE(sub.ok());
  auto name = tree_->Resolve(*root_, "same");
  ASSERT_TRUE(name.ok());
  EXPECT_EQ(name->plain(), "same");
  EXPECT_FALSE(name->stored().empty());
  Write(*root_, "same", "in the root");
  Write(**sub, "same", "in sub");
  // Used with another directory, the name is that directory's, not the resolved stored form.
  EXPECT_EQ(tree_->Stat(**sub, *name)->st_ino, tree_->Stat(**sub, "same")->st_ino);
  EXPECT_NE(tree_->Stat(**sub, *name)->st_ino, tree_->Stat(*root_, *name)->st_ino);
  // And a stored name read back (a listing's, a node's record) opens to the same entry.
  auto listed = tree_->Listed(*root_, name->stored());
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed->plain(), "same");
  EXPECT_FALSE(tree_->Listed(**sub, name->stored()).ok());  // another directory's IV
}

TEST_P(TreeTest, ATreeKeepingPlainNamesOutOfErrorsShowsStoredNames) {
  TreeOptions options;
  options.plain_names_in_errors = false;
  auto quiet = Tree::Open(*volume_, std::move(store_->OpenDir("")).value(), options);
  ASSERT_TRUE(quiet.ok());
  auto root = (*quiet)->Root();
  ASSERT_TRUE(root.ok());
  const Status s = (*quiet)->Unlink(**root, "secret-plan.txt");
  EXPECT_EQ(Err(s), ENOENT);
  EXPECT_EQ(s.ToString().find("secret"), std::string::npos) << s.ToString();
  const Status loud = tree_->Unlink(*root_, "secret-plan.txt");
  EXPECT_NE(loud.ToString().find("secret-plan.txt"), std::string::npos) << loud.ToString();
}

// A directory whose IV is lost (both copies) cannot be read, but it can still be removed when
// empty, and nothing of it is left.
TEST_P(TreeTest, AnEmptyDirectoryWhoseIvIsLostCanBeRemoved) {
  const std::vector<std::string> before = Stored();
  ASSERT_TRUE(tree_->MakeDir(*root_, "lost", 0700).ok());
  auto name = tree_->Resolve(*root_, "lost");
  ASSERT_TRUE(name.ok());
  auto sub = store_->OpenDir(name->stored());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE((*sub)->Unlink(kDirIvFileName).ok());
  (void)(*sub)->RemoveXattr("", kDirIvAttrName);  // where the store keeps attributes
  EXPECT_FALSE(tree_->OpenDir(*root_, "lost").ok());
  ASSERT_TRUE(tree_->RemoveDir(*root_, "lost").ok());
  EXPECT_EQ(Stored(), before);
}

TEST_P(TreeTest, DirectoriesNestWalkAndGoOnlyWhenEmpty) {
  ASSERT_TRUE(tree_->MakeDir(*root_, "a", 0700).ok());
  auto a = std::move(tree_->OpenDir(*root_, "a")).value();
  ASSERT_TRUE(tree_->MakeDir(*a, "b", 0700).ok());
  auto b = std::move(tree_->Walk("a//b/.")).value();
  EXPECT_EQ(b->path(), "a/b");
  Write(*b, "f", "deep");
  EXPECT_EQ(Read(*std::move(tree_->Walk("a/b")).value(), "f"), "deep");
  EXPECT_EQ(tree_->Walk("a/../a").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Err(tree_->Walk("a/b/f").status()), ENOTDIR);
  EXPECT_EQ(tree_->Walk("a/c").status().code(), Code::kNotFound);

  const std::vector<std::string> before = Stored();
  EXPECT_EQ(Err(tree_->RemoveDir(*root_, "a")), ENOTEMPTY);
  EXPECT_EQ(Err(tree_->RemoveDir(*b, "f")), ENOTDIR);
  EXPECT_EQ(Err(tree_->Unlink(*root_, "a")), EISDIR);
  EXPECT_EQ(Stored(), before);  // the IV files included
  EXPECT_EQ(Read(*b, "f"), "deep");

  ASSERT_TRUE(tree_->Unlink(*b, "f").ok());
  ASSERT_TRUE(tree_->RemoveDir(*a, "b").ok());
  ASSERT_TRUE(tree_->RemoveDir(*root_, "a").ok());
  EXPECT_EQ(Stored(), std::vector<std::string>{kDirIvFileName});
  EXPECT_TRUE(Names(*root_).empty());
}

TEST_P(TreeTest, ListingsResumeAtACursorWhileEntriesComeAndGo) {
  for (int i = 0; i < 20; ++i) Write(*root_, "f" + std::to_string(i), "x");
  std::vector<std::string> seen;
  uint64_t cursor = 0;
  ASSERT_TRUE(tree_
                  ->List(*root_, 0,
                         [&](const DirEntry& e) {
                           seen.push_back(e.name);
                           cursor = static_cast<uint64_t>(e.next_offset);
                           return seen.size() < 7;
                         })
                  .ok());
  ASSERT_EQ(seen.size(), 7u);
  // Entries seen go, new ones come: the listing goes on with the ones it has not shown.
  for (size_t i = 0; i < 3; ++i) ASSERT_TRUE(tree_->Unlink(*root_, seen[i]).ok());
  Write(*root_, "late", "x");
  ASSERT_TRUE(tree_
                  ->List(*root_, cursor,
                         [&](const DirEntry& e) {
                           seen.push_back(e.name);
                           return true;
                         })
                  .ok());
  std::map<std::string, int> count;
  for (const std::string& n : seen) ++count[n];
  for (int i = 0; i < 20; ++i) EXPECT_EQ(count["f" + std::to_string(i)], 1) << i;
}

TEST_P(TreeTest, RenamesReplaceRefuseAndExchangeAsRenameDoes) {
  Write(*root_, "a", "AAA");
  Write(*root_, "b", "BB");
  ASSERT_TRUE(tree_->MakeDir(*root_, "d", 0700).ok());
  ASSERT_TRUE(tree_->MakeDir(*root_, "e", 0700).ok());
  auto e = std::move(tree_->OpenDir(*root_, "e")).value();
  Write(*e, "inside", "I");

  std::vector<std::string> before = Stored();
  EXPECT_EQ(Err(tree_->Rename(*root_, "a", *root_, "b", BackingDir::kNoReplace)), EEXIST);
  EXPECT_EQ(Err(tree_->Rename(*root_, "a", *root_, "d")), EISDIR);
  EXPECT_EQ(Err(tree_->Rename(*root_, "d", *root_, "a")), ENOTDIR);
  EXPECT_EQ(Err(tree_->Rename(*root_, "d", *root_, "e")), ENOTEMPTY);
  EXPECT_EQ(Err(tree_->Rename(*root_, "a", *root_, "none", BackingDir::kExchange)), ENOENT);
  EXPECT_EQ(tree_->Rename(*root_, "none", *root_, "a").code(), Code::kNotFound);
  EXPECT_EQ(Stored(), before);
  EXPECT_EQ(Read(*root_, "a"), "AAA");
  EXPECT_EQ(Read(*e, "inside"), "I");

  ASSERT_TRUE(tree_->Rename(*root_, "a", *root_, "b", BackingDir::kExchange).ok());
  EXPECT_EQ(Read(*root_, "a"), "BB");
  EXPECT_EQ(Read(*root_, "b"), "AAA");
  ASSERT_TRUE(tree_->Rename(*root_, "a", *root_, "b").ok());  // over a file
  EXPECT_EQ(Read(*root_, "b"), "BB");
  EXPECT_EQ(Names(*root_), (std::vector<std::string>{"b", "d", "e"}));
  ASSERT_TRUE(tree_->Rename(*root_, "b", *e, "moved").ok());  // into another directory
  EXPECT_EQ(Read(*e, "moved"), "BB");
  ASSERT_TRUE(tree_->Rename(*root_, "e", *root_, "d").ok());  // a directory over an empty one
  auto d = std::move(tree_->OpenDir(*root_, "d")).value();
  EXPECT_EQ(Names(*d), (std::vector<std::string>{"inside", "moved"}));

  // Long names: each rename moves its side file with it, and nothing is left behind.
  const std::string long_a(200, 'a'), long_b(210, 'b');
  Write(*root_, long_a, "L1");
  Write(*root_, long_b, "L2");
  ASSERT_TRUE(tree_->Rename(*root_, long_a, *d, long_b).ok());
  ASSERT_TRUE(tree_->Rename(*root_, long_b, *root_, "short").ok());
  EXPECT_EQ(Read(*d, long_b), "L1");
  EXPECT_EQ(Read(*root_, "short"), "L2");
  ASSERT_TRUE(tree_->Rename(*d, long_b, *root_, "short").ok());
  EXPECT_EQ(Read(*root_, "short"), "L1");
  before = Stored();
  for (const std::string& s : before) EXPECT_EQ(s.find(".name"), std::string::npos) << s;
}

TEST_P(TreeTest, ARenameThatFailsOverAnEmptyDirectoryLeavesItWithItsIv) {
  ASSERT_TRUE(tree_->MakeDir(*root_, "d", 0700).ok());
  auto d = std::move(tree_->OpenDir(*root_, "d")).value();
  ASSERT_TRUE(tree_->MakeDir(*d, "sub", 0700).ok());
  const std::vector<std::string> before = Stored();
  // A directory cannot go below itself: the store refuses, and the empty target it was to
  // replace stays, IV and all.
  EXPECT_EQ(Err(tree_->Rename(*root_, "d", *d, "sub")), EINVAL);
  EXPECT_EQ(Stored(), before);
  auto sub = tree_->Walk("d/sub");
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  Write(**sub, "still", "usable");
  EXPECT_EQ(Read(**sub, "still"), "usable");
}

// A store that runs a hook when an entry is unlinked, between the unlink and its return: the
// moment another thread's call on the same name could come between a removal and its cleanup.
class HookedDir final : public test::ForwardingBackingDir {
 public:
  HookedDir(std::unique_ptr<BackingDir> inner, std::function<void(std::string_view)>* hook)
      : ForwardingBackingDir(std::move(inner)), hook_(hook) {}
  Status Unlink(std::string_view n) override {
    Status s = ForwardingBackingDir::Unlink(n);
    if (s.ok() && *hook_) (*hook_)(n);
    return s;
  }

 private:
  std::unique_ptr<BackingDir> Wrap(std::unique_ptr<BackingDir> inner) override {
    return std::make_unique<HookedDir>(std::move(inner), hook_);
  }
  std::function<void(std::string_view)>* hook_;
};

TEST_P(TreeTest, ARaceOfACreateAndARemovalOfOneLongNameKeepsItsSideFile) {
  std::function<void(std::string_view)> hook;
  auto store = test::NewStore(GetParam(), temp_.path() / "hooked");
  ASSERT_TRUE(Tree::Format(*store).ok());
  auto tree =
      std::move(Tree::Open(*volume_, std::make_unique<HookedDir>(std::move(store), &hook))).value();
  auto root = std::move(tree->Root()).value();
  const std::string long_name(230, 'r');
  ASSERT_TRUE(tree->CreateFile(*root, long_name, 0600).ok());
  // When the removal has unlinked the entry, another thread makes it again and is given up to
  // a quarter of a second: the removal must not then take the side file the new entry uses.
  bool fired = false;  // the hook runs on the removing thread only
  std::thread creator;
  hook = [&](std::string_view name) {
    if (fired || !NameCodec::IsLongName(name)) return;
    fired = true;
    creator = std::thread([&] { (void)tree->CreateFile(*root, long_name, 0600); });
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
    while (std::chrono::steady_clock::now() < deadline && !tree->StatStored(*root, long_name).ok())
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  ASSERT_TRUE(tree->Unlink(*root, long_name).ok());
  ASSERT_TRUE(fired);
  creator.join();  // blocked behind the removal until it was done, with a correct tree
  std::set<std::string> damaged;
  std::vector<DirEntry> list;
  ASSERT_TRUE(
      tree->ListSorted(*root, list,
                       [&](const std::string& stored, const Status&) { damaged.insert(stored); })
          .ok());
  EXPECT_TRUE(damaged.empty());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, long_name);
}

TEST_P(TreeTest, HardLinksShareContentsAndOutliveEachOtherName) {
  Write(*root_, "first", "shared");
  ASSERT_TRUE(tree_->MakeDir(*root_, "sub", 0700).ok());
  auto sub = std::move(tree_->OpenDir(*root_, "sub")).value();
  const std::string long_name(230, 'l');
  ASSERT_TRUE(tree_->Link(*root_, "first", *sub, long_name).ok());
  EXPECT_EQ(tree_->Stat(*root_, "first")->st_nlink, 2u);
  Write(*sub, long_name, "changed", /*create=*/false);
  EXPECT_EQ(Read(*root_, "first"), "changed");

  const std::vector<std::string> before = Stored();
  EXPECT_EQ(Err(tree_->Link(*root_, "sub", *root_, "dirlink")), EPERM);
  EXPECT_EQ(Err(tree_->Link(*root_, "first", *sub, long_name)), EEXIST);
  EXPECT_EQ(tree_->Link(*root_, "absent", *root_, "x").code(), Code::kNotFound);
  EXPECT_EQ(Stored(), before);  // the existing long name's side file stays

  ASSERT_TRUE(tree_->Unlink(*root_, "first").ok());
  EXPECT_EQ(Read(*sub, long_name), "changed");
  EXPECT_EQ(tree_->Stat(*sub, long_name)->st_nlink, 1u);
}

TEST_P(TreeTest, SymlinkTargetsShortAndLongGoWithTheirLink) {
  const std::vector<std::string> empty = Stored();
  const std::string long_target = "/" + std::string(4000, 'p');
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "long", long_target).ok());
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "short", "../x y").ok());
  EXPECT_EQ(*tree_->ReadLink(*root_, "long"), long_target);
  EXPECT_EQ(*tree_->ReadLink(*root_, "short"), "../x y");
  EXPECT_EQ(Stored().size(), empty.size() + 3);  // two links and one target file
  EXPECT_EQ(Err(tree_->ReadLink(*root_, "absent").status()), ENOENT);

  // Replaced by a rename, a long target's file goes; so it does when the link is removed.
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "long2", long_target).ok());
  ASSERT_TRUE(tree_->Rename(*root_, "short", *root_, "long").ok());
  EXPECT_EQ(*tree_->ReadLink(*root_, "long"), "../x y");
  EXPECT_EQ(Stored().size(), empty.size() + 3);
  ASSERT_TRUE(tree_->Unlink(*root_, "long2").ok());
  ASSERT_TRUE(tree_->Unlink(*root_, "long").ok());
  EXPECT_EQ(Stored(), empty);
}

TEST_P(TreeTest, AttributesModesTimesAndSealedExtendedAttributes) {
  Write(*root_, "f", "data");
  ASSERT_TRUE(tree_->MakeSymlink(*root_, "l", "f").ok());
  ASSERT_TRUE(tree_->SetMode(*root_, "f", 0640).ok());
  const struct timespec times[2] = {{1000, 5}, {2000, 7}};
  ASSERT_TRUE(tree_->SetTimes(*root_, "f", times).ok());
  auto st = tree_->Stat(*root_, "f");
  EXPECT_EQ(st->st_mode & 07777, 0640u);
  EXPECT_EQ(st->st_mtim.tv_sec, 2000);
  EXPECT_EQ(st->st_mtim.tv_nsec, 7);
  EXPECT_EQ(st->st_atim.tv_sec, 1000);
  ASSERT_TRUE(tree_->SetTimes(*root_, "l", times).ok());  // the link's, not its target's
  EXPECT_EQ(tree_->Stat(*root_, "l")->st_mtim.tv_sec, 2000);
  ASSERT_TRUE(tree_->SetSize(*root_, "f", 2).ok());
  EXPECT_EQ(Read(*root_, "f"), "da");

  ASSERT_TRUE(tree_->SetXattr(*root_, "f", "user.color", Bytes("blue")).ok());
  ASSERT_TRUE(tree_->SetXattr(*root_, "", "user.dir", Bytes("root")).ok());
  auto value = tree_->GetXattr(*root_, "f", "user.color");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(std::string(value->begin(), value->end()), "blue");
  EXPECT_EQ(*tree_->ListXattrs(*root_, "f"), std::vector<std::string>{"user.color"});
  EXPECT_EQ(*tree_->ListXattrs(*root_, ""), std::vector<std::string>{"user.dir"});  // no IV
  // Stored sealed under a hashed name.
  const std::string stored_f = *volume_->StoredName(root_->iv(), "f");
  const std::vector<std::string> keys = *store_->ListXattrs(stored_f);
  EXPECT_EQ(keys.size(), 1u);
  for (const std::string& key : keys) {
    EXPECT_EQ(key.find("color"), std::string::npos);
    auto sealed = store_->GetXattr(stored_f, key);
    EXPECT_EQ(std::string(sealed->begin(), sealed->end()).find("blue"), std::string::npos);
  }

  // Refusals change nothing.
  EXPECT_EQ(Err(tree_->SetXattr(*root_, "f", "user.color", Bytes("red"), XATTR_CREATE)), EEXIST);
  EXPECT_EQ(Err(tree_->SetXattr(*root_, "f", "user.new", Bytes("x"), XATTR_REPLACE)), ENODATA);
  EXPECT_EQ(Err(tree_->SetXattr(*root_, "f", "trusted.x", Bytes("x"))), EOPNOTSUPP);
  EXPECT_EQ(Err(tree_->SetXattr(*root_, "l", "user.x", Bytes("x"))), EPERM);
  EXPECT_EQ(Err(tree_->GetXattr(*root_, "l", "user.x").status()), ENODATA);
  EXPECT_EQ(Err(tree_->GetXattr(*root_, "f", "user.none").status()), ENODATA);
  EXPECT_EQ(Err(tree_->RemoveXattr(*root_, "f", "user.none")), ENODATA);
  value = tree_->GetXattr(*root_, "f", "user.color");
  EXPECT_EQ(std::string(value->begin(), value->end()), "blue");
  EXPECT_EQ(*tree_->ListXattrs(*root_, "f"), std::vector<std::string>{"user.color"});

  ASSERT_TRUE(tree_->RemoveXattr(*root_, "f", "user.color").ok());
  EXPECT_TRUE(tree_->ListXattrs(*root_, "f")->empty());

  // A value moved to another attribute's key does not open as that attribute.
  ASSERT_TRUE(tree_->SetXattr(*root_, "f", "user.a", Bytes("A")).ok());
  ASSERT_TRUE(tree_->SetXattr(*root_, "f", "user.b", Bytes("B")).ok());
  const std::string& f = stored_f;
  const std::string key_a = *volume_->names().XattrStoredName("user.a");
  const std::string key_b = *volume_->names().XattrStoredName("user.b");
  ASSERT_TRUE(store_->SetXattr(f, key_a, *store_->GetXattr(f, key_b)).ok());
  EXPECT_FALSE(tree_->GetXattr(*root_, "f", "user.a").ok());
  int damaged = 0;
  auto names =
      tree_->ListXattrs(*root_, "f", [&](const std::string&, const Status&) { ++damaged; });
  EXPECT_EQ(damaged + names->size(), 2u);
}

TEST_P(TreeTest, AnObjectHeldOpenHasItsOwnAttributesAndAnAclChangesWithItsMode) {
  Write(*root_, "f", "data");
  // A handle on the root directory itself, as a mount holds its nodes.
  auto object = std::move(root_->backing().OpenDir("")).value();
  ASSERT_TRUE(tree_->SetXattr(*root_, "f", "user.a", Bytes("1")).ok());
  ASSERT_TRUE(tree_->SetXattr(*object, "user.dir", Bytes("2")).ok());  // the root itself
  EXPECT_EQ(*tree_->ListXattrs(*object), std::vector<std::string>{"user.dir"});
  auto v = tree_->GetXattr(*object, "user.dir");
  EXPECT_EQ(std::string(v->begin(), v->end()), "2");
  ASSERT_TRUE(tree_->RemoveXattr(*object, "user.dir").ok());
  EXPECT_EQ(Err(tree_->RemoveXattr(*object, "user.dir")), ENODATA);

  // An ACL stored with the mode it implies; removed, the mode still set; none to remove is no
  // error.
  const std::vector<uint8_t> acl = {
      2, 0,    0,    0,    1,    0,    6,    0, 0xff, 0xff, 0xff, 0xff, 2,    0,    4,
      0, 0x39, 0x30, 0,    0,    4,    0,    4, 0,    0xff, 0xff, 0xff, 0xff, 0x10, 0,
      4, 0,    0xff, 0xff, 0xff, 0xff, 0x20, 0, 0,    0,    0xff, 0xff, 0xff, 0xff};
  ASSERT_TRUE(tree_->StoreAcl(*object, "system.posix_acl_default", &acl, 0, 0750).ok());
  EXPECT_EQ(tree_->Stat(*root_, "")->st_mode & 07777, 0750u);
  EXPECT_EQ(*tree_->GetXattr(*object, "system.posix_acl_default"), acl);
  EXPECT_EQ(*tree_->ListXattrs(*object), std::vector<std::string>{"system.posix_acl_default"});
  ASSERT_TRUE(tree_->StoreAcl(*object, "system.posix_acl_default", nullptr, 0, 0755).ok());
  EXPECT_EQ(tree_->Stat(*root_, "")->st_mode & 07777, 0755u);
  EXPECT_EQ(Err(tree_->GetXattr(*object, "system.posix_acl_default").status()), ENODATA);
  EXPECT_TRUE(tree_->StoreAcl(*object, "system.posix_acl_default", nullptr, 0, 0755).ok());
  EXPECT_EQ(Err(tree_->StoreAcl(*object, "user.x", &acl, 0, 0755)), EINVAL);
  EXPECT_EQ(*tree_->ListXattrs(*root_, "f"), std::vector<std::string>{"user.a"});
}

TEST_P(TreeTest, StagedEntriesAppearWholeOrNotAtAll) {
  const std::vector<std::string> empty = Stored();
  {
    auto staged = tree_->StageFile(*root_);
    ASSERT_TRUE(staged.ok()) << staged.status().ToString();
    ASSERT_TRUE((*staged)->contents()->Write(0, Bytes("staged data")).ok());
    (*staged)->SetMode(0604);
    (*staged)->SetTimes({10, 0}, {20, 0});
    ASSERT_TRUE((*staged)->SetXattr("user.k", Bytes("v")).ok());
    EXPECT_TRUE(Names(*root_).empty());  // not visible while staged
    ASSERT_TRUE((*staged)->Place("doc", /*replace=*/false).ok());
  }
  EXPECT_EQ(Names(*root_), std::vector<std::string>{"doc"});
  EXPECT_EQ(Read(*root_, "doc"), "staged data");
  auto st = tree_->Stat(*root_, "doc");
  EXPECT_EQ(st->st_mode & 07777, 0604u);
  EXPECT_EQ(st->st_mtim.tv_sec, 20);  // times set after the contents were written back
  EXPECT_EQ(*tree_->ListXattrs(*root_, "doc"), std::vector<std::string>{"user.k"});
  const std::vector<std::string> one = Stored();

  {  // Not over an existing entry unless asked; after the refusal it is still staged.
    auto staged = std::move(tree_->StageSymlink(*root_, std::string(3500, 't'))).value();
    EXPECT_EQ(staged->Place("doc", /*replace=*/false).code(), Code::kExists);
    EXPECT_EQ(Read(*root_, "doc"), "staged data");
  }
  EXPECT_EQ(Stored(), one);  // the dropped link and its target file are gone
  {
    auto staged = std::move(tree_->StageNode(*root_, S_IFIFO | 0600, 0)).value();
    ASSERT_TRUE(tree_->MakeDir(*root_, "dir", 0700).ok());
    EXPECT_EQ(staged->Place("dir", /*replace=*/true).code(), Code::kExists);
    ASSERT_TRUE(tree_->RemoveDir(*root_, "dir").ok());
  }
  EXPECT_EQ(Stored(), one);
  {  // A staged entry keeps its directory open: the caller's handle may go first.
    auto staged =
        std::move(tree_->StageNode(*std::move(tree_->Walk("")).value(), S_IFIFO | 0600, 0)).value();
    ASSERT_TRUE(staged->Place("fifo", /*replace=*/false).ok());
    ASSERT_TRUE(tree_->Unlink(*root_, "fifo").ok());
  }
  {  // Replacing: a reader sees the old entry or the new one.
    auto staged = std::move(tree_->StageLink(*root_, "doc", *root_)).value();
    ASSERT_TRUE(staged->Place(std::string(250, 'n'), /*replace=*/false).ok());
    auto again = std::move(tree_->StageSymlink(*root_, "doc")).value();
    ASSERT_TRUE(again->Place("doc", /*replace=*/true).ok());
  }
  EXPECT_EQ(*tree_->ReadLink(*root_, "doc"), "doc");
  EXPECT_EQ(Read(*root_, std::string(250, 'n')), "staged data");
  ASSERT_TRUE(tree_->Unlink(*root_, "doc").ok());
  ASSERT_TRUE(tree_->Unlink(*root_, std::string(250, 'n')).ok());
  EXPECT_EQ(Stored(), empty);
}

TEST_P(TreeTest, AStoreWithoutAVaultTreeIsRefused) {
  std::unique_ptr<BackingDir> bare = test::NewStore(GetParam(), temp_.path() / "bare");
  EXPECT_EQ(Tree::Open(*volume_, std::move(bare)).status().code(), Code::kCorrupt);
}

SIGILFS_INSTANTIATE_FOR_STORES(TreeTest);

// A store through which one call creating entry `target` first runs `race` (another host's
// call, reaching the store in that moment).
class RaceBeforeCreate : public test::ForwardingBackingDir {
 public:
  struct Shared {
    std::string target;
    std::function<void()> race;
    std::string refuse;  // a file whose create fails (ENOSPC) once the race has run
  };
  RaceBeforeCreate(std::unique_ptr<BackingDir> inner, std::shared_ptr<Shared> shared)
      : ForwardingBackingDir(std::move(inner)), shared_(std::move(shared)) {}

  Result<std::unique_ptr<BackingFile>> OpenFile(std::string_view n,
                                                const FileOpenMode& how) override {
    if (how.create) Before(n);
    if (how.create && n == shared_->refuse && !shared_->race)
      return Status::FromErrno(ENOSPC, "no room");
    return ForwardingBackingDir::OpenFile(n, how);
  }
  Status MakeNode(std::string_view n, mode_t m, dev_t r) override {
    Before(n);
    return ForwardingBackingDir::MakeNode(n, m, r);
  }
  Status MakeSymlink(std::string_view n, std::string_view t) override {
    Before(n);
    return ForwardingBackingDir::MakeSymlink(n, t);
  }
  Status Link(std::string_view n, BackingDir& to, std::string_view tn) override {
    Before(tn);
    return ForwardingBackingDir::Link(n, to, tn);
  }
  Status Rename(std::string_view n, BackingDir& to, std::string_view tn, unsigned f) override {
    Before(tn);
    return ForwardingBackingDir::Rename(n, to, tn, f);
  }

 protected:
  std::unique_ptr<BackingDir> Wrap(std::unique_ptr<BackingDir> inner) override {
    return std::make_unique<RaceBeforeCreate>(std::move(inner), shared_);
  }

 private:
  void Before(std::string_view name) {
    if (name != shared_->target || !shared_->race) return;
    std::exchange(shared_->race, nullptr)();
  }
  std::shared_ptr<Shared> shared_;
};

// Two hosts share a vault: one removes an entry of a long name while the other makes an entry
// of that very name. The name's side file (its full encrypted text) is both entries' own; the
// remover takes it between the maker's writing it and the maker's create. The maker's look after
// its create puts it back, for every kind of entry and every way of making one.
TEST(TreeSharedTest, AnEntryMadeWhileAnotherHostRemovesTheNameKeepsItsSideFile) {
  test::TempDir temp;
  VolumeOptions options;
  options.pages.shared = true;
  auto volume = test::NewTestVolume((temp.path() / "vault").string(), std::move(options));
  std::unique_ptr<BackingDir> store = test::NewStore(test::Store::kPosix, temp.path() / "store");
  ASSERT_TRUE(Tree::Format(*store).ok());
  auto look = std::move(store->OpenDir("")).value();
  auto shared = std::make_shared<RaceBeforeCreate::Shared>();
  auto maker = std::move(Tree::Open(*volume, std::make_unique<RaceBeforeCreate>(
                                                 std::move(store->OpenDir("")).value(), shared)))
                   .value();
  auto remover = std::move(Tree::Open(*volume, std::move(store))).value();
  auto maker_root = std::move(maker->Root()).value();
  auto remover_root = std::move(remover->Root()).value();
  {
    auto file = std::move(maker->CreateFile(*maker_root, "source", 0644, true)).value();
    ASSERT_TRUE(file->Write(0, Bytes("linked")).ok());
    ASSERT_TRUE(file->Flush().ok());
  }

  const std::vector<std::string> kinds = {"file", "dir", "symlink", "fifo", "link", "rename"};
  auto make = [&](const std::string& kind, const std::string& name) -> Status {
    if (kind == "file") return maker->MakeFile(*maker_root, name, 0644, true, false).status();
    if (kind == "dir") return maker->MakeDir(*maker_root, name, 0755);
    if (kind == "symlink") return maker->MakeSymlink(*maker_root, name, "target");
    if (kind == "fifo") return maker->MakeNode(*maker_root, name, S_IFIFO | 0644, 0);
    if (kind == "link") return maker->Link(*maker_root, "source", *maker_root, name);
    SIGILFS_RETURN_IF_ERROR(maker->MakeFile(*maker_root, "moved", 0644, true, false).status());
    return maker->Rename(*maker_root, "moved", *maker_root, name, 0);
  };
  for (const std::string& kind : kinds) {
    SCOPED_TRACE(kind);
    const std::string name = std::string(220, 'n') + "-" + kind;
    {  // The other host's entry of the name, which it is about to remove.
      auto file = remover->CreateFile(*remover_root, name, 0644, true);
      ASSERT_TRUE(file.ok()) << file.status().ToString();
    }
    const std::string stored = std::move(maker->Resolve(*maker_root, name)).value().stored();
    ASSERT_TRUE(NameCodec::IsLongName(stored));
    shared->target = stored;
    shared->race = [&] { ASSERT_TRUE(remover->Unlink(*remover_root, name).ok()); };
    const Status made = make(kind, name);
    ASSERT_TRUE(made.ok()) << made.ToString();
    EXPECT_EQ(shared->race, nullptr) << "the removal did not run in between";
    EXPECT_TRUE(look->Stat(NameCodec::SideFileName(stored)).ok()) << "the side file is gone";
    // The other host lists the entry by its name, undamaged.
    std::vector<DirEntry> listed;
    std::vector<std::string> damaged;
    ASSERT_TRUE(remover
                    ->ListSorted(*remover_root, listed,
                                 [&](const std::string& n, const Status&) { damaged.push_back(n); })
                    .ok());
    EXPECT_TRUE(damaged.empty());
    EXPECT_TRUE(std::any_of(listed.begin(), listed.end(),
                            [&](const DirEntry& e) { return e.name == name; }));
  }

  // The side file cannot be written back (the store is full): the new entry goes again and the
  // call fails, leaving the name free. (A rename is not undone: it reports the error, and its
  // entry lists as damaged until renamed again.)
  for (const std::string& kind : kinds) {
    SCOPED_TRACE("full store: " + kind);
    const std::string name = std::string(220, 'f') + "-" + kind;
    {
      auto file = remover->CreateFile(*remover_root, name, 0644, true);
      ASSERT_TRUE(file.ok()) << file.status().ToString();
    }
    const std::string stored = std::move(maker->Resolve(*maker_root, name)).value().stored();
    shared->target = stored;
    shared->refuse = NameCodec::SideFileName(stored);
    shared->race = [&] { ASSERT_TRUE(remover->Unlink(*remover_root, name).ok()); };
    const Status made = make(kind, name);
    EXPECT_EQ(made.sys_errno(), ENOSPC) << made.ToString();
    EXPECT_FALSE(look->Stat(NameCodec::SideFileName(stored)).ok());
    if (kind == "rename") {
      EXPECT_TRUE(look->Stat(stored).ok());
      ASSERT_TRUE(look->Unlink(stored).ok());
    } else {
      EXPECT_EQ(look->Stat(stored).status().code(), Code::kNotFound) << "the entry stayed";
    }
  }
  EXPECT_TRUE(maker->Resolve(*maker_root, "source").ok());
}

}  // namespace
}  // namespace sigilfs::core
