"""Worker processes: every case runs in a worker, never in the main process.

A device under test may abort, segfault, hang or scribble over memory. Each worker opens
the device once and runs cases sent over a pipe; its stdout/stderr go to a log file that
is emptied before each case. When a worker dies, the case it was running becomes a FAIL
that names the signal and quotes the log's last lines, and a fresh worker takes over.
A case that runs past the timeout is a FAIL too; its worker is killed and replaced.
"""
from __future__ import annotations

import faulthandler
import multiprocessing as mp
import os
import signal
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import wait
from typing import Iterable, Iterator

from cannops.cases.catalog import Case

from .results import FAIL, CaseResult, DeviceInfo

STDERR_TAIL_LINES = 8
# cases sent ahead to each worker, by mode: probes and most test cases take far less than
# a round trip between processes on a busy machine; perf measures one case at a time
PIPELINE = {"support": 32, "test": 4, "grad": 2, "perf": 1}


def _worker_main(conn, device_name: str, log_path: str, threads: int | None) -> None:
    """Entry point of a worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process decides when to stop
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    faulthandler.enable()  # a fatal signal leaves its Python traceback in the log
    from cannops.backend.base import open_device

    from .execute import run_one
    try:
        device = open_device(device_name)
        if threads and hasattr(device, "n_threads"):
            device.n_threads = threads
        mem = device.memory()
        conn.send(("ready", DeviceInfo(device.name, device.description,
                                       mem[0] if mem else None, mem[1] if mem else None)))
    except Exception as e:
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    while True:
        msg = conn.recv()
        if msg is None:
            break
        seq, case, mode, seed, min_seconds = msg
        os.ftruncate(log_fd, 0)  # the log holds only the current case's output
        result = run_one(device, case, mode, seed, min_seconds)
        conn.send(("result", seq, result))
    device.close()


class WorkerStartError(Exception):
    pass


@dataclass
class _Worker:
    process: mp.process.BaseProcess
    conn: object
    log_path: str
    device: str = ""                # the device this worker opened
    # (seq, case) sent and not answered yet, oldest first: the worker runs them in this
    # order, so the head is the case it is running now, since `started`
    tasks: deque = field(default_factory=deque)
    started: float = 0.0

    @property
    def task(self) -> tuple | None:
        """The case the worker is running now (None: idle)."""
        return self.tasks[0] if self.tasks else None


def _signal_name(exitcode: int | None) -> str:
    if exitcode is None:
        return "unknown"
    if exitcode < 0:
        try:
            return f"{signal.Signals(-exitcode).name} (signal {-exitcode})"
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit status {exitcode}"


def _tail(path: str, n: int = STDERR_TAIL_LINES) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [ln.rstrip() for ln in f.read().splitlines() if ln.strip()
                     and not ln.startswith("Extension modules:") and "multiprocessing" not in ln
                     and 'File "<string>"' not in ln]
    except OSError:
        return ""
    return "\n".join(lines[-n:])


class WorkerPool:
    """N workers for one device, or spread round-robin over the devices of one kind (worker
    k opens members[k % len(members)]); their results are reported under `label`, with
    the device each case ran on in `ran_on`. `run()` yields (seq, CaseResult) as cases finish."""

    def __init__(self, members: str | tuple[str, ...], jobs: int = 1, timeout: float = 60.0,
                 threads: int | None = None, label: str | None = None):
        self.members = (members,) if isinstance(members, str) else tuple(members)
        self.device_name = label or self.members[0]
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.threads = threads
        self.ctx = mp.get_context("spawn")
        self.logdir = tempfile.TemporaryDirectory(prefix="ops-workers-")
        self.workers: list[_Worker] = []
        self.info: DeviceInfo | None = None
        self._spawned = 0

    # --- lifecycle ---
    def _spawn(self, slot: int) -> _Worker:
        parent, child = self.ctx.Pipe()
        log_path = os.path.join(self.logdir.name, f"worker{self._spawned}.log")
        self._spawned += 1
        device = self.members[slot % len(self.members)]
        p = self.ctx.Process(target=_worker_main, args=(child, device, log_path, self.threads),
                             daemon=True)
        p.start()
        child.close()
        w = _Worker(p, parent, log_path, device=device)
        # wait for the device to open in the worker
        if not parent.poll(120):
            self._kill(w)
            raise WorkerStartError(f"{self.device_name}: worker did not start in 120 s")
        try:
            kind, payload = parent.recv()
        except EOFError:
            tail = _tail(log_path)
            self._kill(w)
            raise WorkerStartError(f"{self.device_name}: worker died while opening the device "
                                   f"({_signal_name(p.exitcode)}){': ' + tail if tail else ''}") from None
        if kind == "error":
            self._kill(w)
            raise WorkerStartError(f"{self.device_name}: {payload}")
        if self.info is None:
            self.info = payload
            if len(self.members) > 1:
                self.info.name = self.device_name
                self.info.description += f" (workers spread over {', '.join(self.members)})"
        return w

    def start(self) -> DeviceInfo:
        while len(self.workers) < self.jobs:
            self.workers.append(self._spawn(len(self.workers)))
        return self.info

    @staticmethod
    def _kill(w: _Worker) -> None:
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
        try:
            w.conn.close()
        except OSError:
            pass

    def close(self) -> None:
        for w in self.workers:
            if w.process.is_alive() and w.task is None:
                try:
                    w.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
        for w in self.workers:
            w.process.join(2)
            self._kill(w)
        self.workers = []
        self.logdir.cleanup()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # --- running ---
    def _replace(self, w: _Worker) -> None:
        self._kill(w)
        slot = self.workers.index(w)
        self.workers[slot] = self._spawn(slot)

    def _label(self, w: _Worker, result: CaseResult) -> CaseResult:
        if len(self.members) > 1:
            result.device, result.ran_on = self.device_name, w.device
        return result

    def _crash_result(self, w: _Worker, why: str) -> tuple[int, CaseResult]:
        seq, case = w.task
        tail = _tail(w.log_path)
        reason = why + (f"; last output:\n{tail}" if tail else "")
        return seq, self._label(w, CaseResult(self.device_name, case.op, case.vars, FAIL, reason=reason,
                                              seconds=time.monotonic() - w.started))

    def _requeue(self, w: _Worker, queue: deque) -> None:
        """The cases sent to a replaced worker behind the one it failed on go back to the
        front of the queue, in order (they never ran)."""
        rest = list(w.tasks)[1:]
        w.tasks.clear()
        queue.extendleft(reversed(rest))

    def run(self, tasks: Iterable[tuple[int, Case]], mode: str, seed: int,
            min_seconds: float = 1.0) -> Iterator[tuple[int, CaseResult]]:
        """Each worker gets up to PIPELINE[mode] cases ahead, so that it never waits on a
        round trip to this process between two cases (small cases are dominated by it);
        a case's timeout counts from when its worker finished the one before."""
        queue = deque(tasks)
        depth = PIPELINE.get(mode, 1)
        while queue or any(w.tasks for w in self.workers):
            for slot in range(len(self.workers)):
                w = self.workers[slot]
                while len(w.tasks) < depth and queue:
                    seq, case = queue[0]
                    try:
                        w.conn.send((seq, case, mode, seed, min_seconds))
                    except OSError:
                        if w.tasks:   # it died on a case sent before: found below
                            break
                        self._replace(w)   # it died idle: no case to blame
                        w = self.workers[slot]
                        continue
                    queue.popleft()
                    if not w.tasks:
                        w.started = time.monotonic()
                    w.tasks.append((seq, case))
            busy = [w for w in self.workers if w.tasks]
            now = time.monotonic()
            deadline = min(w.started + self.timeout for w in busy)
            ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy],
                         timeout=max(0.0, deadline - now))
            for w in busy:
                if w.conn in ready:
                    try:
                        _, seq, result = w.conn.recv()
                    except (EOFError, OSError):
                        w.process.join(5)
                        out = self._crash_result(w, f"worker died: {_signal_name(w.process.exitcode)}")
                        self._requeue(w, queue)
                        self._replace(w)
                        yield out
                        continue
                    w.tasks.popleft()
                    w.started = time.monotonic()
                    yield seq, self._label(w, result)
                elif w.process.sentinel in ready:
                    w.process.join(5)
                    out = self._crash_result(w, f"worker died: {_signal_name(w.process.exitcode)}")
                    self._requeue(w, queue)
                    self._replace(w)
                    yield out
                elif time.monotonic() >= w.started + self.timeout:
                    out = self._crash_result(w, f"timeout: no result after {self.timeout:g} s")
                    self._requeue(w, queue)
                    self._replace(w)
                    yield out
