"""aclDataType in the simulator: NumPy dtypes, and the two rules of the aclnn docs that
most operators refer to: type promotion ("互推导关系": tensor-tensor and tensor-scalar
tables) and type conversion ("互转换关系").

The tensor-tensor table and the conversion rule are those of opbase's public
`opdev/data_type_utils.h` (PromoteType's lookup table and CanCast), which the aclnn
operators call in their parameter checks; the tensor-scalar table is the docs' one."""
from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np

from .binding import lib

# aclDataType -> (short name used by the docs' tables, NumPy dtype)
_TYPES = {
    lib.ACL_FLOAT: ("f32", np.float32), lib.ACL_FLOAT16: ("f16", np.float16),
    lib.ACL_DOUBLE: ("f64", np.float64), lib.ACL_BF16: ("bf16", ml_dtypes.bfloat16),
    lib.ACL_INT8: ("s8", np.int8), lib.ACL_UINT8: ("u8", np.uint8),
    lib.ACL_INT16: ("s16", np.int16), lib.ACL_UINT16: ("u16", np.uint16),
    lib.ACL_INT32: ("s32", np.int32), lib.ACL_UINT32: ("u32", np.uint32),
    lib.ACL_INT64: ("s64", np.int64), lib.ACL_UINT64: ("u64", np.uint64),
    lib.ACL_BOOL: ("bool", np.bool_), lib.ACL_COMPLEX64: ("c64", np.complex64),
    lib.ACL_COMPLEX128: ("c128", np.complex128),
    # 4-bit ints, two per byte (the even element in the low nibble); NumPy sees each one
    # unpacked into an int8 (TensorDesc reads them)
    lib.ACL_INT4: ("s4", np.int8),
}
PACKED = {lib.ACL_INT4: 2}   # elements per byte of the packed types
BY_NAME = {short: acl for acl, (short, _) in _TYPES.items()}
_NUMPY = {acl: np.dtype(t) for acl, (_, t) in _TYPES.items()}   # made once: np.dtype() is slow
ACL_NAMES = {lib.ACL_FLOAT: "FLOAT", lib.ACL_FLOAT16: "FLOAT16", lib.ACL_DOUBLE: "DOUBLE",
             lib.ACL_BF16: "BFLOAT16", lib.ACL_INT8: "INT8", lib.ACL_UINT8: "UINT8",
             lib.ACL_INT16: "INT16", lib.ACL_UINT16: "UINT16", lib.ACL_INT32: "INT32",
             lib.ACL_UINT32: "UINT32", lib.ACL_INT64: "INT64", lib.ACL_UINT64: "UINT64",
             lib.ACL_BOOL: "BOOL", lib.ACL_COMPLEX64: "COMPLEX64",
             lib.ACL_COMPLEX128: "COMPLEX128", lib.ACL_INT4: "INT4",
             lib.ACL_COMPLEX32: "COMPLEX32", lib.ACL_DT_UNDEFINED: "UNDEFINED"}

FLOATS = {"f16", "f32", "f64", "bf16"}
HALF = {"f16", "bf16"}   # stored in 16 bits, computed in f32 by the vector units
INTS = {"s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64"}
COMPLEX = {"c32", "c64", "c128"}


def known(acl: int) -> bool:
    return int(acl) in _TYPES


def short(acl: int) -> str:
    return _TYPES[int(acl)][0]


def numpy_dtype(acl: int) -> np.dtype:
    return _NUMPY[int(acl)]


def name(acl: int) -> str:
    return ACL_NAMES.get(int(acl), f"aclDataType({int(acl)})")


def names(shorts) -> str:
    return "、".join(name(BY_NAME[s]) for s in shorts if s in BY_NAME)


def _table(text: str) -> dict[tuple[str, str], str | None]:
    rows = [line.split() for line in text.strip().splitlines()]
    cols = rows[0]
    return {(r[0], c): (None if v == "x" else v) for r in rows[1:] for c, v in zip(cols, r[1:])}


# Tensor-tensor promotion, PromoteType(row, column): the first operand is the row. The
# table is not symmetric where opbase's is not (an unsigned type with a complex one).
_TT = _table("""
      f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  bool c32  c64  c128
f32   f32  f32  f64  f32  f32  f32  f32  x    f32  x    f32  x    f32  c64  c64  c128
f16   f32  f16  f64  f32  f16  f16  f16  x    f16  x    f16  x    f16  c32  c64  c128
f64   f64  f64  f64  f64  f64  f64  f64  x    f64  x    f64  x    f64  c128 c128 c128
bf16  f32  f32  f64  bf16 bf16 bf16 bf16 x    bf16 x    bf16 x    bf16 c64  c64  c128
s8    f32  f16  f64  bf16 s8   s16  s16  x    s32  x    s64  x    s8   c32  c64  c128
u8    f32  f16  f64  bf16 s16  u8   s16  x    s32  x    s64  x    u8   c32  c64  c128
s16   f32  f16  f64  bf16 s16  s16  s16  x    s32  x    s64  x    s16  c32  c64  c128
u16   x    x    x    x    x    x    x    u16  x    x    x    x    x    x    c64  c128
s32   f32  f16  f64  bf16 s32  s32  s32  x    s32  x    s64  x    s32  c32  c64  c128
u32   x    x    x    x    x    x    x    x    x    u32  x    x    x    x    c64  c128
s64   f32  f16  f64  bf16 s64  s64  s64  x    s64  x    s64  x    s64  c32  c64  c128
u64   x    x    x    x    x    x    x    x    x    x    x    u64  x    x    c128 c128
bool  f32  f16  f64  bf16 s8   u8   s16  x    s32  x    s64  x    bool c32  c64  c128
c32   c64  c32  c128 c64  c32  c32  c32  x    c32  x    c32  x    c32  c32  c64  c128
c64   c64  c64  c128 c64  c64  c64  c64  x    c64  x    c64  x    c64  c64  c64  c128
c128  c128 c128 c128 c128 c128 c128 c128 x    c128 x    c128 x    c128 c128 c128 c128
""")

# Tensor-scalar promotion (row: the scalar's type, column: the tensor's type).
_TS = _table("""
      f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  bool c32  c64  c128
f32   f32  f16  f64  bf16 f32  f32  f32  x    f32  x    f32  x    f32  c32  c64  c128
f16   f32  f16  f64  bf16 f32  f32  f32  x    f32  x    f32  x    f32  c32  c64  c128
f64   f32  f16  f64  bf16 f32  f32  f32  x    f32  x    f32  x    f32  c128 c128 c128
bf16  f32  f16  f64  bf16 f32  f32  f32  x    f32  x    f32  x    f32  c32  c64  c128
s8    f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  s8   c32  c64  c128
u8    f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  u8   c32  c64  c128
s16   f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  s16  c32  c64  c128
u16   f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  x    c32  c64  c128
s32   f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  s32  c32  c64  c128
u32   f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  x    c32  c64  c128
s64   f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  s64  c32  c64  c128
u64   f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  x    c32  c64  c128
bool  f32  f16  f64  bf16 s8   u8   s16  u16  s32  u32  s64  u64  bool c32  c64  c128
c32   c64  c32  c128 c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c32  c64  c128
c64   c64  c32  c128 c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c32  c64  c128
c128  c64  c32  c128 c64  c64  c64  c64  c64  c64  c64  c64  c64  c64  c32  c64  c128
""")


def promote(a: int, b: int) -> int | None:
    """The computation type of two tensors, None where the docs mark ×."""
    r = _TT.get((short(a), short(b)))
    return BY_NAME.get(r) if r else None


def promote_scalar(tensor: int, scalar: int) -> int | None:
    r = _TS.get((short(scalar), short(tensor)))
    return BY_NAME.get(r) if r else None


def can_cast(src: int, dst: int) -> bool:
    """CanCast: a value converts to any type but these: complex to a non-complex type,
    a floating type to an integral one (bool aside), anything but bool to bool."""
    s, d = short(src), short(dst)
    if s in COMPLEX and d not in COMPLEX:
        return False
    if s in FLOATS and d in INTS:
        return False
    return s == "bool" or d != "bool"


# The blame's float64 evaluation of a call (backend/cann/sim/blame.py): while EXACT is
# set, floating arithmetic happens in float64 and nothing is rounded to the deduced type
# (as_compute, rounded, as_f32, sum_halving, the cube's operands): the operator's meaning,
# not the device's precision. Off in every device run.
EXACT = False


@contextlib.contextmanager
def exact():
    global EXACT
    EXACT = True
    try:
        yield
    finally:
        EXACT = False


def compute_dtype(acl: int) -> np.dtype:
    """Where arithmetic happens: half types in f32 (as the vector units do), others as is."""
    s = short(acl)
    if EXACT and s in FLOATS:
        return np.dtype(np.float64)
    if s in ("f16", "bf16"):
        return np.dtype(np.float32)
    return numpy_dtype(acl)


def convert(values: np.ndarray, acl: int) -> np.ndarray:
    """Values to the given type as Cast does: rounding to nearest for floats, NaN -> 0
    and truncation toward zero for float -> int."""
    target = numpy_dtype(acl)
    values = np.asarray(values)
    with np.errstate(all="ignore"):
        if short(acl) in INTS and values.dtype.kind in "fc":
            values = np.nan_to_num(np.trunc(values.real), nan=0.0)
        return values.astype(target)
