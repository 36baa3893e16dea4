"""FAULTY: a test-only device that misbehaves on chosen cases, the way real backends do.

Enabled only when OPS_FAULTY is set, as `OPS_FAULTY="abort=ABS,segv=NEG,hang=EXP,overrun=SQR"`:
each key names a fault, each value a comma-free op name (several with '+': `abort=ABS+SGN`).
`badgrad=OP` is a broken backward: `ops grad` gets that op's backprop gradients scaled by
1.5. `mod7=OP` is a kernel wrong at some shapes only: its last output element is off by 1
when the output's ne[0] % 7 == 3 (for `ops fuzz` to find and shrink). `slow=OP` takes 0.1 s
per case, as a kernel that takes its time (a run that lasts long enough for a pool to grow
to its -j). `nomem=OP` raises MemoryError, as a host out of memory. `segvprobe=OP` and
`hangprobe=OP` segfault or hang when asked whether the device supports a case of OP (a
probe), as ggml 0.20.2's CPU backend segfaults on 0.25.3's DSV4_HC_POST. Every other case
is computed by the NumPy reference, so it passes (in `ops grad`, the reference runs
libggml's backward graph of the case). OPS_FAULTY_DEVICES=N
lists N of them (FAULTY0, FAULTY1, ...), as a host with several devices of one kind.
OPS_FAULTY_REOPEN=die|hang: once a worker crashed (abort, segv) on a device, opening that
device again dies or hangs, as a device left wedged by a crash.
"""
from __future__ import annotations

import os
import signal
import tempfile
import time

import numpy as np

from cannops.backend import reference
from cannops.backend.base import Device, RunResult, Support

GUARD = 1024  # float32 words of guard region after the output, as test-backend-ops' sentinels


def _faults() -> dict[str, str]:
    spec = os.environ.get("OPS_FAULTY", "")
    out = {}
    for item in filter(None, spec.split(",")):
        fault, _, ops = item.partition("=")
        for op in ops.split("+"):
            out[op] = fault
    return out


class FaultyDevice(Device):
    name = "FAULTY"
    description = "test-only device: aborts, segfaults, hangs or overruns on chosen ops"

    def __init__(self, name: str = "FAULTY"):
        self.name = name
        self.faults = _faults()
        reopen = os.environ.get("OPS_FAULTY_REOPEN")
        if reopen and os.path.exists(self._crash_mark()):
            if reopen == "hang":
                time.sleep(3600)
            os.abort()

    def _crash_mark(self) -> str:
        # one per run (the workers' parent) and device
        return os.path.join(tempfile.gettempdir(), f"ops-faulty-{os.getppid()}-{self.name}.crashed")

    def _crash(self, signum: int) -> None:
        if os.environ.get("OPS_FAULTY_REOPEN"):
            open(self._crash_mark(), "w").close()
        if signum == signal.SIGABRT:
            os.abort()
        os.kill(os.getpid(), signum)

    def supports(self, case, graph):
        fault = self.faults.get(case.op)
        if fault == "segvprobe":
            self._crash(signal.SIGSEGV)
        if fault == "hangprobe":
            time.sleep(3600)
        return Support(True)

    def grad(self, case, graph, inputs):
        from cannops.backend.ggml.backward import grad_through_runs
        grads = grad_through_runs(self, case, graph, inputs)
        if self.faults.get(case.op) == "badgrad":
            for g in grads:
                g.analytic = g.analytic * np.float32(1.5)
        return grads

    def run(self, case, graph, inputs, check):
        fault = self.faults.get(case.op)
        if fault == "abort":
            self._crash(signal.SIGABRT)
        if fault == "segv":
            self._crash(signal.SIGSEGV)
        if fault == "hang":
            time.sleep(3600)
        if fault == "slow":
            time.sleep(0.1)
        if fault == "nomem":
            raise MemoryError()   # the host's memory ran out while the device ran it
        mem = reference.compute(graph, inputs)
        outputs, problems = {}, []
        for i in check:
            value = mem.read(graph.tensors[i])
            # the output lives in a buffer followed by a guard region
            buf = np.empty(value.size + GUARD, dtype=np.float32)
            guard = np.random.default_rng(i).standard_normal(GUARD).astype(np.float32)
            buf[value.size:] = guard
            buf[:value.size] = value.reshape(-1)
            if fault == "mod7" and graph.tensors[i].ne[0] % 7 == 3:
                buf[value.size - 1] += 1.0
            if fault == "overrun":
                buf[value.size:value.size + 7] = 0.0  # a kernel that writes past its end
            if not np.array_equal(buf[value.size:], guard):
                problems.append(f"sentinel mismatch: {graph.tensors[i].name or graph.tensors[i].op_desc}")
            outputs[i] = buf[:value.size].reshape(value.shape)
        return RunResult(outputs, problems)


def list_devices():
    if not os.environ.get("OPS_FAULTY"):
        return []
    n = os.environ.get("OPS_FAULTY_DEVICES")
    names = [f"FAULTY{i}" for i in range(int(n))] if n else ["FAULTY"]
    return [(name, FaultyDevice.description) for name in names]


def open_device(name):
    return FaultyDevice(name)
