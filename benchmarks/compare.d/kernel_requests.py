# The FUSE requests the kernel sends a mount during each timed step, by kind.
"""Counted from the kernel's fuse:fuse_request_send tracepoint, filtered to the mount's
connection, in a tracing instance of the harness's own (no other tracer's buffer or settings are
touched). Every system is counted the same way, whatever its daemon or library, so the counts say
which round trips one system's kernel side makes that another's does not.

common.timed() brackets each timed command with begin() and end() when watch() has named the
mount under test; the figure it emits then carries the counts (take_last()).
"""
import collections
import os
import re
import select
import subprocess
import threading

TRACEFS = "/sys/kernel/tracing"
INSTANCE = os.path.join(TRACEFS, "instances", "sigilfs-compare")
EVENT = os.path.join(INSTANCE, "events", "fuse", "fuse_request_send")
# A send line ends "... opcode 35 (FUSE_CREATE) len 64".
_OPCODE = re.compile(rb"\(FUSE_(\w+)\)")

_mounted_here = False  # tracefs was not mounted, and available() mounted it (close() unmounts)
_connection = None   # the kernel's id of the watched mount's connection, or None
_counter = None      # the step being counted
_last = None         # the counts of the last step that ended


def available():
    """None where the kernel has the tracepoint (tracefs is mounted for the run if it was not,
    and an instance made); else why not."""
    global _mounted_here
    if not os.path.isdir(os.path.join(TRACEFS, "events")):
        _mounted_here = subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS],
                                       stderr=subprocess.DEVNULL).returncode == 0
    if not os.path.isdir(os.path.join(TRACEFS, "events", "fuse", "fuse_request_send")):
        return "this kernel has no fuse:fuse_request_send tracepoint (Linux 6.15 or later has)"
    try:
        os.makedirs(INSTANCE, exist_ok=True)
    except OSError as e:
        return f"cannot make a tracing instance: {e.strerror}"
    return None


def connection_of(mnt):
    """The connection id the tracepoint reports for the FUSE mount on `mnt` (its s_dev)."""
    dev = os.stat(mnt).st_dev
    return (os.major(dev) << 20) | os.minor(dev)


class watch:
    """Counts the requests to the mount on `mnt` in each timed step within this block."""

    def __init__(self, mnt):
        self.mnt = mnt

    def __enter__(self):
        global _connection
        _connection = connection_of(self.mnt) if os.path.isdir(INSTANCE) else None
        return self

    def __exit__(self, *exc):
        global _connection
        _connection = None
        return False


class _Counter:
    def __init__(self, connection):
        _write(os.path.join(INSTANCE, "buffer_size_kb"), "16384")
        _write(os.path.join(EVENT, "filter"), f"connection == {connection}")
        _write(os.path.join(INSTANCE, "trace"), "")  # empties the buffer
        self.counts = collections.Counter()
        self.lost = False
        self._pipe = os.open(os.path.join(INSTANCE, "trace_pipe"), os.O_RDONLY | os.O_NONBLOCK)
        self._stop = threading.Event()
        self._rest = b""
        _write(os.path.join(EVENT, "enable"), "1")
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _drain(self):
        while True:
            try:
                chunk = os.read(self._pipe, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                return
            lines = (self._rest + chunk).split(b"\n")
            self._rest = lines.pop()
            for line in lines:
                m = _OPCODE.search(line)
                if m:
                    self.counts[m.group(1).decode()] += 1

    def _read(self):
        while not self._stop.is_set():
            select.select([self._pipe], [], [], 0.1)
            self._drain()

    def finish(self):
        _write(os.path.join(EVENT, "enable"), "0")
        self._stop.set()
        self._thread.join()
        self._drain()
        os.close(self._pipe)
        # Events the buffer dropped (a reader too slow) make the counts a lower bound.
        for cpu in os.listdir(os.path.join(INSTANCE, "per_cpu")):
            with open(os.path.join(INSTANCE, "per_cpu", cpu, "stats")) as f:
                for line in f:
                    if line.startswith("overrun:") and int(line.split()[1]) > 0:
                        self.lost = True
        return self


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def begin():
    global _counter
    _counter = _Counter(_connection) if _connection is not None else None


def end():
    global _counter, _last
    if _counter is not None:
        _last = _counter.finish()
        _counter = None


def take_last():
    """The counts of the step that ended last ({kind: n}, and whether some were lost), once."""
    global _last
    last, _last = _last, None
    return last


def close():
    """Removes the tracing instance, and unmounts tracefs if available() mounted it."""
    global _mounted_here
    try:
        os.rmdir(INSTANCE)
    except OSError:
        pass
    if _mounted_here:
        subprocess.run(["umount", TRACEFS], stderr=subprocess.DEVNULL)
        _mounted_here = False
