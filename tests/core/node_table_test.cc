// The namespace model without a kernel: core::NodeTable driven over core::Tree as a front end
// drives it (lookup, create, rename over, link, unlink while open, forget and look up again, a
// second front end changing the store underneath), against the POSIX and the memory store.
#include "sigilfs/core/node_table.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sigilfs/core/tree.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

// A front end as small as the model allows: nodes reached by their stored paths from the root,
// directories given their IVs read from the store, the table told of every change made here.
class Front {
 public:
  Front(Volume& volume, std::unique_ptr<BackingDir> store, NodeTableOptions options = {})
      : root_(std::move(store->OpenObject("")).value()),
        tree_(std::move(Tree::Open(volume, std::move(store))).value()),
        table_(*root_->Stat(""), std::move(options)) {}

  NodeTable& table() { return table_; }
  Tree& tree() { return *tree_; }
  const std::shared_ptr<Node>& root() { return table_.root(); }

  Result<std::unique_ptr<Tree::Dir>> DirOf(const Node& node) {
    SIGILFS_ASSIGN_OR_RETURN(std::shared_ptr<BackingDir> object, Open(node));
    SIGILFS_ASSIGN_OR_RETURN(DirIv iv, tree_->volume().ReadDirIv(*object));
    return tree_->DirOf(std::move(object), iv, table_.PathOf(node));
  }

  // The node of `name` in `parent`, one lookup taken.
  Result<std::shared_ptr<Node>> Lookup(const std::shared_ptr<Node>& parent,
                                       const std::string& name) {
    SIGILFS_ASSIGN_OR_RETURN(auto dir, DirOf(*parent));
    SIGILFS_ASSIGN_OR_RETURN(EntryName entry, tree_->Resolve(*dir, name));
    SIGILFS_ASSIGN_OR_RETURN(struct stat st, tree_->StatStored(*dir, entry));
    auto still_there = [this](const Node::Name& first, const struct stat& now) {
      auto dir = Open(*first.parent);
      if (!dir.ok()) return false;
      auto st = (*dir)->Stat(first.stored);
      return st.ok() && st->st_dev == now.st_dev && st->st_ino == now.st_ino;
    };
    return table_.Intern(st, parent, entry.stored(), still_there);
  }

  Status MakeFile(const std::shared_ptr<Node>& parent, const std::string& name) {
    SIGILFS_ASSIGN_OR_RETURN(auto dir, DirOf(*parent));
    return tree_->MakeNode(*dir, name, S_IFREG | 0644, 0);
  }
  Status MakeDir(const std::shared_ptr<Node>& parent, const std::string& name) {
    SIGILFS_ASSIGN_OR_RETURN(auto dir, DirOf(*parent));
    return tree_->MakeDir(*dir, name, 0755);
  }
  Status Link(const std::shared_ptr<Node>& parent, const std::string& name,
              const std::string& to_name) {
    SIGILFS_ASSIGN_OR_RETURN(auto dir, DirOf(*parent));
    return tree_->Link(*dir, name, *dir, to_name);
  }

  // Removes `name`; a node the kernel holds, left without names, keeps a handle on its object.
  Status Unlink(const std::shared_ptr<Node>& parent, const std::string& name) {
    SIGILFS_ASSIGN_OR_RETURN(auto dir, DirOf(*parent));
    SIGILFS_ASSIGN_OR_RETURN(EntryName entry, tree_->Resolve(*dir, name));
    std::shared_ptr<Node> node;
    Tree::Removed removed;
    removed.keep = [&](const struct stat& st) {
      node = table_.Find(st, *parent, entry.stored());
      // Only an object this removal deletes, of a node the kernel holds.
      if (!S_ISDIR(st.st_mode) && st.st_nlink != 1) return false;
      return node != nullptr && table_.Lookups(*node) > 0;
    };
    SIGILFS_RETURN_IF_ERROR(tree_->Unlink(*dir, entry, &removed));
    table_.DropName(*parent, entry.stored());
    if (node) {
      MutexLock lock(node->name_mu);
      RemoveName(*node, *parent, entry.stored());
      if (node->names.empty() && removed.object) node->removed = std::move(removed.object);
    }
    if (!removed.target.empty()) tree_->volume().ReleaseSymlinkTarget(removed.target);
    return Status::Ok();
  }

  // Renames `from` over `to` in `parent`, the moved node's name following.
  Status Rename(const std::shared_ptr<Node>& parent, const std::string& from,
                const std::string& to) {
    SIGILFS_ASSIGN_OR_RETURN(auto dir, DirOf(*parent));
    SIGILFS_ASSIGN_OR_RETURN(EntryName a, tree_->Resolve(*dir, from));
    SIGILFS_ASSIGN_OR_RETURN(EntryName b, tree_->Resolve(*dir, to));
    Tree::Renamed renamed;
    SIGILFS_RETURN_IF_ERROR(tree_->Rename(*dir, a, *dir, b, 0, &renamed));
    if (!renamed.changed) return Status::Ok();
    if (auto replaced = table_.Find(renamed.replaced.st, *parent, b.stored())) {
      MutexLock lock(replaced->name_mu);
      RemoveName(*replaced, *parent, b.stored());
    }
    std::shared_ptr<Node> moved = table_.Find(renamed.moved, *parent, a.stored());
    table_.MoveName(*parent, a.stored(), *parent, b.stored(), false);
    if (moved) {
      MutexLock lock(moved->name_mu);
      RemoveName(*moved, *parent, a.stored());
      AddName(*moved, parent, b.stored());
    }
    return Status::Ok();
  }

  void Forget(const std::shared_ptr<Node>& node, uint64_t n = 1) {
    std::vector<std::shared_ptr<Node>> dropped;
    table_.Forget(table_.IdOf(*node), n, &dropped);
  }

  // A handle on the node's object: through its first name, or the handle kept when removed.
  Result<std::shared_ptr<BackingDir>> Open(const Node& node) {
    std::string path;
    if (&node != root().get()) {
      MutexLock lock(node.name_mu);
      if (node.names.empty()) {
        if (!node.removed) return Status(Code::kNotFound, "removed");
        return node.removed;
      }
    }
    if (&node != root().get()) path = table_.PathOf(node);
    SIGILFS_ASSIGN_OR_RETURN(std::unique_ptr<BackingDir> object, root_->OpenObject(path));
    return std::shared_ptr<BackingDir>(std::move(object));
  }

 private:
  std::unique_ptr<BackingDir> root_;
  std::unique_ptr<Tree> tree_;
  NodeTable table_;
};

class NamespaceModelTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    store_ = test::NewStore(GetParam(), temp_.path() / "store");
    ASSERT_TRUE(Tree::Format(*store_).ok());
    a_ = NewFront();
  }

  std::unique_ptr<Front> NewFront(NodeTableOptions options = {}) {
    return std::make_unique<Front>(*volume_, std::move(store_->OpenObject("")).value(),
                                   std::move(options));
  }

  static std::shared_ptr<Node> Must(Result<std::shared_ptr<Node>> node) {
    EXPECT_TRUE(node.ok()) << node.status().ToString();
    return node.ok() ? std::move(node).value() : nullptr;
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<BackingDir> store_;
  std::unique_ptr<Front> a_;
};

TEST_P(NamespaceModelTest, ALookupGivesOneNodePerObjectCountedPerLookup) {
  ASSERT_TRUE(a_->MakeFile(a_->root(), "f").ok());
  const uint64_t nodes = a_->table().counts().nodes;
  auto first = Must(a_->Lookup(a_->root(), "f"));
  auto again = Must(a_->Lookup(a_->root(), "f"));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first, again);
  EXPECT_EQ(a_->table().Lookups(*first), 2u);
  EXPECT_EQ(a_->table().counts().nodes, nodes + 1);
  EXPECT_EQ(a_->table().Get(a_->table().IdOf(*first)), first);
  EXPECT_EQ(a_->table().Known(a_->table().IdOf(*first)), first);
  EXPECT_NE(first->generation, 0u) << "0 is the root's";
  EXPECT_EQ(a_->table().IdOf(*a_->root()), 1u);
  EXPECT_EQ(a_->table().Known(12345), nullptr) << "an id never given is unknown";
  EXPECT_EQ(a_->Lookup(a_->root(), "missing").status().code(), Code::kNotFound);

  a_->Forget(first, 2);
  EXPECT_EQ(a_->table().counts().nodes, nodes) << "forgotten, with no file handles kept";
  EXPECT_EQ(a_->table().Known(a_->table().IdOf(*first)), nullptr);
}

TEST_P(NamespaceModelTest, CreatedEntriesGetTheirOwnNodesIdsAndGenerations) {
  ASSERT_TRUE(a_->MakeFile(a_->root(), "a").ok());
  ASSERT_TRUE(a_->MakeDir(a_->root(), "d").ok());
  auto a = Must(a_->Lookup(a_->root(), "a"));
  auto d = Must(a_->Lookup(a_->root(), "d"));
  ASSERT_TRUE(a_->MakeFile(d, "b").ok());
  auto b = Must(a_->Lookup(d, "b"));
  ASSERT_TRUE(a && d && b);
  EXPECT_NE(a_->table().IdOf(*a), a_->table().IdOf(*b));
  EXPECT_NE(a->generation, b->generation);
  EXPECT_TRUE(S_ISDIR(d->type));
  EXPECT_TRUE(S_ISREG(b->type));
  std::vector<Node::Name> names;
  {
    MutexLock lock(b->name_mu);
    names = b->names;
  }
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names.front().parent, d);
  EXPECT_EQ(a_->table().PathOf(*b), a_->table().PathOf(*d) + "/" + names.front().stored);
}

TEST_P(NamespaceModelTest, ARenameOverMovesTheNameAndLeavesTheReplacedNodeWithout) {
  ASSERT_TRUE(a_->MakeFile(a_->root(), "a").ok());
  ASSERT_TRUE(a_->MakeFile(a_->root(), "b").ok());
  auto a = Must(a_->Lookup(a_->root(), "a"));
  auto b = Must(a_->Lookup(a_->root(), "b"));
  ASSERT_TRUE(a_->Rename(a_->root(), "a", "b").ok());
  {
    MutexLock lock(b->name_mu);
    EXPECT_TRUE(b->names.empty()) << "the replaced object has no name left";
  }
  EXPECT_EQ(Must(a_->Lookup(a_->root(), "b")), a) << "the moved node, found by its new name";
  EXPECT_EQ(a_->Lookup(a_->root(), "a").status().code(), Code::kNotFound);
  EXPECT_EQ(a_->table().Lookups(*a), 2u);
}

TEST_P(NamespaceModelTest, ALinkGivesTheNodeASecondName) {
  ASSERT_TRUE(a_->MakeFile(a_->root(), "a").ok());
  auto a = Must(a_->Lookup(a_->root(), "a"));
  ASSERT_TRUE(a_->Link(a_->root(), "a", "c").ok());
  auto c = Must(a_->Lookup(a_->root(), "c"));
  EXPECT_EQ(c, a) << "one object, one node";
  {
    MutexLock lock(a->name_mu);
    EXPECT_EQ(a->names.size(), 2u);
  }
  // Its first name gone, it is reached by the other.
  ASSERT_TRUE(a_->Unlink(a_->root(), "c").ok());
  auto opened = a_->Open(*a);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(Must(a_->Lookup(a_->root(), "a")), a);
}

TEST_P(NamespaceModelTest, AnObjectRemovedWhileHeldStaysReachableUntilForgotten) {
  ASSERT_TRUE(a_->MakeFile(a_->root(), "f").ok());
  auto f = Must(a_->Lookup(a_->root(), "f"));
  f->is_open = true;  // as a front end's open file
  const uint64_t nodes = a_->table().counts().nodes;
  ASSERT_TRUE(a_->Unlink(a_->root(), "f").ok());
  ASSERT_NE(f->removed, nullptr);
  auto st = f->removed->Stat("");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->st_nlink, 0u) << "removed, and still reached";
  EXPECT_TRUE(a_->Open(*f).ok());
  EXPECT_EQ(a_->table().counts().nodes, nodes);

  // A new entry of the same name is another object: another node.
  ASSERT_TRUE(a_->MakeFile(a_->root(), "f").ok());
  auto g = Must(a_->Lookup(a_->root(), "f"));
  EXPECT_NE(g, f);
  f->is_open = false;
  std::vector<std::shared_ptr<Node>> dropped;
  a_->table().Forget(a_->table().IdOf(*f), 1, &dropped);
  EXPECT_EQ(a_->table().counts().nodes, nodes) << "f went, g came";
}

TEST_P(NamespaceModelTest, AForgottenNodeIsRememberedAndFoundAgain) {
  NodeTableOptions remember;
  remember.remember = 2;
  auto front = NewFront(remember);
  for (const char* name : {"a", "b", "c"}) ASSERT_TRUE(front->MakeFile(front->root(), name).ok());
  auto a = Must(front->Lookup(front->root(), "a"));
  const uint64_t id = front->table().IdOf(*a);
  const uint32_t generation = a->generation;
  front->Forget(a);
  EXPECT_EQ(front->table().counts().remembered, 1u);
  EXPECT_EQ(front->table().Known(id), a) << "a file handle still finds it";
  a.reset();
  auto again = Must(front->Lookup(front->root(), "a"));
  EXPECT_EQ(front->table().IdOf(*again), id);
  EXPECT_EQ(again->generation, generation);
  EXPECT_EQ(front->table().counts().remembered, 0u) << "held again";

  // At most `remember` stay: the oldest goes first.
  front->Forget(again);
  again.reset();
  auto b = Must(front->Lookup(front->root(), "b"));
  auto c = Must(front->Lookup(front->root(), "c"));
  front->Forget(b);
  front->Forget(c);
  EXPECT_EQ(front->table().counts().remembered, 2u);
  EXPECT_EQ(front->table().Known(id), nullptr) << "the oldest was let go";

  // Without remembering, a forgotten node goes; looked up again it is a new node.
  auto d = Must(a_->Lookup(a_->root(), "a"));
  const uint32_t old = d->generation;
  a_->Forget(d);
  d.reset();
  auto e = Must(a_->Lookup(a_->root(), "a"));
  EXPECT_NE(e->generation, old);
}

TEST_P(NamespaceModelTest, AForgottenDirectoryStaysForItsChildAndGoesWithIt) {
  const uint64_t nodes = a_->table().counts().nodes;
  ASSERT_TRUE(a_->MakeDir(a_->root(), "d").ok());
  auto d = Must(a_->Lookup(a_->root(), "d"));
  ASSERT_TRUE(a_->MakeDir(d, "e").ok());
  auto e = Must(a_->Lookup(d, "e"));
  const uint64_t d_id = a_->table().IdOf(*d), e_id = a_->table().IdOf(*e);
  d.reset();
  e.reset();
  std::vector<std::shared_ptr<Node>> dropped;
  a_->table().Forget(d_id, 1, &dropped);
  EXPECT_EQ(a_->table().counts().nodes, nodes + 2) << "kept: its child names it";
  a_->table().Forget(e_id, 1, &dropped);
  dropped.clear();
  EXPECT_EQ(a_->table().counts().nodes, nodes) << "gone with its child";
}

TEST_P(NamespaceModelTest, AnEntryAnotherFrontEndReplacedGetsAFreshNode) {
  ASSERT_TRUE(a_->MakeFile(a_->root(), "x").ok());
  auto held = Must(a_->Lookup(a_->root(), "x"));
  const uint64_t nodes = a_->table().counts().nodes;

  // The other front end replaces the file with a directory of the same name.
  auto b = NewFront();
  ASSERT_TRUE(b->Unlink(b->root(), "x").ok());
  ASSERT_TRUE(b->MakeDir(b->root(), "x").ok());

  auto now = Must(a_->Lookup(a_->root(), "x"));
  ASSERT_NE(now, nullptr);
  EXPECT_NE(now, held);
  EXPECT_TRUE(S_ISDIR(now->type));
  EXPECT_EQ(a_->table().Known(a_->table().IdOf(*held)), held)
      << "the old node keeps its id while the kernel holds it";
  EXPECT_EQ(a_->table().counts().nodes, nodes + 1);
  a_->Forget(held);
  EXPECT_EQ(a_->table().counts().nodes, nodes);

  // A name made by the other front end in a directory this one holds is found here.
  ASSERT_TRUE(b->MakeFile(Must(b->Lookup(b->root(), "x")), "inside").ok());
  EXPECT_NE(Must(a_->Lookup(now, "inside")), nullptr);
}

TEST_P(NamespaceModelTest, WhereTheStoreRenumbersNodesAreKnownByTheirNames) {
  NodeTableOptions by_name;
  by_name.keeps_inode_numbers = false;
  auto front = NewFront(by_name);
  ASSERT_TRUE(front->MakeFile(front->root(), "a").ok());
  ASSERT_TRUE(front->MakeFile(front->root(), "b").ok());
  auto a = Must(front->Lookup(front->root(), "a"));
  EXPECT_EQ(Must(front->Lookup(front->root(), "a")), a);
  ASSERT_TRUE(front->Link(front->root(), "a", "c").ok());
  EXPECT_NE(Must(front->Lookup(front->root(), "c")), a) << "each name its own node";

  // A rename takes the name's number along: the node is found under its new name.
  ASSERT_TRUE(front->Rename(front->root(), "a", "b").ok());
  EXPECT_EQ(Must(front->Lookup(front->root(), "b")), a);
}

// A tree over the test's store with `options`, and a handle on directory `name` of the root as
// it is now (what an operation of a front end opens).
struct TreeAndDir {
  std::unique_ptr<Tree> tree;
  std::unique_ptr<BackingDir> dir;
};

TEST_P(NamespaceModelTest, ADirectoryIvIsCachedOnItsNodeUnlessTheStoreIsShared) {
  ASSERT_TRUE(a_->MakeDir(a_->root(), "d").ok());
  auto open = [&](bool shared) {
    TreeOptions options;
    options.shared = shared;
    auto tree =
        std::move(Tree::Open(*volume_, std::move(store_->OpenObject("")).value(), options)).value();
    auto root = std::move(tree->Root()).value();
    auto stored = *tree->Resolve(*root, "d");
    return TreeAndDir{std::move(tree), std::move(store_->OpenObject(stored.stored())).value()};
  };
  const auto shown = [] { return std::string("d"); };
  TreeAndDir cached = open(false), shared = open(true);
  auto node = std::make_shared<Node>(), shared_node = std::make_shared<Node>();
  const DirIv before = *volume_->ReadDirIv(*cached.dir);
  EXPECT_EQ(*cached.tree->DirIvOf(*node, *cached.dir, shown), before);
  EXPECT_EQ(*shared.tree->DirIvOf(*shared_node, *shared.dir, shown), before);
  {
    MutexLock lock(node->mu);
    EXPECT_EQ(node->iv, before);
  }
  {
    MutexLock lock(shared_node->mu);
    EXPECT_FALSE(shared_node->iv.has_value()) << "nothing is cached of a shared store";
  }

  // Another front end replaces the directory (rm -rf d; mkdir d): a new IV.
  auto root = std::move(a_->tree().Root()).value();
  ASSERT_TRUE(a_->tree().RemoveDir(*root, "d").ok());
  ASSERT_TRUE(a_->tree().MakeDir(*root, "d", 0755).ok());
  TreeAndDir now = open(false);
  const DirIv after = *volume_->ReadDirIv(*now.dir);
  ASSERT_NE(after, before);
  // A private store's front end made every change itself: its cache stands. A shared one reads
  // the IV the store holds now, at every use.
  EXPECT_EQ(*cached.tree->DirIvOf(*node, *now.dir, shown), before);
  EXPECT_EQ(*shared.tree->DirIvOf(*shared_node, *now.dir, shown), after);
}

TEST_P(NamespaceModelTest, ATornIvFileIsRepairedByTheTreeUnlessReadOnly) {
  ASSERT_TRUE(a_->MakeDir(a_->root(), "d").ok());
  auto root = std::move(a_->tree().Root()).value();
  const std::string stored = a_->tree().Resolve(*root, "d")->stored();
  auto dir = std::move(store_->OpenObject(stored)).value();
  const DirIv iv = *volume_->ReadDirIv(*dir);
  ASSERT_TRUE((*dir->OpenFile(kDirIvFileName, {}))->Truncate(5).ok());  // what a crash leaves
  bool from_attribute = false;
  if (!volume_->ReadDirIv(*dir, &from_attribute).ok() || !from_attribute)
    GTEST_SKIP() << "the store keeps no extended attributes";
  for (const bool repair : {false, true}) {
    std::vector<std::string> log;
    TreeOptions options;
    options.repair = repair;
    options.log = [&log](const std::string& line) { log.push_back(line); };
    auto tree =
        std::move(Tree::Open(*volume_, std::move(store_->OpenObject("")).value(), options)).value();
    auto node = std::make_shared<Node>();
    EXPECT_EQ(*tree->DirIvOf(*node, *dir, [] { return std::string("d"); }), iv);
    // Repaired and reported once; a read-only front end reads the attribute and changes nothing.
    ASSERT_EQ(log.size(), repair ? 1u : 0u);
    if (repair) {
      EXPECT_NE(log[0].find("directory d: IV file torn"), std::string::npos) << log[0];
      EXPECT_NE(log[0].find("file restored"), std::string::npos) << log[0];
    }
    EXPECT_EQ(dir->Stat(kDirIvFileName)->st_size, static_cast<off_t>(repair ? kDirIvSize : 5));
    // Once cached, the node's IV is not read again: nothing more to repair or to log.
    EXPECT_EQ(*tree->DirIvOf(*node, *dir, [] { return std::string("d"); }), iv);
    EXPECT_EQ(log.size(), repair ? 1u : 0u);
  }
}

SIGILFS_INSTANTIATE_FOR_STORES(NamespaceModelTest);

}  // namespace
}  // namespace sigilfs::core
