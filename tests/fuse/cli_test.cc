// End-to-end tests of the sigilfs command: init, passwd, info, demo and their refusals.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "sigilfs/core/config.h"
#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::ProcessResult;
using test::RunProcess;

class CliTest : public ::testing::Test {
 protected:
  ProcessResult Sigilfs(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), SIGILFS_BINARY);
    return RunProcess(args, input);
  }
  std::string PassFile(const std::string& name, const std::string& contents) {
    const fs::path p = tmp_.path() / name;
    std::ofstream(p) << contents;
    return p.string();
  }
  std::string Vault() const { return (tmp_.path() / "vault").string(); }
  std::string Config() const { return Vault() + "/" + core::kConfigFileName; }
  ProcessResult Init(const std::string& pass = "hunter2\n") {
    return Sigilfs({"init", Vault(), "--kdf", "test", "--passfile", PassFile("pw", pass)});
  }

  test::TempDir tmp_;
};

// Bad input is named in sigilfs's own words, one line each, with what would be right.
TEST_F(CliTest, BadInputIsNamedPlainly) {
  ASSERT_EQ(Init().exit_code, 0);
  const std::string pass = PassFile("pw", "hunter2\n");
  const fs::path file = tmp_.path() / "file";
  std::ofstream(file) << "x";
  const fs::path dir = tmp_.path() / "dir";
  fs::create_directory(dir);

  ProcessResult r = Sigilfs({"mount", Vault(), file.string(), "--passfile", pass});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(file.string() + " is not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not found"), std::string::npos) << r.err;

  const std::string missing = (tmp_.path() / "nowhere").string();
  r = Sigilfs({"mount", missing, dir.string(), "--passfile", pass});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: the vault " + missing + " does not exist\n");

  r = Sigilfs({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command 'frobnicate'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("mount"), std::string::npos) << r.err;  // the commands, listed
  EXPECT_NE(r.err.find("fsck"), std::string::npos) << r.err;

  r = Sigilfs({"init", (tmp_.path() / "v2").string(), "--cipher", "rot13", "--passfile", pass});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("aes-256-gcm or xchacha20-poly1305"), std::string::npos) << r.err;
  r = Sigilfs({"init", (tmp_.path() / "v3").string(), "--kdf", "fast", "--passfile", pass});
  EXPECT_EQ(r.exit_code, 2);  // a usage error
  EXPECT_NE(r.err.find("interactive,moderate,sensitive"), std::string::npos) << r.err;

  r = Sigilfs({"unmount", dir.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(dir.string() + " is not a sigilfs mount"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("fusermount"), std::string::npos) << r.err;

  // An unknown -o option: one line, a usage error, before the passphrase is read.
  r = Sigilfs({"mount", Vault(), dir.string(), "-o", "allow_other,frob=1", "--passfile", pass});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.rfind("sigilfs: unknown mount option 'frob=1' (sigilfs's own: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  // The source and type in the mount table are sigilfs's to set.
  r = Sigilfs({"mount", Vault(), dir.string(), "-o", "fsname=other", "--passfile", pass});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'fsname=other' is sigilfs's own to set"), std::string::npos) << r.err;
}

// A mount point that holds entries would have them vanish until the unmount: refused, naming
// them, unless -o nonempty.
TEST_F(CliTest, ANonEmptyMountPointIsRefusedUnlessAsked) {
  SIGILFS_NEEDS_FUSE();
  ASSERT_EQ(Init().exit_code, 0);
  const std::string pass = PassFile("pw", "hunter2\n");
  const fs::path dir = tmp_.path() / "dir";
  fs::create_directory(dir);
  std::ofstream(dir / "notes.txt") << "mine";
  ProcessResult r = Sigilfs({"mount", Vault(), dir.string(), "--passfile", pass});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: invalid argument: the mount point " + dir.string() +
                       " is not empty ('notes.txt'): the mount would hide that; -o nonempty "
                       "mounts anyway\n");
  EXPECT_TRUE(test::MountsAt(dir.string()).empty());
  r = Sigilfs({"mount", Vault(), dir.string(), "-o", "nonempty", "--passfile", pass});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_empty(dir));  // the vault's (empty) root, over the file
  r = Sigilfs({"unmount", dir.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadAll(dir / "notes.txt"), "mine");
}

TEST_F(CliTest, InitThenInfo) {
  ProcessResult r = Init();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(Config()));
  r = Sigilfs({"info", Vault()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("aes-256-gcm"), std::string::npos);
  EXPECT_NE(r.out.find("Argon2id(1 pass, 8 KiB)"), std::string::npos);
  EXPECT_EQ(r.out.find("ciphertext"), std::string::npos);  // no key material, wrapped or not
}

TEST_F(CliTest, InitWithXChaChaAndExtpass) {
  ProcessResult r = Sigilfs({"init", Vault(), "--kdf", "test", "--cipher", "xchacha20-poly1305",
                             "--extpass", "echo from-a-program"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Sigilfs({"info", Vault()});
  EXPECT_NE(r.out.find("xchacha20-poly1305, 4096-byte pages, 24-byte nonce"), std::string::npos);
  // The extpass passphrase works for passwd too; a failing program is an error, not a passphrase.
  r = Sigilfs({"passwd", Vault(), "--extpass", "echo from-a-program", "--new-extpass", "false"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--extpass program failed"), std::string::npos);
}

TEST_F(CliTest, PassphraseFromStandardInput) {
  ProcessResult r = Sigilfs({"init", Vault(), "--kdf", "test"}, "typed-in\n");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Sigilfs({"passwd", Vault(), "--new-passfile", PassFile("n", "next")}, "typed-in\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(CliTest, WrongPassphraseIsOneLineExitOneAndWritesNothing) {
  ASSERT_EQ(Init().exit_code, 0);
  const std::string before = test::ReadAll(Config());
  ProcessResult r = Sigilfs({"passwd", Vault(), "--passfile", PassFile("bad", "nope"),
                             "--new-passfile", PassFile("new", "new")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n");
  EXPECT_EQ(test::ReadAll(Config()), before);
}

TEST_F(CliTest, PasswdRewrapsAndOldPassphraseStopsWorking) {
  ASSERT_EQ(Init().exit_code, 0);
  ProcessResult r = Sigilfs({"passwd", Vault(), "--passfile", PassFile("pw", "hunter2"),
                             "--new-passfile", PassFile("new", "correct horse")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = Sigilfs({"passwd", Vault(), "--passfile", PassFile("pw", "hunter2"), "--new-passfile",
               PassFile("x", "x")});
  EXPECT_EQ(r.err, "sigilfs: wrong passphrase\n");
  r = Sigilfs({"passwd", Vault(), "--passfile", PassFile("new", "correct horse"), "--new-passfile",
               PassFile("x", "x"), "--kdf", "test", "--kdf-opslimit", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Sigilfs({"info", Vault()}).out.find("Argon2id(2 passes"), std::string::npos);
}

TEST_F(CliTest, InitRefusesNonEmptyDirectory) {
  fs::create_directory(Vault());
  std::ofstream(Vault() + "/precious") << "data";
  ProcessResult r = Init();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not empty"), std::string::npos);
  EXPECT_EQ(test::ReadAll(Vault() + "/precious"), "data");
  EXPECT_FALSE(fs::exists(Config()));
}

TEST_F(CliTest, DamagedConfigsAreNamed) {
  ASSERT_EQ(Init().exit_code, 0);
  const std::string good = test::ReadAll(Config());
  struct Case {
    std::string contents;
    std::string expect;
  } cases[] = {
      {good.substr(0, good.size() / 3), "not valid JSON"},
      {"", "the file is empty"},
      {"hello", "not valid JSON"},
      {std::string(good).replace(good.find("\"version\": 1"), 12, "\"version\": 9"),
       "vault format version 9 is not supported"},
      {std::string(good).replace(good.find("\"opslimit\": 1"), 13, "\"opslimit\": 2"),
       "checksum mismatch"},
  };
  for (const Case& c : cases) {
    std::ofstream(Config(), std::ios::trunc) << c.contents;
    for (const char* cmd : {"info", "passwd"}) {
      ProcessResult r = Sigilfs({cmd, Vault(), "--passfile", PassFile("pw", "hunter2"),
                                 "--new-passfile", PassFile("n", "n")});
      if (std::string(cmd) == "info") r = Sigilfs({"info", Vault()});
      EXPECT_EQ(r.exit_code, 1) << cmd << " " << c.expect;
      EXPECT_NE(r.err.find(c.expect), std::string::npos) << cmd << ": " << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  fs::remove(Config());
  ProcessResult r = Sigilfs({"info", Vault()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no vault config"), std::string::npos);
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Sigilfs({}).exit_code, 2);
  EXPECT_EQ(Sigilfs({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(Sigilfs({"init"}).exit_code, 2);
  EXPECT_EQ(Sigilfs({"init", Vault(), "--passfile", "a", "--extpass", "b"}).exit_code, 2);
  EXPECT_EQ(Sigilfs({"--help"}).exit_code, 0);
  ProcessResult r =
      Sigilfs({"init", Vault(), "--kdf", "extreme", "--passfile", PassFile("p", "p")});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--kdf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("interactive"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Config()));
}

// The cheap KDF the suites make their vaults with is not offered to users: without
// SIGILFS_TEST_KDF=1 (which this suite sets for itself) it is an unknown choice, and no help
// mentions it.
TEST_F(CliTest, TheTestKdfNeedsItsSwitch) {
  const std::vector<std::string> env = test::EnvironmentWithout("SIGILFS_TEST_KDF");
  ProcessResult r = RunProcess(
      {SIGILFS_BINARY, "init", Vault(), "--kdf", "test", "--passfile", PassFile("p", "p")}, "",
      env);
  EXPECT_EQ(r.exit_code, 2);
  for (const char* preset : {"interactive", "moderate", "sensitive"})
    EXPECT_NE(r.err.find(preset), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(Config()));
  const std::vector<std::vector<std::string>> helps = {
      {"init", "--help"}, {"passwd", "--help"}, {"home", "setup", "--help"}};
  for (std::vector<std::string> args : helps) {
    args.insert(args.begin(), SIGILFS_BINARY);
    r = RunProcess(args, "", env);
    EXPECT_EQ(r.exit_code, 0) << args[1];
    EXPECT_NE(r.out.find("--kdf"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("test"), std::string::npos) << r.out;
  }
  // With the switch (this suite's environment), it works.
  std::vector<std::string> with = env;
  with.emplace_back("SIGILFS_TEST_KDF=1");
  r = RunProcess(
      {SIGILFS_BINARY, "init", Vault(), "--kdf", "test", "--passfile", PassFile("p", "p")}, "",
      with);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(Sigilfs({"info", Vault()}).out.find("Argon2id(1 pass, 8 KiB)"), std::string::npos);
}

TEST_F(CliTest, EmptyPassphraseIsRefused) {
  ProcessResult r = Init("\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("empty passphrase"), std::string::npos);
  EXPECT_FALSE(fs::exists(Config()));
}

TEST_F(CliTest, DemoRuns) {
  SIGILFS_NEEDS_FUSE();
  ProcessResult r = Sigilfs({"demo", "--dir", tmp_.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sigilfs: wrong passphrase"), std::string::npos);
  EXPECT_NE(r.out.find("Demo finished"), std::string::npos);
  EXPECT_NE(r.out.find("read back through the mount: identical"), std::string::npos);
  EXPECT_NE(r.out.find("found in the cipher files or names: no"), std::string::npos);
}

// Long commands draw a progress line on a terminal (here a pseudo-terminal from script(1)), and
// nothing when standard error is not one, or with --quiet.
TEST_F(CliTest, LongCommandsShowProgressOnlyOnATerminal) {
  ASSERT_EQ(Init().exit_code, 0);
  const std::string pass = PassFile("pw", "hunter2\n");
  const fs::path src = tmp_.path() / "src";
  fs::create_directories(src);
  {
    std::ofstream big(src / "big", std::ios::binary);
    const std::string chunk(1 << 20, 'x');
    for (int i = 0; i < 8; ++i) big << chunk;
  }
  std::ofstream(src / "small") << "small";
  const auto on_terminal = [&](const std::string& args) {
    return RunProcess({"/usr/bin/script", "-qec",
                       std::string(SIGILFS_BINARY) + " " + args + " --passfile " + pass,
                       "/dev/null"});
  };
  ProcessResult r = on_terminal("import " + Vault() + " " + src.string());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\rimport: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("import: 8.0 MiB, 2 files in "), std::string::npos) << r.out;
  r = on_terminal("verity enable " + Vault() + " src/big");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\rsealing src/big: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sha256:"), std::string::npos) << r.out;
  r = on_terminal("verity verify " + Vault() + " src/big");
  EXPECT_NE(r.out.find("\rverifying src/big: "), std::string::npos) << r.out;
  r = on_terminal("fsck " + Vault());
  EXPECT_NE(r.out.find("\rfsck: "), std::string::npos) << r.out;
  r = on_terminal("export " + Vault() + " src " + (tmp_.path() / "out").string());
  EXPECT_NE(r.out.find("export: 8.0 MiB, 2 files in "), std::string::npos) << r.out;
  // --quiet on a terminal, and no terminal: not a byte of it.
  r = on_terminal("verity verify " + Vault() + " src/big --quiet");
  EXPECT_EQ(r.out.find("verifying"), std::string::npos) << r.out;
  r = Sigilfs({"export", Vault(), "src", (tmp_.path() / "out2").string(), "--passfile", pass});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace sigilfs
