"""The numeric blame of a ggml-cann FAIL on the simulated toolkit (`ops tbo`): the case run
once more alone with CANN_SIM_BLAME=1 (tbo.py, `_rerun`), where the simulator in the
binary's process keeps each operator call's inputs and outputs only until it has
evaluated the call again in float64 (backend/cann/sim/blame.py) and framed its own error
after its record; the blame (backend/trace.py) then names the first call out of
tolerance, or says that every call computed what it was asked. Only a FAIL by a check is
run again, never a death (its refused call is its blame) nor a case that passed: the cost
is one case's run, a few times over (docs/trace-and-blame.md)."""
from __future__ import annotations

from typing import Callable

from cannops.backend import callsite
from cannops.backend import trace as calltrace

from .results import FAIL, CaseResult

BLAME_SWITCH = "CANN_SIM_BLAME"
MAX_PER_OP = 20   # FAILs of one op replayed: past them, an op that fails wholesale costs no more


class Replayer:
    """One op's replays, counted: `replayer(r, died, rerun)` is `r`, replayed where `wanted`
    and fewer than MAX_PER_OP were."""

    def __init__(self, simulated: bool):
        self.simulated, self.done = simulated, 0

    def __call__(self, r: CaseResult, died: bool, rerun: Callable[[dict], "tuple | None"]) -> CaseResult:
        if not wanted(self.simulated, r, died):
            return r
        if self.done >= MAX_PER_OP:
            r.blame = f"not replayed: {MAX_PER_OP} FAILs of {r.op} were already"
            return r
        self.done += 1
        return replay(r, rerun)


def wanted(simulated: bool, r: CaseResult, died: bool) -> bool:
    """A FAIL by a check on the simulated toolkit whose calls name no refused one."""
    if not simulated or r.status != FAIL or died or r.blame or r.metric not in ("ERR", "NaN"):
        return False
    return not any(c.get("rc") for c in r.trace)


def replay(r: CaseResult, rerun: Callable[[dict], "tuple | None"]) -> CaseResult:
    """`r` with the blame of its rerun: `rerun(env)` runs the case alone with `env` added and
    gives (its Line, or None where it printed none; its exit status), None if interrupted.
    The rerun's calls, each with its own error, become the trace."""
    got = rerun({BLAME_SWITCH: "1"})
    if got is None:
        return r
    line, rc = got
    if line is None:
        r.blame = f"not replayed: its rerun alone printed no line (exit status {rc})"
        return r
    r.trace = [c for c in line.calls if "args" in c or "cost" not in c]   # (--cost's count-only records)
    callsite.resolve(r.trace)
    again = line.result(r.device)   # the bar is the rerun's error: its calls are judged
    _, r.blame = calltrace.blame(r.trace, again.threshold, again.error)
    if line.status != FAIL:
        r.blame = ("the case passes when run alone (an order- or state-dependent fault)" +
                   (f": {r.blame}" if r.blame else ""))
    return r
