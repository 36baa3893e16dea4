"""The pool of worker processes: every case runs in a worker, never in the main process.

A device under test may abort, segfault, hang or scribble over memory. Each worker opens
the device once and runs cases sent over a pipe; its stdout/stderr go to a log file that
is emptied before each case. When a worker dies, the case it was running becomes a FAIL
that names the signal and quotes the log's last lines, and a fresh worker takes over.
A case that runs past the timeout is a FAIL too; its worker is killed and replaced.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import TYPE_CHECKING, Iterable, Iterator

from . import forking
from .forking import BLAS_THREADS, FORKABLE, Forked, take_ahead
from .results import FAIL, SKIPPED, CaseResult, DeviceInfo
from .selection import Target
from .spec import RunSpec
from .worker import BATCHED, clean_text, preload, worker_main

if TYPE_CHECKING:   # this module is imported before NumPy (set_up_forking)
    from cannops.cases.catalog import Case

STDERR_TAIL_LINES = 8
MIN_START_SECONDS = 20.0  # opening a device in a worker may take this long, or --timeout if longer
# this process' own work for a case, timed apart from the case's timeout (which is the
# device's), may take this long: building libggml's quantizer tables (cases/inputs.py; 9 s
# of CPU at most, minutes on a machine loaded many times over), a big case's inputs and
# reference (execute.HOST_WORK_ELEMENTS; 100 s for MUL_MAT_ID's 128 q4_K experts)
HOST_WORK_SECONDS = 600.0
# Cases a worker holds, by mode: the one it runs and those queued behind it, sent in one
# message, so that it never waits on a round trip to this process between two cases (a
# probe or a small test case takes less than that round trip on a busy machine). Perf
# measures one case at a time. 32 pickled cases (< 0.5 kB each) fit a pipe's buffer, so a
# send never blocks on a hung worker.
PIPELINE = {"support": 32, "test": 2, "grad": 2, "perf": 1}
# A pool starts with one worker and grows to its -j once that one has been running cases for
# this long with more waiting: a second worker costs this process its imports (preload,
# 0.12 s) and the machine a process, more than a run of a few small cases takes in all
# (-o ABS -j 2 took 0.56 s where -j 1 took 0.33 s).
GROW_AFTER_SECONDS = 0.2
# ... or at once where this many cases wait: a run that long needs every worker (a cold probe
# of the whole catalog, 23,000 cases, lost 0.1 s of its 1.7 s waiting)
GROW_AT_ONCE_CASES = 1000




class WorkerStartError(Exception):
    pass




@dataclass
class _Worker:
    process: mp.process.BaseProcess | Forked
    conn: Connection
    log_path: str
    device: str = ""                # the device this worker opened
    slot: int = 0                   # its place in the pool: a worker replacing it takes it
    # (seq, case) sent and not answered yet, oldest first: the worker runs them in this
    # order, so the oldest is the one it runs now, since `started`
    tasks: deque = field(default_factory=deque)
    started: float = 0.0
    limit: float | None = None      # the current wait's own limit (a table build), else the timeout
    alone: bool = False             # it holds a suspect (_Queue.suspects), and nothing else

    @property
    def task(self) -> tuple | None:
        """The case the worker runs now (None: idle)."""
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
    """The worker's last output: the device's own lines first (the last n of them), then
    the head of Python's fatal-error report (which signal, the innermost frames)."""
    try:
        with open(path, errors="replace") as f:
            lines = [clean_text(ln.rstrip()) for ln in f.read().splitlines() if ln.strip()
                     and not ln.startswith("Extension modules:") and "multiprocessing" not in ln
                     and 'File "<string>"' not in ln]
    except OSError:
        return ""
    fatal = next((i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")), len(lines))
    own = lines[:fatal][-n:]
    return "\n".join(own + lines[fatal:][:max(3, n - len(own))])


class _Queue:
    """The cases not sent yet, in seq order, in lanes by the costly quantizer table they
    need (cases/inputs.py): a table is built by the first worker that gets one of its
    cases, and that worker's slot gets the rest of them, so that no other worker spends
    seconds building it again (a crash or a timeout does not move a slot's tables: the
    worker replacing it builds them again). Without such tables: any worker, in order."""

    def __init__(self, tasks: Iterable[tuple[int, Case]], dropped: set[int], by_table: bool = True,
                 from_both_ends: bool = False):
        from cannops.cases.tables import quantizer_table
        self.table = quantizer_table if by_table else (lambda vars: None)
        self.lanes: dict[str | None, deque] = {}
        for seq, case in tasks:
            self.lanes.setdefault(self.table(case.vars), deque()).append((seq, case))
        self.owner: dict[str, int] = {}   # table -> the slot that builds it
        self.dropped = dropped            # the pool's slots gone for good: their lanes are free
        # cases a worker held, answering them at once (BATCHED), when it died or hung: any
        # of them may be the cause, so each goes alone to an idle worker, before the rest
        self.suspects: deque = deque()
        # odd slots take from the end: of two workers, each builds the cases of the families
        # at its end of the catalog only (a worker enumerates a family's grid once, for its
        # first case of it: a third of a probe's time where both did every family)
        self.from_both_ends = from_both_ends

    def __len__(self) -> int:
        return sum(map(len, self.lanes.values())) + len(self.suspects)

    def _open(self, table: str | None, slot: int) -> bool:
        if table is None:
            return True
        owner = self.owner.get(table)
        return owner is None or owner == slot or owner in self.dropped

    def has_work_for(self, w: "_Worker") -> bool:
        return bool(self.suspects) or any(lane and self._open(t, w.slot) for t, lane in self.lanes.items())

    def take(self, w: "_Worker", n: int) -> list[tuple[int, Case]]:
        """Up to n cases for w, the lowest seq first among the lanes open to it; with
        `from_both_ends`, an odd slot's the highest (in seq order)."""
        if len(self.lanes) == 1 and None in self.lanes:   # no case needs a costly table
            lane = self.lanes[None]
            if self.from_both_ends and w.slot % 2:
                return [lane.pop() for _ in range(min(n, len(lane)))][::-1]
            return [lane.popleft() for _ in range(min(n, len(lane)))]
        batch: list[tuple[int, Case]] = []
        while len(batch) < n:
            heads = [(lane[0][0], t) for t, lane in self.lanes.items() if lane and self._open(t, w.slot)]
            if not heads:
                break
            _, table = min(heads)
            if table is not None:
                self.owner[table] = w.slot
            batch.append(self.lanes[table].popleft())
        return batch

    def put_back(self, tasks: list[tuple[int, Case]]) -> None:
        """Cases taken and not run go back to their lanes, in seq order."""
        for seq, case in reversed(tasks):
            self.lanes.setdefault(self.table(case.vars), deque()).appendleft((seq, case))
        if self.from_both_ends:   # they may have been taken from the end
            for t, lane in self.lanes.items():
                self.lanes[t] = deque(sorted(lane, key=lambda task: task[0]))

    def drain(self) -> list[tuple[int, Case]]:
        rest = sorted([*self.suspects, *(t for lane in self.lanes.values() for t in lane)], key=lambda t: t[0])
        self.lanes.clear()
        self.suspects.clear()
        return rest


@dataclass
class Reply:
    """What the pool hands back for a case: its result (seq: its place in the tasks given),
    and in a probe, the other devices' results decided on the same graph."""
    seq: int
    result: CaseResult
    others: list[CaseResult] = field(default_factory=list)


class WorkerPool:
    """N workers for one device, or spread round-robin over the devices of one kind (worker
    k opens members[k % len(members)]); their results are reported under `label`, with
    the device each case ran on in `ran_on`. `run()` yields a Reply as each case finishes.
    Its workers get the run's spec whole, and do what it says with each case sent."""

    def __init__(self, target: Target | str, spec: RunSpec = RunSpec(), jobs: int | None = None,
                 prober=None, other_probers: tuple = ()):
        if isinstance(target, str):
            target = Target(target, (target,))
        self.spec = spec
        self.members = target.members
        self.prober = prober    # a probe: what decides support without the device, opened instead
        self.other_probers = other_probers   # a probe: other devices' probers, asked on the same graphs
        self.batched = spec.mode in BATCHED   # its workers answer per message
        self.device_name = target.label
        self.jobs = max(1, spec.jobs if jobs is None else jobs)
        self.timeout = spec.case_timeout(target.label)
        self.threads = spec.worker_threads()
        self.env = dict(target.env)   # set for the workers only (--soc: CANN_SIM_SOC)
        self.ctx = mp.get_context("spawn")
        self.logdir = tempfile.TemporaryDirectory(prefix="ops-workers-")
        self.workers: list[_Worker] = []
        self.info: DeviceInfo | None = None
        self._spawned = 0
        self._slots = 0   # the slots opened so far (start: the first; run: the others)
        self.broken: str | None = None   # why no worker could replace a crashed one, or join (_grow)
        self.dropped: set[int] = set()   # slots that no worker could take again

    # --- lifecycle ---
    def _spawn(self, slot: int) -> _Worker:
        log_path = os.path.join(self.logdir.name, f"worker{self._spawned}.log")
        self._spawned += 1
        device = self.members[slot % len(self.members)]
        forkable = self._forkable()
        ahead = take_ahead(keep=forkable)
        if ahead is not None:
            p, parent = ahead
            try:
                parent.send((device, log_path, self.spec, self.env, self.prober, self.other_probers))
                return self._started(p, parent, None, log_path, device, slot)
            except OSError:   # it died waiting: a worker is forked as usual
                p.kill()
                p.join(5)
        parent, child = self.ctx.Pipe()
        # the worker is born ignoring SIGINT (an ignored signal stays ignored across exec): a
        # Ctrl-C while it starts is the main process's to handle, with no traceback from it
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
        if forkable:
            try:
                if Forked.count:
                    preload()
                p = Forked(worker_main, (child, device, log_path, self.spec, self.prober, self.other_probers),
                            (child.fileno(),), self.env)
            finally:
                signal.signal(signal.SIGINT, handler)
            return self._started(p, parent, child, log_path, device, slot)
        p = self.ctx.Process(target=worker_main, args=(child, device, log_path, self.spec, self.prober,
                                                        self.other_probers), daemon=True)
        saved = {k: os.environ.get(k) for k in (*BLAS_THREADS, *self.env)}
        os.environ.update(self.env)
        if self.threads:
            # the worker's NumPy (the reference's matrix products) gets its share of the
            # cores too: -j 2 workers, each with a BLAS spinning on every core, ran big
            # cases twice as slowly as -j 1
            os.environ.update(dict.fromkeys(BLAS_THREADS, str(self.threads)))
        try:
            p.start()
        finally:
            signal.signal(signal.SIGINT, handler)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return self._started(p, parent, child, log_path, device, slot)

    def _forkable(self) -> bool:
        """Whether this pool's workers are forked: its devices (FORKABLE, or a prober,
        which starts no runtime), this process's BLAS set up for them, and no other thread
        here (a fork copies only the caller's: a lock another one holds would stay locked
        in the worker)."""
        if forking.fork_threads() != self.threads or threading.active_count() > 1 \
                or not (self.prober is not None or all(m in FORKABLE for m in self.members)):
            return False
        from cannops.backend.base import list_devices
        list_devices(self.members)
        return True

    def _started(self, p, parent, child, log_path: str, device: str, slot: int = 0) -> _Worker:
        """Wait for a new worker to open its device."""
        if child is not None:
            child.close()
        w = _Worker(p, parent, log_path, device=device, slot=slot)
        # wait for the device to open in the worker
        limit = max(MIN_START_SECONDS, self.timeout)
        if not parent.poll(limit):
            self._kill(w)
            raise WorkerStartError(f"{self.device_name}: worker did not open the device in {limit:g} s")
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
            self.info.name = self.device_name   # the run's label (CANN, CANN-SIM:310P)
            if len(self.members) > 1:
                self.info.description += f" (workers spread over {', '.join(self.members)})"
        return w

    def start(self) -> DeviceInfo:
        """The first worker, whose device's description is the run's; run() adds the others."""
        if not self._slots:
            self.workers.append(self._spawn(0))
            self._slots = 1
        assert self.info is not None   # set by the first worker's start (_started)
        return self.info

    def _grow(self) -> None:
        """The pool's other workers (GROW_AFTER_SECONDS); one that cannot open its device
        leaves the pool smaller, as a crashed one that cannot be replaced."""
        while self._slots < self.jobs and not self.broken:
            slot, self._slots = self._slots, self._slots + 1
            try:
                self.workers.append(self._spawn(slot))
            except WorkerStartError as e:
                self.broken = str(e).splitlines()[0]
                self.dropped.add(slot)

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
        """Idle workers are asked to close their device; busy ones (a case abandoned on an
        interrupt) are killed at once; all are waited for together, 2 s at most."""
        for w in self.workers:
            if w.process.is_alive() and w.task is None:
                try:
                    w.conn.send(None)
                except (OSError, BrokenPipeError):
                    pass
            elif w.process.is_alive():
                w.process.kill()
        deadline = time.monotonic() + 2
        for w in self.workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
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
        """A fresh worker in w's place; if none opens the device, the slot is dropped and
        the pool goes on with the others (`broken` says why)."""
        self._kill(w)
        slot = self.workers.index(w)
        try:
            self.workers[slot] = self._spawn(slot)
            self.workers[slot].slot = w.slot
        except WorkerStartError as e:
            self.workers.pop(slot)
            self.broken = f"{str(e).splitlines()[0]} (after a crash)"
            self.dropped.add(w.slot)


    def _label(self, w: _Worker, result: CaseResult) -> CaseResult:
        if len(self.members) > 1:
            result.device, result.ran_on = self.device_name, w.device
        else:
            result.device = self.device_name   # one device under a label (CANN-SIM:310P)
        return result

    def _crash_result(self, w: _Worker, why: str) -> Reply:
        assert w.task is not None   # a crash is blamed on the case the worker runs
        seq, case = w.task
        tail = _tail(w.log_path)
        reason = why + (f"; last output:\n{tail}" if tail else "")
        return Reply(seq, self._label(w, CaseResult(self.device_name, case.op, case.vars, FAIL, reason=reason,
                                                    seconds=time.monotonic() - w.started)))

    def run(self, tasks: Iterable[tuple[int, Case]]) -> Iterator[Reply]:
        """Each worker holds up to PIPELINE[mode] cases; a case's timeout counts from when
        this process read the result of the one before it (or sent it to an idle worker)."""
        mode = self.spec.mode
        queue = _Queue(tasks, self.dropped, by_table=mode != "support",   # a probe quantizes nothing
                       from_both_ends=mode in BATCHED)   # (its results are reordered by the runner)
        depth = PIPELINE.get(mode, 1)
        grow_at = None if self._slots >= self.jobs else \
            time.monotonic() + (0.0 if len(queue) >= GROW_AT_ONCE_CASES else GROW_AFTER_SECONDS)
        while queue or any(w.tasks for w in self.workers):
            if grow_at is not None and time.monotonic() >= grow_at:
                grow_at = None
                if queue:
                    self._grow()
            if not self.workers:
                # the device cannot be reopened: what is left is skipped, with the reason
                for seq, case in queue.drain():
                    yield Reply(seq, CaseResult(self.device_name, case.op, case.vars, SKIPPED,
                                                reason=f"not run: {self.broken}"))
                return
            for w in list(self.workers):
                self._top_up(w, queue, depth)
            busy = [w for w in self.workers if w.tasks]
            if not busy:
                continue   # every worker died idle and was replaced: send again
            now = time.monotonic()
            deadline = min([w.started + self._limit(w) for w in busy] + ([grow_at] if grow_at else []))
            waited: list[Connection | int] = [*(w.conn for w in busy), *(w.process.sentinel for w in busy)]
            ready = wait(waited, timeout=max(0.0, deadline - now))
            for w in busy:
                if w.conn in ready:
                    # every message waiting is read before the next wait(): a probe answers
                    # thousands of cases a second, and each wait() sets up a selector anew
                    while True:
                        try:
                            kind, *msg = w.conn.recv()
                        except (EOFError, OSError):
                            yield from self._crashed(w, queue)
                            break
                        w.started = time.monotonic()
                        if kind == "result":
                            seq, result = msg
                            w.tasks.popleft()
                            result.reason = clean_text(result.reason)
                            yield Reply(seq, self._label(w, result))
                        elif kind == "probed":
                            for seq, answers in msg[0]:
                                _, case = w.tasks.popleft()
                                yield self._probed(w, seq, case, answers)
                        else:
                            # work of the worker's own starts ("apart": its own limit) or ends
                            w.limit = HOST_WORK_SECONDS if kind == "apart" else None
                        w.alone = w.alone and bool(w.tasks)
                        if not w.tasks or not w.conn.poll(0):
                            break
                elif w.process.sentinel in ready:
                    yield from self._crashed(w, queue)
                elif time.monotonic() >= w.started + self._limit(w):
                    what = "end of the case's inputs, reference or tables" if w.limit else "result"
                    yield from self._failed(w, queue, f"timeout: no {what} after {self._limit(w):g} s")

    def _limit(self, w: _Worker) -> float:
        return w.limit or self.timeout

    def _probed(self, w: _Worker, seq: int, case, answers: list) -> Reply:
        """A probed case's reply from a worker's (status, reason, evidence) answers: the
        device's result, with the other devices'."""
        (status, reason, level), *others = answers   # (reasons cleaned by the worker)
        result = self._label(w, CaseResult(self.device_name, case.op, case.vars, status, reason, evidence=level))
        return Reply(seq, result, [CaseResult(r.name, case.op, case.vars, st, why, evidence=lv)
                                   for r, (st, why, lv) in zip(self.other_probers, others)])

    def _top_up(self, w: _Worker, queue: "_Queue", depth: int) -> None:
        """Send w the next cases of the queue, up to `depth` held, once it holds half of that
        or less (a message per case cost the probe more than its cases); in one message, or
        where the worker answers a message at once (BATCHED) in messages of half the depth,
        so that it runs one while the answer to the other comes back. A suspect goes alone
        to an idle worker, and nothing more until it answered."""
        while not w.alone and len(w.tasks) <= depth // 2 and queue.has_work_for(w):
            if not w.process.is_alive():
                if not w.tasks:
                    self._replace(w)   # it died idle: no case to blame
                return                 # else wait() finds its sentinel and blames its case
            if queue.suspects:
                if w.tasks:
                    return
                batch, w.alone = [queue.suspects.popleft()], True
            else:
                room = depth - len(w.tasks)
                batch = queue.take(w, min(room, max(1, depth // 2)) if self.batched else room)
            try:
                w.conn.send(batch)
            except OSError:   # it died since: the cases were not sent, they go back
                if w.alone:
                    queue.suspects.appendleft(batch[0])
                    w.alone = False
                else:
                    queue.put_back(batch)
                if not w.tasks:
                    self._replace(w)   # it died idle: no case to blame
                return
            if not w.tasks:
                w.started = time.monotonic()
            w.tasks.extend(batch)

    def _requeue(self, w: _Worker, queue: "_Queue") -> None:
        """The cases a failed worker held behind the one it failed on never ran: they go
        back to the front of the queue, in order."""
        rest = list(w.tasks)[1:]
        w.tasks.clear()
        queue.put_back(rest)

    def _crashed(self, w: _Worker, queue: "_Queue") -> Iterator[Reply]:
        w.process.join(5)
        return self._failed(w, queue, f"worker died: {_signal_name(w.process.exitcode)}")

    def _failed(self, w: _Worker, queue: "_Queue", why: str) -> Iterator[Reply]:
        """w died or hung: the case it ran is a FAIL saying `why`, those behind it go back to
        the queue, a fresh worker takes its place. Where it answered a message at once
        (BATCHED) and held several cases, which one it ran is unknown: they all go back, as
        suspects, and nothing is a FAIL yet."""
        if self.batched and len(w.tasks) > 1:
            queue.suspects.extend(w.tasks)
            w.tasks.clear()
            self._replace(w)
            return iter(())
        out = self._crash_result(w, why)
        self._requeue(w, queue)
        self._replace(w)
        return iter((out,))
