# The outputs of benchmarks/compare: results.csv, summary.md, gnuplot charts, the table checker.
import csv
import os
import re
import subprocess

from common import dpkg_version, human_size, log, median

CSV_FIELDS = ["system", "workload", "metric", "unit", "run", "value"]


def lower_is_better(unit):
    return unit == "s"


class Results:
    """Every figure measured, written to the CSV as soon as it exists (a stopped run keeps them)."""

    def __init__(self, path):
        self.rows = []
        self.groups = {}   # workload -> the group that measured it
        self._file = open(path, "w", newline="")
        self._csv = csv.writer(self._file)
        self._csv.writerow(CSV_FIELDS)
        self._file.flush()

    def add(self, group, system, workload, metric, unit, run, value):
        self.rows.append((system, workload, metric, unit, run, value))
        self.groups.setdefault(workload, group)
        self._csv.writerow([system, workload, metric, unit, run, f"{value:.6g}"])
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
    """A Markdown table; columns from right_from on are right-aligned (figures)."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---" if i < right_from else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def write_summary(path, ctx, results, systems, charts):
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
        ["cores", str(os.cpu_count())],
        ["memory", ctx.memory],
        ["kernel", os.uname().release],
        ["backing filesystem", ctx.backing_fs],
        ["date (UTC)", f"{ctx.started:%Y-%m-%d %H:%M:%S}"],
    ], 99))
    out += ["", "## Systems", ""]
    out.append(table(["system", "version", "configuration"],
                     [[s.name, s.version(), s.config] for s in systems], 99))
    tools = [f"{p} {dpkg_version(p)}" for p in ("iozone3", "fio", "coreutils", "tar", "rsync",
                                                 "fsverity", "gnuplot-nox", "fuse3")
             if dpkg_version(p)]
    out += ["", "Tools: " + ", ".join(tools) + ".", ""]
    out.append("Options: " + ctx.options_text + ".")
    out += ["", f"Command: `{ctx.command}`"]

    if shared:
        out += ["", "## Results", ""]
        rows = [[w, m, u] + [cell(results.values(n, (w, m, u))) for n in names]
                for w, m, u in shared]
        out.append(table(["workload", "metric", "unit"] + names, rows, 3))
        if "sigilfs" in names:
            out += ["", "## Relative to sigilfs", "",
                    "Each system's median over sigilfs' median (for times, the inverse): above 1 "
                    "means faster than sigilfs, below 1 slower.", ""]
            rows = [[w, m] + [ratio_cell(results.values(n, (w, m, u)),
                                         results.values("sigilfs", (w, m, u)), u) for n in names]
                    for w, m, u in shared]
            out.append(table(["workload", "metric"] + names, rows, 2))
    if reverse and reverse_names:
        out += ["", "## Encrypted views of a plain tree (reverse mode)", ""]
        rows = [[w, m, u] + [cell(results.values(n, (w, m, u))) for n in reverse_names]
                for w, m, u in reverse]
        out.append(table(["workload", "metric", "unit"] + reverse_names, rows, 3))
    if several and several_names:
        out += ["", "## A vault on shared storage (sshfs)", "",
                "The cipher directory on sshfs (an sshd on 127.0.0.1, `-o dir_cache=no`), each "
                "system mounted as usual and in its mode for vaults that several hosts use.", ""]
        rows = [[w, m, u] + [cell(results.values(n, (w, m, u))) for n in several_names]
                for w, m, u in several]
        out.append(table(["workload", "metric", "unit"] + several_names, rows, 3))
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
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


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


def check_table(path, systems):
    """0 when path's tables have a figure in every cell of every listed system's column, and one
    table holds all of them; otherwise 1, with what is missing on stderr."""
    try:
        tables = read_tables(path)
    except OSError as e:
        log(f"check-table: {e}")
        return 1
    problems = []
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
    for p in problems:
        log(f"check-table: {p}")
    if problems:
        return 1
    rows = sum(len(t) - 1 for t in comparison)
    log(f"check-table: {path}: every cell has a figure ({rows} rows in {len(comparison)} tables, "
        f"systems {', '.join(systems)})")
    return 0
