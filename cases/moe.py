"""Mixture-of-experts and other LLM-inference matrix products: test_mul_mat_id (MUL_MAT_ID),
test_mul_mat_id_fusion (MUL_MAT_ID_FUSION), test_out_prod (OUT_PROD), test_mul_mat_hadamard
(MUL_MAT_HADAMARD) and test_mul_mat_vec_fusion (MUL_MAT_VEC_FUSION, a whole FFN block).

MUL_MAT_ID picks, per token and per used slot, one expert matrix by a row id; the row ids
are initialised as test-backend-ops does: each token's row is a shuffle of the experts.
"""
from __future__ import annotations

import numpy as np

from .binary import add_id
from .catalog import Deviation, Family, new_params, register, Since, Tolerance, unique_params
from .unary import f16_gelu_table
from . import tolerances
from .glu import glu_split, swiglu_clamp
from .graph import GLU_OPS, Tensor, add, binary, mul, new_op, reshape, transpose, view
from .inputs import shuffled_rows
from .matmul import (BASE_TYPES, OTHER_TYPES, ALL_TYPES, IQP_TYPES, VARS as MM_VARS, blck_size,
                     build_mul_mat, mm, mul_mat, mul_mat_flops)
from .movement import get_rows, repeat
from .types import F32, I32, ggml_type
from .implementations import ACLNN, GGML_CPU


# --- constructors (ggml.c) ---

def mul_mat_id(as_: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    """ggml_mul_mat_id: as {k, m, n_expert}, b {k, n_b, n_tokens}, ids i32 {n_used, n_tokens}
    -> f32 {m, n_used, n_tokens}: out[:, e, t] = as[:, :, ids[e, t]] @ b[:, e % n_b, t]."""
    assert not as_.nb[0] > as_.nb[1] and ids.type == I32
    assert as_.ne[3] == 1 and b.ne[3] == 1 and ids.ne[2] == 1 and ids.ne[3] == 1
    assert ids.ne[1] == b.ne[2] and as_.ne[0] == b.ne[0] and ids.ne[0] % b.ne[1] == 0
    return new_op(as_.graph, "MUL_MAT_ID", F32, [as_.ne[1], ids.ne[0], b.ne[2], 1], [as_, b, ids])


def out_prod(a: Tensor, b: Tensor) -> Tensor:
    """ggml_out_prod: a {m, k, ne02, ne03}, b {n, k, ne12, ne13} -> f32 {m, n, ne12, ne13},
    out = a b^T per matrix; a's batch dims divide b's (repeated, as in MUL_MAT)."""
    assert a.ne[1] == b.ne[1] and b.ne[2] % a.ne[2] == 0 and b.ne[3] % a.ne[3] == 0
    assert not a.nb[0] > a.nb[1], "ggml_out_prod: a must not be transposed"
    return new_op(a.graph, "OUT_PROD", F32, [a.ne[0], b.ne[0], b.ne[2], b.ne[3]], [a, b])


HINT_SRC0_IS_HADAMARD = 1   # enum ggml_op_hint


def mul_mat_set_hint(t: Tensor, hint: int) -> Tensor:
    """ggml_mul_mat_set_hint: op_params word 1 of a MUL_MAT node."""
    assert t.op == "MUL_MAT"
    t.set_params_i32([hint], start=1)
    return t


# --- inputs ---

def expert_ids(t: Tensor, rng: np.random.Generator, n_mats: int) -> np.ndarray:
    """init_mul_mat_id_tensors: each row holds i % n_mats for i < ne0, shuffled."""
    return shuffled_rows(rng, np.arange(t.ne[0]) % n_mats, t.nrows())


def init_moe(t, rng, p):
    """Row ids for the i32 leaves, uniform [-1, 1] for the rest."""
    return expert_ids(t, rng, p["n_mats"]) if t.type == I32 else None


def new_ids(g, n_mats, n_used, n_tokens) -> Tensor:
    """ids {n_mats, n_tokens}, of which a view keeps the first n_used per token."""
    ids = g.new_tensor(I32, [n_mats, n_tokens], "ids")
    return view(ids, [n_used, n_tokens], [ids.nb[1]]) if n_used != n_mats else ids


# enum ggml_prec: the smallest rank a MUL_MAT(_ID) may convert src[1] to (ggml_prec_set_src,
# 0.25.3: op_params word 2 + 1)
PREC_F32, PREC_Q8 = 10, 30


def prec_set_src1(t: Tensor, prec: int) -> Tensor:
    """ggml_prec_set_src(t, prec, 1) on a MUL_MAT or MUL_MAT_ID node."""
    assert t.op in ("MUL_MAT", "MUL_MAT_ID")
    t.set_params_i32([prec], start=3)
    return t


def moe_flops(out, p):
    return 2 * p["m"] * p["k"] * p["n"] * p["n_used"]


# --- test_mul_mat_id ---

def build_mul_mat_id(g, type_a, type_b, n_mats, n_used, b, m, n, k, amax=1.0, m_v=0):
    """0.25.3 adds amax (b uniform in [-amax, amax]; beyond f16's range the product asks for
    f32 activations) and m_v (as a view whose experts are strided by m_v rows)."""
    as_ = g.new_tensor(type_a, [k, m_v or m, n_mats], "as")
    if m_v:
        assert m_v > m
        as_ = view(as_, [k, m, n_mats], as_.nb[1:3])
    ids = new_ids(g, n_mats, n_used, n)
    bt = g.new_tensor(type_b, [k, 1 if b else n_used, n], "b")
    out = mul_mat_id(as_, bt, ids)
    return prec_set_src1(out, PREC_F32) if amax > 65504.0 else out


def init_mul_mat_id(t, rng, p):
    """init_mul_mat_id_tensors: the row ids; with amax != 1 every f32 leaf uniform in
    [-amax, amax]."""
    if t.type == I32:
        return expert_ids(t, rng, p["n_mats"])
    amax = p.get("amax", 1.0)
    if amax != 1.0 and t.type == F32:
        return rng.uniform(-amax, amax, size=tuple(reversed(t.ne))).astype(np.float32)
    return None


def mmid(type_a, type_b, n_mats, n_used, b, m, n, k):
    return dict(type_a=type_a, type_b=type_b, n_mats=n_mats, n_used=n_used, b=b, m=m, n=n, k=k)


def mul_mat_id_eval():
    c = []
    # many experts times tokens
    for b in (False, True):
        c += [mmid("f16", "f32", 16, 16, b, 32, 1024, 16), mmid("f16", "f32", 2, 2, b, 32, 8192, 64),
              mmid("f16", "f32", 16, 16, b, 50, 200, 64), mmid("bf16", "f32", 16, 16, b, 32, 1024, 16),
              mmid("bf16", "f32", 16, 16, b, 50, 200, 64)]
    c.append(mmid("f16", "f32", 1, 1, False, 8, 16, 1))
    # gpt-oss shapes (a Vulkan mmq_id issue)
    c += [mmid(t, "f32", 32, 2, False, 2880, 32, 2880) for t in ("mxfp4", "q4_0")]
    c += [mmid(t, "f32", 4, 2, False, 64, 16, 3 * blck_size(t)) for t in ALL_TYPES]
    c += [mmid(ta, "f32", n_mats, n_used, b, 512, n, 256) for ta in BASE_TYPES for n_mats in (4, 8)
          for n_used in (1, 2, 4) for b in (False, True) for n in (1, 4, 5, 17, 32, 129)]
    c += [mmid(ta, "f32", 4, 2, False, 512, n, 256) for ta in OTHER_TYPES for n in (1, 32)]
    return c


def mul_mat_id_0_25_3():
    """The cases make_test_cases_eval gained by 0.25.3 (tq1_0 joins all_types and
    other_types)."""
    c = []
    # token tiles: every token to every expert, n rows each; experts that get no row
    for t in ("q4_K", "iq2_xs", "f16"):
        c += [mmid(t, "f32", 4, 4, False, 512, n, 256) for n in (1, 15, 16, 17, 31, 32, 33, 47, 48, 49)]
        c.append(mmid(t, "f32", 8, 1, False, 512, 1, 256))
    # as a view whose experts are strided by more rows than it uses
    c += [mmid(t, "f32", 4, 2, False, 8, n, 64) | dict(m_v=64) for t, n in (("f32", 1), ("f16", 16))]
    c.append(mmid("iq2_xxs", "f32", 1, 1, False, 1, 8192, 4096))
    c += [mmid("f16", "f32", 1, 1, False, 8, 16, k) for k in (63, 65)]
    # more than 256 experts
    c += [mmid(t, "f32", e, 10, False, m, n, k) for n in (1, 5, 64, 300) for e in (512, 1024)
          for t, m, k in (("iq3_s", 128, 512), ("q4_0", 256, 128))]
    # several blocks per row
    c += [mmid("tq1_0", "f32", 28, 10, False, 1024, 1, 4096), mmid("tq1_0", "f32", 128, 8, False, 1024, 1, 2048)]
    c.append(mmid("tq1_0", "f32", 4, 2, False, 64, 16, 3 * blck_size("tq1_0")))
    c += [mmid(t, "f32", 4, 4, False, 16, 10, 256) for t in IQP_TYPES]
    # b beyond f16's range
    c += [mmid(t, "f32", e, u, False, m, n, k) | dict(amax=1e5) for n in (16, 32, 64)
          for t, e, u, m, k in (("q4_K", 128, 4, 4096, 2048), ("q8_0", 8, 2, 512, 256))]
    c += [mmid("tq1_0", "f32", 4, 2, False, 512, n, 256) for n in (1, 32)]
    return c


# qwen3-30b-a3b (128 experts, 8 used), its 32-expert variant, gpt-oss-20b
def mul_mat_id_perf():
    types = ("f32", "f16", "q4_0", "q8_0", "q4_K", "q6_K", "iq2_xs")
    bss = (1, 4, 8, 32, 64, 128, 256, 512)
    c = [mmid(t, "f32", 128, 8, False, 768, bs, 2048) for bs in bss for t in types]
    c += [mmid(t, "f32", 32, 4, False, 1792, bs, 2048) for bs in bss for t in types]
    c += [mmid("mxfp4", "f32", 32, 4, False, 2880, bs, 2880) for bs in (1, 4, 8, 512)]
    return c


MMID_VARS = ("type_a", "type_b", "n_mats", "n_used", "b", "m", "n", "k")

register(Family(
    name="mul_mat_id",
    strict=tolerances.MATMUL,
    build=build_mul_mat_id,
    vars=MMID_VARS,
    changes=(new_params("0.25.3", MMID_VARS, amax=1.0, m_v=0, add=mul_mat_id_0_25_3),),
    op="MUL_MAT_ID",
    # q8_0, q1_0, q2_0 and q4_1 are in both BASE_TYPES and OTHER_TYPES: their shared cases once
    eval_grid=lambda: unique_params(mul_mat_id_eval()),
    perf_grid=mul_mat_id_perf,
    init=init_mul_mat_id,
    max_nmse=5e-4,
    flops=moe_flops,
))


# --- 0.25.3: test_mul_mat(_id)_w4a8 / _w4a4, FP4 weights with 8-bit or 4-bit activations ---
# The W4A8 structs mark src[1] GGML_PREC_Q8 (no 4-bit activations); W4A4 is the default
# precision under another name. The product is the same: the reference is MUL_MAT's.

def _w4(op_name, build, vars, grid, q8):
    def build_w4(g, **p):
        out = build(g, **p)
        return prec_set_src1(out, PREC_Q8) if q8 else out
    register(Family(
        name=op_name.lower(), build=build_w4, vars=vars, op=op_name, eval_grid=grid, since="0.25.3",
        strict=tolerances.MATMUL, max_nmse=5e-4, init=init_mul_mat_id if "_ID" in op_name else None,
        flops=moe_flops if "_ID" in op_name else mul_mat_flops))


MM_W4_VARS = MM_VARS + ("src_overlap", "m_v", "pad")
MMID_W4_VARS = MMID_VARS + ("amax", "m_v")


def _w4mm(t, m, n, k):
    return mm(t, "f32", m, n, k, (1, 1), (1, 1)) | dict(src_overlap=False, m_v=0, pad=0)


def _w4mmid(t, n_mats, b, m, n):
    return mmid(t, "f32", n_mats, 2, b, m, n, 256) | dict(amax=1.0, m_v=0)


_w4("MUL_MAT_W4A8", build_mul_mat, MM_W4_VARS, lambda: [
    _w4mm("nvfp4", 32, 1, 256), _w4mm("nvfp4", 32, 32, 256), _w4mm("nvfp4", 64, 16, 512),
    _w4mm("mxfp4", 32, 32, 256), _w4mm("mxfp4", 64, 16, 512)], q8=True)
_w4("MUL_MAT_W4A4", build_mul_mat, MM_W4_VARS, lambda: [
    _w4mm("nvfp4", 32, 1, 256), _w4mm("nvfp4", 32, 32, 256), _w4mm("mxfp4", 32, 32, 256)], q8=False)
_w4("MUL_MAT_ID_W4A8", build_mul_mat_id, MMID_W4_VARS, lambda: [
    _w4mmid("nvfp4", 8, False, 32, 32), _w4mmid("nvfp4", 4, True, 64, 16), _w4mmid("mxfp4", 8, False, 32, 32)],
    q8=True)
_w4("MUL_MAT_ID_W4A4", build_mul_mat_id, MMID_W4_VARS, lambda: [
    _w4mmid("nvfp4", 8, False, 32, 32), _w4mmid("nvfp4", 4, True, 64, 16), _w4mmid("mxfp4", 8, False, 32, 32)],
    q8=False)


# --- test_mul_mat_id_fusion: o products summed, then (mul) a per-row weight ---

def build_mul_mat_id_fusion(g, type_a, type_b, n_mats, n_used, b, m, n, k, o, mul):
    as_ = g.new_tensor(type_a, [k, m, n_mats], "as")
    ids = new_ids(g, n_mats, n_used, n)
    bt = g.new_tensor(type_b, [k, 1 if b else n_used, n], "b")
    out = mul_mat_id(as_, bt, ids)
    for _ in range(1, o):
        out = add(out, mul_mat_id(g.new_tensor(type_a, [k, m, n_mats]), bt, ids))
    if mul:
        # ffn_moe_weighted: one weight per (slot, token)
        out = binary("MUL", out, g.new_tensor(out.type, [1, out.ne[1], out.ne[2], out.ne[3]]))
    return out


def mmid_fusion(type_a, type_b, n_mats, n_used, b, m, n, k, o=1, mul=False):
    return dict(mmid(type_a, type_b, n_mats, n_used, b, m, n, k), o=o, mul=mul)


register(Family(
    name="mul_mat_id_fusion",
    strict=tolerances.MATMUL,
    build=build_mul_mat_id_fusion,
    vars=("type_a", "type_b", "n_mats", "n_used", "b", "m", "n", "k", "o", "mul"),
    op="MUL_MAT_ID_FUSION",
    eval_grid=lambda: [mmid_fusion("f16", "f32", 16, 16, False, 32, 32, 32, 3)] + [
        mmid_fusion(t, "f32", 128, 8, False, 768, bs, 2048, 1, True)
        for bs in (1, 4, 512) for t in ("f32", "f16", "q4_0", "q4_K")],
    perf_grid=lambda: [mmid_fusion(**p) for p in mul_mat_id_perf()],
    init=init_moe,
    max_nmse=5e-4,
    fused=True,
    flops=moe_flops,
))


# --- test_out_prod ---

def build_out_prod(g, type_a, type_b, m, n, k, bs, nr, trans_b):
    a = g.new_tensor(type_a, [m, k, bs[0], bs[1]], "a")
    if trans_b:
        b = transpose(g.new_tensor(type_b, [k, n, bs[0] * nr[0], bs[1] * nr[1]], "b"))
    else:
        b = g.new_tensor(type_b, [n, k, bs[0] * nr[0], bs[1] * nr[1]], "b")
    return out_prod(a, b)


def op_case(type_a, type_b, m, n, k, bs, nr, trans_b=False):
    return dict(type_a=type_a, type_b=type_b, m=m, n=n, k=k, bs=list(bs), nr=list(nr), trans_b=trans_b)


def out_prod_eval():
    c = [op_case(ta, tb, 256, n, k, (bs2, bs3), (nr2, nr3)) for ta in BASE_TYPES for tb in ("f32", "f16")
         for n in (1, 16) for k in (1, 16) for bs2 in (1, 3) for bs3 in (1, 3)
         for nr2 in (1, 2) for nr3 in (1, 2)]
    # batched (ne2 > 1, one src0 per dst matrix) and broadcast (one src0 for nr2 matrices)
    c += [op_case("f32", "f32", 256, 16, 16, (ne2, 1), (1, 1)) for ne2 in (1, 8, 16, 32)]
    c += [op_case("f32", "f32", 256, 16, 16, (1, 1), (nr2, 1)) for nr2 in (8, 16, 32)]
    return c


register(Family(
    name="out_prod",
    strict=tolerances.MATMUL,   # on CANN an aclnnMatmul with ggml-cann's cubeMathType
    build=build_out_prod,
    vars=("type_a", "type_b", "m", "n", "k", "bs", "nr", "trans_b"),
    op="OUT_PROD",
    # (f32, f32, 256, 16, 16, [1,1], [1,1]) is listed by both sweeps: once here
    eval_grid=lambda: unique_params(out_prod_eval()),
    max_nmse=5e-4,
))


# --- test_mul_mat_hadamard: a MUL_MAT whose src0 is a Walsh-Hadamard matrix, hinted so ---

def build_mul_mat_hadamard(g, type_a, type_b, m, n, k, bs, nr, per, k_v, o):
    out = build_mul_mat(g, type_a, type_b, m, n, k, bs, nr, per, k_v, o)
    return mul_mat_set_hint(out, HINT_SRC0_IS_HADAMARD)


# popcount parity of 0..2^16-1: a sign of the Walsh-Hadamard matrix is the parity of r & i
_PARITY = np.zeros(1 << 16, np.uint8)
for _bit in range(16):
    _PARITY[1 << _bit:2 << _bit] = 1 - _PARITY[:1 << _bit]


def init_hadamard(t, rng, p):
    """"a": row r, column i is +-1/sqrt(ne0), negative when r & i has an odd popcount
    (r counts the rows of every matrix); everything else uniform. Written a block of rows
    at a time: the int64 grids of r & i at once were 7 GiB and 31 s for 16384 x 16384."""
    if t.name != "a":
        return None
    ne0, rows = t.ne[0], t.nrows()
    if ne0 > len(_PARITY):
        raise ValueError(f"a Hadamard row of {ne0} columns: at most {len(_PARITY)}")
    v = np.float32(1.0) / np.sqrt(np.float32(ne0))
    signs = np.array([v, -v], np.float32)
    out = np.empty((rows, ne0), np.float32)
    i = np.arange(ne0, dtype=np.int32)
    step = max(1, (1 << 20) // ne0)
    for r in range(0, rows, step):
        block = np.arange(r, min(rows, r + step), dtype=np.int64)[:, None]
        out[r:r + step] = signs[_PARITY[block & i]]
    return out


def hadamard(m, n, k, bs=(1, 1), type_b="f32"):
    return mm("f32", type_b, m, n, k, bs, (1, 1))


def hadamard_0_25_3():
    """0.25.3: f16 activations too, and the FWHT sizes up to 8192 (16384: too big)."""
    fwht = [(64, 1, 64), (128, 1, 128), (256, 1, 256), (512, 1, 512), (128, 32, 128), (256, 512, 256)]
    large = [(1024, 1, 1024), (2048, 1, 2048), (4096, 1, 4096), (8192, 1, 8192), (1024, 7, 1024)]
    return ([hadamard(*s, type_b="f16") for s in fwht] + [hadamard(128, 4, 128, (2, 3), "f16")] +
            [hadamard(16384, 1, 16384)] + [hadamard(*s, type_b=tb) for tb in ("f32", "f16") for s in large])


register(Family(
    name="mul_mat_hadamard",
    strict=tolerances.MATMUL,
    build=build_mul_mat_hadamard,
    vars=("type_a", "type_b", "m", "n", "k", "bs", "nr", "per", "k_v", "o"),
    changes=(new_params("0.25.3", ("type_a", "type_b", "m", "n", "k", "bs", "nr", "per", "k_v", "o"),
                        src_overlap=False, m_v=False, pad=False, add=hadamard_0_25_3),),
    op="MUL_MAT_HADAMARD",
    eval_grid=lambda: [hadamard(128, 1, 128), hadamard(64, 1, 64), hadamard(256, 1, 256),
                       hadamard(512, 1, 512), hadamard(128, 32, 128), hadamard(128, 4, 128, (2, 3)),
                       hadamard(256, 512, 256),
                       hadamard(32, 1, 32), hadamard(1024, 1, 1024)],  # below / above the FWHT sizes
    perf_grid=lambda: [hadamard(128, 1, 128), hadamard(64, 1, 64), hadamard(256, 1, 256),
                       hadamard(128, 32, 128)] + [hadamard(s, 2048, s) for s in (64, 128, 256, 512)],
    init=init_hadamard,
    max_nmse=5e-4,
    grad_nmax=20000,   # test_mul_mat's, which test_mul_mat_hadamard inherits
    grad_notes={GGML_CPU: Deviation(reason=(
        "the hint promises that A is the Walsh-Hadamard matrix, and ggml-CPU then computes the "
        "fast transform without reading A: perturbing A changes nothing (finite differences 0), "
        "while backprop, which ignores the hint, gives G B^T"))},
    flops=lambda out, p: 2 * p["m"] * p["n"] * p["k"] * p["bs"][0] * p["bs"][1],
))


# --- test_mul_mat_vec_fusion: up (and gate) projections, bias, GLU, bias or weight ---

def build_mul_mat_vec_fusion(g, type, glu_op, m, n, k, use_id, n_mats, n_used, b, with_bias,
                             with_gate, with_lane_scale, batch_dims):
    op = GLU_OPS[glu_op]   # SWIGLU, GEGLU or (0.25.3) SWIGLU_CLAMP, never SWIGLU_OAI

    def gated(ffn_gate, ffn_up):
        if op == "SWIGLU_CLAMP":
            return swiglu_clamp(ffn_gate, ffn_up, 10.0)   # test-backend-ops' limit
        return glu_split(ffn_gate, ffn_up, op)

    if not use_id:
        ch, samples = batch_dims
        cur = g.new_tensor(F32, [k, m, ch, samples], "cur")
        gate = g.new_tensor(type, [k, n, ch, samples], "gate") if with_gate else None
        up = g.new_tensor(type, [k, n, ch, samples], "up")

        def lane(w):
            x = mul_mat(w, cur)
            if with_lane_scale:
                x = mul(x, g.new_tensor(F32, [1]))
            if with_bias:
                x = add(x, g.new_tensor(F32, [x.ne[0], 1, ch, samples]))
            return x

        ffn_up = lane(up)
        out = gated(lane(gate), ffn_up) if with_gate else ffn_up
        return add(out, g.new_tensor(F32, [out.ne[0], 1, ch, samples]))

    gates = g.new_tensor(type, [k, n, n_mats], "gates")
    ups = g.new_tensor(type, [k, n, n_mats], "ups")
    ids = new_ids(g, n_mats, n_used, m)
    cur = g.new_tensor(F32, [k, 1 if b else n_used, m], "cur")

    def lane(w):
        x = mul_mat_id(w, cur, ids)
        if with_lane_scale:
            # one scale per expert, gathered per (slot, token)
            s = reshape(g.new_tensor(F32, [n_mats], "scale"), [1, n_mats, 1])
            s = get_rows(repeat(s, [1, n_mats, m, 1]), ids)
            x = mul(x, s)
        if with_bias:
            x = add_id(x, g.new_tensor(F32, [x.ne[0], n_mats]), ids)
        return x

    ffn_up = lane(ups)
    out = gated(lane(gates), ffn_up) if with_gate else ffn_up
    return mul(out, g.new_tensor(out.type, [1, out.ne[1], out.ne[2], out.ne[3]]))


def _vec_case(type, op, m, use_id, b, with_bias, with_gate, lane_scale, batch_dims, n=32):
    return dict(type=type, glu_op=GLU_OPS.index(op), m=m, n=n, k=256, use_id=use_id, n_mats=16,
                n_used=8, b=b, with_bias=with_bias, with_gate=with_gate,
                with_lane_scale=lane_scale, batch_dims=list(batch_dims))


def _vec_combos(gate_ops: tuple[str, ...]):
    """test_mul_mat_vec_fusion's nested loops: (type, glu op, (use_id, b, with_bias,
    with_gate, lane_scale)) for every combination the struct's grid walks."""
    for type in BASE_TYPES:
        for with_gate in (False, True):
            for use_id in (False, True):
                for b in (False, True) if use_id else (False,):
                    for with_bias in (False, True):
                        if not with_gate and not with_bias:
                            continue
                        for op in gate_ops if with_gate else ("SWIGLU",):
                            for lane_scale in (False, True) if type == "nvfp4" else (False,):
                                yield type, op, (use_id, b, with_bias, with_gate, lane_scale)


def vec_fusion_eval_0_25_3():
    """0.25.3: SWIGLU_CLAMP gates too, multi-token batches for every combination, an IQ2_S
    clamp with ids, and Q4_K row counts on both sides of a kernel boundary."""
    c = []
    for type, op, rest in _vec_combos(("SWIGLU", "GEGLU", "SWIGLU_CLAMP")):
        c.append(_vec_case(type, op, 1, *rest, (4, 2)))
        c += [_vec_case(type, op, mb, *rest, (1, 1)) for mb in (1, 2, 4, 8)]
    c += [_vec_case("iq2_s", "SWIGLU_CLAMP", 1, True, b, False, True, False, (4, 2)) for b in (False, True)]
    c += [_vec_case("q4_K", "SWIGLU", 2, False, False, False, True, False, (1, 1), n=rows)
          for rows in (6271, 6272, 6273)]
    return c


def vec_fusion_eval():
    c = []
    for type, op, rest in _vec_combos(("SWIGLU", "GEGLU")):
        use_id, _, with_bias, with_gate, _ = rest
        c.append(_vec_case(type, op, 1, *rest, (4, 2)))
        c.append(_vec_case(type, op, 1, *rest, (1, 1)))
        if not use_id and with_gate and not with_bias:
            # small multi-token batches (speculative decoding)
            c += [_vec_case(type, op, mb, *rest, (1, 1)) for mb in (2, 4, 8)]
    return c


register(Family(
    name="mul_mat_vec_fusion",
    strict=tolerances.dot_products(lambda p: p["type"]) + (tolerances.CANN_CUBE_F32,
        f16_gelu_table(lambda p: p["glu_op"] == 1),
        Tolerance("quantized gate and up products, each with its q8 activation error, meet in "
                  "the GLU and multiply: the errors add and scale with the other product",
                  rtol=2 ** -4, atol_rms=2 ** -3, when=lambda p: ggml_type(p["type"]).is_quantized),
        Tolerance("the same on CANN's cube unit, whose f32 products round their operands to f16 "
                  "/ HF32 (2^-11 relative per term, an eighth of the q8 error)",
                  rtol=2 ** -7, atol_rms=2 ** -6, impl=ACLNN)),
    build=build_mul_mat_vec_fusion,
    vars=("type", "glu_op", "m", "n", "k", "use_id", "n_mats", "n_used", "b", "with_bias",
          "with_gate", "with_lane_scale", "batch_dims"),
    op="MUL_MAT_VEC_FUSION",
    eval_grid=vec_fusion_eval,
    changes=(Since("0.25.3", drop=lambda p: True, add=vec_fusion_eval_0_25_3),),   # a new loop
    init=lambda t, rng, p: init_moe(t, rng, p) if p["use_id"] else None,
    max_nmse=5e-3,
    fused=True,
))


# --- test_moe_reduce (0.25.3, test mode only): the weighted sum of the experts' outputs ---

def build_moe_reduce(g, n_embd, n_expert_used, n_tokens, unaligned_experts, with_expert_scale,
                     interleaved_views_adds):
    """experts {n_embd, n_used, n_tokens} (unaligned: a view one float into a larger buffer),
    optionally times a per-expert scale, times the router weights, then the n_used expert
    rows added up through views. interleaved_views_adds only orders test-backend-ops' graph
    (each view expanded before the adds or not): the nodes and the result are the same."""
    if unaligned_experts:
        storage = g.new_tensor(F32, [n_embd * n_expert_used * n_tokens + 1], "experts_storage")
        experts = view(storage, [n_embd, n_expert_used, n_tokens], [n_embd * 4, n_embd * n_expert_used * 4], 4)
    else:
        experts = g.new_tensor(F32, [n_embd, n_expert_used, n_tokens], "experts")
    weights = g.new_tensor(F32, [1, n_expert_used, n_tokens], "weights")
    if with_expert_scale:
        experts = mul(experts, g.new_tensor(F32, [1, n_expert_used, n_tokens], "expert_scale"))
    weighted = mul(experts, weights)
    views = [view(weighted, [n_embd, n_tokens], [weighted.nb[2]], e * weighted.nb[1])
             for e in range(n_expert_used)]
    out = views[0]
    for v in views[1:]:
        out = add(out, v)
    return out


register(Family(
    name="moe_reduce",
    build=build_moe_reduce,
    vars=("n_embd", "n_expert_used", "n_tokens", "unaligned_experts", "with_expert_scale",
          "interleaved_views_adds"),
    op="MOE_REDUCE",
    fused=True,
    since="0.25.3",
    # the supported bounds, common k = 8 shapes, interleaved views and adds, k = 16 fallback
    eval_grid=lambda: [dict(n_embd=e, n_expert_used=k, n_tokens=t, unaligned_experts=u,
                            with_expert_scale=s, interleaved_views_adds=i)
                       for e, k, t, u, s, i in ((63, 2, 17, False, False, False),
                                                (2048, 8, 128, False, False, False),
                                                (2048, 8, 128, False, True, False),
                                                (63, 12, 33, True, True, True),
                                                (2048, 15, 40, False, True, False),
                                                (2048, 16, 32, False, True, False))],
))
