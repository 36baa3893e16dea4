"""test_lightning_indexer (LIGHTNING_INDEXER): DeepSeek's sparse-attention indexer, scoring
every KV row for every token as sum over heads of relu(q . k) * weight, plus a mask."""
from __future__ import annotations


from .catalog import Family, register
from .tolerances import dot_products
from .graph import Tensor, new_op, set_param
from .inputs import kq_mask
from .types import F16, F32

TYPES_K = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")


def lightning_indexer(q: Tensor, k: Tensor, w: Tensor, m: Tensor) -> Tensor:
    """ggml_lightning_indexer: q {hsk, nh, nb, ns} f32, k {hsk, 1, kv, ns}, w {nh, nb, 1, ns}
    f32 (prescaled), m {kv, nb, 1, nm} f16 with ns % nm == 0 -> {kv, nb, 1, ns} f32."""
    assert q.type == F32 and w.type == F32 and m.type == F16
    assert q.ne[0] == k.ne[0] and k.ne[1] == 1 and m.ne[0] == k.ne[2] and m.ne[1] == q.ne[2]
    assert q.ne[1] == w.ne[0] and q.ne[2] == w.ne[1] and w.ne[2] == 1 and m.ne[2] == 1
    assert q.ne[3] == k.ne[3] == w.ne[3] and w.ne[3] % m.ne[3] == 0
    return new_op(q.graph, "LIGHTNING_INDEXER", F32, [k.ne[2], q.ne[2], 1, q.ne[3]], [q, k, w, m])


def build_lightning_indexer(g, hsk, nh, kv, nb, ns, nm, type_K):
    q = set_param(g.new_tensor("f32", [hsk, nh, nb, ns], "q"))
    k = set_param(g.new_tensor(type_K, [hsk, 1, kv, ns], "k"))
    w = set_param(g.new_tensor("f32", [nh, nb, 1, ns], "w"))
    m = set_param(g.new_tensor("f16", [kv, nb, 1, nm], "m"))
    out = lightning_indexer(q, k, w, m)
    out.name = "out"
    return out


def init_lightning_indexer(t, rng, p):
    return kq_mask(t, rng) if t.name == "m" else None


def _li(hsk, nh, kv, nb, ns, nm, type_K):
    return dict(hsk=hsk, nh=nh, kv=kv, nb=nb, ns=ns, nm=nm, type_K=type_K)


def lightning_indexer_eval_grid():
    cases = [_li(128, nh, 256, bs, ns, nm, t) for bs in (1, 512) for nh in (32, 64)
             for ns, nm in ((1, 1), (4, 4), (4, 1)) for t in TYPES_K]
    # KV lengths around a block of 64 (and a single row), mask shared by 4 streams
    cases += [_li(128, 64, kv, 32, 4, 1, t) for kv in (1, 7, 8, 63, 64, 65) for t in TYPES_K[:-1]]
    return cases


register(Family(
    name="lightning_indexer",
    strict=dot_products(lambda p: p["type_K"]),
    build=build_lightning_indexer,
    vars=("hsk", "nh", "kv", "nb", "ns", "nm", "type_K"),
    op="LIGHTNING_INDEXER",
    init=init_lightning_indexer,
    max_nmse=1e-6,
    eval_grid=lightning_indexer_eval_grid,
    perf_grid=lambda: [_li(128, nh, kv, bs, ns, ns, t) for kv in (256, 4096, 65536)
                       for bs in (1, 512, 2048) for nh in (32, 64) for ns in (1, 4) for t in TYPES_K],
    flops=lambda out, p: ((2 * p["hsk"] + 2) * p["nh"] + 1) * p["kv"] * p["nb"] * p["ns"],
))
