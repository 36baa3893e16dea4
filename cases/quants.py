"""Block-quantized ggml types in NumPy: rows of blocks decoded to f32 and f32 encoded to blocks.

The gguf package's codecs where it has them; for what it lacks, small vectorised codecs
written from ggml v0.20.2's block formats (src/ggml-common.h) and its reference row
(de)quantizers (src/ggml-quants.c): q1_0 and q2_0 both ways, nvfp4 encoding. Types whose
reference quantizer is an iterative search (the k-quants, iq*) are not encoded here.
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


OWN_DEQUANT = {"q1_0": dequant_q1_0, "q2_0": dequant_q2_0}
OWN_QUANT = {"q1_0": quant_q1_0, "q2_0": quant_q2_0, "nvfp4": quant_nvfp4}


# --- one entry point per direction, on rows of blocks ---

def _gguf(type, step):
    """gguf's codec of `type` for `step`, or None when it has none."""
    import gguf.quants as gq
    try:
        qtype = type.qtype
    except NotImplementedError:
        return None
    fn = gq.dequantize if step == "dequantize" else gq.quantize
    probe = (np.zeros((1, type.type_size), np.uint8) if step == "dequantize"
             else np.zeros((1, type.blck_size), np.float32))
    try:
        fn(probe, qtype)
    except NotImplementedError:
        return None
    return lambda a: fn(a, qtype)


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
        return (f"no NumPy quantizer for {type.name} (ggml's reference quantizer is an "
                f"iterative search, not re-implemented; the gguf package has none)")
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
