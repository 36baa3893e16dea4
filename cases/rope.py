"""Rotary position embeddings: test_rope (ROPE and ROPE_BACK in every mode: normal, NeoX,
multi-section M-RoPE, interleaved IMROPE, vision; freq factors, YaRN, views, in place) and
the fused test-mode chain test_rms_norm_mul_rope (RMS_NORM -> MUL -> ROPE, + SET_ROWS)."""
from __future__ import annotations

from .catalog import Family, new_params, register, Since, Tolerance
from .tolerances import ROTATION_ANGLES
from .graph import Tensor, add, mul, new_op, set_param, view, view_of
from .norm import rms_norm
from .rows import set_rows
from .types import F32, I32, I64

# mode bits (ggml.h)
NORMAL, NEOX, MROPE, VISION, IMROPE = 0, 2, 8, 24, 40
MODES = (NORMAL, NEOX, MROPE, IMROPE, VISION)


def rope(a: Tensor, pos: Tensor, freq: Tensor | None, n_dims: int, mode: int, n_ctx_orig: int = 0,
         freq_base: float = 10000.0, freq_scale: float = 1.0, ext_factor: float = 0.0,
         attn_factor: float = 1.0, beta_fast: float = 32.0, beta_slow: float = 1.0,
         sections=None, inplace: bool = False, back: bool = False) -> Tensor:
    """ggml_rope_impl (ggml_rope_ext / _multi / _inplace / _back): a dup of `a` (a view of it
    in place), src = [a, pos, freq]. op_params: i32 [n_past=0, n_dims, mode, n_ctx=0,
    n_ctx_orig], f32 [freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow]
    at words 5..10, i32 sections[4] at 11..14 (zero unless an M-RoPE mode gave them).
    pos holds ne2 positions, or 4 * ne2 (t, h, w, e blocks) when mode has the M-RoPE bit."""
    assert mode & 1 == 0
    if not (0 < n_dims <= a.ne[0] and n_dims % 2 == 0):
        # what every ggml backend's ROPE kernel asserts (ggml_rope_impl itself does not)
        raise ValueError(f"ROPE rotates an even n_dims of at most ne[0] = {a.ne[0]}: n_dims = {n_dims}")
    assert pos.type == I32 and pos.ne[1:] == (1, 1, 1)
    assert pos.ne[0] == a.ne[2] * (4 if mode & MROPE else 1)
    assert freq is None or (freq.type == F32 and freq.ne[0] >= n_dims // 2)
    srcs = [a, pos, freq]
    op = "ROPE_BACK" if back else "ROPE"
    if inplace:
        t = view_of(a, op, a.ne, a.nb)
        t.src = srcs   # type: ignore[assignment]   # freq None: a NULL source (Tensor.src)
    else:
        t = new_op(a.graph, op, a.type, a.ne, srcs)
    t.set_params_i32([0, n_dims, mode, 0, n_ctx_orig])
    t.set_params_f32([freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow], 5)
    t.set_params_i32(list(sections) if mode & MROPE and sections else [0, 0, 0, 0], 11)
    return t


def rope_plain(a: Tensor, pos: Tensor, n_dims: int, mode: int) -> Tensor:
    """ggml_rope: no freq factors, freq_base 10000, no scaling, beta_fast = beta_slow = 0."""
    return rope(a, pos, None, n_dims, mode, beta_fast=0.0, beta_slow=0.0)


# --- test_rope ---

def build_rope(g, type, ne_a, n_dims, mode, n_ctx, fs, ef, af, ff, v, inplace, forward=True, n_offs=0):
    """test_rope::build_graph: `a` itself, a view of a bigger tensor (v=1: every dim larger)
    or its second half along dim 0 (v=2, an unaligned offset, as clip's build_rope_2d);
    0.25.3's n_offs moves the rotated window n_offs elements into the row
    (ggml_rope_set_offset: op_params[15])."""
    out = _build_rope(g, type, ne_a, n_dims, mode, ff, v, forward and not n_offs,
                      freq_scale=fs, ext_factor=ef, attn_factor=af, beta_fast=1.0, beta_slow=1.0,
                      inplace=inplace, back=not forward)
    if n_offs:
        assert mode != VISION and n_offs % 2 == 0 and n_offs + n_dims <= ne_a[0]
        out.set_params_i32([n_offs], 15)
    return out


def _build_rope(g, type, ne_a, n_dims, mode, ff, v, param, **kw):
    if v & 1:
        base = g.new_tensor(type, [ne_a[0] * 2, ne_a[1] * 4, ne_a[2] * 3, ne_a[3]], "a")
        a = view(base, ne_a, base.nb[1:])
    elif v == 2:
        base = g.new_tensor(type, [ne_a[0] * 2, *ne_a[1:]], "a")
        a = view(base, ne_a, base.nb[1:], ne_a[0] * base.type.type_size)
    else:
        a = g.new_tensor(type, ne_a, "a")
    if param:
        set_param(a.base)   # ops grad: the forward rope's input (no backward with an offset)
    pos = g.new_tensor(I32, [ne_a[2] * (4 if mode & MROPE else 1)], "pos")
    freq = g.new_tensor(F32, [n_dims // 2], "freq") if ff else None
    if mode == VISION:
        # vision RoPE rotates (x, y) image coordinates: n_dims/2 rotated pairs, two sections
        return rope(a, pos, freq, n_dims // 2, mode, sections=[n_dims // 4, n_dims // 4, 0, 0], **kw)
    if mode & MROPE:
        return rope(a, pos, freq, n_dims, mode, sections=[n_dims // 3] * 3 + [0], **kw)
    return rope(a, pos, freq, n_dims, mode, **kw)


def init_rope(t, rng, p):
    """Positions uniform in [0, n_ctx) (rand() % n_ctx); freq factors (ne0 == n_dims/2) in
    [0.9, 1.1]; everything else uniform [-1, 1]."""
    if t.type == I32:
        return rng.integers(0, p["n_ctx"], size=t.ne[0])
    if t.ne[0] == p["n_dims"] // 2:
        return rng.uniform(0.9, 1.1, size=tuple(reversed(t.ne))).astype("float32")
    return None


def rope_offset_cases():
    """0.25.3: a rotated-dims window 32 elements into the row (not for vision mode), and
    real-model shapes."""
    shapes = (([128, 32, 2, 1], 32, NORMAL), ([128, 32, 2, 1], 32, NEOX), ([128, 12, 2, 1], 24, MROPE),
              ([128, 12, 2, 1], 24, IMROPE))
    return [dict(_rope_case(t, ne, nd, m, 1.4245, 0.7465, 1.4245, ff, 0, fw), n_offs=32)
            for t in ("f32", "f16") for fw in (True, False) for ff in (False, True) for ne, nd, m in shapes] + [
            dict(_rope_case(t, [128, 32, 2, 1], 32, NEOX, 1.4245, 0.7465, 1.4245, inplace=True), n_offs=32)
            for t in ("f32", "f16")] + [
            # real models, f32 forward, packed Q, a 512-token prefill: qwen3.5 0.8B and 4B,
            # gemma4 E2B sliding and E4B global
            _rope_case("f32", [256, 8, 512, 1], 64, IMROPE), _rope_case("f32", [256, 16, 512, 1], 64, IMROPE),
            _rope_case("f32", [256, 8, 512, 1], 256, NEOX), _rope_case("f32", [512, 8, 512, 1], 128, NEOX, ff=True)]


def _rope_case(type, ne_a, n_dims, mode, fs=1.0, ef=0.0, af=1.0, ff=False, v=0, forward=True, inplace=False):
    return dict(type=type, ne_a=list(ne_a), n_dims=n_dims, mode=mode, n_ctx=512, fs=fs, ef=ef, af=af,
                ff=ff, v=v, inplace=inplace, forward=forward)


# llama / falcon / stablelm / phi-2 / qwen2-vl / qwen3-vl head shapes, as the eval grid lists them
_ALL_SHAPES = (
    ([128, 40, 2, 1], 128, NORMAL), ([128, 52, 2, 1], 128, NORMAL), ([128, 64, 2, 1], 128, NORMAL),
    ([16, 16, 8192, 1], 16, NORMAL),
    ([64, 1, 2, 1], 64, NEOX), ([64, 71, 2, 1], 64, NEOX), ([64, 8, 2, 1], 64, NEOX),
    ([80, 32, 2, 1], 20, NORMAL), ([80, 32, 2, 1], 32, NORMAL), ([80, 32, 4, 1], 32, NORMAL),
    ([80, 32, 2, 1], 20, NEOX), ([80, 32, 2, 1], 32, NEOX), ([80, 32, 4, 1], 32, NEOX),
    ([16, 16, 8192, 1], 16, NEOX),
    ([128, 12, 2, 1], 128, MROPE), ([128, 28, 2, 1], 128, MROPE),
    ([128, 12, 2, 1], 20, MROPE), ([128, 28, 2, 1], 32, MROPE),
    ([128, 12, 2, 1], 128, IMROPE), ([128, 28, 2, 1], 128, IMROPE),
    ([128, 12, 2, 1], 20, IMROPE), ([128, 28, 2, 1], 32, IMROPE),
    ([80, 16, 2, 1], 80, VISION), ([128, 16, 2, 1], 128, IMROPE), ([16, 16, 8192, 1], 16, IMROPE),
)


def rope_eval_grid():
    cases = []
    for forward in (True, False):
        all_shapes = True  # only the first (fs, ef, af, type) point runs every model shape
        for fs in (1.0, 1.4245):
            for ef in (0.0, 0.7465):
                for af in (1.0, 1.4245):
                    for type in ("f32", "f16"):
                        for ff in (False, True):
                            kw = dict(fs=fs, ef=ef, af=af, ff=ff, forward=forward)
                            for v in (0, 1):
                                cases.append(_rope_case(type, [128, 32, 2, 1], 128, NORMAL, v=v, **kw))
                                if all_shapes:
                                    cases += [_rope_case(type, ne, nd, m, v=v, **kw) for ne, nd, m in _ALL_SHAPES]
                                cases.append(_rope_case(type, [64, 128, 2, 1], 64, NEOX, v=v, **kw))
                            # a non-contiguous view at an odd offset along dim 0 (gemma4v vision)
                            cases += [_rope_case(type, [36, 16, 2457, 1], 36, m, v=2, **kw) for m in MODES]
                        all_shapes = False
    # one in-place case per type, mode and ff (YaRN on)
    for type in ("f32", "f16"):
        for mode in MODES:
            for ff in (False, True):
                kw = dict(fs=1.4245, ef=0.7465, af=1.4245, ff=ff, inplace=True)
                cases += [_rope_case(type, [128, 32, 2, 1], 128, mode, v=0, **kw),
                          _rope_case(type, [128, 32, 2, 1], 128, mode, v=1, **kw),
                          _rope_case(type, [128, 32, 2, 3], 128, mode, v=1, **kw)]
    return cases


def rope_perf_grid():
    # prefill of 512 tokens: llama 7B / 65B, stablelm, falcon 40B, qwen2-vl, qwen3-vl; qwen2-vl ViT
    shapes = (([128, 32, 512, 1], 128, NORMAL), ([128, 64, 512, 1], 128, NORMAL),
              ([80, 32, 512, 1], 20, NEOX), ([64, 8, 512, 1], 64, NEOX),
              ([128, 12, 512, 1], 128, MROPE), ([128, 12, 512, 1], 128, IMROPE),
              ([80, 16, 2, 1], 80, VISION))
    return [_rope_case(type, ne, nd, m, ff=ff, v=v, forward=fw)
            for fw in (True, False) for type in ("f32", "f16") for ff in (False, True) for v in (0, 1)
            for ne, nd, m in shapes]


register(Family(
    name="rope",
    strict=(ROTATION_ANGLES,),
    build=build_rope,
    # `forward` is not printed: the op name (ROPE / ROPE_BACK) tells it
    vars=("type", "ne_a", "n_dims", "mode", "n_ctx", "fs", "ef", "af", "ff", "v", "inplace"),
    changes=(new_params("0.25.3", ("type", "ne_a", "n_dims", "mode", "n_ctx", "fs", "ef", "af", "ff", "v",
                                     "inplace"), n_offs=0, add=rope_offset_cases),),
    op=lambda p: "ROPE" if p["forward"] else "ROPE_BACK",
    eval_grid=rope_eval_grid,
    perf_grid=rope_perf_grid,
    init=init_rope,
    max_maa=1e-3,
    grad_precise=True,
))


# --- test_rms_norm_mul_rope (fused, test mode only) ---

def build_rms_norm_mul_rope(g, ne, eps, multi_add, set_rows_, broadcast, mode, mul_=True, rope_=True,
                            set_rows_type="f16"):
    """0.25.3 adds: the mul and the rope each optional, M-RoPE modes (ggml_rope_multi, three
    equal sections), a 4-d input, the cache's type (set_rows_type) and twice its rows."""
    later = g.ggml_at_least("0.25.3")
    a = g.new_tensor(F32, ne if later else ne[:3], "a")
    b, c = (g.new_tensor(F32, ne[:3], n) for n in "bc")
    if multi_add:
        a = add(add(a, b), c)
    w = g.new_tensor(F32, [ne[0]], "w") if broadcast else b
    a = rms_norm(a, eps)
    if mul_:
        a = mul(a, w)
    out = a
    if rope_ and mode & MROPE:
        pos = g.new_tensor(I32, [ne[2] * 4], "pos")
        out = rope(a, pos, None, ne[0], mode, sections=[ne[0] // 3] * 3 + [0])
    elif rope_:
        out = rope_plain(a, g.new_tensor(I32, [ne[2]], "pos"), ne[0], mode)
    if set_rows_:
        rows = view(out, [ne[0] * ne[1], ne[2]], [out.nb[2]])
        dst = g.new_tensor(set_rows_type, [ne[0] * ne[1], ne[2] * 2 if later else ne[2] * ne[3], 1, 1], "dst")
        out = set_rows(dst, rows, g.new_tensor(I64, [ne[2], 1, 1], "row_idxs"))
    return out


def init_rms_norm_mul_rope(t, rng, p):
    """Positions and row ids: a shuffled 0..ne2-1 (init_set_rows_row_ids); the rest uniform.
    0.25.3: positions in [0, 512), row ids of a cache twice as long."""
    if "rope" not in p:   # v0.20.2
        return rng.permutation(p["ne"][2])[:t.ne[0]] if t.type in (I32, I64) else None
    if t.type == I64:
        return rng.permutation(p["ne"][2] * 2)[:t.ne[0]]
    if t.type == I32:
        return rng.integers(0, 512, size=t.ne[0])
    return None


NORM_ROPE_SHAPES = ([768, 1, 1, 1], [768, 3, 1, 1], [768, 3, 5, 1], [128, 32, 2, 1], [128, 4, 2, 1],
                    [128, 32, 50, 1], [128, 4, 50, 1], [8192, 2, 2, 1])


def rms_norm_mul_rope_0_25_3():
    """0.25.3: IMROPE too, [128,4,7,2] with and without the set_rows, and f32 / f16 caches
    without the mul and the rope."""
    shapes = NORM_ROPE_SHAPES

    def case(ne, multi_add=False, set_rows=False, broadcast=False, mode=NORMAL, mul=True, rope=True,
             set_rows_type="f16"):
        return dict(ne=ne, eps=1e-6, multi_add=multi_add, mul=mul, rope=rope, set_rows=set_rows,
                    broadcast=broadcast, mode=mode, set_rows_type=set_rows_type)
    return ([case(ne, set_rows=True, mul=False, rope=False, set_rows_type=st)
             for st in ("f32", "f16") for ne in ([256, 1, 1, 1], [128, 4, 3, 1])] +
            [case([128, 4, 7, 2]), case([128, 4, 7, 2], set_rows=True)] +
            [case(ne, ma, sr, bc, m) for ma in (False, True) for sr in (False, True) for bc in (False, True)
             for m in (NORMAL, NEOX, IMROPE) for ne in shapes])


def rms_norm_mul_rope_eval_grid():
    shapes = NORM_ROPE_SHAPES  # ([8192, 2, 2, 1] is listed twice there)
    return [dict(ne=ne, eps=1e-6, multi_add=ma, set_rows=sr, broadcast=bc, mode=m)
            for ma in (False, True) for sr in (False, True) for bc in (False, True) for m in (NORMAL, NEOX)
            for ne in shapes]


# 0.25.3 draws the positions from [0, 512) (v0.20.2: 0 .. ne2 - 1, under 50): angles up to
# 511 rad, whose f32 rounding, and that of ggml's theta *= theta_scale over up to 4,096
# pairs, moves outputs by up to 3.6e-3 of their rms (measured, ggml-CPU, the 8192-wide rows;
# CANN-SIM 7e-4 on the 768-wide ones)
POSITIONS_TO_511 = Tolerance(
    "0.25.3: positions up to 511, angles up to 511 rad formed in f32 (as ROTATION_ANGLES, "
    "the rounding growing with the angle)", atol_rms=2 ** -7, when=lambda p: "rope" in p)


register(Family(
    name="rms_norm_mul_rope",
    strict=(ROTATION_ANGLES, POSITIONS_TO_511),
    build=lambda g, set_rows, mul=True, rope=True, **p: build_rms_norm_mul_rope(
        g, set_rows_=set_rows, mul_=mul, rope_=rope, **p),
    vars=("ne", "eps", "multi_add", "set_rows", "broadcast", "mode"),
    op="RMS_NORM_MUL_ROPE",
    eval_grid=rms_norm_mul_rope_eval_grid,
    # every v0.20.2 case comes back with mul, rope and an f16 cache (rms_norm_mul_rope_0_25_3)
    changes=(Since("0.25.3", drop=lambda p: True, add=rms_norm_mul_rope_0_25_3,
                   defaults=dict(mul=True, rope=True, set_rows_type="f16"), fields=dict(
        vars=("ne", "eps", "multi_add", "mul", "rope", "set_rows", "broadcast", "mode", "set_rows_type"),
        max_nmse=lambda p: 5e-6 if p["ne"][0] == 8192 else 1e-7)),),
    init=init_rms_norm_mul_rope,
    fused=True,
))


# --- test_rope_set_rows (fused, test mode only): a rope written as rows into a KV cache ---

def build_rope_set_rows(g, type, type_idx, ne_a, mode):
    """ROPE of `a` {128, 32, ne2} (ggml_rope, or ggml_rope_multi with YaRN-ish scaling for the
    M-RoPE and vision modes), viewed as ne2 rows of 128 * 32, written by SET_ROWS at ne2
    distinct row ids into a {128 * 32, ne2 * ne3} cache of `type`."""
    a = g.new_tensor(F32, [ne_a[0], ne_a[1], ne_a[2], 1], "a")
    pos = g.new_tensor(I32, [ne_a[2] * (4 if mode & MROPE else 1)], "pos")
    n_dims = 128
    yarn = dict(freq_scale=1.4245, ext_factor=0.7465, attn_factor=1.4245, beta_fast=1.0, beta_slow=1.0)
    if mode == VISION:   # only the (x, y) image coordinates: n_dims / 2 rotated pairs
        r = rope(a, pos, None, n_dims // 2, mode, sections=[n_dims // 4, n_dims // 4, 0, 0], **yarn)
    elif mode & MROPE:
        r = rope(a, pos, None, n_dims, mode, sections=[n_dims // 3] * 3 + [0], **yarn)
    else:
        r = rope_plain(a, pos, ne_a[0], mode)
    rows = view(r, [ne_a[0] * ne_a[1], ne_a[2]], [r.nb[2]], 0)
    dst = g.new_tensor(type, [ne_a[0] * ne_a[1], ne_a[2] * ne_a[3], 1, 1], "dst")
    out = set_rows(dst, rows, g.new_tensor(type_idx, [ne_a[2], 1, 1], "row_idxs"))
    out.name = "out"
    return out


def init_rope_set_rows(t, rng, p):
    """Row ids: a shuffled 0..ne2-1; positions uniform in [0, 512); the rest uniform [-1, 1]."""
    if t.name == "row_idxs":   # i64, or i32 (0.25.3)
        return rng.permutation(p["ne_a"][2])
    if t.name == "pos":
        return rng.integers(0, 512, size=t.ne[0])
    return None


register(Family(
    name="rope_set_rows",
    strict=(ROTATION_ANGLES,),
    build=build_rope_set_rows,
    vars=("type", "type_idx", "ne_a", "mode"),
    op="ROPE_SET_ROWS",
    init=init_rope_set_rows,
    fused=True,
    eval_grid=lambda: [dict(type=t, type_idx="i64", ne_a=[128, 32, ne2, ne3], mode=m)
                       for m in (NORMAL, NEOX, MROPE, VISION) for t in ("f16", "f32")
                       for ne2 in (1, 8, 512) for ne3 in (1, 3)],
    changes=(Since("0.25.3", add=lambda: [   # IMROPE, and i32 row ids
        *(dict(type=t, type_idx="i64", ne_a=[128, 32, ne2, ne3], mode=IMROPE)
          for t in ("f16", "f32") for ne2 in (1, 8, 512) for ne3 in (1, 3)),
        dict(type="f32", type_idx="i32", ne_a=[128, 32, 8, 1], mode=IMROPE)]),),
))
