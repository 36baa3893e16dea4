"""Per-op support status from case results, per device.

supported: every case ran and passed; partial: some cases not supported, none failed;
fail: any case failed; unsupported: no case supported; unknown: no case ran (only skipped
cases, the device was unavailable, or the op was named by the run's -o but no case of it
was selected).
"""
from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from .engine import DEVIATION, FAIL, NOT_SUPPORTED, OK, SKIPPED, Run

SUPPORTED, PARTIAL, UNSUPPORTED, FAILING, UNKNOWN = "supported", "partial", "unsupported", "fail", "unknown"
ORDER = (SUPPORTED, PARTIAL, FAILING, UNSUPPORTED, UNKNOWN)  # the report's row order

if TYPE_CHECKING:
    from rich.console import Console


def op_status(statuses: list[str]) -> str:
    """supported: every case ran and passed; partial: some not supported, none failed;
    fail: any failed; unsupported: none supported; unknown: no case ran."""
    ran = [s for s in statuses if s in (OK, FAIL, DEVIATION, NOT_SUPPORTED)]
    if not ran:
        return UNKNOWN
    if any(s == FAIL for s in ran):
        return FAILING
    n_unsup = sum(s == NOT_SUPPORTED for s in ran)
    if n_unsup == len(ran):
        return UNSUPPORTED
    return PARTIAL if n_unsup else SUPPORTED


def ci_status(statuses: list[str]) -> str:
    """The status the Ascend CI gives an op, from its cases: the CI classifies the op's log
    by substrings (any "FAIL" -> fail; "OK" and "not supported" -> partial; "OK" alone ->
    supported), and every finished log ends in "OK", so an op with no supported case is
    partial there, and one with no case at all supported. unknown: none of its cases ran."""
    if statuses and all(s == SKIPPED for s in statuses):
        return UNKNOWN
    if FAIL in statuses:
        return FAILING
    return PARTIAL if NOT_SUPPORTED in statuses else SUPPORTED


def per_op(run: Run) -> dict[str, dict[str, list[str]]]:
    """op -> device -> case statuses"""
    table: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for r in run.results:
        table[r.op][r.device].append(r.status)
    return table


def run_devices(run: Run) -> list[str]:
    """The run's devices, then those that only have (skipped) results: unavailable ones."""
    names = [d.name for d in run.devices]
    for r in run.results:
        if r.device not in names:
            names.append(r.device)
    return names


def filter_ops(ops_filter: str | None) -> list[str]:
    """Op names that a -o filter asks for (a full case name counts for its op)."""
    if not ops_filter:
        return []
    from .engine import split_ops_filter
    return [item.split("(", 1)[0].strip() for item in split_ops_filter(ops_filter)]


def run_ops(run: Run) -> list[str]:
    """Every op with a result, and every op the run's -o named: those without results are
    unknown rather than missing from the report."""
    return sorted({r.op for r in run.results} | set(filter_ops(run.ops_filter)))


def device_statuses(run: Run) -> dict[str, dict[str, str]]:
    """device -> op -> status, over every device and op of the run."""
    table = per_op(run)
    ops = run_ops(run)
    return {d: {op: op_status(table.get(op, {}).get(d, [])) for op in ops} for d in run_devices(run)}


def has_failures(run: Run) -> bool:
    return any(s == FAILING for ops in device_statuses(run).values() for s in ops.values())


def evidence_counts(results) -> dict[str, int]:
    """level -> how many of the results' verdicts (supported or not) rest on it, the surest
    level first (backend/cann/evidence.py); results without one are not counted."""
    from cannops.backend.cann.evidence import LEVELS
    counts = {level: 0 for level in LEVELS}
    for r in results:
        if r.evidence in counts and r.status in (OK, FAIL, DEVIATION, NOT_SUPPORTED):
            counts[r.evidence] += 1
    return {level: n for level, n in counts.items() if n}


def evidence_lines(run: Run) -> list[str]:
    """Per device whose verdicts carry an evidence level (a CANN device): how many rest on each."""
    lines = []
    for d in run_devices(run):
        counts = evidence_counts(r for r in run.results if r.device == d)
        if counts:
            lines.append(f"{d} verdicts by evidence: " + ", ".join(f"{n} {level}" for level, n in counts.items()))
    return lines


STYLE = {SUPPORTED: "green", PARTIAL: "yellow", FAILING: "red", UNSUPPORTED: "dim", UNKNOWN: "dim"}


def print_support_table(run: Run, console: Console) -> None:
    """The status of each op on each device: a table on a terminal; piped, plain lines
    (op, then a tab-separated cell per device), as `ops test` prints plain lines."""
    devices = run_devices(run)
    ops = per_op(run)
    counts = {d: defaultdict(int) for d in devices}
    rows = []
    for op in run_ops(run):
        cells = []
        for d in devices:
            st = ops.get(op, {}).get(d, [])
            status = op_status(st)
            counts[d][status] += 1
            ran = [s for s in st if s in (OK, FAIL, DEVIATION, NOT_SUPPORTED)]
            cells.append((status, f"{status} ({sum(s != NOT_SUPPORTED for s in ran)}/{len(ran)})"))
        rows.append((op, cells))
    if console.is_terminal:
        from rich.table import Table
        table = Table(title="Operator support", show_lines=False)
        for head in ("Op", *devices):
            table.add_column(head)
        for op, cells in rows:
            table.add_row(op, *(f"[{STYLE[status]}]{text}[/]" for status, text in cells))
        console.print(table)
    else:
        console.file.write("".join("\t".join((op, *(text for _, text in cells))) + "\n"
                                   for op, cells in [("Op", [(None, d) for d in devices]), *rows]))
    for d in devices:
        c = counts[d]
        console.print(f"{d}: " + ", ".join(f"{c[s]} {s}" for s in ORDER if c[s]))
    for line in evidence_lines(run):
        console.print(line)
    for d, shards in run.missing_shards.items():
        console.print(f"[yellow]partial[/]: {d} lacks shard{'s' if len(shards) > 1 else ''} {', '.join(shards)}")
    if run.interrupted:
        console.print("[yellow]interrupted[/]: partial results")
