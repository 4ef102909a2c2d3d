// OpenDirCache: the store handles a front end keeps open for the directory nodes in use, so that
// a request in a directory does not walk the directory's path from the store's root.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <unordered_map>

#include "sigilfs/core/backing_dir.h"
#include "sigilfs/core/node_table.h"
#include "sigilfs/mutex.h"

namespace sigilfs::core {

// A node is reached by path (core::Node): three store calls (open, check, close) before a lookup
// or a create in its directory can start, more than the lookup itself. A handle kept open names
// the directory's object itself, whatever happens to its names, so it is the node's for as long
// as it is kept; what a front end must still do is drop it where the node stops being that
// object's (Close, when the directory is removed) and use it only where its store has no other
// writer that could replace the directory behind it (a shared mount walks the path every time).
//
// At most `capacity` handles are kept (a descriptor each), the least recently used closed first.
// A handle never keeps its node alive: one kept for a node since gone is never given for another
// node that took its address, and is closed when found or when it falls out.
// Thread-safety: safe for concurrent access. Handles are released outside the lock.
class OpenDirCache {
 public:
  explicit OpenDirCache(size_t capacity) : capacity_(capacity) {}
  OpenDirCache(const OpenDirCache&) = delete;
  OpenDirCache& operator=(const OpenDirCache&) = delete;

  // `node`'s handle, made the most recently used; null if none is kept.
  std::shared_ptr<BackingDir> Find(const Node& node) SIGILFS_EXCLUDES(mu_);
  // Keeps `dir` as `node`'s handle (replacing one kept), closing the least recently used beyond
  // the capacity.
  void Keep(const std::shared_ptr<Node>& node, std::shared_ptr<BackingDir> dir)
      SIGILFS_EXCLUDES(mu_);
  // Drops `node`'s handle and gives it back, so the caller decides where it closes (calls in
  // flight keep theirs); null if none was kept.
  std::shared_ptr<BackingDir> Close(const Node& node) SIGILFS_EXCLUDES(mu_);
  size_t size() const SIGILFS_EXCLUDES(mu_);
  size_t capacity() const { return capacity_; }

 private:
  struct Kept {
    std::weak_ptr<const Node> node;  // to tell this node from a later one at its address
    std::shared_ptr<BackingDir> dir;
    std::list<const Node*>::iterator at;  // its place in order_
  };
  // Takes the entry of `it` out, its handle into `closed`.
  void EraseLocked(std::unordered_map<const Node*, Kept>::iterator it,
                   std::shared_ptr<BackingDir>* closed) SIGILFS_REQUIRES(mu_);

  const size_t capacity_;
  mutable Mutex mu_;
  std::unordered_map<const Node*, Kept> kept_ SIGILFS_GUARDED_BY(mu_);
  std::list<const Node*> order_ SIGILFS_GUARDED_BY(mu_);  // the most recently used first
};

}  // namespace sigilfs::core
