"""aclnnFusedInferAttentionScoreV2 (ops-transformer fused_infer_attention_score), the
non-quantized path, per its public doc for Atlas A2 / A3:

  out = softmax(scaleValue * Q K^T + pseShift, with attenMask's 1s dropped) V

  query / key / value   FLOAT16 or BFLOAT16 (INT8 and the quantized paths are not
                        simulated), all one type, ND, 3-4 dims, contiguous (the doc's
                        "non-contiguous: x"); key / value lists of one tensor, or of B
                        tensors of batch 1; key and value shapes identical
  inputLayout           BSH, BSND or BNSD simulated (BNSD_BSND, TND are not); numHeads is
                        query's N, numKeyValueHeads (0: numHeads) key's N and divides numHeads
  D                     <= 512; when Q_S > 1 and the types are FLOAT16 / BFLOAT16, a
                        multiple of 16; N <= 256, B <= 65536
  pseShiftOptional      FLOAT16 with a FLOAT16 query (BFLOAT16 with BFLOAT16), 4-D
                        (B or 1, N, >= Q_S, >= KV_S), contiguous; added after the scaling
  attenMaskOptional     BOOL / INT8 / UINT8, 1 = masked, (Q_S, KV_S), (B|1, Q_S, KV_S),
                        (B|1, 1, Q_S, KV_S), or for Q_S = 1 (B, KV_S), (B, 1, KV_S); with
                        sparseMode 0 the band [i - preTokens, i + nextTokens] applies too
  sparseMode            0..4 (only 0 simulated); innerPrecise 0..3: bit 1 corrects rows
                        that have nothing to attend to (output 0), without it such a row
                        is 0/0
  attentionOut          query's shape with value's D, query's type (FLOAT16 / BFLOAT16)
  softmaxLseFlag        false simulated (softmaxLse may then be nullptr)

The computation is in f32 from the input values, P (exp(x - max)) rounded to query's type
for the P·V product; the result is rounded to attentionOut's type.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .binding import ffi, lib

from . import dtypes
from .aclnn import Plan, as_f32, invalid, need_contiguous, need_dims, need_dtype, operator, rounded, tensor
from .cost import CUBE, elements
from .ops_movement import _tensor_list
from .refusals import SimError
from .state import tolerate

LAYOUTS = ("BSH", "BSND", "BNSD", "BNSD_BSND", "TND")
CHUNK = 1 << 22    # logits computed at once


def _unsimulated(what: str) -> SimError:
    return SimError(lib.ACLNN_ERR_INNER, f"{what} is not simulated")


def _bnsd(a: np.ndarray, layout: str, n: int) -> np.ndarray:
    """(B, N, S, D) view of a query / key / value array in `layout`."""
    if layout == "BSH":
        return a.reshape(a.shape[0], a.shape[1], n, -1).transpose(0, 2, 1, 3)
    return a.transpose(0, 2, 1, 3) if layout == "BSND" else a


def _dims_bnsd(t, layout: str, n: int, what: str) -> tuple[int, int, int, int]:
    if t.ndim != (3 if layout == "BSH" else 4):
        raise invalid(f"{what} has {t.ndim} dims, layout {layout} needs {3 if layout == 'BSH' else 4}")
    if layout == "BSH":
        b, s, h = t.dims
        if n <= 0 or h % n:
            raise invalid(f"{what} H {h} is not a multiple of its {n} heads")
        return b, n, s, h // n
    b, x, y, d = t.dims
    return (b, y, x, d) if layout == "BSND" else (b, x, y, d)


@dataclass(frozen=True)
class _Call:
    """A checked call: the sizes and settings the computation needs."""
    layout: str
    b: int          # batch
    n: int          # query heads
    n_kv: int       # key / value heads
    s_q: int
    s_kv: int
    dv: int         # value's D
    n_list: int     # tensors in the key (and value) list
    has_pse: bool
    has_mask: bool
    scale: np.float32
    pre_tokens: int
    next_tokens: int
    sparse_mode: int
    inner_precise: int
    out_dims: tuple
    p_type: int     # P's type into the P·V cube: query's


def attention_flops(plan) -> int:
    """The two products on the cube, 2 per multiply-add: Q·Kᵀ (B·N·Sq·Skv·Dk) and P·V
    (B·N·Sq·Skv·Dv), i.e. 2·Skv·(|query| + |attentionOut|); the softmax between them on
    the vector units is not counted (the cube's work bounds the call)."""
    return 2 * plan.sizes["s_kv"] * (elements(plan.inputs[0]) + elements(plan.outputs[0]))


@operator("FusedInferAttentionScoreV2", unit=CUBE, flops=attention_flops)
def fused_infer_attention_score_v2(query, key, value, pse_shift, atten_mask, actual_seq_lengths,
                                   actual_seq_lengths_kv, deq_scale1, quant_scale1, deq_scale2,
                                   quant_scale2, quant_offset2, antiquant_scale, antiquant_offset,
                                   block_table, query_padding_size, kv_padding_size,
                                   key_antiquant_scale, key_antiquant_offset, value_antiquant_scale,
                                   value_antiquant_offset, key_shared_prefix, value_shared_prefix,
                                   actual_shared_prefix_len, num_heads, scale_value, pre_tokens,
                                   next_tokens, input_layout, num_key_value_heads, sparse_mode,
                                   inner_precise, block_size, antiquant_mode, softmax_lse_flag,
                                   key_antiquant_mode, value_antiquant_mode, attention_out, softmax_lse):
    for ptr, what in ((query, "query"), (key, "key"), (value, "value"), (attention_out, "attentionOut")):
        if ptr == ffi.NULL:
            raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, f"{what} is nullptr")
    q, out = tensor(query, "query"), tensor(attention_out, "attentionOut")
    ks, vs = _tensor_list(key, "key"), _tensor_list(value, "value")
    pse = tensor(pse_shift, "pseShiftOptional", optional=True)
    mask = tensor(atten_mask, "attenMaskOptional", optional=True)
    for ptr, what in ((deq_scale1, "deqScale1"), (quant_scale1, "quantScale1"), (deq_scale2, "deqScale2"),
                      (quant_scale2, "quantScale2"), (quant_offset2, "quantOffset2"),
                      (antiquant_scale, "antiquantScale"), (antiquant_offset, "antiquantOffset"),
                      (block_table, "blockTable (page attention)"), (query_padding_size, "queryPaddingSize"),
                      (kv_padding_size, "kvPaddingSize"), (key_antiquant_scale, "keyAntiquantScale"),
                      (key_antiquant_offset, "keyAntiquantOffset"), (value_antiquant_scale, "valueAntiquantScale"),
                      (value_antiquant_offset, "valueAntiquantOffset"), (key_shared_prefix, "keySharedPrefix"),
                      (value_shared_prefix, "valueSharedPrefix"),
                      (actual_shared_prefix_len, "actualSharedPrefixLen"),
                      (actual_seq_lengths, "actualSeqLengths"), (actual_seq_lengths_kv, "actualSeqLengthsKv")):
        if ptr != ffi.NULL:
            raise _unsimulated(what)
    layout = ffi.string(input_layout).decode() if input_layout != ffi.NULL else ""
    if layout not in LAYOUTS:
        raise invalid(f"inputLayout {layout!r} should be one of {', '.join(LAYOUTS)}")
    if layout not in ("BSH", "BSND", "BNSD"):
        raise _unsimulated(f"inputLayout {layout}")
    _check_types(q, ks, vs, out, pse, mask)
    b, n, n_kv, s_q, s_kv, dv = _check_shapes(q, ks, vs, out, layout, num_heads, num_key_value_heads)
    _check_settings(s_q, sparse_mode, inner_precise, softmax_lse_flag, block_size)
    _check_pse_and_mask(q, pse, mask, b, n, s_q, s_kv)
    call = _Call(layout, b, n, n_kv, s_q, s_kv, dv, len(ks), pse is not None, mask is not None,
                 np.float32(scale_value), pre_tokens, next_tokens, sparse_mode, inner_precise, tuple(out.dims),
                 q.dtype)
    inputs = [q] + ks + vs + ([pse] if pse is not None else []) + ([mask] if mask is not None else [])
    return Plan(functools.partial(_attention, call), inputs, [out], sizes={"s_kv": s_kv})


def _check_types(q, ks, vs, out, pse, mask) -> None:
    """Types, formats, contiguity and ranks of the tensors."""
    floats = {"f16", "bf16"}
    need_dtype(q, "query", floats | {"s8"})
    if dtypes.short(q.dtype) == "s8":
        raise _unsimulated("an INT8 query (full quantization)")
    if not ks or len(ks) != len(vs):
        raise invalid(f"key and value lists hold {len(ks)} and {len(vs)} tensors")
    for i, (k, v) in enumerate(zip(ks, vs)):
        need_dtype(k, f"key[{i}]", floats | {"s8", "s32"})
        need_dtype(v, f"value[{i}]", floats | {"s8", "s32"})
        if k.dtype != q.dtype or v.dtype != q.dtype:
            if dtypes.short(k.dtype) in floats and dtypes.short(v.dtype) in floats:
                raise invalid(f"key[{i}] / value[{i}] dtype {dtypes.name(k.dtype)} / {dtypes.name(v.dtype)} "
                              f"should be query's {dtypes.name(q.dtype)}")
            raise _unsimulated("INT8 / INT4 key and value (antiquant)")
        if k.dims != v.dims:
            raise invalid(f"key[{i}] shape {list(k.dims)} and value[{i}] shape {list(v.dims)} should be the same")
    need_dtype(out, "attentionOut", floats | {"s8"})
    if out.dtype != q.dtype:
        raise (_unsimulated("an INT8 attentionOut") if dtypes.short(out.dtype) == "s8" else
               invalid(f"attentionOut dtype {dtypes.name(out.dtype)} should be query's {dtypes.name(q.dtype)}"))
    for t, what in [(q, "query"), (out, "attentionOut")] + [(k, "key") for k in ks] + [(v, "value") for v in vs] \
            + ([(pse, "pseShiftOptional")] if pse else []) + ([(mask, "attenMaskOptional")] if mask else []):
        if t.format not in (lib.ACL_FORMAT_ND, lib.ACL_FORMAT_NCHW, lib.ACL_FORMAT_NHWC):
            raise invalid(f"{what} format {t.format} should be ND")
    need_contiguous(q, "query")
    for t, what in [(k, "key") for k in ks] + [(v, "value") for v in vs] \
            + ([(pse, "pseShiftOptional")] if pse else []):
        if not t.is_contiguous():   # the page's 非连续Tensor column: ×
            tolerate("fias-strided-inputs", f"aclnnFusedInferAttentionScoreV2: {what} must be "
                     f"contiguous (strides {list(t.strides)}, dims {list(t.dims)})")
    need_dims((q, "query"), (out, "attentionOut"), *[(k, "key") for k in ks], *[(v, "value") for v in vs],
              lo=3, hi=4)


def _check_shapes(q, ks, vs, out, layout: str, num_heads: int, num_key_value_heads: int):
    """Heads, batch, sequence lengths and D: (B, N, N_kv, Q_S, KV_S, value's D)."""
    n_kv = num_key_value_heads or num_heads
    if num_heads <= 0 or num_key_value_heads < 0 or num_heads % n_kv:
        raise invalid(f"numHeads {num_heads} should be a positive multiple of numKeyValueHeads {n_kv}")
    b, n, s_q, d = _dims_bnsd(q, layout, num_heads, "query")
    if n != num_heads:
        raise invalid(f"numHeads {num_heads} differs from query's N {n}")
    kdims = [_dims_bnsd(k, layout, n_kv, "key") for k in ks]
    vdims = [_dims_bnsd(v, layout, n_kv, "value") for v in vs]
    if len(ks) > 1 and (len(ks) != b or any(kd[0] != 1 for kd in kdims) or len({kd[2] for kd in kdims}) > 1):
        raise _unsimulated("key / value lists of several tensors of different lengths")
    kb, kn, s_kv, kd = kdims[0][0] * len(ks), kdims[0][1], kdims[0][2], kdims[0][3]
    dv = vdims[0][3]
    if kn != n_kv:
        raise invalid(f"numKeyValueHeads {n_kv} differs from key's N {kn}")
    if kb != b:
        raise invalid(f"key batch {kb} differs from query's B {b}")
    if kd != d or dv != d:
        raise invalid(f"query D {d}, key D {kd} and value D {dv} should be equal")
    if d > 512 or n > 256 or b > 65536:
        raise invalid(f"D {d} (<= 512), N {n} (<= 256) or B {b} (<= 65536) out of range")
    if s_q > 1 and d % 16:
        raise invalid(f"D {d} should be 16-aligned when Q_S > 1 with FLOAT16 / BFLOAT16 inputs")
    expect = list(q.dims)
    expect[-1] = dv * (n if layout == "BSH" else 1)
    if list(out.dims) != expect:
        raise invalid(f"attentionOut shape {list(out.dims)} should be {expect}")
    return b, n, n_kv, s_q, s_kv, dv


def _check_settings(s_q: int, sparse_mode: int, inner_precise: int, softmax_lse_flag, block_size: int) -> None:
    if not 0 <= inner_precise <= 3:
        raise invalid(f"innerPrecise {inner_precise} should be in 0..3")
    if s_q > 1 and not 0 <= sparse_mode <= 4:
        raise invalid(f"sparseMode {sparse_mode} should be in 0..4")
    if s_q > 1 and sparse_mode != 0:
        raise _unsimulated(f"sparseMode {sparse_mode}")
    if softmax_lse_flag:
        raise _unsimulated("softmaxLseFlag true")
    if block_size:
        raise invalid(f"blockSize {block_size} without a blockTable")


def _check_pse_and_mask(q, pse, mask, b: int, n: int, s_q: int, s_kv: int) -> None:
    if pse is not None:
        want = "f16" if dtypes.short(q.dtype) == "f16" else "bf16"
        need_dtype(pse, "pseShiftOptional", {want})
        need_dims((pse, "pseShiftOptional"), lo=4, hi=4)
        pb, pn, ps, pk = pse.dims
        if pb not in (1, b) or pn != n or ps < s_q or pk < s_kv:
            raise invalid(f"pseShift shape {list(pse.dims)} should be ({b} or 1, {n}, >= {s_q}, >= {s_kv})")
    if mask is not None:
        need_dtype(mask, "attenMaskOptional", {"bool", "s8", "u8"})
        need_dims((mask, "attenMaskOptional"), lo=2, hi=4)
        md = mask.dims
        ok = md[-1] >= s_kv and (md[-2] >= s_q if len(md) > 2 or s_q > 1 else md[0] == b)
        lead = md[:-2] if (len(md) > 2 or s_q > 1) else ()
        if not ok or any(x not in (1, b) for x in lead[:1]) or any(x != 1 for x in lead[1:]):
            raise invalid(f"attenMask shape {list(md)} is not one of the documented shapes")


def _masked(ma: np.ndarray, c: _Call) -> np.ndarray:
    """attenMask as a (.., Q_S, KV_S) bool array, the sparseMode 0 band included."""
    ma = ma.reshape((1,) * (4 - ma.ndim) + ma.shape) if ma.ndim > 2 or c.s_q > 1 else ma[:, None, None]
    ma = ma[..., :c.s_q, :c.s_kv] != 0
    if c.sparse_mode == 0:   # the band of tokens a query may see
        i, j = np.arange(c.s_q)[:, None], np.arange(c.s_kv)[None, :]
        ma = ma | (j < i - c.pre_tokens) | (j > i + c.next_tokens)
    return ma


def _attention(c: _Call, qa, *rest):
    """The computation, in f32 from the input values, a chunk of query rows at a time."""
    kv = list(rest)
    ka = np.concatenate([np.asarray(x, np.float32) for x in kv[:c.n_list]])
    va = np.concatenate([np.asarray(x, np.float32) for x in kv[c.n_list:2 * c.n_list]])
    extra = kv[2 * c.n_list:]   # the pse and mask, where given
    pa = np.asarray(extra.pop(0), np.float32)[:, :, :c.s_q, :c.s_kv] if c.has_pse else None
    ma = _masked(np.asarray(extra.pop(0)), c) if c.has_mask else None
    rep = c.n // c.n_kv
    qh = _bnsd(np.asarray(qa, np.float32), c.layout, c.n)            # (B, N, S, D)
    kh = np.repeat(_bnsd(ka, c.layout, c.n_kv), rep, axis=1)          # query head h -> kv head h // rep
    vh = np.repeat(_bnsd(va, c.layout, c.n_kv), rep, axis=1)
    res = np.empty(qh.shape[:3] + (c.dv,), np.float32)
    step = max(1, CHUNK // max(1, c.b * c.n * c.s_kv))
    for i0 in range(0, c.s_q, step):
        rows = slice(i0, i0 + step)
        # in place where it can be: the logits are the chunk's largest arrays
        x = np.matmul(qh[:, :, rows], np.swapaxes(kh, -1, -2))
        x *= c.scale
        if pa is not None:
            x += pa[:, :, rows]
        if ma is not None:
            np.copyto(x, -np.inf, where=ma[..., rows, :])
        top = x.max(axis=-1, keepdims=True)
        e = np.exp(np.subtract(x, top, out=x), out=x)   # a row of only -inf: 0/0
        total = e.sum(axis=-1, keepdims=True)
        # the f32 exp(x - max) goes to the P·V cube in query's type (prompt_flash_attention_
        # s1s2_bns1_x910.h, SoftmaxResCopyOut: Cast CAST_ROUND); the row sum stays f32
        r = np.matmul(as_f32(rounded(e, c.p_type)), vh) / total
        if c.inner_precise & 2:            # invalid-row correction
            r = np.where(np.isneginf(top), 0.0, r)
        res[:, :, rows] = r
    if c.layout == "BSH":
        return res.transpose(0, 2, 1, 3).reshape(c.out_dims)
    return res.transpose(0, 2, 1, 3) if c.layout == "BSND" else res
