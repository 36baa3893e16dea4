"""The NumPy reference as a device (NUMPY): useful for `-b NUMPY` self-checks and perf."""
from __future__ import annotations

import time

from cannops.backend.base import Device, RunResult, Support


def _reference():
    from cannops.backend import reference
    return reference


class NumpyDevice(Device):
    name = "NUMPY"   # reference.NAME; the reference is imported when the device is used
    description = "NumPy reference (vectorised, CPU)"
    is_reference = True

    def supports(self, case, graph):
        reference = _reference()
        for n in graph.nodes():
            why = reference.unsupported(n)
            if why:
                return Support(False, why)
        return Support(True)

    def run(self, case, graph, inputs, check):
        t0 = time.perf_counter()
        mem = _reference().compute(graph, inputs)
        seconds = time.perf_counter() - t0
        return RunResult({i: mem.read(graph.tensors[i]) for i in check}, compute_seconds=seconds)

    def time(self, case, graph, inputs, n_runs):
        t0 = time.perf_counter()
        for _ in range(n_runs):
            _reference().compute(graph, inputs)
        return time.perf_counter() - t0


def list_devices():
    return [(NumpyDevice.name, NumpyDevice.description)]


def probe_key(name):
    return name   # the reference's coverage is its sources'


def open_device(name):
    return NumpyDevice()
