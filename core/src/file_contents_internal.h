// Internal: the parts of FileContents shared by page_layer.cc (pages) and verity/sealed_file.cc
// (sealed files): the per-file key and the state of a sealed file.
#pragma once

#include <memory>
#include <unordered_map>

#include "sigilfs/core/page_layer.h"
#include "sigilfs/core/verity.h"
#include "sigilfs/crypt/aead.h"

namespace sigilfs::core {

// The per-file key and the codec that seals units with it (data pages, tree blocks, record).
struct FileContents::Key {
  Key(std::unique_ptr<crypt::Aead> a, const FileNonce& n)
      : aead(std::move(a)), nonce(n), codec(*aead, nonce) {}
  std::unique_ptr<crypt::Aead> aead;
  FileNonce nonce;
  UnitCodec codec;
};

// A sealed file: where its tree is, what its root is, and the tree blocks verified so far.
struct FileContents::Sealed {
  Sealed(const verity::SealedLayout& l, const verity::Record& r)
      : layout(l), tree(l.data_size), record(r), hasher(r.decoded.salt) {}
  verity::SealedLayout layout;
  verity::TreeLayout tree;
  verity::Record record;
  verity::BlockHasher hasher;
  // Reads compare each page's nonce with its pin (no hashing); without pins (files sealed
  // before them), they hash each page and check it against the tree.
  bool pinned() const { return layout.pin_blocks > 0; }
  // Verified tree blocks by stored index, and pin blocks by total_blocks() + index. Level 0 is
  // 1/128 of the data and pins less, so the cache is bounded (and simply emptied when full: the
  // blocks of a sequential read are reread once per pass).
  static constexpr size_t kMaxCachedBlocks = 4096;  // 16 MiB
  mutable Mutex mu;
  mutable std::unordered_map<uint64_t, TreeBlock> verified SIGILFS_GUARDED_BY(mu);
};

// Shared mode: one public call of a file under the cipher file's lock (page_layer_shared.cc).
// Opened, it has taken in what other processes changed (status() says if it could not, and the
// call then fails with that); closed, it has left nothing cached or unstored. Without shared
// mode, or inside a call of the same thread that holds one already, it does nothing.
class FileContents::Section {
 public:
  Section(const FileContents& file, FileLock kind);
  ~Section();
  Section(const Section&) = delete;
  Section& operator=(const Section&) = delete;
  const Status& status() const { return status_; }
  bool active() const { return file_ != nullptr; }

 private:
  FileContents* file_ = nullptr;
  FileLock kind_ = FileLock::kUnlocked;
  bool locked_ = false;  // the store's lock is held
  Status status_;
};

}  // namespace sigilfs::core
