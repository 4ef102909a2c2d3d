// Test helper: a directory store (BackingDir) that passes every call on to another, for
// wrappers that act before a call (failing it) or after one (running a racing call), and that
// wrap every handle and file opened through them in the same way.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sigilfs/core/backing_dir.h"

namespace sigilfs::test {

class ForwardingBackingDir : public core::BackingDir {
 public:
  explicit ForwardingBackingDir(std::unique_ptr<core::BackingDir> inner)
      : inner_(std::move(inner)) {}

  Result<struct stat> Stat(std::string_view n) override {
    SIGILFS_RETURN_IF_ERROR(Enter("stat"));
    return inner_->Stat(n);
  }
  Result<std::unique_ptr<core::BackingDir>> OpenDir(std::string_view n) override {
    SIGILFS_RETURN_IF_ERROR(Enter("opendir"));
    return Wrapped(inner_->OpenDir(n));
  }
  Result<std::unique_ptr<core::BackingDir>> OpenObject(std::string_view p) override {
    SIGILFS_RETURN_IF_ERROR(Enter("open object"));
    return Wrapped(inner_->OpenObject(p));
  }
  Result<std::unique_ptr<core::BackingDir>> OpenListing(bool keep_atime) override {
    SIGILFS_RETURN_IF_ERROR(Enter("open listing"));
    return Wrapped(inner_->OpenListing(keep_atime));
  }
  Result<std::unique_ptr<core::BackingFile>> OpenFile(std::string_view n,
                                                      const core::FileOpenMode& how) override {
    SIGILFS_RETURN_IF_ERROR(Enter("open"));
    SIGILFS_ASSIGN_OR_RETURN(auto file, inner_->OpenFile(n, how));
    return WrapFile(std::move(file));
  }
  Status MakeDir(std::string_view n, mode_t m) override {
    SIGILFS_RETURN_IF_ERROR(Enter("mkdir"));
    return inner_->MakeDir(n, m);
  }
  Status MakeNode(std::string_view n, mode_t m, dev_t r) override {
    SIGILFS_RETURN_IF_ERROR(Enter("mknod"));
    return inner_->MakeNode(n, m, r);
  }
  Status MakeSymlink(std::string_view n, std::string_view t) override {
    SIGILFS_RETURN_IF_ERROR(Enter("symlink"));
    return inner_->MakeSymlink(n, t);
  }
  Result<std::string> ReadSymlink(std::string_view n) override {
    SIGILFS_RETURN_IF_ERROR(Enter("readlink"));
    return inner_->ReadSymlink(n);
  }
  Status Link(std::string_view n, core::BackingDir& to, std::string_view tn) override {
    SIGILFS_RETURN_IF_ERROR(Enter("link"));
    return inner_->Link(n, Inner(to), tn);
  }
  Status Unlink(std::string_view n) override {
    SIGILFS_RETURN_IF_ERROR(Enter("unlink"));
    return inner_->Unlink(n);
  }
  Status RemoveDir(std::string_view n) override {
    SIGILFS_RETURN_IF_ERROR(Enter("rmdir"));
    return inner_->RemoveDir(n);
  }
  Status Rename(std::string_view n, core::BackingDir& to, std::string_view tn,
                unsigned f) override {
    SIGILFS_RETURN_IF_ERROR(Enter("rename"));
    return inner_->Rename(n, Inner(to), tn, f);
  }
  Status List(uint64_t from, const std::function<bool(const core::BackingEntry&)>& emit) override {
    SIGILFS_RETURN_IF_ERROR(Enter("readdir"));
    return inner_->List(from, emit);
  }
  Status SetMode(std::string_view n, mode_t m) override {
    SIGILFS_RETURN_IF_ERROR(Enter("chmod"));
    return inner_->SetMode(n, m);
  }
  Status SetOwner(std::string_view n, uid_t u, gid_t g) override {
    SIGILFS_RETURN_IF_ERROR(Enter("chown"));
    return inner_->SetOwner(n, u, g);
  }
  Status SetTimes(std::string_view n, const struct timespec t[2]) override {
    SIGILFS_RETURN_IF_ERROR(Enter("utimens"));
    return inner_->SetTimes(n, t);
  }
  Result<std::vector<uint8_t>> GetXattr(std::string_view n, std::string_view a) override {
    SIGILFS_RETURN_IF_ERROR(Enter("getxattr"));
    return inner_->GetXattr(n, a);
  }
  Status SetXattr(std::string_view n, std::string_view a, ByteSpan v, int f) override {
    SIGILFS_RETURN_IF_ERROR(Enter("setxattr"));
    return inner_->SetXattr(n, a, v, f);
  }
  Status RemoveXattr(std::string_view n, std::string_view a) override {
    SIGILFS_RETURN_IF_ERROR(Enter("removexattr"));
    return inner_->RemoveXattr(n, a);
  }
  Result<std::vector<std::string>> ListXattrs(std::string_view n) override {
    SIGILFS_RETURN_IF_ERROR(Enter("listxattr"));
    return inner_->ListXattrs(n);
  }
  Result<ObjectHandle> Handle(std::string_view n) override { return inner_->Handle(n); }
  Result<std::unique_ptr<core::BackingDir>> OpenByHandle(const ObjectHandle& h) override {
    return Wrapped(inner_->OpenByHandle(h));
  }
  std::vector<std::string> PathTo(core::BackingDir& object) override {
    return inner_->PathTo(Inner(object));
  }
  Result<struct statvfs> StatFs() override { return inner_->StatFs(); }
  bool KeepsInodeNumbers() override { return inner_->KeepsInodeNumbers(); }
  Status Sync() override {
    SIGILFS_RETURN_IF_ERROR(Enter("fsync"));
    return inner_->Sync();
  }

 protected:
  // Before each call that reaches the store, named `what`: an error fails the call untried.
  virtual Status Enter(std::string_view /*what*/) { return Status::Ok(); }
  // A handle opened through this one, wrapped as this one is.
  virtual std::unique_ptr<core::BackingDir> Wrap(std::unique_ptr<core::BackingDir> inner) = 0;
  // A file opened through this handle (as it is, by default).
  virtual std::unique_ptr<core::BackingFile> WrapFile(std::unique_ptr<core::BackingFile> file) {
    return file;
  }
  core::BackingDir& inner() { return *inner_; }

 private:
  Result<std::unique_ptr<core::BackingDir>> Wrapped(
      Result<std::unique_ptr<core::BackingDir>> opened) {
    if (!opened.ok()) return opened.status();
    return Wrap(std::move(opened).value());
  }
  // The store's own handle behind a wrapped one (a link or rename target).
  static core::BackingDir& Inner(core::BackingDir& d) {
    auto* wrapped = dynamic_cast<ForwardingBackingDir*>(&d);
    return wrapped != nullptr ? *wrapped->inner_ : d;
  }

  std::unique_ptr<core::BackingDir> inner_;
};

}  // namespace sigilfs::test
