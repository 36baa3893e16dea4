"""The numeric blame of a ggml-cann FAIL on the simulated toolkit (`ops tbo`): the case run
once more alone with CANN_SIM_BLAME=1, where the simulator in the binary's process keeps
each operator call's inputs and outputs only until it has evaluated the call again in
float64 (backend/cann/sim/blame.py) and framed its own error after its record; the blame
(backend/trace.py) then names the first call out of tolerance, or says that every call
computed what it was asked. Only a FAIL by a check is run again, never a death (its
refused call is its blame) nor a case that passed: the cost is one case's run, about
four to five times over (docs/trace-and-blame.md)."""
from __future__ import annotations

from cannops.backend import callsite
from cannops.backend import trace as calltrace

from .results import FAIL, CaseResult
from .tbo import Line, Processes, Reader, TboSpec, _test_file_args, exact_params, is_death

BLAME_SWITCH = "CANN_SIM_BLAME"
OWN_KEYS = ("own_nmse", "floor_nmse", "exact_error")


def replayed_call(calls: list[dict], rec: dict) -> None:
    """A `replay` record: its own error onto the call (of this case) it names by index."""
    k = rec.get("replay")
    for c in reversed(calls):
        if isinstance(k, int) and c.get("i") == k:
            c.update({key: rec[key] for key in OWN_KEYS if isinstance(rec.get(key), (int, float, str))})
            return


def wanted(spec: TboSpec, r: CaseResult) -> bool:
    """A FAIL by a check on the simulated toolkit whose calls name no refused one."""
    if not spec.simulated or r.status != FAIL or is_death(r) or r.blame or r.metric not in ("ERR", "NaN"):
        return False
    return not any(c.get("rc") for c in r.trace)


def replay(spec: TboSpec, procs: Processes, device: str, r: CaseResult) -> CaseResult:
    """`r` with the blame of its rerun (where `wanted`): the rerun's calls, each with its own
    error, as its trace."""
    if not wanted(spec, r):
        return r
    lines: list[Line] = []
    reader = Reader(lambda line: lines.append(line) if line.op == r.op and line.params == r.params else None)
    cmd = [spec.binary, "test", "-b", device, "-o", r.op, "-p", exact_params([r.params])] + \
        _test_file_args(spec.test_file)
    proc = procs.run(cmd, spec.timeout, reader, None, {**spec.environment(), BLAME_SWITCH: "1"})
    if proc.interrupted:
        return r
    if not lines:
        r.blame = f"not replayed: its rerun alone printed no line (exit status {proc.rc})"
        return r
    line = lines[0]
    callsite.resolve(line.calls)
    r.trace = line.calls
    again = line.result(r.device)   # the bar is the rerun's error: its calls are judged
    _, r.blame = calltrace.blame(r.trace, again.threshold, again.error)
    if line.status != FAIL:
        r.blame = ("the case passes when run alone (an order- or state-dependent fault)" +
                   (f": {r.blame}" if r.blame else ""))
    return r
