// End-to-end tests of pam_sigilfs.so with Debian's pamtester, pam_unix and a throw-away account:
// a login mounts the home as the user, sessions are counted, the last close unmounts, a password
// change re-wraps the vault, and no wrong or missing password ever refuses a login.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include "sigilfs/core/vault.h"
#include "test_support/fuse_access.h"
#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/pam_services.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/system_user.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

using test::kPamtester;
const std::string kOldPassword = "Old-pass-4711";
const std::string kNewPassword = "New-pass-0815";
const std::string kMarker = "plaintext marker 0123456789";

class PamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = test::PamSessionsUnavailable();
    SIGILFS_NEEDS(why.empty(), why);
    SIGILFS_NEEDS_FUSE();
    // The account runs sigilfs and reaches its home: both must be reachable by others (the
    // build tree may not be), so the binary is copied next to the homes.
    fs::permissions(tmp_.path(), fs::perms(0755));
    for (const char* dir : {"homes", "vaults", "bin"}) fs::create_directories(Tmp(dir));
    fs::copy_file(SIGILFS_BINARY, Tmp("bin/sigilfs"));
    fs::permissions(Tmp("bin/sigilfs"), fs::perms(0755));
    user_ = std::make_unique<test::SystemUser>(Tmp("homes"));
    user_->SetPassword(kOldPassword);
    fuse_access_ = std::make_unique<test::FuseDeviceAccess>(user_->uid());
    SIGILFS_NEEDS(fuse_access_->error().empty(), fuse_access_->error());
    // The home moves into a vault wrapped with the login password, typed on standard input.
    ProcessResult r = RunProcess({SIGILFS_BINARY, "home", "setup", user_->name(), "--vault",
                                  Vault(), "--migrate", "--kdf", "test"},
                                 kOldPassword + "\n");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;  // it is the login password
    services_ = std::make_unique<test::PamServices>(
        "sigilfs-test-" + user_->name(), "vault=" + Tmp("vaults").string() + "/%u sigilfs=" +
                                             Tmp("bin/sigilfs").string() + " debug");
  }

  fs::path Tmp(const std::string& rel) const { return tmp_.path() / rel; }
  std::string Vault() const { return Tmp("vaults/" + user_->name()).string(); }

  // pamtester SERVICE USER OPERATIONS..., with `input` (passwords, one a line) on stdin.
  ProcessResult Pam(const std::string& service, std::vector<std::string> operations,
                    const std::string& input = "", const test::SystemUser* user = nullptr) {
    std::vector<std::string> args = {kPamtester, "-v", service,
                                     (user == nullptr ? *user_ : *user).name()};
    args.insert(args.end(), operations.begin(), operations.end());
    return RunProcess(args, input);
  }

  // How many sigilfs mounts sit on the user's home.
  size_t Mounts() const {
    size_t n = 0;
    for (const auto& m : test::MountsAt(user_->home())) n += m.type == "fuse.sigilfs" ? 1 : 0;
    return n;
  }
  int Sessions() const {
    std::ifstream in("/run/sigilfs/" + std::to_string(user_->uid()));
    int n = 0;
    in >> n;
    return n;
  }
  bool Unlocks(const std::string& password) const {
    return core::Vault::Unlock(Vault(), AsBytes(password)).ok();
  }

  test::TempDir tmp_;
  std::unique_ptr<test::SystemUser> user_;
  std::unique_ptr<test::FuseDeviceAccess> fuse_access_;
  std::unique_ptr<test::PamServices> services_;
};

TEST_F(PamTest, LoginMountsTheHomeAsTheUserAndTheLastCloseUnmounts) {
  ProcessResult r = Pam(services_->strict(), {"authenticate", "open_session"}, kOldPassword + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto mounts = test::MountsAt(user_->home());
  ASSERT_EQ(mounts.size(), 1u);
  EXPECT_EQ(mounts[0].type, "fuse.sigilfs");
  // The user's own mount, with the kernel checking permissions, and nobody else let in.
  EXPECT_NE(mounts[0].super_options.find("user_id=" + std::to_string(user_->uid())),
            std::string::npos)
      << mounts[0].super_options;
  EXPECT_NE(mounts[0].super_options.find("default_permissions"), std::string::npos);
  EXPECT_EQ(mounts[0].super_options.find("allow_other"), std::string::npos);
  struct stat st;
  EXPECT_NE(::stat((user_->home() + "/.profile").c_str(), &st), 0);
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(Sessions(), 1);

  // The user sees the migrated files and writes a new one; in the vault it is ciphertext and
  // theirs.
  const std::string file = user_->home() + "/hello.txt";
  std::set<std::string> before;
  for (const auto& e : fs::recursive_directory_iterator(Vault())) before.insert(e.path());
  const int rc = user_->RunAs([&] {
    if (::access((user_->home() + "/.profile").c_str(), R_OK) != 0) return 1;
    { std::ofstream(file) << kMarker; }
    return test::ReadAll(file) == kMarker ? 0 : 2;
  });
  EXPECT_EQ(rc, 0);
  std::vector<fs::path> added;
  for (const auto& e : fs::recursive_directory_iterator(Vault()))
    if (before.count(e.path()) == 0) added.push_back(e.path());
  ASSERT_EQ(added.size(), 1u);
  ASSERT_EQ(::lstat(added[0].c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, user_->uid());
  EXPECT_GT(static_cast<size_t>(st.st_size), kMarker.size());
  EXPECT_EQ(test::ReadAll(added[0]).find("plaintext marker"), std::string::npos);

  r = Pam(services_->strict(), {"close_session"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 0u);
  EXPECT_EQ(Sessions(), 0);
  // Unmounted, the home is the empty directory again.
  EXPECT_TRUE(fs::is_empty(user_->home()));
}

TEST_F(PamTest, ASecondSessionDoesNotMountTwice) {
  for (int i = 0; i < 2; ++i) {
    ProcessResult r =
        Pam(services_->strict(), {"authenticate", "open_session"}, kOldPassword + "\n");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  EXPECT_EQ(Mounts(), 1u);
  EXPECT_EQ(Sessions(), 2);
  ASSERT_EQ(Pam(services_->strict(), {"close_session"}).exit_code, 0);
  EXPECT_EQ(Mounts(), 1u);  // one session is still open
  EXPECT_EQ(Sessions(), 1);
  ASSERT_EQ(Pam(services_->strict(), {"close_session"}).exit_code, 0);
  EXPECT_EQ(Mounts(), 0u);
  EXPECT_EQ(Sessions(), 0);
  // A whole session in one process: mounted, then unmounted.
  ProcessResult r = Pam(services_->strict(), {"authenticate", "open_session", "close_session"},
                        kOldPassword + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 0u);
  EXPECT_EQ(Sessions(), 0);
}

TEST_F(PamTest, AChangedPasswordRewrapsTheVault) {
  // As a user's own passwd does (root is asked for the old password with this flag).
  ProcessResult r = Pam(services_->strict(), {"chauthtok(PAM_CHANGE_EXPIRED_AUTHTOK)"},
                        kOldPassword + "\n" + kNewPassword + "\n" + kNewPassword + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Unlocks(kNewPassword));
  EXPECT_FALSE(Unlocks(kOldPassword));

  r = Pam(services_->strict(), {"authenticate", "open_session"}, kNewPassword + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 1u);
  ASSERT_EQ(Pam(services_->strict(), {"close_session"}).exit_code, 0);
  EXPECT_EQ(Mounts(), 0u);

  // The old password: pam_unix refuses it, and where pam_unix is not the judge the login goes
  // on, with the home left unmounted.
  EXPECT_NE(Pam(services_->strict(), {"authenticate"}, kOldPassword + "\n").exit_code, 0);
  r = Pam(services_->lenient(), {"authenticate", "open_session"}, kOldPassword + "\n");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 0u);
  EXPECT_EQ(Sessions(), 1);
  ASSERT_EQ(Pam(services_->lenient(), {"close_session"}).exit_code, 0);
  EXPECT_EQ(Sessions(), 0);
}

TEST_F(PamTest, APasswordSetByRootLeavesTheVaultPassphraseAndTheChangeSucceeds) {
  // root is not asked for the old password: the vault cannot be re-wrapped, and says so.
  ProcessResult r =
      Pam(services_->strict(), {"chauthtok"}, kNewPassword + "\n" + kNewPassword + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(Unlocks(kOldPassword));
  EXPECT_FALSE(Unlocks(kNewPassword));
  // The new login password works; the vault does not open with it, and the login goes on.
  r = Pam(services_->strict(), {"authenticate", "open_session"}, kNewPassword + "\n");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 0u);
  ASSERT_EQ(Pam(services_->strict(), {"close_session"}).exit_code, 0);
}

TEST_F(PamTest, AWrongOrMissingPasswordNeverRefusesTheSession) {
  ProcessResult r = Pam(services_->lenient(), {"authenticate", "open_session"}, "wrong\n");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 0u);
  // No authentication at all (a key login): the session opens, unmounted.
  r = Pam(services_->strict(), {"open_session"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(Mounts(), 0u);
  EXPECT_EQ(Sessions(), 2);
  ASSERT_EQ(Pam(services_->strict(), {"close_session"}).exit_code, 0);
  ASSERT_EQ(Pam(services_->strict(), {"close_session"}).exit_code, 0);
  EXPECT_EQ(Sessions(), 0);
}

TEST_F(PamTest, AccountsWithoutAVaultAreLeftAlone) {
  test::SystemUser other(Tmp("homes"));
  other.SetPassword(kOldPassword);
  ProcessResult r = Pam(services_->strict(), {"authenticate", "open_session", "close_session"},
                        kOldPassword + "\n", &other);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(test::MountsAt(other.home()).empty());
  EXPECT_FALSE(fs::exists("/run/sigilfs/" + std::to_string(other.uid())));
}

}  // namespace
}  // namespace sigilfs
