"""The backward graph of a case, built by libggml's own ggml_build_backward_expand as
test-backend-ops' gradient mode builds it, and read back into our case model so that a
device that is not ggml (CANN) runs the very same backward nodes.

The loss is the case's output, summed to a scalar when it is not one ("sum_of_out");
the parameters are the leaves the family marked with set_param. The ggml side (the
context with its forward and backward graphs) is device.Backward, which GGMLDevice.grad
computes; this module reads it back.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cannops.cases.graph import OPS, Graph, Tensor
from cannops.cases.types import TYPES

from . import open_device
from .device import Backward
from .library import ffi, lib

NULL = ffi.NULL
_TYPE_BY_VALUE = {t.value: t for t in TYPES.values()}


def _import(g: Graph, p, known: dict) -> Tensor:
    """Our Tensor for ggml tensor p (its sources imported first)."""
    key = int(ffi.cast("uintptr_t", p))
    if key in known:
        return known[key]
    srcs = [None if p.src[i] == NULL else _import(g, p.src[i], known) for i in range(len(p.src))]
    while srcs and srcs[-1] is None:
        srcs.pop()
    base = None if p.view_src == NULL else _import(g, p.view_src, known)
    t = Tensor(g, _TYPE_BY_VALUE[p.type], tuple(p.ne), view_src=base, view_offs=int(p.view_offs))
    t.nb = tuple(p.nb)
    t.op = OPS[p.op]
    t.op_params = bytearray(ffi.buffer(p.op_params)[:])
    t.src = srcs
    t.name = ffi.string(p.name).decode(errors="replace")
    t.flags = int(p.flags)
    known[key] = t
    return t


@dataclass
class BackwardGraph:
    """A case's forward + backward graph as a case graph of its own, for devices that run
    case graphs node by node: graph.out is the loss, graph.check_nodes the gradients."""
    graph: Graph
    inputs: dict[int, np.ndarray]        # the case's leaf data, 1 for the loss' gradient, else 0
    forward: list[Tensor]                # the nodes that compute the loss
    params: dict[int, Tensor]            # case param index -> the same leaf in `graph`
    grads: dict[int, Tensor | None]      # case param index -> its gradient (None: no path)


def backward_case_graph(graph: Graph, inputs: dict[int, np.ndarray]) -> BackwardGraph:
    """Build the case's backward graph with libggml (on the CPU device's replay, nothing is
    computed) and read it back into our case model."""
    dev = open_device("GGML-CPU")
    try:
        bw = Backward(dev, graph)
        try:
            g, known = Graph(), {}
            for p in bw.tensors():
                _import(g, p, known)

            def ours(p):
                return None if p == NULL else known[int(ffi.cast("uintptr_t", p))]
            loss = ours(bw.loss)
            params = {t.index: ours(bw.replay.ptrs[t.index]) for t in graph.params()}
            grads = {t.index: ours(bw.grad_of(t)) for t in graph.params()}
            loss_grad = ours(lib.ggml_graph_get_grad_acc(bw.gb, bw.loss))
            data = {ours(bw.replay.ptrs[t.index]).index: inputs[t.index] for t in graph.leaves}
        finally:
            bw.free()
    finally:
        dev.close()
    for t in g.leaves:
        if t.index not in data:
            data[t.index] = np.full(tuple(reversed(t.ne)), 1.0 if t is loss_grad else 0.0, t.type.dtype)
    g.out = loss
    forward = g.nodes()
    g.check_nodes = [t for t in grads.values() if t is not None]
    return BackwardGraph(g, data, forward, params, grads)


def grad_through_runs(device, case, graph: Graph, inputs: dict[int, np.ndarray]) -> list:
    """Gradients on any device that can `run` a case graph: the backward graph run once,
    and one forward run per finite-difference step (slow: for small test-only cases)."""
    from cannops.backend.base import ParamGrad, numeric_gradient
    bw = backward_case_graph(graph, inputs)
    got = device.run(case, bw.graph, bw.inputs, [t.index for t in bw.graph.check_nodes]).outputs
    fwd = Graph()
    fwd.tensors, fwd.out = bw.graph.tensors, bw.graph.out
    out = []
    for index, leaf in bw.params.items():
        t, g = graph.tensors[index], bw.grads[index]
        analytic = np.zeros(t.nelements(), np.float32) if g is None else got[g.index].reshape(-1)
        data = dict(bw.inputs)
        x = np.array(inputs[index], np.float32)
        data[leaf.index] = x

        def set_element(i, v):
            x.reshape(-1)[i] = v

        def forward():
            return float(device.run(case, fwd, data, [fwd.out.index]).outputs[fwd.out.index].reshape(-1)[0])
        numeric = numeric_gradient(inputs[index], set_element, forward,
                                   case.family.grad_setting("grad_eps", case.params),
                                   case.family.grad_setting("grad_precise", case.params))
        out.append(ParamGrad(t.name or f"#{index}", analytic, numeric))
    return out
