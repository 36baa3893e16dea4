"""Shared by tests/test_cann_{glu,elementwise,reduce}.py: run catalog cases (or
hand-made graphs) on CANN-SIM and compare them with the NumPy reference."""
from __future__ import annotations

import numpy as np
import pytest

from cannops.backend import reference
from cannops.cli.engine.compare import compare
from cannops.backend.cann.sim import dtypes
from cannops.backend.cann.sim.refusals import SimError
from cannops.native._aclnn import ffi


def nmse(out: np.ndarray, ref: np.ndarray) -> float:
    """The runner's metric (cli/engine/compare.py); inf when NaN or infinities disagree."""
    _, _, err = compare("", ref, out, float("inf"))
    return float("inf") if err is None else err


def run_graph(dev, g, inputs) -> tuple[np.ndarray, np.ndarray]:
    """(CANN-SIM result, reference result) of g's output."""
    got = dev.run(None, g, inputs, [g.out.index]).outputs[g.out.index]
    return got, reference.compute(g, inputs).read(g.out)


def check_cases(dev, cases, names) -> int:
    """Every named case is supported and within its family's threshold; returns the count.
    A case the rules refuse only as ggml-cann v0.20.2 does still runs: its handler stays
    verified for when the rule opens."""
    for name in names:
        c = cases[name]
        g = c.build()
        s = dev.supports(c, g)
        assert s or "ggml-cann v0.20.2" in s.reason, (name, s.reason)
        check_case(dev, c, g)
    return len(names)


def check_case(dev, c, g) -> None:
    """Case c (its graph g, seed 0) on dev: every checked node within the family's threshold."""
    inputs = c.init_inputs(g, 0)
    idx = [t.index for t in (g.check_nodes or [g.out])]
    got = dev.run(c, g, inputs, idx).outputs
    mem = reference.compute(g, inputs)
    for i in idx:
        err = nmse(got[i], mem.read(g.tensors[i]))
        assert err <= c.family.threshold(c.params), f"{c.name}: NMSE {err}"


class SimTensors:
    """aclTensor descriptors over fresh simulated device memory, for calling an
    operator's GetWorkspaceSize check directly; everything is released on close()."""

    def __init__(self):
        from cannops.backend.cann.sim import acl_meta, install, state
        install()
        self.meta, self.state, self.addrs, self.handles, self.scalars = acl_meta, state, [], [], []

    def tensor(self, dims, acl_dtype, strides=None):
        np_dtype = dtypes.numpy_dtype(acl_dtype)
        if strides is None:
            strides = [int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(len(dims))]
        span = 1 + sum((d - 1) * s for d, s in zip(dims, strides))
        addr = self.state.STATE.memory.malloc(span * np_dtype.itemsize)
        self.addrs.append(addr)
        t = self.meta.aclCreateTensor(ffi.new("int64_t[]", list(dims)), len(dims), acl_dtype,
                                    ffi.new("int64_t[]", list(strides)), 0, 2,
                                    ffi.new("int64_t[]", [span]), 1, ffi.cast("void *", addr))
        self.handles.append(t)
        return t

    def scalar_f32(self, value: float):
        s = self.meta.aclCreateScalar(ffi.new("float *", value), 0)   # ACL_FLOAT
        self.scalars.append(s)
        return s

    def close(self):
        for s in self.scalars:
            self.meta.aclDestroyScalar(s)
        for t in self.handles:
            self.meta.aclDestroyTensor(t)
        for a in self.addrs:
            self.state.STATE.memory.free(a)


def rejected(prepare, *args) -> SimError:
    """The SimError a GetWorkspaceSize check raises (the test fails if it accepts)."""
    try:
        prepare(*args)
    except SimError as e:
        return e
    raise AssertionError(f"{prepare.__name__} accepted an invalid call")


def sim_fixture(kind: type[SimTensors] = SimTensors):
    """A test's own simulator session of `kind`, closed after the test (a `sim` fixture)."""
    @pytest.fixture
    def sim():
        s = kind()
        yield s
        s.close()
    return sim
