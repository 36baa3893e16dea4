"""What a worker does with one case on one device: test, support probe or perf.

Runs inside a worker process (engine/worker.py), so that a crash or a hang in native code
costs one case, not the run.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cannops.backend import reference
from cannops.backend import trace as calltrace
from cannops.backend.base import Device, DeviceError, GradUnsupported, TracedError
from cannops.backend.hygiene import NONE as NO_HYGIENE
from cannops.backend.hygiene import Hygiene, unwritten_reason
from cannops.cases.catalog import Case, StaleName, find_deviation
from cannops.cases.versions import current

from .compare import bit_difference, compare, worst_elements
from .perf_measure import measure
from .strict import bound as strict_bound
from .strict import check as strict_check
from .results import DEVIATION, FAIL, NOT_SUPPORTED, OK, SKIPPED, CaseResult
from .context import IN_PROCESS, WorkerContext
from .spec import RunSpec


HOST_WORK_ELEMENTS = 1 << 25
REJECTED = "rejected"   # _reference: a cache entry was there and failed its checks


def _apart(g, ctx: WorkerContext):
    """What a case's own work runs in: the worker's host work for a big case, else nothing."""
    big = sum(t.nelements() for t in g.leaves) >= HOST_WORK_ELEMENTS
    return ctx.host_work if big else contextlib.nullcontext


def _result(device: Device, case: Case, status: str, **kw) -> CaseResult:
    return CaseResult(device=device.name, op=case.op, params=case.vars, status=status, **kw)


def check_indices(graph) -> list[int]:
    """Tensors compared with the reference: every op node but views, or the fused output."""
    if graph.check_nodes is not None:
        return [t.index for t in graph.check_nodes]
    return [t.index for t in graph.nodes() if not t.is_view()]


def support(device: Device, case: Case) -> CaseResult:
    (status, reason, evidence), = probe(device, case)
    return _result(device, case, status, reason=reason, evidence=evidence)


def probe(device: Device, case: Case, other_probers: tuple = ()) -> list[tuple[str, str, str]]:
    """(status, reason, evidence) of the device and of each of other_probers (what decides another device's
    support without it: backend.base.open_prober) for the case, whose graph is built once;
    an error is that device's FAIL. `case`: a Case or a reference to one."""
    try:
        case = case.resolve()
        g = case.build()
    except StaleName as e:
        return [(SKIPPED, f"not a case of the catalog ({e})", "")] * (1 + len(other_probers))
    except Exception as e:
        return [(FAIL, f"error: {type(e).__name__}: {e}", "")] * (1 + len(other_probers))
    out = []
    for d in (device, *other_probers):
        try:
            s = d.supports(case, g)
            out.append((OK if s else NOT_SUPPORTED, s.reason, s.evidence))
        except Exception as e:
            out.append((FAIL, f"error: {type(e).__name__}: {e}", ""))
    return out


# A FAIL's replay keeps every call's data and evaluates each again in float64: about four
# to five times the run on CANN-SIM (docs/trace-and-blame.md). It is skipped where that
# would not fit in what is left of the case's timeout.
REPLAY_COST = 6


@dataclass(frozen=True)
class CaseOptions:
    """What test() takes of the run for each case, made once per device from its RunSpec
    (`of`); the defaults are a plain `ops test`'s."""
    seed: int = 0
    strict: bool = False                # the per-element bound too (cli/engine/strict.py)
    ref_cache: str | None = None        # the reference cache's directory (None: off)
    trace: bool = False                 # every case's calls, on a device that traces them
    cost: bool = False                  # a counted case's per-call records kept (backend/cost.py)
    timeout: float | None = None        # seconds the case may take (None: no limit)
    hygiene: Hygiene = NO_HYGIENE       # outputs poisoned, inputs compared (docs/hygiene.md)
    repeat: int = 1                     # runs that must agree bit for bit

    @classmethod
    def of(cls, spec: RunSpec, device: str) -> CaseOptions:
        return cls(spec.seed, spec.strict, spec.ref_dir, spec.trace, spec.cost, spec.case_timeout(device),
                   Hygiene(spec.poison, spec.check_inputs), spec.repeat)


def test(device: Device, case: Case, opts: CaseOptions = CaseOptions(),
         ctx: WorkerContext = IN_PROCESS) -> CaseResult:
    """NMSE (the family's metric) on every checked node, and what `opts` asks besides. On
    a device that traces its calls, a FAIL is run again with each call's data kept, for
    its trace and its blame (`_blame`), where the case's timeout leaves time for it."""
    t0 = time.perf_counter()
    g = case.build()
    s = device.supports(case, g)
    if not s:
        return _result(device, case, NOT_SUPPORTED, reason=s.reason, evidence=s.evidence)
    for n in g.nodes():
        why = reference.unsupported(n)
        if why:
            return _result(device, case, NOT_SUPPORTED, reason=why, by=reference.NAME)
    with ctx.memory_turn(tensor_bytes(g)):
        result = _tested(device, case, g, opts, ctx, t0)
    if result.by != reference.NAME:
        result.evidence = s.evidence
    return result


def tensor_bytes(g) -> int:
    """Bytes of the graph's tensors that own memory (leaves and op nodes, not views)."""
    return sum(t.nbytes() for t in g.tensors if t.view_src is None)


def _tested(device: Device, case: Case, g, opts: CaseOptions, ctx: WorkerContext, t0: float) -> CaseResult:
    """test() of a case the device and the reference support."""
    check = check_indices(g)
    apart = _apart(g, ctx)
    repeat, timeout = opts.repeat, opts.timeout
    with apart():
        inputs = _inputs(case, g, opts.seed, opts.ref_cache, ctx)
        ctx.phase("inputs", inputs.values())
        try:
            expected, cached = _reference(case, g, inputs, check, opts.seed, opts.ref_cache)
        except NotImplementedError as e:
            return _result(device, case, NOT_SUPPORTED, reason=str(e), by=reference.NAME)
        ctx.phase("reference", (a for ref, srcs in expected.values() for a in (ref, *srcs)))
    run = _Runner(device, case, g, inputs, check, opts.hygiene)
    t_run = time.perf_counter()
    try:
        got = run(traced=opts.trace and device.can_trace)
        if repeat > 1:
            got.problems += _repeats(run, got, repeat)
    except DeviceError as e:
        result = _result(device, case, FAIL, reason=str(e))
        if isinstance(e, TracedError):
            result.trace = e.calls
        elif device.can_trace and device.is_cpu and _fits(1, t0, time.perf_counter() - t_run, timeout):
            # run again traced: on the host (CANN-SIM), never on an NPU an error may have wedged
            result.trace = _calls_again(run)
        result.blame = calltrace.blame(result.trace, None, None)[1]
        result.seconds = time.perf_counter() - t0
        return result
    t_run = (time.perf_counter() - t_run) / repeat
    ctx.phase("run", (got.outputs[i] for i in check))
    got.problems[:0] = [why for i, left in got.unwritten.items()
                        if (why := unwritten_reason(g.tensors[i], left, expected[i][0]))]
    with apart():
        result, metric_ok = _judge(device, case, g, check, expected, got, opts.strict)
    ctx.phase("judge")
    if opts.hygiene and not run.hygienic:
        result.note = "; ".join(filter(None, [result.note, f"{device.name} does not poison outputs nor "
                                                         f"compare inputs (docs/hygiene.md)"]))
    result.trace = got.calls or []
    result.cost = got.cost
    if got.cost and not opts.cost:
        got.cost.pop("per_call", None)
    if result.status == FAIL and device.can_trace:
        if metric_ok:
            _trace_only(run, result)
        elif _fits(REPLAY_COST, t0, t_run, timeout):
            _blame(run, got, result)
        else:
            result.blame = (f"not replayed: its run took {t_run:.0f} s, the replay would take about "
                            f"{REPLAY_COST}x that (give it a longer --timeout)")
    result.seconds = time.perf_counter() - t0
    # the device's compute call of run 1, where the device times it apart, else its whole run
    result.device_seconds = t_run if got.compute_seconds is None else got.compute_seconds
    result.ref_cached = cached is True
    result.ref_rejected = cached == REJECTED
    return result


class _Runner:
    """One case's runs on a device, all on the same inputs, with the hygiene modes the
    device honours (a device without them, such as NUMPY or FAULTY, is run without)."""

    def __init__(self, device: Device, case: Case, g, inputs: dict, check: list[int], hygiene: Hygiene):
        self.device, self.case, self.g, self.inputs, self.check = device, case, g, inputs, check
        self.hygienic = getattr(device, "hygienic", False)
        self.kw: dict[str, Any] = {"hygiene": hygiene} if hygiene and self.hygienic else {}

    def __call__(self, traced: bool = False, data: bool = False):
        args = (self.case, self.g, self.inputs, self.check)
        if traced or data:
            return self.device.run_traced(*args, data=data, **self.kw)
        return self.device.run(*args, **self.kw)


def _repeats(run: _Runner, got, repeat: int) -> list[str]:
    """--repeat: runs 2..repeat of the case, each required to give run 1's outputs bit for
    bit; the first run that does not, its first differing element per node (and what the
    device's own checks found in it that they had not found in run 1)."""
    for k in range(2, repeat + 1):
        again = run()
        diffs = [f"[{run.g.tensors[i].op_desc}] run {k} of {repeat} differs from run 1: {d}"
                 for i in run.check if (d := bit_difference(got.outputs[i], again.outputs[i]))]
        diffs += [p for p in again.problems if p not in got.problems]
        if diffs:
            return diffs
    return []


def _fits(runs: float, t0: float, t_run: float, timeout: float | None) -> bool:
    """Whether `runs` more runs of t_run seconds fit in what is left of the case's timeout."""
    return timeout is None or time.perf_counter() - t0 + runs * t_run < 0.8 * timeout


def _calls_again(run: _Runner) -> list[dict]:
    """The calls of a run that raised, from a traced run of the same inputs."""
    try:
        run(traced=True)
    except TracedError as e:
        return e.calls
    except DeviceError:
        return []
    return [{"call": "(trace)", "note": "the traced run did not fail"}]


def _trace_only(run: _Runner, result: CaseResult) -> None:
    """A FAIL whose every output is within the family's metric: a hygiene mode's or
    --strict's. The blame judges each call by that metric, so its replay could only say
    that no call is out of tolerance: the calls of one traced run (without their data)
    are kept, where the run was not traced already, and no replay is made."""
    if not result.trace:
        try:
            result.trace = run(traced=True).calls or []
        except DeviceError as e:
            result.trace = getattr(e, "calls", [])
    result.blame = ""


def _blame(run: _Runner, got, result: CaseResult) -> None:
    """A FAIL's trace and blame: the case run again with every call's inputs and outputs
    kept, each call evaluated again in float64 (backend/cann/sim/blame.py), and the first
    call out of tolerance named (backend/trace.py)."""
    try:
        again = run(data=True)
    except DeviceError as e:
        result.trace = getattr(e, "calls", result.trace)
        result.blame = f"the traced run raised: {e}"
        return
    result.trace = again.calls or []
    same = all(np.array_equal(got.outputs[i], again.outputs[i], equal_nan=True) for i in run.check)
    _, result.blame = calltrace.blame(result.trace, result.threshold, result.error)
    if not same:
        result.blame = ("the traced run's outputs differ from the run's (an order- or "
                        "state-dependent fault): " + result.blame).rstrip(": ")


def _judge(device: Device, case: Case, g, check: list[int], expected: dict, got,
           strict: bool) -> tuple[CaseResult, bool]:
    """A test's result from the device's outputs and the reference's, and whether every
    checked output is within the family's metric (a FAIL then is --strict's or the
    device's own problems': a hygiene mode's, a guard overwritten)."""
    fam = case.family
    threshold = fam.threshold(case.params)
    reasons, worst, elems, metric_ok = list(got.problems), None, None, True
    far: list = []
    for i in check:
        node = g.tensors[i]
        ref, srcs = expected[i]
        err = fam.err
        err_fn = (lambda r, o: err(r, o, case.params, *srcs)) if err else None
        label = f"[{node.op_desc}]"
        ok, why, e = compare(label, ref, got.outputs[i], threshold, err_fn, fam.err_name, device.name)
        if e is not None:
            worst = e if worst is None else max(worst, e)
        if not ok:
            reasons.append(why)
            metric_ok = False
        if strict and fam.err is None:   # a family's own metric (sets, ties) stays its judge
            s = strict_check(label, ref, got.outputs[i], strict_bound(case, device.implements, node), device.name)
            if elems is None or elems.ok and (not s.ok or s.max_abs > elems.max_abs):
                elems = s   # the first node that failed, else the one with the largest error
            if not s.ok and ok:
                reasons.append(s.reason)
            ok = ok and s.ok
        if not ok:
            far = far or worst_elements(ref, got.outputs[i])
    dev = find_deviation(fam.notes, device.implements, case.params, worst)
    if dev and dev.holds and reasons:
        beyond = [held for i in check if (held := dev.holds(got.outputs[i], case.params, *expected[i][1]))]
        if beyond:
            dev = None
            reasons += beyond
    note = dev.reason if dev else ""
    status = OK
    if reasons:
        # a recorded deviation explains a metric miss, never a NaN, inf or overrun
        metric_only = not got.problems and all(f"{fam.err_name} =" in r or "strict:" in r for r in reasons)
        status = DEVIATION if dev and metric_only else FAIL
    extra = {} if elems is None else dict(max_abs=elems.max_abs, max_rel=elems.max_rel,
                                          worst_index=elems.worst)
    return _result(device, case, status, reason="; ".join(reasons), error=worst, threshold=threshold,
                   metric=fam.err_name, note=note, strict=strict, worst=far, **extra), metric_ok


def inputs_cached(case: Case, seed: int, ref_cache: str | None) -> tuple[Path, dict] | None:
    """The cache entry of the case's inputs (cli/engine/refcache.py: kept where making them
    costs more than reading them back), and its key; None without a cache."""
    if not ref_cache:
        return None
    from . import refcache
    args = (case.family.version or current(), case.name, seed, "inputs")
    return refcache.entry_path(Path(ref_cache), *args), refcache.entry_key(*args)


def _inputs(case: Case, g, seed: int, ref_cache: str | None, ctx: WorkerContext = IN_PROCESS,
            distinct_rows: int | None = None) -> dict:
    """The case's inputs: from the cache where kept there (cli/engine/refcache.py), else made
    (`distinct_rows`: cases/inputs.py init_leaf, for perf only: never cached)."""
    ctx.prepare_inputs(case, seed, ref_cache)
    entry = inputs_cached(case, seed, ref_cache)
    if entry is None or distinct_rows is not None:
        return case.init_inputs(g, seed, distinct_rows)
    from . import refcache
    inputs, _ = refcache.load(*entry)
    if inputs is not None and set(inputs) == {t.index for t in g.leaves}:
        return inputs
    from cannops.cases.tables import quantizer_table
    t0 = time.perf_counter()
    inputs = case.init_inputs(g, seed)
    # kept where drawing (and quantizing) took longer than a read would: a warm run then
    # draws nothing (MUL_MAT q4_K 4096 x 1024: 0.8 s to quantize, 3 ms to read); always
    # where a costly table is behind them: it took seconds to build
    seconds = float("inf") if quantizer_table(case.vars) else time.perf_counter() - t0
    refcache.store(entry[0], entry[1], inputs, seconds)
    return inputs


def _reference(case: Case, g, inputs, check: list[int], seed: int, ref_cache: str | None):
    """{checked node index: (reference values, source values for a metric that takes
    them)}, from the reference cache (cli/engine/refcache.py) or computed (and kept there); and
    whether it came from the cache: True, False (computed), or REJECTED (an entry was there
    that was not this case's reference, or not whole: computed)."""
    path = None
    cached: bool | str = False   # True, False or REJECTED
    if ref_cache:
        from . import refcache
        args = (case.family.version or current(), case.name, seed)
        path, key = refcache.entry_path(Path(ref_cache), *args), refcache.entry_key(*args)
        refs, found = refcache.load(path, key)
        if refs is not None and set(refs) == set(check) and all(
                refs[i][0].size == g.tensors[i].nelements() for i in check):
            return refs, True
        cached = REJECTED if found else False
    t0 = time.perf_counter()
    mem = reference.compute(g, inputs)
    refs = {i: (mem.read(g.tensors[i]), [mem.read(s) for s in g.tensors[i].src] if case.family.err_srcs else [])
            for i in check}
    if path is not None:
        refcache.store(path, key, refs, time.perf_counter() - t0)
    return refs, cached


def not_gradable(graph) -> str | None:
    """test-backend-ops' reasons for taking no gradients of a case (None: it can)."""
    if graph.out.type.name != "f32":
        return f"{graph.out.name or graph.out.op_desc}->type != FP32"
    params = graph.params()
    if not params:
        return graph.out.op_desc          # the family marks no parameter: no backward
    for t in params:
        if t.type.name != "f32":
            return f"{t.name}->type != FP32"
    return None


def mean_abs_asymmetry(numeric: np.ndarray, analytic: np.ndarray, expect=(),
                       defined_only: bool = False) -> float:
    """test-backend-ops' gradient error: the mean of |(a - b) / (a + b)| over the elements
    (numeric a, backprop b); with `expect`, only where a is within 1e-3 of one of those
    values (non-smooth ops such as ReLU). An element where both are 0 makes the mean NaN
    there, and a NaN error passes its check (`err > max` is false): kept, so that statuses
    match; `defined_only` leaves such elements out instead (for the report)."""
    a, b = np.asarray(numeric, np.float64), np.asarray(analytic, np.float64)
    if len(expect):
        keep = np.any(np.abs(a[:, None] - np.asarray(expect)[None, :]) < 1e-3, axis=1)
        a, b = a[keep], b[keep]
    if defined_only:
        keep = (a + b) != 0
        a, b = a[keep], b[keep]
    if a.size == 0:
        return float("nan")
    with np.errstate(all="ignore"):
        return float(np.mean(np.abs((a - b) / (a + b))))


def grad(device: Device, case: Case, seed: int, ctx: WorkerContext = IN_PROCESS) -> CaseResult:
    """test-backend-ops' gradient mode: backprop against finite differences, per parameter."""
    t0 = time.perf_counter()
    g = case.build()
    why = not_gradable(g)
    if why:
        return _result(device, case, NOT_SUPPORTED, reason=why)
    s = device.supports(case, g)
    if not s:
        return _result(device, case, NOT_SUPPORTED, reason=s.reason, evidence=s.evidence)
    fam, p = case.family, case.params
    n_grads = sum(t.nelements() for t in g.params())
    if n_grads > fam.grad_nmax:
        return _result(device, case, SKIPPED, reason=f"skipping large tensors for speed "
                                                      f"({n_grads} gradients > {fam.grad_nmax})")
    inputs = _inputs(case, g, seed, None, ctx)
    try:
        grads = device.grad(case, g, inputs)
    except GradUnsupported as e:
        return _result(device, case, NOT_SUPPORTED, reason=str(e))
    except DeviceError as e:
        return _result(device, case, FAIL, reason=str(e), seconds=time.perf_counter() - t0)
    threshold = fam.grad_setting("max_maa", p)
    expect = fam.grad_setting("grad_expect", p)
    reasons, notes, worst, nonfinite = [], [], 0.0, False
    for pg in grads:
        bad = np.flatnonzero(~np.isfinite(pg.analytic))
        if bad.size:
            reasons.append(f"[{pg.name}] gradient[{bad[0]}] = {pg.analytic[bad[0]]} is not finite")
            nonfinite = True
            continue
        err = mean_abs_asymmetry(pg.numeric, pg.analytic, expect)
        if np.isnan(err):
            # test-backend-ops passes a NaN error: say so, with the error where it is defined
            err = mean_abs_asymmetry(pg.numeric, pg.analytic, expect, defined_only=True)
            rest = "no other elements" if np.isnan(err) else f"over the other elements it is {err:.6g}"
            notes.append(f"[{pg.name}] MAA is NaN (0/0 where both gradients are 0), a pass in "
                         f"test-backend-ops; {rest}")
            continue
        worst = max(worst, err)
        if err > threshold:
            diff = np.abs(pg.numeric.astype(np.float64) - pg.analytic)
            i = int(np.argmax(diff))
            reasons.append(f"[{pg.name}] MAA = {err:.9f} > {threshold:.9f} (max abs error {diff[i]:.6g} "
                           f"at element {i}: backprop {pg.analytic[i]:.6g}, finite differences {pg.numeric[i]:.6g})")
    status = OK
    if reasons:
        dev = find_deviation(fam.grad_notes, device.implements, p, worst)
        status = FAIL
        if dev and (dev.nonfinite or not nonfinite):
            status = DEVIATION
            notes.insert(0, dev.reason)
    return _result(device, case, status, reason="; ".join(reasons), error=worst,
                   threshold=threshold, metric="MAA", note="; ".join(notes),
                   seconds=time.perf_counter() - t0, evidence=s.evidence)


# perf: rows drawn and quantized per quantized leaf, repeated over its other rows (a
# kernel's time does not depend on the values; quantizing them whole was most of a case,
# and 256 rows of 14336 still took 0.7-1.2 s of CPU for the iq types, 32 take a ninth)
PERF_DISTINCT_ROWS = 32

# test-backend-ops' perf targets: flops or bytes per measured graph, CPU vs accelerator
GFLOP, GB = 10**9, 1 << 30
GRAPH_NODES = 8192


def op_size(out) -> int:
    """ggml_nbytes of the node and its sources (test-backend-ops' default op_size)."""
    return out.nbytes() + sum(s.nbytes() for s in out.src if s is not None)


def perf(device: Device, case: Case, seed: int, min_seconds: float = 1.0,
         ctx: WorkerContext = IN_PROCESS) -> CaseResult:
    g = case.build()
    s = device.supports(case, g)
    if not s:
        return _result(device, case, NOT_SUPPORTED, reason=s.reason, evidence=s.evidence)
    t0 = time.perf_counter()
    with ctx.memory_turn(tensor_bytes(g)):
        result = _perf_measured(device, case, g, seed, min_seconds, ctx)
    result.evidence = s.evidence
    result.seconds = time.perf_counter() - t0   # inputs, warm-up and batches: where a run's time goes
    return result


def _perf_measured(device: Device, case: Case, g, seed: int, min_seconds: float, ctx: WorkerContext) -> CaseResult:
    with _apart(g, ctx)():
        inputs = _inputs(case, g, seed, None, ctx, PERF_DISTINCT_ROWS)
    out = g.out
    fam = case.family
    flops = fam.flops(out, case.params) if fam.flops else 0
    size = fam.op_size(out, case.params) if fam.op_size else op_size(out)
    is_cpu = device.is_cpu
    n_nodes = len(g.nodes())
    if flops > 0:
        target = (8 if is_cpu else 100) * GFLOP
        n_runs = min(GRAPH_NODES - n_nodes, target // flops) + 1
    else:
        target = (8 if is_cpu else 32) * GB
        n_runs = min(GRAPH_NODES - n_nodes, target // max(size, 1)) + 1
    # bytes moved per measured graph: the repeated op plus the other (non-view) nodes once
    mem = n_runs * size + sum(op_size(n) for n in g.nodes() if not n.is_view() and n is not out)
    try:
        m = measure(lambda n: device.time(case, g, inputs, n), int(n_runs), min_seconds)
    except DeviceError as e:
        return _result(device, case, FAIL, reason=str(e))
    per_run = m.seconds_per_run
    # the simulator: one compute's device work, counted in the timing's warm-up
    return _result(device, case, OK, cost=getattr(device, "timed_cost", None), n_runs=m.runs, time_us=per_run * 1e6,
                   flops=flops / per_run if flops else 0.0,
                   bandwidth_gb_s=0.0 if flops else mem / n_runs / per_run / GB,
                   memory_kb=size // 1024, batches=len(m.per_run), spread=m.spread,
                   load=m.machine.load, contention=m.machine.contention, steal=m.machine.steal,
                   doubts="; ".join(m.doubts), clock=device.clock)


def run_one(device: Device, case: Case, spec: RunSpec, ctx: WorkerContext = IN_PROCESS) -> CaseResult:
    """The case in the spec's mode. `case`: a Case, or a reference to one (cases/cache.py
    CaseRef) built here."""
    try:
        case = case.resolve()
        if spec.mode == "support":
            return support(device, case)
        if spec.mode == "perf":
            return perf(device, case, spec.seed, spec.min_seconds, ctx)
        if spec.mode == "grad":
            return grad(device, case, spec.seed, ctx)
        return test(device, case, CaseOptions.of(spec, device.name), ctx)
    except MemoryError:   # the host's, wherever it came from: no verdict on the device
        return _result(device, case, SKIPPED, host_error=True,
                       reason="the host ran out of memory (MemoryError): no verdict on the device")
    except StaleName as e:   # a name the names cache made up: no verdict on it
        return _result(device, case, SKIPPED, reason=f"not a case of the catalog ({e}): the names cache "
                                                     f"that named it was wrong, and is removed")
    except Exception as e:  # a Python-level error in a case is that case's FAIL, not the run's end
        return _result(device, case, FAIL, reason=f"error: {type(e).__name__}: {e}")
