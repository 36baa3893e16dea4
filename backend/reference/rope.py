"""ROPE and ROPE_BACK, from the definition of rotary embeddings (RoFormer), with YaRN
scaling (Peng et al. 2023), M-RoPE sections (Qwen2-VL), interleaved M-RoPE (Qwen3-VL) and
vision RoPE, as ggml's op_params describe them.

Pair k (k < n_dims/2) of a row is rotated by theta_k = p * freq_base^(-2k/n_dims) / ff_k,
where p is the row's position. The pair is (2k, 2k+1) in normal mode and (k, k + n_dims/2)
in NeoX and M-RoPE modes; vision mode rotates n_dims pairs (k, k + n_dims) of a row of
2 n_dims. Elements past the rotated ones are copied. ROPE_BACK rotates by -theta.
"""
from __future__ import annotations

import numpy as np

from . import reference

NEOX, MROPE, VISION, IMROPE = 2, 8, 24, 40


def yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow):
    """The pair range [low, high] over which YaRN ramps from extrapolation to interpolation:
    the dims whose wavelength spans beta_fast (resp. beta_slow) turns of the original context,
    corr(beta) = n_dims * ln(n_ctx_orig / (2 pi beta)) / (2 ln freq_base), floored / ceiled
    and clamped to [0, n_dims - 1]."""
    def corr(beta):
        return n_dims * np.log(n_ctx_orig / (beta * 2 * np.pi)) / (2 * np.log(freq_base))
    with np.errstate(divide="ignore", invalid="ignore"):
        return max(0.0, np.floor(corr(beta_fast))), min(n_dims - 1.0, np.ceil(corr(beta_slow)))


def rope_params(node):
    p = {name: node.param_i32(i) for i, name in ((1, "n_dims"), (2, "mode"), (4, "n_ctx_orig"))}
    p.update({name: node.param_f32(i) for i, name in enumerate(
        ("freq_base", "freq_scale", "ext_factor", "attn_factor", "beta_fast", "beta_slow"), 5)})
    p["sections"] = [node.param_i32(11 + i) for i in range(4)]
    return p


def positions_and_exponents(mode, sections, pos, ne2, n_pairs):
    """(position, exponent index) of every (token, pair), each of shape (ne2, n_pairs).

    Plain modes: the token's one position, exponent k. M-RoPE modes: pos holds four blocks
    of ne2 (t, h, w, e); pair k falls in sector k mod sum(sections), which picks the block:
    contiguous sections (M-RoPE), or t, h, w taking turns while each has sectors left
    (IMROPE). Vision restarts the exponent at each section's first sector."""
    k = np.arange(n_pairs)
    if not mode & MROPE:
        return np.broadcast_to(pos[:ne2, None], (ne2, n_pairs)), np.broadcast_to(k, (ne2, n_pairs))
    s = sections
    sector = k % sum(s)
    starts = np.cumsum([0] + s[:3])                         # first sector of t, h, w, e
    if mode == IMROPE:
        block = np.full(n_pairs, 3)
        for b in (0, 1, 2):
            block[(sector % 3 == b) & (sector < 3 * s[b])] = b
    else:
        block = np.searchsorted(starts, sector, side="right") - 1
    exponent = sector - starts[block] if mode == VISION else k
    p = pos.reshape(4, ne2)[block].T                        # (ne2, n_pairs)
    return p, np.broadcast_to(exponent, (ne2, n_pairs))


@reference("ROPE", "ROPE_BACK")
def rope(node, x, pos, freq=None):
    prm = rope_params(node)
    n_dims, mode = prm["n_dims"], prm["mode"]
    ne0, ne2 = node.ne[0], node.ne[2]
    x = np.asarray(x, dtype=np.float64)                     # (ne3, ne2, ne1, ne0)
    n_pairs = n_dims if mode == VISION else n_dims // 2
    p, e = positions_and_exponents(mode, prm["sections"], np.asarray(pos, dtype=np.float64).reshape(-1), ne2, n_pairs)
    theta = p * float(prm["freq_base"]) ** (-2.0 * e / n_dims)
    if freq is not None:
        theta = theta / np.asarray(freq, dtype=np.float64).reshape(-1)[:n_pairs]

    # YaRN: blend interpolated (theta * freq_scale) and extrapolated angles by a ramp over
    # the pair index, and scale the magnitude; without ext_factor only interpolation.
    fs, ef = float(prm["freq_scale"]), float(prm["ext_factor"])
    mscale = float(prm["attn_factor"])
    if ef != 0.0:
        low, high = yarn_corr_dims(n_dims, prm["n_ctx_orig"], prm["freq_base"], prm["beta_fast"], prm["beta_slow"])
        ramp = 1.0 - np.clip((np.arange(n_pairs) - low) / max(0.001, high - low), 0.0, 1.0)
        mix = ramp * ef
        theta = fs * theta * (1.0 - mix) + theta * mix
        mscale *= 1.0 + 0.1 * np.log(1.0 / fs)
    else:
        theta = fs * theta
    if node.op == "ROPE_BACK":
        theta = -theta
    cos = (np.cos(theta) * mscale)[None, :, None, :]        # (1, ne2, 1, n_pairs)
    sin = (np.sin(theta) * mscale)[None, :, None, :]

    if mode == VISION:
        i0, i1 = np.arange(n_pairs), np.arange(n_pairs) + n_dims
    elif mode & NEOX or mode & MROPE:
        i0, i1 = np.arange(n_pairs), np.arange(n_pairs) + n_dims // 2
    else:
        i0, i1 = 2 * np.arange(n_pairs), 2 * np.arange(n_pairs) + 1
    offs = node.param_i32(15)                               # 0.25.3: the rotated window's offset
    i0, i1 = i0 + offs, i1 + offs
    out = x.copy()                                          # the unrotated tail is copied
    x0, x1 = x[..., i0], x[..., i1]
    out[..., i0] = x0 * cos - x1 * sin
    out[..., i1] = x0 * sin + x1 * cos
    assert out.shape[-1] == ne0
    return out
