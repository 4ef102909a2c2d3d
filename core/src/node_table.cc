// The node table: which objects a kernel knows, by which ids, and when they are let go.
#include "sigilfs/core/node_table.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "sigilfs/crypt/random.h"

namespace sigilfs::core {
namespace {

// Ids that are a node's address have this bit set (user-space addresses never do), so they
// never meet persistent ids, which never do.
constexpr uint64_t kAddressId = uint64_t{1} << 63;

bool SameName(const Node::Name& n, const Node& parent, const std::string& stored) {
  return n.stored == stored && n.parent->key_dev == parent.key_dev &&
         n.parent->key_ino == parent.key_ino;
}

}  // namespace

Node::~Node() {
  if (removed_target_volume != nullptr) removed_target_volume->ReleaseSymlinkTarget(removed_target);
}

void AddName(Node& node, const std::shared_ptr<Node>& parent, const std::string& stored) {
  for (auto it = node.names.begin(); it != node.names.end(); ++it) {
    if (SameName(*it, *parent, stored)) {
      // Through the node the kernel uses now: the one renames of that directory keep current.
      it->parent = parent;
      std::rotate(node.names.begin(), it, it + 1);  // most recently used first
      return;
    }
  }
  node.names.insert(node.names.begin(), Node::Name{parent, stored});
}

void RemoveName(Node& node, const Node& parent, const std::string& stored) {
  std::erase_if(node.names, [&](const Node::Name& n) { return SameName(n, parent, stored); });
}

NodeTable::NodeTable(const struct stat& root_st, NodeTableOptions options)
    : options_(std::move(options)), root_(MakeNode()) {
  root_->key_dev = root_st.st_dev;
  root_->key_ino = options_.keeps_inode_numbers ? root_st.st_ino : 1;
  root_->type = S_IFDIR;
  root_->nlookup_ = 1;  // the kernel holds the root for good
  // Address ids are reused by a later run: generations starting at random make a handle from
  // an earlier one stale (but for a one in 2^32 chance), not another object.
  MutexLock lock(mu_);
  crypt::RandomBytes(
      MutableByteSpan(reinterpret_cast<uint8_t*>(&next_generation_), sizeof next_generation_));
}

NodeTable::~NodeTable() = default;

std::shared_ptr<Node> NodeTable::MakeNode() const {
  return options_.make_node ? options_.make_node() : std::make_shared<Node>();
}

uint64_t NodeTable::IdOf(const Node& node) const {
  if (&node == root_.get()) return 1;
  return node.nodeid != 0 ? node.nodeid : (reinterpret_cast<uint64_t>(&node) | kAddressId);
}

std::shared_ptr<Node> NodeTable::Get(uint64_t id) const {
  if (id == 1) return root_;
  if ((id & kAddressId) != 0)
    // NOLINTNEXTLINE(performance-no-int-to-ptr): such ids are node addresses
    return reinterpret_cast<Node*>(id & ~kAddressId)->shared_from_this();
  ReaderLock lock(ids_mu_);
  auto it = known_.find(id);
  return it == known_.end() ? nullptr : it->second->shared_from_this();
}

std::shared_ptr<Node> NodeTable::Known(uint64_t id) const {
  if (id == 1) return root_;
  MutexLock lock(mu_);  // what known_ names is alive under mu_
  ReaderLock ids(ids_mu_);
  auto it = known_.find(id);
  return it == known_.end() ? nullptr : it->second->shared_from_this();
}

void NodeTable::UnknowLocked(const Node& node) {
  WriterLock ids(ids_mu_);
  known_.erase(IdOf(node));
}

std::shared_ptr<Node> NodeTable::Intern(const struct stat& st, const std::shared_ptr<Node>& parent,
                                        const std::string& stored, const StillThere& still_there,
                                        const std::function<uint64_t()>& persistent_id) {
  std::vector<std::shared_ptr<Node>> dropped;  // released after the lock
  MutexLock lock(mu_);
  const Key key = KeyLocked(st, *parent, stored);
  auto& slot = table_[key];
  if (slot) {
    // No descriptor pins an object, so the store may give a deleted entry's inode number to a
    // new one while the kernel still holds the old node. The slot is the same object only if
    // it is provably alive and of the same type: open, or reached by this very name, or its
    // recorded name still leads to this inode. Otherwise the entry gets a fresh node (the old
    // one is kept until the kernel forgets it). Where the store renumbers its objects the slot
    // is this name's: the same object if of the same type, as far as anything can tell.
    const bool same_type = slot->type == (st.st_mode & S_IFMT);
    bool alive = same_type && (slot->is_open.load() || !options_.keeps_inode_numbers);
    if (!alive && same_type) {
      Node::Name first;
      {
        MutexLock name_lock(slot->name_mu);
        if (!slot->names.empty()) first = slot->names.front();
      }
      if (first.parent != nullptr) {
        if (SameName(first, *parent, stored)) {
          alive = true;
        } else if (still_there) {
          alive = still_there(first, st);
        }
      }
    }
    if (options_.debug_log) {
      size_t names = 0;
      {
        MutexLock name_lock(slot->name_mu);
        names = slot->names.size();
      }
      char line[200];
      std::snprintf(line, sizeof line,
                    "intern ino=%llu %s: node=%p type=%o new_type=%o nlookup=%llu names=%zu "
                    "verdict=%s",
                    static_cast<unsigned long long>(st.st_ino), stored.c_str(),
                    static_cast<void*>(slot.get()), slot->type, st.st_mode & S_IFMT,
                    static_cast<unsigned long long>(slot->nlookup_), names,
                    alive ? "same" : "fresh");
      options_.debug_log(line);
    }
    UnrememberLocked(*slot);  // known to the kernel again, or displaced
    if (!alive) {
      if (slot->nlookup_ > 0) {
        displaced_[slot.get()] = slot;  // the kernel may still use its id
        slot.reset();
      } else {
        UnknowLocked(*slot);
        // As when forgotten: a directory kept only for it as a child goes with it.
        DropLocked(std::exchange(slot, nullptr), &dropped);
      }
    }
  }
  if (!slot) {
    slot = MakeNode();
    slot->key_dev = key.first;
    slot->key_ino = key.second;
    slot->type = st.st_mode & S_IFMT;
    // A persistent id, unless a node the kernel still holds has it (this object, displaced
    // above without proof that it is the same): its generation is then the same in every run.
    const uint64_t id = persistent_id ? persistent_id() : 0;
    WriterLock ids(ids_mu_);
    if (id != 0 && !known_.contains(id)) {
      slot->nodeid = id;
      slot->generation = options_.generation_of ? options_.generation_of(id) : 0;
    } else {
      slot->generation = next_generation_++;
      if (slot->generation == 0) slot->generation = next_generation_++;  // the root's
    }
    known_.emplace(IdOf(*slot), slot.get());
  }
  {
    // Found under this name (perhaps one more hard link): remember it.
    MutexLock name_lock(slot->name_mu);
    AddName(*slot, parent, stored);
  }
  ++slot->nlookup_;
  return slot;
}

void NodeTable::Forget(uint64_t id, uint64_t n, std::vector<std::shared_ptr<Node>>* dropped) {
  if (id == 1) return;
  MutexLock lock(mu_);
  // No reference taken here: DropLocked tells by the count whether anything else holds a node.
  Node* node = nullptr;
  if ((id & kAddressId) != 0) {
    node = reinterpret_cast<Node*>(id & ~kAddressId);  // NOLINT(performance-no-int-to-ptr)
  } else {
    ReaderLock ids(ids_mu_);  // changes need mu_ too, so this stays true while it is held
    if (auto it = known_.find(id); it != known_.end()) node = it->second;
  }
  if (node == nullptr) return;
  node->nlookup_ -= std::min(n, node->nlookup_);
  if (node->nlookup_ > 0) return;
  auto it = table_.find({node->key_dev, node->key_ino});
  if (it != table_.end() && it->second.get() == node) {
    bool named;
    {
      MutexLock name_lock(node->name_mu);
      named = !node->names.empty();
    }
    // A file handle may name it later: the kernel then asks for it by id, so it stays known,
    // kept current by renames, for a while. A removed node could only be stale.
    if (named && options_.remember > 0) return RememberLocked(*node, dropped);
    ReleaseLocked(it, dropped);
  } else if (auto d = displaced_.find(node); d != displaced_.end()) {
    std::shared_ptr<Node> held = std::move(d->second);
    displaced_.erase(d);
    UnknowLocked(*held);
    DropLocked(std::move(held), dropped);
  }
}

void NodeTable::ReleaseLocked(Map::iterator it, std::vector<std::shared_ptr<Node>>* dropped) {
  // The kernel forgets a directory once it has no dentry below it, but a file there may live
  // on through a hard link elsewhere (or a forget of a child may still be on its way): such a
  // node still names this one as its parent and reaches its files through it. Out of the
  // table, renames of the directory would no longer update it (they find nodes here) while
  // the next lookup made a second node for it: paths through the first went stale and a
  // front end dropped the child's valid name. So it stays, kept current, and is this
  // directory's node again when looked up. (Anything else holding it briefly, a request
  // finishing on another thread, keeps it too: then it stays until it is looked up again or its
  // last child goes, memory only, bounded by the store's directories. The count cannot tell a
  // child from such a holder.)
  UnrememberLocked(*it->second);  // the list holds plain pointers
  if (S_ISDIR(it->second->type) && it->second.use_count() > 1) {
    // A removed directory (no name left) goes whoever holds it: nothing can rename it or look
    // it up again, and a node still naming it has a stale name. Kept, it would stay for good,
    // with its removed handle, when the holder was no child but a request still finishing on
    // another thread, whose reply had already let the kernel forget the node.
    MutexLock name_lock(it->second->name_mu);
    if (!it->second->names.empty()) return;
  }
  DropNameIdsOfLocked(*it->second);
  std::shared_ptr<Node> node = std::move(it->second);
  table_.erase(it);
  UnknowLocked(*node);
  DropLocked(std::move(node), dropped);
}

void NodeTable::RememberLocked(Node& node, std::vector<std::shared_ptr<Node>>* dropped) {
  // What is cached of a node (a directory's IV) goes as it did when forgotten nodes left the
  // table: the next use reads it again. (The table's lock before mu is the wrong order, so
  // only if free: a request using the node meanwhile will have read it just now.)
  if (node.mu.TryLock()) {
    node.iv.reset();
    node.mu.Unlock();
  }
  if (!node.forgotten_at_) node.forgotten_at_ = forgotten_.insert(forgotten_.end(), &node);
  while (forgotten_.size() > options_.remember) {
    Node* oldest = forgotten_.front();
    UnrememberLocked(*oldest);
    auto it = table_.find({oldest->key_dev, oldest->key_ino});
    if (it != table_.end() && it->second.get() == oldest) ReleaseLocked(it, dropped);
  }
}

void NodeTable::UnrememberLocked(Node& node) {
  if (!node.forgotten_at_) return;
  forgotten_.erase(*node.forgotten_at_);
  node.forgotten_at_.reset();
}

void NodeTable::DropLocked(std::shared_ptr<Node> node,
                           std::vector<std::shared_ptr<Node>>* dropped) {
  std::vector<std::shared_ptr<Node>> work{std::move(node)};
  while (!work.empty()) {
    std::shared_ptr<Node> cur = std::move(work.back());
    work.pop_back();
    std::vector<Node::Name> names;
    if (cur.use_count() == 1) {  // no child goes through it: its names can go now
      MutexLock name_lock(cur->name_mu);
      names.swap(cur->names);
    }
    dropped->push_back(std::move(cur));
    for (auto& name : names) {
      std::shared_ptr<Node> parent = std::move(name.parent);
      if (parent == root_) continue;
      if (parent->nlookup_ > 0 || parent->forgotten_at_) continue;
      // A forgotten directory kept for its children (see ReleaseLocked) that only the table and
      // this name held: it goes too.
      auto it = table_.find({parent->key_dev, parent->key_ino});
      if (it == table_.end() || it->second != parent || parent.use_count() > 2) continue;
      DropNameIdsOfLocked(*parent);
      table_.erase(it);
      UnknowLocked(*parent);
      work.push_back(std::move(parent));
    }
  }
}

std::shared_ptr<Node> NodeTable::Find(const struct stat& st, const Node& parent,
                                      const std::string& stored) const {
  MutexLock lock(mu_);
  uint64_t number = st.st_ino;
  if (!options_.keeps_inode_numbers) {
    auto id = name_ids_.find({parent.key_ino, stored});
    if (id == name_ids_.end()) return nullptr;
    number = id->second;
  }
  auto it = table_.find({st.st_dev, number});
  return it == table_.end() ? nullptr : it->second;
}

uint64_t NodeTable::Lookups(const Node& node) const {
  MutexLock lock(mu_);
  return node.nlookup_;
}

NodeTable::Key NodeTable::KeyLocked(const struct stat& st, const Node& parent,
                                    const std::string& stored) {
  if (options_.keeps_inode_numbers) return {st.st_dev, st.st_ino};
  auto [id, made] = name_ids_.try_emplace({parent.key_ino, stored}, 0);
  if (made) id->second = next_name_id_++;
  return {st.st_dev, id->second};
}

void NodeTable::MoveName(const Node& from_dir, const std::string& from, const Node& to_dir,
                         const std::string& to, bool exchange) {
  if (options_.keeps_inode_numbers) return;
  MutexLock lock(mu_);
  auto source = name_ids_.extract({from_dir.key_ino, from});
  auto target = name_ids_.extract({to_dir.key_ino, to});
  if (!source.empty()) {
    source.key() = {to_dir.key_ino, to};
    name_ids_.insert(std::move(source));
  }
  if (exchange && !target.empty()) {
    target.key() = {from_dir.key_ino, from};
    name_ids_.insert(std::move(target));
  }
}

void NodeTable::DropName(const Node& dir, const std::string& stored) {
  if (options_.keeps_inode_numbers) return;
  MutexLock lock(mu_);
  name_ids_.erase({dir.key_ino, stored});
}

void NodeTable::DropNameIdsOfLocked(const Node& node) {
  if (options_.keeps_inode_numbers) return;
  MutexLock lock(node.name_mu);
  for (const Node::Name& n : node.names) {
    auto id = name_ids_.find({n.parent->key_ino, n.stored});
    if (id != name_ids_.end() && id->second == node.key_ino) name_ids_.erase(id);
  }
}

std::string NodeTable::PathOf(const Node& node) const {
  std::vector<std::string> parts;
  const Node* cur = &node;
  std::shared_ptr<Node> hold;
  while (cur != root_.get()) {
    MutexLock lock(cur->name_mu);
    if (cur->names.empty()) break;
    parts.push_back(cur->names.front().stored);
    hold = cur->names.front().parent;
    cur = hold.get();
  }
  std::string path;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += *it;
  }
  return path.empty() ? "." : path;
}

NodeCounts NodeTable::counts() const {
  MutexLock lock(mu_);
  return {table_.size() + displaced_.size(), forgotten_.size()};
}

std::vector<std::shared_ptr<Node>> NodeTable::Nodes() const {
  MutexLock lock(mu_);
  std::vector<std::shared_ptr<Node>> out;
  out.reserve(table_.size());
  for (const auto& [key, node] : table_) out.push_back(node);
  return out;
}

}  // namespace sigilfs::core
