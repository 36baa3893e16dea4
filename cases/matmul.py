"""test_mul_mat (MUL_MAT): C^T = A B^T with ggml's batch broadcasting over dims 2 and 3,
for float and quantized A, contiguous, permuted or strided (k_v) operands.

The single eval case with o > 1 (a sum of several identical products) is a run_whole_graph
case in test-backend-ops, hence test mode only: it is the separate fused family below.
"""
from __future__ import annotations

from .catalog import EVERY_DEVICE, Family, fd_limit, new_params, register, unique_params
from . import tolerances
from .graph import Tensor, add, new_op, permute, set_param, view
from .types import F32, ggml_type

# test-backend-ops' type lists (v0.20.2)
ALL_TYPES = ("f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q1_0 q2_0 mxfp4 nvfp4 q2_K q3_K q4_K q5_K "
             "q6_K tq2_0 iq2_xxs iq2_xs iq2_s iq3_xxs iq1_s iq1_m iq4_nl iq3_s iq4_xs").split()
BASE_TYPES = "f32 f16 q8_0 q1_0 q2_0 q4_0 q4_1 q4_K mxfp4 nvfp4 iq2_xxs".split()
OTHER_TYPES = ("q4_1 q5_0 q5_1 q8_0 q1_0 q2_0 q2_K q3_K q5_K q6_K tq2_0 iq2_xs iq2_s iq3_xxs "
               "iq1_s iq1_m iq4_nl iq3_s iq4_xs bf16").split()
# 0.25.3 adds tq1_0 to all_types and other_types (after tq2_0)
NEW_TYPES = ("tq1_0",)
# the IQ types whose grid-based codes 0.25.3's "IQP panel" cases cover
IQP_TYPES = "iq2_xxs iq2_xs iq2_s iq3_xxs iq3_s iq1_s iq1_m iq4_xs".split()


def blck_size(t: str) -> int:
    return ggml_type(t).blck_size


def mul_mat(a: Tensor, b: Tensor) -> Tensor:
    """ggml_mul_mat: a {k, m, ne02, ne03}, b {k, n, ne12, ne13} -> f32 {m, n, ne12, ne13};
    a's batch dims must divide b's."""
    assert a.ne[0] == b.ne[0] and b.ne[2] % a.ne[2] == 0 and b.ne[3] % a.ne[3] == 0
    assert not a.nb[0] > a.nb[1], "ggml_mul_mat: a must not be transposed"
    return new_op(a.graph, "MUL_MAT", F32, [a.ne[1], b.ne[1], b.ne[2], b.ne[3]], [a, b])


def build_mul_mat(g, type_a, type_b, m, n, k, bs, nr, per, k_v, o, src_overlap=False, m_v=0, pad=0):
    """0.25.3 adds src_overlap (a and b interleaved views of one tensor, as a fused QKV),
    m_v (a is a view whose batches are strided by m_v rows, as the first rows of a KV
    cache) and pad (bytes after those rows, so that a's nb[2] is no multiple of nb[1])."""
    ne_a = [k, m, bs[0], bs[1]]
    ne_b = [k, n, bs[0] * nr[0], bs[1] * nr[1]]
    if list(per) != [0, 1, 2, 3]:
        # created in permuted order, then permuted back to {k, m|n, ...}: two dims swapped,
        # as test_mul_mat asserts (a block type's dim 0 stays: graph.permute refuses it)
        if sum(p != i for i, p in enumerate(per)) != 2:
            raise ValueError(f"test_mul_mat swaps two dims: per={list(per)} moves more")
        assert k_v == 0 and m_v == 0
        a = g.new_tensor(type_a, [ne_a[p] for p in per], "a")
        b = g.new_tensor(type_b, [ne_b[p] for p in per], "b")
        a, b = permute(a, *per), permute(b, *per)
    elif src_overlap:
        assert type_a == type_b and k_v == 0 and m_v == 0
        base = g.new_tensor(type_a, [2 * k, max(m, n)] + ne_b[2:], "base")
        a = view(base, ne_a, base.nb[1:], 0)
        b = view(base, ne_b, base.nb[1:], k * ggml_type(type_a).type_size)
        return _products(a, b, o)
    else:
        a = g.new_tensor(type_a, [k_v or k, m_v + (pad != 0) if m_v else m] + ne_a[2:], "a")
        b = g.new_tensor(type_b, [k_v or k] + ne_b[1:], "b")
        if k_v:
            # rows of k_v elements of which only the first k are used
            assert k_v > k
            a = view(a, ne_a, a.nb[1:], 0)
            b = view(b, ne_b, b.nb[1:], 0)
        if m_v:
            assert m_v > m and pad < a.nb[1]
            a = view(a, ne_a, [a.nb[1], m_v * a.nb[1] + pad, a.nb[3]], 0)
    if not ggml_type(type_a).is_quantized:   # gradients of float A (unbatched in dim 3) and B
        if bs[1] == 1 and nr[1] == 1:
            set_param(a.base)
        set_param(b.base)
    return _products(a, b, o)


def _products(a, b, o):
    out = mul_mat(a, b)
    for _ in range(1, o):
        out = add(out, mul_mat(a, b))
    return out


def mm(type_a, type_b, m, n, k, bs=(10, 10), nr=(2, 2), per=(0, 1, 2, 3), k_v=0, o=1):
    return dict(type_a=type_a, type_b=type_b, m=m, n=n, k=k, bs=list(bs), nr=list(nr),
                per=list(per), k_v=k_v, o=o)


PERMS = ((0, 2, 1, 3), (0, 1, 3, 2), (0, 3, 2, 1))


def _grid_all():
    """make_test_cases_eval's test_mul_mat cases, in order (duplicates included)."""
    c = []
    c += [mm(t, "f32", 16, i, 256, (1, 1), (1, 1)) for t in ALL_TYPES for i in range(1, 10)]
    c += [mm(t, "f32", 2880, 32, 2880, (1, 1), (1, 1)) for t in ("q4_0", "q8_0", "mxfp4")]
    # m == 1 on both sides of a batch size of 8
    c += [mm("f32", "f32", 1, n, 2048, (1, 1), (1, 1)) for n in (1, 7, 8, 9, 16, 128, 512)]
    for ta in BASE_TYPES:
        for tb in ("f32", "f16"):
            for k in (256, 4) if blck_size(ta) == 1 else (256,):
                for n in (1, 16):
                    for bs, nr in (((1, 1), (1, 1)), ((1, 1), (2, 1)), ((1, 1), (1, 2)), ((3, 1), (1, 1)),
                                   ((3, 1), (2, 1)), ((3, 2), (1, 1)), ((3, 2), (2, 1)), ((3, 2), (1, 2)),
                                   ((3, 2), (2, 2))):
                        c.append(mm(ta, tb, 16, n, k, bs, nr))
                    if n == 1:
                        c.append(mm(ta, tb, 16, 4, k, (3, 2), (2, 2)))
                c += [mm(ta, tb, 16, 1, k, (2, 3), (1, 1), p) for p in PERMS]
                c.append(mm(ta, tb, 16, 4, k, (2, 3), (1, 1), (0, 3, 2, 1)))
                c += [mm(ta, tb, 16, n, k, (2, 3), (1, 1), p) for n in (8, 16) for p in PERMS]
            # large k (stream-k fixup), large batch
            c += [mm(ta, tb, 16, n, 1024, (3, 2), (1, 1)) for n in (1, 8, 16)]
            c.append(mm(ta, tb, 16, 8, 256, (1536, 1), (1, 1)))
    c += [mm("bf16", "f32", 16, n, 256, (2, 3), (1, 1), p) for n in (1, 8, 16) for p in PERMS]
    for ta in OTHER_TYPES:
        if blck_size(ta) != 256:
            c.append(mm(ta, "f32", 16, 1, blck_size(ta), (1, 1), (1, 1)))
        c.append(mm(ta, "f32", 16, 1, 256, (1, 1), (1, 1)))
    c += [mm("f16", "f32", m, n, k, (8, 1), nr) for m, n, k, nr in (
        (64, 2, 128, (1, 1)), (83, 2, 128, (4, 1)), (64, 2, 64, (4, 1)), (83, 2, 64, (4, 1)),
        (64, 45, 128, (4, 1)), (128, 45, 64, (4, 1)))]
    c += [mm("f16", "f32", 1056, 1, k, (1, 1), (4, 1), (0, 2, 1, 3)) for k in (193, 67)]
    c.append(mm("f32", "f32", 16, 32, 32, (1, 1), (1, 1), (0, 1, 2, 3), 64, 3))
    c.append(mm("f32", "f32", 64, 77, 77, (12, 1), (1, 1)))
    c.append(mm("q4_0", "f32", 576, 512, 576, (1, 1), (1, 1)))
    c.append(mm("q4_0", "f32", 1, 2048, 8192, (1, 1), (1, 1)))
    c += [mm(t, "f32", 1, 64, 256, (1, 1), (1, 1)) for t in ALL_TYPES]
    c.append(mm("q8_0", "f32", 6, 4096, 5120, (1, 1), (1, 1)))
    for bs2 in (1, 3):
        for bs in (1, 2, 4, 8):
            for nr in (1, 4):
                for dm in (0, 1):
                    for dk in (0, 1):
                        for t in ("f16", "bf16", "f32"):
                            c.append(mm(t, "f32", 1056 + dm, 1, 128 + dk, (bs, bs2), (nr, 1), (0, 2, 1, 3)))
                            c.append(mm(t, "f32", 128 + dm, 1, 1056 + dk, (bs, bs2), (nr, 1), (0, 1, 2, 3),
                                        2 * 1056 + dk))
    return c


def _grid_0_25_3():
    """The cases make_test_cases_eval gained by 0.25.3 (each type loop over all_types or
    other_types also runs for tq1_0)."""
    c = [mm("tq1_0", "f32", 16, i, 256, (1, 1), (1, 1)) for i in range(1, 10)]
    # k long enough that a mat-vec's loop over the blocks wraps
    c += [mm(t, "f32", 16, n, 16 * 256, (1, 1), (1, 1)) for t in ALL_TYPES + list(NEW_TYPES) for n in (1, 8)]
    # multi-column mat-vec for q4_K (and q5_K), and both sides of a row-pair bound
    c += [mm(t, "f32", mk[0], n, mk[1], (1, 1), (1, 1)) for t in ("q4_K", "q5_K") for n in range(1, 9)
          for mk in ((4096, 1024), (1023, 4096))]
    c += [mm("q4_K", "f32", m, 2, 1024, (1, 1), (1, 1)) for m in (6271, 6272, 6273)]
    # m == 1 with n across the operand swap; f16 A; odd sizes
    c += [mm("f32", "f32", 1, n, 2048, (1, 1), (1, 1)) for n in (127, 511)]
    c += [mm("f16", tb, 1, n, k, (1, 1), (1, 1)) for n, k in ((512, 2048), (509, 2051)) for tb in ("f32", "f16")]
    c += [mm("f32", "f32", 31, 509, 2051, (1, 1), (1, 1)), mm("f32", "f32", 32, 509, 2112, (1, 1), (1, 1)),
          mm("q8_0", "f32", 32, 509, 2112, (1, 1), (1, 1))]
    # bf16 A permuted at n = 8 and 16 too; bf16 B (ggml_conv_1d_dw's, for a bf16 kernel)
    c += [mm("bf16", "f32", 16, n, 256, (2, 3), (1, 1), p) for n in (8, 16) for p in PERMS]
    c += [mm("f32", "bf16", 16, n, 256, bs, nr) for n, bs, nr in ((1, (1, 1), (1, 1)), (1, (3, 2), (2, 2)),
                                                                 (8, (1, 1), (1, 1)))]
    c += [mm("tq1_0", "f32", 16, 1, 256, (1, 1), (1, 1))]     # other_types
    c += [mm(t, "f32", 16, 10, 256, (1, 1), (1, 1)) for t in IQP_TYPES]
    # interleaved operands; the first rows of a KV cache; padded batches
    c.append(mm("f32", "f32", 32, 4, 96, (3, 2), (1, 1)) | dict(src_overlap=True))
    c += [mm(t, "f32", 8, n, 64, (8, 1), (1, 1)) | dict(m_v=m_v, pad=pad)
          for m_v, pad in ((5120, 0), (16, 16)) for t, n in (("f32", 1), ("f16", 16))]
    c.append(mm("tq1_0", "f32", 1, 64, 256, (1, 1), (1, 1)))
    # k not a multiple of 32
    c += [mm(ta, tb, 64, 32, k, bs, (1, 1)) for ta, tb, k, bs in (
        ("f16", "f16", 65, (1, 1)), ("f16", "f16", 80, (1, 1)), ("f16", "f32", 80, (1, 1)),
        ("f32", "f32", 80, (1, 1)), ("f16", "f16", 588, (1, 1)), ("f16", "f16", 80, (4, 1)))]
    return c


def perf_grid():
    c = [mm("f16", "f32", 16416, 1, 128, (8, 1), (4, 1), (0, 2, 1, 3)),
         mm("f16", "f32", 128, 1, 16416, (8, 1), (4, 1), (0, 1, 2, 3), 2 * 16416)]
    c += [mm(t, "f32", 4096, bs, 14336, (1, 1), (1, 1)) for bs in (1, 2, 3, 4, 5, 8, 512) for t in ALL_TYPES]
    return c


def _perf_0_25_3():
    # q4_K mat-vec over several columns (n = 1..8), at the shapes of 7-8B models' projections
    return [mm("q4_K", "f32", m, n, 4096, (1, 1), (1, 1)) for m in (4096, 6144, 6272, 14336) for n in (1, 2, 3, 4, 8)]


def mul_mat_flops(out, p):
    return 2 * p["m"] * p["n"] * p["k"] * p["bs"][0] * p["nr"][0] * p["bs"][1] * p["nr"][1]


VARS = ("type_a", "type_b", "m", "n", "k", "bs", "nr", "per", "k_v", "o")
# ggml-CPU converts src1 to src0's vec_dot type before the dot products (f16 or bf16 for
# those A types, q8_0/q8_1/q8_K for quantized A), so its result carries that rounding while
# the reference multiplies the exact values; test_mul_mat's 5e-4 threshold covers it (worst
# seen: 3.3e-5), so it is no recorded deviation.

register(Family(
    name="mul_mat",
    build=build_mul_mat,
    vars=VARS,
    changes=(new_params("0.25.3", VARS, src_overlap=False, m_v=0, pad=0, add=_grid_0_25_3,
                       perf_add=_perf_0_25_3),),
    op="MUL_MAT",
    eval_grid=lambda: unique_params(p for p in _grid_all() if p["o"] == 1),
    perf_grid=perf_grid,
    max_nmse=5e-4,
    strict=tolerances.MATMUL,
    grad_nmax=20000,
    grad_notes={EVERY_DEVICE: fd_limit(
        "where the device rounds B before the dot products (ggml-CPU to f16 with an f16 A, "
        "a CANN cube unit to f16 or HF32), the forward that the differences probe moves in "
        "steps of 2^-11 relative; otherwise the loss (a float32 sum) rounds each quotient by "
        "up to ulp/(2*eps); backprop (A^T G, G B^T) matches the exact float64 gradient "
        "(tests/test_grad.py checks an f16 case)",
        max_error=1e-3)},
    flops=mul_mat_flops,
))

# o > 1: run_whole_graph in test-backend-ops, so test mode only (not support, not grad) and
# checked on the final sum
register(Family(
    name="mul_mat_multi_out",
    build=build_mul_mat,
    vars=VARS,
    changes=(new_params("0.25.3", VARS, src_overlap=False, m_v=0, pad=0),),
    op="MUL_MAT",
    eval_grid=lambda: unique_params(p for p in _grid_all() if p["o"] > 1),
    max_nmse=5e-4,
    strict=tolerances.MATMUL,
    fused=True,
    flops=mul_mat_flops,
))
