// NodeTable: the objects a front end's kernel knows (a mount's or a reverse view's node ids):
// their keys, lookup counts, generations, names, remembered and displaced nodes.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/volume.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {

// One object a kernel knows by a node id. No handle is held per node (a kernel can know
// millions, far past the descriptor limit): a node remembers each (directory, stored name) it
// is known by and is reached by path from the store's root. A front end may derive its own
// node type (NodeTableOptions::make_node) for what it keeps per node.
struct Node : std::enable_shared_from_this<Node> {
  uint64_t key_dev = 0, key_ino = 0;  // its table key (see NodeTable)
  mode_t type = 0;                    // S_IFMT bits
  struct Name {
    std::shared_ptr<Node> parent;
    std::string stored;
  };
  // Every name it is known by (several for hard links), the first the one to use; empty once
  // removed. Changed by renames and removals, and by lookups, always under name_mu.
  mutable Mutex name_mu;
  std::vector<Name> names SIGILFS_GUARDED_BY(name_mu);
  // With the node id, what a file handle names: a new node gets a new generation, so a handle
  // of a node gone is stale, never another object. 0 for the root, as FUSE requires.
  uint32_t generation = 0;
  // The node id where it persists across mounts (NodeTable::Intern's `persistent_id`); 0: the
  // node's address is its id.
  uint64_t nodeid = 0;
  // A node whose last name its front end removed while the kernel still holds it: a handle on
  // the object, opened before the removal, through which it is still reached (as ext4 reaches
  // an unlinked open file). Set before the node is shared with a reader of it (the front end's
  // namespace lock orders both); closed with the node.
  std::shared_ptr<BackingDir> removed;
  // Whether `removed` was set: read by a forget, which holds no lock that ordered the setting.
  std::atomic<bool> keeps_removed{false};
  // Such a node of a symlink whose target is in a side file: released with the node, so that
  // the link still reads until then.
  std::string removed_target;
  const Volume* removed_target_volume = nullptr;
  // Set while the object is open: an open object keeps its inode (and number) alive, which
  // proves a table hit is this node. Atomic: the table reads it without the node's lock.
  std::atomic<bool> is_open{false};
  // The ACLs the object is known not to have, for a front end that is its store's one writer
  // (KnownAbsentAcls, which alone writes it). Kept while the node is remembered.
  std::atomic<uint8_t> absent_acls{0};

  Mutex mu;                                        // before the table's lock
  std::optional<DirIv> iv SIGILFS_GUARDED_BY(mu);  // directories: the cached name IV

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  virtual ~Node();

 private:
  friend class NodeTable;
  // Lookups the kernel holds, and its place among the remembered nodes: the table's lock's.
  uint64_t nlookup_ = 0;
  std::optional<std::list<Node*>::iterator> forgotten_at_;
};

// Name bookkeeping: adds (or moves to the front) `stored` in `parent`, and removes it. Names
// compare by the parent's key, not its node object: a directory may be known by two nodes
// (one displaced, not yet forgotten).
void AddName(Node& node, const std::shared_ptr<Node>& parent, const std::string& stored)
    SIGILFS_REQUIRES(node.name_mu);
void RemoveName(Node& node, const Node& parent, const std::string& stored)
    SIGILFS_REQUIRES(node.name_mu);

struct NodeTableOptions {
  // The store keeps an object's inode number while it exists (BackingDir::KeepsInodeNumbers).
  // Where it does not (sshfs renumbers an object each time its kernel looks it up again), a
  // node is known by its name: its key is a number the table gives (parent's key, stored name),
  // which renames move and removals drop.
  bool keeps_inode_numbers = true;
  // How many nodes the kernel forgot stay known, most recently forgotten first (for file
  // handles that name them later). 0: only the nodes the kernel holds.
  size_t remember = 0;
  // The generation of a node with a persistent id (the same in every mount); others get one
  // from a counter that starts at random.
  std::function<uint32_t(uint64_t id)> generation_of;
  // Makes an empty node (a front end's own type); a Node by default.
  std::function<std::shared_ptr<Node>()> make_node;
  // Given each table hit's verdict, for investigating divergences (no plaintext in it).
  std::function<void(const std::string&)> debug_log;
};

// The node table in numbers.
struct NodeCounts {
  uint64_t nodes = 0;       // nodes known: the kernel's, remembered and displaced ones
  uint64_t remembered = 0;  // nodes the kernel forgot, kept for file handles
};

// One node per object the kernel knows, keyed by the store's (device, inode number) or by the
// name's number (NodeTableOptions::keeps_inode_numbers); a directory also while a known node
// names it as its parent; a forgotten node while remembered. A node whose key a new object
// takes while the kernel holds it is displaced (kept, with its id, until forgotten), so node
// ids never dangle.
// Thread-safety: safe for concurrent access. Lock order: Node::mu, then the table's lock, then
// Node::name_mu.
class NodeTable {
 public:
  // `root_st`: the store root's attributes; the root is node id 1, held for good.
  NodeTable(const struct stat& root_st, NodeTableOptions options);
  ~NodeTable();
  NodeTable(const NodeTable&) = delete;
  NodeTable& operator=(const NodeTable&) = delete;

  const std::shared_ptr<Node>& root() const { return root_; }
  uint64_t IdOf(const Node& node) const;
  // The node of an id the kernel holds (not checked: the kernel names only ids it was given).
  std::shared_ptr<Node> Get(uint64_t id) const;
  // The node of any id, checked: null unless the table knows it.
  std::shared_ptr<Node> Known(uint64_t id) const;

  // The node for object `st`, found as `stored` in `parent`, one lookup taken. A table hit is
  // this object only if provably so: open, reached by this very name, or `still_there` says
  // its first name still leads to `st` (called under the table's lock). A new node's id is
  // `persistent_id()` (if given and not 0 and free), else its address.
  using StillThere = std::function<bool(const Node::Name& first, const struct stat& st)>;
  std::shared_ptr<Node> Intern(const struct stat& st, const std::shared_ptr<Node>& parent,
                               const std::string& stored, const StillThere& still_there,
                               const std::function<uint64_t()>& persistent_id = {});
  // The kernel drops `n` lookups of `id`. Nodes that leave the table go to `dropped`, for the
  // caller to release once it may close what they hold.
  void Forget(uint64_t id, uint64_t n, std::vector<std::shared_ptr<Node>>* dropped);
  // The node of object `st` as `stored` in `parent`, if the table has one.
  std::shared_ptr<Node> Find(const struct stat& st, const Node& parent,
                             const std::string& stored) const;
  // Lookups the kernel holds of `node`.
  uint64_t Lookups(const Node& node) const;
  // Name numbers (stores that renumber): a rename moves its name's (both ways for an
  // exchange; a replaced target's goes); a removal drops it.
  void MoveName(const Node& from_dir, const std::string& from, const Node& to_dir,
                const std::string& to, bool exchange);
  void DropName(const Node& dir, const std::string& stored);
  // The stored path of `node` from the root ("." for the root), through first names; the
  // caller keeps names from changing meanwhile.
  std::string PathOf(const Node& node) const;
  NodeCounts counts() const;
  // Every node in the table (not displaced ones).
  std::vector<std::shared_ptr<Node>> Nodes() const;

 private:
  using Key = std::pair<uint64_t, uint64_t>;
  using Map = std::map<Key, std::shared_ptr<Node>>;
  Key KeyLocked(const struct stat& st, const Node& parent, const std::string& stored)
      SIGILFS_REQUIRES(mu_);
  void DropNameIdsOfLocked(const Node& node) SIGILFS_REQUIRES(mu_);
  // `node` left the table or the displaced for good: unless still held, its names go, and so
  // do the forgotten directories only they kept in the table.
  void DropLocked(std::shared_ptr<Node> node, std::vector<std::shared_ptr<Node>>* dropped)
      SIGILFS_REQUIRES(mu_);
  // The kernel forgot `it`'s node: it leaves unless a directory other nodes still name.
  void ReleaseLocked(Map::iterator it, std::vector<std::shared_ptr<Node>>* dropped)
      SIGILFS_REQUIRES(mu_);
  void RememberLocked(Node& node, std::vector<std::shared_ptr<Node>>* dropped)
      SIGILFS_REQUIRES(mu_);
  void UnrememberLocked(Node& node) SIGILFS_REQUIRES(mu_);
  void UnknowLocked(const Node& node) SIGILFS_REQUIRES(mu_);
  std::shared_ptr<Node> MakeNode() const;

  const NodeTableOptions options_;
  std::shared_ptr<Node> root_;
  mutable Mutex mu_;
  Map table_ SIGILFS_GUARDED_BY(mu_);
  // Nodes displaced from table_ (their key was taken by another object) the kernel still holds.
  std::map<Node*, std::shared_ptr<Node>> displaced_ SIGILFS_GUARDED_BY(mu_);
  // The ids of every node in table_ and displaced_. Changed under mu_ and ids_mu_, read under
  // ids_mu_ alone.
  std::unordered_map<uint64_t, Node*> known_ SIGILFS_GUARDED_BY(ids_mu_);
  mutable SharedMutex ids_mu_ SIGILFS_ACQUIRED_AFTER(mu_);
  // Nodes of table_ the kernel forgot, oldest first, at most options_.remember.
  std::list<Node*> forgotten_ SIGILFS_GUARDED_BY(mu_);
  // Stores that renumber: the key (second half) of the node known by (parent's key, stored).
  std::map<std::pair<uint64_t, std::string>, uint64_t> name_ids_ SIGILFS_GUARDED_BY(mu_);
  uint64_t next_name_id_ SIGILFS_GUARDED_BY(mu_) = 2;  // 1 is the root's
  uint32_t next_generation_ SIGILFS_GUARDED_BY(mu_) = 1;
};

}  // namespace sigilfs::core
