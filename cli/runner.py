"""Runs the selected cases on each device through a worker pool and collects a `Run`.

Results are printed in case order whatever the number of workers, and kept whatever
happens: an interrupt (SIGINT / SIGTERM) stops the workers, and everything computed so
far is in the returned run, marked `interrupted`.
"""
from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cannops import cli as _pkg
from cannops.cases.versions import current

from .results import FAIL, SKIPPED, CaseResult, Journal, Resumed, Run
from .selection import Target
from .workers import WorkerPool, WorkerStartError, device_info, worker_threads

if TYPE_CHECKING:   # a run hands the workers cases.cache.CaseRef's: this process needs no catalog
    from cannops.cases.catalog import Case


class Interrupted(Exception):
    def __init__(self, signum: int):
        self.signum = signum
        self.exit_status = 128 + signum


@dataclass
class Options:
    mode: str = "test"
    jobs: int = 1
    timeout: float = 60.0
    timeout_given: bool = False   # --timeout: exact; else a simulator gets SIMULATOR_TIME times it
    seed: int = 0
    min_seconds: float = 1.0   # perf: measure each case at least this long
    ops_filter: str | None = None
    params_filter: str | None = None
    shard: str | None = None
    sample: int | None = None  # --sample: at most this many cases per op
    strict: bool = False       # test: the per-element check too (cli/strict.py)
    catalog: str = ""          # the catalog version (cases/versions.py); "": the one in use
    ref_cache: bool = True     # test: keep the reference's outputs on disk (cli/refcache.py)
    threads: int | None = None  # perf --threads: ggml CPU threads per worker (None: workers.worker_threads)


# a simulated device (CANN-SIM) runs every aclnn call in Python, moving each operator's whole
# output through NumPy: its big cases (e.g. MoE matmuls over 128 experts) take minutes, so
# its default per-case timeout is this many times the mode's
SIMULATOR_TIME = 10


def case_timeout(opts: "Options", device: str) -> float:
    simulated = device.endswith("-SIM")
    return opts.timeout * (SIMULATOR_TIME if simulated and not opts.timeout_given else 1)


def device_passed(results) -> bool:
    return not any(r.status == FAIL for r in results)


def _raise_interrupt(signum, frame):
    raise Interrupted(signum)


def new_run(opts: Options) -> Run:
    standard = None
    if opts.strict:   # the checker's module imports NumPy: only a strict run takes its standard
        from .strict import STANDARD as standard
    return Run(mode=opts.mode, seed=opts.seed, ops_filter=opts.ops_filter,
               params_filter=opts.params_filter, shard=opts.shard, sample=opts.sample, version=_pkg.__version__,
               strict=standard, catalog=opts.catalog or current())


def execute(cases: list[tuple[int, Case]], devices: list, opts: Options, printer,
            journal_path: "str | Journal | None" = None, resumed: Resumed | None = None) -> Run:
    """Run the cases on each target (a Target, or a plain device name) in turn. Each
    result goes to the journal as it comes (see results.Journal); the cases in `resumed`
    are not run again, their earlier results are taken."""
    devices = [Target(d, (d,)) if isinstance(d, str) else d for d in devices]
    run = new_run(opts)
    # of a resumed run, only this run's devices and cases (by index and name) count
    resumed = resumed or Resumed()
    labels, names = {t.label for t in devices}, {idx: c.name for idx, c in cases}
    resumed = Resumed({k: r for k, r in resumed.results.items() if k[1] in labels and names.get(k[0]) == r.name},
                      {n: d for n, d in resumed.devices.items() if n in labels})
    # a Journal given is the caller's (locked, closed once the results file is written)
    owned = isinstance(journal_path, str)
    journal = Journal(journal_path) if owned else journal_path
    if journal:
        journal.begin(run)  # the journal replaces the resumed one: it starts with what that one held
        for info in resumed.devices.values():
            journal.device(info)
        for r in resumed.results.values():
            journal.result(r)
    old = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    # ggml's CPU backend is multi-threaded: each worker gets its share of the cores
    threads = worker_threads(opts.mode, opts.jobs, opts.threads)
    n_ok = 0
    ref_dir, scratch = None, None
    if opts.mode == "test":
        from . import refcache
        ref_dir = refcache.location(opts.ref_cache)
        if ref_dir is None and len(devices) > 1:
            # no cache: the run keeps the references for its other devices, then drops them
            import tempfile
            scratch = tempfile.TemporaryDirectory(prefix="ops-references-")
            ref_dir = scratch.name
        run.reference_cache = {"hits": 0, "computed": 0}
    probers, riders = _probe_plan(devices) if opts.mode == "support" else ({}, {})
    rode: dict[str, dict[int, CaseResult]] = {}   # a rider's label -> its results by case index
    try:
        printer.start(len(devices))
        for i, target in enumerate(devices):
            name = target.label
            earlier = {idx: resumed.results[(idx, name)] for idx, _ in cases if (idx, name) in resumed.results}
            given = rode.pop(name, {})   # decided with another device's cases (riders)
            left = sum(idx not in earlier and idx not in given for idx, _ in cases)
            pool = WorkerPool(target.members, max(1, min(opts.jobs, left)), case_timeout(opts, name), threads,
                              label=name, env=target.env, prober=probers.get(name), riders=riders.get(name, ()))
            try:
                known = resumed.devices.get(name) or (device_info(probers[name]) if given else None)
                if len(earlier.keys() | given.keys()) == len(cases) and known:
                    info = known  # all done before, or beside the lead: no worker needed
                else:
                    try:
                        info = pool.start()
                    except WorkerStartError as e:
                        printer.device_skipped(i, len(devices), name, str(e))
                        # its cases stay in the results, skipped: the device's ops are unknown
                        run.results.extend(CaseResult(device=name, op=c.op, params=c.vars, status=SKIPPED,
                                                      reason=str(e), index=idx) for idx, c in cases)
                        continue
                run.devices.append(info)
                if journal:
                    journal.device(info)
                printer.device_start(i, len(devices), info, len(cases))
                done = _run_device(pool, cases, opts, printer, run, earlier, journal,
                                   None if ref_dir is None else str(ref_dir), given, rode)
            finally:
                pool.close()
            ok = device_passed(done)
            n_ok += ok
            printer.device_end(name, done, ok)
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
        if scratch is not None:
            scratch.cleanup()
        elif ref_dir is not None and run.reference_cache["computed"]:
            refcache.prune(ref_dir)
        if journal and owned:
            journal.close()
    run.exit_status = raise_after.exit_status if raise_after else (0 if n_ok == len(devices) else 1)
    return run


def _probe_plan(targets: list[Target]) -> tuple[dict, dict]:
    """How a probe runs: each device whose support is decided without it (a prober:
    backend.base.open_prober, e.g. the CANN rules) is probed through its prober, in forked
    workers, and those after the first device ride with that one's workers: each of their
    decisions is taken on the graph the worker built once for the case (the catalog's
    graphs are most of a probe's time). Returns (label -> prober, lead label -> riders)."""
    from cannops.backend.base import open_prober
    probers = {}
    for t in targets:   # a kind's devices share workers; --soc SoCs set their workers' runtime
        p = open_prober(t.label) if t.members == (t.label,) and not t.env else None
        if p is not None:
            probers[t.label] = p
    rode = tuple(probers[t.label] for t in targets[1:] if t.label in probers)
    return probers, ({targets[0].label: rode} if rode else {})


def _keep_resumed(run: Run, resumed: Resumed) -> None:
    """On an interrupt: the resumed results of the devices not reached yet stay in the run."""
    have = {(r.index, r.device) for r in run.results}
    run.results.extend(r for key, r in resumed.results.items() if key not in have)
    names = {d.name for d in run.devices}
    run.devices.extend(d for n, d in resumed.devices.items() if n not in names)


def _run_device(pool: WorkerPool, cases, opts: Options, printer, run: Run, earlier=None, journal=None,
                ref_dir: str | None = None, given=None, rode=None):
    """Feed the pool the cases not in `earlier` (index -> result of a resumed run) nor in
    `given` (index -> result decided beside another device's: journalled here); print
    results in case order; keep out-of-order ones on interrupt. The results of the pool's
    riders go to `rode` (label -> index -> result)."""
    pending: dict[int, object] = {}
    done = []
    next_seq = 0
    earlier = earlier or {}
    given = given or {}
    todo = []
    for seq, (idx, c) in enumerate(cases):
        if idx in earlier:
            pending[seq] = earlier[idx]
        elif idx in given:
            pending[seq] = given[idx]
            if journal:
                journal.result(given[idx])
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
            for seq, result in pool.run(iter(todo), opts.mode, opts.seed, opts.min_seconds, opts.strict,
                                        ref_dir):
                result.index = cases[seq][0]
                for r in result.__dict__.pop("riders", ()):   # the pool's note, not a field
                    r.index = result.index
                    rode.setdefault(r.device, {})[r.index] = r
                cached = result.__dict__.pop("ref_cached", None)   # a worker's note, not a field
                if cached is not None and run.reference_cache is not None:
                    run.reference_cache["hits" if cached else "computed"] += 1
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
