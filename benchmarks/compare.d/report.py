# The outputs of benchmarks/compare: results.csv, summary.md, gnuplot charts, the table checker.
import csv
import os
import re
import subprocess

from common import dpkg_version, human_size, log, median

CSV_FIELDS = ["system", "workload", "metric", "unit", "run", "value", "requests"]


def lower_is_better(unit):
    return unit == "s"


class Results:
    """Every figure measured, written to the CSV as soon as it exists (a stopped run keeps them)."""

    def __init__(self, path):
        self.rows = []
        self.groups = {}   # workload -> the group that measured it
        self.requests = {}  # (system, key) -> the first run's request counts
        self._file = open(path, "w", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(CSV_FIELDS)
        self._file.flush()

    def add(self, group, system, workload, metric, unit, run, value, requests=None):
        """`requests`: the kernel's requests during the step (kernel_requests), if counted."""
        self.rows.append((system, workload, metric, unit, run, value))
        self.groups.setdefault(workload, group)
        if requests is not None:
            self.requests.setdefault((system, (workload, metric, unit)), requests)
        self._csv.writerow([system, workload, metric, unit, run, f"{value:.6g}",
                            requests_text(requests)])
        self._file.flush()

    def close(self):
        self._file.close()

    def keys(self):
        """(workload, metric, unit) in the order first measured: the order of the groups."""
        seen = {}
        for _, workload, metric, unit, _, _ in self.rows:
            seen.setdefault((workload, metric, unit), None)
        return list(seen)

    def values(self, system, key):
        return [r[5] for r in self.rows if r[0] == system and (r[1], r[2], r[3]) == key]


REQUESTS_HEADING = "Requests the kernel sent"
NOT_COUNTED = "requests not counted"  # the note of a run that could not count them


def requests_text(requests):
    """'LOOKUP=101 CREATE=100 ...', most first, for the CSV (' (lost some)' where the trace
    dropped events)."""
    if requests is None:
        return ""
    kinds = " ".join(f"{k}={n}" for k, n in requests.counts.most_common())
    return kinds + (" (lost some)" if requests.lost else "")


def requests_section(results, keys, names):
    """The table of the kernel's requests per step and system, then each system's most frequent
    kinds for the steps of the tree and listing groups; empty where nothing was counted."""
    counted = [k for k in keys if any((n, k) in results.requests for n in names)]
    if not counted:
        return []
    out = ["", f"## {REQUESTS_HEADING}", "",
           "FUSE requests per timed step, from the kernel's `fuse:fuse_request_send` tracepoint "
           "(first run; `+` where the trace lost some): the round trips each system costs.", ""]
    rows = []
    for key in counted:
        row = [key[0], key[1]]
        for n in names:
            r = results.requests.get((n, key))
            row.append("" if r is None else f"{sum(r.counts.values()):,}" + ("+" if r.lost else ""))
        rows.append(row)
    out.append(table(["workload", "metric"] + names, rows, 2))
    out += ["", "By kind, for the steps of whole trees and many files:", ""]
    for key in counted:
        if results.groups[key[0]].name not in ("tree", "listing"):
            continue
        parts = []
        for n in names:
            r = results.requests.get((n, key))
            if r is not None:
                top = ", ".join(f"{k} {c:,}" for k, c in r.counts.most_common(8))
                parts.append(f"{n}: {top}")
        out.append(f"- {key[0]} {key[1]}: " + "; ".join(parts))
    return out


def fmt(value):
    """Three significant figures or so, without scientific notation."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def cell(values):
    if not values:
        return "—"
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def ratio_cell(values, reference, unit):
    if not values or not reference:
        return "—"
    mine, ref = median(values), median(reference)
    # Always "how many times as fast as sigilfs": above 1 is faster, for times as for rates.
    r = ref / mine if lower_is_better(unit) else mine / ref
    return f"{r:.2f}×"


def table(header, rows, right_from):
    """A Markdown table; columns from right_from on are right-aligned (figures). The columns are
    padded to one width, so that the table reads as well in a terminal as rendered."""
    widths = [max([3] + [len(r[i]) for r in [header] + rows if i < len(r)])
              for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) if i >= right_from else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    rule = "|" + "|".join("-" * (w + 2) if i < right_from else "-" * (w + 1) + ":"
                          for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule] + [line(r) for r in rows])


# The encrypted systems sigilfs is held against: a figure where sigilfs is behind the better of
# them is flagged. Never another build of sigilfs (sigilfs-base) nor the baselines.
PEERS = ("gocryptfs", "securefs")
WARN = "⚠"
TRANSPORTS = {"dev": "/dev/fuse", "uring": "io_uring"}


def behind(mine, theirs, unit):
    """Whether the figures `mine` are worse than `theirs` by more than the spread between runs:
    with one run each, a worse figure; with several, even the best of mine is worse than the
    worst of theirs."""
    if not mine or not theirs:
        return False
    if lower_is_better(unit):
        return min(mine) > max(theirs)
    return max(mine) < min(theirs)


def times_as_fast(values, reference, unit):
    """How many times as fast `values` are as `reference`, by medians (for times, the inverse)."""
    mine, ref = median(values), median(reference)
    if not mine or not ref:
        return float("nan")
    return ref / mine if lower_is_better(unit) else mine / ref


def best_of(results, names, key):
    """Of names, the one with the best median for key (None when none has a figure)."""
    measured = [(n, results.values(n, key)) for n in names if results.values(n, key)]
    if not measured:
        return None
    pick = min if lower_is_better(key[2]) else max
    return pick(measured, key=lambda nv: median(nv[1]))[0]


def figure(values, unit):
    return f"{fmt(median(values))} {unit}"


class Flags:
    """The figures of one table where a system is behind another: a ⚠ in its cells, and lines
    naming both figures and the ratio."""

    def __init__(self, results, keys, names, runs):
        self.results = results
        self.cells = set()     # (system, key) cells that get the mark
        self.behind = []       # lines under "Behind a peer:"
        self.uring = []        # lines under "sigilfs-uring slower than sigilfs:"
        self.runs = runs
        self.pairs = []        # (system, peers) compared, for the rule under the table
        self.names = names
        self.keys = keys

    def against_peers(self, mine, peers):
        """Flags each row where mine is behind the best (by median) of peers."""
        peers = [p for p in peers if p in self.names and p != mine]
        if mine not in self.names or not peers:
            return
        self.pairs.append((mine, peers))
        for key in self.keys:
            ours = self.results.values(mine, key)
            best = best_of(self.results, peers, key)
            theirs = self.results.values(best, key) if best else []
            if behind(ours, theirs, key[2]):
                self.cells.add((mine, key))
                w, m, u = key
                self.behind.append(
                    f"- {w} {m}: {mine} {figure(ours, u)}, {best} {figure(theirs, u)} "
                    f"({best} {times_as_fast(theirs, ours, u):.2f}× as fast)")

    def uring_against_dev(self):
        """A line for each row where sigilfs over io_uring is behind sigilfs over /dev/fuse."""
        if "sigilfs" not in self.names or "sigilfs-uring" not in self.names:
            return
        for key in self.keys:
            ring, dev = (self.results.values(n, key) for n in ("sigilfs-uring", "sigilfs"))
            if behind(ring, dev, key[2]):
                w, m, u = key
                self.uring.append(
                    f"- {w} {m}: sigilfs-uring {figure(ring, u)}, sigilfs {figure(dev, u)} "
                    f"({times_as_fast(ring, dev, u):.2f}× as fast)")

    def cell(self, name, key):
        text = cell(self.results.values(name, key))
        return f"{text} {WARN}" if (name, key) in self.cells else text

    def how(self):
        """The rule of behind(), in words."""
        if self.runs > 1:
            return ("by more than the spread between runs: even its best run is worse than the "
                    "worst run of the one it is held against")
        return "one run, so any worse figure; a few percent may be noise, use --runs 3"

    def rule(self):
        """What the marks mean, for under the table."""
        if not self.pairs:
            return []
        who = "; ".join(f"{mine} against the better (by median) of {' and '.join(peers)}"
                        if len(peers) > 1 else f"{mine} against {peers[0]}"
                        for mine, peers in self.pairs)
        return [f"{WARN}: behind a peer ({who}), {self.how()}."]

    def lines(self, where=""):
        """The lists for under the table; `where` names the table, for the terminal."""
        out = []
        if self.pairs:
            head = f"Behind a peer{f' ({where})' if where else ''}:"
            out += [head] + self.behind if self.behind else [f"{head} nowhere."]
        if self.uring:
            rule = "same rule" if self.pairs else self.how()
            out += [""] if out else []
            out += [f"sigilfs-uring slower than sigilfs ({rule}):"] + self.uring
        return out


class TransportUse:
    """Which transport carried one mount's requests, from its daemon's stats (sigilfs)."""

    def __init__(self, where, run, stats):
        self.where = where
        self.run = run
        self.known = "transport" in stats
        self.transport = str(stats.get("transport", "unknown"))
        self.dev = int(stats.get("requests_dev") or 0)
        self.uring = int(stats.get("requests_uring") or 0)

    @property
    def total(self):
        return self.dev + self.uring

    def describe(self):
        if not self.known:
            return "the daemon's stats name no transport (a build older than the stats' transport)"
        return (f"served over {TRANSPORTS.get(self.transport, self.transport)}, requests over "
                f"io_uring: {self.uring:,} of {self.total:,}")


def transport_cell(uses):
    """A system's transport over all its measured mounts, for the Systems table."""
    if uses is None:
        return "—"
    uses = [u for u in uses if u.known]
    if not uses:
        return "not known (no stats from the daemon)"
    counts = {}
    for u in uses:
        counts[u.transport] = counts.get(u.transport, 0) + 1
    served = ", ".join(TRANSPORTS.get(t, t) + (f" ({n} of {len(uses)} mounts)"
                                               if len(counts) > 1 else "")
                       for t, n in counts.items())
    uring, total = sum(u.uring for u in uses), sum(u.total for u in uses)
    share = f" ({100 * uring / total:.0f}%)" if total else ""
    return f"{served}; requests over io_uring: {uring:,} of {total:,}{share}"


def transport_warnings(systems, transports):
    """A line for each system whose requests did not go where it asked: sigilfs-uring with
    mounts where the ring carried under half of them (its figures then do not measure io_uring),
    sigilfs over /dev/fuse with requests over the ring."""
    out = []
    for s in systems:
        asked = getattr(s, "transport", None)
        uses = [u for u in transports.get(s.name, []) if u.known]
        if asked == "uring":
            missed = [u for u in uses if 2 * u.uring < u.total or u.total == 0]
            if missed:
                out.append(
                    f"{WARN} {s.name} does not measure io_uring in {len(missed)} of {len(uses)} "
                    "mounts: the ring carried under half of their requests ("
                    + "; ".join(f"{u.where}, run {u.run}: {u.uring:,} of {u.total:,}"
                                for u in missed) + ").")
        elif asked == "dev":
            strays = [u for u in uses if u.uring > 0]
            if strays:
                out.append(
                    f"{WARN} {s.name} asked for /dev/fuse, yet the ring carried requests in "
                    f"{len(strays)} of {len(uses)} mounts ("
                    + "; ".join(f"{u.where}, run {u.run}: {u.uring:,} of {u.total:,}"
                                for u in strays) + ").")
    return out


def write_summary(path, ctx, results, systems, charts):
    """Writes summary.md; returns its gist for the terminal: where it ran, the transports, the
    results table and the figures where sigilfs is behind."""
    names = [s.name for s in systems]
    keys = results.keys()
    shared = [k for k in keys
              if results.groups[k[0]].only is None and not results.groups[k[0]].reverse
              and not results.groups[k[0]].shared]
    # Vaults over sshfs, each system mounted as usual and in its mode for several hosts.
    several = [k for k in keys if results.groups[k[0]].shared]
    several_names = [n for s in systems if s.shared_variant
                     for n in (s.name, s.shared_variant[0])]
    only = [k for k in keys if results.groups[k[0]].only is not None]
    # Backups through an encrypted view: only the systems that have one.
    reverse = [k for k in keys if results.groups[k[0]].reverse]
    reverse_names = [s.name for s in systems if s.reverse]

    out = [f"# Comparison run, {ctx.started:%Y-%m-%d %H:%M} UTC", ""]
    if ctx.runs > 1:
        out.append(f"File size {human_size(ctx.size)}, {ctx.runs} runs per figure; cells are "
                   "medians with the spread (min–max) of the runs.")
    else:
        out.append(f"File size {human_size(ctx.size)}, one run per figure.")
    out.append("MB/s (10^6 bytes per second) and IOPS: higher is better; "
               "s (seconds): lower is better.")
    out += ["", "## Machine", ""]
    out.append(table(["machine", ""], [
        ["CPU", ctx.cpu_model],
        ["virtual machine", ctx.virtual],
        ["cores", str(os.cpu_count())],
        ["memory", ctx.memory],
        ["kernel", os.uname().release],
        ["backing filesystem", ctx.backing_fs],
        ["date (UTC)", f"{ctx.started:%Y-%m-%d %H:%M:%S}"],
    ], 99))
    out += ["", "## Systems", ""]
    out.append(table(["system", "version", "configuration", "transport used"],
                     [[s.name, s.version(), s.config, system_transport(ctx, s)]
                      for s in systems], 99))
    warnings = transport_warnings(systems, ctx.transports)
    if any(hasattr(s, "transport") for s in systems):
        out += ["", "Transport used: what each sigilfs daemon counted (its `--stats-file`, "
                "written on SIGUSR1 after each workload group), summed over the mounts."]
        out += ["", *warnings] if warnings else []
    tools = [f"{p} {dpkg_version(p)}" for p in ("iozone3", "fio", "coreutils", "tar", "rsync",
                                                 "fsverity", "gnuplot-nox", "fuse3")
             if dpkg_version(p)]
    out += ["", "Tools: " + ", ".join(tools) + ".", ""]
    out.append("Options: " + ctx.options_text + ".")
    out += ["", f"Command: `{ctx.command}`"]

    gist = [f"Comparison run, {ctx.started:%Y-%m-%d %H:%M} UTC: {ctx.options_text}.",
            f"Machine: {ctx.cpu_model}, {os.cpu_count()} cores, {ctx.memory}, kernel "
            f"{os.uname().release}, virtual machine: {ctx.virtual}; {ctx.backing_fs}."]
    gist += [f"Transport of {s.name}: {system_transport(ctx, s)}."
             for s in systems if hasattr(s, "transport")]
    gist += warnings
    if shared:
        flags = Flags(results, shared, names, ctx.runs)
        flags.against_peers("sigilfs", PEERS)
        flags.uring_against_dev()
        rows = [[w, m, u] + [flags.cell(n, (w, m, u)) for n in names] for w, m, u in shared]
        results_table = table(["workload", "metric", "unit"] + names, rows, 3)
        below = flags.rule() + ([""] if flags.rule() else []) + flags.lines()
        out += ["", "## Results", "", results_table]
        out += ["", *below] if below else []
        gist += ["", results_table] + (["", *below] if below else [])
        if "sigilfs" in names:
            out += ["", "## Relative to sigilfs", "",
                    "Each system's median over sigilfs' median (for times, the inverse): above 1 "
                    "means faster than sigilfs, below 1 slower.", ""]
            rows = [[w, m] + [ratio_cell(results.values(n, (w, m, u)),
                                         results.values("sigilfs", (w, m, u)), u) for n in names]
                    for w, m, u in shared]
            out.append(table(["workload", "metric"] + names, rows, 2))
    if shared:
        out += requests_section(results, shared, names)
    if reverse and reverse_names:
        flags = Flags(results, reverse, reverse_names, ctx.runs)
        flags.against_peers("sigilfs", PEERS)
        out += ["", "## Encrypted views of a plain tree (reverse mode)", ""]
        rows = [[w, m, u] + [flags.cell(n, (w, m, u)) for n in reverse_names]
                for w, m, u in reverse]
        out.append(table(["workload", "metric", "unit"] + reverse_names, rows, 3))
        if flags.pairs:
            out += ["", *flags.rule(), "", *flags.lines()]
            gist += ["", *flags.lines("reverse mode, encrypted views")]
    if several and several_names:
        flags = Flags(results, several, several_names, ctx.runs)
        # Each mode against the peer's same mode.
        flags.against_peers("sigilfs", ["gocryptfs"])
        flags.against_peers("sigilfs --shared", ["gocryptfs -sharedstorage"])
        out += ["", "## A vault on shared storage (sshfs)", "",
                "The cipher directory on sshfs (an sshd on 127.0.0.1, `-o dir_cache=no`), each "
                "system mounted as usual and in its mode for vaults that several hosts use.", ""]
        rows = [[w, m, u] + [flags.cell(n, (w, m, u)) for n in several_names]
                for w, m, u in several]
        out.append(table(["workload", "metric", "unit"] + several_names, rows, 3))
        if flags.pairs:
            out += ["", *flags.rule(), "", *flags.lines()]
            gist += ["", *flags.lines("a vault on shared storage, sshfs")]
    if only:
        out += ["", "## sigilfs only", ""]
        rows = [[w, m, u, cell(results.values("sigilfs", (w, m, u)))] for w, m, u in only]
        out.append(table(["workload", "metric", "unit", "sigilfs"], rows, 3))
    if charts:
        out += ["", "## Charts", ""]
        out += ["\n\n".join(f"![{name}]({name}.png)" for name in charts)]
    if ctx.notes:
        out += ["", "## Notes", ""]
        out += [f"- {n}" for n in ctx.notes]
        gist += ["", f"Notes: {len(ctx.notes)} (failed steps, systems left out) in summary.md."]
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return "\n".join(gist) + "\n"


def system_transport(ctx, system):
    """The Systems table's "transport used" of a system: only sigilfs' daemons count theirs."""
    if not hasattr(system, "transport"):
        return "—"
    return transport_cell(ctx.transports.get(system.name, []))


def _chart_title(workload, unit):
    better = "lower" if lower_is_better(unit) else "higher"
    return f"{workload} ({unit}, {better} is better; bars: median, whiskers: min-max)"


def write_charts(out_dir, results, systems):
    """One PNG bar chart per workload (gnuplot); returns the chart names that were drawn."""
    names = [n for s in systems
             for n in ((s.name, s.shared_variant[0]) if s.shared_variant else (s.name,))]
    source_dir = os.path.join(out_dir, "gnuplot")
    os.makedirs(source_dir, exist_ok=True)
    drawn = []
    workloads = []
    for w, _, _ in results.keys():
        if w not in workloads:
            workloads.append(w)
    for workload in workloads:
        keys = [k for k in results.keys() if k[0] == workload]
        unit = keys[0][2]
        columns = [n for n in names if any(results.values(n, k) for k in keys)]
        if not columns:
            continue
        data = os.path.join(source_dir, f"{workload}.dat")
        positive = []
        with open(data, "w") as f:
            f.write("# metric, then median min max for: " + " ".join(columns) + "\n")
            for k in keys:
                fields = [f'"{k[1]}"']
                for n in columns:
                    v = results.values(n, k)
                    if v:
                        fields += [f"{median(v):.6g}", f"{min(v):.6g}", f"{max(v):.6g}"]
                        positive += [x for x in v if x > 0]
                    else:
                        fields += ["NaN"] * 3
                f.write(" ".join(fields) + "\n")
        # A log scale when the figures span more than a factor of 30 (cached rereads next to
        # synchronous writes), so the small bars stay readable.
        log_scale = bool(positive) and max(positive) / min(positive) > 30
        plots = []
        for i, n in enumerate(columns):
            c = 2 + 3 * i
            # The colour follows the system's place in --systems, the same in every chart.
            plots.append(f"'{workload}.dat' using {c}:{c + 1}:{c + 2}"
                         + (":xtic(1)" if i == 0 else "") + f" title '{n}' lt {names.index(n) + 1}")
        script = os.path.join(source_dir, f"{workload}.gp")
        with open(script, "w") as f:
            f.write("\n".join([
                "set terminal pngcairo size 1100,550 noenhanced font ',10'",
                f"set output '../{workload}.png'",
                f"set title '{_chart_title(workload, unit)}'",
                f"set ylabel '{unit}'",
                "set style data histogram",
                "set style histogram errorbars gap 2 lw 1",
                "set style fill solid 0.85 border -1",
                "set boxwidth 0.9",
                "set key outside right top",
                "set grid ytics",
                "set xtics nomirror",
                "set logscale y" if log_scale else "set yrange [0:*]",
                "plot " + ", \\\n     ".join(plots),
                "",
            ]))
        proc = subprocess.run(["gnuplot", os.path.basename(script)], cwd=source_dir,
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            log(f"gnuplot failed for {workload}: {proc.stderr.strip()}")
            continue
        drawn.append(workload)
    return drawn


# A figure: what cell() and ratio_cell() write, e.g. "523", "1.25×", "12.5 (11.0–13.1)".
FIGURE = re.compile(r"^[0-9]+(\.[0-9]+)?")


def read_tables(path):
    """Markdown tables of a file as lists of rows (the header first, the |---| line dropped)."""
    tables, current = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("|"):
                cells = [c.strip() for c in line.strip("|").split("|")]
                if not all(re.fullmatch(r":?-+:?", c) for c in cells):
                    current.append(cells)
            elif current:
                tables.append(current)
                current = []
    if current:
        tables.append(current)
    return tables


# The Systems table's "transport used" of a sigilfs system (transport_cell()).
TRANSPORT_USED = re.compile(r"requests over io_uring: ([0-9,]+) of ([0-9,]+)")


def check_machine(tables, systems):
    """What is missing from the summary's account of where it ran: the CPU, the kernel, and each
    listed sigilfs system's transport as its daemon counted it."""
    problems = []
    rows = {row[0]: row[1] for t in tables if t[0][0] == "machine" for row in t[1:]
            if len(row) > 1}
    for what in ("CPU", "kernel"):
        if not rows.get(what) or rows[what] == "unknown":
            found = "no row" if what not in rows else rows[what] or "empty"
            problems.append(f"the Machine table names no {what} ({found})")
    listed = {row[0]: row for t in tables if t[0][0] == "system" for row in t[1:]}
    header = next((t[0] for t in tables if t[0][0] == "system"), [])
    if "transport used" not in header:
        return problems + ["the Systems table has no column \"transport used\""]
    col = header.index("transport used")
    for s in systems:
        value = listed.get(s, [])[col] if col < len(listed.get(s, [])) else ""
        if not s.startswith("sigilfs"):
            continue
        found = TRANSPORT_USED.search(value)
        if not found or int(found.group(2).replace(",", "")) == 0:
            problems.append(f"{s}: no requests counted in \"transport used\" ({value or 'empty'})")
    return problems


def check_table(path, systems):
    """0 when path's tables have a figure in every cell of every listed system's column, and one
    table holds all of them, and the summary says where it ran (CPU, kernel, and the transport
    of each listed sigilfs system); otherwise 1, with what is missing on stderr."""
    try:
        tables = read_tables(path)
    except OSError as e:
        log(f"check-table: {e}")
        return 1
    problems = check_machine(tables, systems)
    comparison = [t for t in tables if all(s in t[0] for s in systems) and len(t) > 1]
    if not comparison:
        problems.append(f"no table with a column for each of {', '.join(systems)}")
    for t in tables:
        header = t[0]
        for s in systems:
            if s not in header:
                continue
            col = header.index(s)
            for row in t[1:]:
                value = row[col] if col < len(row) else ""
                if not FIGURE.match(value):
                    where = " / ".join(row[:2])
                    problems.append(f"{s}, row '{where}': no figure ({value or 'empty'})")
    # Unless the run noted why it could not count them (its cells are checked with the rest:
    # the table has a column per system).
    with open(path) as f:
        text = f.read()
    if f"## {REQUESTS_HEADING}" not in text and NOT_COUNTED not in text:
        problems.append("no table of the requests the kernel sent, and no note saying why")
    for p in problems:
        log(f"check-table: {p}")
    if problems:
        return 1
    rows = sum(len(t) - 1 for t in comparison)
    log(f"check-table: {path}: every cell has a figure ({rows} rows in {len(comparison)} tables, "
        f"systems {', '.join(systems)}); CPU, kernel and transports are named")
    return 0
