"""test_flash_attn_ext (FLASH_ATTN_EXT): fused attention softmax(scale*Q K^T [softcap]
+ slope*mask [+ sink]) V over heads, with grouped-query K/V heads, ALiBi, logit softcap,
attention sinks, f32 / f16 / bf16 / quantized K and V, and permuted (BSND-stored) inputs."""
from __future__ import annotations

import numpy as np

from .catalog import Family, new_params, register, Since, Tolerance
from .tolerances import dot_products
from .graph import Tensor, new_op, view
from .graph import permute as ggml_permute
from .inputs import kq_mask, shape_of
from .types import F16, F32, ggml_type
from .implementations import GGML_CPU

PREC = {"def": 0, "f32": 10}   # enum ggml_prec, as test-backend-ops prints it


def flash_attn_ext(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, scale: float,
                   max_bias: float = 0.0, logit_softcap: float = 0.0) -> Tensor:
    """ggml_flash_attn_ext: q {D_k, n_q, n_head, n_seq}, k {D_k, n_kv, n_head_kv, n_seq},
    v {D_v, n_kv, n_head_kv, n_seq}, mask f16 {n_kv, n_q, 1 or divides n_head, divides n_seq}
    -> f32 {D_v, n_head, n_q, n_seq} (the result is permuted: heads before tokens);
    op_params = [scale, max_bias, logit_softcap] (f32), src = [q, k, v, mask]."""
    assert k.ne[0] == q.ne[0] and q.ne[2] % k.ne[2] == 0 and q.ne[3] % k.ne[3] == 0  # can_mul_mat
    assert q.ne[3] == k.ne[3] == v.ne[3]
    if mask is not None:
        assert mask.type == F16 and mask.is_contiguous()
        assert q.ne[2] % mask.ne[2] == 0 and q.ne[3] % mask.ne[3] == 0
    if max_bias > 0.0:
        assert mask is not None, "ALiBi needs a mask"
    return new_op(q.graph, "FLASH_ATTN_EXT", F32, [v.ne[0], q.ne[2], q.ne[1], q.ne[3]],
                  [q, k, v, mask], f32=[scale, max_bias, logit_softcap])


def flash_attn_ext_set_prec(t: Tensor, prec: str) -> Tensor:
    """ggml_flash_attn_ext_set_prec: op_params[3] = enum ggml_prec."""
    assert t.op == "FLASH_ATTN_EXT"
    t.set_params_i32([PREC[prec]], 3)
    return t


def flash_attn_ext_set_n_kv_max(t: Tensor, n_kv_max: int) -> Tensor:
    """ggml_flash_attn_ext_set_n_kv_max (0.25.3): op_params[4], a hint that no mask row has
    more than n_kv_max finite entries (0: none). The result does not depend on it."""
    assert t.op == "FLASH_ATTN_EXT" and n_kv_max >= 0
    if n_kv_max:
        t.set_params_i32([n_kv_max], 4)
    return t


def sparse_kq_mask(t: Tensor, rng: np.random.Generator, n_kv_max: int) -> np.ndarray:
    """init_tensor_kq_mask_sparse: -inf but for n_kv_max - row % min(n_kv_max, 17) places
    per row, picked at random, of -1/32 times 1 to 7."""
    ne0 = t.ne[0]
    assert 0 < n_kv_max <= ne0
    rows = np.arange(t.nrows())
    data = np.full((len(rows), ne0), -np.inf, np.float32)
    for row in rows:
        count = n_kv_max - row % min(n_kv_max, 17)
        where = np.sort(rng.permutation(ne0)[:count])
        data[row, where] = -0.03125 * (1 + (np.arange(count) + row) % 7)
    return data.reshape(shape_of(t))


def flash_attn_ext_add_sinks(t: Tensor, sinks: Tensor | None) -> Tensor:
    """ggml_flash_attn_ext_add_sinks: one f32 sink logit per query head, as src[4]."""
    if sinks is None:
        del t.src[4:]
        return t
    assert t.op == "FLASH_ATTN_EXT" and len(t.src) < 5
    assert t.src[0].ne[2] == sinks.ne[0] and sinks.type == F32
    t.src = t.src[:4] + [sinks]
    return t


def _pad(n: int, m: int) -> int:
    return (n + m - 1) // m * m


def _mla(p) -> bool:
    return p["type_K"] == p["type_V"] and p["hsk"] == 576 and p["hsv"] == 512


def build(g, hsk, hsv, nh, nr23, kv, nb, mask, sinks, max_bias, logit_softcap, prec, type_K,
          type_V, permute: list, kv_view=True, v_is_view_of_k=False, n_kv_max=0):
    """test_flash_attn_ext::build_graph. K and V are views of caches twice as long (as a
    KV cache is; 0.25.3: unless kv_view=0); with permute = [0,2,1,3] each input is stored
    token-major and permuted back to ggml's {D, tokens, heads, seq} order; the MLA shape
    (576/512) reads V out of K (0.25.3: where v_is_view_of_k says so); n_kv_max (0.25.3):
    a sparse mask, with that hint."""
    tk, tv = ggml_type(type_K), ggml_type(type_V)
    dk, dv = _pad(hsk, tk.blck_size), _pad(hsv, tv.blck_size)

    def create(type, ne, is_view, name):
        ne_perm = [0] * 4
        for i in range(4):
            ne_perm[permute[i]] = ne[i]
        if is_view:
            t0 = g.new_tensor(type, [ne_perm[0], 2 * ne_perm[1], ne_perm[2], ne_perm[3]])
            t = view(t0, ne_perm, t0.nb[1:])
        else:
            t = g.new_tensor(type, ne_perm)
        if list(permute) != [0, 1, 2, 3]:
            t = ggml_permute(t, *permute)
        t.name = name
        return t

    q = create(F32, [dk, nb, nh * nr23[0], nr23[1]], False, "q")
    k = create(tk, [dk, kv, nh, nr23[1]], kv_view, "k")
    implicit_mla = not g.ggml_at_least("0.25.3") and tk == tv and dk == 576 and dv == 512
    if v_is_view_of_k or implicit_mla:
        v = view(k, [dv, kv, nh, nr23[1]], k.nb[1:])   # V is the first 512 of K's 576
        v.name = "v"
    else:
        v = create(tv, [dv, kv, nh, nr23[1]], kv_view, "v")
    m = g.new_tensor(F16, [kv, nb, 1, nr23[1]], "m") if mask else None
    s = g.new_tensor(F32, [q.ne[2]], "s") if sinks else None
    scale = float(np.float32(1.0) / np.sqrt(np.float32(hsk)))    # 1.0f/sqrtf(hsk)
    out = flash_attn_ext(q, k, v, m, scale, max_bias, logit_softcap)
    flash_attn_ext_add_sinks(out, s)
    flash_attn_ext_set_n_kv_max(out, n_kv_max)
    return flash_attn_ext_set_prec(out, prec)



def init(t: Tensor, rng: np.random.Generator, params) -> np.ndarray | None:
    if t.name == "s":   # sinks large enough that a wrong use shows
        return rng.uniform(-10.0, 10.0, size=shape_of(t)).astype(np.float32)
    if t.name == "m":
        n_kv_max = params.get("n_kv_max", 0)
        return sparse_kq_mask(t, rng, n_kv_max) if n_kv_max else kq_mask(t, rng)
    return None


def _case(hsk, hsv, nh, nr23, kv, nb, mask=True, sinks=False, max_bias=0.0, logit_softcap=0.0,
          prec="f32", type_K="f16", type_V="f16", permute=(0, 1, 2, 3)):
    return dict(hsk=hsk, hsv=hsv, nh=nh, nr23=list(nr23), kv=kv, nb=nb, mask=mask, sinks=sinks,
                max_bias=max_bias, logit_softcap=logit_softcap, prec=prec, type_K=type_K,
                type_V=type_V, permute=list(permute))


KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl")


def eval_grid(minicpm3=False):
    """minicpm3 (0.25.3): hsk 96 with hsv 64 too."""
    cases = []
    # prefill shapes with long KV (nb >= 32, kv >= 1024)
    for kv in (1024, 2048):
        for hs in (64, 128, 256):
            for nb in (32, 64):
                for t in ("f16", "q8_0", "q4_0"):
                    cases.append(_case(hs, hs, 8, (4, 1), kv, nb, type_K=t, type_V=t))
    # the main grid: head sizes of current models (192/128 and 576/512, 320/256: MLA), with
    # broadcast (nr3) only for small heads, GQA ratios per head size, K/V types at 64 / 72
    for hsk in (40, 64, 72, 80, 96, 128, 192, 256, 320, 512, 576):
        for hsv in (40, 64, 72, 80, 96, 128, 192, 256, 512):
            if hsk not in (192, 320, 576) and hsk != hsv and not (minicpm3 and hsk == 96 and hsv == 64):
                continue
            if (hsk == 192 and hsv not in (128, 192)) or (hsk == 576 and hsv != 512) \
                    or (hsk == 320 and hsv != 256):
                continue
            for mask in (True, False):
                for sinks in (True, False):
                    for max_bias in (0.0, 8.0):
                        if not mask and max_bias > 0.0:
                            continue
                        for softcap in (0.0, 10.0):
                            if hsk != 128 and softcap != 0.0:
                                continue
                            for nh in (1, 4):
                                if nh == 1 and hsk not in (320, 576):
                                    continue
                                for nr3 in (1, 3):
                                    if hsk > 64 and nr3 > 1:
                                        continue
                                    for nr2 in (1, 4, 8, 12, 16, 20, 32):
                                        if (nr2 == 8 and hsk != 192) or (nr2 == 12 and hsk != 128) \
                                                or (nr2 == 16 and hsk != 192) \
                                                or (nr2 == 20 and (nh != 1 or hsk != 576)) \
                                                or (nr2 == 32 and (nh != 1 or hsk != 320)):
                                            continue
                                        for kv in (113, 512, 1024):
                                            if nr2 != 1 and kv != 512:
                                                continue
                                            for nb in (1, 3, 32, 75):
                                                for prec in ("f32", "def"):
                                                    if hsk != 128 and prec == "def":
                                                        continue
                                                    for t in KV_TYPES:
                                                        if t != "f16" and hsk not in (64, 72):
                                                            continue
                                                        kw = dict(mask=mask, sinks=sinks, max_bias=max_bias,
                                                                  logit_softcap=softcap, prec=prec,
                                                                  type_K=t, type_V=t)
                                                        cases.append(_case(hsk, hsv, nh, (nr2, nr3), kv, nb, **kw))
                                                        # fewer cases permuted
                                                        if mask and max_bias == 0.0 and softcap == 0 and kv == 512:
                                                            cases.append(_case(hsk, hsv, nh, (nr2, nr3), kv, nb,
                                                                               permute=(0, 2, 1, 3), **kw))
    # mixed K / V types, and the 1- and 2-bit types
    for hsk, hsv, kv, nb, mask, tk, tv in (
            (64, 64, 128, 2, True, "q8_0", "q4_0"), (64, 64, 128, 2, True, "q4_0", "f16"),
            (72, 72, 96, 2, True, "q4_0", "q8_0"), (64, 64, 96, 2, True, "f16", "f32"),
            (128, 128, 256, 1, False, "f16", "q4_0"), (128, 128, 96, 2, True, "q1_0", "q1_0"),
            (128, 64, 128, 2, True, "q1_0", "q4_0"), (64, 128, 128, 2, True, "q4_0", "q1_0"),
            (128, 64, 64, 2, True, "q1_0", "f16"), (128, 128, 96, 2, True, "q2_0", "q2_0"),
            (128, 64, 128, 2, True, "q2_0", "q4_0"), (64, 128, 128, 2, True, "q4_0", "q2_0"),
            (128, 64, 64, 2, True, "q2_0", "f16")):
        cases.append(_case(hsk, hsv, 4, (1, 1), kv, nb, mask=mask, type_K=tk, type_V=tv))
    # long KV, f16 (a Qwen3.6-27B geometry and a llama-class one)
    for kv in (4096, 16384):
        cases.append(_case(256, 256, 4, (6, 1), kv, 512))
        cases.append(_case(128, 128, 8, (4, 1), kv, 512))
    return cases


def eval_grid_0_25_3():
    """0.25.3's explicit cases beyond the loops."""
    q8 = dict(type_K="q8_0", type_V="q8_0")
    perm = (0, 2, 1, 3)
    return [
        # asymmetric head sizes, one side not 64-aligned
        _case(72, 64, 4, (1, 1), 256, 2), _case(64, 72, 4, (1, 1), 256, 2),
        _case(65, 67, 4, (1, 1), 113, 75, sinks=True, max_bias=8.0),
        _case(65, 67, 4, (1, 1), 17, 75, mask=False, logit_softcap=1.0),
        _case(65, 67, 4, (1, 1), 113, 75, mask=False, logit_softcap=1.0),
        # q8_0 KV: decode and prompt batches, KV pad, permuted KV, feature flags, long context
        _case(256, 256, 2, (16, 1), 113, 1, **q8), _case(256, 256, 2, (16, 1), 1024, 1, **q8),
        _case(256, 256, 2, (16, 1), 1024, 1, permute=perm, **q8),
        _case(256, 256, 2, (16, 2), 1025, 1, sinks=True, max_bias=8.0, logit_softcap=30.0, **q8),
        _case(256, 256, 2, (16, 1), 1025, 64, permute=perm, **q8),
        _case(256, 256, 2, (16, 1), 16384, 1, **q8),
        # MLA with quantized KV, and more V-is-a-view-of-K shapes (full views at equal sizes)
        *(dict(_case(576, 512, 1, (8, 1), kv, nb, **q8), v_is_view_of_k=True)
          for kv, nb in ((113, 1), (1024, 1), (1024, 64))),
        dict(_case(320, 256, 1, (32, 1), 512, 1), v_is_view_of_k=True),
        dict(_case(192, 128, 4, (8, 1), 512, 1), v_is_view_of_k=True),
        dict(_case(128, 128, 8, (4, 1), 512, 8), v_is_view_of_k=True),
        dict(_case(64, 64, 4, (1, 1), 512, 1, **q8), v_is_view_of_k=True),
        # large KV in f16 (Qwen3.6-27B geometry)
        _case(256, 256, 4, (6, 1), 512, 512), _case(256, 256, 4, (6, 1), 4096, 64),
        _case(256, 256, 4, (6, 1), 4096, 16), _case(256, 256, 4, (2, 1), 4096, 512),
        _case(256, 256, 4, (4, 1), 4096, 512), _case(256, 256, 2, (12, 1), 4096, 512),
        # K / V allocated dense (not views of a cache), quantized, batch >= 64
        *(dict(_case(64, 64, 4, nr23, kv, 75, permute=p, **q8), kv_view=False)
          for nr23, kv, p in (((1, 1), 512, perm), ((4, 1), 512, perm), ((1, 1), 1024, perm),
                              ((1, 1), 512, (0, 1, 2, 3)))),
        # MMA: a non-power-of-two head size, an MLA view, swizzled K/V tiles
        _case(192, 128, 8, (8, 1), 4096, 1),
        dict(_case(576, 512, 1, (20, 1), 512, 1), v_is_view_of_k=True),
        _case(64, 64, 8, (8, 1), 4096, 4), _case(128, 128, 8, (4, 1), 4096, 8, sinks=True),
        _case(256, 256, 4, (2, 1), 1024, 32), _case(512, 512, 4, (2, 1), 1024, 4),
        # sparse masks with the n_kv_max hint: decode, prefill, large batches, gqa 12, q8_0
        *(dict(_case(hs, hs, nh, nr23, kv, nb, **t), n_kv_max=n) for hs, nh, nr23, kv, nb, n, t in (
            (512, 1, (8, 1), 4096, 1, 512, {}), (512, 1, (8, 2), 4096, 3, 768, {}),
            (512, 1, (8, 1), 4096, 1, 2304, {}), (256, 1, (8, 1), 4096, 1, 512, {}),
            (128, 1, (8, 1), 4096, 1, 512, {}), (512, 1, (8, 1), 4096, 64, 512, {}),
            (512, 1, (8, 1), 4096, 64, 2048, {}), (256, 1, (8, 1), 4096, 64, 512, {}),
            (128, 1, (8, 1), 4096, 64, 512, {}), (128, 1, (8, 1), 4096, 64, 2048, {}),
            (256, 2, (12, 1), 4096, 1, 512, {}), (256, 2, (12, 1), 8192, 64, 512, {}),
            (256, 1, (12, 2), 8192, 67, 512, {}), (128, 1, (8, 1), 4096, 1, 512, q8),
            (128, 1, (8, 1), 4096, 64, 512, q8), (256, 2, (12, 1), 8192, 1, 2048, {}))),
        dict(_case(128, 128, 1, (8, 1), 4096, 4, max_bias=8.0), n_kv_max=512),
        *(dict(_case(576, 512, 1, (16, nr3), 4096, nb), v_is_view_of_k=True, n_kv_max=n)
          for nr3, nb, n in ((1, 1, 512), (2, 2, 768), (1, 64, 512), (1, 64, 2048))),
    ]


def perf_grid():
    cases = [_case(72, 72, 16, (1, 1), 5776, 5776, mask=False)]   # Qwen3-VL-8B vision
    cases += [_case(64, 64, 8, (8, 1), 7680, nb) for nb in (1, 4)]
    cases += [_case(64, 64, 8, (8, 1), 7680, nb, type_K=t, type_V=t)
              for t in ("q4_0", "q8_0") for nb in (1, 512)]
    cases += [_case(hs, hs, 8, (nr, 1), kv, 1)
              for kv in (4096, 8192, 16384) for hs in (64, 128) for nr in (1, 4)]
    return cases


def flops(out: Tensor | None, p) -> int:
    """Only the two matrix products: Q K^T and P V, per head."""
    return 2 * p["nh"] * p["nr23"][0] * p["nb"] * (p["hsk"] + p["hsv"]) * p["kv"] * p["nr23"][1]


register(Family(
    name="flash_attn_ext",
    strict=dot_products(lambda p: p["type_K"]) + (Tolerance(
        "ggml-CPU accumulates the weighted rows of an f16 V in f16 (VKQ16) with f16 softmax "
        "weights: ~2^-11 of |V| <= 1 per step, whatever the output, an average near 0",
        atol=2 ** -8, impl=GGML_CPU, when=lambda p: p["type_V"] == "f16"),),
    build=build,
    vars=("hsk", "hsv", "nh", "nr23", "kv", "nb", "mask", "sinks", "max_bias", "logit_softcap", "prec",
          "type_K", "type_V", "permute"),
    op="FLASH_ATTN_EXT",
    changes=(new_params("0.25.3", ("hsk", "hsv", "nh", "nr23", "kv", "nb", "mask", "sinks", "max_bias",
                                     "logit_softcap", "prec", "type_K", "type_V", "permute"),
                       kv_view=True, v_is_view_of_k=False, n_kv_max=0,
                       # the MLA shapes, whose V was a view of K, now say so
                       add=lambda: [dict(p, v_is_view_of_k=True) for p in eval_grid() if _mla(p)] +
                       [p for p in eval_grid(minicpm3=True) if p["hsk"] == 96 and p["hsv"] == 64] +
                       eval_grid_0_25_3()),
             Since("0.25.3", drop=lambda p: _mla(p) and not p["v_is_view_of_k"])),
    eval_grid=eval_grid,
    perf_grid=perf_grid,
    init=init,
    max_nmse=5e-4,
    flops=flops,
))
