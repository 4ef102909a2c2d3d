# Helpers shared by benchmarks/compare: running and timing commands, dropping caches, sizes.
import contextlib
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

import kernel_requests

MIB = 1 << 20

# No single step of a benchmark should take this long; a hung FUSE daemon must not hang the run.
STEP_TIMEOUT = 3 * 3600


class StepError(Exception):
    """A command the harness ran failed; the message carries the tail of its output."""


@contextlib.contextmanager
def signals_deferred():
    """Holds back Ctrl-C, SIGTERM and SIGHUP until the block is done, so that cleanup (unmounting,
    deleting the scratch area) is not itself cut short; they are delivered when it ends."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


_started = time.monotonic()


def log(message):
    # Minutes:seconds since the start, so a long run shows where its time goes.
    elapsed = int(time.monotonic() - _started)
    print(f"compare [{elapsed // 60:02d}:{elapsed % 60:02d}]: {message}", file=sys.stderr,
          flush=True)


def _tail(text, lines=6):
    text = (text or "").strip()
    return "\n".join(text.splitlines()[-lines:])


def run(cmd, *, shell=False, timeout=STEP_TIMEOUT):
    """Runs a command, returns its stdout; raises StepError with its stderr when it fails."""
    try:
        proc = subprocess.run(
            cmd, shell=shell, timeout=timeout, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    except subprocess.TimeoutExpired as e:
        raise StepError(f"timed out after {timeout} s: {describe(cmd)}") from e
    except OSError as e:
        raise StepError(f"cannot run {describe(cmd)}: {e}") from e
    if proc.returncode != 0:
        detail = _tail(proc.stderr) or _tail(proc.stdout)
        raise StepError(f"{describe(cmd)} exited {proc.returncode}: {detail}")
    return proc.stdout


def describe(cmd):
    return cmd if isinstance(cmd, str) else " ".join(str(c) for c in cmd)


def flush_to_disk():
    # Twice: the first sync pushes the kernel's dirty FUSE pages to the daemons, which write them
    # into the backing filesystem's page cache while that sync may already have passed it; the
    # second sync puts those on disk too. Cheap when nothing is dirty.
    os.sync()
    os.sync()


def timed(cmd, *, settle=False, **kwargs):
    """Seconds a command takes; with settle, including getting everything it wrote onto disk."""
    kernel_requests.begin()
    try:
        start = time.monotonic()
        run(cmd, **kwargs)
        if settle:
            flush_to_disk()
        return time.monotonic() - start
    finally:
        kernel_requests.end()


def drop_caches():
    """Makes the next measurement cold: the kernel's page, dentry and inode caches are emptied.

    A FUSE daemon's own user-space caches survive this; they are part of what is measured.
    """
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def warm(path):
    """Reads a file or tree once so that feeding it to a measured step costs no disk reads."""
    if os.path.isdir(path):
        # Through a pipe: GNU tar skips reading file data when its output is /dev/null.
        run(pipeline(f"tar -cf - -C {quote(path)} . | cat >/dev/null"))
    else:
        with open(path, "rb") as f:
            while f.read(8 * MIB):
                pass


def pipeline(command):
    """argv running a shell pipeline that fails when any of its commands fails."""
    return ["bash", "-o", "pipefail", "-c", command]


def quote(s):
    return shlex.quote(str(s))


def mbps(nbytes, seconds):
    """Throughput in MB/s (10^6 bytes per second), the unit used throughout the report."""
    return nbytes / 1e6 / seconds


def parse_size(text):
    """'512M', '8MiB', '1G', '65536K' (binary units); a bare number is MiB. Returns bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if t and t[-1] in units:
        value, unit = t[:-1], units[t[-1]]
    else:
        value, unit = t, MIB
    try:
        n = int(float(value) * unit)
    except ValueError:
        raise ValueError(f"not a size: {text!r} (use e.g. 512M or 1G)") from None
    return n


def human_size(nbytes):
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


def which(name):
    return shutil.which(name)


def median(values):
    return statistics.median(values)


def dpkg_version(package):
    """The installed Debian version of a package, or None."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Status}\t${Version}", package],
                             capture_output=True, text=True, check=False).stdout
    except OSError:
        return None
    status, _, version = out.partition("\t")
    return version if status == "install ok installed" else None


def remove_tree(path):
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)
