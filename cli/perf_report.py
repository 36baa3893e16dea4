"""Perf across devices and against a baseline: several devices side by side with the
speed ratio between them, and the cases that became slower than a previous run."""
from __future__ import annotations

import csv
import json

from .results import OK, CaseResult, Run, load_run
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

PerfBaseline = dict  # device -> case name -> us/run


def load_perf_baseline(path: str) -> PerfBaseline:
    """A previous perf run: its results JSON, or its per-result CSV (`ops perf --output csv`
    with one device)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise PerfBaselineError(f"cannot read baseline {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise PerfBaselineError(f"baseline {path} is not UTF-8 text") from None
    out: PerfBaseline = {}
    if text.lstrip().startswith("{"):
        try:
            json.loads(text)
            run = load_run(path)
        except (json.JSONDecodeError, ValueError) as e:
            raise PerfBaselineError(f"baseline {path}: not a valid ops results file ({e})") from None
        if run.mode != "perf":
            raise PerfBaselineError(f"baseline {path} holds {run.mode} results, not perf results")
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


def slower_than_baseline(run: Run, baseline: PerfBaseline, threshold_pct: float):
    """device -> case name -> (baseline us/run, change in %) for the cases that now take
    more than threshold_pct % longer. A device absent from a one-device baseline is
    compared with that device (the same machine under another name)."""
    out: dict[str, dict[str, tuple[float, float]]] = {}
    for r in run.results:
        if r.status != OK or r.time_us <= 0:
            continue
        base_dev = baseline.get(r.device)
        if base_dev is None and len(baseline) == 1:
            base_dev = next(iter(baseline.values()))
        base = (base_dev or {}).get(r.name)
        if base is None:
            continue
        change = (r.time_us / base - 1.0) * 100.0
        if change > threshold_pct:
            out.setdefault(r.device, {})[r.name] = (base, change)
    return out


def slower_lines(slower, threshold_pct: float) -> list[str]:
    n = sum(len(v) for v in slower.values())
    if not n:
        return ["", f"No case is more than {threshold_pct:g}% slower than the baseline."]
    rows = []
    for dev, cases in slower.items():
        for name, (base, change) in cases.items():
            rows.append([dev, name, f"{base:.2f}", f"{base * (1 + change / 100):.2f}", f"{change:+.1f}%"])
    return ["", f"{n} cases more than {threshold_pct:g}% slower than the baseline:", "",
            *md_table(["Device", "Case", "Baseline us/run", "Now us/run", "Change"], rows, {2, 3, 4})]
