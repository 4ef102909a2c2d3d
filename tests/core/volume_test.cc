// The volume's directory calls (IVs, names, long names, listings) on a BackingDir, against the
// POSIX and the memory store: the namespace's storage rules, tested without a mount.
#include "sigilfs/core/volume.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "sigilfs/crypt/random.h"
#include "test_support/stores.h"
#include "test_support/temp_dir.h"

namespace sigilfs::core {
namespace {

using test::Store;

class VolumeDirTest : public ::testing::TestWithParam<Store> {
 protected:
  void SetUp() override {
    volume_ = test::NewTestVolume((temp_.path() / "vault").string());
    store_ = test::NewStore(GetParam(), temp_.path() / "store");
    // A directory made as the vault makes them, to work in.
    crypt::RandomBytes(store_iv_);
    ASSERT_TRUE(volume_->MakeDirectory(*store_, store_iv_, "top", 0755).ok());
    top_ = std::move(store_->OpenDir(*volume_->StoredName(store_iv_, "top"))).value();
    auto iv = volume_->ReadDirIv(*top_);
    ASSERT_TRUE(iv.ok()) << iv.status().ToString();
    iv_ = *iv;
  }

  // The listing's plaintext names, and the stored names it could not open.
  std::vector<std::string> Listed(std::set<std::string>* damaged = nullptr) {
    std::vector<DirEntry> entries;
    EXPECT_TRUE(volume_
                    ->ListSorted(*top_, iv_, entries,
                                 [&](const std::string& stored, const Status&) {
                                   if (damaged != nullptr) damaged->insert(stored);
                                 })
                    .ok());
    std::vector<std::string> names;
    for (const DirEntry& e : entries) names.push_back(e.name);
    return names;
  }

  static ByteSpan AsBytes(std::string_view s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
  }

  test::TempDir temp_;
  std::unique_ptr<Volume> volume_;
  std::unique_ptr<BackingDir> store_, top_;
  DirIv store_iv_{}, iv_{};
};

TEST_P(VolumeDirTest, ADirectoryIsMadeWholeWithItsIvInAFileAndAnAttribute) {
  ASSERT_TRUE(volume_->MakeDirectory(*top_, iv_, "photos", 0750).ok());
  const std::string stored = *volume_->StoredName(iv_, "photos");
  EXPECT_NE(stored, "photos");
  auto st = top_->Stat(stored);
  ASSERT_TRUE(st.ok());
  EXPECT_TRUE(S_ISDIR(st->st_mode));
  EXPECT_EQ(st->st_mode & 07777, 0750u);
  auto sub = std::move(top_->OpenDir(stored)).value();
  bool from_attribute = true;
  auto iv = volume_->ReadDirIv(*sub, &from_attribute, Volume::DirIvCopies::kCompare);
  ASSERT_TRUE(iv.ok()) << iv.status().ToString();
  EXPECT_FALSE(from_attribute);
  EXPECT_NE(*iv, iv_) << "every directory has an IV of its own";
  EXPECT_EQ(*sub->GetXattr("", kDirIvAttrName), std::vector<uint8_t>(iv->begin(), iv->end()));
  // Taken names are refused, and nothing is left of the attempt; the listing shows the name.
  EXPECT_EQ(volume_->MakeDirectory(*top_, iv_, "photos", 0750).code(), Code::kExists);
  EXPECT_EQ(Listed(), std::vector<std::string>{"photos"});
  size_t entries = 0;
  ASSERT_TRUE(top_->List(0, [&](const BackingEntry&) { return ++entries, true; }).ok());
  EXPECT_EQ(entries, 2u) << "the new directory and this one's IV file, no temporary";
}

TEST_P(VolumeDirTest, ALongNameLivesInItsSideFile) {
  const std::string name(250, 'n');
  const std::string stored = *volume_->StoredName(iv_, name);
  ASSERT_TRUE(NameCodec::IsLongName(stored));
  ASSERT_TRUE(volume_->PrepareName(*top_, iv_, name).ok());
  ASSERT_TRUE(volume_->PrepareName(*top_, iv_, name).ok()) << "again: the same side file";
  ASSERT_TRUE(top_->OpenFile(stored, {.create = true, .exclusive = true}).ok());
  EXPECT_EQ(*volume_->PlainName(*top_, iv_, stored), name);
  EXPECT_EQ(Listed(), std::vector<std::string>{name});
  // A directory with a long name too.
  const std::string dir_name(200, 'd');
  ASSERT_TRUE(volume_->MakeDirectory(*top_, iv_, dir_name, 0755).ok());
  EXPECT_EQ(Listed(), (std::vector<std::string>{dir_name, name}));
  // Gone with its entry; a side file that does not match its name is damage, never a name.
  ASSERT_TRUE(top_->Unlink(stored).ok());
  volume_->ReleaseName(*top_, stored);
  EXPECT_EQ(top_->Stat(NameCodec::SideFileName(stored)).status().code(), Code::kNotFound);
  const std::string dir_stored = *volume_->StoredName(iv_, dir_name);
  const std::string side = NameCodec::SideFileName(dir_stored);
  ASSERT_TRUE(top_->Unlink(side).ok());
  auto forged = top_->OpenFile(side, {.create = true, .exclusive = true});
  ASSERT_TRUE(forged.ok());
  const std::string other = "not the name's cipher text";
  const ByteSpan parts[] = {AsBytes(other)};
  ASSERT_TRUE((*forged)->WriteAt(parts, 0).ok());
  std::set<std::string> damaged;
  EXPECT_TRUE(Listed(&damaged).empty());
  EXPECT_EQ(damaged, std::set<std::string>{dir_stored});
}

TEST_P(VolumeDirTest, ATornIvFileFallsBackToTheAttributeAndIsRestored) {
  ASSERT_TRUE(volume_->MakeDirectory(*top_, iv_, "d", 0755).ok());
  auto sub = std::move(top_->OpenDir(*volume_->StoredName(iv_, "d"))).value();
  const DirIv iv = *volume_->ReadDirIv(*sub);
  {
    auto file = sub->OpenFile(kDirIvFileName, {});
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Truncate(5).ok());  // what a crash leaves of an unflushed file
  }
  bool from_attribute = false;
  EXPECT_EQ(*volume_->ReadDirIv(*sub, &from_attribute), iv);
  EXPECT_TRUE(from_attribute);
  ASSERT_TRUE(volume_->RestoreDirIvFile(*sub, iv).ok());
  from_attribute = true;
  EXPECT_EQ(*volume_->ReadDirIv(*sub, &from_attribute, Volume::DirIvCopies::kCompare), iv);
  EXPECT_FALSE(from_attribute);
  // Two copies that differ are tampering, which a full check reports.
  DirIv other = iv;
  other[0] ^= 1;
  ASSERT_TRUE(sub->SetXattr("", kDirIvAttrName, other).ok());
  EXPECT_EQ(volume_->ReadDirIv(*sub, nullptr, Volume::DirIvCopies::kCompare).status().code(),
            Code::kCorrupt);
  // Without the file there is no directory IV at all.
  ASSERT_TRUE(sub->Unlink(kDirIvFileName).ok());
  EXPECT_EQ(volume_->ReadDirIv(*sub).status().code(), Code::kCorrupt);
}

TEST_P(VolumeDirTest, AListingShowsNamesOnlyAndReportsWhatDoesNotOpen) {
  for (const char* name : {"b", "a", "c"})
    ASSERT_TRUE(top_->OpenFile(*volume_->StoredName(iv_, name), {.create = true}).ok());
  // A name from another directory (another IV) and one that is no cipher text at all.
  ASSERT_TRUE(top_->OpenFile(*volume_->StoredName(store_iv_, "moved"), {.create = true}).ok());
  ASSERT_TRUE(top_->OpenFile("plain-text-name", {.create = true}).ok());
  std::set<std::string> damaged;
  EXPECT_EQ(Listed(&damaged), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(damaged.size(), 2u);
}

// A FUSE store (sshfs) may leave a file removed right after its last close hidden, with nothing
// holding it: removing the directory clears it. An NFS store's .nfsXXXX files are waited for
// (the client removes them at the last close), never removed, and any other entry refuses.
TEST_P(VolumeDirTest, RemovalClearsFuseHiddenFilesAndWaitsForNfsOnes) {
  auto made = [&](const std::string& plain, const std::string& left) {
    EXPECT_TRUE(volume_->MakeDirectory(*top_, iv_, plain, 0755).ok());
    const std::string stored = *volume_->StoredName(iv_, plain);
    auto sub = std::move(top_->OpenDir(stored)).value();
    EXPECT_TRUE(sub->OpenFile(left, {.create = true, .exclusive = true}).ok());
    return stored;
  };
  const std::string fuse = made("fuse", ".fuse_hidden0000002a00000001");
  ASSERT_TRUE(volume_->RemoveDirectory(*top_, fuse).ok());
  EXPECT_FALSE(top_->Stat(fuse).ok());

  const std::string nfs = made("nfs", ".nfs000000000000002a00000001");
  EXPECT_EQ(volume_->RemoveDirectory(*top_, nfs).code(), Code::kNotEmpty);
  EXPECT_TRUE(std::move(top_->OpenDir(nfs)).value()->Stat(".nfs000000000000002a00000001").ok());
  EXPECT_EQ(Listed(), (std::vector<std::string>{"nfs"}));  // and usable: its IV is back

  const std::string other = made("other", "AAAA");
  EXPECT_EQ(volume_->RemoveDirectory(*top_, other).code(), Code::kNotEmpty);
}

SIGILFS_INSTANTIATE_FOR_STORES(VolumeDirTest);

}  // namespace
// A shared mount derives a new directory's IV from its parent's and its name: the same directory
// made twice (on two hosts before they sync) has the same IV, so a synchronizer finds no two
// versions of it. An unshared mount draws it at random.
// A volume holds the vault's lock for its life: a second program (here a second volume) is
// refused, with EBUSY, until the first is closed; shared volumes go together, as shared mounts
// do, and refuse an exclusive one.
TEST(VolumeLockTest, AVolumeHoldsTheVaultUntilItIsClosed) {
  test::TempDir temp;
  const std::string dir = (temp.path() / "vault").string();
  auto unlock = [&] {
    return std::move(Vault::Unlock(dir, {reinterpret_cast<const uint8_t*>("pass"), 4})).value();
  };
  auto first = test::NewTestVolume(dir);
  EXPECT_TRUE(first->lock().held());
  auto second = Volume::Open(unlock(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().sys_errno(), EBUSY);
  EXPECT_EQ(second.status().message(),
            "the vault " + dir + " is in use by another sigilfs process");
  VolumeOptions shared;
  shared.pages.shared = true;
  EXPECT_EQ(Volume::Open(unlock(), std::move(shared)).status().sys_errno(), EBUSY);

  first.reset();
  auto exclusive = Volume::Open(unlock(), {});
  ASSERT_TRUE(exclusive.ok()) << exclusive.status().ToString();
  exclusive->reset();
  VolumeOptions one, two;
  one.pages.shared = two.pages.shared = true;
  auto a = Volume::Open(unlock(), std::move(one));
  auto b = Volume::Open(unlock(), std::move(two));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(Volume::Open(unlock(), {}).status().sys_errno(), EBUSY);
  // A caller that holds the lock itself, or goes on without one, says so.
  VolumeOptions unlocked;
  unlocked.lock = VaultLock();
  auto reader = Volume::Open(unlock(), std::move(unlocked));
  ASSERT_TRUE(reader.ok());
  EXPECT_FALSE((*reader)->lock().held());
}

TEST(VolumeSharedTest, ASharedVolumeDerivesNewDirectoryIvsFromTheirPlace) {
  test::TempDir temp;
  VolumeOptions shared;
  shared.pages.shared = true;
  auto volume = test::NewTestVolume((temp.path() / "vault").string(), std::move(shared));
  auto root = std::move(OpenPosixBackingDir((temp.path() / "vault").string())).value();
  const DirIv parent = std::move(volume->ReadDirIv(*root)).value();
  auto iv_of = [&](const std::string& plain) {
    const std::string stored = std::move(volume->StoredName(parent, plain)).value();
    auto dir = std::move(root->OpenDir(stored)).value();
    return std::move(volume->ReadDirIv(*dir)).value();
  };
  ASSERT_TRUE(volume->MakeDirectory(*root, parent, "photos", 0755).ok());
  const DirIv first = iv_of("photos");
  ASSERT_TRUE(volume->RemoveDirectory(*root, *volume->StoredName(parent, "photos")).ok());
  ASSERT_TRUE(volume->MakeDirectory(*root, parent, "photos", 0755).ok());
  EXPECT_EQ(iv_of("photos"), first);
  ASSERT_TRUE(volume->MakeDirectory(*root, parent, "music", 0755).ok());
  EXPECT_NE(iv_of("music"), first);
  auto keys = std::move(ReverseKeys::FromSubkey(volume->vault().keys().reverse.span())).value();
  EXPECT_EQ(first, keys->DirIvOfEntry(parent, *volume->StoredName(parent, "photos")));

  auto unshared = test::NewTestVolume((temp.path() / "other").string());
  auto other = std::move(OpenPosixBackingDir((temp.path() / "other").string())).value();
  const DirIv other_parent = std::move(unshared->ReadDirIv(*other)).value();
  std::set<std::vector<uint8_t>> ivs;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(unshared->MakeDirectory(*other, other_parent, "photos", 0755).ok());
    const std::string stored = *unshared->StoredName(other_parent, "photos");
    auto dir = std::move(other->OpenDir(stored)).value();
    const DirIv iv = std::move(unshared->ReadDirIv(*dir)).value();
    ivs.insert(std::vector<uint8_t>(iv.begin(), iv.end()));
    ASSERT_TRUE(unshared->RemoveDirectory(*other, stored).ok());
  }
  EXPECT_EQ(ivs.size(), 2u);
}

}  // namespace sigilfs::core
