"""What a case may ask of the worker process it runs in (engine/execute.py's cases, the
context engine/worker.py gives them); no NumPy here: the worker's module imports it
before NumPy is."""
from __future__ import annotations

import contextlib


class WorkerContext:
    """What a case may ask of the worker it runs in, handed to each case: this one does
    nothing (a case run in-process, as the tests do); a worker's (engine/worker.py) times
    its own work apart from the case's timeout, which is the device's."""

    def prepare_inputs(self, case, seed: int, ref_cache: str | None) -> None:
        """Called just before a case's inputs are made: a worker builds the quantizer
        tables they need here, apart from the case's own time."""

    def host_work(self):
        """A context manager around a big case's inputs, reference and comparison (leaves of
        execute.HOST_WORK_ELEMENTS elements or more): MUL_MAT_ID's 128 q4_K experts of 4096 x 2048
        take 79 s to draw and quantize and 25 s for the reference, where ggml's CPU computes
        in 0.1 s."""
        return contextlib.nullcontext()

    def memory_turn(self, nbytes: int):
        """A context manager around the whole of a case whose tensors take `nbytes`: where
        that is a big share of the host's memory, the case waits until no other worker of
        its pool runs such a case (engine/worker.py), so that -j big cases at once do not
        add up (their peak is 2-3 times their tensors: inputs, reference, device, output)."""
        return contextlib.nullcontext()

    def phase(self, name: str, arrays=()) -> None:
        """The end of one phase of a case (engine/memlog.py PHASES), which made `arrays` (an
        iterable, read only where OPS_MEMORY_LOG is set: a worker then logs the phase's peak
        memory, CPU and the arrays' size)."""


IN_PROCESS = WorkerContext()
