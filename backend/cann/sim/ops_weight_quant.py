"""aclnnWeightQuantBatchMatmulV2 (ops-nn weight_quant_batch_matmul_v2), per its public docs
for Atlas A2 / A3: y = x @ ANTIQUANT(weight) + bias, ANTIQUANT(w) = (w + antiquantOffset) *
antiquantScale.

  * x: FLOAT16 or BFLOAT16, 2-D (m, k), ND; non-contiguous only as a transpose (then m is
    at most 65535, else 2^31 - 1);
  * weight: INT8 or INT4, 2-D (k, n), ND (INT32 "INT4Pack" and FRACTAL_NZ are not
    simulated); non-contiguous only as a transpose; INT4 needs an even inner axis; k and
    n in [1, 65535], k equal to x's;
  * antiquantScale: x's type (the UINT64 / INT64 per-channel form is not simulated),
    non-contiguous only as a transpose; its shape says the mode: per tensor (1,) or
    (1, 1), per channel (n,) or (1, n) (antiquantGroupSize 0), per group
    (ceil(k / antiquantGroupSize), n) with antiquantGroupSize a multiple of 32 in
    [32, k - 1]; antiquantOffsetOptional: x's type, the scale's shape;
  * quantScaleOptional / quantOffsetOptional (output quantization to INT8): not simulated;
    an offset without a scale is an error;
  * biasOptional: (n,) or (1, n), FLOAT16 with FLOAT16 x, FLOAT with BFLOAT16 x;
  * y: x's type, (m, n); empty tensors are refused.
The antiquantisation is computed in FLOAT16 for FLOAT16 x (in FLOAT32, rounded to
BFLOAT16, for BFLOAT16 x); the cube multiplies those values exactly, accumulating in f32.
"""
from __future__ import annotations

import collections
import zlib
from typing import Callable

import numpy as np

from .binding import ffi, lib

from . import dtypes
from .aclnn import Plan, invalid, need_dtype, operator, tensor
from .cost import CUBE, matmul_flops
from .refusals import SimError

HALF = {"f16", "bf16"}


class Memo:
    """Results kept for the next calls given the very same values: a MoE layer calls the
    operator once per token and used expert, with a few experts' weights over and over.
    An entry is found by a checksum of the values, then compared with them in full, so it
    serves only the same values, whatever memory they are read from; it is never written
    to. The oldest entries go beyond `limit` bytes."""

    def __init__(self, limit: int):
        self.limit, self.held = limit, 0
        self.entries: collections.OrderedDict[tuple, tuple[list[np.ndarray], np.ndarray]] = collections.OrderedDict()

    def get(self, key: tuple, values: list[np.ndarray], make: Callable[[], np.ndarray]) -> np.ndarray:
        values = [np.ascontiguousarray(v) for v in values]
        key = key + tuple((v.shape, v.dtype.str, zlib.crc32(v.reshape(-1).view(np.uint8).data)) for v in values)
        hit = self.entries.get(key)
        if hit is not None and all(np.array_equal(a, b) for a, b in zip(hit[0], values)):
            self.entries.move_to_end(key)
            return hit[1]
        result = make()
        result.flags.writeable = False
        kept = [v.copy() for v in values]    # the device memory may change after this call
        size = result.nbytes + sum(v.nbytes for v in kept)
        if size <= self.limit:
            if hit is not None:
                self.held -= hit[1].nbytes + sum(v.nbytes for v in hit[0])
            self.entries[key] = (kept, result)
            self.held += size
            while self.held > self.limit:
                old, res = self.entries.popitem(last=False)[1]
                self.held -= res.nbytes + sum(v.nbytes for v in old)
        return result


ANTIQUANTISED = Memo(128 << 20)   # per worker: a few experts of the largest MoE cases
MAX_KN, MAX_M, MAX_M_T = 65535, 2**31 - 1, 65535


def _transposed(t, what: str) -> bool:
    """The transpose of a contiguous 2-D tensor, by its strides (True: a (k, 1) weight with
    strides (1, k) is a transposed one), or contiguous (False); anything else is refused,
    as the docs allow non-contiguous tensors only as a transpose."""
    if t.ndim == 2 and t.dims[0] > 1 and t.strides == (1, t.dims[0]):
        return True
    if t.is_contiguous():
        return False
    raise invalid(f"{what} must be contiguous or a transpose (dims {list(t.dims)}, "
                  f"strides {list(t.strides)})")


def _nd2(t, what: str) -> None:
    if t.ndim != 2:
        raise invalid(f"{what} has {t.ndim} dims, should be 2")
    if t.format != lib.ACL_FORMAT_ND:
        raise invalid(f"{what} format {t.format} is not simulated (ND only)")
    if 0 in t.dims:
        raise invalid(f"{what} is empty, which is not supported")


def _mkn(x, w, y) -> tuple[int, int, int]:
    """x (m, k) times weight (k, n) into y (m, n), each 2-D and in its size limits."""
    _nd2(x, "x")
    _nd2(w, "weight")
    _nd2(y, "y")
    x_t, w_t = _transposed(x, "x"), _transposed(w, "weight")
    (m, k), (kw, n) = x.dims, w.dims
    if k != kw:
        raise invalid(f"the reduce dim k of x {list(x.dims)} and weight {list(w.dims)} differ")
    if not (1 <= k <= MAX_KN and 1 <= n <= MAX_KN):
        raise invalid(f"k = {k} and n = {n} should be in [1, {MAX_KN}]")
    if not 1 <= m <= (MAX_M_T if x_t else MAX_M):
        raise invalid(f"m = {m} is out of range for a{' transposed' if x_t else ''} x")
    if w.dtype == lib.ACL_INT4 and (k if w_t else n) % 2:
        raise invalid(f"an INT4 weight needs an even inner axis (dims {list(w.dims)})")
    if y.dims != (m, n):
        raise invalid(f"y shape {list(y.dims)} should be {[m, n]}")
    return m, k, n


def _check_antiquant(x, s, off, bias, k: int, n: int, group_size: int) -> None:
    """antiquantScale / antiquantOffsetOptional / biasOptional against the mode that the
    scale's shape and antiquantGroupSize give (per tensor, per channel, per group)."""
    if group_size == 0:
        if s.dims not in ((1,), (1, 1), (n,), (1, n)):
            raise invalid(f"antiquantScale shape {list(s.dims)}: per tensor it is (1,) or (1, 1), "
                          f"per channel ({n},) or (1, {n}); per group it needs antiquantGroupSize")
    else:
        if group_size % 32 or not 32 <= group_size <= k - 1:
            raise invalid(f"antiquantGroupSize {group_size} should be a multiple of 32 in [32, {k - 1}]")
        if s.dims != (-(-k // group_size), n):
            raise invalid(f"antiquantScale shape {list(s.dims)} should be "
                          f"({-(-k // group_size)}, {n}) per group of {group_size}")
    if s.ndim == 2:
        _transposed(s, "antiquantScale")
    if off is not None:
        if off.dtype != x.dtype:
            raise invalid(f"antiquantOffsetOptional dtype {dtypes.name(off.dtype)} should be x's")
        if off.dims != s.dims:
            raise invalid(f"antiquantOffsetOptional shape {list(off.dims)} should be the "
                          f"antiquantScale's, {list(s.dims)}")
        if off.ndim == 2:
            _transposed(off, "antiquantOffsetOptional")
    if bias is not None:
        need_dtype(bias, "biasOptional", {"f16"} if dtypes.short(x.dtype) == "f16" else {"f32"})
        if bias.dims not in ((n,), (1, n)):
            raise invalid(f"biasOptional shape {list(bias.dims)} should be ({n},) or (1, {n})")


@operator("WeightQuantBatchMatmulV2", unit=CUBE, flops=matmul_flops)
def weight_quant_batch_matmul_v2(x_p, weight_p, scale_p, offset_p, qscale_p, qoffset_p, bias_p,
                                 group_size, y_p):
    for p, what in ((x_p, "x"), (weight_p, "weight"), (scale_p, "antiquantScale"), (y_p, "y")):
        if p == ffi.NULL:
            raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, f"{what} is nullptr")
    x, w, s, y = (tensor(x_p, "x"), tensor(weight_p, "weight"), tensor(scale_p, "antiquantScale"),
                  tensor(y_p, "y"))
    off = tensor(offset_p, "antiquantOffsetOptional", optional=True)
    bias = tensor(bias_p, "biasOptional", optional=True)
    if qoffset_p != ffi.NULL and qscale_p == ffi.NULL:
        raise invalid("quantOffsetOptional is given without quantScaleOptional")
    if qscale_p != ffi.NULL:
        raise invalid("quantScaleOptional (INT8 output quantization) is not simulated")

    need_dtype(x, "x", HALF)
    need_dtype(w, "weight", {"s8", "s4"})
    need_dtype(s, "antiquantScale", HALF)
    need_dtype(y, "y", HALF)
    for t, what in ((s, "antiquantScale"), (y, "y")):
        if t.dtype != x.dtype:
            raise invalid(f"{what} dtype {dtypes.name(t.dtype)} should be x's, {dtypes.name(x.dtype)}")
    m, k, n = _mkn(x, w, y)

    group_size = int(group_size)
    _check_antiquant(x, s, off, bias, k, n, group_size)

    half = np.float16 if dtypes.short(x.dtype) == "f16" else np.float32

    def per_k(p: np.ndarray) -> np.ndarray:
        """Scale / offset values spread over the weight's (k, n)."""
        p = np.asarray(p, np.float32).reshape(-1, p.shape[-1] if p.ndim == 2 else p.size)
        return np.repeat(p, group_size, axis=0)[:k] if group_size else p

    def scaled(wq: np.ndarray, sv: np.ndarray) -> np.ndarray:
        """wq * scale in f32, in place (exact: both have at most 11 significant bits)."""
        if group_size and k % group_size == 0:   # each group's rows times its scale row
            groups = wq.reshape(k // group_size, group_size, n)
            if np.may_share_memory(groups, wq):   # a view (reshape copies what it cannot view)
                groups *= np.asarray(sv, np.float32).reshape(-1, 1, n)
                return wq
        wq *= per_k(sv)
        return wq

    def antiquantised(wv, sv, ov) -> np.ndarray:
        """ANTIQUANT(weight) as the cube reads it: values of x's type, held in f32."""
        wq = wv.astype(np.float32)
        if ov is not None:
            wq = (wv.astype(half) + per_k(ov).astype(half)).astype(np.float32)
        # the half multiply: the exact product, rounded once
        deq = scaled(wq, sv).astype(half)
        if half is np.float32:   # bf16 x: antiquantised in f32, fed to the cube as bf16
            deq = deq.astype(dtypes.numpy_dtype(lib.ACL_BF16))
        return deq.astype(np.float32)

    def compute(xv, wv, sv, *rest):
        rest = list(rest)
        ov = rest.pop(0) if off is not None else None
        bv = rest.pop(0) if bias is not None else None
        deq = ANTIQUANTISED.get((group_size, np.dtype(half).str), [wv, sv] + ([] if ov is None else [ov]),
                                lambda: antiquantised(wv, sv, ov))
        out = np.matmul(np.asarray(xv, np.float32), deq)
        if bv is not None:
            out = out + np.asarray(bv, np.float32).reshape(1, n)
        return out

    inputs = [x, w, s] + ([off] if off is not None else []) + ([bias] if bias is not None else [])
    return Plan(compute, inputs, [y])
