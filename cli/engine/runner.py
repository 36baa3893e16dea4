"""Runs the selected cases on each device through a worker pool and collects a `Run`.

Results are printed in case order whatever the number of workers, and kept whatever
happens: an interrupt (SIGINT / SIGTERM / SIGHUP: STOP_SIGNALS) stops the workers, and everything computed so
far is in the returned run, marked `interrupted`.
"""
from __future__ import annotations

import os
import signal
import sys
import tempfile
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from . import __version__
from cannops.cases.versions import current

from .results import FAIL, SKIPPED, CaseResult, Journal, Resumed, Run
from .selection import Target
from .spec import RunSpec
from .pool import WorkerPool, WorkerStartError
from .worker import device_info

if TYPE_CHECKING:   # a run hands the workers cases.cache.CaseRef's: this process needs no catalog
    from cannops.cases.catalog import Case


class Interrupted(Exception):
    def __init__(self, signum: int):
        self.signum = signum
        self.exit_status = 128 + signum


def device_passed(results) -> bool:
    return not any(r.status == FAIL for r in results)


# what stops a run and keeps its results: Ctrl-C, kill, and a closed terminal or a dropped
# ssh session (SIGHUP, whose default would end the run with no results file)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def leave_hung_up_terminal(signum: int) -> None:
    """On SIGHUP the terminal is gone: writing to it would fail (EIO) before the files are
    written. (isatty() is False on a hung-up terminal: a character device is what is asked)"""
    if signum != signal.SIGHUP:
        return
    import stat
    for fd in (sys.stdout.fileno(), sys.stderr.fileno()):
        if stat.S_ISCHR(os.fstat(fd).st_mode):
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


def _raise_interrupt(signum, frame):
    leave_hung_up_terminal(signum)
    raise Interrupted(signum)


def new_run(spec: RunSpec) -> Run:
    standard: str | None = None
    if spec.strict:   # the checker's module imports NumPy: only a strict run takes its standard
        from .strict import STANDARD as standard
    return Run(mode=spec.mode, seed=spec.seed, ops_filter=spec.ops_filter,
               params_filter=spec.params_filter, shard=spec.shard, sample=spec.sample, version=__version__,
               strict=standard, hygiene=spec.hygiene(), catalog=spec.catalog or current())


@dataclass
class _RunState:
    """What every device of a run shares while the run goes: its cases, devices and spec,
    where results go (the printer, the run, the journal), what it resumes, and in a probe
    the devices probed by the lead device's workers (_probe_plan)."""
    cases: list
    devices: list[Target]
    spec: RunSpec
    printer: Any   # printers.py's, or the pytest plugin's: each a device_start, case, ...
    run: Run
    resumed: Resumed
    journal: "Journal | None"
    probers: dict = field(default_factory=dict)          # label -> its prober
    other_probers: dict = field(default_factory=dict)    # lead label -> the other devices' probers
    # label -> index -> result: the other devices' results, decided by the lead's workers
    decided_with_lead: dict[str, dict[int, CaseResult]] = field(default_factory=dict)


def run_cases(cases: list[tuple[int, Case]], devices: list, spec: RunSpec, printer,
              journal_path: "str | Journal | None" = None, resumed: Resumed | None = None) -> Run:
    """Run the cases on each target (a Target, or a plain device name) in turn. Each
    result goes to the journal as it comes (see results.Journal); the cases in `resumed`
    are not run again, their results there are taken."""
    devices = [Target(d, (d,)) if isinstance(d, str) else d for d in devices]
    run = new_run(spec)
    resumed = _this_runs(resumed or Resumed(), devices, cases)
    # a Journal given is the caller's (locked, closed once the results file is written)
    owned = isinstance(journal_path, str)
    journal = Journal(journal_path) if isinstance(journal_path, str) else journal_path
    if journal:
        journal.begin(run)  # the journal replaces the resumed one: it starts with what that one held
        for info in resumed.devices.values():
            journal.device(info)
        for r in resumed.results.values():
            journal.result(r)
    old = {s: signal.signal(s, _raise_interrupt) for s in STOP_SIGNALS}
    n_ok = 0
    spec, scratch = _references(spec, len(devices))
    turn_dir = tempfile.TemporaryDirectory(prefix="ops-run-")   # the run's memory turn, one for its pools
    spec = replace(spec, turn_lock=os.path.join(turn_dir.name, "memory-turn.lock"))
    if spec.mode == "test":
        run.reference_cache = {"hits": 0, "computed": 0, "rejected": 0}
    state = _RunState(cases, devices, spec, printer, run, resumed, journal)
    if spec.mode == "support":
        state.probers, state.other_probers = _probe_plan(devices)
    raise_after: Interrupted | None
    try:
        printer.start(len(devices))
        for i, target in enumerate(devices):
            done = _run_target(i, target, state)
            if done is not None:
                ok = device_passed(done)
                n_ok += ok
                printer.device_end(target.label, done, ok)
        printer.end(n_ok, len(devices))
    except Interrupted as e:
        _keep_resumed(run, resumed)
        run.interrupted = True
        printer.interrupted(run)
        raise_after = e
    except BrokenPipeError:
        # the reader of our output went away (`ops test | head`): stop as if interrupted,
        # silently, and still hand back every result for the results file
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        _keep_resumed(run, resumed)
        run.interrupted = True
        raise_after = Interrupted(signal.SIGPIPE)
    else:
        raise_after = None
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        turn_dir.cleanup()
        if scratch is not None:
            scratch.cleanup()
        elif spec.ref_dir is not None and (run.reference_cache or {}).get("computed"):
            from . import refcache
            refcache.prune(spec.ref_dir)
        if journal and owned:
            journal.close()
    if raise_after:
        run.exit_status = raise_after.exit_status
    elif any(r.host_error for r in run.results):
        run.exit_status = 2   # a host error, as bad input: not the devices' verdict
    else:
        run.exit_status = 0 if n_ok == len(devices) else 1
    return run


def _this_runs(resumed: Resumed, devices: list[Target], cases) -> Resumed:
    """Of a resumed run, only this run's devices and cases (by index and name) count."""
    labels, names = {t.label for t in devices}, {idx: c.name for idx, c in cases}
    return Resumed({k: r for k, r in resumed.results.items() if k[1] in labels and names.get(k[0]) == r.name},
                   {n: d for n, d in resumed.devices.items() if n in labels})


def _references(spec: RunSpec, n_devices: int):
    """The spec with the directory a test keeps its references in (ref_dir), and the
    scratch directory to remove at the end, if any: the cache's (engine/refcache.py), or
    with the cache off and several devices, a directory of the run's own that lets them
    share the references, dropped at the end."""
    if spec.mode != "test":
        return spec, None
    from . import refcache
    cache, scratch = refcache.location(spec.ref_cache), None
    ref_dir = None if cache is None else str(cache)
    if ref_dir is None and n_devices > 1:
        scratch = tempfile.TemporaryDirectory(prefix="ops-references-")
        ref_dir = scratch.name
    return replace(spec, ref_dir=ref_dir), scratch


def _run_target(i: int, target: Target, state: _RunState) -> list | None:
    """One target's cases, through a pool of its own: its results (None: its workers could
    not start, and its cases are in the run as skipped)."""
    name, cases, spec, printer, run = target.label, state.cases, state.spec, state.printer, state.run
    resumed_here = {idx: state.resumed.results[(idx, name)] for idx, _ in cases
                    if (idx, name) in state.resumed.results}
    with_lead = state.decided_with_lead.pop(name, {})   # decided by the lead device's workers
    left = sum(idx not in resumed_here and idx not in with_lead for idx, _ in cases)
    pool = WorkerPool(target, spec, jobs=max(1, min(spec.jobs, left)), prober=state.probers.get(name),
                      other_probers=state.other_probers.get(name, ()))
    try:
        known = state.resumed.devices.get(name) or (device_info(state.probers[name]) if with_lead else None)
        if len(resumed_here.keys() | with_lead.keys()) == len(cases) and known:
            info = known  # all done before, or beside the lead: no worker needed
        else:
            try:
                info = pool.start()
            except WorkerStartError as e:
                printer.device_skipped(i, len(state.devices), name, str(e))
                # its cases stay in the results, skipped: the device's ops are unknown
                run.results.extend(CaseResult(device=name, op=c.op, params=c.vars, status=SKIPPED,
                                              reason=str(e), index=idx) for idx, c in cases)
                return None
        run.devices.append(info)
        if state.journal:
            state.journal.device(info)
        printer.device_start(i, len(state.devices), info, len(cases))
        return _run_device(pool, state, resumed_here, with_lead)
    finally:
        pool.close()


def _probe_plan(targets: list[Target]) -> tuple[dict, dict]:
    """How a probe runs: each device whose support is decided without it (a prober:
    backend.base.open_prober, e.g. the CANN rules) is probed through its prober, in forked
    workers, and those after the first device ride with that one's workers: each of their
    decisions is taken on the graph the worker built once for the case (the catalog's
    graphs are most of a probe's time). Returns (label -> prober, lead label -> the other
    devices' probers)."""
    from cannops.backend.base import open_prober
    probers = {}
    for t in targets:   # a kind's devices share workers; --soc SoCs set their workers' runtime
        p = open_prober(t.label) if t.members == (t.label,) and not t.env else None
        if p is not None:
            probers[t.label] = p
    others = tuple(probers[t.label] for t in targets[1:] if t.label in probers)
    return probers, ({targets[0].label: others} if others else {})


def _keep_resumed(run: Run, resumed: Resumed) -> None:
    """On an interrupt: the resumed results of the devices not reached yet stay in the run."""
    have = {(r.index, r.device) for r in run.results}
    run.results.extend(r for key, r in resumed.results.items() if key not in have)
    names = {d.name for d in run.devices}
    run.devices.extend(d for n, d in resumed.devices.items() if n not in names)


def _run_device(pool: WorkerPool, state: _RunState, resumed_here: dict | None = None,
                with_lead: dict | None = None) -> list:
    """Feed the pool the cases not in `resumed_here` (index -> result of a resumed run) nor
    in `with_lead` (index -> result decided by the lead device's workers: journalled here);
    print results in case order; keep out-of-order ones on interrupt. The results the
    pool's workers decide for other devices go to state.decided_with_lead."""
    cases, printer, run, journal = state.cases, state.printer, state.run, state.journal
    pending: dict[int, CaseResult] = {}
    done = []
    next_seq = 0
    resumed_here = resumed_here or {}
    with_lead = with_lead or {}
    todo = []
    for seq, (idx, c) in enumerate(cases):
        if idx in resumed_here:
            pending[seq] = resumed_here[idx]
        elif idx in with_lead:
            pending[seq] = with_lead[idx]
            if journal:
                journal.result(with_lead[idx])
        else:
            todo.append((seq, c))

    def flush():
        nonlocal next_seq
        while next_seq in pending:
            r = pending.pop(next_seq)
            run.results.append(r)
            done.append(r)
            printer.case(r)
            next_seq += 1

    try:
        flush()
        if todo:
            for reply in pool.run(iter(todo)):
                seq, result = reply.seq, reply.result
                result.index = cases[seq][0]
                for r in reply.others:
                    r.index = result.index
                    state.decided_with_lead.setdefault(r.device, {})[r.index] = r
                if result.ref_cached is not None and run.reference_cache is not None:
                    run.reference_cache["hits" if result.ref_cached else "computed"] += 1
                    run.reference_cache["rejected"] += result.ref_rejected
                if journal:
                    journal.result(result)
                pending[seq] = result
                flush()
    except (Interrupted, BrokenPipeError):
        for seq in sorted(pending):
            run.results.append(pending[seq])
            done.append(pending[seq])
        raise
    return done
