"""What a change did (`ops diff OLD NEW`): two results files compared op by op and case by
case: status, the counted device work (aclnn calls, kernels, bytes, syncs; backend/cost.py),
the estimated device µs where the model is there, and us/run, GB/s, GFLOPS where both runs
measured the case; on the console, in markdown (a CI's step summary) or as csv.

A new command rather than `ops support --baseline`: support's baseline is a status summary
(markdown or results), per op, for the CI's table; this compares two results files case by
case, test or perf runs, from `ops test`, `ops perf` or `ops tbo` alike. An op whose status
differs only because some of its cases are in one run and not the other (an older
test-backend-ops has fewer cases) says so on its own row."""
from __future__ import annotations

import csv
from dataclasses import dataclass, field

from .cost_report import estimate
from .engine import OK, BadInput, Run, load_run
from .support import op_status

COUNTS = ("calls", "kernels", "bytes", "syncs")
MEASURED = ("us/run", "GB/s", "GFLOPS")


def _counts(cost: dict | None) -> dict[str, float | None]:
    if not cost:
        return {k: None for k in (*COUNTS, "est. µs")}
    return {"calls": cost["calls"], "kernels": cost["kernels"], "bytes": cost["bytes_read"] + cost["bytes_written"],
            "syncs": cost["syncs"], "est. µs": estimate(cost)}


def _measured(r) -> dict[str, float | None]:
    """A perf result's figures (None: not measured)."""
    if r is None or r.status != OK or not r.time_us:
        return {k: None for k in MEASURED}
    return {"us/run": r.time_us, "GB/s": r.bandwidth_gb_s or None, "GFLOPS": r.flops / 1e9 if r.flops else None}


@dataclass
class Row:
    """One case, or one op (case ""), in both runs: each figure as (old, new)."""
    op: str
    case: str
    status: tuple[str, str]
    figures: dict[str, tuple] = field(default_factory=dict)
    note: str = ""

    def changed(self) -> bool:
        return self.status[0] != self.status[1] or bool(self.note) or any(
            a != b for a, b in self.figures.values())


def _pair(old: dict, new: dict) -> dict[str, tuple]:
    return {k: (old.get(k), new.get(k)) for k in (*COUNTS, "est. µs", *MEASURED)}


def _device_results(run: Run, device: str | None) -> dict[str, object]:
    names = [d.name for d in run.devices] or sorted({r.device for r in run.results})
    pick = device or (names[0] if names else None)
    return {r.name: r for r in run.results if r.device == pick}


def case_rows(old: dict, new: dict) -> list[Row]:
    rows = []
    for name in sorted(old.keys() | new.keys()):
        a, b = old.get(name), new.get(name)
        op = (a or b).op
        status = (a.status if a else "absent", b.status if b else "absent")
        figures = _pair({**_counts(a.cost if a else None), **_measured(a)},
                        {**_counts(b.cost if b else None), **_measured(b)})
        rows.append(Row(op, name, status, figures))
    return rows


def _sum(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def op_rows(cases: list[Row]) -> list[Row]:
    """Per op: its status in each run, the counts summed over the cases both runs have (and
    measured us/run summed the same way); the note when the status differs only by cases
    one run lacks."""
    ops: dict[str, list[Row]] = {}
    for r in cases:
        ops.setdefault(r.op, []).append(r)
    rows = []
    for op, rs in ops.items():
        both = [r for r in rs if "absent" not in r.status]
        status = (op_status([r.status[0] for r in rs if r.status[0] != "absent"]),
                  op_status([r.status[1] for r in rs if r.status[1] != "absent"]))
        figures = {k: (_sum(r.figures[k][0] for r in both), _sum(r.figures[k][1] for r in both))
                   for k in (*COUNTS, "est. µs", *MEASURED[:1])}
        rows.append(Row(op, "", status, figures, _only_note(rs, both, status)))
    return rows


def _only_note(rs: list[Row], both: list[Row], status: tuple[str, str]) -> str:
    only_old = [r for r in rs if r.status[1] == "absent"]
    only_new = [r for r in rs if r.status[0] == "absent"]
    if not (only_old or only_new):
        return ""
    parts = []
    if only_old:
        parts.append(f"{len(only_old)} case(s) only in OLD ({_tally(r.status[0] for r in only_old)})")
    if only_new:
        parts.append(f"{len(only_new)} case(s) only in NEW ({_tally(r.status[1] for r in only_new)})")
    text = "; ".join(parts)
    common = (op_status([r.status[0] for r in both]), op_status([r.status[1] for r in both]))
    if status[0] != status[1] and common[0] == common[1]:
        text = f"status changes only by cases in one run: {text}; on the {len(both)} in both: {common[0]}"
    return text


def _tally(statuses) -> str:
    counts: dict[str, int] = {}
    for s in statuses:
        counts[s] = counts.get(s, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def diff(old: Run, new: Run, device_old: str | None = None, device_new: str | None = None,
         every: bool = False) -> tuple[list[Row], list[Row]]:
    """(op rows, case rows): the cases that changed (every case with `every`)."""
    cases = case_rows(_device_results(old, device_old), _device_results(new, device_new))
    ops = op_rows(cases)
    if not every:
        cases = [r for r in cases if r.changed()]
    return ops, cases


# --- text -----------------------------------------------------------------------------------

def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if isinstance(v, float) and not v.is_integer():
        return f"{v:.4g}"
    return f"{int(v):d}"


def _cell(pair: tuple) -> str:
    a, b = pair
    if a == b:
        return _num(a)
    delta = ""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        delta = f" ({b - a:+.4g})" if isinstance(b - a, float) else f" ({b - a:+d})"
    return f"{_num(a)} → {_num(b)}{delta}"


def _columns(rows: list[Row]) -> list[str]:
    """The figures any row has, in their order (est. µs and the measured ones only where present)."""
    keys = [*COUNTS, "est. µs", *MEASURED]
    return [k for k in keys if any(r.figures.get(k, (None, None)) != (None, None) for r in rows)]


def table(rows: list[Row], first: str) -> tuple[list[str], list[list[str]]]:
    cols = _columns(rows)
    head = [first, "status", *cols, "note"]
    body = [[r.op if first == "op" else r.case, _cell(r.status), *(_cell(r.figures.get(c, (None, None))) for c in cols),
             r.note] for r in rows]
    return head, body


def console_lines(ops: list[Row], cases: list[Row]) -> list[str]:
    out = []
    for rows, first, title in ((ops, "op", "Per op (counts summed over the cases in both runs)"),
                               (cases, "case", "Per case that changed")):
        if not rows:
            continue
        head, body = table(rows, first)
        widths = [max(len(x) for x in col) for col in zip(head, *body)]
        out += ["", title] + ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in [head, *body]]
    out.append("")
    out.append("est. µs: an estimate from published figures (backend/cann/perf_model.py), not a measurement; "
               "us/run: measured (on the simulator: its host cost)")
    return out


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_lines(ops: list[Row], cases: list[Row]) -> list[str]:
    out = ["### Device work: what changed", ""]
    for rows, first in ((ops, "op"), (cases, "case")):
        if not rows:
            continue
        head, body = table(rows, first)
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(_md_escape(c) for c in line) + " |" for line in body]
        out.append("")
    out.append("_est. µs is an estimate from published figures, not a measurement._")
    return out


def write_csv(ops: list[Row], cases: list[Row], stream) -> None:
    """One line per op and per case: both runs' figures side by side."""
    keys = [*COUNTS, "est. µs", *MEASURED]
    w = csv.writer(stream)
    w.writerow(["op", "case", "status_old", "status_new", *(f"{k}_{s}" for k in keys for s in ("old", "new")),
                "note"])
    for r in (*ops, *cases):
        w.writerow([r.op, r.case, *r.status,
                    *("" if v is None else v for k in keys for v in r.figures.get(k, (None, None))), r.note])


def _devices(devices: str | None) -> list[str | None]:
    names = devices.split(",") if devices else [None, None]
    if len(names) == 1:
        names *= 2
    if len(names) != 2 or not all(n is None or n for n in names):
        raise BadInput(f"-b {devices}: one device, or two separated by a comma")
    return names


def run_diff(old: str, new: str, devices: str | None, every: bool, markdown: bool, output: str,
             stream) -> list[str]:
    """`ops diff`: the two files checked (a bad one is a BadInput), compared; csv written to
    `stream`, or the console / markdown lines returned."""
    if markdown and output != "console":
        raise BadInput(f"--markdown prints the tables: it cannot go with --output {output}")
    runs = []
    for path in (old, new):
        try:
            runs.append(load_run(path))
        except ValueError as e:
            raise BadInput(str(e)) from None
    names = _devices(devices)
    for run, name, path in zip(runs, names, (old, new)):
        if name is not None and name not in {r.device for r in run.results}:
            raise BadInput(f"{path} has no result of device {name}")
    ops, cases = diff(runs[0], runs[1], names[0], names[1], every)
    if output == "csv":
        write_csv(ops, cases, stream)
        return []
    return markdown_lines(ops, cases) if markdown else console_lines(ops, cases)
