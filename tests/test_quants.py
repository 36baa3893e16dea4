"""cases/quants.py: each own codec on hand-built blocks (known bytes -> known values, and
back), the gguf-backed ones on a block each, and what cannot be encoded says so."""
import pathlib

import numpy as np
import pytest

from cannops.backend import reference
from cannops.cases import quants
from cannops.cases.graph import Graph
from cannops.cases.types import ggml_type


def f16_bytes(v):
    return list(np.array([v], np.float16).view(np.uint8))


def test_q1_0_block_is_a_scale_and_sign_bits():
    # d = 0.5; byte 0 = 0b00000101: elements 0 and 2 positive; byte 15 = 0x80: element 127
    block = np.array([f16_bytes(0.5) + [0x05] + [0] * 14 + [0x80]], np.uint8)
    v = quants.dequantize(block, ggml_type("q1_0"))
    expect = np.full(128, -0.5, np.float32)
    expect[[0, 2, 127]] = 0.5
    np.testing.assert_array_equal(v[0], expect)
    # encoding: d = mean |x| (here 0.5), a set bit for x >= 0 (zero included)
    x = np.where(np.arange(128) % 3 == 0, 0.5, -0.5).astype(np.float32)
    x[1], x[4] = 0.0, -1.0  # mean |x| stays 0.5: 126 halves + 0 + 1.0
    q = quants.quantize(x[None], ggml_type("q1_0"))
    assert q.shape == (1, 18) and np.float16(q[0, :2].view(np.float16)[0]) == np.float16(0.5)
    bits = np.unpackbits(q[0, 2:], bitorder="little")
    np.testing.assert_array_equal(bits, (x >= 0).astype(np.uint8))


def test_q2_0_block_codes_are_minus_one_to_two_times_d():
    # d = 2; byte 0 = 0b11100100: elements 0..3 have codes 0, 1, 2, 3 -> -2, 0, 2, 4
    block = np.array([f16_bytes(2.0) + [0b11100100] + [0x55] * 15], np.uint8)
    v = quants.dequantize(block, ggml_type("q2_0"))
    np.testing.assert_array_equal(v[0, :4], [-2, 0, 2, 4])
    np.testing.assert_array_equal(v[0, 4:], 0)     # 0x55: code 1 everywhere
    # encoding: d = amax, code = roundf(x / d) + 1 clamped; 0.5 rounds away from zero
    x = np.zeros(64, np.float32)
    x[:6] = [-4, 4, 2, -2, 1.99, -1.0]              # d = 4: -1, 1, 0.5 -> 1, -0.5 -> -1, ~0.5 -> 0, -0.25 -> 0
    q = quants.quantize(x[None], ggml_type("q2_0"))
    assert q[0, :2].view(np.float16)[0] == 4
    codes = (q[0, 2:, None] >> np.array([0, 2, 4, 6], np.uint8)) & 3
    np.testing.assert_array_equal(codes.reshape(-1)[:8], [0, 2, 2, 0, 1, 1, 1, 1])


def test_nvfp4_scales_are_ue4m3_and_codes_e2m1():
    # scale byte 0x38: exponent 7, mantissa 0 -> 1.0, halved (ggml's doubled e2m1 table) -> 0.5
    # code 0x2 = 2 (e2m1 1.0), 0xF = -12 (e2m1 -6.0)
    block = np.array([[0x38, 0x40, 0x00, 0x7F] + [0xF2] + [0] * 31], np.uint8)
    v = quants.dequantize(block, ggml_type("nvfp4"))
    assert v[0, 0] == 1.0 and v[0, 8] == -6.0                  # byte 0: element 0 low, element 8 high
    np.testing.assert_array_equal(v[0, 16:], 0)                   # code 0, and scale 0 / 0x7F read 0
    assert quants.ue4m3_to_f32(np.array([0x40], np.uint8))[0] == 1.0   # 2.0 halved
    assert quants.ue4m3_to_f32(np.array([0x01], np.uint8))[0] == 2.0 ** -10  # subnormal 2^-9, halved
    # encoding: scale = ue4m3(amax / 6); each value to the nearest e2m1 step of it
    x = np.zeros(64, np.float32)
    x[:16] = np.linspace(-6, 6, 16)
    q = quants.quantize(x[None], ggml_type("nvfp4"))
    assert q[0, 0] == 0x38 and q[0, 1] == 0                       # amax 6 -> 1.0; zeros -> 0
    np.testing.assert_array_equal(quants.f32_to_ue4m3(np.array([448.0, 1e9, 0.0, -1.0, 2.0 ** -9], np.float32)),
                                  [0x7E, 0x7E, 0, 0, 1])
    back = quants.dequantize(q, ggml_type("nvfp4"))[0, :16]
    steps = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    nearest = np.sign(x[:16]) * steps[np.abs(np.abs(x[:16])[:, None] - steps).argmin(axis=1)]
    np.testing.assert_array_equal(back, nearest)


@pytest.mark.parametrize("name,peak", [("q4_0", 1.0), ("q8_0", 127.0), ("mxfp4", 1.0)])
def test_gguf_codecs_round_trip_one_block(name, peak):
    t = ggml_type(name)
    x = np.zeros((1, t.blck_size), np.float32)
    x[0, 0] = peak  # a value the block's scale represents exactly
    np.testing.assert_array_equal(quants.dequantize(quants.quantize(x, t), t), x)


def test_gguf_codecs_by_chunks_of_rows_are_gguf_bit_for_bit(monkeypatch):
    """quants.py runs gguf's block codecs on chunks of whole rows, not its groups of 16 rows:
    the same values bit for bit (NaN payloads of random scales included), also where a
    tensor spans several chunks and the last is short."""
    import gguf.quants as gq
    from cannops.cases.types import TYPES
    monkeypatch.setattr(quants, "CODEC_CHUNK", 1000)
    monkeypatch.setattr(quants, "_CODECS", {})
    rng = np.random.default_rng(1)
    checked = 0
    for t in (t for t in TYPES.values() if t.is_quantized):
        if quants.missing(t, "dequantize") or t.name in quants.OWN_DEQUANT:
            continue
        n = t.blck_size * 3
        raw = rng.integers(0, 256, (37, t.row_size(n)), dtype=np.uint8)
        with np.errstate(all="ignore"):
            ours, theirs = quants.dequantize(raw, t), gq.dequantize(raw, t.qtype)
        assert ours.shape == theirs.shape and np.array_equal(ours.view(np.uint32), theirs.view(np.uint32)), t.name
        if t.name not in quants.OWN_QUANT and not quants.missing(t, "quantize"):
            x = rng.uniform(-1, 1, (37, n)).astype(np.float32)
            np.testing.assert_array_equal(quants.quantize(x, t), gq.quantize(x, t.qtype), err_msg=t.name)
        checked += 1
    assert checked >= 15


def test_every_matmul_type_decodes_and_the_missing_encoders_say_why():
    from cannops.cases.matmul import ALL_TYPES
    for name in ALL_TYPES:
        assert quants.missing(ggml_type(name), "dequantize") is None, name
    for name in ("q1_0", "q2_0", "nvfp4", "mxfp4", "q4_0", "q8_0", "tq2_0"):
        assert quants.missing(ggml_type(name), "quantize") is None, name
    for name in ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"):
        assert quants.missing(ggml_type(name), "quantize") is None, name
    why = quants.missing(ggml_type("iq2_xxs"), "quantize")
    assert why and "iq2_xxs" in why
    # the reference then declines a copy into iq2_xxs with that reason
    g = Graph()
    from cannops.cases.graph import cpy
    node = cpy(g.new_tensor("f32", [256, 2]), g.new_tensor("iq2_xxs", [256, 2]))
    assert reference.unsupported(node) == why


# --- k-quants and iq4: round trips within the format's step, scales as the format implies,
#     and the bytes against libggml-CPU's own row quantizer (a cross-check only) ---

KQ = ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs")
# worst |decode(encode(x)) - x| for x uniform in [-1, 1]: about a code step, smaller with more bits
KQ_STEP = {"q2_K": 0.5, "q3_K": 0.3, "q4_K": 0.1, "q5_K": 0.06, "q6_K": 0.02, "iq4_nl": 0.15, "iq4_xs": 0.15}


def _uniform(rows, n, seed=0):
    x = np.random.default_rng(seed).uniform(-1, 1, (rows, n)).astype(np.float32)
    x[1, :48] = 0          # zero sub-blocks
    x[2] = 0               # an all-zero row
    return x


@pytest.mark.parametrize("name", KQ)
def test_kquant_round_trip_is_within_a_step(name):
    t = ggml_type(name)
    x = _uniform(8, 512)
    q = quants.quantize(x, t)
    assert q.shape == (8, t.row_size(512)) and q.dtype == np.uint8
    y = quants.dequantize(q, t)
    assert np.abs(y - x).max() < KQ_STEP[name]
    np.testing.assert_array_equal(y[2], 0)


@pytest.mark.parametrize("name", KQ)
def test_kquant_bytes_match_libggml_cpu(name):
    from cannops.native._ggml import ffi, lib
    t = ggml_type(name)
    for scale in (1.0, 150.0):
        x = _uniform(16, 512, seed=int(scale)) * np.float32(scale)
        ref = np.empty((16, t.row_size(512)), np.uint8)
        lib.ggml_get_type_traits_cpu(t.value).from_float(ffi.from_buffer("float[]", x),
                                                           ffi.from_buffer("char[]", ref), x.size)
        mine = quants.quantize(x, t)
        np.testing.assert_array_equal(quants.dequantize(mine, t), quants.dequantize(ref, t))
        if name != "iq4_nl":  # libggml leaves an all-zero iq4_nl block's codes stale (d = 0)
            np.testing.assert_array_equal(mine, ref)


def test_q6_K_scales_are_int8_of_a_shared_f16():
    # sub-block j holds the constant j + 1: its scale is -(j + 1)/32 (code -32); the largest
    # in magnitude becomes int8 -128 of d = 0.5/128, the others -8 (j + 1)
    x = np.repeat(np.arange(1, 17, dtype=np.float32), 16)[None]
    q = quants.quantize(x, ggml_type("q6_K"))
    d = q[0, 208:210].view(np.float16)[0]
    sc = q[0, 192:208].view(np.int8).astype(np.float32)
    assert sc[15] == -128                               # the largest sub-scale is the int8 extreme
    np.testing.assert_allclose(d * sc, -np.arange(1, 17) / 32, rtol=1e-2)   # x = -32 * scale
    np.testing.assert_allclose(quants.dequantize(q, ggml_type("q6_K"))[0], x[0], rtol=1e-2)


def test_q4_K_scale_and_min_are_six_bit_of_shared_halves():
    # one sub-block of 32 spans [0, 15]: scale 1, min 0; the others span [-1, 0]
    x = np.tile(np.linspace(-1, 0, 32, dtype=np.float32), 8)
    x[:32] = np.arange(32, dtype=np.float32) % 16
    q = quants.quantize(x[None], ggml_type("q4_K"))
    d, dmin = q[0, :4].view(np.float16).astype(np.float32)
    assert d == np.float32(np.float16(1 / 63))                        # max scale 1 -> d = 1/63
    assert q[0, 4] & 63 == 63                                          # sub-block 0: scale 63/63
    assert abs(dmin * 63 - 1) < 0.03 and q[0, 8] & 63 == 0            # max min ~1; sub-block 0: min 0
    np.testing.assert_allclose(quants.dequantize(q, ggml_type("q4_K"))[0, :32], x[:32], atol=5e-3)


def test_iq4_nl_scale_is_the_weighted_fit_of_max_over_minus_127():
    # values exactly on the table times 0.01: the fit gives d = 0.01 back and every code
    x = (quants.IQ4NL.astype(np.float32) * np.float32(0.01))[np.arange(32) % 16][None]
    q = quants.quantize(x, ggml_type("iq4_nl"))
    assert q[0, :2].view(np.float16)[0] == np.float16(0.01)
    np.testing.assert_array_equal(q[0, 2:] & 0xF, np.arange(16))
    expect = quants.IQ4NL[np.arange(32) % 16] * np.float32(np.float16(0.01))
    np.testing.assert_array_equal(quants.dequantize(q, ggml_type("iq4_nl"))[0], expect)


def _numpy_encoded():
    from cannops.cases.types import TYPES
    return [t.name for t in TYPES.values() if t.is_quantized and t.name not in quants.SEARCHED
            and quants.missing(t, "quantize") is None]


@pytest.mark.parametrize("name", _numpy_encoded())
def test_inputs_quantized_by_libggml_are_the_numpy_encoders_bytes(name):
    """Inputs are quantized by libggml's chunk quantizer (fast) where the bridge is built,
    by the NumPy encoder elsewhere: the same bytes, so a case's data is the same either way."""
    pytest.importorskip("cannops.native._ggml")
    from cannops.cases.inputs import quantize
    t = ggml_type(name)
    for scale in (1.0, 150.0):
        x = _uniform(16, 512, seed=int(scale)) * np.float32(scale)
        np.testing.assert_array_equal(quantize(x, t), quants.quantize(x, t))


GGML_0253 = pathlib.Path(__file__).resolve().parents[1] / "build" / "ggml-cpu" / "prefix" / "lib"


@pytest.mark.skipif(not (GGML_0253 / "libggml-base.so").exists(),
                    reason="no ggml 0.25.3 CPU build (make ggml-cpu)")
def test_tq1_0_encoder_is_byte_identical_to_ggml_0253():
    """tq1_0 (new to 0.25.3's all_types: CPY / SET_ROWS into it): the NumPy encoder (the
    gguf package's) against ggml 0.25.3's own quantizer, loaded from its CPU build, on
    uniform rows, tiny and huge scales, zeros and values on the rounding ties of d/2."""
    import cffi
    ffi = cffi.FFI()
    ffi.cdef("size_t ggml_quantize_chunk(int type, const float * src, void * dst, int64_t start, "
             "int64_t nrows, int64_t n_per_row, const float * imatrix);")
    lib = ffi.dlopen(str(GGML_0253 / "libggml-base.so"))
    t = ggml_type("tq1_0")
    rng = np.random.default_rng(7)
    ties = (rng.integers(-2, 3, size=(8, 512)) * 0.25).astype(np.float32)   # multiples of d/2 (d = 0.5)
    ties[:, ::64] = 0.5   # each block's absmax, so that d is 0.5 exactly
    for x in (_uniform(16, 512, seed=3), _uniform(4, 512, seed=4) * np.float32(1e-6),
              _uniform(4, 512, seed=5) * np.float32(1e4), np.zeros((2, 512), np.float32), ties):
        x = np.ascontiguousarray(x, np.float32)
        got = np.empty((x.shape[0], t.row_size(x.shape[1])), np.uint8)
        lib.ggml_quantize_chunk(t.value, ffi.from_buffer("float[]", x), ffi.from_buffer("char[]", got),
                                0, x.shape[0], x.shape[1], ffi.NULL)
        np.testing.assert_array_equal(quants.quantize(x, t), got)


@pytest.mark.parametrize("type_name", ["f32", "f16", "q4_K", "q8_0"])
def test_a_leaf_drawn_in_chunks_is_the_leaf_drawn_whole(monkeypatch, type_name):
    """Leaves are drawn DRAW_CHUNK elements at a time (and quantized leaves quantized a few
    rows at a time): the same bytes as one float64 draw of the whole, converted once."""
    from cannops.cases import inputs
    g = Graph()
    t = g.new_tensor(ggml_type(type_name), [256, 7, 3, 1], "a")
    whole = np.random.default_rng(3).uniform(-1, 1, size=(1, 3, 7, 256)).astype(np.float32)
    expect = inputs.quantize(whole, t.type) if t.type.is_quantized else whole.astype(t.type.dtype)
    monkeypatch.setattr(inputs, "DRAW_CHUNK", 600)   # rows of 256: chunks of 2 rows, and a row split
    got = inputs.init_leaf(t, np.random.default_rng(3))
    assert got.shape == expect.shape and got.tobytes() == expect.tobytes()


def test_perf_leaves_repeat_their_first_rows():
    """perf (distinct_rows): a quantized leaf's first rows are those of the whole draw,
    repeated over the others; other leaves are drawn whole."""
    from cannops.cases import inputs
    g = Graph()
    q, f = g.new_tensor(ggml_type("q4_K"), [256, 7, 3, 1], "a"), g.new_tensor(ggml_type("f32"), [256, 7, 3, 1], "b")
    rows = inputs.init_leaf(q, np.random.default_rng(3)).reshape(21, -1)
    got = inputs.init_leaf(q, np.random.default_rng(3), distinct_rows=5).reshape(21, -1)
    np.testing.assert_array_equal(got, np.concatenate([rows[:5]] * 4 + [rows[:1]]))
    assert len({r.tobytes() for r in rows[:5]}) == 5
    np.testing.assert_array_equal(inputs.init_leaf(f, np.random.default_rng(3), distinct_rows=5),
                                  inputs.init_leaf(f, np.random.default_rng(3)))


@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (0.0, 1.0), (-150.0, 150.0), (-0.9, 1.1), (-3.14159, 3.14159),
                                   (-0.02, -0.005), (0.1, 1.0), (0.0, 0.0), (-100, 100)])
def test_a_uniform_leaf_is_numpys_uniform_bit_for_bit(monkeypatch, lo, hi):
    """cases/inputs.py draws uniform leaves as lo + (hi - lo) * random() itself: the bytes of
    NumPy's own uniform, converted to float32, over a million draws and across chunks."""
    from cannops.cases import inputs
    monkeypatch.setattr(inputs, "DRAW_CHUNK", 300_007)
    expect = np.random.default_rng(11).uniform(lo, hi, 1_000_003).astype(np.float32)
    rng = np.random.default_rng(11)
    got = inputs.uniform_f32(rng, lo, hi, (1_000_003,))
    assert got.tobytes() == expect.tobytes()
    assert rng.random() == np.random.default_rng(11).random(1_000_004)[-1]   # the stream goes on alike
