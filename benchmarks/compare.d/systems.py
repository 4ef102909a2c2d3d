# The filesystems benchmarks/compare measures: how each is created, mounted and unmounted.
import atexit
import contextlib
import json
import os
import re
import resource
import signal
import socket
import subprocess
import time

from common import (StepError, dpkg_version, log, quote, remove_tree, run, signals_deferred,
                    which)

# No spaces: gocryptfs splits its -extpass string on spaces before running it.
PASSPHRASE = "compare-benchmark-passphrase"

# cryfs runs scrypt with fixed, costly parameters on every mount (about 15 s on 2 cores).
MOUNT_TIMEOUT = 300
# After the kernel lets go of a mount, a daemon may still be writing its caches out; the next
# measurement must not compete with that.
EXIT_TIMEOUT = 300
# How long a sigilfs daemon may take to write its stats file after SIGUSR1.
STATS_TIMEOUT = 10

# Every mount the harness has made and not yet unmounted, for the cleanup at exit.
active = set()


def _unescape(field):
    # /proc/self/mountinfo writes space, tab, newline and backslash as octal escapes.
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mount_points():
    # Read from mountinfo rather than stat()ing the path: a half-started or hung FUSE daemon would
    # make stat() block.
    with open("/proc/self/mountinfo") as f:
        return {_unescape(line.split()[4]) for line in f}


def is_mounted(path):
    # Resolve only the parent: resolving the mount point itself would ask the daemon.
    path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    return path in mount_points()


class System:
    """One filesystem under test. Subclasses say how to create a vault and run the daemon."""

    name = ""
    config = ""        # what the system is configured with, in a few words, for the report
    packages = ()      # Debian packages whose versions the report shows
    commands = ()      # programs that must be on PATH

    def __init__(self, ctx):
        self.ctx = ctx
        self.daemon = None
        self.mnt = None
        self.ready = False    # the mount has appeared

    def missing(self):
        """Why this system cannot be measured here, or None."""
        absent = [c for c in self.commands if not which(c)]
        if absent:
            return f"{', '.join(absent)} not installed (scripts/install-bench-deps.sh installs it)"
        return None

    def prepare(self):
        """One-time setup before any measurement (e.g. building a binary)."""

    def version(self):
        versions = [f"{p} {dpkg_version(p)}" for p in self.packages if dpkg_version(p)]
        return ", ".join(versions) or "unknown"

    def create(self, cipher):
        """Makes a fresh vault in the empty directory cipher."""

    def daemon_command(self, cipher, mnt):
        """(argv, text for its stdin or None, extra environment) of the foreground daemon."""
        raise NotImplementedError

    def unmount_command(self, mnt):
        return ["fusermount3", "-u", mnt]

    # Its mode for vaults that several hosts use at once (the "shared" group): the name it is
    # reported under, where its flags go in the daemon's command line, and the flags.
    shared_variant = None

    def mount(self, base, variant=None):
        """Creates a fresh vault under base and mounts it; returns the plaintext directory.

        Daemons run in the foreground as our children so that unmount() can wait for them to
        finish writing and exit, and they get their own session so that a Ctrl-C aimed at the
        harness reaches them only through an orderly unmount.
        """
        cipher, mnt = os.path.join(base, "cipher"), os.path.join(base, "mnt")
        os.makedirs(cipher)
        os.makedirs(mnt)
        self.create(cipher)
        argv, stdin_text, env = self.daemon_command(cipher, mnt)
        if variant is not None:
            _, at, flags = variant
            argv = argv[:at] + list(flags) + argv[at:]
        return self._serve(base, mnt, argv, stdin_text, env)

    # Reverse mode: an encrypted, read-only view of a plain directory (systems that have one).
    reverse = False

    def create_reverse(self, plain):
        """Makes plain ready for its encrypted view (writes the system's config into it)."""
        raise NotImplementedError

    def reverse_daemon_command(self, plain, mnt):
        """(argv, stdin text or None, extra environment) of the view's foreground daemon."""
        raise NotImplementedError

    def check_backup(self, copy, plain, base):
        """Raises StepError unless copy (of the view) opens as a vault holding plain."""
        raise NotImplementedError

    def mount_reverse(self, base, plain):
        """Mounts the encrypted view of plain under base; returns the view's directory."""
        mnt = os.path.join(base, "view")
        os.makedirs(mnt)
        self.create_reverse(plain)
        return self._serve(base, mnt, *self.reverse_daemon_command(plain, mnt))

    def _serve(self, base, mnt, argv, stdin_text, env):
        log_path = os.path.join(base, "daemon.log")
        with open(log_path, "w") as log_file:
            self.daemon = subprocess.Popen(
                argv, stdin=subprocess.PIPE if stdin_text else subprocess.DEVNULL,
                stdout=log_file, stderr=subprocess.STDOUT, text=True,
                env={**os.environ, **(env or {})}, start_new_session=True)
        self.mnt = mnt
        self.ready = False
        active.add(self)
        if stdin_text:
            try:
                self.daemon.stdin.write(stdin_text)
                self.daemon.stdin.close()
            except BrokenPipeError:
                pass  # it exited already; the loop below reports how
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not is_mounted(mnt):
            if self.daemon.poll() is not None:
                raise StepError(f"{self.name} exited {self.daemon.returncode} before mounting: "
                                f"{_log_tail(log_path)}")
            if time.monotonic() > deadline:
                raise StepError(f"{self.name} did not mount within {MOUNT_TIMEOUT} s: "
                                f"{_log_tail(log_path)}")
            time.sleep(0.05)
        self.ready = True
        return mnt

    def unmount(self):
        """Unmounts (if mounted) and waits for the daemon to exit; safe to call more than once."""
        if self.mnt is None:
            return
        try:
            if not self.ready and self.daemon is not None:
                # Stopped while the daemon was still starting (cryfs derives its key for a
                # while): it has nothing to write out, so it need not be waited for.
                self._stop_daemon()
            if is_mounted(self.mnt):
                self._unmount_politely()
        finally:
            self._reap_daemon()
            active.discard(self)
            self.mnt = None
            self.ready = False

    def _unmount_politely(self):
        # A process that has just closed a file on the mount can keep it busy for a moment.
        error = None
        for _ in range(20):
            try:
                run(self.unmount_command(self.mnt), timeout=EXIT_TIMEOUT)
                return
            except StepError as e:
                error = e
                if not is_mounted(self.mnt):
                    return
                time.sleep(0.5)
        log(f"{self.name}: {error}; detaching the mount lazily")
        subprocess.run(["umount", "-l", self.mnt], check=False)

    def _reap_daemon(self):
        if self.daemon is None:
            return
        try:
            self.daemon.wait(timeout=EXIT_TIMEOUT)
        except subprocess.TimeoutExpired:
            log(f"{self.name}: daemon (pid {self.daemon.pid}) still running after unmount; "
                "stopping it")
            self._stop_daemon()
        self.daemon = None

    def _stop_daemon(self):
        """Ends our own daemon process (by its pid), politely first."""
        if self.daemon.poll() is not None:
            return
        self.daemon.terminate()
        try:
            self.daemon.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.daemon.kill()
            self.daemon.wait()


def _log_tail(path, lines=6):
    try:
        with open(path) as f:
            text = [line.strip() for line in f if line.strip()]
        return " | ".join(text[-lines:]) or "(no output)"
    except OSError:
        return "(no log)"


class Raw(System):
    name = "raw"
    config = "the backing directory itself, no FUSE: the ceiling"

    def version(self):
        return f"{self.ctx.backing_fs}, kernel {os.uname().release}"

    def mount(self, base, variant=None):
        data = os.path.join(base, "data")
        os.makedirs(data)
        return data

    def unmount(self):
        pass


class Passthrough(System):
    name = "passthrough"
    config = "libfuse's passthrough_ll example, default options: FUSE without encryption"
    packages = ("libfuse3-dev",)
    commands = ("gcc", "pkg-config")
    source = "/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c"

    def missing(self):
        if not os.path.exists(self.source):
            return f"{self.source} not found (package libfuse3-dev)"
        return super().missing()

    def prepare(self):
        # Built fresh for each run from the installed libfuse's own example, so it matches the
        # library the other FUSE systems use.
        self.binary = os.path.join(self.ctx.scratch, "passthrough_ll")
        run(f"gcc -O2 -o {quote(self.binary)} -I{quote(os.path.dirname(self.source))} "
            f"{quote(self.source)} $(pkg-config --cflags --libs fuse3)", shell=True)

    def daemon_command(self, cipher, mnt):
        # It keeps a descriptor per inode the kernel knows: with the default soft limit of 1024
        # it fails a directory of 100,000 files ("Too many open files"). Raised to the hard
        # limit, as libfuse's passthrough_hp does for itself, and as root past it to the
        # kernel's ceiling (fs.nr_open) where that is allowed: the hard limit may be lower than
        # the directory is large.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if os.geteuid() == 0:
            with open("/proc/sys/fs/nr_open") as f:
                ceiling = int(f.read())
            try:  # the harness's own hard limit, which the daemon inherits
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, ceiling))
                hard = ceiling
            except (ValueError, OSError):
                pass  # not allowed here (no CAP_SYS_RESOURCE): the hard limit it is
        return (["prlimit", f"--nofile={hard}:{hard}", self.binary, "-f", "-o",
                 f"source={cipher}", mnt], None, None)


class Sigilfs(System):
    name = "sigilfs"
    config = "vault defaults (AES-256-GCM), test KDF, requests over /dev/fuse"
    transport = "dev"

    @property
    def prog(self):
        """The sigilfs binary this system runs."""
        return self.ctx.sigilfs

    def repo_of_binary(self):
        return self.ctx.repo

    def missing(self):
        if not os.access(self.prog, os.X_OK):
            return f"{self.prog} not found (build it, or set SIGILFS)"
        return None

    def version(self):
        try:
            v = run([self.prog, "--version"]).strip()
        except StepError:
            v = "sigilfs"
        try:
            rev = run(["git", "-C", self.repo_of_binary(), "describe", "--always", "--dirty"]).strip()
            v += f" (git {rev})"
        except StepError:
            pass
        return v

    def create(self, cipher):
        # The cheap KDF (only mounting pays for it) is a test switch of the command.
        run(["env", "SIGILFS_TEST_KDF=1", self.prog, "init", cipher, "--kdf", "test",
             "--passfile", self.ctx.passfile])

    def daemon_command(self, cipher, mnt):
        # Its counters (which transport carried how many requests) go to the stats file when the
        # daemon gets SIGUSR1: see daemon_stats(). In the scratch area, not beside the vault,
        # which may be on the sshfs store being measured.
        self.stats_file = os.path.join(self.ctx.scratch, f"stats-{self.name}.json")
        return ([self.prog, "mount", cipher, mnt, "-f", "--passfile", self.ctx.passfile,
                 "--transport", self.transport, "--stats-file", self.stats_file], None, None)

    def daemon_stats(self):
        """The mounted daemon's counters (its stats file, which SIGUSR1 makes it write), or None
        when it wrote none within STATS_TIMEOUT seconds. Sent to our own child, by its pid."""
        if self.daemon is None or self.daemon.poll() is not None or not self.ready:
            return None
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.stats_file)
        try:
            os.kill(self.daemon.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return None  # it exited meanwhile; the unmount reports how
        deadline = time.monotonic() + STATS_TIMEOUT
        while time.monotonic() < deadline:
            # Written whole (a temporary file, then a rename): never read half done.
            try:
                with open(self.stats_file) as f:
                    return json.load(f)
            except FileNotFoundError:
                time.sleep(0.02)
            except (OSError, ValueError) as e:
                log(f"{self.name}: unreadable stats file: {e}")
                return None
        return None

    def unmount_command(self, mnt):
        return [self.prog, "unmount", mnt]

    shared_variant = ("sigilfs --shared", 2, ["--shared"])
    reverse = True

    def create_reverse(self, plain):
        run(["env", "SIGILFS_TEST_KDF=1", self.prog, "init", "--reverse", plain, "--kdf",
             "test", "--passfile", self.ctx.passfile])

    def reverse_daemon_command(self, plain, mnt):
        return ([self.prog, "reverse", plain, mnt, "-f", "--passfile", self.ctx.passfile],
                None, None)

    def check_backup(self, copy, plain, base):
        run([self.prog, "verify-backup", "-q", copy, plain, "--passfile",
             self.ctx.passfile])


class SigilfsUring(Sigilfs):
    name = "sigilfs-uring"
    config = "as sigilfs, requests over io_uring (--transport uring)"
    transport = "uring"
    shared_variant = None
    reverse = False

    def missing(self):
        if not os.path.exists(URING_SWITCH):
            return "this kernel has no FUSE over io_uring (Linux 6.14 or later has it)"
        if os.geteuid() != 0:
            return f"turning {URING_SWITCH} on needs root"
        return super().missing()

    def prepare(self):
        # The kernel's switch, on for the run and put back as it was when the harness exits.
        with open(URING_SWITCH) as f:
            before = f.read().strip()
        if before != "Y":
            atexit.register(_write, URING_SWITCH, before)
            _write(URING_SWITCH, "Y")

    def version(self):
        return super().version() + f", kernel {os.uname().release}"


URING_SWITCH = "/sys/module/fuse/parameters/enable_uring"


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


class SigilfsBase(Sigilfs):
    """Another build of sigilfs (SIGILFS_BASE), measured beside this one in the same rounds:
    a change's before and after, side by side on one machine."""
    name = "sigilfs-base"
    config = "as sigilfs, the build SIGILFS_BASE names (another commit's, to compare with)"
    shared_variant = None

    @property
    def prog(self):
        return self.ctx.sigilfs_base

    def repo_of_binary(self):
        return os.path.dirname(self.prog) if self.prog else self.ctx.repo

    def missing(self):
        if not self.prog:
            return "SIGILFS_BASE does not name another sigilfs binary"
        return super().missing()


class Gocryptfs(System):
    name = "gocryptfs"
    config = "AES-256-GCM (default), scrypt N=2^10"
    packages = ("gocryptfs",)
    commands = ("gocryptfs",)

    def create(self, cipher):
        run(["gocryptfs", "-q", "-init", "-extpass", f"echo {PASSPHRASE}", "-scryptn", "10",
             cipher])

    def daemon_command(self, cipher, mnt):
        return (["gocryptfs", "-fg", "-q", "-nosyslog", "-extpass", f"echo {PASSPHRASE}",
                 cipher, mnt], None, None)

    shared_variant = ("gocryptfs -sharedstorage", 1, ["-sharedstorage"])

    reverse = True

    def create_reverse(self, plain):
        # -reverse implies AES-SIV, the deterministic mode its view needs.
        run(["gocryptfs", "-q", "-init", "-reverse", "-extpass", f"echo {PASSPHRASE}", "-scryptn",
             "10", plain])

    def reverse_daemon_command(self, plain, mnt):
        return (["gocryptfs", "-fg", "-q", "-nosyslog", "-reverse", "-extpass",
                 f"echo {PASSPHRASE}", plain, mnt], None, None)

    def check_backup(self, copy, plain, base):
        # The copy mounts forward (its gocryptfs.conf is the reverse one) and must equal plain.
        mnt = os.path.join(base, "restored")
        os.makedirs(mnt)
        run(["gocryptfs", "-q", "-ro", "-extpass", f"echo {PASSPHRASE}", copy, mnt])
        try:
            run(["diff", "-r", "--no-dereference", "-x", ".gocryptfs.reverse.conf", plain, mnt])
        finally:
            run(["fusermount3", "-u", mnt])


class Securefs(System):
    name = "securefs"
    config = "lite format (4), AES-256-GCM, PBKDF2 with 1000 rounds"
    packages = ("securefs",)
    commands = ("securefs",)

    def create(self, cipher):
        # A cheap key derivation (the default Argon2id takes seconds on every mount); it only
        # wraps the master key, so the data path is the same.
        run(["securefs", "create", "--format", "4", "--pbkdf", "pkcs5-pbkdf2-hmac-sha256",
             "--rounds", "1000", "--pass", PASSPHRASE, cipher])

    def daemon_command(self, cipher, mnt):
        # Foreground unless -b is given.
        return ["securefs", "mount", "--pass", PASSPHRASE, cipher, mnt], None, None


class Encfs(System):
    name = "encfs"
    config = "--standard (AES-192 CBC, 1 KiB blocks, no block MAC)"
    packages = ("encfs",)
    commands = ("encfs",)

    def daemon_command(self, cipher, mnt):
        # The first mount of an empty directory creates the volume; --standard answers the setup
        # questions. encfs wants absolute paths.
        return (["encfs", "-f", "--standard", f"--extpass=echo {PASSPHRASE}",
                 os.path.abspath(cipher), os.path.abspath(mnt)], None, None)


class Cryfs(System):
    name = "cryfs"
    config = "AES-256-GCM, 16 KiB blocks (default)"
    packages = ("cryfs",)
    commands = ("cryfs",)

    def daemon_command(self, cipher, mnt):
        # The first mount creates the vault. cryfs remembers, under XDG_DATA_HOME, which vault
        # it saw in which directory (and refuses a different one there later) and the block
        # versions for its rollback checks: give every fresh vault fresh state beside it, not in
        # the user's home.
        env = {
            "CRYFS_FRONTEND": "noninteractive",
            "CRYFS_NO_UPDATE_CHECK": "true",
            "XDG_DATA_HOME": os.path.join(os.path.dirname(cipher), "cryfs-state"),
        }
        return (["cryfs", "-f", "--cipher", "aes-256-gcm", cipher, mnt], PASSPHRASE + "\n", env)


ALL = [Raw, Passthrough, Sigilfs, SigilfsUring, SigilfsBase, Gocryptfs, Securefs, Encfs, Cryfs]
NAMES = [cls.name for cls in ALL]
# What a run measures unless --systems says otherwise: not another build of sigilfs.
DEFAULT_NAMES = [n for n in NAMES if n != SigilfsBase.name]


@contextlib.contextmanager
def mounted(system, base, variant=None):
    """A fresh vault of system mounted under base; unmounted and deleted however the block ends."""
    remove_tree(base)
    os.makedirs(base)
    try:
        yield system.mount(base, variant)
    finally:
        with signals_deferred():
            try:
                system.unmount()
            finally:
                remove_tree(base)


@contextlib.contextmanager
def reverse_mounted(system, base, plain):
    """The encrypted view of plain (which gets the system's config) mounted under base."""
    remove_tree(base)
    os.makedirs(base)
    try:
        yield system.mount_reverse(base, plain)
    finally:
        with signals_deferred():
            system.unmount()


def unmount_all():
    """Last-resort cleanup (at exit, after a signal): nothing the harness mounted stays mounted."""
    for system in list(active):
        try:
            system.unmount()
        except Exception as e:  # noqa: BLE001 - cleanup must go on to the next mount
            log(f"{system.name}: unmount failed: {e}")


@contextlib.contextmanager
def sshfs_store(scratch):
    """A directory reached over sshfs, as a vault on another machine is: an sshd of its own on
    127.0.0.1 (a free port, throw-away keys) and sshfs without its directory cache (README,
    "Several machines"); both gone however the block ends."""
    home = os.path.join(scratch, "sshfs")
    remove_tree(home)
    export, mnt = os.path.join(home, "export"), os.path.join(home, "mnt")
    os.makedirs(export)
    os.makedirs(mnt)
    os.makedirs("/run/sshd", exist_ok=True)
    for key in ("host_key", "client_key"):
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(home, key)])
    with open(os.path.join(home, "client_key.pub")) as f, \
            open(os.path.join(home, "authorized_keys"), "w") as out:
        out.write(f.read())
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = os.path.join(home, "sshd_config")
    with open(config, "w") as f:
        f.write(f"Port {port}\nListenAddress 127.0.0.1\nHostKey {home}/host_key\n"
                f"AuthorizedKeysFile {home}/authorized_keys\nPidFile none\nStrictModes no\n"
                "UsePAM no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "Subsystem sftp internal-sftp\n")
    sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", config],
                            stderr=subprocess.DEVNULL, start_new_session=True)
    mounted_store = False
    try:
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or sshd.poll() is not None:
                raise StepError("sshd did not start")
            time.sleep(0.05)
        run(["sshfs", "-p", str(port), "-o", f"IdentityFile={home}/client_key", "-o",
             "StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,"
             "LogLevel=ERROR,dir_cache=no", f"root@127.0.0.1:{export}", mnt])
        mounted_store = True
        yield mnt
    finally:
        with signals_deferred():
            if mounted_store:
                subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)
            sshd.terminate()
            sshd.wait()
            remove_tree(home)
