"""A CANN device (real or simulated): a case graph becomes ggml_tensor structs over
device memory from the pool, each op node is handed to the native aclnn layer, and the
checked tensors are copied back after one stream synchronisation."""
from __future__ import annotations

import contextlib
import os
import threading
import time
from typing import Any

import numpy as np

from cannops.backend.base import (SIMULATOR_CLOCK, Device, DeviceError, GradUnsupported, ParamGrad, RunResult,
                                  Support, TracedError, numeric_gradient)
from cannops.backend import hygiene as hyg
from cannops.backend.cost import summarise
from cannops.cases.graph import OP_VALUE, Graph, Tensor
from cannops.cases.implementations import ACLNN
from cannops.cases.inputs import values
from cannops.native._aclnn import ffi, lib

from . import layout, rules, soc
from .errors import CANNError, err_buffer, err_text


GUARD = 4096  # bytes of guard region before and after every tensor (test-backend-ops'
              # 1024-float sentinels); a multiple of 128 keeps the tensor's data aligned


class _Placed:
    """One case graph on the device: its ggml_tensor structs and its memory blocks, each
    tensor between two guard regions filled with a known pattern."""

    def __init__(self, dev: "CANNDevice", graph: Graph):
        self.dev, self.graph = dev, graph
        self.structs: dict[int, Any] = {}   # cffi structs (untyped)
        self.blocks: list[object] = []
        self.guards: list[tuple[str, object]] = []   # (where, device address)
        self.images: dict[int, np.ndarray] = {}      # leaf index -> the bytes uploaded

    def build(self) -> None:
        for t in self.graph.tensors:     # creation order: sources and bases come first
            self.structs[t.index] = self._struct(t)

    def _struct(self, t: Tensor):
        s = ffi.new("struct ggml_tensor *")
        s.type, s.op, s.flags = t.type.value, OP_VALUE[t.op], t.flags
        s.ne, s.nb = list(t.ne), list(t.nb)
        ffi.memmove(s.op_params, bytes(t.op_params), len(t.op_params))
        for i, src in enumerate(t.src):
            if src is not None:
                s.src[i] = self.structs[src.index]
        if t.view_src is None:
            size = max(t.nbytes(), 1)
            block = self.dev._alloc(size + 2 * GUARD)
            self.blocks.append(block)
            s.data = ffi.cast("char *", block) + GUARD
            label = t.name or f"{t.op_desc}#{t.index}"
            self.guards += [(f"before {label}", block), (f"after {label}", s.data + size)]
        else:
            s.view_src = self.structs[t.view_src.index]
            s.view_offs = t.view_offs
            s.data = ffi.cast("char *", s.view_src.data) + t.view_offs
        s.name = t.name.encode()[:63]
        return s

    def _pattern(self, i: int) -> np.ndarray:
        return np.random.default_rng(i).integers(0, 256, GUARD, dtype=np.uint8)

    def upload(self, inputs: dict[int, np.ndarray]) -> None:
        for i, (_, addr) in enumerate(self.guards):
            pattern = self._pattern(i)
            self.dev._check(lib.ops_cann_upload(self.dev.ctx, addr, ffi.from_buffer(pattern), GUARD,
                                                *self.dev._err()), "upload guard")
        for t in self.graph.leaves:
            if t.index in inputs:
                data = np.ascontiguousarray(inputs[t.index])
                if data.nbytes != t.nbytes():
                    raise DeviceError(f"input {t.index}: {data.nbytes} bytes for a tensor of {t.nbytes()}")
                data = layout.to_device(t.type, data)   # ggml-cann's set_tensor reorders q4_0 / q8_0
                self.images[t.index] = data
                self.dev._check(lib.ops_cann_upload(self.dev.ctx, self.structs[t.index].data,
                                                    ffi.from_buffer(data), data.nbytes,
                                                    *self.dev._err()), "upload")

    def poison(self) -> None:
        """Every op output that owns its memory filled with hygiene.POISON (--poison)."""
        for t in filter(Tensor.nbytes, hyg.poisoned(self.graph)):
            fill = np.full(t.nbytes(), hyg.POISON, np.uint8)
            self.dev._check(lib.ops_cann_upload(self.dev.ctx, self.structs[t.index].data, ffi.from_buffer(fill),
                                                t.nbytes(), *self.dev._err()), "upload poison")

    def compute(self, nodes: list[Tensor] | None = None) -> None:
        for node in self.graph.nodes() if nodes is None else nodes:
            self.dev._check(lib.ops_cann_compute(self.dev.ctx, self.structs[node.index],
                                                 *self.dev._err()), f"{node.op_key} #{node.index}")

    def overruns(self) -> list[str]:
        """Guard regions a kernel wrote into (after synchronisation)."""
        bad, buf = [], np.empty(GUARD, np.uint8)
        for i, (where, addr) in enumerate(self.guards):
            self.dev._check(lib.ops_cann_download(self.dev.ctx, ffi.from_buffer(buf), addr, GUARD,
                                                  *self.dev._err()), "download guard")
            if not np.array_equal(buf, self._pattern(i)):
                bad.append(f"sentinel mismatch: {where}")
        return bad

    def write(self, t: Tensor, offset: int, data: np.ndarray) -> None:
        """Bytes into a placed tensor at `offset` (one element of a gradient parameter)."""
        self.dev._check(lib.ops_cann_upload(self.dev.ctx, self.structs[t.index].data + offset,
                                            ffi.from_buffer(data), data.nbytes, *self.dev._err()), "upload")

    def read(self, t: Tensor, cache: dict[int, np.ndarray]) -> np.ndarray:
        base = t.base
        if base.index not in cache:
            cache[base.index] = self.raw(base)
        return values(t, cache[base.index], t.view_offs).copy()

    def raw(self, base: Tensor) -> np.ndarray:
        """A base tensor's bytes in ggml's layout, as ggml-cann's get_tensor gives them."""
        return layout.from_device(base.type, self.image(base))

    def image(self, base: Tensor) -> np.ndarray:
        """A base tensor's bytes as the device holds them."""
        buf = np.empty(base.nbytes(), np.uint8)
        self.dev._check(lib.ops_cann_download(self.dev.ctx, ffi.from_buffer(buf), self.structs[base.index].data,
                                              buf.nbytes, *self.dev._err()), "download")
        return buf

    def release(self) -> None:
        # queued work may still use these blocks: the stream must be drained first
        lib.ops_cann_synchronize(self.dev.ctx, *self.dev._err())
        for p in self.blocks:
            lib.ops_cann_release(self.dev.ctx, p)
        self.blocks.clear()
        with _uncounted(self.dev):   # what the pool gives back depends on the cases before
            lib.ops_cann_pool_trim(self.dev.ctx, *self.dev._err())


def _uncounted(dev):
    if not dev.simulated:
        return contextlib.nullcontext()
    from .sim import cost
    return cost.paused()


def has_handler(node: Tensor) -> bool:
    """Whether the native layer has a handler for the node's op (and sub-op)."""
    sub = node.param_i32(0) if node.op_key != node.op else -1   # dispatch.c's OPS_ANY
    return bool(lib.ops_cann_has_handler(OP_VALUE[node.op], sub))


class CANNRules(Device):
    """What a CANN device supports, decided without the device: the rules of its SoC family
    (rules.py) and the native layer's handlers, which need no context and no runtime. A
    probe (`ops support`) asks these in any worker, forked, or beside another device's
    decisions on the same graph (cli/engine/runner.py); CANNDevice decides by them too."""

    def __init__(self, name: str, description: str, soc_name: str):
        self.name, self.description = name, description
        # the SoC the runtime reports (CANN-SIM: the simulated one, CANN_SIM_SOC): its
        # family picks the rules' SoC branches, as ggml-cann's build does (ASCEND_310P)
        self.soc_name = soc_name
        self.soc = soc.family(soc_name)

    @property   # over Device's class attribute: the SoC decides it
    def implements(self) -> tuple[str, ...]:   # type: ignore[override]
        """ops' aclnn layer, and on another SoC than the 910B that SoC's too (aclnn:310P): a
        note of the 310P is never taken for the 910B's."""
        return (ACLNN,) if self.soc == soc.DEFAULT else (f"{ACLNN}:{self.soc}", ACLNN)

    def supports(self, case, graph: Graph) -> Support:
        # the case's op names it as the Ascend CI runs it (a fused case's); None: the nodes'
        return rules.supports(graph, has_handler, self.soc, getattr(case, "op", None))


class CANNDevice(CANNRules):
    has_handler = staticmethod(has_handler)

    def __init__(self, name: str, description: str, index: int, simulated: bool, open_devices: list | None = None):
        self.index, self.simulated = index, simulated
        self._open_devices = open_devices   # the runtime's devices not closed yet, this one among them
        self.is_cpu = simulated   # an NPU takes the accelerator perf targets; the simulator runs on the CPU
        # `time` reads device events around the queued launches (dispatch.c, ops_cann_time):
        # on the simulator those are stamped as its queue runs on the host
        self.clock = (SIMULATOR_CLOCK if simulated else
                      "device events (aclrtRecordEvent / aclrtEventElapsedTime on the stream)")
        self._lock = threading.Lock()
        self._errbuf = err_buffer()
        self.ctx = lib.ops_cann_ctx_new(index, self._errbuf, len(self._errbuf))
        if self.ctx == ffi.NULL:
            raise DeviceError(f"{name}: {err_text(self._errbuf)}")
        super().__init__(name, description, ffi.string(lib.ops_cann_soc_name()).decode())

    # --- helpers ---
    def _err(self):
        self._errbuf[0] = b"\0"
        return self._errbuf, len(self._errbuf)

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            raise CANNError(rc, f"{what}: {err_text(self._errbuf)}")

    def _alloc(self, size: int):
        p = lib.ops_cann_alloc(self.ctx, size, *self._err())
        if p == ffi.NULL:
            raise CANNError(lib.ACL_ERROR_BAD_ALLOC, f"device memory: {err_text(self._errbuf)}")
        return p

    def _place(self, graph: Graph) -> _Placed:
        if self.ctx is None:
            raise DeviceError(f"{self.name} is closed")
        return _Placed(self, graph)   # built inside the caller's try, released in its finally

    # --- Device interface ---
    def memory(self):
        free, total = ffi.new("size_t *"), ffi.new("size_t *")
        if lib.ops_cann_mem_info(self.ctx, free, total, *self._err()) != 0:
            return None
        return int(total[0]), int(free[0])

    def run(self, case, graph: Graph, inputs: dict[int, np.ndarray], check: list[int],
            hygiene: hyg.Hygiene = hyg.NONE) -> RunResult:
        if not self.simulated:
            return self._run(graph, inputs, check, hygiene)[0]
        with self.counted() as counted:
            result = self._run(graph, inputs, check, hygiene)[0]
        result.cost = counted
        return result

    @contextlib.contextmanager
    def counted(self):
        """The simulator counts the device work of what runs inside (sim/cost.py); the cost
        goes into the dict it gives. Allocations are the blocks the case takes from the
        layer's pool and gives back: the runtime's aclrtMalloc / aclrtFree behind them
        depend on what the pool holds from the cases before (and so on the worker)."""
        from .sim import cost
        takes, returns = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        lib.ops_cann_pool_counts(self.ctx, takes, returns)
        before = takes[0], returns[0]
        cost.start()
        counted: dict = {}
        try:
            yield counted
        finally:
            counted.update(summarise(cost.stop()))
            lib.ops_cann_pool_counts(self.ctx, takes, returns)
            counted["allocs"], counted["frees"] = takes[0] - before[0], returns[0] - before[1]

    def _run(self, graph: Graph, inputs: dict[int, np.ndarray], check: list[int],
             hygiene: hyg.Hygiene = hyg.NONE) -> tuple[RunResult, dict]:
        """The run, and the device address of each checked node's base (ops repro)."""
        with self._lock:
            placed = self._place(graph)
            try:
                placed.build()
                placed.upload(inputs)
                if hygiene.poison:
                    placed.poison()
                t0 = time.perf_counter()
                placed.compute()
                self._check(lib.ops_cann_synchronize(self.ctx, *self._err()), "synchronize")
                compute = time.perf_counter() - t0
                cache: dict[int, np.ndarray] = {}
                outputs = {i: placed.read(graph.tensors[i], cache) for i in check}
                raw = lambda t: cache[t.index] if t.index in cache else placed.raw(t)   # noqa: E731
                problems = hyg.problems(graph, hygiene, placed.images, placed.image,
                                        lambda t, b: layout.from_device(t.type, b))
                result = RunResult(outputs, placed.overruns() + problems,
                                   unwritten=hyg.unwritten(graph, hygiene, check, raw), compute_seconds=compute)
                bases = {i: int(ffi.cast("uintptr_t", placed.structs[graph.tensors[i].base.index].data))
                         for i in check}
                return result, bases
            finally:
                placed.release()

    def run_recorded(self, case, graph: Graph, inputs: dict[int, np.ndarray], check: list[int], built=None):
        """A run recorded for a reproducer (ops repro): every ACL runtime and aclnn call with
        what it needs to be made again. The simulator records them (sim/trace.py, repro); a
        real device's are recorded by the layer itself (native/aclnn/trace.c), as they are on
        the simulator too with OPS_REPRO_RECORDER=native: the same records either way.
        `built` is not called: the calls are the program, recorded as they are made, so a
        run that kills its process leaves none."""
        from .repro import CallProgram, NativeRecorder
        recorder: Any   # sim/trace.py or a NativeRecorder: each has start(repro), stop() and ON
        if self.simulated and os.environ.get("OPS_REPRO_RECORDER", "") != "native":
            from .sim import trace as recorder
        else:
            recorder = NativeRecorder()
        recorder.start(repro=True)
        try:
            result, bases = self._run(graph, inputs, check)
        except DeviceError as e:   # a refused call: the program makes it and expects the refusal
            return CallProgram.of(recorder.stop(), {}, {}, check, str(e))
        finally:
            rec = recorder.stop() if recorder.ON else None
        return CallProgram.of(rec, result.outputs, bases, check)

    def reproducer(self, steps, programs, title: str) -> dict[str, str]:
        """repro.c and its Makefile (ops repro): the aclnn calls against a CANN toolkit."""
        from cannops.backend.repro import sim_environment
        from . import repro
        text, files = repro.program(steps, programs, title, self.index)
        return {"repro.c": text, "Makefile": repro.build_files(title, sim_environment()), **files}

    def repro_versions(self) -> dict:
        from .repro import versions
        return versions(self.simulated, self.soc_name)

    can_trace = True
    hygienic = True
    timed_cost: dict | None = None   # time(): its warm-up compute's device work, counted (simulator)   # honours --poison and --check-inputs (backend/hygiene.py)

    def run_traced(self, case, graph: Graph, inputs: dict[int, np.ndarray], check: list[int],
                   data: bool = False, hygiene: hyg.Hygiene = hyg.NONE) -> RunResult:
        """The simulator records every call (sim/trace.py); with `data`, each operator's
        inputs and outputs too, evaluated again in float64 (sim/blame.py). On a real
        device the layer records its own aclnn calls (native/aclnn/trace.c), with no data:
        there a FAIL's blame is the call that failed, if any."""
        if not self.simulated:
            return self._run_native_traced(case, graph, inputs, check, hygiene)
        from .sim import blame, trace
        trace.start(data)
        try:
            result = self.run(case, graph, inputs, check, hygiene)
        except DeviceError as e:
            raise TracedError(str(e), trace.stop().calls) from e
        finally:
            rec = trace.stop() if trace.ON else None
        assert rec is not None   # the run returned: its recording was on until now
        if data:
            blame.evaluate(rec)
        result.calls = rec.calls
        if rec.dropped:
            result.calls.append({"call": "(trace)", "note": f"inputs and outputs beyond "
                                 f"{trace.DATA_LIMIT >> 20} MiB not kept: later calls not replayed"})
        return result

    def _run_native_traced(self, case, graph, inputs, check, hygiene: hyg.Hygiene = hyg.NONE) -> RunResult:
        import json
        lib.ops_cann_trace_start()
        try:
            result = self.run(case, graph, inputs, check, hygiene)
        except DeviceError as e:
            raise TracedError(str(e), json.loads(ffi.string(lib.ops_cann_trace_stop()))) from e
        finally:
            text = ffi.string(lib.ops_cann_trace_stop()).decode()   # stopped: "[]"
        result.calls = json.loads(text)
        return result

    def time(self, case, graph: Graph, inputs: dict[int, np.ndarray], n_runs: int) -> float:
        with self._lock:
            placed = self._place(graph)
            try:
                placed.build()
                placed.upload(inputs)
                counting: contextlib.AbstractContextManager[dict] = (
                    self.counted() if self.simulated else contextlib.nullcontext({}))
                with counting as counted:
                    placed.compute()                  # warm-up: the whole graph once
                    self._check(lib.ops_cann_synchronize(self.ctx, *self._err()), "synchronize")
                # the simulator: the device work of one compute of the graph (ops perf's headline)
                self.timed_cost = counted or None
                ms = ffi.new("float *")
                assert graph.out is not None, "a graph without its output node"
                self._check(lib.ops_cann_time(self.ctx, placed.structs[graph.out.index], n_runs,
                                              ms, *self._err()), "timing")
                return ms[0] / 1e3
            finally:
                placed.release()

    def grad(self, case, graph: Graph, inputs: dict[int, np.ndarray]) -> list[ParamGrad]:
        """The backward nodes libggml builds for the case (backend/ggml/backward.py), each
        realised by the native layer as in `run`; finite differences of the forward nodes."""
        from cannops.backend.ggml.backward import backward_case_graph
        bw = backward_case_graph(graph, inputs)
        s = rules.supports(bw.graph, self.has_handler, self.soc)
        if not s:
            raise GradUnsupported(f"{self.name}: {s.reason}")
        with self._lock:
            placed = self._place(bw.graph)
            try:
                placed.build()
                placed.upload(bw.inputs)
                placed.compute()
                self._check(lib.ops_cann_synchronize(self.ctx, *self._err()), "synchronize")
                cache: dict[int, np.ndarray] = {}
                loss, cell = np.empty(1, np.float32), np.empty(1, np.float32)

                loss_node = bw.graph.out
                assert loss_node is not None, "a graph without its output node"

                def forward() -> float:
                    placed.compute(bw.forward)
                    self._check(lib.ops_cann_synchronize(self.ctx, *self._err()), "synchronize")
                    self._check(lib.ops_cann_download(self.ctx, ffi.from_buffer(loss),
                                                      placed.structs[loss_node.index].data, 4,
                                                      *self._err()), "download loss")
                    return float(loss[0])
                out = []
                for index, leaf in bw.params.items():
                    t, g = graph.tensors[index], bw.grads[index]
                    analytic = (np.zeros(t.nelements(), np.float32) if g is None
                                else placed.read(g, cache).reshape(-1))

                    def set_element(i, v, leaf=leaf):
                        cell[0] = v
                        placed.write(leaf, 4 * i, cell)
                    numeric = numeric_gradient(inputs[index], set_element, forward,
                                               case.family.grad_setting("grad_eps", case.params),
                                               case.family.grad_setting("grad_precise", case.params))
                    out.append(ParamGrad(t.name or f"#{index}", analytic, numeric))
                return out
            finally:
                placed.release()

    def close(self) -> None:
        with self._lock:
            if self.ctx is not None:
                lib.ops_cann_ctx_free(self.ctx, *self._err())
                self.ctx = None
        if self._open_devices is not None and self in self._open_devices:
            self._open_devices.remove(self)
