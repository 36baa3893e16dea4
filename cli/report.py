"""The CI's status report: the per-op summary in markdown, the ops whose status changed
since a baseline, the tail of each changed op's log; and the per-op logs themselves.

The layout is that of the Ascend CI summaries in shared/reference/ci-summary-example-*.md:

    ### Backend Operator Support Summary
    | Operator | Status |            (ordered by status, then by name)
    Tips: ...
    ### Operators with changed status
    | Operator | Previous | Current |  (by name)
    #### OP log (previous -> current)  (one per changed op: the last lines of its log)

With several devices, each device gets its own report block, its headings suffixed with
` (DEVICE)`; a single device's report carries no device name, as the CI's does.
"""
from __future__ import annotations

import io
import json
import os
import re

from . import plural
from .engine import SKIPPED, Run, load_run
from .support import (FAILING, ORDER, PARTIAL, SUPPORTED, UNKNOWN, UNSUPPORTED, ci_status, device_statuses, per_op,
                      run_devices)

SYMBOL = {SUPPORTED: "\u2705", PARTIAL: "\U0001f7e1", FAILING: "\u274c", UNSUPPORTED: "\u2753", UNKNOWN: "\U0001f50d"}
TIPS_WORDS = {SUPPORTED: "supported", PARTIAL: "partially supported", FAILING: "fail",
              UNSUPPORTED: "unsupported", UNKNOWN: "unknown"}
TIPS = "Tips: " + ", ".join(f"{SYMBOL[s]} {TIPS_WORDS[s]}" for s in ORDER)
SUMMARY_HEADING = "### Backend Operator Support Summary"
CHANGED_HEADING = "### Operators with changed status"
RULE_LINE = "Not changes, the CI's classification only"
ABSENT_LINE = "Not in the baseline's report (ops its CI does not run, or newer than its ggml)"
LOG_TAIL_LINES = 120

class Baseline(dict):
    """device name (None: a report without device names) -> op -> status; `run`: the
    results file it was read from (None for a markdown report); `ci_rule`: a markdown
    report whose statuses may be the Ascend CI's substring rule's (it has no ❓: that rule
    never gives one), see support.ci_status."""
    run: Run | None = None
    ci_rule: bool = False


class BaselineError(ValueError):
    """A --baseline file that is neither a support summary nor a results file."""


# --- status tables ---------------------------------------------------------------------

def _suffix(device: str | None) -> str:
    return f" ({device})" if device else ""


def summary_lines(statuses: dict[str, str], device: str | None = None) -> list[str]:
    rank = {s: i for i, s in enumerate(ORDER)}
    lines = [SUMMARY_HEADING + _suffix(device), "", "| Operator | Status |", "| --- | --- |"]
    for op in sorted(statuses, key=lambda op: (rank[statuses[op]], op)):
        lines.append(f"| {op} | {SYMBOL[statuses[op]]} |")
    return lines + ["", TIPS]


def changes(previous: dict[str, str], current: dict[str, str]) -> list[tuple[str, str, str]]:
    """(op, previous, current) for each op of the current report whose status differs; an
    op absent from the baseline was unknown then. Ops only in the baseline are not looked at."""
    out = []
    for op in sorted(current):
        before = previous.get(op, UNKNOWN)
        if before != current[op]:
            out.append((op, before, current[op]))
    return out


def _cell(status: str) -> str:
    return f"{status} ({SYMBOL[status]})"


def changed_lines(changed, logs: dict[str, list[str]], device: str | None = None,
                  tail: int = LOG_TAIL_LINES) -> list[str]:
    lines = [CHANGED_HEADING + _suffix(device), ""]
    if not changed:
        return lines + ["No operator changed status."]
    lines += ["| Operator | Previous | Current |", "| --- | --- | --- |"]
    lines += [f"| {op} | {_cell(a)} | {_cell(b)} |" for op, a, b in changed]
    for op, a, b in changed:
        log = logs.get(op, [])[-tail:]
        fence = "```"
        while any(ln.lstrip().startswith(fence) for ln in log):  # a log line must not close the block
            fence += "`"
        lines += ["", f"#### {op} log ({a} -> {b})", fence + "text", *log, fence]
    return lines


def rule_lines(rule_only, device: str | None = None) -> list[str]:
    """One line for the ops whose status differs from a CI report's only by the CI's rule:
    by that rule, this run's cases give the baseline's status."""
    groups: dict[tuple[str, str], list[str]] = {}
    for op, a, b in rule_only:
        groups.setdefault((a, b), []).append(op)
    return [f"{RULE_LINE}{_suffix(device)}: " + "; ".join(
        f"{', '.join(ops)} ({SYMBOL[a]} there, {SYMBOL[b]} here)" for (a, b), ops in groups.items())
        + f" — {plural(len(rule_only), 'op')} with no supported case, which the CI's substring rule "
          f"calls 🟡 (every finished log ends in \"OK\")."]


def absent_lines(absent: list[str], device: str | None = None) -> list[str]:
    """One line for the ops a CI report does not list (its CI does not run them, or they are
    newer than its ggml): no status there to change from."""
    return [f"{ABSENT_LINE}{_suffix(device)}: {', '.join(absent)} ({plural(len(absent), 'op')})."]


def markdown_report(run: Run, baseline: Baseline | None = None, tail: int = LOG_TAIL_LINES) -> str:
    """The report of a run; with a baseline, the changed-status table and log tails too."""
    statuses = device_statuses(run)
    named = len(statuses) > 1
    blocks = []
    for device, current in statuses.items():
        lines = summary_lines(current, device if named else None)
        if baseline is not None:
            changed = changes(baseline_for(baseline, device, len(statuses)), current)
            rule_only, absent = [], []
            if getattr(baseline, "ci_rule", False):
                cases = per_op(run)
                listed = baseline_for(baseline, device, len(statuses))
                absent = [op for op, _, _ in changed if op not in listed]
                rule_only = [c for c in changed if c[0] in listed
                             and ci_status(cases.get(c[0], {}).get(device, [])) == c[1]]
                changed = [c for c in changed if c not in rule_only and c[0] in listed]
            logs = {op: op_log(run, op, [device]) for op, _, _ in changed}
            lines += [""] + changed_lines(changed, logs, device if named else None, tail)
            if rule_only:
                lines += [""] + rule_lines(rule_only, device if named else None)
            if absent:
                lines += [""] + absent_lines(absent, device if named else None)
            old = getattr(baseline, "run", None)
            if old is not None and old.catalog != run.catalog:
                lines += [""] + catalog_lines(run, old, device, len(statuses))
        blocks.append("\n".join(lines))
    if not blocks:  # nothing ran and nothing was asked for: still a well-formed report
        blocks.append("\n".join(summary_lines({})))
    if run.interrupted:
        blocks.append("Interrupted: these are partial results."
                      + "".join(f" {d} lacks shard{'s' if len(ks) > 1 else ''} {', '.join(ks)}."
                                for d, ks in run.missing_shards.items()))
    return "\n\n".join(blocks) + "\n"


def catalog_lines(run: Run, old: Run, device: str, n_devices: int) -> list[str]:
    """Against results of another catalog version: how the cases line up (the same name,
    renamed by test-backend-ops' new params and compared under the old name, new, gone)
    and which of the cases in both changed status."""
    from cannops.cases.renames import aliases
    mine = {r.name: r for r in run.results if r.device == device}
    devices = {r.device for r in old.results}
    theirs_dev = device if device in devices or n_devices > 1 or len(devices) != 1 else next(iter(devices))
    theirs = {r.name: r for r in old.results if r.device == theirs_dev}
    alias = aliases(mine, run.mode, run.catalog, [old.catalog])
    same = renamed = 0
    matched, changed = set(), []
    for name, r in mine.items():
        if name in theirs:
            other, same = name, same + 1
        else:
            other = next((a for a in alias.get(name, ()) if a in theirs), None)
            if other is None:
                continue
            renamed += 1
        matched.add(other)
        if theirs[other].status != r.status:
            changed.append((name, theirs[other].status, r.status))
    new, gone = len(mine) - same - renamed, len(set(theirs) - matched)
    lines = [f"Catalog {old.catalog} (baseline) -> {run.catalog}: {same} cases under the same name, "
             f"{renamed} renamed (compared under their {old.catalog} names), {new} new, {gone} gone; "
             f"{len(changed)} of the {same + renamed} in both changed status."]
    if changed:
        lines += ["", "| Case | Previous | Current |", "| --- | --- | --- |"]
        lines += [f"| {n} | {a} | {b} |" for n, a, b in changed[:50]]
        if len(changed) > 50:
            lines.append(f"| ... {len(changed) - 50} more | | |")
    return lines


def baseline_for(baseline: Baseline, device: str, n_devices: int) -> dict[str, str]:
    """The baseline statuses of a device: by name; an unnamed report, or a baseline of a
    single device when this report has a single device too, stands for it."""
    if device in baseline:
        return baseline[device]
    if None in baseline:
        return baseline[None]
    if len(baseline) == 1 and n_devices == 1:
        return next(iter(baseline.values()))
    return {}


# --- baselines ---------------------------------------------------------------------------

_HEADING = re.compile(re.escape(SUMMARY_HEADING) + r"(?: \((?P<device>[^)]+)\))?\s*$")
_ROW = re.compile(r"^\|\s*(?P<op>[^|]+?)\s*\|\s*(?P<status>[^|]+?)\s*\|\s*$")
_BY_SYMBOL = {v: k for k, v in SYMBOL.items()}


def parse_summary(text: str, source: str = "baseline") -> Baseline:
    """device -> op -> status from markdown summaries (ours or the CI's)."""
    out = Baseline()
    device, in_table = None, False
    current: dict[str, str] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADING.match(line)
        if m:
            device = m.group("device")
            if device in out:
                raise BaselineError(f"{source}: line {n}: a second summary for {device or 'the device'}")
            current = out[device] = {}
            in_table = False
            continue
        if line.startswith("#"):
            current = None  # another section: its tables are not the summary
            continue
        if current is None:
            continue
        m = _ROW.match(line)
        if not m:
            if in_table and line.strip():
                current = None  # the table ended
            continue
        op, status = m.group("op"), m.group("status")
        if (op, status) == ("Operator", "Status") or set(status) <= set("-: "):
            in_table = True
            continue
        if status not in _BY_SYMBOL:
            raise BaselineError(f"{source}: line {n}: unknown status {status!r} for {op} "
                                f"(expected one of {' '.join(SYMBOL.values())})")
        current[op] = _BY_SYMBOL[status]
    if not out:
        raise BaselineError(f"{source} is neither an ops results file nor a support summary "
                            f"(no '{SUMMARY_HEADING}' heading)")
    out.ci_rule = not any(s == UNSUPPORTED for ops in out.values() for s in ops.values())
    return out


def read_baseline(path: str, error: type[ValueError]) -> str:
    """A baseline file's text (`ops test/perf --baseline`); `error`, in one line, where it
    cannot be read or is not UTF-8."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise error(f"cannot read baseline {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"baseline {path} is not UTF-8 text") from None


def load_baseline(path: str) -> Baseline:
    """A previous report (markdown) or results file (JSON) as device -> op -> status."""
    text = read_baseline(path, BaselineError)
    if text.lstrip().startswith("{"):
        try:
            json.loads(text)
        except json.JSONDecodeError as e:
            raise BaselineError(f"baseline {path} is not valid JSON ({e.msg} at line {e.lineno})") from None
        try:
            old = load_run(path)
            out = Baseline(device_statuses(old))
        except ValueError as e:
            raise BaselineError(f"baseline {e}") from None
        out.run = old
        return out
    return parse_summary(text, f"baseline {path}")


# --- per-op logs -------------------------------------------------------------------------

def op_log(run: Run, op: str, devices: list[str] | None = None, results=None) -> list[str]:
    """An op's log: its case lines and summaries, as `ops test -o OP` prints them (the
    console printer writes them, so they are the very lines of the console). `results`:
    the op's results, when the caller has them at hand."""
    from .printers import ConsolePrinter, make_console
    from .engine import device_passed
    buf = io.StringIO()
    printer = ConsolePrinter(run.mode, make_console(buf))
    names = devices if devices is not None else run_devices(run)
    info = {d.name: d for d in run.devices}
    printer.start(len(names))
    n_ok = 0
    for i, name in enumerate(names):
        rs = sorted((r for r in (results if results is not None else run.results)
                     if r.op == op and r.device == name), key=lambda r: r.index)
        if name not in info:  # a device that never started: its cases were skipped
            why = next((r.reason for r in rs if r.reason), "device unavailable")
            printer.device_skipped(i, len(names), name, why)
            continue
        printer.device_start(i, len(names), info[name], len(rs))
        _print_cases(printer, rs)
        ok = device_passed(rs)
        n_ok += ok
        printer.device_end(name, rs, ok)
    printer.end(n_ok, len(names))
    return buf.getvalue().splitlines()


def _print_cases(printer, rs) -> None:
    """The case lines; a run of cases not run for one reason (ops tbo: an op's cases after
    its --max-aborts deaths) as its first line and a count, so a log's tail still shows
    what happened before them."""
    i = 0
    while i < len(rs):
        j = i
        while j < len(rs) and rs[j].status == SKIPPED and rs[j].reason == rs[i].reason:
            j += 1
        printer.case(rs[i])
        if j - i > 2:
            printer.line(f"  ... and {j - i - 1} more cases the same")
            i = j
        else:
            i += 1


def log_file_name(op: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", op) + ".log"


def write_logs(run: Run, directory: str) -> list[str]:
    """One log per op in `directory` (OP.log); returns the paths."""
    os.makedirs(directory, exist_ok=True)
    by_op: dict[str, list] = {}
    for r in run.results:
        by_op.setdefault(r.op, []).append(r)
    paths = []
    for op in sorted(by_op):
        path = os.path.join(directory, log_file_name(op))
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(op_log(run, op, results=by_op[op])) + "\n")
        paths.append(path)
    return paths


def write_if_changed(path: str, text: str) -> bool:
    """Replace the file's content with `text` unless it holds exactly that already (its
    time stamp then stays). Written in place: a CI's step-summary file keeps its inode."""
    try:
        if os.path.isfile(path):  # not a FIFO or a device: /dev/full reads forever
            with open(path, encoding="utf-8") as f:
                if f.read() == text:
                    return False
    except (OSError, UnicodeDecodeError):
        pass
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return True
