"""GGMLDevice: runs a case graph on one ggml device, as test-backend-ops does.

The case graph is replayed into a ggml context through libggml's own constructors
(ops/), and each constructed tensor is checked against our node (type, ne, nb, op,
op_params, src, view_src, view_offs): a difference is a bug of our case model and is
raised as DeviceError. `run` surrounds every tensor with 1024-float sentinels (guard
regions, as test-backend-ops' eval) and reports any that the device overwrote; `time`
is test-backend-ops' eval_perf: the output node repeated n_runs times in one graph.
"""
from __future__ import annotations

import os
import time as _time
from typing import Callable

import numpy as np

from cannops.backend import hygiene as hyg
from cannops.backend.base import (Device, DeviceError, GradUnsupported, ParamGrad, RunResult, Support,
                                  numeric_gradient)
from cannops.cases.graph import GGML_MAX_SRC, OP_VALUE, Graph, Tensor
from cannops.cases.inputs import values

from . import ops
from .library import PREFIX, G, TooOld, ffi, ggml_version, lib, libdir, unbound_symbol
from .ops import DEFER, find_replay, load_all, same_params
from .recorder import GraphProgram, Recorder

SENTINEL_SIZE = 1024      # f32 elements, as test-backend-ops
PERF_GRAPH_NODES = 8192   # test-backend-ops' eval_perf graph size
DEV_TYPES = ("CPU", "GPU", "IGPU", "ACCEL", "META")  # enum ggml_backend_dev_type
NULL = ffi.NULL


_TENSOR_OVERHEAD = lib.ggml_tensor_overhead()


def label(t: Tensor) -> str:
    return t.name or f"{t.op_desc}#{t.index}"


class Replay:
    """One case graph rebuilt in a ggml context: tensors by our index, sentinels,
    and (once allocated) the backend buffer. free() releases everything."""

    __slots__ = ("ctx", "ptrs", "sentinels", "buf", "gf", "graph_size")

    def __init__(self, ctx, n: int, graph_size: int):
        self.ctx = ctx
        self.ptrs: list = [None] * n
        self.sentinels: list[tuple[object, str]] = []  # (tensor, label of the tensor before)
        self.buf = None
        self.gf = None
        self.graph_size = graph_size

    def free(self) -> None:
        if self.buf is not None:
            lib.ggml_backend_buffer_free(self.buf)
            self.buf = None
        if self.ctx is not None:
            lib.ggml_free(self.ctx)
            self.ctx = None


GRAPH_SIZE = 2048   # GGML_DEFAULT_GRAPH_SIZE, test-backend-ops' grad graphs


def _no_backward(message: str) -> str:
    """ggml's abort in ggml_build_backward_expand, in a few words."""
    if "view_src" in message:
        return "no backward in ggml for an in-place node"
    why = message.rsplit(".c:", 1)[-1].split(": ", 1)[-1].strip()   # after "ggml.c:NNNN: "
    return f"no backward in ggml ({why})"


class Backward:
    """A case graph replayed by a ggml device into one no_alloc context, with its
    parameters marked, its loss, the forward graph `gf` and the backward graph `gb`."""

    def __init__(self, device, graph: Graph):
        self.graph = graph
        self.replay = r = device.replay(graph, grads=True)
        try:
            for t in graph.params():
                G.ggml_set_param(r.ptrs[t.index])
            loss = r.ptrs[graph.out.index]
            if not lib.ggml_is_scalar(loss):
                loss = G.ggml_sum(r.ctx, loss)
                lib.ggml_set_name(loss, b"sum_of_out")
            G.ggml_set_loss(loss)
            self.loss = loss
            self.gf = G.ggml_new_graph_custom(r.ctx, GRAPH_SIZE, True)
            G.ggml_build_forward_expand(self.gf, loss)
            self.gb = G.ggml_new_graph_custom(r.ctx, GRAPH_SIZE, True)
            G.ggml_graph_cpy(self.gf, self.gb)
            try:
                G.ggml_build_backward_expand(r.ctx, self.gb, ffi.cast("struct ggml_tensor **", NULL))
            except DeviceError as e:
                # an op without a backward in ggml, or an in-place node: ggml aborts here
                # (test-backend-ops itself dies on such a case)
                raise GradUnsupported(_no_backward(str(e))) from None
        except BaseException:
            r.free()
            raise

    def grad_of(self, t: Tensor):
        """The ggml tensor holding t's gradient in gb, or NULL (the output does not depend on t)."""
        return lib.ggml_graph_get_grad(self.gb, self.replay.ptrs[t.index])

    def tensors(self):
        """Every ggml tensor of the context, in creation (= topological) order."""
        p = lib.ggml_get_first_tensor(self.replay.ctx)
        while p != NULL:
            yield p
            p = lib.ggml_get_next_tensor(self.replay.ctx, p)

    def free(self) -> None:
        self.replay.free()


class GGMLDevice(Device):
    hygienic = True   # honours --poison and --check-inputs (backend/hygiene.py)

    def __init__(self, dev):
        load_all()
        self.dev = dev
        self.ggml_name = ffi.string(lib.ggml_backend_dev_name(dev)).decode()
        self.name = PREFIX + self.ggml_name
        self.description = ffi.string(lib.ggml_backend_dev_description(dev)).decode()
        self.dev_type = DEV_TYPES[lib.ggml_backend_dev_type(dev)]
        self._backend = None
        self._set_threads = None
        self._n_threads = os.cpu_count() or 1
        self._perf: tuple[Graph, int, Replay] | None = None
        self._timed_events: list[dict] = []   # the simulated toolkit: the timed computes' cost events
        self.computes = self.runs = 0
        self._pool = np.zeros((0, SENTINEL_SIZE), np.float32)
        self._rng = np.random.default_rng(0x5E7)
        # test hook: called with the Replay after compute, before the checks
        self.after_compute: Callable[[Replay], None] | None = None

    # --- device facts ---
    @property
    def implements(self) -> tuple[str, ...]:
        """ggml's backend of this device: ggml-cpu (cases/implementations.py)."""
        return (f"ggml-{self.ggml_name.lower()}",)

    @property
    def is_cpu(self) -> bool:
        """test-backend-ops picks its perf targets (flops / bytes per run) by this."""
        return self.dev_type == "CPU"

    def memory(self):
        free, total = ffi.new("size_t *"), ffi.new("size_t *")
        lib.ggml_backend_dev_memory(self.dev, free, total)
        return int(total[0]), int(free[0])

    @property
    def n_threads(self) -> int:
        return self._n_threads

    @n_threads.setter
    def n_threads(self, n: int) -> None:
        self._n_threads = int(n)
        if self._backend is not None and self._set_threads is not None:
            self._set_threads(self._backend, self._n_threads)

    @property
    def backend(self):
        """The ggml backend of this device, created once and reused by every case."""
        if self._backend is None:
            be = lib.ggml_backend_dev_init(self.dev, NULL)
            if not be:
                raise DeviceError(f"{self.name}: ggml_backend_dev_init failed")
            reg = lib.ggml_backend_dev_backend_reg(self.dev)
            fn = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_set_n_threads")
            if fn:
                self._set_threads = ffi.cast("ggml_backend_set_n_threads_t", fn)
                self._set_threads(be, self._n_threads)
            self._backend = be
        return self._backend

    def close(self) -> None:
        self._drop_perf()
        if self._backend is not None:
            lib.ggml_backend_free(self._backend)
            self._backend = None

    # --- replay ---
    def replay(self, graph: Graph, sentinels: bool = False, graph_size: int = 0,
               grads: bool = False, builder=G) -> Replay:
        """Rebuild every tensor of the graph in a fresh no_alloc ggml context (with `grads`,
        room for a backward graph too: Backward, above), calling the constructors through
        `builder` (the guarded lib, or ops repro's Recorder around it)."""
        n = len(graph.tensors)
        graph_size = max(graph_size, 2 * n + 16)
        n_objs = objects(n, sentinels)
        mem = _TENSOR_OVERHEAD * n_objs + lib.ggml_graph_overhead_custom(graph_size, False)
        if grads:   # test-backend-ops' eval_grad: 128 tensors and two graphs with gradients
            mem += _TENSOR_OVERHEAD * (128 + 4 * n) + 2 * lib.ggml_graph_overhead_custom(GRAPH_SIZE, True)
        params = ffi.new("struct ggml_init_params *", {
            "mem_size": mem, "mem_buffer": NULL, "no_alloc": True})
        ctx = lib.ggml_init(params[0])
        if not ctx:
            raise DeviceError("ggml_init failed")
        r = Replay(ctx, n, graph_size)
        ops._current = r.ptrs
        try:
            if sentinels:
                self._add_sentinel(r, "(start)")
            deferred = set()
            for t in graph.tensors:
                if t.op == "NONE":
                    p = builder.ggml_new_tensor(ctx, t.type.value, 4, t.ne)
                else:
                    fn = find_replay(t)
                    if fn is None:
                        raise DeviceError(f"no ggml replay for {t.op_desc} (node #{t.index} {label(t)})")
                    srcs = [NULL if s is None or r.ptrs[s.index] is None else r.ptrs[s.index]
                            for s in t.src]
                    p = fn(builder, ctx, t, srcs)
                    if p is DEFER:
                        deferred.add(t.index)
                        continue
                self._bind(r, t, p, builder)
                if sentinels and t.view_src is None:
                    self._add_sentinel(r, label(t))
            unbound = [graph.tensors[i] for i in sorted(deferred) if r.ptrs[i] is None]
            if unbound:
                raise DeviceError(f"deferred node {unbound[0]!r} was built by no later constructor")
        except BaseException:
            r.free()
            raise
        return r

    def _add_sentinel(self, r: Replay, after: str) -> None:
        s = G.ggml_new_tensor_1d(r.ctx, lib.GGML_TYPE_F32, SENTINEL_SIZE)
        lib.ggml_set_name(s, b"sent_%d" % len(r.sentinels))
        r.sentinels.append((s, after))

    def _bind(self, r: Replay, t: Tensor, p, builder=G) -> None:
        """Map node t to ggml tensor p; nodes that p's constructor built on the way
        (deferred ones) are found through p's src / view_src links."""
        if not p:
            raise DeviceError(f"ggml replay of node #{t.index} {label(t)} ({t.op_desc}) returned NULL")
        r.ptrs[t.index] = p
        for i, s in enumerate(t.src):
            if s is not None and r.ptrs[s.index] is None and i < GGML_MAX_SRC:
                self._bind(r, s, p.src[i], builder)
        if t.view_src is not None and r.ptrs[t.view_src.index] is None:
            self._bind(r, t.view_src, p.view_src, builder)
        if t.name:
            builder.ggml_set_name(p, t.name.encode()[:63])
        _check(r, t, p)

    # --- memory ---
    def _allocate(self, r: Replay) -> None:
        buf = lib.ggml_backend_alloc_ctx_tensors(r.ctx, self.backend)
        if not buf:
            raise DeviceError(f"failed to allocate tensors [{self.name}]")
        r.buf = buf
        lib.ggml_backend_buffer_clear(buf, 0)  # op outputs start at zero, as in the reference

    def _upload(self, r: Replay, graph: Graph, inputs: dict[int, np.ndarray]) -> None:
        for t in graph.tensors:
            if t.op != "NONE":
                continue
            p = r.ptrs[t.index]
            size = lib.ggml_nbytes(p)
            data = inputs.get(t.index)
            if data is None or size == 0:
                continue
            data = np.ascontiguousarray(data)
            if data.nbytes != size:
                raise DeviceError(f"input of leaf #{t.index} {label(t)}: {data.nbytes} bytes, "
                                  f"ggml_nbytes = {size}")
            lib.ggml_backend_tensor_set(p, ffi.from_buffer(data), 0, size)

    def _sentinel_data(self, k: int) -> np.ndarray:
        if len(self._pool) < k:
            more = self._rng.uniform(-1, 1, (max(k, 2 * len(self._pool)) - len(self._pool),
                                             SENTINEL_SIZE)).astype(np.float32)
            self._pool = np.concatenate([self._pool, more])
        return self._pool[:k]

    def _download(self, t: Tensor, p) -> np.ndarray:
        """Logical values (shape ne[::-1], quantized -> f32) of a tensor, through its strides."""
        return np.ascontiguousarray(values(t, _raw(p)))

    def _poison(self, r: Replay, graph: Graph) -> None:
        """Every op output that owns its memory filled with hygiene.POISON (--poison), by
        tensor_set: a backend's buffer need not implement memset_tensor."""
        for t in hyg.poisoned(graph):
            size = lib.ggml_nbytes(r.ptrs[t.index])
            if size:
                fill = np.full(size, hyg.POISON, np.uint8)
                lib.ggml_backend_tensor_set(r.ptrs[t.index], ffi.from_buffer(fill), 0, size)

    # --- the Device interface ---
    def supports(self, case, graph: Graph) -> Support:
        try:
            r = self.replay(graph)
        except AttributeError as e:    # a constructor this ggml does not have: the op is newer
            missing = unbound_symbol(e)
            if missing is None:
                raise
            return Support(False, f"this ggml ({ggml_version()}) has no {missing}")
        except TooOld as e:            # a form of the node newer than this ggml
            return Support(False, f"{e} (this ggml: {ggml_version()})")
        try:
            for t in graph.tensors:  # test-backend-ops asks for every tensor of the context
                p = r.ptrs[t.index]
                if not lib.ggml_backend_dev_supports_op(self.dev, p):
                    return Support(False, f"{t.op_desc} (node #{t.index} {label(t)})")
            return Support(True)
        finally:
            r.free()

    def run(self, case, graph: Graph, inputs: dict[int, np.ndarray], check: list[int],
            hygiene: hyg.Hygiene = hyg.NONE) -> RunResult:
        self._drop_perf()
        r = self.replay(graph, sentinels=True)
        try:
            self._allocate(r)
            self._upload(r, graph, inputs)
            if hygiene.poison:
                self._poison(r, graph)
            guards = self._sentinel_data(len(r.sentinels))
            for (s, _), data in zip(r.sentinels, guards):
                lib.ggml_backend_tensor_set(s, ffi.from_buffer(data), 0, data.nbytes)
            t0 = _time.perf_counter()
            self._forward(r, graph)
            compute = _time.perf_counter() - t0
            if self.after_compute is not None:
                self.after_compute(r)
            outputs = {i: self._download(graph.tensors[i], r.ptrs[i]) for i in check}
            problems = []
            seen = np.empty(SENTINEL_SIZE, np.float32)
            for (s, after), data in zip(r.sentinels, guards):
                lib.ggml_backend_tensor_get(s, ffi.from_buffer(seen), 0, seen.nbytes)
                if seen.tobytes() != data.tobytes():
                    problems.append(f"sentinel mismatch: {after}")
            raw = lambda t: _raw(r.ptrs[t.index])   # noqa: E731
            problems += hyg.problems(graph, hygiene, inputs, raw)
            return RunResult(outputs, problems, unwritten=hyg.unwritten(graph, hygiene, check, raw),
                             compute_seconds=compute)
        finally:
            r.free()

    def run_recorded(self, case, graph: Graph, inputs: dict[int, np.ndarray], check: list[int],
                     built=None) -> GraphProgram:
        """A run as `run`'s, without sentinels, whose graph is built through a Recorder:
        the outputs (values and raw bytes) and the C that builds the same graph (ops repro).
        `built`, when given, is called with the program (no outputs yet) before the tensors
        are allocated, so that what ops repro needs survives a device that kills the process
        in the allocation, the upload or the compute."""
        self._drop_perf()
        rec = Recorder(G)
        r = self.replay(graph, builder=rec)
        try:
            program = GraphProgram(
                lines=rec.lines, leaves={t.index: rec.var(r.ptrs[t.index]) for t in graph.leaves},
                checked={i: rec.var(r.ptrs[i]) for i in check}, out=rec.var(r.ptrs[graph.out.index]),
                n_objs=objects(len(graph.tensors), False), graph_size=r.graph_size, raw={}, outputs={},
                n_threads=self.n_threads)
            if built is not None:
                built(program)
            self._allocate(r)        # ggml-cann sizes and converts named weights here
            self._upload(r, graph, inputs)
            self._forward(r, graph)
            program.raw = {i: _raw(r.ptrs[i]) for i in check}
            program.outputs = {i: np.ascontiguousarray(values(graph.tensors[i], program.raw[i])) for i in check}
            return program
        finally:
            r.free()

    def reproducer(self, steps, programs: list[GraphProgram], title: str, death=None) -> dict[str, str]:
        """repro.c and its Makefile (ops repro), against the ggml the bridge runs on; with
        `death`, a program that must see the last case kill its process."""
        from cannops.backend.repro import sim_environment
        from . import repro
        prefix = os.path.dirname(libdir())
        return {"repro.c": repro.program(self.ggml_name, self.n_threads, steps, programs, title, death),
                "Makefile": repro.build_files(prefix, title, sim_environment())}

    def repro_versions(self) -> dict:
        """ggml's version and commit, and the source.json of a `make ggml-cann` build."""
        import json
        v = {"ggml": ggml_version(), "ggml_commit": ffi.string(lib.ggml_commit()).decode()
             if hasattr(lib, "ggml_commit") else "unknown", "ggml_prefix": os.path.dirname(libdir())}
        source = os.path.join(os.path.dirname(os.path.dirname(libdir())), "source.json")
        if os.path.isfile(source):
            with open(source) as f:
                v["ggml_source"] = json.load(f)
        return v

    def time(self, case, graph: Graph, inputs: dict[int, np.ndarray], n_runs: int) -> float:
        """Seconds for one compute of a graph holding the output node n_runs times. A case
        graph is allocated, uploaded and warmed up (one compute of the single node) once: a
        call with another n_runs rebuilds only the measured graph over the same tensors, so
        the runner's probe run and its batches cost one compute a call."""
        n_runs = max(1, int(n_runs))
        perf = self._perf
        if perf is None or perf[0] is not graph or n_runs + 2 * len(graph.tensors) + 16 > perf[2].graph_size:
            self._drop_perf()
            self._timed_events, self.computes, self.runs = [], 0, 0
            perf = self._perf = (graph, 0, self._perf_replay(graph, inputs, n_runs))
        r = perf[2]
        if perf[1] != n_runs:
            out = r.ptrs[graph.out.index]
            G.ggml_graph_clear(r.gf)
            G.ggml_build_forward_expand(r.gf, out)
            add = G.ggml_graph_add_node
            for _ in range(n_runs - 1):
                add(r.gf, out)
            self._perf = (graph, n_runs, r)
        counter = simulator_cost()
        if counter is not None:
            counter.start()
        t0 = _time.perf_counter()
        try:
            self._compute(r.gf)
            return _time.perf_counter() - t0
        finally:
            if counter is not None:   # every timed compute of the case, counted: calls and replays
                self._timed_events += counter.stop()
                self.computes, self.runs = self.computes + 1, self.runs + n_runs

    @property
    def timed_cost(self) -> dict | None:
        """On the simulated toolkit: the device work of the case's timed computes so far
        (a capture's calls once, its replays per compute), with `computes` and `runs` (the
        op's executions in them: kernels / runs is the op's kernels); else None."""
        if simulator_cost() is None or not self.computes:
            return None
        from cannops.backend.cost import summarise
        return {**summarise(self._timed_events, per_call=False), "computes": self.computes, "runs": self.runs}

    def _perf_replay(self, graph: Graph, inputs: dict[int, np.ndarray], n_runs: int) -> Replay:
        """The case graph allocated, its leaves uploaded, its output node computed once
        (test-backend-ops' warm-up), with room for a graph of n_runs of it."""
        r = self.replay(graph, graph_size=max(PERF_GRAPH_NODES, 2 * len(graph.tensors) + n_runs + 16))
        try:
            self._allocate(r)
            self._upload(r, graph, inputs)
            r.gf = G.ggml_new_graph_custom(r.ctx, r.graph_size, False)
            G.ggml_build_forward_expand(r.gf, r.ptrs[graph.out.index])
            self._compute(r.gf)  # warm-up
        except BaseException:
            r.free()
            raise
        return r

    def grad(self, case, graph: Graph, inputs: dict[int, np.ndarray]) -> list[ParamGrad]:
        """test-backend-ops' eval_grad: the backward graph computed here, and finite
        differences of the forward graph, one element of one parameter at a time."""
        self._drop_perf()
        bw = Backward(self, graph)
        threads = self.n_threads
        # thousands of computes of a tiny graph: one thread (waking a pool costs more)
        self.n_threads = 1
        try:
            for p in bw.tensors():   # every tensor of the context, backward nodes included
                if not lib.ggml_backend_dev_supports_op(self.dev, p):
                    raise GradUnsupported(self.name)
            r = bw.replay
            self._allocate(r)
            self._upload(r, graph, inputs)
            G.ggml_graph_reset(bw.gb)       # the loss' gradient 1, every other one 0
            self._compute(bw.gf)
            self._compute(bw.gb)
            loss = np.empty(1, np.float32)
            out = []
            for t in graph.params():
                g = bw.grad_of(t)
                # the gradient may be a view (e.g. the permute of a permuted operand's
                # gradient): read it through its own strides
                analytic = (np.zeros(t.nelements(), np.float32) if g == NULL
                            else self._download(_like(t, g), g).reshape(-1))
                p = r.ptrs[t.index]
                cell = np.empty(1, np.float32)

                def set_element(i, v, p=p, cell=cell):
                    cell[0] = v
                    lib.ggml_backend_tensor_set(p, ffi.from_buffer(cell), 4 * i, 4)

                def forward():
                    self._compute(bw.gf)
                    lib.ggml_backend_tensor_get(bw.loss, ffi.from_buffer(loss), 0, 4)
                    return float(loss[0])
                numeric = numeric_gradient(inputs[t.index], set_element, forward,
                                           case.family.grad_setting("grad_eps", case.params),
                                           case.family.grad_setting("grad_precise", case.params))
                out.append(ParamGrad(t.name or f"#{t.index}", analytic, numeric))
            return out
        finally:
            self.n_threads = threads
            bw.free()

    def _forward(self, r: Replay, graph: Graph) -> None:
        gf = G.ggml_new_graph_custom(r.ctx, r.graph_size, False)
        G.ggml_build_forward_expand(gf, r.ptrs[graph.out.index])
        self._compute(gf)

    def _compute(self, gf) -> None:
        status = lib.ggml_backend_graph_compute(self.backend, gf)
        if status != lib.GGML_STATUS_SUCCESS:
            raise DeviceError(f"ggml_backend_graph_compute failed: "
                              f"{ffi.string(lib.ggml_status_to_string(status)).decode()}")

    def _drop_perf(self) -> None:
        if self._perf is not None:
            self._perf[2].free()
            self._perf = None


def simulator_cost():
    """The CANN simulator's counter where the simulated toolkit serves this process's ggml
    (ggml-cann built against it: its entry points run in this interpreter), else None."""
    import sys
    if "_cannsim" not in sys.modules:
        return None
    return sys.modules.get("cannops.backend.cann.sim.cost")


def objects(n: int, sentinels: bool) -> int:
    """Tensors a replay's context holds room for: the graph's (+ a sentinel after each),
    and the by-products of composite constructors."""
    return (2 * n + 2 if sentinels else n) + 32


def _raw(p) -> np.ndarray:
    """A tensor's bytes (ggml_nbytes of them) as the device holds them."""
    size = lib.ggml_nbytes(p)
    raw = np.empty(size, np.uint8)
    if size:
        lib.ggml_backend_tensor_get(p, ffi.from_buffer(raw), 0, size)
    return raw


def _like(t: Tensor, p) -> Tensor:
    """A stand-in for ggml tensor p (t's type, p's ne and nb), to read p's data by."""
    u = Tensor(Graph(), t.type, tuple(p.ne))
    u.nb = tuple(p.nb)
    return u


def _check(r: Replay, t: Tensor, p) -> None:
    """ggml's tensor must be our node, field by field."""
    def fail(field, theirs, ours):
        raise DeviceError(f"case graph and ggml disagree at node #{t.index} {label(t)} "
                          f"({t.op_desc}): {field} is {theirs} in ggml, {ours} in the case graph")

    if p.type != t.type.value:
        fail("type", ffi.string(lib.ggml_type_name(p.type)).decode(), t.type.name)
    ne = tuple(p.ne)
    if ne != t.ne:
        fail("ne", list(ne), list(t.ne))
    nb = tuple(p.nb)
    if nb != t.nb:
        fail("nb", list(nb), list(t.nb))
    if p.op != OP_VALUE[t.op]:
        fail("op", ffi.string(lib.ggml_op_name(p.op)).decode(), t.op)
    params = ffi.buffer(p.op_params)[:]
    if not same_params(t.op, params, t.op_params):
        fail("op_params", np.frombuffer(params, np.int32).tolist(),
             np.frombuffer(bytes(t.op_params), np.int32).tolist())
    want = NULL if t.view_src is None else r.ptrs[t.view_src.index]
    if p.view_src != want:
        fail("view_src", _who(r, p.view_src), _who(r, want))
    if p.view_offs != t.view_offs:
        fail("view_offs", p.view_offs, t.view_offs)
    n_src = len(t.src)
    for i in range(GGML_MAX_SRC):
        s = t.src[i] if i < n_src else None
        want = NULL if s is None else r.ptrs[s.index]
        if p.src[i] != want:
            fail(f"src[{i}]", _who(r, p.src[i]), _who(r, want))


def _who(r: Replay, p) -> str:
    """A ggml tensor, named by our index when it is one of ours."""
    if not p:
        return "NULL"
    for i, q in enumerate(r.ptrs):
        if q is not None and q == p:
            return f"node #{i}"
    return f"a tensor not in the case graph ({ffi.string(p.name).decode(errors='replace')!r})"
