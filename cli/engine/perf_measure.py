"""How far a perf figure can be trusted: a case is timed in batches until the spread of
the batches is known, while the machine's load and the CPU other processes took are
recorded; a figure taken on a busy machine or with a wide spread is marked as such.

A batch is one `Device.time` call: test-backend-ops' measured graph (the op repeated
n_runs times), so a batch's seconds per run is what test-backend-ops prints for one
graph. The figure is the median over the batches; the spread is their relative median
absolute deviation (MAD / median), printed as "±x%".
"""
from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass
from typing import Callable

MIN_BATCHES = 5        # fewer batches say little about their spread
MAX_TIME_FACTOR = 3    # a case stops after this many times --min-time, stable or not
STABLE = 0.25          # the spread is known once adding the last third of the batches moved it
STABLE_ABS = 0.002     # by less than this fraction of itself, or than this absolute amount
WIDE_SPREAD = 0.05     # a relative MAD beyond this marks the figure
BUSY_CORES = 0.25      # other processes' CPU while measuring, in cores, that marks the machine busy
BUSY_STEAL = 0.05      # the share of the machine's time the hypervisor stole that does too
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_stat() -> tuple[float, float, float] | None:
    """The machine's (busy, steal, total) CPU seconds since boot, from /proc/stat's first
    line (user nice system idle iowait irq softirq steal ...); None off Linux."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy / _TICK, steal / _TICK, (busy + idle + iowait + steal) / _TICK


@dataclass
class Machine:
    """The machine while a case was measured."""
    load: float                   # 1-minute load average at the end
    contention: float | None      # cores' worth of CPU the other processes used meanwhile
    steal: float | None           # the share of the machine's CPU time stolen meanwhile

    @property
    def busy(self) -> str:
        """Why the machine counts as busy ("" when it does not)."""
        if self.contention is not None and self.contention > BUSY_CORES:
            return f"other processes used {self.contention:.2f} cores"
        if self.steal is not None and self.steal > BUSY_STEAL:
            return f"{self.steal:.0%} of the CPU time stolen by the hypervisor"
        return ""


def _own_cpu(children: bool) -> float:
    """This process' CPU seconds (its threads included), and with `children` those of its
    children waited for (a test-backend-ops process of ops tbo, once it has ended)."""
    if not children:
        return time.process_time()
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Watch:
    """Measures the machine around a span of this process' work: other processes' CPU is
    the machine's busy time less this process' own (its threads included; with `children`,
    its child processes' too: the span must end after they were waited for)."""

    def __init__(self, children: bool = False):
        self.children = children
        self.stat, self.own, self.wall = _proc_stat(), _own_cpu(children), time.perf_counter()

    def stop(self) -> Machine:
        stat, own, wall = _proc_stat(), _own_cpu(self.children), time.perf_counter()
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
        span = wall - self.wall
        if stat is None or self.stat is None or span <= 0:
            return Machine(load, None, None)
        busy, steal, total = (b - a for a, b in zip(self.stat, stat))
        # the clock ticks are coarse (10 ms): a short span reads 0 or one tick too many
        others = max(0.0, busy - (own - self.own)) / span if span >= 0.2 else None
        return Machine(load, others, steal / total if total > 0 else None)


def relative_mad(values: list[float]) -> float | None:
    """MAD / median: the batches' spread, robust to the odd disturbed batch."""
    if len(values) < 3:
        return None
    med = statistics.median(values)
    if med <= 0:
        return None
    return statistics.median(abs(v - med) for v in values) / med


@dataclass
class Measurement:
    per_run: list[float]          # each batch's seconds per run
    runs: int                     # runs over all batches
    machine: Machine

    @property
    def seconds_per_run(self) -> float:
        return statistics.median(self.per_run)

    @property
    def spread(self) -> float | None:
        return relative_mad(self.per_run)

    @property
    def doubts(self) -> list[str]:
        """Why the figure is not to be trusted (empty: nothing known against it)."""
        out = []
        if self.machine.busy:
            out.append(f"busy machine: {self.machine.busy}")
        s = self.spread
        if s is None:
            out.append(f"spread unknown ({len(self.per_run)} batch{'es' if len(self.per_run) != 1 else ''})")
        elif s > WIDE_SPREAD:
            out.append(f"wide spread: ±{s:.1%} between batches")
        return out


def _stable(per_run: list[float]) -> bool:
    now, before = relative_mad(per_run), relative_mad(per_run[:len(per_run) * 2 // 3])
    if now is None or before is None:
        return False
    return abs(now - before) <= max(STABLE_ABS, STABLE * now)


def batch_runs(n_runs: int, per_run: float, min_seconds: float) -> int:
    """Runs per batch: test-backend-ops' n_runs where that graph takes at most two batch
    shares (min_seconds / MIN_BATCHES), else as many runs as fill one share (at least one),
    so that a spread can be had within the time (test-backend-ops' graph for a big op
    takes seconds, and it times that graph once)."""
    share = min_seconds / MIN_BATCHES
    if per_run * n_runs <= 2 * share:
        return n_runs
    return max(1, min(n_runs, int(share / per_run)))


def measure(batch: Callable[[int], float], n_runs: int, min_seconds: float = 1.0,
            max_seconds: float | None = None) -> Measurement:
    """Time `batch` (seconds for the n runs it is given) until at least min_seconds are
    measured over MIN_BATCHES batches and their spread is stable, or max_seconds have
    passed. One run is timed first, and the runs per batch follow each batch's time
    (batch_runs; they only shrink): a machine that slows down mid-case does not stretch
    a batch of test-backend-ops' n_runs to seconds (138 runs of q4_0 took 4 s a batch at a
    load of 9, two batches and the case was over with no spread)."""
    cap = MAX_TIME_FACTOR * min_seconds if max_seconds is None else max_seconds
    watch = Watch()
    per_run: list[float] = []
    total, runs, n = 0.0, 0, n_runs
    if n_runs > 1:
        one = batch(1)
        n = batch_runs(n_runs, one, min_seconds)
        if n == 1:   # that run was the first batch
            total, runs = one, 1
            per_run.append(one)
    while total < cap:
        s = batch(n)
        total += s
        runs += n
        per_run.append(s / n)
        if total >= min_seconds and len(per_run) >= MIN_BATCHES and _stable(per_run):
            break
        n = min(n, batch_runs(n_runs, s / n, min_seconds))
    return Measurement(per_run, runs, watch.stop())
