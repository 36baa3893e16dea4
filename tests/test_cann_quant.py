"""CANN quantized weights, as ggml-cann v0.20.2 does them: the q4_0 / q8_0 device layout
made at upload (hand-built blocks), MUL_MAT through aclnnWeightQuantBatchMatmulV2 and
GET_ROWS / CONCAT of q8_0 / q4_0 on CANN-SIM against the reference, and the simulator's
WeightQuantBatchMatmulV2 (documented refusals, antiquantisation on known values)."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, rejected  # noqa: E402
from _sample import assert_ok, cases_of, sample  # noqa: E402
from cannops.backend.cann import layout  # noqa: E402
from cannops.cases.types import ggml_type  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402


def f16_bytes(v):
    return np.array([v], np.float16).view(np.uint8)


def test_q4_0_layout_puts_signed_int4_quants_then_scales():
    # one block: d = 1; qs[0] = 0x21 -> element 0 has nibble 1 (-7), element 16 nibble 2 (-6);
    # qs[1] = 0x8F -> element 1 has 15 (7), element 17 has 8 (0); the rest 0x88 (all 0)
    block = np.concatenate([f16_bytes(1.0), [0x21, 0x8F], np.full(14, 0x88)]).astype(np.uint8)
    img = layout.to_device(ggml_type("q4_0"), block)
    assert img.size == 18
    assert img[0] == 0x79          # elements 0, 1 = -7 (0x9), 7 (0x7): low nibble first
    assert img[8] == 0x0A          # elements 16, 17 = -6 (0xA), 0
    assert set(img[1:8]) == {0} and set(img[9:16]) == {0}
    np.testing.assert_array_equal(img[16:], f16_bytes(1.0))
    np.testing.assert_array_equal(layout.from_device(ggml_type("q4_0"), img), block)


def test_q8_0_layout_and_round_trip():
    t = ggml_type("q8_0")
    blocks = np.arange(2 * 34, dtype=np.uint8).reshape(2, 34)
    img = layout.to_device(t, blocks)
    np.testing.assert_array_equal(img[:64], np.concatenate([blocks[0, 2:], blocks[1, 2:]]))
    np.testing.assert_array_equal(img[64:], [0, 1, 34, 35])
    np.testing.assert_array_equal(layout.from_device(t, img), blocks.reshape(-1))
    assert layout.to_device(ggml_type("q4_1"), blocks) is blocks   # ggml-cann leaves others


def test_quantized_matmul_get_rows_and_concat_cases_are_ok():
    mm = [c for c in cases_of("MUL_MAT") if c.params["type_a"] in ("q4_0", "q8_0")
          and c.params["per"] == [0, 1, 2, 3] and c.params["m"] * c.params["k"] <= 2880 * 2880
          and c.params["bs"][0] <= 3]
    rows = [c for c in cases_of("GET_ROWS") if c.params["type"] == "q8_0"]   # not q4_0 (ggml-cann)
    cat = [c for c in cases_of("CONCAT") if c.params["type"] in ("q4_0", "q8_0")]
    assert_ok("CANN-SIM", sample(mm, 12) + sample(rows, 3) + sample(cat, 4))


def _wqbmm_args(t, k=64, n=4, m=2, w_type=None, group=32, scale_shape=None, x_type=None):
    F16 = lib.ACL_FLOAT16
    x = t.tensor([m, k], x_type or F16)
    w = t.tensor([k, n], w_type or lib.ACL_INT8, [1, k])             # transposed weight
    s = t.tensor(scale_shape or [k // 32, n], F16, [1, k // 32] if not scale_shape else None)
    y = t.tensor([m, n], x_type or F16)
    return x, w, s, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, group, y


def test_weight_quant_batch_matmul_refuses_what_the_docs_refuse():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    op = SIM["WeightQuantBatchMatmulV2"]
    t = SimTensors()
    try:
        PARAM_INVALID = lib.ACLNN_ERR_PARAM_INVALID
        e = rejected(op, *_wqbmm_args(t, group=48))
        assert e.code == PARAM_INVALID and "multiple of 32" in str(e)
        assert "multiple of 32" in str(rejected(op, *_wqbmm_args(t, k=32, group=32)))   # [32, k - 1]
        assert "per tensor" in str(rejected(op, *_wqbmm_args(t, group=0)))              # (k/32, n) scales
        # a transposed INT4 weight's inner axis is k
        assert "even inner axis" in str(rejected(op, *_wqbmm_args(t, k=63, n=4, w_type=lib.ACL_INT4,
                                                                   group=0, scale_shape=[4])))
        assert "should be x's" in str(rejected(op, *_wqbmm_args(t, x_type=lib.ACL_BF16)))  # f16 scale
        e = rejected(op, ffi.NULL, *_wqbmm_args(t)[1:])
        assert e.code == lib.ACLNN_ERR_PARAM_NULLPTR
        ok = op(*_wqbmm_args(t))
        assert ok.inputs and ok.outputs
    finally:
        t.close()


def test_weight_quant_batch_matmul_antiquantises_per_group():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        plan = SIM["WeightQuantBatchMatmulV2"](*_wqbmm_args(t, k=64, n=2, m=1))
        x = np.ones((1, 64), np.float16)
        w = np.zeros((64, 2), np.int8)
        w[0, 0], w[40, 0], w[5, 1] = 3, -2, 7
        s = np.array([[0.5, 2.0], [0.25, 1.0]], np.float16)   # rows: groups of k 0-31, 32-63
        y = plan.compute(x, w, s)
        np.testing.assert_array_equal(y, [[3 * 0.5 - 2 * 0.25, 7 * 2.0]])
    finally:
        t.close()
