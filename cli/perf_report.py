"""Perf across devices and against a baseline: several devices side by side with the
speed ratio between them, and the cases that became slower than a previous run."""
from __future__ import annotations

import csv
import json

from . import plural
from .engine import OK, CaseResult, Run, load_run
from .report import read_baseline
from .support import run_devices


class PerfBaselineError(ValueError):
    pass


def _rate(r: CaseResult) -> str:
    return f"{r.flops / 1e9:.2f} GFLOPS" if r.flops else f"{r.bandwidth_gb_s:.2f} GB/s"


def side_by_side(run: Run) -> tuple[list[str], list[tuple[str, dict[str, CaseResult]]]]:
    """(devices, [(case name, device -> its OK result)]) in case order."""
    devices = run_devices(run)
    rows: dict[str, dict[str, CaseResult]] = {}
    for r in sorted(run.results, key=lambda r: r.index):
        row = rows.setdefault(r.name, {})
        if r.status == OK and r.time_us > 0:
            row[r.device] = r
    return devices, list(rows.items())


def ratio(first: CaseResult | None, other: CaseResult | None) -> float | None:
    """How many times faster `other` runs than `first` (>1: faster, <1: slower)."""
    if first is None or other is None or other.time_us <= 0:
        return None
    return first.time_us / other.time_us


def md_table(header: list[str], rows: list[list[str]], right: set[int] = frozenset()) -> list[str]:
    """A markdown table padded to line up in a terminal too."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.rjust(w) if i in right else c.ljust(w)
                                 for i, (c, w) in enumerate(zip(cells, widths))) + " |"
    rule = "| " + " | ".join(("-" * (w - 1) + ":") if i in right else "-" * w
                             for i, w in enumerate(widths)) + " |"
    return [line(header), rule, *map(line, rows)]


def side_by_side_lines(run: Run) -> list[str]:
    """Each case's us/run on each device, and each device's speed relative to the first
    (>1: faster than it). Nothing with fewer than two devices."""
    devices, rows = side_by_side(run)
    if len(devices) < 2:
        return []
    base = devices[0]
    header = ["Case", *(f"{d} us/run" for d in devices), *(f"{d} vs {base}" for d in devices[1:])]
    table = []
    for name, by_dev in rows:
        cells = [name]
        for d in devices:
            r = by_dev.get(d)
            cells.append(f"{r.time_us:.2f} ({_rate(r)})" if r else "-")
        for d in devices[1:]:
            x = ratio(by_dev.get(base), by_dev.get(d))
            cells.append(f"{x:.3g}x" if x is not None else "-")
        table.append(cells)
    return ["", f"Side by side: us/run per device; `X vs {base}` = {base}'s time / X's time (>1: X is faster)", "",
            *md_table(header, table, set(range(1, len(header))))]


def write_side_by_side_csv(run: Run, out) -> None:
    """One row per case: each device's us/run, and each device's ratio to the first."""
    devices, rows = side_by_side(run)
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["op", "params"] + [f"{d} us/run" for d in devices]
               + [f"{d} GFLOPS" for d in devices] + [f"{d} GB/s" for d in devices]
               + [f"{d} vs {devices[0]}" for d in devices[1:]])
    for name, by_dev in rows:
        op, _, params = name.partition("(")
        cells = [op, params[:-1]]
        cells += [f"{by_dev[d].time_us:.3f}" if d in by_dev else "" for d in devices]
        cells += [f"{by_dev[d].flops / 1e9:.3f}" if d in by_dev and by_dev[d].flops else "" for d in devices]
        cells += [f"{by_dev[d].bandwidth_gb_s:.3f}" if d in by_dev and not by_dev[d].flops else ""
                  for d in devices]
        for d in devices[1:]:
            x = ratio(by_dev.get(devices[0]), by_dev.get(d))
            cells.append(f"{x:.4f}" if x is not None else "")
        w.writerow(cells)


# --- baseline ----------------------------------------------------------------------------

class PerfBaseline(dict):
    """device -> case name -> us/run; `catalog`: the catalog version of its cases (None
    for a CSV, which does not say)."""
    catalog: str | None = None


def load_perf_baseline(path: str) -> PerfBaseline:
    """A previous perf run: its results JSON, or its per-result CSV (`ops perf --output csv`
    with one device)."""
    text = read_baseline(path, PerfBaselineError)
    out = PerfBaseline()
    if text.lstrip().startswith("{"):
        try:
            json.loads(text)
            run = load_run(path)
        except (json.JSONDecodeError, ValueError) as e:
            raise PerfBaselineError(f"baseline {path}: not a valid ops results file ({e})") from None
        if run.mode != "perf":
            raise PerfBaselineError(f"baseline {path} holds {run.mode} results, not perf results")
        out.catalog = run.catalog
        for r in run.results:
            if r.status == OK and r.time_us > 0:
                out.setdefault(r.device, {})[r.name] = r.time_us
        return out
    rows = list(csv.DictReader(text.splitlines()))
    if not rows or not {"device", "op", "params", "time_us"} <= set(rows[0]):
        raise PerfBaselineError(f"baseline {path} is neither a perf results file (JSON) nor a perf CSV "
                                f"with device, op, params and time_us columns")
    for n, row in enumerate(rows, 2):
        try:
            t = float(row["time_us"] or 0)
        except ValueError:
            raise PerfBaselineError(f"baseline {path}: line {n}: bad time_us {row['time_us']!r}") from None
        if row.get("status", OK) == OK and t > 0:
            out.setdefault(row["device"], {})[f"{row['op']}({row['params']})"] = t
    return out


def baseline_time(run: Run, baseline: PerfBaseline, device: str, name: str) -> float | None:
    """The baseline's us/run of a case of this run: under its name, or, where the
    baseline is of another catalog version (or of an unknown one: a CSV), under the name
    the case has there (cases/renames.py: test-backend-ops renamed it by new params)."""
    base = _baseline_of(baseline, device)
    t = base.get(name)
    if t is not None:
        return t
    for alias in _aliases(run, baseline).get(name, ()):
        if alias in base:
            return base[alias]
    return None


def _aliases(run: Run, baseline: PerfBaseline) -> dict[str, list[str]]:
    key = (id(run), id(baseline))
    if key not in _ALIASES:
        from cannops.cases.renames import aliases
        from cannops.cases.versions import VERSIONS
        catalog = getattr(baseline, "catalog", None)
        others = [catalog] if catalog else list(VERSIONS)
        _ALIASES.clear()
        _ALIASES[key] = aliases({r.name for r in run.results}, run.mode, run.catalog, others)
    return _ALIASES[key]


_ALIASES: dict = {}


def slower_than_baseline(run: Run, baseline: PerfBaseline, threshold_pct: float):
    """device -> case name -> (baseline us/run, change in %) for the cases that now take
    more than threshold_pct % longer. A device absent from a one-device baseline is
    compared with that device (the same machine under another name); a case renamed
    since the baseline's catalog version, under its old name."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for r in run.results:
        if r.status != OK or r.time_us <= 0:
            continue
        base = baseline_time(run, baseline, r.device, r.name)
        if base is None:
            continue
        change = (r.time_us / base - 1.0) * 100.0
        if change > threshold_pct:
            out.setdefault(r.device, {})[r.name] = (base, change)
    return out


def slower_note(slower, threshold_pct: float, default: bool) -> list[str]:
    """For stderr, where stdout holds other tables (--markdown, --output): why the exit
    status is 1, one line per case, and the threshold that applied."""
    n = sum(len(v) for v in slower.values())
    given = "the default --threshold" if default else "--threshold"
    return [f"ops: {plural(n, 'case')} more than {threshold_pct:g}% slower than the baseline "
            f"({given} {threshold_pct:g}), exit status 1:"] + [
        f"ops:   {dev} {name}: {base:.2f} -> {base * (1 + change / 100):.2f} us/run ({change:+.1f}%)"
        for dev, cases in slower.items() for name, (base, change) in cases.items()]


def slower_lines(slower, threshold_pct: float) -> list[str]:
    n = sum(len(v) for v in slower.values())
    if not n:
        return ["", f"No case is more than {threshold_pct:g}% slower than the baseline."]
    rows = []
    for dev, cases in slower.items():
        for name, (base, change) in cases.items():
            rows.append([dev, name, f"{base:.2f}", f"{base * (1 + change / 100):.2f}", f"{change:+.1f}%"])
    return ["", f"{plural(n, 'case')} more than {threshold_pct:g}% slower than the baseline:", "",
            *md_table(["Device", "Case", "Baseline us/run", "Now us/run", "Change"], rows, {2, 3, 4})]


# --- tables to paste and charts ------------------------------------------------------------

def _baseline_of(baseline: PerfBaseline, device: str) -> dict[str, float]:
    """A device's baseline times; a one-device baseline stands for any device (the same
    machine under another name)."""
    base = baseline.get(device)
    if base is None and len(baseline) == 1:
        base = next(iter(baseline.values()))
    return base or {}


def _by_op(rows):
    """[(case name, ...)] grouped by op, in case order."""
    out: dict[str, list] = {}
    for row in rows:
        out.setdefault(row[0].partition("(")[0], []).append(row)
    return out.items()


def _params(name: str) -> str:
    return name.partition("(")[2][:-1]


def markdown_vs_baseline(run: Run, baseline: PerfBaseline) -> list[str]:
    """Per device and op, like llama.cpp's compare scripts: each case's us/run before (the
    baseline) and after (this run), and the speed-up before / after (>1: faster now)."""
    devices, rows = side_by_side(run)
    out = []
    for dev in devices:
        for op, op_rows in _by_op([(name, by_dev[dev]) for name, by_dev in rows if dev in by_dev]):
            table = []
            for name, r in op_rows:
                before = baseline_time(run, baseline, dev, name)
                table.append([_params(name), f"{before:.2f}" if before else "-", f"{r.time_us:.2f}",
                              f"{before / r.time_us:.2f}" if before else "-"])
            out += ["", f"### {op} on {dev}", "",
                    *md_table(["Case", "Before us/run", "After us/run", "Speed-up"], table, {1, 2, 3})]
    return out


def markdown_side_by_side(run: Run) -> list[str]:
    """Per op, each case's us/run and rate on each device, and each device's speed-up over
    the first (its time / theirs)."""
    devices, rows = side_by_side(run)
    first = devices[0] if devices else ""
    out = []
    for op, op_rows in _by_op(rows):
        table = []
        for name, by_dev in op_rows:
            cells = [_params(name)]
            cells += [f"{by_dev[d].time_us:.2f} ({_rate(by_dev[d])})" if d in by_dev else "-" for d in devices]
            for d in devices[1:]:
                x = ratio(by_dev.get(first), by_dev.get(d))
                cells.append(f"{x:.2f}" if x is not None else "-")
            table.append(cells)
        header = ["Case", *(f"{d} us/run" for d in devices), *(f"{d} speed-up over {first}" for d in devices[1:])]
        out += ["", f"### {op}", "", *md_table(header, table, set(range(1, len(header))))]
    return out


PLOT_FORMATS = ("svg", "png", "pdf")


def plot_perf(run: Run, path: str) -> None:
    """GB/s (memory-bound cases) or GFLOPS per case, the devices' bars side by side: one
    panel per unit. Text stays text in an SVG (names can be searched)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    devices, rows = side_by_side(run)
    panels = [(unit, [(n, d) for n, d in rows if d and (unit == "GFLOPS") == any(r.flops for r in d.values())])
              for unit in ("GFLOPS", "GB/s")]
    panels = [p for p in panels if p[1]]
    n_bars = sum(len(r) for _, r in panels)
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, axes = plt.subplots(max(1, len(panels)), 1, squeeze=False,
                                 figsize=(11, 1.5 + 0.25 * max(1, n_bars) * max(1, len(devices))),
                                 height_ratios=[len(r) for _, r in panels] or None)
        for ax, (unit, panel) in zip(axes[:, 0], panels):
            y = np.arange(len(panel))
            h = 0.8 / len(devices)
            for k, dev in enumerate(devices):
                vals = [(d[dev].flops / 1e9 if unit == "GFLOPS" else d[dev].bandwidth_gb_s) if dev in d else 0.0
                        for _, d in panel]
                ax.barh(y + k * h, vals, h, label=dev)
            ax.set_yticks(y + h * (len(devices) - 1) / 2, [n for n, _ in panel], fontsize=7)
            ax.invert_yaxis()
            ax.set_xlabel(unit)
            ax.legend(fontsize=8)
        if not panels:
            axes[0, 0].text(0.5, 0.5, "no case ran", ha="center")
        fig.suptitle("ops perf: " + ", ".join(devices))
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
