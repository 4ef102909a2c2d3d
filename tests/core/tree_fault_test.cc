// The namespace on a failing disk: every change Tree makes, run again and again with the store
// failing its first, second, third... call (EIO, ENOSPC), must either fail and leave the store
// exactly as it was, or succeed and leave the tree it promises, with no damage for fsck.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sigilfs/core/check.h"
#include "sigilfs/core/tree.h"
#include "test_support/forwarding_backing_dir.h"
#include "test_support/forwarding_backing_file.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

// Which call of the store fails: the `countdown`th from now (0: none), with `err`.
struct Fault {
  int countdown = 0;
  int err = EIO;
  bool fired = false;
  Status Hit(std::string_view what) {
    if (countdown == 0 || --countdown != 0) return Status::Ok();
    fired = true;
    return Status::FromErrno(err, "injected: " + std::string(what));
  }
};

// A file of the faulty store: its writes, truncates and flushes count too.
class FaultyFile final : public test::ForwardingBackingFile {
 public:
  FaultyFile(std::unique_ptr<BackingFile> inner, std::shared_ptr<Fault> fault)
      : ForwardingBackingFile(std::move(inner)), fault_(std::move(fault)) {}
  Status WriteAt(std::span<const ByteSpan> bufs, uint64_t offset) override {
    SIGILFS_RETURN_IF_ERROR(fault_->Hit("write"));
    return ForwardingBackingFile::WriteAt(bufs, offset);
  }
  Status Truncate(uint64_t size) override {
    SIGILFS_RETURN_IF_ERROR(fault_->Hit("truncate"));
    return ForwardingBackingFile::Truncate(size);
  }
  Status Sync(bool data_only) override {
    SIGILFS_RETURN_IF_ERROR(fault_->Hit("sync"));
    return ForwardingBackingFile::Sync(data_only);
  }

 private:
  std::shared_ptr<Fault> fault_;
};

// A store every call of which (through any handle opened from it) may be the failing one.
class FaultyDir final : public test::ForwardingBackingDir {
 public:
  FaultyDir(std::unique_ptr<BackingDir> inner, std::shared_ptr<Fault> fault)
      : ForwardingBackingDir(std::move(inner)), fault_(std::move(fault)) {}

 private:
  Status Enter(std::string_view what) override { return fault_->Hit(what); }
  std::unique_ptr<BackingDir> Wrap(std::unique_ptr<BackingDir> inner) override {
    return std::make_unique<FaultyDir>(std::move(inner), fault_);
  }
  std::unique_ptr<BackingFile> WrapFile(std::unique_ptr<BackingFile> file) override {
    return std::make_unique<FaultyFile>(std::move(file), fault_);
  }

  std::shared_ptr<Fault> fault_;
};

ByteSpan Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

const std::string kLong(230, 'n');  // stored hashed, with a side file

// One change to make, from the tree Populate leaves.
struct Change {
  const char* what;
  std::function<Status(Tree&, const Tree::Dir& root)> run;
};

std::vector<Change> Changes() {
  return {
      {"mkdir", [](Tree& t, const Tree::Dir& r) { return t.MakeDir(r, "new", 0750); }},
      {"mkdir of a long name",
       [](Tree& t, const Tree::Dir& r) { return t.MakeDir(r, kLong + "d", 0700); }},
      {"mknod",
       [](Tree& t, const Tree::Dir& r) { return t.MakeNode(r, "fifo", S_IFIFO | 0600, 0); }},
      {"symlink with a long target",
       [](Tree& t, const Tree::Dir& r) {
         return t.MakeSymlink(r, kLong + "l", std::string(3600, 't'));
       }},
      {"create",
       [](Tree& t, const Tree::Dir& r) { return t.CreateFile(r, kLong + "f", 0600).status(); }},
      {"link", [](Tree& t, const Tree::Dir& r) { return t.Link(r, "file", r, kLong + "k"); }},
      {"unlink of a long name", [](Tree& t, const Tree::Dir& r) { return t.Unlink(r, kLong); }},
      {"unlink of a long symlink", [](Tree& t, const Tree::Dir& r) { return t.Unlink(r, "link"); }},
      {"rmdir", [](Tree& t, const Tree::Dir& r) { return t.RemoveDir(r, "empty"); }},
      {"rename over a file",
       [](Tree& t, const Tree::Dir& r) { return t.Rename(r, "file", r, kLong); }},
      {"rename over an empty directory",
       [](Tree& t, const Tree::Dir& r) { return t.Rename(r, "full", r, "empty"); }},
      {"rename into another directory",
       [](Tree& t, const Tree::Dir& r) {
         SIGILFS_ASSIGN_OR_RETURN(auto full, t.OpenDir(r, "full"));
         return t.Rename(r, kLong, *full, "moved");
       }},
      {"exchange",
       [](Tree& t, const Tree::Dir& r) {
         return t.Rename(r, "file", r, "full", BackingDir::kExchange);
       }},
      {"set an attribute",
       [](Tree& t, const Tree::Dir& r) { return t.SetXattr(r, "file", "user.tag", Bytes("v")); }},
      {"remove an attribute",
       [](Tree& t, const Tree::Dir& r) { return t.RemoveXattr(r, "full", "user.old"); }},
      {"staged file placed over another",
       [](Tree& t, const Tree::Dir& r) {
         SIGILFS_ASSIGN_OR_RETURN(auto staged, t.StageFile(r));
         SIGILFS_RETURN_IF_ERROR(staged->contents()->Write(0, Bytes("staged")).status());
         staged->SetMode(0640);
         return staged->Place("file", /*replace=*/true);
       }},
  };
}

class TreeFaultTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override { volume_ = test::NewTestVolume((temp_.path() / "vault").string()); }

  // A fresh store holding the starting tree, failing from now on as `fault` says.
  std::unique_ptr<Tree> Fresh(const std::string& name, const std::shared_ptr<Fault>& fault) {
    std::unique_ptr<BackingDir> store = test::NewStore(GetParam(), temp_.path() / name);
    EXPECT_TRUE(Tree::Format(*store).ok());
    view_ = std::move(store->OpenDir("")).value();
    auto tree = Tree::Open(*volume_, std::make_unique<FaultyDir>(std::move(store), fault));
    EXPECT_TRUE(tree.ok()) << tree.status().ToString();
    auto root = std::move((*tree)->Root()).value();
    Tree& t = **tree;
    EXPECT_TRUE(t.MakeDir(*root, "empty", 0700).ok());
    EXPECT_TRUE(t.MakeDir(*root, "full", 0700).ok());
    auto full = std::move(t.OpenDir(*root, "full")).value();
    EXPECT_TRUE(t.MakeNode(*full, "inside", S_IFIFO | 0600, 0).ok());
    EXPECT_TRUE(t.SetXattr(*root, "full", "user.old", Bytes("x")).ok());
    for (const std::string& name : {std::string("file"), kLong}) {
      auto f = t.CreateFile(*root, name, 0644);
      EXPECT_TRUE(f.ok() && (*f)->Write(0, Bytes("contents of " + name.substr(0, 8))).ok() &&
                  (*f)->Sync(false).ok());
    }
    EXPECT_TRUE(t.MakeSymlink(*root, "link", std::string(3500, 's')).ok());
    return std::move(tree).value();
  }

  // The tree as its user sees it: each entry's path, kind, mode, size (a file's contents, a
  // link's target) and its attributes, through `tree`.
  std::map<std::string, std::string> Plain(Tree& tree, const Tree::Dir& dir,
                                           const std::string& prefix = "") {
    std::map<std::string, std::string> out;
    std::vector<DirEntry> entries;
    EXPECT_TRUE(tree.ListSorted(dir, entries).ok());
    for (const DirEntry& e : entries) {
      auto st = tree.Stat(dir, e.name);
      EXPECT_TRUE(st.ok()) << prefix + e.name;
      if (!st.ok()) continue;
      std::string desc = std::to_string(st->st_mode) + " " + std::to_string(st->st_size);
      if (S_ISREG(st->st_mode)) {
        auto f = tree.OpenFile(dir, e.name, false);
        std::string data(static_cast<size_t>(st->st_size), '\0');
        if (f.ok() && (*f)->Read(0, {reinterpret_cast<uint8_t*>(data.data()), data.size()}).ok())
          desc += " " + std::to_string(std::hash<std::string>{}(data));
        else
          desc += " unreadable";
      } else if (S_ISLNK(st->st_mode)) {
        auto target = tree.ReadLink(dir, e.name);
        desc += " -> " + (target.ok() ? std::to_string(target->size()) : "unreadable");
      }
      if (auto x = tree.ListXattrs(dir, e.name); x.ok()) {
        std::sort(x->begin(), x->end());
        for (const auto& a : *x) desc += " " + a;
      }
      out[prefix + e.name] = desc;
      if (S_ISDIR(st->st_mode)) {
        auto sub = tree.OpenDir(dir, e.name);
        EXPECT_TRUE(sub.ok());
        if (sub.ok())
          for (auto& [k, v] : Plain(tree, **sub, prefix + e.name + "/")) out[k] = v;
      }
    }
    return out;
  }

  // Everything stored: each entry's path, kind, mode and size, and its attributes' names.
  std::map<std::string, std::string> Snapshot(BackingDir* dir = nullptr,
                                              const std::string& prefix = "") {
    if (dir == nullptr) dir = view_.get();
    std::map<std::string, std::string> out;
    EXPECT_TRUE(dir->List(0,
                          [&](const BackingEntry& e) {
                            auto st = dir->Stat(e.name);
                            if (!st.ok()) return true;
                            std::string desc =
                                std::to_string(st->st_mode) + " " +
                                std::to_string(S_ISDIR(st->st_mode) ? 0 : st->st_size);
                            if (auto x = dir->ListXattrs(e.name); x.ok()) {
                              std::sort(x->begin(), x->end());
                              for (const auto& a : *x) desc += " " + a;
                            }
                            out[prefix + e.name] = desc;
                            if (S_ISDIR(st->st_mode)) {
                              auto sub = dir->OpenDir(e.name);
                              for (auto& [k, v] : Snapshot(sub->get(), prefix + e.name + "/"))
                                out[k] = v;
                            }
                            return true;
                          })
                    .ok());
    return out;
  }

  // The snapshot without what a best-effort cleanup that failed may leave, which nothing lists
  // and docs/format.md calls safe to delete: hidden entries (and what they hold), and side
  // files of long names and long targets whose entry is gone.
  static std::map<std::string, std::string> Visible(std::map<std::string, std::string> all) {
    const auto orphan = [&all](const std::string& path) {
      if (path.find(".sigilfs.") != std::string::npos) return true;
      const size_t slash = path.rfind('/');
      const std::string last = path.substr(slash == std::string::npos ? 0 : slash + 1);
      if (last.starts_with("sigilfs.target.")) return true;  // no link may name it: see below
      if (last.starts_with("sigilfs.long.") && last.ends_with(".name"))
        return !all.contains(path.substr(0, path.size() - 5));
      return false;
    };
    std::map<std::string, std::string> out;
    for (const auto& [path, desc] : all)
      if (!orphan(path)) out[path] = desc;
    return out;
  }

  uint64_t Problems(Tree& tree) {
    uint64_t problems = 0;
    CheckTree(tree, [&](const std::string& path, const Status& s) {
      ADD_FAILURE() << path << ": " << s.ToString();
      ++problems;
    });
    return problems;
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<BackingDir> view_;  // the store as it is, without faults
};

TEST_P(TreeFaultTest, EveryChangeFailsCleanlyOrCompletesWhicheverCallOfTheStoreFails) {
  int run = 0;
  for (const Change& change : Changes()) {
    // What the change leaves when nothing fails.
    auto none = std::make_shared<Fault>();
    auto tree = Fresh("run" + std::to_string(run++), none);
    auto root = std::move(tree->Root()).value();
    const Status clean = change.run(*tree, *root);
    ASSERT_TRUE(clean.ok()) << change.what << ": " << clean.ToString();
    const auto done = Plain(*tree, *root);
    const size_t done_stored = Visible(Snapshot()).size();
    for (const int err : {EIO, ENOSPC}) {
      for (int nth = 1;; ++nth) {
        auto fault = std::make_shared<Fault>();
        tree = Fresh("run" + std::to_string(run++), fault);
        root = std::move(tree->Root()).value();
        const auto before = Snapshot();
        fault->countdown = nth;
        fault->err = err;
        const Status s = change.run(*tree, *root);
        fault->countdown = 0;
        const auto after = Snapshot();
        SCOPED_TRACE(std::string(change.what) + ", store call " + std::to_string(nth) +
                     " failing with " + std::to_string(err) + ": " + s.ToString());
        if (!s.ok()) {
          EXPECT_TRUE(fault->fired);
          EXPECT_EQ(after, before) << "a failed change changed the store";
        } else {
          EXPECT_EQ(Plain(*tree, *root), done) << "a change that succeeded did not do it all";
          EXPECT_EQ(Visible(after).size(), done_stored) << "it left something behind";
        }
        EXPECT_EQ(Problems(*tree), 0u);
        tree.reset();
        if (!fault->fired) break;  // the change made fewer calls than `nth`: all tried
        ASSERT_LT(nth, 200) << "no end to the calls";
      }
    }
  }
}

SIGILFS_INSTANTIATE_FOR_STORES(TreeFaultTest);

}  // namespace
}  // namespace sigilfs::core
