// The sigilfs command's messages, word for word: each names a thing once and says what it is
// (issue 39, point 9); usage errors exit 2; options come after the positional arguments too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sigilfs/core/config.h"
#include "sigilfs/core/format.h"
#include "test_support/cli_vault.h"
#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;

class CliMessagesTest : public test::CliVaultTest {
 protected:
  void SetUp() override {
    CliVaultTest::SetUp();
    std::ofstream(Wrong()) << "hunter3\n";
  }
  std::string Wrong() const { return Path("wrong"); }
  // A plain file and an empty directory beside the vault.
  std::string AFile() const {
    std::ofstream(Path("afile")) << "x";
    return Path("afile");
  }
  std::string ADir() const {
    fs::create_directories(Path("adir"));
    return Path("adir");
  }
};

// "not found: nonexist: nonexist: No such file or directory" named the entry twice.
TEST_F(CliMessagesTest, AMissingEntryIsNamedOnce) {
  ProcessResult r = Sigilfs({"export", Vault(), "nonexist", Path("out"), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: nonexist: No such file or directory\n");
  r = Sigilfs({"export", Vault(), "nonexist", "-", "--passfile", Pass()});
  EXPECT_EQ(r.err, "sigilfs: nonexist: No such file or directory\n");
  r = Sigilfs({"verity", "enable", Vault(), "nonexist", "--passfile", Pass()});
  EXPECT_EQ(r.err, "sigilfs: nonexist: No such file or directory\n");
}

TEST_F(CliMessagesTest, AWrongPassphraseIsSaidOnce) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"export", Vault(), ".", Path("out"), "--passfile", Wrong()},
        {"fsck", Vault(), "--passfile", Wrong()},
        {"passwd", Vault(), "--passfile", Wrong(), "--new-passfile", Pass()},
        {"info", Vault(), "--passfile", Wrong()}}) {
    const ProcessResult r = Sigilfs(args);
    EXPECT_NE(r.exit_code, 0) << args[0];
    EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n") << args[0];
  }
}

// A damaged page, reported by fsck, export and verify-backup (on its own): the file once.
TEST_F(CliMessagesTest, ADamagedPageNamesItsFileOnce) {
  fs::create_directories(Path("src"));
  std::ofstream(Path("src/big")) << std::string(5 * 4096, 'b');
  ASSERT_EQ(Sigilfs({"import", Vault(), Path("src/big"), "--passfile", Pass()}).exit_code, 0);
  fs::path cipher_file;
  for (const auto& e : fs::directory_iterator(Vault()))
    if (e.path().filename().string().find('.') == std::string::npos) cipher_file = e.path();
  ASSERT_FALSE(cipher_file.empty());
  {
    // A byte of page 2: after the header and two pages with their nonces and tags.
    std::fstream f(cipher_file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(core::kFileHeaderSize + 2 * (4096 + 28) + 100));
    f.put('!');
  }
  const std::string line = "big: authentication failed: page 2: authentication tag mismatch\n";
  ProcessResult r = Sigilfs({"fsck", Vault(), "--passfile", Pass(), "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, line);
  r = Sigilfs({"verify-backup", Vault(), "--passfile", Pass(), "-q"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, line);
  r = Sigilfs({"export", Vault(), "big", Path("out"), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + line);
}

// A file where a directory belongs: the vault, or the mount point, is not a directory.
TEST_F(CliMessagesTest, AFileWhereADirectoryBelongsIsSaidSo) {
  const std::string file = AFile();
  ProcessResult r = Sigilfs({"init", file, "--kdf", "test", "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the vault " + file + " is not a directory\n");
  for (const char* command : {"info", "fsck", "passwd"}) {
    r = Sigilfs({command, file});
    EXPECT_NE(r.exit_code, 0) << command;
    EXPECT_EQ(r.err, "sigilfs: the vault " + file + " is not a directory\n") << command;
  }
  r = Sigilfs({"mount", file, ADir(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the vault " + file + " is not a directory\n");
  r = Sigilfs({"mount", Vault(), file, "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the mount point " + file + " is not a directory\n");
  r = Sigilfs({"mount", Vault(), Path("nowhere"), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the mount point " + Path("nowhere") + " does not exist\n");
}

// `info /nonexist` said it had no vault config; it has no directory.
TEST_F(CliMessagesTest, AMissingVaultDirectoryIsSaidSo) {
  const std::string missing = Path("nonexist");
  for (const char* command : {"info", "fsck", "passwd", "export", "verify-backup"}) {
    std::vector<std::string> args = {command, missing};
    if (std::string(command) == "export") args.insert(args.end(), {"f", Path("out")});
    const ProcessResult r = Sigilfs(args);
    EXPECT_NE(r.exit_code, 0) << command;
    EXPECT_EQ(r.err, "sigilfs: the vault " + missing + " does not exist\n") << command;
  }
  const ProcessResult r = Sigilfs({"mount", missing, ADir(), "--passfile", Pass()});
  EXPECT_EQ(r.err, "sigilfs: the vault " + missing + " does not exist\n");
  // An existing directory without a config is still asked whether it is a vault.
  EXPECT_EQ(Sigilfs({"info", ADir()}).err,
            "sigilfs: not found: no vault config " + ADir() + "/" + core::kConfigFileName +
                " (is this a sigilfs vault? create one with 'sigilfs init')\n");
}

// verify-backup given a plain directory as the copy suggested `sigilfs init`.
TEST_F(CliMessagesTest, APlainDirectoryIsNoCopyOfAView) {
  const std::string dir = ADir();
  ProcessResult r = Sigilfs({"verify-backup", dir, "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sigilfs: invalid argument: " + dir +
                       " is not a copy of an encrypted view: it has no sigilfs.conf\n");
  // The plain tree itself, given in the copy's place.
  ASSERT_EQ(Sigilfs({"init", "--reverse", dir, "--kdf", "test", "--passfile", Pass()}).exit_code,
            0);
  r = Sigilfs({"verify-backup", dir, Vault(), "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "sigilfs: invalid argument: " + dir +
                       " is a plain tree made ready for backups, not a copy of its view "
                       "(sigilfs verify-backup COPY " +
                       dir + ")\n");
}

// A value an option cannot take is a usage error (exit 2), as CLI11's own are.
TEST_F(CliMessagesTest, ABadOptionValueExitsTwo) {
  const std::string dir = ADir();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--transport", "bogus"},
       "sigilfs: invalid argument: unknown transport 'bogus' (auto, uring or dev)\n"},
      {{"-o", "transport=bogus"},
       "sigilfs: invalid argument: unknown transport 'bogus' (auto, uring or dev)\n"},
      {{"--idle", "soon"}, "sigilfs: invalid argument: not a duration (like 90s, 10m, 2h): soon\n"},
      {{"--handle-cache", "many"},
       "sigilfs: invalid argument: the handle cache is not a count: many\n"},
      {{"--readahead", "100000"},
       "sigilfs: invalid argument: the read-ahead is at most 65536 KiB\n"},
  };
  for (const auto& [options, message] : cases) {
    std::vector<std::string> args = {"mount", Vault(), dir, "--passfile", Pass()};
    args.insert(args.end(), options.begin(), options.end());
    const ProcessResult r = Sigilfs(args);
    EXPECT_EQ(r.exit_code, 2) << options[0];
    EXPECT_EQ(r.err, message);
  }
}

// Every command takes its options after its positional arguments (`sigilfs info v1
// --passfile pass` failed: info took no passphrase; now it checks one).
TEST_F(CliMessagesTest, OptionsFollowThePositionalArguments) {
  fs::create_directories(Path("src"));
  std::ofstream(Path("src/f")) << "contents";
  const std::vector<std::vector<std::string>> commands = {
      {"info", Vault(), "--passfile", Pass()},
      {"import", Vault(), Path("src"), "--passfile", Pass(), "-q"},
      {"verity", "enable", Vault(), "src/f", "--passfile", Pass(), "-q"},
      {"verity", "measure", Vault(), "src/f", "--passfile", Pass()},
      {"verity", "verify", Vault(), "src/f", "--passfile", Pass(), "-q"},
      {"fsck", Vault(), "--passfile", Pass(), "-q"},
      {"export", Vault(), "src", Path("out"), "--passfile", Pass(), "-q"},
      {"verify-backup", Vault(), "--passfile", Pass(), "-q"},
      {"passwd", Vault(), "--passfile", Pass(), "--new-passfile", Pass(), "--kdf", "test"},
      {"init", Path("v2"), "--kdf", "test", "--passfile", Pass()},
      {"init", ADir(), "--reverse", "--kdf", "test", "--passfile", Pass()},
  };
  for (const std::vector<std::string>& args : commands) {
    const ProcessResult r = Sigilfs(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << " " << args[1] << ": " << r.err;
  }
  EXPECT_NE(Sigilfs({"info", Vault(), "--passfile", Pass()})
                .out.find("\npassphrase:   unlocks the vault\n"),
            std::string::npos);
  // Refused by the command (no such user, or not root), not by the parser.
  const ProcessResult r =
      Sigilfs({"home", "setup", "sgt-no-such-user", "--kdf", "test", "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err, ::geteuid() == 0 ? "sigilfs: not found: no such user: sgt-no-such-user\n"
                                    : "sigilfs: permission denied: sigilfs home setup must be run "
                                      "as root\n");
}

// The mount and the unmount, with their options last.
TEST_F(CliMessagesTest, MountOptionsFollowThePositionalArguments) {
  SIGILFS_NEEDS_FUSE();
  const std::string point = ADir();
  ProcessResult r = Sigilfs({"mount", Vault(), point, "--passfile", Pass(), "-o", "ro"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Sigilfs({"unmount", point, "--timeout", "30"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::MountsAt(point).empty());
}

// A mount refused because shared mounts serve the vault says so, and how to join them; a
// shared mount refused by one that is not shared says that.
TEST_F(CliMessagesTest, ARefusalByASharedMountSaysSo) {
  SIGILFS_NEEDS_FUSE();
  const std::string other = ADir();
  fs::create_directories(Path("plain"));
  {
    test::MountedVault shared(Vault(), Path("plain"), Pass(), {"--shared"});
    const ProcessResult r = Sigilfs({"mount", Vault(), other, "--passfile", Pass()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "sigilfs: the vault " + Vault() + " is mounted --shared on " +
                         fs::canonical(Path("plain")).string() +
                         "; use --shared to mount it too\n");
  }
  test::MountedVault alone(Vault(), Path("plain"), Pass());
  const ProcessResult r = Sigilfs({"mount", Vault(), other, "--shared", "--passfile", Pass()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the vault " + Vault() + " is mounted on " +
                       fs::canonical(Path("plain")).string() + " without --shared\n");
}

}  // namespace
}  // namespace sigilfs
