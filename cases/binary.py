"""Binary element-wise ops and writes into a region of a tensor.

test_bin_bcast (ADD, SUB, MUL, DIV, with broadcasting, permuted / overlapping sources and
chains of nf ops), test_add_id (ADD_ID), test_acc (ACC) and test_set (SET).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .catalog import Family, fmt_vars, register, Since
from .graph import (Tensor, binary, can_repeat, new_op, permute, set_param, strided_view, view,
                    view_of)
from .types import I32
from .inputs import shuffled_rows, uniform

BIN_OPS = ("ADD", "SUB", "MUL", "DIV")


# --- constructors (ggml.c) ---

def binary_inplace(op: str, a: Tensor, b: Tensor) -> Tensor:
    """ggml_{add,sub,mul,div}_inplace: the result is a view of a (ggml_view_tensor)."""
    assert can_repeat(b, a), f"{op}: {b.ne} does not broadcast onto {a.ne}"
    t = view_of(a, op, a.ne, a.nb)
    t.src = [a, b]
    return t


def add_id(a: Tensor, b: Tensor, ids: Tensor) -> Tensor:
    """ggml_add_id: out[i2, i1] = a[i2, i1] + b[ids[i2, i1]] (rows of b picked by ids)."""
    assert a.ne[0] == b.ne[0] and a.ne[1] == ids.ne[0] and a.ne[2] == ids.ne[1]
    assert ids.type == I32
    return new_op(a.graph, "ADD_ID", a.type, a.ne, [a, b, ids])


def _region_op(op: str, a: Tensor, b: Tensor, nb1: int, nb2: int, nb3: int, offset: int,
               inplace: bool) -> Tensor:
    """ggml_acc_impl / ggml_set_impl: a copy of a (or a itself) with a region, given by
    byte strides nb1..nb3 and a byte offset, combined with b. op_params: nb1, nb2, nb3,
    offset, inplace."""
    assert b.nelements() <= a.nelements()
    if inplace:
        t = view_of(a, op, a.ne, a.nb)
        t.src = [a, b]
    else:
        t = new_op(a.graph, op, a.type, a.ne, [a, b])
    t.set_params_i32([nb1, nb2, nb3, offset, int(inplace)])
    return t


def acc(a, b, nb1, nb2, nb3, offset=0, inplace=False):
    assert a.is_contiguous() and a.type.name == "f32" and b.type.name == "f32"
    return _region_op("ACC", a, b, nb1, nb2, nb3, offset, inplace)


def set_region(a, b, nb1, nb2, nb3, offset=0, inplace=False):
    """ggml_set / ggml_set_inplace."""
    assert offset < 1 << 30
    return _region_op("SET", a, b, nb1, nb2, nb3, offset, inplace)


def nbytes_out_and(*srcs: int):
    """op_size overrides: nbytes of the output plus those of the given sources."""
    return lambda out, p: out.nbytes() + sum(out.src[i].nbytes() for i in srcs)


# --- test_bin_bcast ---

def build_bin_bcast(g, op, type, ne, nr, nf, perm1, src_overlap, inplace=False, type_b=None):
    a = g.new_tensor(type, [n * r for n, r in zip(ne, nr)], "a")
    overlap_ne = [ne[0], ne[1], ne[2], 2 * (ne[3] // 3)]
    bs = []
    for i in range(nf):
        if perm1:
            # b is created with dims (1, 2, 0, 3) of ne and permuted back to ne
            b = permute(g.new_tensor(type, [ne[1], ne[2], ne[0], ne[3]], f"b{i}"), 1, 2, 0, 3)
        elif src_overlap:
            # b reads a, shifted by ne3/3 planes: it overlaps the part that out reads
            b = view(a, overlap_ne, a.nb[1:], (ne[3] // 3) * a.nb[3])
        else:
            b = g.new_tensor(type_b or type, ne)
        b.name = f"b{i}"
        bs.append(b)
    # ggml's backward broadcasts only for ADD: gradients of same-shape single ADDs
    if op == "ADD" and a.ne == bs[0].ne and nf == 1 and not perm1:
        set_param(a)
        set_param(bs[0])
    out = view(a, overlap_ne, a.nb[1:], 0) if src_overlap else a
    for b in bs:
        out = binary_inplace(op, out, b) if inplace else binary(op, out, b)
    out.name = "out"
    return out


def init_bin_bcast(t, rng, p):
    # MUL and DIV keep away from zero, as test-backend-ops does
    return uniform(t, rng, 0.9, 1.1) if p["op"] in ("MUL", "DIV") else None


def bin_case(op, type, ne, nr, nf=1, perm1=False, src_overlap=False, inplace=False):
    return dict(op=op, type=type, ne=list(ne), nr=list(nr), nf=nf, perm1=perm1,
                src_overlap=src_overlap, inplace=inplace)


def all_ops(type, ne, nr, perm1=False, src_overlap=False):
    return [bin_case(op, type, ne, nr, 1, perm1, src_overlap) for op in BIN_OPS]


def bin_bcast_eval(types=("f16", "f32")):
    out = []
    for type in types:
        for perm1 in (False, True):
            for ne, nr in (([1, 1, 8, 1], [1, 1, 1, 1]), ([1, 1, 1, 1], [32, 1, 1, 1]),
                           ([1, 1, 320, 320], [1, 1, 1, 1]), ([10, 5, 1, 1], [1, 1, 1, 1]),
                           ([10, 5, 4, 1], [1, 1, 1, 1]), ([10, 5, 4, 3], [1, 1, 1, 1]),
                           ([10, 5, 4, 3], [2, 1, 1, 1]), ([10, 5, 4, 3], [1, 2, 1, 1]),
                           ([10, 5, 4, 3], [1, 1, 2, 1]), ([10, 5, 4, 3], [1, 1, 1, 2]),
                           ([10, 5, 4, 3], [1, 1, 2, 2]), ([10, 5, 4, 3], [1, 2, 2, 2]),
                           ([10, 5, 4, 3], [2, 2, 2, 2])):
                out += all_ops(type, ne, nr, perm1)
        for ne in ([10, 5, 4, 6], [10, 5, 4, 5], [1, 1, 120, 120], [1, 1, 4, 320]):
            out += all_ops(type, ne, [1, 1, 1, 1], src_overlap=True)
        out += all_ops(type, [1, 1, 65536, 1], [256, 1, 1, 1])
        # stable diffusion shapes
        for ne, nr in (([1280, 1, 1, 1], [1, 1, 1, 1]), ([1280, 1, 1, 1], [1, 16, 16, 1]),
                       ([1280, 16, 16, 1], [1, 1, 1, 1]), ([1280, 1, 1, 1], [1, 256, 1, 1]),
                       ([1, 1, 1280, 1], [16, 16, 1, 1]), ([16, 16, 1280, 1], [1, 1, 1, 1]),
                       ([1, 1, 1920, 1], [16, 16, 1, 1]), ([1, 1, 2560, 1], [16, 16, 1, 1]),
                       ([1, 1, 1280, 1], [32, 32, 1, 1]), ([1, 1, 1920, 1], [32, 32, 1, 1]),
                       ([1, 1, 640, 1], [32, 32, 1, 1]), ([5120, 1, 1, 1], [1, 256, 1, 1]),
                       ([640, 1, 1, 1], [1, 1, 1, 1]), ([64, 262144, 1, 1], [1, 1, 1, 1])):
            out += all_ops(type, ne, nr)
    return out


def bin_bcast_fused_eval():
    # chains of 16 in-place ops, then chains of nf ADDs; the non-in-place ADD chain of
    # 16 has the same name as the in-place one, so it appears once
    out = [bin_case(op, "f32", [16, 5, 4, 3], [1, 1, 1, 1], 16, inplace=True)
           for op in ("ADD", "MUL", "SUB", "DIV")]
    for ne, nr, nf in (([10, 5, 4, 3], [2, 1, 1, 1], 2), ([16, 5, 4, 3], [1, 2, 1, 1], 3),
                       ([10, 5, 4, 3], [1, 1, 2, 1], 4), ([16, 5, 4, 3], [1, 1, 1, 2], 5),
                       ([10, 5, 4, 3], [1, 1, 2, 2], 6), ([10, 5, 4, 3], [1, 2, 2, 2], 7),
                       ([16, 5, 4, 3], [2, 2, 2, 2], 8)):
        out.append(bin_case("ADD", "f32", ne, nr, nf))
    return out


BIN_BCAST: dict[str, Any] = dict(
    build=build_bin_bcast,
    vars=("type", "ne", "nr", "nf", "perm1", "src_overlap"),
    op=lambda p: p["op"],
    init=init_bin_bcast,
    op_size=lambda out, p: 3 * out.nbytes(),
    grad_eps=lambda p: 0.1 * (int(np.prod(p["ne"])) if p["op"] == "MUL" else 1),
    grad_precise=lambda p: p["op"] == "DIV",
    max_maa=lambda p: 1e-4 if p["op"] == "ADD" else 1e-3,
)

def bin_bcast_0_25_3():
    """0.25.3: the grid in bf16 too, and a broadcast of dim 1 (128x1x8 by 1x4) in every type."""
    return (bin_bcast_eval(("bf16",)) +
            [c for t in ("f16", "f32", "bf16") for c in all_ops(t, [128, 1, 8, 1], [1, 4, 1, 1])] +
            # bf16 activations with f32 weights: src1 of another type (named only then)
            [dict(c, type_b="f32") for ne, nr in (([10, 5, 4, 3], [1, 1, 1, 1]), ([10, 5, 4, 3], [2, 2, 2, 2]),
                                                  ([5120, 1, 1, 1], [1, 32, 1, 1]))
             for c in all_ops("bf16", ne, nr)])


def bin_bcast_vars(p):
    s = fmt_vars(p, BIN_BCAST["vars"])
    return s + f",type_b={p['type_b']}" if p.get("type_b") else s


register(Family(
    name="bin_bcast",
    eval_grid=bin_bcast_eval,
    changes=(Since("0.25.3", add=bin_bcast_0_25_3, fields=dict(vars=bin_bcast_vars)),),
    perf_grid=lambda: [bin_case("ADD", "f32", [4096, 1, 1, 1], [1, 1, 1, 1]),
                       bin_case("ADD", "f32", [4096, 1, 1, 1], [1, 512, 1, 1])],
    **BIN_BCAST,
))

# nf > 1: test-backend-ops checks only the last node (run_whole_graph) and leaves these
# out of support mode
register(Family(name="bin_bcast_fused", eval_grid=bin_bcast_fused_eval, fused=True, **BIN_BCAST,
                changes=(Since("0.25.3", add=lambda: [   # f16 and bf16 chains, a permuted addend
                    bin_case("ADD", "f16", [10, 5, 4, 3], [2, 1, 1, 1], 2),
                    bin_case("ADD", "bf16", [10, 5, 4, 3], [2, 1, 1, 1], 2),
                    bin_case("ADD", "bf16", [16, 5, 4, 3], [1, 2, 1, 1], 3),
                    bin_case("ADD", "f32", [16, 5, 4, 3], [1, 1, 1, 1], 2, perm1=True)],
                    fields=dict(vars=bin_bcast_vars)),)))


# --- test_add_id ---

def build_add_id(g, type_a, type_b, n_embd, n_experts, n_experts_used, n_token):
    a = g.new_tensor(type_a, [n_embd, n_experts_used, n_token], "a")
    b = g.new_tensor(type_b, [n_embd, n_experts], "b")
    ids = g.new_tensor(I32, [n_experts, n_token], "ids")
    if n_experts_used != n_experts:
        ids = strided_view(ids, [n_experts_used, n_token], "view_of_ids")
    out = add_id(a, b, ids)
    out.name = "out"
    return out


def init_add_id(t, rng, p):
    if t.type != I32:
        return None
    # each token's row is a permutation of the experts (the view keeps the first ones)
    return shuffled_rows(rng, np.arange(t.ne[0]) % p["n_experts"], t.nrows())


def add_id_case(n_embd, n_experts, n_experts_used, n_token):
    return dict(type_a="f32", type_b="f32", n_embd=n_embd, n_experts=n_experts,
                n_experts_used=n_experts_used, n_token=n_token)


register(Family(
    name="add_id",
    build=build_add_id,
    vars=("type_a", "type_b", "n_embd", "n_experts", "n_experts_used", "n_token"),
    op="ADD_ID",
    init=init_add_id,
    op_size=nbytes_out_and(0, 2),
    eval_grid=lambda: [add_id_case(n_embd, n_mats, n_used, n_token)
                       for n_mats in (4, 8) for n_used in (1, 2, 4)
                       for n_embd in (32, 129) for n_token in (1, 32, 129)],
    perf_grid=lambda: [add_id_case(2880, n_mats, 4, n_token)
                       for n_token in (1, 512) for n_mats in (128, 32)],
))


# --- test_acc ---

def build_acc(g, type, ne_a, ne_b, stride_dim):
    a = set_param(g.new_tensor(type, ne_a, "a"))
    if stride_dim in (1, 2, 3):
        # b is a view at a non-zero offset (one row in) of a larger tensor
        ne_pad = list(ne_b)
        ne_pad[stride_dim] += 1
        b_pad = set_param(g.new_tensor(type, ne_pad, "b_pad"))
        b = view(b_pad, ne_b, b_pad.nb[1:], b_pad.nb[1])
    else:
        b = set_param(g.new_tensor(type, ne_b))
    b.name = "b"
    # a's strides: when ne_b[0] < ne_a[0] they differ from b's own
    out = acc(a, b, a.nb[1], a.nb[2], a.nb[3], 0)
    out.name = "out"
    return out


ACC_CASES = [([256, 17, 1, 1], [256, 16, 1, 1], -1), ([256, 17, 2, 3], [256, 16, 2, 3], -1),
             ([256, 17, 2, 3], [128, 16, 2, 3], -1), ([256, 17, 2, 3], [256, 16, 2, 3], 1),
             ([256, 17, 2, 3], [128, 16, 2, 3], 2), ([256, 17, 2, 3], [64, 16, 2, 3], 3)]


def acc_grid():
    return [dict(type="f32", ne_a=a, ne_b=b, stride_dim=s) for a, b, s in ACC_CASES]


register(Family(
    name="acc",
    build=build_acc,
    vars=("type", "ne_a", "ne_b", "stride_dim"),
    op="ACC",
    eval_grid=acc_grid,
    perf_grid=acc_grid,
))


# --- test_set ---

def build_set(g, type_src, type_dst, ne, dim, inplace):
    src = set_param(g.new_tensor(type_src, ne, "src"))
    ne_dst = [n * 2 if i < dim else n for i, n in enumerate(ne)]
    dst = set_param(g.new_tensor(type_dst, ne_dst, "dst"))
    # a contiguous region of dst, centred in the first `dim` dimensions
    offset = sum((ne_dst[i] - ne[i]) // 2 * dst.nb[i] for i in range(dim))
    out = set_region(dst, src, src.nb[1], src.nb[2], src.nb[3], offset, inplace)
    out.name = "out"
    return out


register(Family(
    name="set",
    build=build_set,
    vars=("type_src", "type_dst", "ne", "dim", "inplace"),
    op="SET",
    op_size=nbytes_out_and(0),
    eval_grid=lambda: [dict(type_src=t, type_dst=t, ne=[6, 5, 4, 3], dim=dim, inplace=inplace)
                       for t in ("f32", "i32") for dim in (1, 2, 3) for inplace in (False, True)],
))
