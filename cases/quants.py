"""Block-quantized ggml types in NumPy: rows of blocks decoded to f32 and f32 encoded to blocks.

The gguf package's codecs where it has them; for what it lacks, small vectorised codecs
written from ggml v0.20.2's block formats (src/ggml-common.h) and its reference row
(de)quantizers (src/ggml-quants.c): q1_0 and q2_0 both ways, nvfp4 encoding, and the
scale-searching row quantizers of q2_K..q6_K, iq4_nl and iq4_xs (the same candidates and
f32 sums in the same order, so their bytes match ggml-cpu's). The other iq* types (lattice
searches over grids) are not encoded here.
"""
from __future__ import annotations

import numpy as np

# e2m1 values doubled, as ggml's kvalues_mxfp4 (shared by mxfp4 and nvfp4): index = 4-bit code
E2M1_X2 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)


def _scale_f16(blocks: np.ndarray) -> np.ndarray:
    """The block's leading ggml_half d, as f32 (blocks, 1)."""
    return np.ascontiguousarray(blocks[:, :2]).view(np.float16).astype(np.float32)


def _roundf(x: np.ndarray) -> np.ndarray:
    """C's roundf: halves away from zero (np.round goes to even)."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0).astype(x.dtype)


# --- q1_0: block of 128 = f16 d, then 16 bytes of sign bits (bit j%8 of byte j/8): +d or -d ---

def dequant_q1_0(blocks: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(blocks[:, 2:], axis=-1, bitorder="little")
    d = _scale_f16(blocks)
    return np.where(bits == 1, d, -d)


def quant_q1_0(x: np.ndarray) -> np.ndarray:
    # d = mean |x|, summed in f32 in element order as the C loop does (cumsum is sequential)
    d = np.cumsum(np.abs(x), axis=-1, dtype=np.float32)[:, -1:] / np.float32(x.shape[-1])
    bits = np.packbits(x >= 0, axis=-1, bitorder="little")
    return np.concatenate([d.astype(np.float16).view(np.uint8), bits], axis=-1)


# --- q2_0: block of 64 = f16 d, then 16 bytes of 2-bit codes (bits 2*(j%4) of byte j/4):
#     code q means (q - 1) * d, i.e. -d, 0, d, 2d ---

_SHIFTS2 = np.array([0, 2, 4, 6], np.uint8)


def dequant_q2_0(blocks: np.ndarray) -> np.ndarray:
    q = (blocks[:, 2:, None] >> _SHIFTS2) & 3                    # (blocks, 16, 4): element 4*i + s
    return (q.reshape(len(blocks), -1).astype(np.float32) - 1) * _scale_f16(blocks)


def quant_q2_0(x: np.ndarray) -> np.ndarray:
    d = np.abs(x).max(axis=-1, keepdims=True)                    # amax is the scale
    with np.errstate(divide="ignore"):
        inv = np.where(d > 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    q = np.clip(_roundf(x * inv) + 1, 0, 3).astype(np.uint8).reshape(len(x), -1, 4)
    qs = (q << _SHIFTS2).sum(axis=-1, dtype=np.uint8)
    return np.concatenate([d.astype(np.float16).view(np.uint8), qs], axis=-1)


# --- nvfp4: block of 64 = 4 UE4M3 scales (one per 16 elements), then 32 bytes of e2m1 codes:
#     in sub-block s, byte 8*s + j holds element j (low nibble) and j + 8 (high nibble) ---

def ue4m3_to_f32(u: np.ndarray) -> np.ndarray:
    """Unsigned e4m3 (exponent bias 7, no sign), halved like ggml (its e2m1 table is doubled);
    0x7F (NaN) reads as 0."""
    e, m = (u >> 3).astype(np.int32) & 0xF, (u & 7).astype(np.float32)
    v = np.where(e == 0, m * np.float32(2.0 ** -9), (1 + m / 8) * np.exp2(e - 7).astype(np.float32))
    return np.where((u == 0) | (u == 0x7F), 0, v * np.float32(0.5)).astype(np.float32)


def f32_to_ue4m3(x: np.ndarray) -> np.ndarray:
    """Nearest-ish unsigned e4m3 as ggml encodes it: the fp32 mantissa's top 3 bits rounded by
    the 4th, saturating at 0x7E (448); subnormals m * 2^-9 rounded half up; <= 0 gives 0."""
    x = np.minimum(np.asarray(x, np.float32), np.float32(448))
    bits = x.view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.int32) - 127 + 7
    man = ((bits >> 20) & 7).astype(np.int32) + ((bits >> 19) & 1).astype(np.int32)
    carried = np.where(man > 7, exp + 1, exp)
    normal = np.where(carried >= 15, 0x7E, (np.clip(carried, 0, 15) << 3) | (man & 7))
    sub = np.clip((x * np.float32(512) + np.float32(0.5)).astype(np.int32), 0, 7)
    ue = np.where(exp <= 0, sub, normal)
    return np.where(x > 0, ue, 0).astype(np.uint8)


def _nearest_e2m1(x: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Index of the e2m1 value (times d) nearest to x; the first on ties, as ggml's scan."""
    return np.argmin(np.abs(E2M1_X2 * d[..., None] - x[..., None]), axis=-1).astype(np.uint8)


def quant_nvfp4(x: np.ndarray) -> np.ndarray:
    sub = x.reshape(len(x), 4, 16)
    ue = f32_to_ue4m3(np.abs(sub).max(axis=-1) / np.float32(6))          # (blocks, 4)
    idx = _nearest_e2m1(sub, ue4m3_to_f32(ue)[..., None])                # (blocks, 4, 16)
    qs = idx[..., :8] | (idx[..., 8:] << 4)
    return np.concatenate([ue, qs.reshape(len(x), 32)], axis=-1)


# --- k-quants and iq4: vectorised over (sub-)blocks, following the scale searches of ggml's
#     reference row quantizers step by step (same candidates, same f32 sums taken in element
#     order, same tie rules), so that the chosen scales and codes match libggml's ---

F32 = np.float32
_EPS = F32(1e-15)                        # ggml's GROUP_MAX_EPS: a group below it is all zero


def _nearest(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int (adding 1.5 * 2^23 in f32): round half to even, as int32."""
    return np.rint(v).astype(np.int32)


def _seqsum(v: np.ndarray) -> np.ndarray:
    """Sum over the last axis in f32, element by element like a C loop."""
    return np.cumsum(v, axis=-1, dtype=F32)[..., -1]


def _signed_absmax(x: np.ndarray):
    """(the value of largest magnitude, the first one on ties; that magnitude), last axis."""
    i = np.argmax(np.abs(x), axis=-1)
    v = np.take_along_axis(x, i[..., None], axis=-1)[..., 0]
    return v, np.abs(v)


def _f16(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """f32 -> stored f16 bytes (..., 2), and the value read back as f32."""
    h = np.asarray(v, F32).astype(np.float16)
    return h[..., None].view(np.uint8), h.astype(F32)


def _safe(den: np.ndarray, ok: np.ndarray) -> np.ndarray:
    return np.where(ok, den, F32(1)).astype(F32)


def _qx_search(x: np.ndarray, nmax: int):
    """Symmetric scale of groups x (G, n) for codes -nmax..nmax-1, weights x^2: the start
    scale -max/nmax then 18 nudged ones, keeping the best weighted fit. (scale, codes + nmax)."""
    mx, amax = _signed_absmax(x)
    live = amax >= _EPS
    mx = _safe(mx, live)[:, None]
    w = x * x

    def fit(iscale):
        l = np.clip(_nearest(iscale * x), -nmax, nmax - 1)
        lf = l.astype(F32)
        return l, _seqsum(w * x * lf), _seqsum(w * lf * lf)

    L, sumlx, suml2 = fit(F32(-nmax) / mx)
    scale = np.where(suml2 != 0, sumlx / _safe(suml2, suml2 != 0), F32(0)).astype(F32)
    best = scale * sumlx
    for step in range(-9, 10):
        if step == 0:
            continue
        l, slx, sl2 = fit(-(F32(nmax) + F32(0.1) * F32(step)) / mx)
        better = (sl2 > 0) & (slx * slx > best * sl2)
        L = np.where(better[:, None], l, L)
        scale = np.where(better, slx / _safe(sl2, sl2 > 0), scale).astype(F32)
        best = np.where(better, scale * slx, best).astype(F32)
    return np.where(live, scale, F32(0)), np.where(live[:, None], L + nmax, 0)


def _qkx2_search(x, w, nmax, rmin, rdelta, nstep, mad):
    """Asymmetric scale and min of groups x (G, n) with weights w, codes 0..nmax: the
    min/max grid, then nstep+1 widened grids (each from the best min so far) refitted by
    weighted least squares, keeping the smallest weighted error. (scale, -min, codes)."""
    lo = np.minimum(x.min(axis=-1), F32(0))
    hi = x.max(axis=-1)
    flat = hi == lo
    lo = np.where(flat, lo - F32(1), lo).astype(F32)   # any span: flat groups are dropped below
    sum_w, sum_x = _seqsum(w), _seqsum(w * x)

    def err(scale, mn, l):
        diff = scale[:, None] * l.astype(F32) + mn[:, None] - x
        return _seqsum(w * (np.abs(diff) if mad else diff * diff))

    iscale = F32(nmax) / (hi - lo)
    scale = F32(1) / iscale
    L = np.clip(_nearest(iscale[:, None] * (x - lo[:, None])), 0, nmax)
    best = err(scale, lo, L)
    mn = lo
    for step in range(nstep + 1):
        # the grid starts from the best min so far (it moves as better fits are found)
        iscale = (F32(rmin) + F32(rdelta) * F32(step) + F32(nmax)) / (hi - mn)
        l = np.clip(_nearest(iscale[:, None] * (x - mn[:, None])), 0, nmax)
        lf = l.astype(F32)
        sl, sl2, sxl = _seqsum(w * lf), _seqsum(w * lf * lf), _seqsum(w * lf * x)
        D = sum_w * sl2 - sl * sl
        ok = D > 0
        Ds = _safe(D, ok)
        ts = (sum_w * sxl - sum_x * sl) / Ds
        tm = (sl2 * sum_x - sl * sxl) / Ds
        pos = tm > 0
        tm = np.where(pos, F32(0), tm).astype(F32)
        ts = np.where(pos, sxl / _safe(sl2, sl2 != 0), ts).astype(F32)
        cur = err(ts, tm, l)
        better = ok & (cur < best)
        L = np.where(better[:, None], l, L)
        best = np.where(better, cur, best)
        scale = np.where(better, ts, scale).astype(F32)
        mn = np.where(better, tm, mn).astype(F32)
    scale = np.where(flat, F32(0), scale).astype(F32)
    return scale, -np.where(flat, lo + F32(1), mn).astype(F32), np.where(flat[:, None], 0, L)


def _pack_2bit(L: np.ndarray) -> np.ndarray:
    """(B, 256) codes 0..3 -> (B, 64): in each half of 128, byte l holds l, l+32, l+64, l+96."""
    q = L.reshape(len(L), 2, 4, 32).astype(np.uint8)
    return (q[:, :, 0] | q[:, :, 1] << 2 | q[:, :, 2] << 4 | q[:, :, 3] << 6).reshape(len(L), 64)


def _requant(x, d, dm, lo, hi, L):
    """Codes of x (B, S, n) for sub-block scales d and mins dm (B, S); where d is 0 the
    search's codes L stay."""
    live = d != 0
    l = np.clip(_nearest((x + dm[..., None]) / _safe(d, live)[..., None]), lo, hi)
    return np.where(live[..., None], l, L)


# q6_K (210 bytes): ql[128], qh[64], 16 int8 sub-scales, f16 d; value = d * scale * (q - 32)
def quant_q6_K(x: np.ndarray) -> np.ndarray:
    B = len(x)
    xs = x.reshape(B, 16, 16)
    sc, L = _qx_search(xs.reshape(-1, 16), 32)
    sc, L = sc.reshape(B, 16), L.reshape(B, 16, 16)
    ms, mabs = _signed_absmax(sc)
    live = mabs >= _EPS
    iscale = F32(-128) / _safe(ms, live)
    dbytes, d = _f16(np.where(live, F32(1) / iscale, F32(0)))
    q = np.minimum(127, _nearest(iscale[:, None] * sc))
    q = np.where(live[:, None], q, 0)
    L = _requant(xs, d[:, None] * q.astype(F32), np.zeros_like(sc), -32, 31, L - 32) + 32
    L = np.where(live[:, None, None], L, 0).reshape(B, 2, 4, 32).astype(np.uint8)
    lo = L & 0xF
    ql = np.concatenate([lo[:, :, 0] | lo[:, :, 2] << 4, lo[:, :, 1] | lo[:, :, 3] << 4], axis=-1)
    hb = L >> 4
    qh = hb[:, :, 0] | hb[:, :, 1] << 2 | hb[:, :, 2] << 4 | hb[:, :, 3] << 6
    return np.concatenate([ql.reshape(B, 128), qh.reshape(B, 64),
                           q.astype(np.int8).view(np.uint8), dbytes.reshape(B, 2)], axis=-1)


def _pack_scale_min_k4(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """8 6-bit scales and mins (B, 8) -> the 12 bytes of q4_K / q5_K."""
    s = np.zeros((len(ls), 12), np.uint8)
    s[:, 0:4] = ls[:, :4] | (ls[:, 4:] >> 4) << 6
    s[:, 4:8] = lm[:, :4] | (lm[:, 4:] >> 4) << 6
    s[:, 8:12] = (ls[:, 4:] & 0xF) | (lm[:, 4:] & 0xF) << 4
    return s


def _k4_scales(x: np.ndarray, nmax: int, rmin: float, nstep: int):
    """q4_K / q5_K: (header bytes d, dmin, scales (B, 16), codes (B, 8, 32))."""
    B = len(x)
    xs = x.reshape(B, 8, 32)
    av = np.sqrt(_seqsum(xs * xs) / F32(32))
    w = (av[..., None] + np.abs(xs)).astype(F32)
    sc, mins, L = _qkx2_search(xs.reshape(-1, 32), w.reshape(-1, 32), nmax, rmin, 0.1, nstep, False)
    sc, mins, L = sc.reshape(B, 8), mins.reshape(B, 8), L.reshape(B, 8, 32)
    max_sc = np.maximum(sc.max(axis=-1), F32(0))
    max_mn = np.maximum(mins.max(axis=-1), F32(0))
    inv_s = np.where(max_sc > 0, F32(63) / _safe(max_sc, max_sc > 0), F32(0))
    inv_m = np.where(max_mn > 0, F32(63) / _safe(max_mn, max_mn > 0), F32(0))
    ls = np.minimum(63, _nearest(inv_s[:, None] * sc) & 0xFF).astype(np.uint8)   # C's uint8_t cast
    lm = np.minimum(63, _nearest(inv_m[:, None] * mins) & 0xFF).astype(np.uint8)
    db, d = _f16(max_sc / F32(63))
    mb, dmin = _f16(max_mn / F32(63))
    L = _requant(xs, d[:, None] * ls.astype(F32), dmin[:, None] * lm.astype(F32), 0, nmax, L)
    return np.concatenate([db, mb], axis=-1), _pack_scale_min_k4(ls, lm), L


# q4_K (144 bytes): f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, qs[128];
#     value = d * sc * q - dmin * m, 8 sub-blocks of 32
def quant_q4_K(x: np.ndarray) -> np.ndarray:
    head, sc, L = _k4_scales(x, 15, -1.0, 20)
    q = L.reshape(len(x), 4, 2, 32).astype(np.uint8)
    return np.concatenate([head, sc, (q[:, :, 0] | q[:, :, 1] << 4).reshape(len(x), 128)], axis=-1)


# q5_K (176 bytes): as q4_K plus qh[32]: bit 2c (2c+1) of qh[j] is the 5th bit of element
#     64c + j (64c + 32 + j)
def quant_q5_K(x: np.ndarray) -> np.ndarray:
    head, sc, L = _k4_scales(x, 31, -0.5, 15)
    q = L.reshape(len(x), 4, 2, 32).astype(np.uint8)
    lo = q & 0xF
    qs = (lo[:, :, 0] | lo[:, :, 1] << 4).reshape(len(x), 128)
    hb = (q >> 4).reshape(len(x), 8, 32)
    qh = (hb << np.arange(8, dtype=np.uint8)[:, None]).sum(axis=1, dtype=np.uint8)
    return np.concatenate([head, sc, qh, qs], axis=-1)


# q2_K (84 bytes): 16 bytes of 4-bit scale | 4-bit min, qs[64], f16 d, f16 dmin;
#     value = d * (sc & 15) * q - dmin * (sc >> 4), 16 sub-blocks of 16
def quant_q2_K(x: np.ndarray) -> np.ndarray:
    B = len(x)
    xs = x.reshape(B, 16, 16)
    sc, mins, L = _qkx2_search(xs.reshape(-1, 16), np.abs(xs).reshape(-1, 16), 3, -0.5, 0.1, 15, True)
    sc, mins, L = sc.reshape(B, 16), mins.reshape(B, 16), L.reshape(B, 16, 16)
    max_sc = np.maximum(sc.max(axis=-1), F32(0))
    max_mn = np.maximum(mins.max(axis=-1), F32(0))
    hs, hm = max_sc > 0, max_mn > 0
    ls = np.where(hs[:, None], _nearest((F32(15) / _safe(max_sc, hs))[:, None] * sc), 0)
    lm = np.where(hm[:, None], _nearest((F32(15) / _safe(max_mn, hm))[:, None] * mins), 0)
    scb = ((ls & 0xFF) | (lm << 4) & 0xFF).astype(np.uint8)
    db, d = _f16(np.where(hs, max_sc / F32(15), F32(0)))
    mb, dmin = _f16(np.where(hm, max_mn / F32(15), F32(0)))
    L = _requant(xs, d[:, None] * (scb & 0xF).astype(F32), dmin[:, None] * (scb >> 4).astype(F32), 0, 3, L)
    return np.concatenate([scb, _pack_2bit(L.reshape(B, 256)), db, mb], axis=-1)


def _q3_search(x: np.ndarray, nmax: int = 4):
    """q3_K's sub-block scale (G, 16): the -max/nmax grid, then up to 5 sweeps that move one
    code at a time when that improves the weighted (x^2) fit. (scale, codes + nmax)."""
    mx, amax = _signed_absmax(x)
    live = amax >= _EPS
    w = x * x
    L = np.clip(_nearest((F32(-nmax) / _safe(mx, live))[:, None] * x), -nmax, nmax - 1)
    lf = L.astype(F32)
    sumlx, suml2 = _seqsum(w * x * lf), _seqsum(w * lf * lf)
    active = live.copy()
    for _ in range(5):
        changed = np.zeros(len(x), bool)
        for i in range(x.shape[1]):
            xi, wi, li = x[:, i], w[:, i], L[:, i].astype(F32)
            slx = sumlx - wi * xi * li
            sl2 = suml2 - wi * li * li
            pos = slx > 0
            nl = np.clip(_nearest(xi * sl2 / _safe(slx, pos)), -nmax, nmax - 1)
            nlf = nl.astype(F32)
            slx2 = slx + wi * xi * nlf
            sl22 = sl2 + wi * nlf * nlf
            take = active & pos & (nl != L[:, i]) & (sl22 > 0) & (slx2 * slx2 * suml2 > sumlx * sumlx * sl22)
            L[:, i] = np.where(take, nl, L[:, i])
            sumlx = np.where(take, slx2, sumlx).astype(F32)
            suml2 = np.where(take, sl22, suml2).astype(F32)
            changed |= take
        active &= changed
        if not active.any():
            break
    scale = np.where(suml2 > 0, sumlx / _safe(suml2, suml2 > 0), F32(0))
    return np.where(live, scale, F32(0)).astype(F32), np.where(live[:, None], L + nmax, 0)


# q3_K (110 bytes): hmask[32] (bit b of byte m: 3rd bit of element 32b + m), qs[64] (low 2
#     bits as q2_K), 12 bytes of 6-bit signed sub-scales (+32), f16 d; value = d * (sc-32) * (q-4)
def quant_q3_K(x: np.ndarray) -> np.ndarray:
    B = len(x)
    xs = x.reshape(B, 16, 16)
    sc, L = _q3_search(xs.reshape(-1, 16))
    sc, L = sc.reshape(B, 16), L.reshape(B, 16, 16)
    ms, mabs = _signed_absmax(sc)
    live = ms != 0
    iscale = F32(-32) / _safe(ms, live)
    l = np.clip(_nearest(iscale[:, None] * sc), -32, 31) + 32
    l = np.where(live[:, None], l, 0).astype(np.uint8)
    scb = np.zeros((B, 12), np.uint8)
    scb[:, :8] = (l[:, :8] & 0xF) | (l[:, 8:] & 0xF) << 4
    hi = (l >> 4).reshape(B, 4, 4)                   # [j // 4, j % 4]
    scb[:, 8:] = (hi << (2 * np.arange(4, dtype=np.uint8))[:, None]).sum(axis=1, dtype=np.uint8)
    db, d = _f16(np.where(live, F32(1) / iscale, F32(0)))
    L = _requant(xs, d[:, None] * (l.astype(F32) - 32), np.zeros_like(sc), -4, 3, L - 4) + 4
    L = L.reshape(B, 256).astype(np.uint8)
    hm = (L > 3).reshape(B, 8, 32).astype(np.uint8)
    hmask = (hm << np.arange(8, dtype=np.uint8)[:, None]).sum(axis=1, dtype=np.uint8)
    return np.concatenate([hmask, _pack_2bit(L & 3), scb, db], axis=-1)


# iq4_nl / iq4_xs: 4-bit indices into a fixed non-linear table
IQ4NL = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int8)
_IQ4F = IQ4NL.astype(F32)


def _best_index(v: np.ndarray) -> np.ndarray:
    """Nearest table entry to v; between two, the lower only when strictly nearer."""
    mu = np.clip(np.searchsorted(_IQ4F, v, side="right"), 1, 15)
    lower = v - _IQ4F[mu - 1] < _IQ4F[mu] - v
    i = np.where(lower, mu - 1, mu)
    return np.where(v <= _IQ4F[0], 0, np.where(v >= _IQ4F[15], 15, i))


def _iq4_fit(x, w, idx):
    q = _IQ4F[idx]
    return _seqsum(w * q * x), _seqsum(w * q * q)


def _iq4_search(x: np.ndarray, ntry: int):
    """Scale of groups of 32 (G, 32), weights x^2: -max/127 refitted, then (ntry > 0) the
    grids (t - 127) / max for t in -ntry..ntry. (scale, indices of the first grid)."""
    mx, amax = _signed_absmax(x)
    live = amax >= _EPS
    mxs = _safe(mx, live)
    w = x * x
    d = (-mxs if ntry > 0 else mxs) / _IQ4F[0]
    L = _best_index((F32(1) / d)[:, None] * x)
    sqx, sq2 = _iq4_fit(x, w, L)
    d = np.where(sq2 > 0, sqx / _safe(sq2, sq2 > 0), F32(0)).astype(F32)
    best = d * sqx
    for t in range(-ntry, ntry + 1):
        idl = F32(t + int(IQ4NL[0])) / mxs
        sqx, sq2 = _iq4_fit(x, w, _best_index(idl[:, None] * x))
        better = (sq2 > 0) & (sqx * sqx > best * sq2)
        d = np.where(better, sqx / _safe(sq2, sq2 > 0), d).astype(F32)
        best = np.where(better, d * sqx, best).astype(F32)
    return np.where(live, d, F32(0)).astype(F32), np.where(live[:, None], L, 0)


def _pack_nibbles32(L: np.ndarray) -> np.ndarray:
    """(B, n) indices -> (B, n/2): per 32, byte j holds element j (low) and j + 16 (high)."""
    q = L.reshape(len(L), -1, 2, 16).astype(np.uint8)
    return (q[:, :, 0] | q[:, :, 1] << 4).reshape(len(L), -1)


# iq4_nl (18 bytes per 32): f16 d, 16 bytes of indices; value = d * IQ4NL[q]
def quant_iq4_nl(x: np.ndarray) -> np.ndarray:
    d, L = _iq4_search(x, -1)
    db, _ = _f16(d)
    return np.concatenate([db, _pack_nibbles32(L)], axis=-1)


# iq4_xs (136 bytes per 256): f16 d, u16 scales_h (2 bits per sub-block), scales_l[4] (a nibble
#     per sub-block), 128 bytes of indices; value = d * (sc - 32) * IQ4NL[q]
def quant_iq4_xs(x: np.ndarray) -> np.ndarray:
    B = len(x)
    xs = x.reshape(B, 8, 32)
    sc, _ = _iq4_search(xs.reshape(-1, 32), 7)
    sc = sc.reshape(B, 8)
    ms, _ = _signed_absmax(sc)
    d = -ms / F32(32)
    db, _ = _f16(d)
    id_ = np.where(d != 0, F32(1) / _safe(d, d != 0), F32(0))
    l = np.clip(_nearest(id_[:, None] * sc), -32, 31)
    dl = d[:, None] * l.astype(F32)
    idl = np.where(dl != 0, F32(1) / _safe(dl, dl != 0), F32(0))
    L = _best_index(idl[..., None] * xs)
    l = (l + 32).astype(np.uint16)
    sh = ((l >> 4) << (2 * np.arange(8, dtype=np.uint16))).sum(axis=-1, dtype=np.uint16)
    sl = (l[:, 0::2] & 0xF) | (l[:, 1::2] & 0xF) << 4
    return np.concatenate([db, sh[:, None].view(np.uint8), sl.astype(np.uint8),
                           _pack_nibbles32(L.reshape(B, 256))], axis=-1)


OWN_DEQUANT = {"q1_0": dequant_q1_0, "q2_0": dequant_q2_0}
OWN_QUANT = {"q1_0": quant_q1_0, "q2_0": quant_q2_0, "nvfp4": quant_nvfp4,
             "q2_K": quant_q2_K, "q3_K": quant_q3_K, "q4_K": quant_q4_K, "q5_K": quant_q5_K,
             "q6_K": quant_q6_K, "iq4_nl": quant_iq4_nl, "iq4_xs": quant_iq4_xs}
# encoders that search for their scales: inputs (cases/inputs.py) still come from libggml's
# ggml_quantize_chunk, which is what test-backend-ops uses (for iq4_nl it searches wider than
# the row quantizer that ggml-cpu's SET_ROWS / CPY and these encoders follow)
SEARCHED = frozenset({"q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs"})


# --- one entry point per direction, on rows of blocks ---

# elements (de)coded at a time by gguf's block codecs: their temporaries stay a few times this
CODEC_CHUNK = 1 << 20


def _gguf(type, step):
    """gguf's codec of `type` for `step`, or None when it has none. Its block functions run
    on CODEC_CHUNK elements of whole rows at a time, not on gguf's groups of 16 rows, whose
    Python overhead was most of a decode (FLASH_ATTN_EXT's q4_0 K/V rows of 64-576
    elements: 14 of a reference's 20 s); each block is (de)coded on its own either way, so
    the values are gguf.quants.(de)quantize's, bit for bit."""
    import gguf.quants as gq
    try:
        qtype = type.qtype
    except NotImplementedError:
        return None
    codec = gq._type_traits.get(qtype)   # block types: their row codecs
    if codec is None:   # f32, f16: gguf's own entry points
        fn = gq.dequantize if step == "dequantize" else gq.quantize
        whole = lambda a: fn(a, qtype)   # noqa: E731
    else:
        codec.init_grid()
        fn = codec.dequantize_rows if step == "dequantize" else codec.quantize_rows
        whole = lambda a: _by_rows(fn, a, type, step)   # noqa: E731
    probe = (np.zeros((1, type.type_size), np.uint8) if step == "dequantize"
             else np.zeros((1, type.blck_size), np.float32))
    try:
        whole(probe)
    except NotImplementedError:
        return None
    return whole


def _by_rows(fn, a: np.ndarray, type, step: str) -> np.ndarray:
    """fn (a gguf row codec) over a's rows, CODEC_CHUNK elements of whole rows at a time."""
    rows = a.reshape(-1, a.shape[-1])
    n_per_row = rows.shape[1] // type.type_size * type.blck_size if step == "dequantize" else rows.shape[1]
    width = n_per_row if step == "dequantize" else type.row_size(n_per_row)
    out = np.empty((rows.shape[0], width), np.float32 if step == "dequantize" else np.uint8)
    step_rows = max(1, CODEC_CHUNK // max(1, n_per_row))
    for r in range(0, rows.shape[0], step_rows):
        out[r:r + step_rows] = fn(rows[r:r + step_rows])
    return out.reshape(a.shape[:-1] + (width,))


_CODECS: dict = {}


def _codec(type, step):
    key = (type.name, step)
    if key not in _CODECS:
        own = (OWN_DEQUANT if step == "dequantize" else OWN_QUANT).get(type.name)
        if own is not None:
            per_block = type.type_size if step == "dequantize" else type.blck_size

            def own_rows(a, own=own, per_block=per_block):
                blocks = np.ascontiguousarray(a).reshape(-1, per_block)
                out = own(blocks.astype(np.float32) if step == "quantize" else blocks)
                return out.reshape(a.shape[:-1] + (-1,))
            _CODECS[key] = own_rows
        else:
            _CODECS[key] = _gguf(type, step)
    return _CODECS[key]


def missing(type, step: str) -> str | None:
    """None when `type` can be `step`ped ("quantize" / "dequantize") here, else why not."""
    if _codec(type, step) is not None:
        return None
    if step == "quantize":
        return (f"no NumPy quantizer for {type.name} (ggml's reference quantizer "
                f"is not re-implemented here; the gguf package has none)")
    return f"no NumPy decoder for {type.name}"


def dequantize(rows: np.ndarray, type) -> np.ndarray:
    """Rows of blocks (..., row bytes) -> f32 values (..., elements)."""
    fn = _codec(type, "dequantize")
    if fn is None:
        raise NotImplementedError(missing(type, "dequantize"))
    return np.asarray(fn(np.ascontiguousarray(rows, dtype=np.uint8)), dtype=np.float32)


def quantize(values: np.ndarray, type) -> np.ndarray:
    """f32 values (..., elements) -> rows of blocks (..., row bytes)."""
    fn = _codec(type, "quantize")
    if fn is None:
        raise NotImplementedError(missing(type, "quantize"))
    return fn(np.ascontiguousarray(values, dtype=np.float32))
