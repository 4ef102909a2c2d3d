# The workload groups benchmarks/compare runs on each mounted system, and the inputs they share.
import json
import os
import time

from common import (MIB, StepError, drop_caches, flush_to_disk, mbps, pipeline, quote, run,
                    timed, warm, which)

# One file in this many of the tree's copy is changed before the rsync step (about 3%).
MODIFY_EVERY = 33


class Group:
    """A set of measurements made on one fresh mount of one system."""

    def __init__(self, name, function, only=None, reverse=False, shared=False):
        self.name = name
        self.function = function
        self.only = only          # the systems it applies to (None: all)
        self.reverse = reverse    # runs on an encrypted view of a plain tree, not on a vault
        # Runs on a vault over sshfs, each system mounted as usual and in its shared mode.
        self.shared = shared

    def applies(self, system):
        if self.reverse and not system.reverse:
            return False
        if self.shared and system.shared_variant is None:
            return False
        return self.only is None or system.name in self.only

    def run(self, ctx, system, mnt, emit):
        self.function(ctx, system, mnt, emit)


def record_label(nbytes):
    return f"{nbytes // MIB}m" if nbytes >= MIB else f"{nbytes // 1024}k"


# iozone's columns for -i 0 -i 1 -i 2, after the file size and record length.
IOZONE_METRICS = ["write", "rewrite", "read", "reread", "random-read", "random-write"]


def parse_iozone(output):
    """The six throughputs (kB/s) from iozone's result line, which follows the 'reclen' header."""
    lines = output.splitlines()
    for i, line in enumerate(lines):
        if "reclen" in line and "write" in line:
            for data in lines[i + 1:]:
                fields = data.split()
                if len(fields) >= 2 + len(IOZONE_METRICS) and all(f.isdigit() for f in fields):
                    return [int(f) for f in fields[2:2 + len(IOZONE_METRICS)]]
    raise StepError("no result line in iozone's output")


def iozone(ctx, system, mnt, emit):
    path = os.path.join(mnt, "iozone.tmp")
    for record in ctx.records:
        # Each record size starts cold; iozone's own read passes then follow its write passes.
        drop_caches()
        out = run(["iozone", "-i", "0", "-i", "1", "-i", "2", "-e",
                   "-s", f"{ctx.size // 1024}k", "-r", f"{record // 1024}k", "-f", path])
        for metric, kbps in zip(IOZONE_METRICS, parse_iozone(out)):
            # iozone's kB is 1024 bytes.
            emit(f"iozone-{record_label(record)}", metric, "MB/s", kbps * 1024 / 1e6)


def dd(ctx, system, mnt, emit):
    target = os.path.join(mnt, "dd.bin")
    count = str(ctx.size // MIB)
    # The source is random data in the page cache, so every step reads it at memory speed and no
    # system can profit from zero or repetitive data.
    warm(ctx.source)
    seconds = timed(["dd", f"if={ctx.source}", f"of={target}", "bs=1M", f"count={count}",
                     "conv=fsync", "status=none"])
    emit("dd", "write", "MB/s", mbps(ctx.size, seconds))

    drop_caches()
    warm(ctx.source)
    seconds = timed(["dd", f"if={ctx.source}", f"of={target}", "bs=1M", f"count={count}",
                     "conv=notrunc,fsync", "status=none"])
    emit("dd", "overwrite", "MB/s", mbps(ctx.size, seconds))

    drop_caches()
    seconds = timed(["dd", f"if={target}", "of=/dev/null", "bs=1M", "status=none"])
    emit("dd", "read (cold)", "MB/s", mbps(ctx.size, seconds))


def make_file(ctx, path):
    """An untimed copy of the random source, on disk, for steps that need an existing file."""
    warm(ctx.source)
    run(["dd", f"if={ctx.source}", f"of={path}", "bs=1M", "conv=fsync", "status=none"])


def partial(ctx, system, mnt, emit):
    target = os.path.join(mnt, "partial.bin")
    make_file(ctx, target)
    drop_caches()
    report = os.path.join(ctx.scratch, "fio.json")
    # Timed from outside: the figure then includes the final fsync (end_fsync), which is where
    # write-back caches pay for the writes, whatever fio counts in its own runtime.
    start = time.monotonic()
    run(["fio", "--name=partial", f"--filename={target}", "--rw=randwrite", "--bs=1k",
         f"--size={ctx.size}", f"--number_ios={ctx.partial_ops}", "--ioengine=psync",
         "--end_fsync=1", "--randrepeat=1", "--output-format=json", f"--output={report}"])
    seconds = time.monotonic() - start
    with open(report) as f:
        done = json.load(f)["jobs"][0]["write"]["total_ios"]
    if done != ctx.partial_ops:
        raise StepError(f"fio did {done} writes, expected {ctx.partial_ops}")
    emit("partial", "random 1 KiB writes", "IOPS", ctx.partial_ops / seconds)


def tree(ctx, system, mnt, emit):
    dest = os.path.join(mnt, "tree")
    # Copies and deletions include getting their data onto disk (settle), so the write-back of
    # the backing filesystem counts for every system alike.
    warm(ctx.tree)
    emit("tree", "cp -a in", "s", timed(["cp", "-a", ctx.tree, dest], settle=True))

    drop_caches()
    # Through a pipe: GNU tar skips reading file data when its output is /dev/null.
    tar_out = pipeline(f"tar -cf - -C {quote(mnt)} tree | cat >/dev/null")
    emit("tree", "tar out (cold)", "s", timed(tar_out))

    drop_caches()
    warm(ctx.tree_modified)
    emit("tree", "rsync --inplace update", "s",
         timed(["rsync", "-a", "--inplace", ctx.tree_modified + "/", dest + "/"], settle=True))

    drop_caches()
    emit("tree", "rm -rf", "s", timed(["rm", "-rf", dest], settle=True))


def listing(ctx, system, mnt, emit):
    """Many files in one directory: made, then listed cold with their attributes."""
    dest = os.path.join(mnt, "many")
    os.makedirs(dest)
    n = ctx.listing_files
    # One process making them all (touch in batches), so the figure is the filesystem's.
    script = (f"cd {quote(dest)} && seq -f 'f%06.0f' 0 {n - 1} | xargs touch && sync -f .")
    emit("listing", f"create {n} files", "s", timed(pipeline(script)))
    drop_caches()
    seconds = timed(pipeline(f"ls -l {quote(dest)} | tail -1 >/dev/null"))
    emit("listing", f"ls -l {n} files (cold)", "s", seconds)


def shared(ctx, system, mnt, emit):
    """A tree copied into a vault whose cipher directory is on sshfs, and tarred out cold."""
    dest = os.path.join(mnt, "tree")
    warm(ctx.tree)
    # SFTP sets neither a symlink's owner nor its times (sshfs follows the link), so cp -a
    # complains about those for every system here; any other complaint fails the step.
    errors = os.path.join(os.path.dirname(mnt), "cp-errors")
    cp = (f"cp -a {quote(ctx.tree)} {quote(dest)} 2>{quote(errors)} || "
          f"! grep -v -e '^cp: preserving times for ' -e '^cp: failed to preserve ownership for ' "
          f"{quote(errors)}")
    emit("shared", "cp -a in (sshfs)", "s", timed(["sh", "-c", cp], settle=True))
    drop_caches()
    tar_out = pipeline(f"tar -cf - -C {quote(mnt)} tree | cat >/dev/null")
    emit("shared", "tar out (sshfs, cold)", "s", timed(tar_out))


# Files whose modification time the incremental backup step moves (as a day's edits would).
BACKUP_TOUCHED = 10


def backup(ctx, system, view, emit):
    """A backup through the encrypted view of a copy of the tree (ctx.backup_plain): the first
    rsync into a local directory, an incremental one after touching a few files, a cold tar of
    the view; then the copy must open as a vault that holds the plain tree."""
    base = os.path.dirname(view)
    copy = os.path.join(base, "copy")
    rsync = ["rsync", "-a", view + "/", copy + "/"]
    drop_caches()
    emit("backup", "rsync -a first (cold)", "s", timed(rsync, settle=True))

    files = []
    for root, dirs, names in os.walk(ctx.backup_plain):
        dirs.sort()
        files += [os.path.join(root, n) for n in sorted(names)
                  if os.path.isfile(os.path.join(root, n))
                  and not os.path.islink(os.path.join(root, n)) and not n.startswith(".")]
    step = max(1, len(files) // BACKUP_TOUCHED)
    now = time.time() + 5  # past rsync's whole-second comparison with the first copy
    for path in files[::step][:BACKUP_TOUCHED]:
        os.utime(path, (now, now))
    time.sleep(1.2)  # the views cache attributes for a second
    drop_caches()
    emit("backup", f"rsync -a after touching {BACKUP_TOUCHED} files (cold)", "s",
         timed(rsync, settle=True))

    drop_caches()
    # Through a pipe: GNU tar skips reading file data when its output is /dev/null.
    emit("backup", "tar of the view (cold)", "s",
         timed(pipeline(f"tar -cf - -C {quote(view)} . | cat >/dev/null")))
    system.check_backup(copy, ctx.backup_plain, base)


def verity(ctx, system, mnt, emit):
    if not which("fsverity"):
        ctx.note("verity rows skipped: the fsverity tool is not installed (package fsverity)")
        return
    target = os.path.join(mnt, "verity.bin")
    make_file(ctx, target)
    drop_caches()
    try:
        seconds = timed(["fsverity", "enable", target])
    except StepError as e:
        # Older kernels do not pass FS_IOC_ENABLE_VERITY through FUSE.
        ctx.note(f"verity rows skipped: `fsverity enable` through the sigilfs mount failed ({e})")
        return
    emit("verity", "fsverity enable (cold)", "MB/s", mbps(ctx.size, seconds))
    drop_caches()
    seconds = timed(["dd", f"if={target}", "of=/dev/null", "bs=1M", "status=none"])
    emit("verity", "read sealed (cold)", "MB/s", mbps(ctx.size, seconds))


# In the order they run; a group named in --workloads runs on every system before the next.
GROUPS = [
    Group("iozone", iozone),
    Group("dd", dd),
    Group("partial", partial),
    Group("tree", tree),
    Group("listing", listing),
    Group("verity", verity, only={"sigilfs"}),
    Group("backup", backup, reverse=True),
    Group("shared", shared, shared=True),
]
GROUP_NAMES = [g.name for g in GROUPS]


def make_source(path, size):
    """Random bytes, written once per run of the harness and shared by all systems."""
    with open(path, "wb") as f:
        remaining = size
        while remaining:
            chunk = min(remaining, 8 * MIB)
            f.write(os.urandom(chunk))
            remaining -= chunk
    flush_to_disk()


def make_modified_tree(tree_path, dest):
    """A copy of the tree with every MODIFY_EVERY-th regular file changed (size and mtime both).

    Returns (files in the tree, bytes in the tree, files modified).
    """
    run(["cp", "-a", tree_path, dest])
    files = []
    total = 0
    for root, dirs, names in os.walk(dest):
        dirs.sort()
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.isfile(path) and not os.path.islink(path):
                files.append(path)
                total += os.path.getsize(path)
    modified = files[::MODIFY_EVERY]
    for path in modified:
        os.chmod(path, os.stat(path).st_mode | 0o200)
        with open(path, "a") as f:
            f.write("/* changed by benchmarks/compare for the rsync step */\n")
    flush_to_disk()
    return len(files), total, len(modified)
