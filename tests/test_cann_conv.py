"""CONV_TRANSPOSE_1D (as ggml-cann realises it), CONV_2D and CONV_2D_DW (beyond ggml-cann)
on CANN-SIM against the NumPy reference; the simulator's transposed aclnnConvolution is the
adjoint of its forward one, and it refuses what the aclnn docs forbid."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, rejected, sim_fixture  # noqa: E402
from _sample import assert_ok, cases_of, sample  # noqa: E402
from cannops.backend.cann.sim.ops_conv import convolve, convolve_transposed  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402


def test_conv_transpose_1d_cases():
    cases = cases_of("CONV_TRANSPOSE_1D")
    long_kernel = [c for c in cases if "1337" in c.vars][:2]     # 6 slices of <= 255 taps
    assert_ok("CANN-SIM", long_kernel + sample(cases, 10))


def test_conv_2d_cases():
    cases = [c for c in cases_of("CONV_2D") if "256" not in c.vars]
    results = assert_ok("CANN-SIM", sample(cases, 16) + cases_of("CONV_2D_DW")[:4], allow_unsupported=True)
    assert sum(r.status == "OK" for r in results) >= 12


def test_rules_say_why(dev):
    c = next(c for c in cases_of("CONV_2D") if c.vars.startswith("ne_input=[1,1,1,2],ne_kernel=[1,3,"))
    why = dev.supports(c, c.build()).reason
    assert "beyond ggml-cann" in why and "smaller than the dilated kernel" in why
    assert not dev.supports(None, cases_of("CONV_3D")[0].build())   # no aclnn mapping


@pytest.mark.parametrize("k", [1, 2])
def test_transposed_is_the_adjoint_of_forward(k):
    """<conv(x), y> = <x, conv_transposed(y)> with one weight, for groups, stride, padding
    and dilation; outputPadding restores the input size the floor division lost."""
    rng = np.random.default_rng(k)
    st, pads, dil, groups = [2] * k, [(1, 1)] * k, [2] * k, 2
    x, w = rng.uniform(-1, 1, (2, 4) + (10,) * k), rng.uniform(-1, 1, (6, 2) + (3,) * k)
    y = convolve(x, w, None, st, pads, dil, groups)                 # (2, 6, 4, ...)
    z = rng.uniform(-1, 1, y.shape)
    back = convolve_transposed(z, w, None, st, pads, dil, [1] * k, groups)
    assert back.shape == x.shape
    assert np.isclose((y * z).sum(), (x * back).sum())


class _Sim(SimTensors):
    def conv_tensor(self, dims, fmt=None):
        """A contiguous FLOAT tensor in the NCL / NCHW format aclnnConvolution wants (or fmt)."""
        fmt = {3: lib.ACL_FORMAT_NCL, 4: lib.ACL_FORMAT_NCHW}[len(dims)] if fmt is None else fmt
        n = int(np.prod(dims))
        addr = self.state.STATE.memory.malloc(4 * n)
        self.addrs.append(addr)
        strides = [int(np.prod(dims[i + 1:])) for i in range(len(dims))]
        t = self.meta.aclCreateTensor(ffi.new("int64_t[]", list(dims)), len(dims), lib.ACL_FLOAT,
                                    ffi.new("int64_t[]", strides), 0, fmt, ffi.new("int64_t[]", [n]), 1,
                                    ffi.cast("void *", addr))
        self.handles.append(t)
        return t


sim = sim_fixture(_Sim)


def test_simulator_refuses_documented_invalid_calls(sim):
    from cannops.backend.cann.sim import ops_conv as ops
    arrays = []

    def ints(*v):
        arrays.append(sim.meta.aclCreateIntArray(ffi.new("int64_t[]", list(v)), len(v)))
        return arrays[-1]
    try:
        x = sim.conv_tensor([1, 2, 5])
        # transposed 1-D: the kernel's L must be in [1, 255] (what ggml-cann slices for)
        e = rejected(ops.convolution, x, sim.conv_tensor([2, 3, 300]), ffi.NULL, ints(1), ints(0), ints(1),
                     True, ints(0), 1, sim.conv_tensor([1, 3, 304]), 0)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "[1, 255]" in str(e)
        # transposed 1-D takes exactly one padding value
        e = rejected(ops.convolution, x, sim.conv_tensor([2, 3, 4]), ffi.NULL, ints(1), ints(0, 0), ints(1),
                     True, ints(0), 1, sim.conv_tensor([1, 3, 8]), 0)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "padding" in str(e)
        # outputPadding below the stride or the dilation
        e = rejected(ops.convolution, x, sim.conv_tensor([2, 3, 4]), ffi.NULL, ints(2), ints(0), ints(1),
                     True, ints(2), 1, sim.conv_tensor([1, 3, 14]), 0)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "outputPadding" in str(e)
        # the output shape of the docs' formula: (5-1)*2 + (4-1) + 1 = 12
        e = rejected(ops.convolution, x, sim.conv_tensor([2, 3, 4]), ffi.NULL, ints(2), ints(0), ints(1),
                     True, ints(0), 1, sim.conv_tensor([1, 3, 13]), 0)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "[1, 3, 12]" in str(e)
        # forward: a padded input shorter than the dilated kernel
        e = rejected(ops.convolution, sim.conv_tensor([1, 1, 1, 1]), sim.conv_tensor([1, 1, 3, 1]), ffi.NULL,
                     ints(5, 1), ints(2, 0), ints(4, 1), False, ints(0, 0), 1, sim.conv_tensor([1, 1, 1, 1]), 0)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "smaller than the dilated kernel" in str(e)
        # Slice: step > 0; InplaceZero: ND only
        e = rejected(ops.slice_, sim.tensor([2, 6], lib.ACL_FLOAT), -1, 0, 4, 0, sim.tensor([2, 4], lib.ACL_FLOAT))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "step" in str(e)
        e = rejected(ops.slice_, sim.tensor([2, 6], lib.ACL_FLOAT), -1, 2, 9, 1, sim.tensor([2, 5], lib.ACL_FLOAT))
        assert "[2, 4]" in str(e)   # end clamps to 6
        e = rejected(ops.inplace_zero, sim.conv_tensor([1, 2, 5]))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "ND" in str(e)
    finally:
        for arr in arrays:
            sim.meta.aclDestroyIntArray(arr)
