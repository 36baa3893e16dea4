"""Workers forked from this process rather than spawned: this process's BLAS set up for
them before NumPy is imported, the fork itself (a Process-like handle), the first worker
forked ahead while the cases are chosen, and the reaping of every worker left."""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
from multiprocessing.connection import Connection, wait

from . import worker

# the thread counts of NumPy's BLAS (OpenBLAS, MKL, OpenMP), read when a worker imports it
BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


# Workers of these devices are forked from this process: once it has imported what a worker
# needs (the catalog, the reference, the device's module: preload), a fork is ready in
# milliseconds where a spawned worker imports NumPy and the catalog again (half a second of
# CPU each); the first fork imports them on its own.
# Discovering these devices here starts no thread and no device runtime (ggml's CPU
# backend runs no OpenMP region before a graph is computed, and this process computes
# none); a GPU or NPU runtime (CUDA, ACL, the CANN simulator) would be forked half set up,
# so theirs are spawned. A forked worker keeps no file of this process open but its pipe.
FORKABLE = ("GGML-CPU", "NUMPY", "FAULTY")


_fork_threads: int | None = None   # the BLAS threads this process was set up with (None: not)
_forked: dict[int, "Forked"] = {}  # live forked workers, by pid (reap_children)


def fork_threads() -> int | None:
    """The BLAS threads this process was set up with for forking (None: not set up)."""
    return _fork_threads


def set_up_forking(threads: int) -> None:
    """Before NumPy is imported: this process's BLAS gets a worker's share of the cores
    (BLAS_THREADS), as a spawned worker's would, so that workers may be forked from it.
    Once NumPy is imported, its BLAS is as it is: workers are spawned."""
    global _fork_threads
    if "numpy" in sys.modules:
        return
    os.environ.update(dict.fromkeys(BLAS_THREADS, str(threads)))
    _fork_threads = threads


class Forked:
    """A worker forked from this process, with the part of multiprocessing's Process that
    the pool uses (sentinel, is_alive, kill, join, exitcode)."""
    count = 0   # forks made by this process

    def __init__(self, target, args, keep: tuple[int, ...], env: dict):
        for stream in (sys.stdout, sys.stderr):
            stream.flush()   # else the child holds a copy of what is buffered
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the worker: never back into the caller's code
            code = 1
            try:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)   # this process's handler is the main's
                # a closed terminal hangs up the whole group: the main process decides
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                kept = {0, 1, 2, w, *keep}
                for fd in map(int, os.listdir("/proc/self/fd")):
                    if fd not in kept:
                        try:
                            os.close(fd)   # the results journal's lock, the other workers' pipes
                        except OSError:
                            pass
                os.environ.update(env)
                target(*args)
                code = 0
            except BaseException:
                import traceback
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(w)
        Forked.count += 1
        self.pid, self.sentinel = pid, r
        self.exitcode: int | None = None
        _forked[pid] = self

    def _reap(self, block: bool) -> bool:
        if self.exitcode is None:
            try:
                pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                pid, status = self.pid, 0
            if pid == 0:
                return False
            self.exitcode = os.waitstatus_to_exitcode(status)
            _forked.pop(self.pid, None)
            try:
                os.close(self.sentinel)
            except OSError:
                pass
        return True

    def is_alive(self) -> bool:
        return not self._reap(False)

    def kill(self) -> None:
        if self.exitcode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def join(self, timeout: float | None = None) -> None:
        if self.exitcode is None and wait([self.sentinel], timeout):
            self._reap(True)


_ahead: "tuple[Forked, Connection] | None" = None   # fork_ahead's worker and its pipe, not taken yet


def fork_ahead() -> None:
    """Fork the run's first worker now, before the cases are chosen and the devices found:
    it imports NumPy, the catalog and the reference (most of a small run's start-up) while
    this process does that work, then waits to be told which device to open. The first
    pool of forked workers takes it (WorkerPool._spawn); any other pool drops it. Only
    where workers may be forked (set_up_forking) and before any other."""
    global _ahead
    if _fork_threads is None or _ahead is not None or Forked.count or threading.active_count() > 1:
        return
    parent, child = mp.Pipe()
    handler = signal.signal(signal.SIGINT, signal.SIG_IGN)   # as _spawn: born ignoring it
    try:
        _ahead = Forked(worker.worker_ahead, (child,), (child.fileno(),), {}), parent
    finally:
        signal.signal(signal.SIGINT, handler)
    child.close()


def take_ahead(keep: bool):
    """The worker forked ahead, for a pool of forked workers (keep), else dropped (a pool
    that spawns its workers has no use for it)."""
    global _ahead
    ahead, _ahead = _ahead, None
    if ahead is not None and not keep:
        p, conn = ahead
        p.kill()   # it holds nothing yet
        p.join(5)
        conn.close()
        ahead = None
    return ahead



def reap_children() -> None:
    """Leave no process of ours behind: the workers still alive (a pool not closed on some
    path) are killed and waited for, and multiprocessing's resource tracker, which spawning
    a worker starts and which otherwise outlives `ops` by a moment, is stopped and waited for."""
    alive: list[mp.process.BaseProcess | Forked] = [*mp.active_children(), *_forked.values()]
    for p in alive:
        p.kill()
        p.join(5)
    from multiprocessing import resource_tracker
    stop = getattr(resource_tracker._resource_tracker, "_stop", None)
    if stop is not None:
        try:
            stop()
        except (OSError, ChildProcessError):
            pass
