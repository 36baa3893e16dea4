"""The device part of `ops repro`, in a process of its own: a device that kills its process
(ggml-cann's GGML_ABORT on a refused aclnn call) takes that process down, not ops, and what
the run had before its compute (inputs, reference, the recorded graph) reaches ops first,
so the program is still written, with the death as what it must show."""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from typing import Any

from .selection import BadInput

OUTPUT_TAIL = 40   # lines of the dead process's output kept for the README
BRIDGE = "cannops.native._ggml"   # the cffi bridge to ggml


@dataclass
class CaseRun:
    """One case as it ran: its graph, inputs, checked nodes, reference, outputs, verdict."""
    case: Any                           # the catalog's Case
    graph: object
    inputs: dict
    check: list[int]
    expected: dict
    program: object
    result: object
    calls: list = field(default_factory=list)


@dataclass(frozen=True)
class Death:
    """How the device's process ended in the last case that ran (the one the program must
    see die): its exit code (negative: the signal), the line that says why (ggml-cann's
    `CANN error:` line, the simulator's refusal, else the last line), its output's tail."""
    exitcode: int
    message: str
    output: str

    @property
    def expected(self) -> str:
        """What the program looks for in the output: the message up to its first device
        address (an address of this run, not of the next)."""
        return self.message.split("0x", 1)[0].rstrip(" [(")


def device_runs(device_name: str, cases: list, graphs: list, seed: int, say,
                names: tuple[tuple[str, str], ...] = ()) -> tuple[list[CaseRun], Death | None]:
    """Each case run once on the device, in order, in a child process (the last one's
    tensors renamed by `names`); the runs that ended, then the one the child died in (its
    program as built, no outputs) and how it died."""
    ctx = mp.get_context("spawn")      # a device runtime (ACL, CUDA, the simulator) is not forked
    conn, child_conn = ctx.Pipe()
    with tempfile.TemporaryDirectory(prefix="ops-repro-") as tmp:
        log = os.path.join(tmp, "output")    # a spawned child inherits no descriptor: a path
        bridge = getattr(sys.modules.get(BRIDGE), "__file__", None)
        child = ctx.Process(target=_child, args=(child_conn, device_name, [c.name for c in cases], seed, log,
                                                 bridge, names), daemon=True)
        child.start()
        child_conn.close()
        try:
            runs, pending = _receive(conn, cases, graphs, say)
        finally:
            child.join()
        output = open(log, "rb").read().decode(errors="replace") if os.path.exists(log) else ""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    if pending is None and len(runs) < len(cases):     # it died before its first case, or between two
        raise BadInput(f"the device's process ended ({_how(child.exitcode)}) before running "
                       f"{cases[len(runs)].name}, no reproducer written" + (f": {lines[-1]}" if lines else ""))
    if pending is None:
        return runs, None
    if pending.program is None or child.exitcode == 0:
        raise BadInput(f"{pending.case.name} on {device_name}: the run died ({_how(child.exitcode)}) before "
                       f"its graph was recorded, no reproducer written" + (f": {lines[-1]}" if lines else ""))
    say("\n".join(lines[-OUTPUT_TAIL:]))
    assert child.exitcode is not None   # joined
    return runs + [pending], Death(child.exitcode, _why(lines), "\n".join(lines[-OUTPUT_TAIL:]))


def _receive(conn, cases: list, graphs: list, say) -> tuple[list[CaseRun], CaseRun | None]:
    """The child's messages until it ends: the finished runs, and the one it was in when
    its pipe closed (None when it said it had finished)."""
    runs: list[CaseRun] = []
    pending: CaseRun | None = None
    while True:
        try:
            kind, *body = conn.recv()
        except EOFError:
            return runs, pending
        if kind == "say":
            say(body[0])
        elif kind in ("unsupported", "error"):
            raise BadInput(body[0])
        elif kind == "prepared":      # inputs, check, expected: before the device runs it
            k = len(runs)
            inputs, check, expected = body
            pending = CaseRun(cases[k], graphs[k], inputs, check, expected, program=None, result=None)
        elif kind == "built":         # the program, before the compute
            assert pending is not None, "a program built before its case was prepared"
            pending.program = body[0]
        elif kind == "ran":
            assert pending is not None, "a case ran before it was prepared"
            pending.program, pending.result, pending.calls = body
            runs.append(pending)
            pending = None
        elif kind == "end":
            return runs, None


def _why(lines: list[str]) -> str:
    for start in ("CANN error: ", "CANN-SIM refused: "):
        # (ggml-cann's second aclInit is refused at every start, before any case: not a cause)
        said = [line.strip() for line in lines if line.strip().startswith(start) and "only once per process" not in line]
        if said:
            return said[-1]
    return lines[-1].strip() if lines else ""


def _how(exitcode: int | None) -> str:
    from .tbo_console import death_story
    return death_story(exitcode, []).split(":", 1)[0]


# ------------------------------------------------------------------ child ----

def _child(conn, device_name: str, names: list[str], seed: int, log: str, bridge: str | None,
           renames: tuple = ()) -> None:
    """The child: its output into the log (ops' stdout stays ops'), no backtrace by gdb
    (ggml's abort would attach one, slowly), ops' ggml bridge, then the cases, each
    reported as it goes."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for std in (1, 2):
        os.dup2(fd, std)
    os.close(fd)
    if bridge:
        _use_bridge(bridge)
    os.environ["GGML_NO_BACKTRACE"] = "1"
    try:
        _run_all(conn, device_name, names, seed, renames)
    except BadInput as e:
        conn.send(("error", str(e)))
    except Exception as e:          # a bug: one line to ops, the traceback in the log
        traceback.print_exc()
        conn.send(("error", f"ops repro: the device run raised {type(e).__name__}: {e}"))
    conn.close()


def case_named(name: str):
    """The case of a whole case name; any other name is BadInput."""
    from .selection import select_cases
    if "(" not in name:
        raise BadInput(f"ops repro takes whole case names, e.g. 'ABS(type=f32,ne_a=[128,2,2,2],v=0)', not {name!r}")
    picked = [c for _, c in select_cases("test", name)]
    if len(picked) != 1:
        raise BadInput(f"no test case named {name!r}")
    return picked[0]


def renamed(graph, names: tuple[tuple[str, str], ...]):
    """The graph with its tensors named LEAF given NAME (ops repro --name): ggml-cann treats
    a tensor named like a model weight (blk.0.attn_q.weight) otherwise."""
    known = {t.name for t in graph.tensors if t.name}
    for old, new in names:
        if old not in known:
            raise BadInput(f"--name {old + '=' + new!r}: the compared case has no tensor named {old!r} "
                           f"(it has {', '.join(sorted(known)) or 'none'})")
        for t in graph.tensors:
            if t.name == old:
                t.name = new
    return graph


def _use_bridge(path: str) -> None:
    """The ggml bridge module ops runs on (one built against another ggml prefix may have
    been loaded from its own file), in place of the one an import would find."""
    import importlib.util
    spec = importlib.util.find_spec(BRIDGE)
    if spec is not None and spec.origin and os.path.samefile(spec.origin, path):
        return
    spec = importlib.util.spec_from_file_location(BRIDGE, path)
    if spec is None or spec.loader is None:
        raise BadInput(f"{path}: not a module Python can load")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[BRIDGE] = module


def _run_all(conn, device_name: str, names: list[str], seed: int, renames: tuple = ()) -> None:
    from cannops.backend.base import open_device
    cases = [case_named(n) for n in names]
    device = open_device(device_name)
    try:
        graphs = [c.build() for c in cases]
        renamed(graphs[-1], renames)
        for case, g in zip(cases, graphs):
            s = device.supports(case, g)
            if not s:
                conn.send(("unsupported", f"{case.name} is not supported on {device_name}: {s.reason}"))
                return
        for k, (case, g) in enumerate(zip(cases, graphs)):
            conn.send(("ran", *_run(device, case, g, seed, k == len(cases) - 1, conn)))
    finally:
        device.close()
    conn.send(("end",))


def _run(device, case, graph, seed: int, last: bool, conn) -> tuple:
    """One case on the device, recorded: its program, verdict and calls (what it had before
    the compute sent ahead: prepared, built)."""
    from cannops.backend.base import DeviceError, RunResult
    from .execute import NO_HYGIENE, _blame, _judge, _reference, _Runner, check_indices
    from .results import FAIL, CaseResult
    conn.send(("say", f"running {case.name} on {device.name}" + ("" if last else " (before the last)")))
    inputs = case.init_inputs(graph, seed)
    check = check_indices(graph)
    expected, _ = _reference(case, graph, inputs, check, seed, None)
    conn.send(("prepared", inputs, check, expected))
    with _sim_trace(device) as calls:
        try:
            program = device.run_recorded(case, graph, inputs, check, built=lambda p: conn.send(("built", p)))
        except DeviceError as e:
            raise BadInput(f"{case.name} on {device.name}: the run raised, no reproducer written: {e}") from None
    if getattr(program, "error", ""):
        result = CaseResult(device=device.name, op=case.op, params=case.vars, status=FAIL, reason=program.error,
                            threshold=case.family.threshold(case.params))
    else:
        got = RunResult(program.outputs, [])
        result, _ = _judge(device, case, graph, check, expected, got, False)
        if last and result.status == FAIL and device.can_trace:
            _blame(_Runner(device, case, graph, inputs, check, NO_HYGIENE), got, result)   # which call, for the README
    return program, result, getattr(program, "calls", None) or calls


@contextlib.contextmanager
def _sim_trace(device):
    """A ggml device over the simulated toolkit (GGML-CANN0 on CANN-SIM): the simulator in
    this process records ggml-cann's calls. Others: nothing (a CANN device records its own)."""
    trace = sys.modules.get("cannops.backend.cann.sim.trace")
    calls: list = []
    if not device.name.startswith("GGML-") or trace is None or trace.ON:
        yield calls
        return
    trace.start()
    try:
        yield calls
    finally:
        calls.extend(trace.stop().calls)
