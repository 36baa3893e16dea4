"""The worker process's side: it opens its device once, then runs the cases sent over its
pipe as the run's spec says (engine/execute.py), each with a WorkerContext that tells the
pool when it does work of its own; its stdout and stderr go to a log the pool reads."""
from __future__ import annotations

import faulthandler
import os
import re
import signal
import threading
import time
from contextlib import contextmanager

from .context import WorkerContext
from .memlog import MemoryLog
from .results import DeviceInfo
from .spec import RunSpec

# Modes whose worker answers each message at once, not case by case: a probe decides a case
# in tens of microseconds, less than this process spends on a message. A worker that dies
# or hangs holding several such cases names none of them: they go back as suspects, sent
# one at a time, so that a crash again is that case's (_Queue.suspects).
BATCHED = ("support",)




def worker_ahead(conn) -> None:
    """A worker forked ahead (fork_ahead): imports, then worker_main for the device it is
    given, or exits when given none (or when this process is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    preload()
    try:
        msg = conn.recv()
    except (EOFError, OSError):
        return
    if msg is not None:
        device, log_path, spec, env, prober, other_probers = msg
        os.environ.update(env)
        worker_main(conn, device, log_path, spec, prober, other_probers)


def preload() -> None:
    """What a worker imports before it opens its device (NumPy, the catalog, the
    reference), imported here. The first worker of a run imports it on its own, so that
    a run of a few cases never imports it in this process; before the next fork (a second
    worker, one replacing a crashed one), this process does, once, and those forks are
    ready in milliseconds."""
    from cannops.backend import reference
    from cannops.cases import catalog

    from . import execute  # noqa: F401
    catalog.load_all()
    reference.load_all()


def _exit_when_orphaned(parent: int) -> None:
    """A main process killed with SIGKILL cannot stop its workers: each stops itself once
    orphaned, even in the middle of a case that hangs (a thread of its own, which a case
    stuck in C code does not block: cffi calls release the GIL)."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


def device_info(device) -> DeviceInfo:
    """What a run records of a device (or a prober: no memory figures)."""
    mem = device.memory()
    return DeviceInfo(device.name, device.description, mem[0] if mem else None, mem[1] if mem else None,
                      getattr(device, "soc_name", ""),
                      getattr(device, "n_threads", None) if getattr(device, "is_cpu", False) else None)


# A case whose tensors take more than this (or than a 1/(4 x -j) share of the memory
# available when the worker started, where that is less) takes its pool's memory turn
# (WorkerContext.memory_turn): one such case at a time. The whole 0.25.3 catalog has about
# 20 of them (MUL_MAT_HADAMARD 16384^2: 1 GiB; MUL_MAT_ID(_FUSION)'s 128 experts, GET_ROWS
# be1=700: 0.3-0.8 GiB), each seconds long: two at once were most of the tree's peak.
MEMORY_TURN_BYTES = 256 << 20


def _available_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            return next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


class _InWorker(WorkerContext):
    """A case's worker (context.WorkerContext): the quantizer tables it built, its own work
    told to the pool ("apart" ... "back"), which times that apart from the case, and its
    pool's memory turn (a lock file beside the workers' logs)."""

    def __init__(self, conn, turn_path: str = "", jobs: int = 1):
        self.conn = conn
        self.built: set[str] = set()   # the quantizer tables this process has
        self.away = False              # inside host_work(): a table built for a big case's inputs is in it
        self.turn_path = turn_path
        avail = _available_bytes()
        self.turn_bytes = MEMORY_TURN_BYTES if avail is None else min(MEMORY_TURN_BYTES, avail // (4 * max(1, jobs)))
        self.memory = MemoryLog.from_env()   # OPS_MEMORY_LOG: each case's memory and CPU by phase

    def phase(self, name: str, arrays=()) -> None:
        if self.memory:
            self.memory.phase(name, arrays)

    @contextmanager
    def memory_turn(self, nbytes: int):
        if nbytes < self.turn_bytes or not self.turn_path:
            yield
            return
        import fcntl
        fd = os.open(self.turn_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            with self.host_work():   # waiting for another worker's case is not this case's time
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)   # releases the lock

    @contextmanager
    def host_work(self):
        """Work of ours, timed by the pool apart from the device's run (HOST_WORK_SECONDS)."""
        if self.away:
            yield
            return
        self.conn.send(("apart", None))
        self.away = True
        try:
            yield
        finally:
            self.away = False
            self.conn.send(("back", None))

    def prepare_inputs(self, case, seed: int, ref_cache: str | None) -> None:
        """Before a case's inputs are made: the costly quantizer tables they need, built
        apart from the case's time (seconds of CPU once per process), unless the inputs
        come from the cache."""
        from cannops.cases.inputs import build_quantizer_table, quantizer_tables

        from .execute import inputs_cached
        tables = quantizer_tables(case.vars) - self.built
        entry = inputs_cached(case, seed, ref_cache) if tables else None
        if not tables or entry is not None and entry[0].exists():
            return
        with self.host_work():
            for t in sorted(tables):
                build_quantizer_table(t)
            self.built.update(tables)


def _open_in_worker(conn, device_name: str, spec: RunSpec, prober):
    """The worker's device (or its prober), opened once everything a case needs is loaded,
    so that a case's timeout counts its own run only, not the imports of the first case a
    fresh worker gets; None where it cannot be opened (the pool is told why)."""
    from cannops.backend import reference
    from cannops.backend.base import open_device
    from cannops.cases import catalog
    try:
        catalog.load_all()
        reference.load_all()
        device = prober if prober is not None else open_device(device_name)
        threads = spec.worker_threads()
        if threads and hasattr(device, "n_threads"):
            device.n_threads = threads
        conn.send(("ready", device_info(device)))
        return device
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return None


def worker_main(conn, device_name: str, log_path: str, spec: RunSpec, prober=None,
                 other_probers: tuple = ()) -> None:
    """Entry point of a worker process: the run's spec says what to do with each case sent.
    prober: what decides the device's support without it (backend.base.open_prober), used
    instead of opening the device (a probe); other_probers: the probers of other devices, each
    asked too on the graph built for a probed case."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides when to stop
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # and on a closed terminal, which hangs up the group
    threading.Thread(target=_exit_when_orphaned, args=(os.getppid(),), daemon=True).start()
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    faulthandler.enable()  # a fatal signal leaves its Python traceback in the log
    from .execute import probe, run_one
    turn = spec.turn_lock or os.path.join(os.path.dirname(log_path), "memory-turn.lock")
    ctx = _InWorker(conn, turn, spec.jobs)
    device = _open_in_worker(conn, device_name, spec, prober)
    if device is None:
        return
    while (tasks := conn.recv()) is not None:
        if spec.mode in BATCHED:
            answers = []
            for seq, case in tasks:
                os.ftruncate(log_fd, 0)
                found = probe(device, case, other_probers)
                answers.append((seq, [(status, clean_text(why), level) for status, why, level in found]))
            conn.send(("probed", answers))
            continue
        for seq, case in tasks:   # in order: the pool blames a crash on the oldest unanswered
            os.ftruncate(log_fd, 0)  # the log holds only the current case's output
            if ctx.memory:
                ctx.memory.start()
            t0 = time.perf_counter()
            result = run_one(device, case, spec, ctx)
            result.seconds = time.perf_counter() - t0   # its whole time here, building it included
            if ctx.memory:
                ctx.memory.end(result)
            conn.send(("result", seq, result))
    device.close()


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: str) -> str:
    """Device output as text for a console, a log or a report: no control characters (an
    ESC would restyle the terminal, a BEL ring it); newlines and tabs stay."""
    return _CONTROL.sub("", text)
