"""aclnnMm and aclnnMatmul (ops-nn mat_mul_v3), per their public docs for Atlas A2 / A3:

  * self, mat2, out: FLOAT, FLOAT16 or BFLOAT16, format ND, non-contiguous inputs allowed;
    Mm takes 2-D tensors only, Matmul 1-6 dims with torch.matmul's rules (1-D operands,
    broadcast batch dims);
  * self and mat2 types follow the deduction table; the deduced type must convert to out's.
    BFLOAT16 with FLOAT32 or FLOAT16 deduces FLOAT32 (FLOAT16 under USE_FP16), as ops-nn's
    A2 rule table does (matmul_util.cpp, Dav2201MatMulRule::GetUpperDtypeByLookUpTable,
    rows FP32+BF16 and FP16+BF16; it serves aclnnMm, aclnnMatmul and aclnnBatchMatMul),
    with the table's warning; aclnnMatmul's page forbids both pairs on A2 / A3, the source
    and ggml-cann (bf16 weights with f32 activations, llama.cpp PR #20152) take them:
    docs/cann-sim-dtypes.md says why the source is followed;
  * the reduce dims must match, out must have the product's shape;
  * cubeMathType 0..4: 1 (ALLOW_FP32_DOWN_PRECISION) and 3 (USE_HF32) compute FLOAT
    inputs as HFLOAT32 (3 refuses other types), 2 (USE_FP16) computes them as FLOAT16
    with an f16 result (and refuses BFLOAT16), 0 and 4 keep the type.
The cube multiplies the (rounded) inputs exactly and accumulates in f32 (aclnn.Cube: HF32
with 910B's 11 mantissa bits, USE_FP16's f16 output stage).

Weights in the cube's private layout (ops-math trans_data, aclnnTransMatmulWeight's page):
  * aclnnCalculateMatmulWeightSizeV2(tensorShape (batch.., n, k), 2-6 dims, none 0;
    dataType FLOAT16 / BFLOAT16 / INT8) gives the elements the converted weight needs:
    Align(n, 16) * Align(k, 16) (INT8: Align(k, 32)), times the batch dims;
  * aclnnTransMatmulWeight(mmWeightRef: FLOAT16 / BFLOAT16 / INT8, ND, 2-6 dims, not
    empty) rewrites the weight in place as FRACTAL_NZ and refreshes the descriptor (format,
    storage shape), so the same aclTensor then goes to aclnnMm as the page's sample does.
    The simulator really moves the data: (.., R, C) becomes (.., C/c0, R/16, 16, c0) with
    c0 = 32 bytes of elements, zero-padded; the allocation must hold that padded size;
  * mat2 in FRACTAL_NZ (Mm / Matmul / BatchMatMul; FLOAT16 / BFLOAT16, batch dims 1) is
    read back from that layout: its view is the converted (R, C) matrix, or its transpose
    (strides (1, R')) as a layer describes a weight it multiplies transposed.
"""
from __future__ import annotations

import numpy as np

import dataclasses
import math

from .binding import ffi, lib

from . import dtypes
from .aclnn import Plan, need_nd, int_array, invalid, need_cast, need_dims, need_dtype, operator, tensor
from .cost import CUBE, matmul_flops, moves
from .cube import USE_FP16, USE_FP32_ADD, USE_HF32, Cube, cube_of
from .descriptors import TensorDesc
from .entries import entry
from .refusals import SimError
from .state import STATE, warn

F = {"f32", "f16", "bf16"}


def _check(self_p, mat2_p, out_p, cube, lo, hi):
    a, b, y = tensor(self_p, "self"), tensor(mat2_p, "mat2"), tensor(out_p, "out")
    for t, name in ((a, "self"), (b, "mat2"), (y, "out")):
        need_dtype(t, name, F)
        if t.format != lib.ACL_FORMAT_ND and not (t is b and t.format == lib.ACL_FORMAT_FRACTAL_NZ):
            raise invalid(f"{name} format {t.format} is not ND" + (" or FRACTAL_NZ" if t is b else ""))
    need_dims((a, "self"), (b, "mat2"), lo=lo, hi=hi)
    # two 1-D operands give a scalar (aclnnMatmul's 约束说明): a 0-D out
    need_dims((y, "out"), lo=0 if a.ndim == b.ndim == 1 else lo, hi=hi)
    work = dtypes.promote(a.dtype, b.dtype)
    need_cast(work, y.dtype, "deduced type -> out")
    if cube not in range(5):
        raise invalid(f"cubeMathType {cube} should be in 0..4")
    w = dtypes.short(work)
    mixed = {dtypes.short(a.dtype), dtypes.short(b.dtype)}
    if len(mixed) == 2 and "bf16" in mixed:
        warn(f"matmul rule table (A2): {dtypes.name(a.dtype)} self with {dtypes.name(b.dtype)} mat2: both converted to "
             f"{'FLOAT16' if cube == USE_FP16 else 'FLOAT32'} for the cube")
    if cube == USE_FP16 and w == "bf16":
        raise invalid("cubeMathType USE_FP16 is not supported for BFLOAT16 inputs")
    if cube == USE_HF32 and w != "f32":
        raise invalid("cubeMathType USE_HF32 needs FLOAT inputs")
    return a, b, y, cube_of(work, cube)


BLOCK_COLS, BIG = 128, 1 << 20


def product(cube: Cube):
    """compute(x1, x2) = np.matmul of the rounded operands, in f32, through the kernel's
    output stage. A big mat2 that is rounded is rounded a block of columns at a time, so
    that its rounded copies stay in the cache (rounding all of it first costs two more
    passes through memory)."""
    rounding = cube.operand

    def compute(x1, x2):
        x1 = rounding(x1)
        if not cube.rounds or x2.ndim < 2 or x2.size < BIG or x2.shape[-1] <= BLOCK_COLS:
            return np.matmul(x1, rounding(x2))
        cols = range(0, x2.shape[-1], BLOCK_COLS)
        return np.concatenate([np.matmul(x1, rounding(x2[..., j:j + BLOCK_COLS])) for j in cols],
                              axis=-1)
    return cube.result(compute)


def product_plan(a, b, y, cube: Cube) -> Plan:
    """The plan of a checked product; a FRACTAL_NZ mat2 is read from its private layout."""
    compute = product(cube)
    if b.format != lib.ACL_FORMAT_FRACTAL_NZ:
        return Plan(compute, [a, b], [y])
    read = nz_operand(b, "mat2")
    return Plan(lambda x1: compute(x1, read()), [a], [y], reads=[b])


@operator("Mm", unit=CUBE, flops=matmul_flops)
def mm(self, mat2, out, cube_math_type):
    a, b, y, cube = _check(self, mat2, out, cube_math_type, 2, 2)
    if a.dims[1] != b.dims[0]:
        raise invalid(f"the k-axis of self {list(a.dims)} and mat2 {list(b.dims)} differ")
    if y.dims != (a.dims[0], b.dims[1]):
        raise invalid(f"out shape {list(y.dims)} should be {[a.dims[0], b.dims[1]]}")
    return product_plan(a, b, y, cube)


def _matmul_shape(sa: tuple, sb: tuple) -> tuple:
    """torch.matmul's result shape (1-D operands are promoted, then squeezed)."""
    a = (1,) + sa if len(sa) == 1 else sa
    b = sb + (1,) if len(sb) == 1 else sb
    if a[-1] != b[-2]:
        raise invalid(f"the k-axis of self {list(sa)} and mat2 {list(sb)} differ")
    ba, bb = a[:-2], b[:-2]
    n = max(len(ba), len(bb))
    ba, bb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
    batch = []
    for x, z in zip(ba, bb):
        if x != z and 1 not in (x, z):
            raise invalid(f"self {list(sa)} and mat2 {list(sb)} batch dims cannot broadcast")
        batch.append(z if x == 1 else x)
    shape = tuple(batch) + ((a[-2],) if len(sa) > 1 else ()) + ((b[-1],) if len(sb) > 1 else ())
    return shape


@operator("Matmul", unit=CUBE, flops=matmul_flops)
def matmul(self, mat2, out, cube_math_type):
    a, b, y, cube = _check(self, mat2, out, cube_math_type, 1, 6)
    shape = _matmul_shape(a.dims, b.dims)
    if y.dims != shape:
        raise invalid(f"out shape {list(y.dims)} should be {list(shape)}")
    if a.ndim == b.ndim == 1:
        # 约束说明: two 1-D operands ignore cubeMathType; aclnn_matmul.cpp's MatMulDotGraph
        # runs l0op::Dot in the promoted type, no cube: USE_FP32_ADD keeps it on either SoC
        cube = Cube(cube.work, USE_FP32_ADD)
    return product_plan(a, b, y, cube)


# ------------------------------------------------ weights in the NZ layout ----

NZ_TYPES = {"f16", "bf16", "s8"}   # the A2 pages (ops-math's source adds FP8 / HiF8 / UINT8)
FRACTAL_ROWS = 16


def nz_shape(dims, acl: int) -> tuple[int, ...]:
    """FRACTAL_NZ storage of an ND (.., R, C) matrix: (.., C/c0, R/16, 16, c0), c0 the
    elements of 32 bytes (16 for FLOAT16 / BFLOAT16, 32 for INT8), both axes rounded up."""
    c0 = 32 // dtypes.numpy_dtype(acl).itemsize
    *batch, r, c = dims
    return (*batch, -(-c // c0), -(-r // FRACTAL_ROWS), FRACTAL_ROWS, c0)


def to_nz(a: np.ndarray, acl: int) -> np.ndarray:
    shape = nz_shape(a.shape, acl)
    c1, r1, _, c0 = shape[-4:]
    padded = np.zeros(a.shape[:-2] + (r1 * FRACTAL_ROWS, c1 * c0), a.dtype)
    padded[..., :a.shape[-2], :a.shape[-1]] = a
    blocks = padded.reshape(a.shape[:-2] + (r1, FRACTAL_ROWS, c1, c0))
    return np.moveaxis(blocks, -2, -4)


def from_nz(nz: np.ndarray, r: int, c: int) -> np.ndarray:
    c1, r1, rows, c0 = nz.shape[-4:]
    nd = np.moveaxis(nz, -4, -2).reshape(nz.shape[:-4] + (r1 * rows, c1 * c0))
    return nd[..., :r, :c]


def _nz_extent(start: int, nbytes: int, what: str) -> None:
    a = STATE.memory.find(start, nbytes)
    if a is None or not a.live:
        raise invalid(f"{what}: its FRACTAL_NZ layout [{start:#x}, +{nbytes}) is not inside one live "
                      "device allocation (allocate the aclnnCalculateMatmulWeightSizeV2 size)")


def nz_operand(t: TensorDesc, what: str):
    """A reader of a FRACTAL_NZ mat2: the ND matrix it holds, as t's view, at run time.
    The view is the converted (R, C) matrix (contiguous) or its transpose (strides (1, R'))."""
    if dtypes.short(t.dtype) not in NZ_TYPES & F:
        raise invalid(f"{what} dtype {dtypes.name(t.dtype)} in FRACTAL_NZ should be FLOAT16 or BFLOAT16")
    if any(d != 1 for d in t.dims[:-2]):
        raise invalid(f"{what}: a FRACTAL_NZ operand with batch dims {list(t.dims[:-2])} is not simulated")
    r, c = t.dims[-2:]
    sr, sc = t.strides[-2:]
    if sc == 1 and (sr == c or r == 1):
        nd, transposed = (r, c), False
    elif sr == 1 and (sc == r or c == 1):
        nd, transposed = (c, r), True
    else:
        raise invalid(f"{what}: a FRACTAL_NZ view must be the converted matrix or its transpose "
                      f"(dims {list(t.dims)}, strides {list(t.strides)})")
    shape = nz_shape(nd, t.dtype)
    item = t.np_dtype.itemsize
    start, nbytes = t.addr + t.offset * item, math.prod(shape) * item
    _nz_extent(start, nbytes, what)

    def read() -> np.ndarray:
        raw = STATE.memory.bytes(start, nbytes, f"{what} (FRACTAL_NZ)")
        m = from_nz(np.frombuffer(raw, t.np_dtype).reshape(shape), *nd)
        return (m.T if transposed else m).reshape(t.dims)
    return read


@entry
def aclnnCalculateMatmulWeightSizeV2(tensor_shape, data_type, weight_tensor_size):
    what = "aclnnCalculateMatmulWeightSizeV2"
    if tensor_shape == ffi.NULL or weight_tensor_size == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, f"{what}: tensorShape or weightTensorSize is nullptr")
    shape = int_array(tensor_shape, "tensorShape")
    if not 2 <= len(shape) <= 6:
        raise invalid(f"{what}: tensorShape has {len(shape)} dims, should be 2-6")
    if any(d <= 0 for d in shape):
        raise invalid(f"{what}: tensorShape {list(shape)} has an empty (or negative) dim")
    if not dtypes.known(data_type) or dtypes.short(data_type) not in NZ_TYPES:
        raise invalid(f"{what}: dataType {dtypes.name(data_type)} should be in "
                      f"[{dtypes.names(sorted(NZ_TYPES))}]")
    weight_tensor_size[0] = math.prod(nz_shape(shape, data_type))
    return 0


@operator("TransMatmulWeight", flops=moves)
def trans_matmul_weight(mm_weight_ref):
    """mmWeightRef rewritten in place as FRACTAL_NZ; the descriptor is refreshed now, as the
    op_api does in GetWorkspaceSize, the data moves at launch."""
    w = tensor(mm_weight_ref, "mmWeightRef")
    need_dtype(w, "mmWeightRef", NZ_TYPES)
    need_nd((w, "mmWeightRef"))
    need_dims((w, "mmWeightRef"), lo=2, hi=6)
    if 0 in w.dims:   # the page refuses empty tensors (the source returns at once)
        raise invalid(f"mmWeightRef {list(w.dims)} is empty")
    shape = nz_shape(w.dims, w.dtype)
    n = math.prod(shape)
    _nz_extent(w.addr + w.offset * w.np_dtype.itemsize, n * w.np_dtype.itemsize, "mmWeightRef")
    nd = dataclasses.replace(w)   # the ND view the launch reads
    strides = tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))
    out = TensorDesc(shape, strides, w.offset, w.dtype, lib.ACL_FORMAT_FRACTAL_NZ, (w.offset + n,), w.addr)
    w.format, w.storage = lib.ACL_FORMAT_FRACTAL_NZ, shape
    w.__dict__.pop("storage_bytes", None)   # the refreshed storage (a cached attribute)
    return Plan(lambda a: to_nz(np.asarray(a), w.dtype), [nd], [out])
