"""The NumPy reference as a device (NUMPY): useful for `-b NUMPY` self-checks and perf."""
from __future__ import annotations

import time

from cannops.backend.base import Device, RunResult, Support
from cannops.backend import reference


class NumpyDevice(Device):
    name = reference.NAME
    description = "NumPy reference (vectorised, CPU)"
    is_reference = True

    def supports(self, case, graph):
        for n in graph.nodes():
            why = reference.unsupported(n)
            if why:
                return Support(False, why)
        return Support(True)

    def run(self, case, graph, inputs, check):
        mem = reference.compute(graph, inputs)
        return RunResult({i: mem.read(graph.tensors[i]) for i in check})

    def time(self, case, graph, inputs, n_runs):
        t0 = time.perf_counter()
        for _ in range(n_runs):
            reference.compute(graph, inputs)
        return time.perf_counter() - t0


def list_devices():
    return [(NumpyDevice.name, NumpyDevice.description)]


def open_device(name):
    return NumpyDevice()
