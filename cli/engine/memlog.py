"""Where a worker's memory and CPU go, case by case and phase by phase (inputs, reference,
the device's run, the comparison), written as JSON lines to the file OPS_MEMORY_LOG names:
what `bench/catalog35.py` attributes the whole catalog's peak and cold CPU with
(docs/memory.md). Off, it costs nothing: no worker opens it. No NumPy here (the worker's
module imports this before NumPy is)."""
from __future__ import annotations

import json
import os
import time

ENV = "OPS_MEMORY_LOG"
PHASES = ("inputs", "reference", "run", "judge")


def _status_kib(field: bytes) -> int:
    with open("/proc/self/status", "rb") as f:
        return int(f.read().split(field)[1].split()[0])


def _reset_peak() -> bool:
    """Start this process' VmHWM again from its current RSS (Linux: clear_refs 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


class MemoryLog:
    """One worker's log: `start()` before a case, `phase(name, nbytes)` at the end of each
    phase (its peak resident set since the last mark, its CPU seconds, the bytes of the
    arrays it made), `end(result)` after the case (one line per case)."""

    def __init__(self, path: str):
        self.file = open(path, "a", buffering=1)   # a line each: several workers append
        self.rec: dict | None = None

    @classmethod
    def from_env(cls) -> MemoryLog | None:
        path = os.environ.get(ENV)
        return cls(path) if path else None

    def _mark(self) -> tuple[float, float]:
        return time.time(), time.process_time()

    def start(self) -> None:
        exact = _reset_peak()
        t, cpu = self._mark()
        self.rec = {"pid": os.getpid(), "t0": t, "base_mib": _status_kib(b"VmRSS:") / 1024,
                    "exact": exact, "phases": {}}
        self._last = cpu

    def phase(self, name: str, arrays=()) -> None:
        if self.rec is None:
            return
        nbytes = sum(getattr(a, "nbytes", 0) for a in arrays)
        _, cpu = self._mark()
        self.rec["phases"][name] = {"peak_mib": round(_status_kib(b"VmHWM:") / 1024, 1),
                                    "cpu": round(cpu - self._last, 4), "mib": round(nbytes / 2**20, 1)}
        self._last = cpu
        _reset_peak()

    def end(self, result) -> None:
        if self.rec is None:
            return
        self.phase("rest")
        t, _ = self._mark()
        self.rec.update(case=f"{result.op}({result.params})", op=result.op, status=result.status,
                        t1=t, end_mib=round(_status_kib(b"VmRSS:") / 1024, 1),
                        peak_mib=max(p["peak_mib"] for p in self.rec["phases"].values()))
        self.file.write(json.dumps(self.rec) + "\n")
        self.rec = None
