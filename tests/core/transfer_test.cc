// Import and export through the library (core/transfer.h), without FUSE: a plain tree into a
// vault and back out, against the POSIX and the memory store on both sides.
#include "sigilfs/core/transfer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <ranges>
#include <string>
#include <vector>

#include "sigilfs/core/acl.h"
#include "test_support/forwarding_backing_dir.h"
#include "test_support/pattern.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

ByteSpan Bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

std::vector<uint8_t> AclOf(std::initializer_list<acl::Entry> entries) {
  return acl::Serialize(acl::Acl(entries));
}
constexpr uint32_t kNoId = acl::kUndefinedId;
const std::string kAccess(acl::kAccessName), kDefault(acl::kDefaultName);
// u::rw-,u:nobody:r--,g::r--,m::r--,o::--- and d:u::rwx,d:g::r-x,d:g:nogroup:r-x,d:m::r-x,d:o::---
const std::vector<uint8_t> kAccessAcl = AclOf({{acl::kUserObj, 6, kNoId},
                                               {acl::kUser, 4, 65534},
                                               {acl::kGroupObj, 4, kNoId},
                                               {acl::kMask, 4, kNoId},
                                               {acl::kOther, 0, kNoId}});
const std::vector<uint8_t> kDefaultAcl = AclOf({{acl::kUserObj, 7, kNoId},
                                                {acl::kGroupObj, 5, kNoId},
                                                {acl::kGroup, 5, 65534},
                                                {acl::kMask, 5, kNoId},
                                                {acl::kOther, 0, kNoId}});

// A plain store that refuses to write ACLs with `err`: EOPNOTSUPP as a file system without
// ACLs (which has none to remove either), or another errno as one that cannot take this ACL
// (EINVAL for an id it cannot map, ENOSPC), whose entries may still inherit one.
class AclRefusingDir : public test::ForwardingBackingDir {
 public:
  AclRefusingDir(std::unique_ptr<BackingDir> inner, int err)
      : ForwardingBackingDir(std::move(inner)), err_(err) {}
  Status SetXattr(std::string_view n, std::string_view a, ByteSpan v, int f) override {
    if (acl::IsAclName(a)) return Status::FromErrno(err_, "setxattr");
    return ForwardingBackingDir::SetXattr(n, a, v, f);
  }
  Status RemoveXattr(std::string_view n, std::string_view a) override {
    if (acl::IsAclName(a) && err_ == EOPNOTSUPP) return Status::FromErrno(err_, "removexattr");
    return ForwardingBackingDir::RemoveXattr(n, a);
  }

 protected:
  std::unique_ptr<BackingDir> Wrap(std::unique_ptr<BackingDir> inner) override {
    return std::make_unique<AclRefusingDir>(std::move(inner), err_);
  }

 private:
  const int err_;
};

// What a plain tree holds, entry by entry: kind, permissions, mtime, size, contents or target,
// `user.*` attributes, and which entries are one inode.
struct Snapshot {
  std::map<std::string, std::string> entries;
  std::map<std::string, std::string> inode_of;  // hard-link groups by first name
  bool operator==(const Snapshot&) const = default;
  friend void PrintTo(const Snapshot& s, std::ostream* os) {
    for (const auto& [path, text] : s.entries) *os << "\n  " << path << ": " << text.substr(0, 60);
    for (const auto& [path, first] : s.inode_of) *os << "\n  " << path << " is " << first;
  }
};

std::string ReadPlain(BackingDir& dir, const std::string& name) {
  auto file = dir.OpenFile(name, {.write = false});
  EXPECT_TRUE(file.ok());
  std::string out(*(*file)->Size(), '\0');
  auto n = (*file)->ReadAt({reinterpret_cast<uint8_t*>(out.data()), out.size()}, 0);
  out.resize(n.ok() ? *n : 0);
  return out;
}

void Take(BackingDir& dir, const std::string& prefix, Snapshot& snap,
          std::map<std::pair<dev_t, ino_t>, std::string>& seen) {
  std::vector<std::string> names;
  ASSERT_TRUE(dir.List(0,
                       [&](const BackingEntry& e) {
                         names.push_back(e.name);
                         return true;
                       })
                  .ok());
  std::sort(names.begin(), names.end());  // the first name of a hard-linked inode, in any store
  for (const std::string& name : names) {
    const std::string path = prefix + name;
    struct stat st = *dir.Stat(name);
    std::string text = std::to_string(st.st_mode) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                       std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode)) text += " " + ReadPlain(dir, name);
    if (S_ISLNK(st.st_mode)) text += " -> " + *dir.ReadSymlink(name);
    if (!S_ISLNK(st.st_mode)) {
      auto attrs = dir.ListXattrs(name);
      if (attrs.ok())
        for (const std::string& a : *attrs) {
          auto v = *dir.GetXattr(name, a);
          text += " " + a + "=" + std::string(v.begin(), v.end());
        }
    }
    snap.entries[path] = text;
    if (!S_ISDIR(st.st_mode) && st.st_nlink > 1) {
      auto [it, fresh] = seen.try_emplace({st.st_dev, st.st_ino}, path);
      snap.inode_of[path] = it->second;
    }
    if (S_ISDIR(st.st_mode)) Take(**dir.OpenDir(name), path + "/", snap, seen);
  }
}

Snapshot SnapshotOf(BackingDir& dir) {
  Snapshot snap;
  std::map<std::pair<dev_t, ino_t>, std::string> seen;
  Take(dir, "", snap, seen);
  return snap;
}

class TransferTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    auto store = test::NewStore(GetParam(), temp_.path() / "store");
    ASSERT_TRUE(Tree::Format(*store).ok());
    vault_store_ = std::move(store->OpenDir("")).value();
    tree_ = std::move(Tree::Open(*volume_, std::move(store))).value();
    root_ = std::move(tree_->Root()).value();
    plain_ = test::NewStore(GetParam(), temp_.path() / "plain");
    out_ = test::NewStore(GetParam(), temp_.path() / "out");
  }

  void WritePlain(BackingDir& dir, const std::string& name, const std::vector<uint8_t>& data,
                  mode_t mode) {
    auto file = dir.OpenFile(name, {.create = true, .exclusive = true, .mode = 0600});
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    const ByteSpan parts[] = {data};
    ASSERT_TRUE((*file)->WriteAt(parts, 0).ok());
    ASSERT_TRUE(dir.SetMode(name, mode).ok());
  }

  // A plain tree of every kind the vault keeps, times set last.
  void MakePlainTree() {
    ASSERT_TRUE(plain_->MakeDir("docs", 0750).ok());
    auto docs = std::move(plain_->OpenDir("docs")).value();
    WritePlain(*docs, "empty", {}, 0600);
    WritePlain(*docs, "small.txt", test::Pattern(5000, 1), 0644);
    WritePlain(*plain_, "big.bin", test::Pattern((3 << 20) + 77, 2), 0640);  // past one step
    ASSERT_TRUE(plain_->SetXattr("big.bin", "user.origin", Bytes("camera")).ok());
    ASSERT_TRUE(docs->SetXattr("", "user.dir", Bytes("yes")).ok());
    ASSERT_TRUE(plain_->Link("big.bin", *docs, "again.bin").ok());
    ASSERT_TRUE(docs->MakeSymlink("link", "../big.bin").ok());
    ASSERT_TRUE(plain_->MakeNode("pipe", S_IFIFO | 0604, 0).ok());
    const std::string long_name(220, 'n');
    WritePlain(*docs, long_name, test::Pattern(10, 3), 0600);
    const struct timespec times[2] = {{1'600'000'000, 1}, {1'650'000'000, 123456789}};
    for (const char* name : {"empty", "small.txt", "link", "again.bin"})
      ASSERT_TRUE(docs->SetTimes(name, times).ok());
    ASSERT_TRUE(docs->SetTimes(long_name, times).ok());
    ASSERT_TRUE(plain_->SetTimes("pipe", times).ok());
    ASSERT_TRUE(plain_->SetTimes("docs", times).ok());
  }

  // Plain directory shared/ with the default ACL kDefaultAcl, holding f (0640) with the access
  // ACL kAccessAcl.
  std::unique_ptr<BackingDir> MakeSharedDir() {
    EXPECT_TRUE(plain_->MakeDir("shared", 0750).ok());
    EXPECT_TRUE(plain_->SetXattr("shared", kDefault, kDefaultAcl).ok());
    auto shared = std::move(plain_->OpenDir("shared")).value();
    WritePlain(*shared, "f", test::Pattern(100, 1), 0640);
    EXPECT_TRUE(shared->SetXattr("f", kAccess, kAccessAcl).ok());
    return shared;
  }

  Result<uint64_t> ExportAll(BackingDir& to, const std::string& name, bool replace = false) {
    ExportOptions options;
    options.replace = replace;
    options.problem = [this](const std::string& path, const Status& s) {
      problems_.push_back(path + ": " + s.ToString());
    };
    return ExportEntry(*tree_, *root_, "", to, name, name, options);
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<BackingDir> vault_store_, plain_, out_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<Tree::Dir> root_;
  std::vector<std::string> problems_;
};

TEST_P(TransferTest, ATreeImportedAndExportedComesBackTheSame) {
  MakePlainTree();
  std::vector<std::string> progress;
  ImportOptions in;
  in.progress = [&](const std::string& path, uint64_t) { progress.push_back(path); };
  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, in).ok());
  EXPECT_EQ(progress.size(), 7u);                           // every non-directory, once
  EXPECT_EQ(tree_->Stat(*root_, "big.bin")->st_nlink, 2u);  // a hard link stays one

  auto exported = ExportAll(*out_, "copy");
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(*exported, 0u);
  EXPECT_TRUE(problems_.empty());
  const Snapshot want = SnapshotOf(*plain_);
  EXPECT_EQ(want.entries.size(), 8u);
  EXPECT_EQ(SnapshotOf(**out_->OpenDir("copy")), want);
  // Nothing of the vault's own is left in it but what it keeps.
  for (const std::string& path : SnapshotOf(*vault_store_).entries | std::views::keys)
    EXPECT_EQ(path.find(".sigilfs."), std::string::npos) << path;
}

TEST_P(TransferTest, ExistingEntriesAreReplacedOnlyWhenAsked) {
  WritePlain(*plain_, "f", test::Pattern(100, 1), 0644);
  ASSERT_TRUE(ImportEntry(*tree_, *plain_, "f", "f", *root_, "f", {}).ok());
  ASSERT_TRUE(plain_->Unlink("f").ok());
  WritePlain(*plain_, "f", test::Pattern(60, 2), 0600);
  const Snapshot vault_before = SnapshotOf(*vault_store_);
  EXPECT_EQ(ImportEntry(*tree_, *plain_, "f", "f", *root_, "f", {}).code(), Code::kExists);
  EXPECT_EQ(SnapshotOf(*vault_store_), vault_before);  // unchanged, no temporary left
  ImportOptions replace;
  replace.replace = true;
  ASSERT_TRUE(ImportEntry(*tree_, *plain_, "f", "f", *root_, "f", replace).ok());
  auto file = tree_->OpenFile(*root_, "f", /*write=*/false);
  EXPECT_EQ((*file)->size(), 60u);
  EXPECT_EQ(tree_->Stat(*root_, "f")->st_mode & 07777, 0600u);

  // Never a directory over a file.
  ASSERT_TRUE(plain_->Unlink("f").ok());
  ASSERT_TRUE(plain_->MakeDir("f", 0700).ok());
  EXPECT_EQ(ImportEntry(*tree_, *plain_, "f", "f", *root_, "f", replace).code(), Code::kExists);
  EXPECT_EQ(tree_->Stat(*root_, "f")->st_size, 60);

  // Export: an existing destination is refused unless asked.
  WritePlain(*out_, "x", {}, 0600);
  EXPECT_EQ(ExportEntry(*tree_, *root_, "f", *out_, "x", "x", {}).status().code(), Code::kExists);
  EXPECT_EQ(out_->Stat("x")->st_size, 0);
  ExportOptions over;
  over.replace = true;
  ASSERT_TRUE(ExportEntry(*tree_, *root_, "f", *out_, "x", "x", over).ok());
  EXPECT_EQ(out_->Stat("x")->st_size, 60);
}

TEST_P(TransferTest, ADamagedFileIsLeftOutAndCountedAndTheRestExported) {
  MakePlainTree();
  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, {}).ok());
  // One page of the vault's copy of docs/small.txt changed behind its back.
  auto docs = std::move(tree_->OpenDir(*root_, "docs")).value();
  const std::string stored = *volume_->StoredName(docs->iv(), "small.txt");
  auto cipher = std::move(docs->backing().OpenFile(stored, {})).value();
  uint8_t byte = 0;
  ASSERT_TRUE(cipher->ReadAt({&byte, 1}, 100).ok());
  byte ^= 1;
  const ByteSpan parts[] = {ByteSpan(&byte, 1)};
  ASSERT_TRUE(cipher->WriteAt(parts, 100).ok());

  auto exported = ExportAll(*out_, "copy");
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(*exported, 1u);
  ASSERT_EQ(problems_.size(), 1u);
  EXPECT_EQ(problems_[0].rfind("docs/small.txt: ", 0), 0u) << problems_[0];
  Snapshot want = SnapshotOf(*plain_);
  want.entries.erase("docs/small.txt");
  EXPECT_EQ(SnapshotOf(**out_->OpenDir("copy")), want);
}

TEST_P(TransferTest, TheComparisonFindsEveryKindOfDifference) {
  MakePlainTree();
  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, {}).ok());
  std::vector<std::string> seen;
  auto same =
      CompareWithPlain(*tree_, *root_, *plain_, "plain",
                       [&](const std::string& path, const struct stat&) { seen.push_back(path); });
  ASSERT_TRUE(same.ok()) << same.status().ToString();
  EXPECT_EQ(*same, 8u);
  EXPECT_EQ(seen.size(), 8u);

  auto docs = std::move(plain_->OpenDir("docs")).value();
  const struct timespec keep[2] = {{1'600'000'000, 1}, {1'650'000'000, 123456789}};
  // Each change is made, found under its path with what differs, and undone.
  const auto differs = [&](const std::string& what) {
    auto r = CompareWithPlain(*tree_, *root_, *plain_, "plain");
    EXPECT_EQ(r.status().code(), Code::kCorrupt) << what;
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
  };
  {  // one byte of contents, same size and times
    auto file = std::move(docs->OpenFile("small.txt", {})).value();
    const ByteSpan x[] = {Bytes("X")};
    ASSERT_TRUE(file->WriteAt(x, 4000).ok());
    ASSERT_TRUE(docs->SetTimes("small.txt", keep).ok());
    differs("docs/small.txt: contents differ");
    const auto original = test::Pattern(5000, 1);
    const ByteSpan back[] = {ByteSpan(original).subspan(4000, 1)};
    ASSERT_TRUE(file->WriteAt(back, 4000).ok());
    ASSERT_TRUE(docs->SetTimes("small.txt", keep).ok());
  }
  ASSERT_TRUE(docs->SetMode("empty", 0644).ok());
  differs("docs/empty: permissions differ");
  ASSERT_TRUE(docs->SetMode("empty", 0600).ok());
  ASSERT_TRUE(plain_->SetXattr("big.bin", "user.origin", Bytes("phone")).ok());
  differs("big.bin: extended attributes differ");
  ASSERT_TRUE(plain_->SetXattr("big.bin", "user.origin", Bytes("camera")).ok());
  ASSERT_TRUE(docs->MakeDir("new", 0700).ok());
  ASSERT_TRUE(docs->SetTimes("", keep).ok());
  differs("docs/new: missing from the vault");
  ASSERT_TRUE(docs->RemoveDir("new").ok());
  ASSERT_TRUE(docs->SetTimes("", keep).ok());
  // A hard link broken in the plain tree: two files where the vault has one.
  ASSERT_TRUE(docs->Unlink("again.bin").ok());
  WritePlain(*docs, "again.bin", test::Pattern((3 << 20) + 77, 2), 0640);
  ASSERT_TRUE(docs->SetTimes("again.bin", keep).ok());
  ASSERT_TRUE(docs->SetTimes("", keep).ok());
  EXPECT_EQ(CompareWithPlain(*tree_, *root_, *plain_, "plain").status().code(), Code::kCorrupt);
}

TEST_P(TransferTest, ADirectoryWhoseIvIsLostIsStillMadeWithItsAttributesAndReported) {
  MakePlainTree();
  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, {}).ok());
  auto docs = std::move(tree_->OpenDir(*root_, "docs")).value();
  ASSERT_TRUE(docs->backing().Unlink(kDirIvFileName).ok());
  (void)docs->backing().RemoveXattr("", kDirIvAttrName);
  auto exported = ExportAll(*out_, "copy");
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(*exported, 1u);
  ASSERT_EQ(problems_.size(), 1u);
  EXPECT_EQ(problems_[0].rfind("docs: ", 0), 0u) << problems_[0];
  auto copy = std::move(out_->OpenDir("copy")).value();
  auto st = copy->Stat("docs");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->st_mode & 07777, 0750u);
  // The vault's times (the removal above moved its mtime), as for any directory exported.
  EXPECT_EQ(st->st_mtim.tv_sec, tree_->StatStored(*root_, "docs")->st_mtim.tv_sec);
  EXPECT_EQ(*copy->ListXattrs("docs"), std::vector<std::string>{"user.dir"});
}

TEST_P(TransferTest, PosixAclsGoInAndComeBackExactlyUnlessLeftOut) {
  // shared/ has a default ACL, shared/f an access ACL with a named user, shared/none no ACL.
  auto shared = MakeSharedDir();
  WritePlain(*shared, "none", test::Pattern(10, 2), 0600);
  (void)shared->RemoveXattr("none", kAccess);  // inherited from the default ACL, on a kernel's
  ASSERT_FALSE(shared->GetXattr("none", kAccess).ok());
  // A FIFO: the vault keeps no ACL on one (nor does the mount), so it has none here either.
  ASSERT_TRUE(shared->MakeNode("pipe", S_IFIFO | 0640, 0).ok());
  (void)shared->RemoveXattr("pipe", kAccess);

  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, {}).ok());
  auto vault_shared = std::move(tree_->Walk("shared")).value();
  EXPECT_EQ(*tree_->GetXattr(*vault_shared, "f", kAccess), kAccessAcl);
  EXPECT_EQ(*tree_->GetXattr(*root_, "shared", kDefault), kDefaultAcl);
  EXPECT_FALSE(tree_->GetXattr(*vault_shared, "none", kAccess).ok());
  auto same = CompareWithPlain(*tree_, *root_, *plain_, "plain");
  EXPECT_TRUE(same.ok()) << same.status().ToString();

  // Left out both ways: the vault gets none, the export writes none.
  ImportOptions no_acl;
  no_acl.acls = false;
  ASSERT_TRUE(ImportEntry(*tree_, *plain_, "shared", "shared", *root_, "bare", no_acl).ok());
  auto bare = std::move(tree_->Walk("bare")).value();
  for (auto [dir, name] : {std::pair{root_.get(), "bare"}, std::pair{bare.get(), "f"}}) {
    auto attrs = tree_->ListXattrs(*dir, name);
    ASSERT_TRUE(attrs.ok()) << name;
    EXPECT_TRUE(attrs->empty()) << name << ": " << attrs->front();
  }
  ExportOptions out_no_acl;
  out_no_acl.acls = false;
  ASSERT_EQ(*ExportEntry(*tree_, *root_, "shared", *out_, "bare", "bare", out_no_acl), 0u);
  EXPECT_TRUE(out_->ListXattrs("bare")->empty());
  EXPECT_TRUE((*out_->OpenDir("bare"))->ListXattrs("f")->empty());

  // Exported into a directory whose default ACL the new entries inherit: each has exactly the
  // vault's ACLs.
  ASSERT_TRUE(out_->MakeDir("in", 0755).ok());
  ASSERT_TRUE(out_->SetXattr("in", kDefault, kDefaultAcl).ok());
  auto in = std::move(out_->OpenDir("in")).value();
  ASSERT_EQ(*ExportEntry(*tree_, *root_, "shared", *in, "shared", "shared", {}), 0u);
  Snapshot want = SnapshotOf(*plain_);
  Snapshot got = SnapshotOf(*in);
  EXPECT_EQ(got, want);

  // A directory merged into with --force loses the default ACL its source no longer has.
  ASSERT_TRUE(plain_->RemoveXattr("shared", kDefault).ok());
  ImportOptions replace;
  replace.replace = true;
  ASSERT_TRUE(ImportEntry(*tree_, *plain_, "shared", "shared", *root_, "shared", replace).ok());
  EXPECT_FALSE(tree_->GetXattr(*root_, "shared", kDefault).ok());
}

TEST_P(TransferTest, AnAclTheDestinationCannotKeepIsReportedAndTheEntryExportedWithoutIt) {
  auto shared = MakeSharedDir();
  ASSERT_TRUE(shared->SetXattr("f", "user.kept", Bytes("yes")).ok());
  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, {}).ok());

  AclRefusingDir no_acls(std::move(out_), EOPNOTSUPP);
  auto exported = ExportAll(no_acls, "copy");
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(*exported, 2u);
  ASSERT_EQ(problems_.size(), 2u);
  EXPECT_EQ(problems_[0].rfind("shared/f: ", 0), 0u) << problems_[0];
  EXPECT_NE(problems_[0].find("access ACL not written"), std::string::npos) << problems_[0];
  EXPECT_NE(problems_[1].find("default ACL not written"), std::string::npos) << problems_[1];
  EXPECT_EQ(problems_[1].rfind("shared: ", 0), 0u) << problems_[1];
  auto copy = std::move((*no_acls.OpenDir("copy"))->OpenDir("shared")).value();
  const std::vector<uint8_t> data = test::Pattern(100, 1);
  EXPECT_EQ(ReadPlain(*copy, "f"), std::string(data.begin(), data.end()));
  EXPECT_EQ(*copy->GetXattr("f", "user.kept"), std::vector<uint8_t>({'y', 'e', 's'}));
  EXPECT_EQ(copy->Stat("f")->st_mode & 07777, 0640u);
}

// A destination that has ACLs but refuses the vault's (EINVAL): the entries are exported without
// it, and without the ACL they inherited there, which would grant what the vault's does not.
TEST_P(TransferTest, AnAclThatFailsToWriteLeavesNoInheritedOneBehind) {
  MakeSharedDir();
  ASSERT_TRUE(ImportInto(*tree_, *plain_, "plain", *root_, {}).ok());
  ASSERT_TRUE(out_->MakeDir("in", 0755).ok());
  ASSERT_TRUE(out_->SetXattr("in", kDefault, kDefaultAcl).ok());
  AclRefusingDir in(std::move(out_->OpenDir("in")).value(), EINVAL);
  ExportOptions options;
  options.problem = [this](const std::string& path, const Status& s) {
    problems_.push_back(path + ": " + s.ToString());
  };
  auto exported = ExportEntry(*tree_, *root_, "shared", in, "shared", "shared", options);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(*exported, 2u);  // shared/f's access ACL, shared's default ACL
  auto copy = std::move(in.OpenDir("shared")).value();
  EXPECT_EQ(copy->GetXattr("f", kAccess).status().sys_errno(), ENODATA);
  EXPECT_EQ(in.GetXattr("shared", kAccess).status().sys_errno(), ENODATA);
  EXPECT_EQ(in.GetXattr("shared", kDefault).status().sys_errno(), ENODATA);
  EXPECT_EQ(copy->Stat("f")->st_mode & 07777, 0640u);
}

SIGILFS_INSTANTIATE_FOR_STORES(TransferTest);

}  // namespace
}  // namespace sigilfs::core
