"""The ggml bridge: device discovery, values against the NumPy reference, the
constructor cross-check, guard regions, and support queries without compute."""
import pathlib

import numpy as np
import pytest

from cannops.backend import base
from cannops.backend.base import DeviceError
from cannops.backend.numpy_device import NumpyDevice
from cannops.cases import all_cases
from cannops.cli.engine.compare import nmse
from cannops.cases.elementwise import clamp
from cannops.cases.graph import Graph, add, contiguous_strides, cont, cpy, permute, scale, unary
from cannops.cases.versions import VERSIONS, at_or_after

ggml = pytest.importorskip("cannops.backend.ggml", reason="ggml bridge not built")
from cannops.backend.ggml.ops import find_replay, load_all  # noqa: E402


@pytest.fixture(scope="module")
def cpu():
    dev = ggml.open_device("GGML-CPU")
    dev.n_threads = 1
    yield dev
    dev.close()


@pytest.fixture(scope="module")
def numpy_dev():
    return NumpyDevice()


def broadcast_add_graph():
    """out = cont(permute(a + b, ...)) with b broadcast on dims 1 and 3; the permuted
    view of the sum is a checked tensor too (its download must follow its strides)."""
    g = Graph()
    a = g.new_tensor("f32", [16, 4, 3, 2], "a")
    b = g.new_tensor("f32", [16, 1, 3, 1], "b")
    s = add(a, b)
    s.name = "sum"
    p = permute(s, 2, 0, 1, 3)
    p.name = "sum_permuted"
    g.out = cont(p)
    g.out.name = "out"
    rng = np.random.default_rng(7)
    inputs = {t.index: rng.uniform(-1, 1, t.ne[::-1]).astype(np.float32) for t in g.leaves}
    return g, inputs


def test_cpu_device_is_listed_with_a_description():
    found = dict(ggml.list_devices())
    assert found.get("GGML-CPU")
    assert "cannops.backend.ggml" in base.PROVIDER_MODULES  # discovered by backend.base


def test_cpu_device_facts(cpu):
    total, free = cpu.memory()
    assert total > 0 and 0 <= free <= total
    assert cpu.is_cpu and cpu.dev_type == "CPU"


def test_unary_case_matches_numpy(cpu, numpy_dev):
    # a SILU on a non-contiguous view of a larger leaf, from the catalog
    case = next(c for c in all_cases() if c.name == "SILU(type=f32,ne_a=[5,7,11,13],v=1)")
    g = case.build()
    inputs = case.init_inputs(g, 0)
    check = [g.out.index]
    assert cpu.supports(case, g)
    got = cpu.run(case, g, inputs, check)
    want = numpy_dev.run(case, g, inputs, check)
    assert got.problems == []
    out, ref = got.outputs[g.out.index], want.outputs[g.out.index]
    assert out.shape == (13, 11, 7, 5) and out.dtype == np.float32
    assert nmse(ref, out) <= 1e-7


def test_broadcast_add_and_permuted_view_match_numpy(cpu, numpy_dev):
    g, inputs = broadcast_add_graph()
    check = [t.index for t in g.tensors if t.name in ("sum", "sum_permuted", "out")]
    got = cpu.run(None, g, inputs, check)
    want = numpy_dev.run(None, g, inputs, check)
    assert got.problems == []
    for i in check:
        assert got.outputs[i].shape == g.tensors[i].ne[::-1]
        assert nmse(want.outputs[i], got.outputs[i]) <= 1e-7
    # independent of both devices: the sum itself, by NumPy broadcasting
    a, b = inputs[0], inputs[1]
    np.testing.assert_allclose(got.outputs[check[0]], a + b, rtol=1e-6)


def test_scale_bias(cpu):
    g = Graph()
    a = g.new_tensor("f32", [32, 3], "a")
    g.out = scale(a, 0.5, 0.25)
    x = np.linspace(-2, 2, 96, dtype=np.float32).reshape(1, 1, 3, 32)
    got = cpu.run(None, g, {0: x}, [g.out.index]).outputs[g.out.index]
    assert got.dtype == np.float32 and got.shape == (1, 1, 3, 32)
    np.testing.assert_allclose(got, x * 0.5 + 0.25, rtol=1e-6)


def test_shape_mismatch_with_ggml_is_a_device_error(cpu):
    g, _ = broadcast_add_graph()
    s = next(t for t in g.tensors if t.name == "sum")
    s.ne = (16, 4, 3, 1)  # a wrong shape in our model of ggml_add
    with pytest.raises(DeviceError, match=r"node #2 sum \(ADD\): ne is \[16, 4, 3, 2\] in ggml"):
        cpu.supports(None, g)


def test_op_params_mismatch_is_a_device_error(cpu):
    g = Graph()
    a = g.new_tensor("f32", [8, 2], "a")
    g.out = unary(a, "RELU")
    g.out.set_params_i32([3], start=1)  # a stray word ggml does not write
    with pytest.raises(DeviceError, match="op_params"):
        cpu.run(None, g, {0: np.zeros((2, 8), np.float32)}, [g.out.index])


def test_failed_ggml_assert_is_a_device_error_not_an_abort(cpu, numpy_dev):
    g, inputs = broadcast_add_graph()
    b = g.tensors[1]
    b.ne = (16, 3, 3, 1)  # b no longer broadcasts onto a: ggml_add asserts
    b.nb = contiguous_strides(b.type, b.ne)
    with pytest.raises(DeviceError, match=r"ggml_add: .*GGML_ASSERT\(ggml_can_repeat"):
        cpu.supports(None, g)
    # the process, the device and its backend carry on
    g, inputs = broadcast_add_graph()
    assert cpu.run(None, g, inputs, [g.out.index]).problems == []


def test_sentinel_catches_a_write_past_a_tensor(cpu):
    g, inputs = broadcast_add_graph()  # "sum" is 1536 bytes: its sentinel follows at once
    lib, ffi = ggml.lib, ggml.ffi
    s = next(t for t in g.tensors if t.name == "sum")

    def overflow(replay):
        p = replay.ptrs[s.index]
        assert lib.ggml_backend_buffer_is_host(p.buffer)
        end = ffi.cast("char *", p.data) + lib.ggml_nbytes(p)
        ffi.memmove(end, b"\x7f" * 64, 64)  # a kernel writing 64 bytes too many

    cpu.after_compute = overflow
    try:
        res = cpu.run(None, g, inputs, [g.out.index])
    finally:
        cpu.after_compute = None
    assert res.problems == ["sentinel mismatch: sum"]
    assert cpu.run(None, g, inputs, [g.out.index]).problems == []


def test_supports_answers_without_computing(cpu, monkeypatch):
    def no(*args):
        raise AssertionError("supports() must not allocate or compute")
    monkeypatch.setattr(cpu, "_allocate", no)
    monkeypatch.setattr(cpu, "_compute", no)
    g, _ = broadcast_add_graph()
    assert cpu.supports(None, g)
    # the CPU backend has no iq2_xxs -> iq2_xxs copy (test-backend-ops lists it unsupported)
    g = Graph()
    a = g.new_tensor("iq2_xxs", [256, 2, 3, 4], "a")
    b = g.new_tensor("iq2_xxs", [256, 2, 3, 4], "b")
    g.out = cpy(a, b)
    sup = cpu.supports(None, g)
    assert not sup and "CPY" in sup.reason


def test_time_runs_the_output_node_n_times(cpu):
    g, inputs = broadcast_add_graph()
    t1 = cpu.time(None, g, inputs, 1)
    t100 = min(cpu.time(None, g, inputs, 400) for _ in range(3))
    assert 0 < t1 and t100 > 0
    gf = cpu._perf[2].gf
    assert ggml.lib.ggml_graph_n_nodes(gf) >= 400
    cpu.close()  # frees the kept perf graph; the device reopens its backend on demand
    assert cpu._perf is None
    assert cpu.run(None, g, inputs, [g.out.index]).problems == []


def test_time_prepares_a_case_graph_once_for_every_batch_size(cpu, monkeypatch):
    # the probe run and batches of other sizes compute over the tensors allocated, uploaded
    # and warmed up once; another graph is prepared afresh
    g, inputs = broadcast_add_graph()
    allocated, computed = [], []
    allocate, compute = cpu._allocate, cpu._compute
    monkeypatch.setattr(cpu, "_allocate", lambda r: (allocated.append(r), allocate(r))[1])
    monkeypatch.setattr(cpu, "_compute", lambda gf: (computed.append(ggml.lib.ggml_graph_n_nodes(gf)), compute(gf))[1])
    for n in (1, 50, 50, 7, 1):
        cpu.time(None, g, inputs, n)
    assert len(allocated) == 1
    k = computed[0] - 1                              # the graph's other nodes
    assert computed == [k + 1, k + 1, k + 50, k + 50, k + 7, k + 1]   # the warm-up, then each batch
    g2, inputs2 = broadcast_add_graph()
    cpu.time(None, g2, inputs2, 3)
    assert len(allocated) == 2 and computed[-2:] == [k + 1, k + 3]
    cpu.close()


def test_deferred_node_is_bound_through_the_later_constructor(cpu, numpy_dev, monkeypatch):
    # as if ggml_cont built its own transpose: TRANSPOSE defers, CONT builds both
    from cannops.backend.ggml.ops import DEFER, REPLAYS, built
    from cannops.cases.graph import transpose

    def cont_of_transpose(lib, ctx, node, srcs):
        assert not srcs[0]  # the deferred transpose is not built yet
        return lib.ggml_cont(ctx, lib.ggml_transpose(ctx, built(node.src[0].src[0])))

    monkeypatch.setitem(REPLAYS, "TRANSPOSE", lambda lib, ctx, node, srcs: DEFER)
    monkeypatch.setitem(REPLAYS, "CONT", cont_of_transpose)
    g = Graph()
    a = g.new_tensor("f32", [5, 3], "a")
    g.out = cont(transpose(a))
    x = np.arange(15, dtype=np.float32).reshape(1, 1, 3, 5)
    got = cpu.run(None, g, {0: x}, [1, 2])
    np.testing.assert_array_equal(got.outputs[2][0, 0], x[0, 0].T)
    np.testing.assert_array_equal(got.outputs[1][0, 0], x[0, 0].T)  # the transposed view, via its nb
    # a deferred node that no later constructor builds is an error
    monkeypatch.setitem(REPLAYS, "CONT", lambda lib, ctx, node, srcs: lib.ggml_cont(ctx, built(a)))
    with pytest.raises(DeviceError):
        cpu.supports(None, g)


# --- a case graph of one catalog version replayed on the ggml of another ---

GGML_0253 = pathlib.Path(__file__).resolve().parents[1] / "build" / "ggml-cpu" / "prefix"


class _Ggml0253Api:
    """The two clamp constructors as ggml 0.25.3 has them, as strings: which one ran."""
    def ggml_clamp(self, ctx, a, lo, hi):
        return "new tensor"

    def ggml_clamp_inplace(self, ctx, a, lo, hi):
        return "view"


def _clamp_node(version):
    load_all()   # the replays
    g = Graph(version)
    g.out = clamp(g.new_tensor("f32", [8, 2], "a"), 0.0, float("inf"))
    return g.out


@pytest.mark.parametrize("version", VERSIONS)
def test_clamp_replays_as_its_catalog_version_builds_it_on_ggml_0253(version):
    """TOPK_MOE's with_norm cases of v0.20.2 failed on ggml 0.25.3 (the suite's catalog on
    a bridge rebuilt with GGML_HOME): their CLAMP is in place, as v0.20.2's ggml_clamp
    built it, and the replay called 0.25.3's ggml_clamp, no longer in place."""
    node = _clamp_node(version)
    got = find_replay(node)(_Ggml0253Api(), None, node, [None])
    assert got == ("new tensor" if at_or_after(version, "0.25.3") else "view")


def test_clamp_on_the_bridges_ggml_is_the_case_graphs(cpu):
    has_inplace = hasattr(ggml.lib, "ggml_clamp_inplace")   # ggml 0.25.3 on
    for version in VERSIONS:
        g = _clamp_node(version).graph
        if g.out.view_src is None and not has_inplace:   # a newer form: not supported by this ggml
            support = cpu.supports(None, g)
            assert not support and "ggml_clamp is in place" in support.reason
        else:
            assert cpu.supports(None, g)   # the replay's field-by-field check passed


CLAMP_ABI = """
struct ggml_init_params { size_t mem_size; void * mem_buffer; bool no_alloc; };
struct ggml_context * ggml_init(struct ggml_init_params params);
void ggml_free(struct ggml_context * ctx);
struct ggml_tensor * ggml_new_tensor_1d(struct ggml_context * ctx, int type, int64_t ne0);
struct ggml_tensor * ggml_clamp(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
struct ggml_tensor * ggml_clamp_inplace(struct ggml_context * ctx, struct ggml_tensor * a, float min, float max);
struct ggml_tensor * ggml_view_tensor(struct ggml_context * ctx, struct ggml_tensor * src);
void * ggml_get_data(const struct ggml_tensor * tensor);
"""


@pytest.mark.skipif(not (GGML_0253 / "lib" / "libggml-base.so").exists(),
                    reason="no ggml 0.25.3 CPU build (make ggml-cpu)")
@pytest.mark.parametrize("version", VERSIONS)
def test_clamp_replay_on_the_real_ggml_0253(version):
    """The same on ggml 0.25.3's own library (cffi's ABI mode, no bridge build): an in-place
    node shares its source's data, a new one has its own."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef(CLAMP_ABI)
    lib = ffi.dlopen(str(GGML_0253 / "lib" / "libggml-base.so"))
    ctx = lib.ggml_init({"mem_size": 1 << 16, "mem_buffer": ffi.NULL, "no_alloc": False})
    try:
        node = _clamp_node(version)
        a = lib.ggml_new_tensor_1d(ctx, 0, 16)
        out = find_replay(node)(lib, ctx, node, [a])
        assert (lib.ggml_get_data(out) == lib.ggml_get_data(a)) == (node.view_src is not None)
    finally:
        lib.ggml_free(ctx)


def test_dsv4_hc_pre_params_of_either_version_are_the_same_op():
    """ggml_dsv4_hc_pre writes (scale, gated) = (1.0f, 0) from 0.25.3 on, nothing before: a
    v0.20.2 node replayed on ggml 0.25.3 (and the other way) is the same weighted sum; a
    gated node or another scale is not."""
    from cannops.backend.ggml.ops import same_params
    from cannops.cases.dsv4 import dsv4_hc_pre
    load_all()
    nodes = {}
    for version in VERSIONS:
        g = Graph(version)
        nodes[version] = dsv4_hc_pre(g.new_tensor("f32", [8, 4, 3], "x"), g.new_tensor("f32", [4, 3], "w"))
    old, new = (bytes(nodes[v].op_params) for v in VERSIONS)
    assert old != new and same_params("DSV4_HC_PRE", new, old) and same_params("DSV4_HC_PRE", old, new)
    g = Graph(VERSIONS[-1])
    gated = dsv4_hc_pre(g.new_tensor("f32", [8, 4, 3]), g.new_tensor("f32", [8, 4, 3]), 1.0, gated=True)
    assert not same_params("DSV4_HC_PRE", bytes(gated.op_params), old)
    half = bytearray(new)
    half[:4] = np.float32(0.5).tobytes()
    assert not same_params("DSV4_HC_PRE", bytes(half), old)
    assert not same_params("CLAMP", new, old)   # no change declared: bytes must match


def test_a_constructor_this_ggml_lacks_is_named():
    """An op newer than the bridge's ggml: its cases are not supported, naming the symbol
    (GGMLDevice.supports), rather than failing with cffi's AttributeError."""
    from cannops.backend.ggml.library import unbound_symbol
    err = AttributeError("cffi library 'cannops.native._ggml' has no function, constant or global "
                         "variable named 'ggml_col2im_1d'")
    assert unbound_symbol(err) == "ggml_col2im_1d"
    assert unbound_symbol(AttributeError("'NoneType' object has no attribute 'x'")) is None
