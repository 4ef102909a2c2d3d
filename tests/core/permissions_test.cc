// The permission rules a FUSE server keeps (core::permissions) without a kernel: the modes and
// ACLs of new entries, ACLs set and removed with the modes they imply, chmod's rewrite of an
// access ACL, set-ID bits cleared by a change; against the POSIX and the memory store.
#include "sigilfs/core/permissions.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cerrno>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sigilfs/core/acl.h"
#include "sigilfs/core/tree.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

// user::rwx, user:4242:r-x, group::r-x, mask::r-x, other::--- (a named user: not a mode).
acl::Acl NamedUserAcl() {
  return {{acl::kUserObj, 7, acl::kUndefinedId},
          {acl::kUser, 5, 4242},
          {acl::kGroupObj, 5, acl::kUndefinedId},
          {acl::kMask, 5, acl::kUndefinedId},
          {acl::kOther, 0, acl::kUndefinedId}};
}

// user::rw-, group::r--, other::r-- (what mode 0644 says in full).
acl::Acl ModeAcl() {
  return {{acl::kUserObj, 6, acl::kUndefinedId},
          {acl::kGroupObj, 4, acl::kUndefinedId},
          {acl::kOther, 4, acl::kUndefinedId}};
}

class PermissionsTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    std::unique_ptr<BackingDir> store = test::NewStore(GetParam(), temp_.path() / "store");
    ASSERT_TRUE(Tree::Format(*store).ok());
    tree_ = std::move(Tree::Open(*volume_, std::move(store))).value();
    root_ = std::move(tree_->Root()).value();
    // A store without user.* attributes (a POSIX temporary directory on some filesystems)
    // cannot keep ACLs: only the memory store's run then says anything.
    ASSERT_TRUE(tree_->MakeDir(*root_, "probe", 0755).ok());
    auto probe = Object("probe");
    const std::vector<uint8_t> value = acl::Serialize(NamedUserAcl());
    Status s = tree_->StoreAcl(*probe, acl::kDefaultName, &value, 0, 0755);
    if (s.sys_errno() == EOPNOTSUPP) GTEST_SKIP() << "the store keeps no extended attributes";
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::unique_ptr<BackingDir> Object(const std::string& name) {
    auto stored = volume_->StoredName(root_->iv(), name);
    EXPECT_TRUE(stored.ok());
    return std::move(root_->backing().OpenObject(*stored)).value();
  }
  mode_t Mode(BackingDir& object) { return object.Stat("")->st_mode & 07777; }
  Result<acl::Acl> StoredAcl(BackingDir& object, std::string_view name) {
    SIGILFS_ASSIGN_OR_RETURN(std::vector<uint8_t> value, tree_->GetXattr(object, name));
    return acl::Parse(value);
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<Tree> tree_;
  std::unique_ptr<Tree::Dir> root_;
};

TEST_P(PermissionsTest, ANewEntryTakesTheUmaskWithoutADefaultAcl) {
  ASSERT_TRUE(tree_->MakeDir(*root_, "plain", 0755).ok());
  auto parent = Object("plain");
  for (const bool acls : {false, true}) {
    auto modes = permissions::ForNew(*tree_, *parent, S_IFREG, 0666, 022, acls);
    ASSERT_TRUE(modes.ok()) << modes.status().ToString();
    EXPECT_EQ(modes->mode, 0644u);
    EXPECT_TRUE(modes->access_acl.empty());
    EXPECT_TRUE(modes->default_acl.empty());
    EXPECT_EQ(modes->initial(), 0644u);
  }
}

TEST_P(PermissionsTest, ANewEntryInheritsTheDefaultAclInsteadOfTheUmask) {
  auto parent = Object("probe");  // default ACL: NamedUserAcl
  auto file = permissions::ForNew(*tree_, *parent, S_IFREG, 0666, 077, /*acls=*/true);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->mode, 0640u);  // the ACL restricts the mode; the umask does not apply
  EXPECT_FALSE(file->access_acl.empty());
  EXPECT_TRUE(file->default_acl.empty());
  EXPECT_EQ(file->initial(), 0600u);  // owner's bits only until the ACL is stored
  auto dir = permissions::ForNew(*tree_, *parent, S_IFDIR, 0777, 077, /*acls=*/true);
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(dir->mode, 0750u);
  EXPECT_FALSE(dir->default_acl.empty());  // a directory passes it on
  // Without ACLs kept the stored default ACL is not looked at.
  auto off = permissions::ForNew(*tree_, *parent, S_IFREG, 0666, 077, /*acls=*/false);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->mode, 0600u);
  EXPECT_TRUE(off->access_acl.empty());
}

TEST_P(PermissionsTest, FinishNewStoresTheInheritedAclsThenTheMode) {
  auto parent = Object("probe");
  auto modes = permissions::ForNew(*tree_, *parent, S_IFDIR, 0777, 0, /*acls=*/true);
  ASSERT_TRUE(modes.ok());
  ASSERT_TRUE(tree_->MakeDir(*root_, "child", modes->initial()).ok());
  auto child = Object("child");
  ASSERT_TRUE(permissions::FinishNew(*tree_, *child, *modes).ok());
  EXPECT_EQ(Mode(*child), 0750u);
  auto access = StoredAcl(*child, acl::kAccessName);
  ASSERT_TRUE(access.ok()) << access.status().ToString();
  EXPECT_EQ(access->size(), 5u);
  EXPECT_TRUE(StoredAcl(*child, acl::kDefaultName).ok());
}

TEST_P(PermissionsTest, ASpecialFileGetsTheOwningGroupsBitsAndNoAcl) {
  permissions::NewModes modes;
  modes.mode = 0750;  // the group bits are the mask (r-x)
  modes.access_acl = acl::Serialize({{acl::kUserObj, 7, acl::kUndefinedId},
                                     {acl::kUser, 7, 4242},
                                     {acl::kGroupObj, 1, acl::kUndefinedId},
                                     {acl::kMask, 5, acl::kUndefinedId},
                                     {acl::kOther, 0, acl::kUndefinedId}});
  permissions::WithoutAcl(modes);
  EXPECT_EQ(modes.mode, 0710u);
  EXPECT_TRUE(modes.access_acl.empty());
}

TEST_P(PermissionsTest, AnAccessAclThatAModeSaysIsTheModeAndIsNotStored) {
  ASSERT_TRUE(tree_->MakeNode(*root_, "f", S_IFREG | 0600, 0).ok());
  auto f = Object("f");
  ASSERT_TRUE(permissions::SetAcl(*tree_, *f, *f->Stat(""), acl::kAccessName, ModeAcl(), 0,
                                  /*acls=*/true, {})
                  .ok());
  EXPECT_EQ(Mode(*f), 0644u);
  EXPECT_EQ(StoredAcl(*f, acl::kAccessName).status().sys_errno(), ENODATA);
  // One with a named user is stored, its mask the group bits.
  ASSERT_TRUE(permissions::SetAcl(*tree_, *f, *f->Stat(""), acl::kAccessName, NamedUserAcl(), 0,
                                  /*acls=*/true, {})
                  .ok());
  EXPECT_EQ(Mode(*f), 0750u);
  EXPECT_TRUE(StoredAcl(*f, acl::kAccessName).ok());
  // Without ACLs kept, only what a mode says is taken.
  EXPECT_EQ(permissions::SetAcl(*tree_, *f, *f->Stat(""), acl::kAccessName, NamedUserAcl(), 0,
                                /*acls=*/false, {})
                .sys_errno(),
            EOPNOTSUPP);
  // A default ACL only on a directory.
  EXPECT_EQ(permissions::SetAcl(*tree_, *f, *f->Stat(""), acl::kDefaultName, ModeAcl(), 0, true, {})
                .sys_errno(),
            EACCES);
  // Removed: gone, the mode as it was; removing again is no error.
  ASSERT_TRUE(permissions::RemoveAcl(*tree_, *f, *f->Stat(""), acl::kAccessName).ok());
  EXPECT_EQ(StoredAcl(*f, acl::kAccessName).status().sys_errno(), ENODATA);
  EXPECT_EQ(Mode(*f), 0750u);
  EXPECT_TRUE(permissions::RemoveAcl(*tree_, *f, *f->Stat(""), acl::kAccessName).ok());
}

TEST_P(PermissionsTest, SettingAnAclDropsSetGroupIdForACallerOutsideTheGroup) {
  ASSERT_TRUE(tree_->MakeNode(*root_, "f", S_IFREG | 0600, 0).ok());
  auto f = Object("f");
  ASSERT_TRUE(f->SetMode("", 02644).ok());
  const struct stat st = *f->Stat("");
  ASSERT_TRUE(
      permissions::SetAcl(*tree_, *f, st, acl::kAccessName, ModeAcl(), 0, true, [&](gid_t g) {
        return g == st.st_gid;
      }).ok());
  EXPECT_EQ(Mode(*f), 02644u);
  ASSERT_TRUE(permissions::SetAcl(*tree_, *f, *f->Stat(""), acl::kAccessName, ModeAcl(), 0, true,
                                  [](gid_t) { return false; })
                  .ok());
  EXPECT_EQ(Mode(*f), 0644u);
}

TEST_P(PermissionsTest, ChmodRewritesTheAccessAclsMaskOwnerAndOther) {
  ASSERT_TRUE(tree_->MakeNode(*root_, "f", S_IFREG | 0600, 0).ok());
  auto f = Object("f");
  ASSERT_TRUE(
      permissions::SetAcl(*tree_, *f, *f->Stat(""), acl::kAccessName, NamedUserAcl(), 0, true, {})
          .ok());
  ASSERT_TRUE(permissions::Chmod(*tree_, *f, S_IFREG, 0604, /*acls=*/true).ok());
  EXPECT_EQ(Mode(*f), 0604u);
  auto now = StoredAcl(*f, acl::kAccessName);
  ASSERT_TRUE(now.ok());
  std::map<uint16_t, uint16_t> perms;  // by tag (one entry each here)
  for (const acl::Entry& e : *now) perms[e.tag] = e.perm;
  EXPECT_EQ(perms[acl::kUserObj], 6);
  EXPECT_EQ(perms[acl::kMask], 0);      // the group class follows the mode
  EXPECT_EQ(perms[acl::kGroupObj], 5);  // the owning group's own entry stays
  EXPECT_EQ(perms[acl::kUser], 5);
  EXPECT_EQ(perms[acl::kOther], 4);
  // Without an ACL, or without ACLs kept, a chmod is the mode alone.
  ASSERT_TRUE(tree_->MakeNode(*root_, "g", S_IFREG | 0600, 0).ok());
  auto g = Object("g");
  ASSERT_TRUE(permissions::Chmod(*tree_, *g, S_IFREG, 0640, true).ok());
  EXPECT_EQ(Mode(*g), 0640u);
  ASSERT_TRUE(permissions::Chmod(*tree_, *f, S_IFREG, 0700, /*acls=*/false).ok());
  EXPECT_EQ(Mode(*f), 0700u);
}

SIGILFS_INSTANTIATE_FOR_STORES(PermissionsTest);

// The set-ID rule needs no store.
struct stat FileWithMode(mode_t mode, gid_t gid = 100) {
  struct stat st {};
  st.st_mode = S_IFREG | mode;
  st.st_gid = gid;
  return st;
}

TEST(SetIdTest, AChangeClearsSetUserIdAndSetGroupIdAsTheKernelDoes) {
  const auto member = [](gid_t g) { return g == 100; };
  const auto outsider = [](gid_t) { return false; };
  // Set-user-ID always goes.
  EXPECT_EQ(permissions::ClearedSetId(FileWithMode(04755), member, {}), 0755u);
  // Set-group-ID with group execute always goes.
  EXPECT_EQ(permissions::ClearedSetId(FileWithMode(02755), member, {}), 0755u);
  // Without group execute (mandatory locking's mark) only for a caller outside the group.
  EXPECT_EQ(permissions::ClearedSetId(FileWithMode(02745), member, {}), std::nullopt);
  EXPECT_EQ(permissions::ClearedSetId(FileWithMode(02745), outsider, {}), 0745u);
  // Nothing to clear, a caller with CAP_FSETID, or not a regular file: nothing changes.
  EXPECT_EQ(permissions::ClearedSetId(FileWithMode(0755), outsider, {}), std::nullopt);
  EXPECT_EQ(permissions::ClearedSetId(FileWithMode(06755), outsider, [] { return true; }),
            std::nullopt);
  struct stat dir = FileWithMode(02755);
  dir.st_mode = S_IFDIR | 02755;
  EXPECT_EQ(permissions::ClearedSetId(dir, outsider, {}), std::nullopt);
  EXPECT_EQ(permissions::WithoutSetId(06755, true), 0755u);
  EXPECT_EQ(permissions::WithoutSetId(06745, true), 02745u);
  EXPECT_EQ(permissions::WithoutSetId(06745, false), 0745u);
}

}  // namespace
}  // namespace sigilfs::core
