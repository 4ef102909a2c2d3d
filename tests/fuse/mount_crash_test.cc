// Crash consistency through a real mount: worker processes write, append, overwrite, rename,
// fsync and fdatasync on the mount and journal, outside it, what each fsync made durable; the
// daemon is killed with SIGKILL at a random moment. Then, on the same vault:
// `sigilfs fsck` lists the damaged pages, the vault mounts again as it is, every fsync'd byte
// reads back (no file loses more than the one page being written, which gives EIO), exactly
// the pages fsck listed give EIO, and the tree walks cleanly and matches fsck's counts.
// Damaged pages are then repaired the documented way (truncate or rewrite) and the next round
// crashes the same vault again. SIGILFS_LONG=1 runs 50 rounds; SIGILFS_SEED replays one run.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "test_support/mount.h"
#include "test_support/process.h"
#include "test_support/requirements.h"
#include "test_support/temp_dir.h"

namespace sigilfs {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPage = 4096;
constexpr uint64_t kOverwriteSize = 256 * 1024 + 123;  // not a page multiple: a short last page
constexpr uint64_t kRoundBudget = 40 << 20;            // bytes a worker writes at most per round
constexpr int kLogs = 3;
constexpr int kOverwriteFiles = 2;
constexpr int kFinalNames = 6;  // few, so renames often replace an existing file

// Word w of the stream `seed` (splitmix64 of both): bytes 8w..8w+7 of a file.
uint64_t StreamWord(uint64_t seed, uint64_t w) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + w * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Byte x of the stream `seed`: any range of a file can be checked on its own.
uint8_t StreamByte(uint64_t seed, uint64_t x) {
  return static_cast<uint8_t>(StreamWord(seed, x >> 3) >> (8 * (x & 7)));
}

// A word at a time: the worker must spend its time writing, not computing what to write.
std::vector<uint8_t> Stream(uint64_t seed, uint64_t offset, uint64_t length) {
  std::vector<uint8_t> out(length);
  uint64_t x = offset;
  for (uint64_t i = 0; i < length;) {
    const uint64_t word = StreamWord(seed, x >> 3);
    for (unsigned b = x & 7; b < 8 && i < length; ++b, ++i, ++x)
      out[i] = static_cast<uint8_t>(word >> (8 * b));
  }
  return out;
}

// --- The worker: a child process that must only make system calls and _exit. ---

class Worker {
 public:
  // Works in `dir` (relative to the mount's root `root`), which it makes.
  Worker(std::string root, std::string dir, uint64_t seed, int journal)
      : root_(std::move(root)), dir_(std::move(dir)), rng_(seed), journal_(journal) {}

  // Runs until an operation fails (the daemon is gone) or the budget is spent; never returns.
  [[noreturn]] void Run() {
    Setup();
    while (written_ < kRoundBudget) {
      const uint32_t op = Pick(100);
      if (op < 30) {
        DurableFile();
      } else if (op < 62) {
        AppendToLog();
      } else if (op < 95) {
        Overwrite();
      } else {
        Check(::fsync(dir_fd_), "fsync " + dir_);
      }
    }
    Journal("done");
    ::_exit(0);
  }

 private:
  uint32_t Pick(uint32_t n) { return std::uniform_int_distribution<uint32_t>(0, n - 1)(rng_); }
  uint64_t Between(uint64_t lo, uint64_t hi) {
    return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
  }
  // Write sizes of every kind: a few bytes (read-modify-write), whole pages, tens of KiB, and
  // runs long enough to go past the daemon's cache.
  uint64_t ChunkSize() {
    const uint32_t kind = Pick(10);
    if (kind < 3) return Between(1, 600);
    if (kind < 5) return kPage * Between(1, 4);
    if (kind < 8) return Between(600, 40000);
    return Between(64 * 1024, 400 * 1024);
  }

  std::string Path(const std::string& name) const { return root_ + "/" + dir_ + "/" + name; }

  void Journal(const std::string& line) {
    const std::string l = line + "\n";
    if (::write(journal_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) ::_exit(20);
  }
  // The first failure ends the worker. After the kill every call fails (ENOTCONN mostly; a
  // request cut off in flight may give ECONNABORTED or EIO, as the kernel decides); before it,
  // none may, which the parent checks by the time of the failure (CLOCK_MONOTONIC, which the
  // processes share).
  void Check(long rc, const std::string& what) {
    if (rc >= 0) return;
    const int err = errno;
    const auto now = std::chrono::steady_clock::now().time_since_epoch();
    Journal("X " + std::to_string(err) + " " +
            std::to_string(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()) +
            " " + what);
    ::_exit(0);
  }
  void Sync(int fd, const std::string& what) {
    if (Pick(2) == 0)
      Check(::fsync(fd), "fsync " + what);
    else
      Check(::fdatasync(fd), "fdatasync " + what);
  }
  void WriteAll(int fd, const std::vector<uint8_t>& data, uint64_t offset, bool append,
                const std::string& what) {
    for (size_t done = 0; done < data.size();) {
      const ssize_t n = append ? ::write(fd, data.data() + done, data.size() - done)
                               : ::pwrite(fd, data.data() + done, data.size() - done,
                                          static_cast<off_t>(offset + done));
      Check(n, "write " + what);
      if (n == 0) Check(-1, "write " + what + " (wrote nothing)");
      done += static_cast<size_t>(n);
    }
    written_ += data.size();
  }

  void Setup() {
    Check(::mkdir((root_ + "/" + dir_).c_str(), 0755), "mkdir " + dir_);
    const std::string parent = root_ + "/" + fs::path(dir_).parent_path().string();
    const int parent_fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY);
    Check(parent_fd, "open " + parent);
    Check(::fsync(parent_fd), "fsync " + parent);
    ::close(parent_fd);
    dir_fd_ = ::open((root_ + "/" + dir_).c_str(), O_RDONLY | O_DIRECTORY);
    Check(dir_fd_, "open " + dir_);
    Journal("M " + dir_);
    std::vector<std::string> made;
    for (int i = 0; i < kLogs; ++i) {
      const std::string name = "log" + std::to_string(i);
      log_seed_[i] = rng_();
      log_fd_[i] = ::open(Path(name).c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      Check(log_fd_[i], "create " + name);
      made.push_back("C " + dir_ + "/" + name + " " + std::to_string(log_seed_[i]));
    }
    for (int i = 0; i < kOverwriteFiles; ++i) {
      const std::string name = "ow" + std::to_string(i);
      const uint64_t seed = rng_();
      ow_fd_[i] = ::open(Path(name).c_str(), O_RDWR | O_CREAT, 0644);
      Check(ow_fd_[i], "create " + name);
      WriteAll(ow_fd_[i], Stream(seed, 0, kOverwriteSize), 0, false, name);
      Sync(ow_fd_[i], name);
      made.push_back("O " + dir_ + "/" + name + " " + std::to_string(kOverwriteSize) + " " +
                     std::to_string(seed));
    }
    Check(::fsync(dir_fd_), "fsync " + dir_);  // their names are durable from here on
    for (const std::string& m : made) Journal(m);
  }

  // Written under a temporary name, fsync'd (journaled), then usually renamed over one of a few
  // final names, the directory fsync'd (journaled), as editors and package managers do.
  void DurableFile() {
    const std::string tmp = "t" + std::to_string(next_tmp_++);
    const uint32_t kind = Pick(20);
    const uint64_t size = kind < 5    ? Between(0, 2000)
                          : kind < 14 ? Between(2000, 100000)
                                      : Between(100000, 1200000);
    const uint64_t seed = rng_();
    const int fd = ::open(Path(tmp).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    Check(fd, "create " + tmp);
    for (uint64_t done = 0; done < size;) {
      const uint64_t n = std::min(size - done, ChunkSize());
      WriteAll(fd, Stream(seed, done, n), done, false, tmp);
      done += n;
    }
    Sync(fd, tmp);
    Journal("F " + dir_ + "/" + tmp + " " + std::to_string(size) + " " + std::to_string(seed));
    Check(::close(fd), "close " + tmp);
    if (Pick(4) == 0) return;  // stays under its temporary name
    const std::string final_name = "f" + std::to_string(Pick(kFinalNames));
    Journal("N " + dir_ + "/" + tmp + " " + dir_ + "/" + final_name);
    Check(::rename(Path(tmp).c_str(), Path(final_name).c_str()), "rename " + tmp);
    Check(::fsync(dir_fd_), "fsync " + dir_);
    Journal("R " + dir_ + "/" + tmp + " " + dir_ + "/" + final_name);
  }

  void AppendToLog() {
    const int i = static_cast<int>(Pick(kLogs));
    const std::string name = dir_ + "/log" + std::to_string(i);
    const uint64_t n = ChunkSize();
    WriteAll(log_fd_[i], Stream(log_seed_[i], log_size_[i], n), 0, true, name);
    log_size_[i] += n;
    if (Pick(4) == 0) {
      Sync(log_fd_[i], name);
      Journal("L " + name + " " + std::to_string(log_size_[i]));
    }
  }

  // Overwrites inside the file (its size never changes), each with bytes of its own stream;
  // the intent is journaled first, since any write may have landed when the daemon dies.
  void Overwrite() {
    const int i = static_cast<int>(Pick(kOverwriteFiles));
    const std::string name = dir_ + "/ow" + std::to_string(i);
    const uint32_t kind = Pick(10);
    uint64_t len = kind < 4   ? Between(1, 600)
                   : kind < 7 ? kPage * Between(1, 8)
                              : Between(1, 40000);
    uint64_t off = Between(0, kOverwriteSize - len);
    if (kind >= 4 && kind < 7) off -= off % kPage;
    const uint64_t seed = rng_();
    Journal("W " + name + " " + std::to_string(seed) + " " + std::to_string(off) + " " +
            std::to_string(len));
    WriteAll(ow_fd_[i], Stream(seed, off, len), off, false, name);
    if (Pick(5) == 0) {
      Sync(ow_fd_[i], name);
      Journal("S " + name);
    }
  }

  const std::string root_;
  const std::string dir_;
  std::mt19937_64 rng_;
  const int journal_;
  int dir_fd_ = -1;
  uint64_t written_ = 0;
  uint64_t next_tmp_ = 0;
  int log_fd_[kLogs] = {};
  uint64_t log_seed_[kLogs] = {};
  uint64_t log_size_[kLogs] = {};
  int ow_fd_[kOverwriteFiles] = {};
};

// --- The checker. ---

struct FileRead {
  bool ok = false;             // opened, stat'd, and every page read or failed with EIO
  std::string error;           // what went wrong otherwise
  std::vector<uint8_t> data;   // damaged pages read as zeros here
  std::set<uint64_t> damaged;  // pages that failed with EIO
};

// Reads a file through the mount one page at a time, so a damaged page fails alone.
FileRead ReadPages(const std::string& path) {
  FileRead r;
  const int fd = ::open(path.c_str(), O_RDONLY);
  struct stat st;
  if (fd < 0 || ::fstat(fd, &st) != 0) {
    r.error = "open/stat: " + std::string(std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return r;
  }
  r.data.assign(static_cast<size_t>(st.st_size), 0);
  for (uint64_t page = 0; page * kPage < r.data.size(); ++page) {
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(kPage, r.data.size() - page * kPage));
    const ssize_t n =
        ::pread(fd, r.data.data() + page * kPage, want, static_cast<off_t>(page * kPage));
    if (n < 0 && errno == EIO) {
      r.damaged.insert(page);
      std::fill_n(r.data.begin() + static_cast<long>(page * kPage), want, 0);
    } else if (n != static_cast<ssize_t>(want)) {
      r.error = "page " + std::to_string(page) + ": read " + std::to_string(n) + " of " +
                std::to_string(want) + (n < 0 ? ": " + std::string(std::strerror(errno)) : "");
      ::close(fd);
      return r;
    }
  }
  ::close(fd);
  r.ok = true;
  return r;
}

// The first byte (outside `skip` pages) where `got` differs from `want`, or none.
std::optional<uint64_t> FirstDifference(const std::vector<uint8_t>& got,
                                        const std::vector<uint8_t>& want,
                                        const std::set<uint64_t>& skip = {}) {
  for (uint64_t x = 0; x < std::max(got.size(), want.size()); ++x) {
    if (skip.count(x / kPage) != 0) continue;
    if (x >= got.size() || x >= want.size() || got[x] != want[x]) return x;
  }
  return std::nullopt;
}

std::vector<std::vector<std::string>> ParseJournal(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (!w.empty()) out.push_back(std::move(w));
  }
  return out;
}

uint64_t Num(const std::string& s) { return std::stoull(s); }

using PageSet = std::set<std::pair<std::string, uint64_t>>;

// What `sigilfs fsck` printed: the damaged pages, and its directory and file counts. Any other
// problem (a name, a directory IV, a file that does not open) fails the test.
struct FsckReport {
  PageSet damaged;
  uint64_t directories = 0, files = 0;
};

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "PATH: corrupt: page N: ..." or "PATH: authentication failed: page N: ..." (std::regex is
// not used: GCC 12 warns inside it under the sanitizers).
bool ParsePageLine(const std::string& line, std::string& path, uint64_t& page) {
  for (std::string_view kind : {": corrupt: page ", ": authentication failed: page "}) {
    const size_t at = line.find(kind);
    if (at == std::string::npos) continue;
    const size_t digits = at + kind.size();
    const size_t end = line.find(':', digits);
    if (end == std::string::npos || !AllDigits(std::string_view(line).substr(digits, end - digits)))
      return false;
    path = line.substr(0, at);
    page = Num(line.substr(digits, end - digits));
    return true;
  }
  return false;
}

// "N directories, N files (0 sealed), 0 symlinks checked; N problems", singular for 1.
bool ParseSummary(const std::string& line, uint64_t& directories, uint64_t& files,
                  uint64_t& problems) {
  std::istringstream in(line);
  std::string dir_word, file_word, sealed, sealed_word, symlinks, symlink_word, checked,
      problem_word;
  if (!(in >> directories >> dir_word >> files >> file_word >> sealed >> sealed_word >> symlinks >>
        symlink_word >> checked >> problems >> problem_word))
    return false;
  std::string rest;
  return (dir_word == "directory," || dir_word == "directories,") &&
         (file_word == "file" || file_word == "files") && sealed == "(0" &&
         sealed_word == "sealed)," && symlinks == "0" && symlink_word == "symlinks" &&
         checked == "checked;" && (problem_word == "problem" || problem_word == "problems") &&
         !(in >> rest);
}

FsckReport Fsck(const test::MountedVault& vault) {
  FsckReport report;
  test::ProcessResult r =
      test::RunProcess({SIGILFS_BINARY, "fsck", vault.cipher(), "--passfile", vault.passfile()});
  std::istringstream in(r.out);
  bool summarized = false;
  for (std::string line; std::getline(in, line);) {
    std::string path;
    uint64_t page = 0;
    if (ParsePageLine(line, path, page)) {
      report.damaged.insert({path, page});
    } else if (uint64_t problems = 0;
               ParseSummary(line, report.directories, report.files, problems)) {
      summarized = true;
      EXPECT_EQ(problems, report.damaged.size()) << r.out;
    } else {
      ADD_FAILURE() << "fsck reported something other than a damaged page: " << line;
    }
  }
  EXPECT_TRUE(summarized) << r.out << r.err;
  EXPECT_EQ(r.exit_code, report.damaged.empty() ? 0 : 1) << r.out << r.err;
  return report;
}

// r<N>/w<N>/ followed by t<N>, f<N>, log<N> or ow<N>: the names the workers make.
bool IsWorkerEntry(const std::string& path) {
  std::vector<std::string_view> parts;
  std::string_view rest(path);
  for (size_t slash; (slash = rest.find('/')) != std::string_view::npos;) {
    parts.push_back(rest.substr(0, slash));
    rest.remove_prefix(slash + 1);
  }
  parts.push_back(rest);
  auto numbered = [](std::string_view part, std::string_view prefix) {
    return part.substr(0, prefix.size()) == prefix && AllDigits(part.substr(prefix.size()));
  };
  if (parts.size() != 3 || !numbered(parts[0], "r") || !numbered(parts[1], "w")) return false;
  return numbered(parts[2], "t") || numbered(parts[2], "f") || numbered(parts[2], "log") ||
         numbered(parts[2], "ow");
}

// One crash: kWorkers workers against the mount, each in its own directory r<round>/w<k>
// with its own journal, and SIGKILL of the daemon after `delay`. Returns the journals, and
// fails the test if a worker saw an error before the kill, or another one than a dead
// connection after it.
constexpr int kWorkers = 2;  // keep the daemon busy on both cores

std::vector<std::string> CrashRound(test::MountedVault& vault, int round, uint64_t seed,
                                    std::chrono::milliseconds delay, const fs::path& outside) {
  const std::string round_dir = "r" + std::to_string(round);
  EXPECT_EQ(::mkdir(vault.path(round_dir).c_str(), 0755), 0) << std::strerror(errno);
  const int root = ::open(vault.plain().c_str(), O_RDONLY | O_DIRECTORY);
  EXPECT_EQ(::fsync(root), 0) << std::strerror(errno);  // the workers' journals rely on it
  ::close(root);
  std::vector<pid_t> workers;
  std::vector<fs::path> journals;
  std::mt19937_64 rng(seed);
  for (int k = 0; k < kWorkers; ++k) {
    journals.push_back(outside / (round_dir + "-w" + std::to_string(k)));
    const int journal =
        ::open(journals.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (journal < 0) {
      ADD_FAILURE() << "journal: " << std::strerror(errno);
      break;
    }
    const uint64_t worker_seed = rng();
    const pid_t pid = ::fork();
    if (pid == 0)
      Worker(vault.plain(), round_dir + "/w" + std::to_string(k), worker_seed, journal).Run();
    ::close(journal);
    workers.push_back(pid);
  }
  std::this_thread::sleep_for(delay);
  std::vector<bool> finished_early;
  std::vector<int> status(workers.size(), 0);
  for (size_t k = 0; k < workers.size(); ++k)
    finished_early.push_back(::waitpid(workers[k], &status[k], WNOHANG) == workers[k]);
  const auto killed_at = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  vault.Kill();
  // After the kill every request fails at once; a worker still running after 20 s is stuck.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (size_t k = 0; k < workers.size(); ++k) {
    if (finished_early[k]) continue;
    while (::waitpid(workers[k], &status[k], WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(workers[k], SIGKILL);
        ::waitpid(workers[k], &status[k], 0);
        ADD_FAILURE() << "worker " << k << " hung after the daemon was killed";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::vector<std::string> texts;
  for (size_t k = 0; k < workers.size(); ++k) {
    EXPECT_TRUE(WIFEXITED(status[k]) && WEXITSTATUS(status[k]) == 0)
        << "worker " << k << " status " << status[k];
    texts.push_back(test::ReadAll(journals[k]));
    const std::string& text = texts.back();
    for (const auto& w : ParseJournal(text)) {
      if (w[0] != "X") continue;
      const int err = std::stoi(w[1]);
      const std::string line = text.substr(text.rfind("X "));
      EXPECT_GE(std::stoll(w[2]), killed_at)
          << "worker " << k << " failed before the kill: " << std::strerror(err) << " from " << line
          << "daemon log:\n"
          << vault.log().substr(vault.log().size() - std::min<size_t>(vault.log().size(), 4000));
      if (err != ENOTCONN && err != ECONNABORTED)
        std::printf("worker %zu, after the kill: %s from %s", k, std::strerror(err), line.c_str());
    }
  }
  return texts;
}

// Checks the round's files against the journal. `reads` holds every file of the mount.
void CheckRound(const std::string& journal, const std::map<std::string, FileRead>& reads) {
  struct Durable {
    uint64_t size, seed;
  };
  std::map<std::string, Durable> written;        // F: durable contents under a temporary name
  std::map<std::string, std::string> renaming;   // N: tmp -> final, not yet known durable
  std::map<std::string, std::string> renamed;    // R: tmp -> final, durable
  std::map<std::string, std::string> committed;  // final -> tmp of its last R
  std::map<std::string, std::vector<std::string>> pending;  // final -> tmps N'd after it
  std::map<std::string, uint64_t> log_seed, log_synced;
  struct Write {
    uint64_t seed, off, len;
  };
  struct OverwriteFile {
    uint64_t size = 0, seed = 0;
    std::vector<Write> writes;
    size_t synced = 0;  // writes[0, synced) were durable at the last fsync
  };
  std::map<std::string, OverwriteFile> ow;
  std::string dir;
  for (const auto& w : ParseJournal(journal)) {
    if (w[0] == "M") {
      dir = w[1];
    } else if (w[0] == "F") {
      written[w[1]] = {Num(w[2]), Num(w[3])};
    } else if (w[0] == "N") {
      renaming[w[1]] = w[2];
      pending[w[2]].push_back(w[1]);
    } else if (w[0] == "R") {
      renamed[w[1]] = w[2];
      committed[w[2]] = w[1];
      pending[w[2]].clear();  // what was renamed before is replaced for good
    } else if (w[0] == "C") {
      log_seed[w[1]] = Num(w[2]);
      log_synced[w[1]] = 0;
    } else if (w[0] == "L") {
      log_synced[w[1]] = Num(w[2]);
    } else if (w[0] == "O") {
      ow[w[1]].size = Num(w[2]);
      ow[w[1]].seed = Num(w[3]);
    } else if (w[0] == "W") {
      ow[w[1]].writes.push_back({Num(w[2]), Num(w[3]), Num(w[4])});
    } else if (w[0] == "S") {
      ow[w[1]].synced = ow[w[1]].writes.size();
    }
  }
  if (dir.empty()) return;  // killed before the round's directory was durable
  auto read = [&](const std::string& path) -> const FileRead* {
    auto it = reads.find(path);
    return it == reads.end() ? nullptr : &it->second;
  };
  auto content = [&](const std::string& tmp) {
    return Stream(written.at(tmp).seed, 0, written.at(tmp).size);
  };
  // Files fsync'd under their temporary name and not (durably) renamed: there, intact.
  for (const auto& [tmp, d] : written) {
    if (renamed.count(tmp) != 0) {
      EXPECT_EQ(read(tmp), nullptr) << tmp << " was renamed, yet is still there";
      continue;
    }
    const FileRead* r = read(tmp);
    if (r == nullptr) {
      EXPECT_NE(renaming.count(tmp), 0u) << tmp << " is gone, yet was never renamed";
      continue;
    }
    EXPECT_TRUE(r->damaged.empty())
        << tmp << ": fsync'd, yet page " << *r->damaged.begin() << " is damaged";
    auto diff = FirstDifference(r->data, content(tmp));
    EXPECT_FALSE(diff) << tmp << ": fsync'd contents differ at byte " << *diff << " (size "
                       << r->data.size() << ", expected " << d.size << ")";
  }
  // Final names: the last durably renamed contents, or those of a rename made after it.
  for (int i = 0; i < kFinalNames; ++i) {
    const std::string name = dir + "/f" + std::to_string(i);
    std::vector<std::string> candidates = pending[name];
    if (committed.count(name) != 0) candidates.push_back(committed[name]);
    const FileRead* r = read(name);
    if (r == nullptr) {
      EXPECT_EQ(committed.count(name), 0u) << name << " was durably renamed into, yet is gone";
      continue;
    }
    EXPECT_FALSE(candidates.empty()) << name << " exists, yet nothing was renamed to it";
    EXPECT_TRUE(r->damaged.empty()) << name << ": page " << *r->damaged.begin() << " damaged";
    bool matched = false;
    for (const std::string& tmp : candidates)
      if (written.count(tmp) != 0 && !FirstDifference(r->data, content(tmp))) matched = true;
    EXPECT_TRUE(matched) << name << " holds none of the contents renamed to it ("
                         << candidates.size() << " candidates)";
  }
  // Logs: never shorter than at their last fsync, every byte read is the stream's (appends
  // are written back in order: no holes, no stale pages), and only the last page may fail.
  for (const auto& [name, seed] : log_seed) {
    const FileRead* r = read(name);
    if (r == nullptr) {
      ADD_FAILURE() << name << " is gone";
      continue;
    }
    EXPECT_GE(r->data.size(), log_synced[name]) << name << " lost fsync'd bytes";
    const uint64_t pages = (r->data.size() + kPage - 1) / kPage;
    for (uint64_t p : r->damaged)
      EXPECT_EQ(p + 1, pages) << name << ": page " << p << " of " << pages;
    auto diff = FirstDifference(r->data, Stream(seed, 0, r->data.size()), r->damaged);
    EXPECT_FALSE(diff) << name << ": byte " << *diff << " is not what was appended";
  }
  // Overwritten files: each byte as of the last fsync, or as a write after it made it; only
  // a page written after the last fsync may fail.
  for (const auto& [name, f] : ow) {
    const FileRead* r = read(name);
    if (r == nullptr) {
      ADD_FAILURE() << name << " is gone";
      continue;
    }
    ASSERT_EQ(r->data.size(), f.size) << name;
    std::vector<uint8_t> synced = Stream(f.seed, 0, f.size);
    for (size_t i = 0; i < f.synced; ++i) {
      const Write& w = f.writes[i];
      for (uint64_t x = w.off; x < w.off + w.len; ++x) synced[x] = StreamByte(w.seed, x);
    }
    std::vector<bool> ok(f.size);
    std::set<uint64_t> touched;  // pages written after the last fsync
    for (uint64_t x = 0; x < f.size; ++x) ok[x] = r->data[x] == synced[x];
    for (size_t i = f.synced; i < f.writes.size(); ++i) {
      const Write& w = f.writes[i];
      for (uint64_t x = w.off; x < w.off + w.len; ++x) {
        ok[x] = ok[x] || r->data[x] == StreamByte(w.seed, x);
        touched.insert(x / kPage);
      }
    }
    for (uint64_t p : r->damaged)
      EXPECT_NE(touched.count(p), 0u) << name << ": page " << p << " failed, unwritten since fsync";
    for (uint64_t x = 0; x < f.size; ++x) {
      if (ok[x] || r->damaged.count(x / kPage) != 0) continue;
      ADD_FAILURE() << name << ": byte " << x
                    << " is neither its fsync'd value nor a later write's";
      break;
    }
  }
  // Nothing else in the round's directory but temporary files still being written, which may
  // have lost their last page.
  for (const auto& [path, r] : reads) {
    if (path.rfind(dir + "/", 0) != 0) continue;
    EXPECT_TRUE(IsWorkerEntry(path)) << "unexpected entry " << path;
  }
}

void RunRounds(int rounds) {
  SIGILFS_NEEDS_FUSE();
  const char* env_seed = std::getenv("SIGILFS_SEED");
  const uint64_t seed = env_seed ? std::strtoull(env_seed, nullptr, 10) : std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (rerun with SIGILFS_SEED=" + std::to_string(seed) + ")");
  std::mt19937_64 rng(seed);
  test::MountedVault vault;
  test::TempDir outside;  // the journals live outside the mount
  int crashes_with_damage = 0;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const uint64_t round_seed = rng();
    // Anywhere from the worker's first steps to well into its writing.
    const auto delay = std::chrono::milliseconds(20 + rng() % 1200);
    const std::vector<std::string> journals =
        CrashRound(vault, round, round_seed, delay, outside.path());
    if (::testing::Test::HasFailure()) return;

    // Offline, before anything touches the vault: what fsck finds.
    const FsckReport fsck = Fsck(vault);
    ASSERT_NO_THROW(vault.Mount()) << "the vault did not mount again";

    // The whole tree through the mount: every entry stats, every file reads page by page.
    std::map<std::string, FileRead> reads;
    PageSet damaged;
    uint64_t directories = 1;  // the root, which fsck counts too
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(vault.plain(), ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      const std::string rel = it->path().lexically_relative(vault.plain()).string();
      struct stat st;
      ASSERT_EQ(::lstat(it->path().c_str(), &st), 0) << rel << ": " << std::strerror(errno);
      if (S_ISDIR(st.st_mode)) {
        ++directories;
        continue;
      }
      ASSERT_TRUE(S_ISREG(st.st_mode)) << rel;
      FileRead r = ReadPages(it->path().string());
      ASSERT_TRUE(r.ok) << rel << ": " << r.error;
      EXPECT_LE(r.damaged.size(), 1u) << rel << " has more than one damaged page";
      for (uint64_t p : r.damaged) damaged.insert({rel, p});
      reads.emplace(rel, std::move(r));
    }
    ASSERT_FALSE(ec) << "walking the tree: " << ec.message();
    EXPECT_EQ(directories, fsck.directories);
    EXPECT_EQ(reads.size(), fsck.files);
    EXPECT_EQ(damaged, fsck.damaged) << "the pages that fail are not the ones fsck lists";
    // Earlier rounds were repaired and are not written to any more.
    const std::string own = "r" + std::to_string(round) + "/";
    for (const auto& [page_file, page] : damaged)
      EXPECT_EQ(page_file.rfind(own, 0), 0u)
          << page_file << " (page " << page << ") was damaged before";
    for (const std::string& journal : journals) {
      CheckRound(journal, reads);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "journal:\n" << journal.substr(0, 20000);
        return;
      }
    }
    if (!damaged.empty()) ++crashes_with_damage;
    std::map<std::string, int> kinds;
    for (const std::string& journal : journals)
      for (const auto& w : ParseJournal(journal)) ++kinds[w[0]];
    std::printf(
        "round %d: killed after %lld ms; fsync'd files %d, renames %d, log syncs %d, "
        "overwrites %d (synced %d); %zu files, %zu damaged pages\n",
        round, static_cast<long long>(delay.count()), kinds["F"], kinds["R"], kinds["L"],
        kinds["W"], kinds["S"], reads.size(), damaged.size());

    // The repair docs/design/crash-and-space.md gives: a damaged last page is cut off, another one
    // rewritten.
    for (const auto& [rel, page] : damaged) {
      const std::string path = vault.path(rel);
      const uint64_t size = reads.at(rel).data.size();
      if ((page + 1) * kPage >= size) {
        ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(page * kPage)), 0) << rel;
      } else {
        const int fd = ::open(path.c_str(), O_WRONLY);
        const std::vector<uint8_t> zeros(kPage, 0);
        ASSERT_EQ(::pwrite(fd, zeros.data(), kPage, static_cast<off_t>(page * kPage)),
                  static_cast<ssize_t>(kPage))
            << rel;
        ASSERT_EQ(::fsync(fd), 0);
        ASSERT_EQ(::close(fd), 0);
      }
      FileRead again = ReadPages(path);
      EXPECT_TRUE(again.ok && again.damaged.empty()) << rel << " is still damaged: " << again.error;
    }
    // Keep the vault small: the oldest rounds go (unlink and rmdir through the mount).
    if (round >= 3) fs::remove_all(vault.path("r" + std::to_string(round - 3)));
  }
  // In the end, after a clean unmount, fsck finds nothing.
  vault.Unmount();
  EXPECT_TRUE(Fsck(vault).damaged.empty());
  std::printf("%d of %d crashes left a damaged page (repaired)\n", crashes_with_damage, rounds);
}

TEST(MountCrashTest, SigkillDuringWritesKeepsWhatWasFsynced) {
  RunRounds(std::getenv("SIGILFS_LONG") != nullptr ? 50 : 4);
}

}  // namespace
}  // namespace sigilfs
