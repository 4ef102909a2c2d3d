// OpenDirCache: directory handles kept per node, the least recently used closed first.
#include "sigilfs/core/open_dir_cache.h"

#include <utility>
#include <vector>

namespace sigilfs::core {

void OpenDirCache::EraseLocked(std::unordered_map<const Node*, Kept>::iterator it,
                               std::shared_ptr<BackingDir>* closed) {
  *closed = std::move(it->second.dir);
  order_.erase(it->second.at);
  kept_.erase(it);
}

std::shared_ptr<BackingDir> OpenDirCache::Find(const Node& node) {
  std::shared_ptr<BackingDir> stale;  // closed after the lock
  MutexLock lock(mu_);
  auto it = kept_.find(&node);
  if (it == kept_.end()) return nullptr;
  // `node` is alive (the caller holds it): a live entry at its address is its own.
  if (it->second.node.expired()) {
    EraseLocked(it, &stale);
    return nullptr;
  }
  order_.splice(order_.begin(), order_, it->second.at);
  return it->second.dir;
}

void OpenDirCache::Keep(const std::shared_ptr<Node>& node, std::shared_ptr<BackingDir> dir) {
  if (capacity_ == 0 || !node || !dir) return;
  std::vector<std::shared_ptr<BackingDir>> closed;  // after the lock
  MutexLock lock(mu_);
  if (auto it = kept_.find(node.get()); it != kept_.end()) {
    closed.push_back(std::move(it->second.dir));
    it->second.node = node;
    it->second.dir = std::move(dir);
    order_.splice(order_.begin(), order_, it->second.at);
    return;
  }
  order_.push_front(node.get());
  kept_.emplace(node.get(), Kept{node, std::move(dir), order_.begin()});
  while (kept_.size() > capacity_) {
    closed.emplace_back();
    EraseLocked(kept_.find(order_.back()), &closed.back());
  }
}

std::shared_ptr<BackingDir> OpenDirCache::Close(const Node& node) {
  std::shared_ptr<BackingDir> closed;
  MutexLock lock(mu_);
  if (auto it = kept_.find(&node); it != kept_.end()) EraseLocked(it, &closed);
  return closed;
}

size_t OpenDirCache::size() const {
  MutexLock lock(mu_);
  return kept_.size();
}

}  // namespace sigilfs::core
