// `sigilfs stats` and what `sigilfs info` says of a mounted vault: the transport and the counters
// of a mount over /dev/fuse and over io_uring, as the mount's daemon alone tells them; a daemon
// that has ended or does not answer, and a mount that is not one's own, named in one line; names
// that do not decrypt logged once per mount and counted; a failing write-back shown while it is
// outstanding.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "test_support/daemon_stats.h"
#include "test_support/mount.h"
#include "test_support/mount_table.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/small_fs.h"
#include "test_support/temp_dir.h"
#include "test_support/uring.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;
using test::MountedVault;
using test::ProcessResult;
using test::RunProcess;
using ::testing::HasSubstr;

ProcessResult Stats(const std::string& point, bool json = false) {
  std::vector<std::string> args = {SIGILFS_BINARY, "stats", point};
  if (json) args.emplace_back("--json");
  return RunProcess(args);
}

// `sigilfs stats --json` parsed; an empty object (and a failure) where it is not JSON.
nlohmann::json StatsJson(const std::string& point) {
  const ProcessResult r = Stats(point, true);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_object()) << r.out;
  return j.is_object() ? j : nlohmann::json::object();
}

// Requests of kind `kind` over transport `over` ("dev" or "uring") in stats `j`.
long long Requests(const nlohmann::json& j, const std::string& kind, const std::string& over) {
  if (!j.contains("requests") || !j["requests"].contains(kind)) return 0;
  return j["requests"][kind].value(over, 0LL);
}

// The line of `text` that starts with `label`, or "".
std::string LineOf(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(label, 0) == 0) return line;
  return "";
}

// Twenty files written and read back on the mount: creates, writes, reads and the rest.
void Work(const MountedVault& v) {
  for (int i = 0; i < 20; ++i) {
    const std::string name = v.path("f" + std::to_string(i));
    std::ofstream(name) << "data " << i;
    EXPECT_EQ(test::ReadAll(name), "data " + std::to_string(i));
  }
}

// The figures every mount shows, over whichever transport (`over`), as JSON and for a reader.
void ExpectFigures(const MountedVault& v, const std::string& over) {
  const nlohmann::json j = StatsJson(v.plain());
  EXPECT_EQ(j.value("mount_point", ""), v.plain());
  EXPECT_EQ(j.value("vault", ""), fs::canonical(v.cipher()).string());
  EXPECT_EQ(j.value("pid", -1), v.pid());
  EXPECT_EQ(j.value("shared", true), false);
  EXPECT_GE(j.value("uptime_seconds", -1), 0);
  EXPECT_GT(j.value("memory_resident_bytes", 0), 0);
  EXPECT_GE(j.value("memory_peak_bytes", 0), j.value("memory_resident_bytes", 0));
  EXPECT_EQ(j.value("transport", ""), over) << j.dump();
  EXPECT_EQ(Requests(j, "init", "dev"), 1) << "INIT comes over /dev/fuse";
  EXPECT_GE(Requests(j, "create", over), 20) << j.dump();
  EXPECT_GE(Requests(j, "write", over), 20) << j.dump();
  EXPECT_GE(Requests(j, "read", over), 1) << j.dump();
  const std::string other = over == "dev" ? "uring" : "dev";
  EXPECT_EQ(Requests(j, "write", other), 0) << j.dump();
  long long sum = 0;
  for (const auto& [kind, by] : j["requests"].items()) sum += by.value(over, 0LL);
  EXPECT_EQ(sum, j.value("requests_" + over, -1LL)) << "every request is of a kind";
  for (const char* key : {"pages_cached", "pages_dirty", "writeback_failing_files", "names_skipped",
                          "pages_encrypted", "nodes"})
    EXPECT_TRUE(j.contains(key) && j[key].is_number_unsigned()) << key;
  EXPECT_EQ(j.value("writeback_failing_files", -1), 0);
  EXPECT_EQ(j.value("names_skipped", -1), 0);

  const ProcessResult r = Stats(v.plain());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(LineOf(r.out, "mount point:"), "mount point:   " + v.plain());
  EXPECT_EQ(LineOf(r.out, "vault:"),
            "vault:         " + fs::canonical(v.cipher()).string() + " (exclusive)");
  EXPECT_THAT(LineOf(r.out, "daemon:"),
              HasSubstr("daemon:        process " + std::to_string(v.pid()) + ", up "));
  EXPECT_EQ(LineOf(r.out, "requests:"), "requests:       /dev/fuse   io_uring");
  EXPECT_THAT(LineOf(r.out, "  write "), ::testing::MatchesRegex("  write +[0-9]+ +[0-9]+"));
  EXPECT_EQ(LineOf(r.out, "write-back:"), "write-back:    no errors outstanding");
  EXPECT_EQ(LineOf(r.out, "names skipped:"), "names skipped: 0");
}

TEST(CliStatsTest, ShowsTheTransportAndTheCountersOverDevFuse) {
  SIGILFS_NEEDS_FUSE();
  MountedVault v({"--transport", "dev"});
  Work(v);
  ExpectFigures(v, "dev");
  const nlohmann::json j = StatsJson(v.plain());
  EXPECT_EQ(j.value("transport_asked", ""), "dev");
  EXPECT_EQ(j.value("requests_uring", -1), 0);
  EXPECT_EQ(LineOf(Stats(v.plain()).out, "transport:"),
            "transport:     dev (asked for: --transport dev)");
}

TEST(CliStatsTest, ShowsTheTransportAndTheCountersOverIoUring) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("turning the kernel's FUSE-over-io_uring switch on needs root");
  SIGILFS_NEEDS(test::KernelHasFuseOverUring(), "this kernel has no FUSE over io_uring");
  const test::UringSwitch on(true);
  ASSERT_TRUE(on.ok()) << "cannot turn " << test::kUringSwitch << " on";
  for (const std::string transport : {"uring", "auto"}) {
    SCOPED_TRACE(transport);
    MountedVault v({"--transport", transport});
    Work(v);
    ExpectFigures(v, "uring");
    const nlohmann::json j = StatsJson(v.plain());
    EXPECT_EQ(j.value("transport_asked", ""), transport);
    const std::string why =
        transport == "uring" ? "asked for: --transport uring" : "auto: the kernel offers io_uring";
    EXPECT_EQ(j.value("transport_why", ""), why);
    const unsigned queues = j.value("uring_queues", 0u);
    const unsigned depth = j.value("uring_queue_depth", 0u);
    EXPECT_EQ(queues, static_cast<unsigned>(::sysconf(_SC_NPROCESSORS_CONF)));
    EXPECT_GT(depth, 1u);
    EXPECT_EQ(LineOf(Stats(v.plain()).out, "transport:"),
              "transport:     uring (" + why + "), " + std::to_string(queues) +
                  (queues == 1 ? " queue" : " queues") + " of " + std::to_string(depth) +
                  " entries");
  }
}

// Where the kernel's switch is off, `auto` serves over /dev/fuse, and says why.
TEST(CliStatsTest, AutoSaysWhyItServesOverDevFuse) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS_ROOT("turning the kernel's FUSE-over-io_uring switch off needs root");
  SIGILFS_NEEDS(test::KernelHasFuseOverUring(), "this kernel has no FUSE over io_uring");
  const test::UringSwitch off(false);
  ASSERT_TRUE(off.ok());
  MountedVault v({"--transport", "auto"});
  Work(v);
  ExpectFigures(v, "dev");
  EXPECT_EQ(LineOf(Stats(v.plain()).out, "transport:"),
            "transport:     dev (auto: the kernel does not offer io_uring; Linux 6.14 and later "
            "do, with the fuse module's enable_uring on)");
}

// The stats file (--stats-file, written on SIGUSR1) holds the figures `sigilfs stats --json`
// prints, by the same names.
TEST(CliStatsTest, TheStatsFileHoldsTheSameFigures) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir out;
  const std::string file = (out.path() / "stats.json").string();
  MountedVault v({"--stats-file", file});
  Work(v);
  const nlohmann::json asked = StatsJson(v.plain());
  const nlohmann::json written =
      nlohmann::json::parse(test::RequestStats(v.pid(), file), nullptr, false);
  ASSERT_TRUE(written.is_object());
  std::vector<std::string> asked_keys, written_keys;
  for (const auto& [key, value] : asked.items()) asked_keys.push_back(key);
  for (const auto& [key, value] : written.items()) written_keys.push_back(key);
  EXPECT_EQ(asked_keys, written_keys);
  EXPECT_EQ(written.value("pid", -1), v.pid());
}

// A daemon killed (or crashed) leaves its mount dead: stats and info name it and the command
// that clears it, and ask nothing of the mount itself (which would answer "Transport endpoint is
// not connected").
TEST(CliStatsTest, ADeadDaemonIsNamedWithTheCommandThatClearsIt) {
  SIGILFS_NEEDS_FUSE();
  MountedVault v;
  ASSERT_EQ(::kill(v.pid(), SIGKILL), 0);
  // Gone once its record is free (the kernel closes its files as it ends).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  ProcessResult r;
  do {
    r = Stats(v.plain());
  } while (r.exit_code == 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "sigilfs: " + v.plain() + ": its daemon has ended; `sigilfs unmount " +
                       v.plain() + "` clears the mount it left\n");
  r = RunProcess({SIGILFS_BINARY, "info", v.cipher()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LineOf(r.out, "mounted:"), "mounted:      " + v.plain() +
                                           " (its daemon has ended: `sigilfs unmount " + v.plain() +
                                           "` clears it)");
  r = RunProcess({SIGILFS_BINARY, "unmount", v.plain()});
  EXPECT_TRUE(test::MountsAt(v.plain()).empty()) << r.err;
  r = Stats(v.plain());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + v.plain() + " is not a sigilfs mount\n");
}

// A daemon that does not answer (stopped here; stuck, or flooded) holds `sigilfs stats` up for
// five seconds at most, and is named.
TEST(CliStatsTest, ADaemonThatDoesNotAnswerIsNamedInFiveSeconds) {
  SIGILFS_NEEDS_FUSE();
  MountedVault v;
  ASSERT_EQ(::kill(v.pid(), SIGSTOP), 0);
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = Stats(v.plain());
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(::kill(v.pid(), SIGCONT), 0);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + v.plain() + ": its daemon (process " + std::to_string(v.pid()) +
                       ") did not answer within 5 s\n");
  EXPECT_LT(took, std::chrono::seconds(8));
  EXPECT_EQ(Stats(v.plain()).exit_code, 0) << "answers again once it runs";
}

// What is not a mount of sigilfs's, or not one's own, is refused in one line.
TEST(CliStatsTest, WhatIsNotOnesOwnMountIsRefusedPlainly) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir dir;
  ProcessResult r = Stats(dir.path().string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "sigilfs: " + dir.path().string() + " is not a sigilfs mount\n");

  const std::string plain = (dir.path() / "plain").string(), view = (dir.path() / "view").string();
  const std::string pass = (dir.path() / "pass").string();
  fs::create_directories(plain);
  fs::create_directories(view);
  std::ofstream(pass) << "backup passphrase\n";
  r = RunProcess({SIGILFS_BINARY, "init", "--reverse", plain, "--kdf", "test", "--passfile", pass});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  {
    MountedVault reverse(MountedVault::ReverseView{}, plain, view, pass);
    r = Stats(view);
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "sigilfs: " + view +
                         " is an encrypted view (sigilfs reverse), which keeps no stats\n");
  }

  if (::geteuid() == 0) {
    MountedVault v;
    r = RunProcess({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    SIGILFS_BINARY, "stats", v.plain()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "sigilfs: " + v.plain() +
                         " is a mount of uid 0: only that user or root may ask its daemon\n");
  }
}

// A write-back that fails (a full disk) shows as outstanding while the file that holds the
// changes is open, and no longer once its close has reported it.
TEST(CliStatsTest, AWriteBackFailingOnAFullDiskShowsUntilTheFileIsClosed) {
  SIGILFS_NEEDS_FUSE();
  SIGILFS_NEEDS(test::SmallFilesystem::Available(), "mounting a tmpfs needs root");
  const test::SmallFilesystem small(2 << 20);
  test::TempDir work;
  const std::string cipher = (small.path() / "cipher").string();
  const std::string plain = (work.path() / "plain").string();
  const std::string pass = (work.path() / "pass").string();
  fs::create_directories(cipher);
  fs::create_directories(plain);
  std::ofstream(pass) << "test passphrase\n";
  ProcessResult r =
      RunProcess({SIGILFS_BINARY, "init", cipher, "--kdf", "test", "--passfile", pass});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  MountedVault v(cipher, plain, pass);
  const int fd = ::open(v.path("big").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  // Open twice: the close of a descriptor a forked `sigilfs stats` inherits (and closes at its
  // exec) flushes too, and a failed flush of a file's only opener gives its changes up.
  const int other = ::open(v.path("big").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(other, 0);
  const std::string chunk(64 * 1024, 'x');
  bool synced = true;
  for (int i = 0; i < 64 && synced; ++i) {
    ASSERT_EQ(::write(fd, chunk.data(), chunk.size()), static_cast<ssize_t>(chunk.size()));
    synced = ::fsync(fd) == 0;
  }
  ASSERT_FALSE(synced) << "the 2 MiB store did not fill up";
  ASSERT_EQ(errno, ENOSPC);
  nlohmann::json j = StatsJson(v.plain());
  EXPECT_EQ(j.value("writeback_failing_files", -1), 1) << j.dump();
  EXPECT_GT(j.value("pages_dirty", 0), 0) << j.dump();
  EXPECT_EQ(LineOf(Stats(v.plain()).out, "write-back:"),
            "write-back:    failing for 1 file: changes not stored yet (a full disk?); each such "
            "file reports it at its next fsync or close");
  EXPECT_NE(::close(fd), 0) << "the close reports what was not stored";
  ::close(other);
  // The last release, which gives the changes up, comes after the close returned.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    j = StatsJson(v.plain());
  } while (j.value("writeback_failing_files", -1) != 0 &&
           std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(j.value("writeback_failing_files", -1), 0) << j.dump();
  EXPECT_EQ(j.value("pages_dirty", -1), 0) << j.dump();
  EXPECT_EQ(LineOf(Stats(v.plain()).out, "write-back:"), "write-back:    no errors outstanding");
}

// `sigilfs info` names each mount of the vault and its mode, as the daemon says.
TEST(CliStatsTest, InfoNamesTheMountsAndTheirModes) {
  SIGILFS_NEEDS_FUSE();
  test::TempDir dir;
  std::optional<MountedVault> first;
  first.emplace(std::vector<std::string>{});
  const std::string cipher = first->cipher(), pass = first->passfile();
  ProcessResult r = RunProcess({SIGILFS_BINARY, "info", cipher});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(LineOf(r.out, "mounted:"), "mounted:      " + first->plain() + " (exclusive, process " +
                                           std::to_string(first->pid()) + ")");
  first->Unmount();
  r = RunProcess({SIGILFS_BINARY, "info", cipher});
  EXPECT_EQ(LineOf(r.out, "mounted:"), "mounted:      no");

  const std::string a = (dir.path() / "a").string(), b = (dir.path() / "b").string();
  fs::create_directories(a);
  fs::create_directories(b);
  MountedVault shared_a(cipher, a, pass, {"--shared"});
  MountedVault shared_b(cipher, b, pass, {"--shared"});
  r = RunProcess({SIGILFS_BINARY, "info", cipher});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string line_a = a + " (shared, process " + std::to_string(shared_a.pid()) + ")";
  const std::string line_b = b + " (shared, process " + std::to_string(shared_b.pid()) + ")";
  EXPECT_THAT(r.out, HasSubstr("\nmounted:      " + line_a + "\n              " + line_b + "\n"))
      << r.out;
  EXPECT_EQ(LineOf(Stats(a).out, "vault:"),
            "vault:         " + fs::canonical(cipher).string() + " (shared)");
}

// Regular files and directories directly in cipher directory `dir` whose names have no '.'
// (stored names, not the vault's own files).
std::vector<fs::path> StoredIn(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    if ((directories ? e.is_directory() : e.is_regular_file()) &&
        e.path().filename().string().find('.') == std::string::npos)
      out.push_back(e.path());
  return out;
}

// `path` renamed to a name of the same shape that does not decrypt: its first character changed
// within the base64url alphabet (the SIV tag then fails). The new name.
std::string Damage(const fs::path& path) {
  std::string name = path.filename().string();
  name[0] = name[0] == 'A' ? 'B' : 'A';
  fs::rename(path, path.parent_path() / name);
  return name;
}

// A name that does not decrypt (changed in the cipher directory) is left out of listings, the
// directory's other entries listed; the mount logs it once, by its cipher path, however often
// it is listed, and counts it.
TEST(CliStatsTest, ANameThatDoesNotDecryptIsLoggedOnceAndCounted) {
  SIGILFS_NEEDS_FUSE();
  MountedVault v;
  fs::create_directory(v.path("d"));
  std::ofstream(v.path("beta")) << "b";
  std::ofstream(v.path("d/gamma")) << "g";
  std::ofstream(v.path("d/delta")) << "dd";
  v.Unmount();
  const std::vector<fs::path> files = StoredIn(v.cipher(), false);
  const std::vector<fs::path> dirs = StoredIn(v.cipher(), true);
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(dirs.size(), 1u);
  const std::string d = dirs[0].filename().string();
  const std::string beta = Damage(files[0]);
  // Of the two files in d, gamma is the shorter: 1 byte against delta's 2.
  const std::vector<fs::path> in_d = StoredIn(dirs[0], false);
  ASSERT_EQ(in_d.size(), 2u);
  const std::string gamma =
      Damage(*std::min_element(in_d.begin(), in_d.end(), [](const fs::path& x, const fs::path& y) {
        return fs::file_size(x) < fs::file_size(y);
      }));
  v.Mount();
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> root, sub;
    for (const auto& e : fs::directory_iterator(v.plain())) root.push_back(e.path().filename());
    for (const auto& e : fs::directory_iterator(v.path("d"))) sub.push_back(e.path().filename());
    EXPECT_THAT(root, ::testing::ElementsAre("d"));
    EXPECT_THAT(sub, ::testing::ElementsAre("delta"));
  }
  const nlohmann::json j = StatsJson(v.plain());
  EXPECT_EQ(j.value("names_skipped", -1), 2);
  EXPECT_EQ(LineOf(Stats(v.plain()).out, "names skipped:"),
            "names skipped: 2 (names that do not decrypt, left out of listings; the daemon's log "
            "names each)");
  const std::string log = v.log();
  const auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) ++n;
    return n;
  };
  const std::string prefix = "sigilfs: left out of listings, as its name does not decrypt: ";
  EXPECT_EQ(count(prefix + beta + " ("), 1u) << log;
  EXPECT_EQ(count(prefix + d + "/" + gamma + " ("), 1u) << log;
  EXPECT_EQ(count(prefix), 2u) << log;
  EXPECT_THAT(log, HasSubstr("); logged once per mount, counted by `sigilfs stats`\n"));
}

}  // namespace
}  // namespace sigilfs
