"""Leaf data: uniform [-1, 1] by default (as test-backend-ops' init_tensor_uniform),
converted to the leaf's type; quantized leaves go through cases/quants.py's codecs."""
from __future__ import annotations

import numpy as np

from . import quants
from .graph import Tensor
from .tables import QUANTIZER_TABLES, quantizer_table, quantizer_tables  # noqa: F401  (their home before)


def shape_of(t: Tensor) -> tuple[int, ...]:
    """NumPy shape of a tensor's logical data: ne reversed."""
    return tuple(reversed(t.ne))


# elements drawn at a time: a leaf's draws in float64 at once were twice its float32 size
# (MUL_MAT_ID's 128 q4_K experts of 4096 x 2048: 8 GiB of draws, a 12 GiB worker)
DRAW_CHUNK = 1 << 22


def uniform_f32(rng: np.random.Generator, lo: float, hi: float, shape: tuple[int, ...]) -> np.ndarray:
    """rng.uniform(lo, hi, shape).astype(float32), the same values, drawn DRAW_CHUNK at a time
    (successive draws continue one stream). NumPy's uniform is lo + (hi - lo) * random(),
    in float64, one draw an element: computed here the same way into one reused buffer
    (a third less CPU than uniform's own loop and its fresh array per chunk)."""
    out = np.empty(shape, np.float32)
    flat = out.reshape(-1)
    lo, scale = float(lo), float(hi) - float(lo)
    buf = np.empty(min(DRAW_CHUNK, flat.size))
    for i in range(0, flat.size, DRAW_CHUNK):
        u = rng.random(out=buf[:min(DRAW_CHUNK, flat.size - i)])
        u *= scale
        u += lo
        flat[i:i + u.size] = u
    return out


def uniform(t: Tensor, rng: np.random.Generator, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return uniform_f32(rng, lo, hi, shape_of(t))


def _uniform_quantized(t: Tensor, rng: np.random.Generator, distinct_rows: int | None = None) -> np.ndarray:
    """A quantized leaf's default data, drawn and quantized a few rows at a time (ggml
    quantizes each row on its own): the bytes of quantize(uniform(t)) without its float32
    values whole (4 GiB for those experts). With `distinct_rows`, only the first that many
    rows are drawn and quantized, and repeated over the others (perf: see init_leaf)."""
    shape = shape_of(t)
    n_per_row = shape[-1]
    rows = int(np.prod(shape[:-1]))
    out = np.empty((rows, t.type.row_size(n_per_row)), np.uint8)
    drawn = rows if distinct_rows is None else max(1, min(rows, distinct_rows))
    step = max(1, DRAW_CHUNK // n_per_row)
    for r in range(0, drawn, step):
        k = min(step, drawn - r)
        out[r:r + k] = quantize(uniform_f32(rng, -1.0, 1.0, (k, n_per_row)), t.type)
    for r in range(drawn, rows, drawn):
        out[r:r + drawn] = out[:min(drawn, rows - r)]
    return out.reshape(shape[:-1] + out.shape[-1:])


def uniform_init(lo: float, hi: float):
    """A family's `init`: every leaf uniform in [lo, hi]."""
    return lambda t, rng, p: uniform(t, rng, lo, hi)


def uniform_by_name(ranges: dict[str, tuple[float, float]]):
    """A family's `init`: the leaves named in `ranges` uniform in their (lo, hi), the
    others as by default."""
    return lambda t, rng, p: uniform(t, rng, *ranges[t.name]) if t.name in ranges else None


def shuffled_rows(rng: np.random.Generator, values: np.ndarray, n_rows: int) -> np.ndarray:
    """n_rows rows, each its own shuffle of `values` (shape n_rows, len(values)): the row
    ids and tie-free rows that test-backend-ops draws with std::shuffle."""
    return rng.permuted(np.broadcast_to(values, (n_rows, len(values))), axis=1)


def kq_mask(t: Tensor, rng: np.random.Generator, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    """test-backend-ops' init_tensor_kq_mask: uniform [lo, hi], then about 20% of the area
    covered by blocks of 64 rows x 128 columns (clipped at the edges, at random places) of
    -inf or of 0, so that whole masked-out stretches, and sometimes whole rows, occur."""
    data = uniform(t, rng, lo, hi)
    ne0, ne1, ne2, ne3 = t.ne
    for _ in range(int(0.2 * t.nelements() / (128 * 64))):
        p3, p2, p1, p0 = (int(rng.integers(n)) for n in (ne3, ne2, ne1, ne0))
        data[p3, p2, p1:p1 + 64, p0:p0 + 128] = -np.inf if rng.integers(2) else 0.0
    return data


def init_leaf(t: Tensor, rng: np.random.Generator, data=None, distinct_rows: int | None = None) -> np.ndarray:
    """The leaf's data as stored: elements of its dtype, or raw blocks (uint8) when quantized.
    `distinct_rows` (perf, where values do not change the time): a quantized leaf of the
    default uniform data has only that many rows drawn and quantized, repeated over the rest
    (quantizing MUL_MAT's 4096 x 14336 q4_K took 4.3 s of a 5 s perf case)."""
    if data is None:
        if t.type.is_int:
            data = rng.integers(-100, 100, size=shape_of(t))
        elif t.type.is_quantized:
            return _uniform_quantized(t, rng, distinct_rows)
        else:
            data = uniform(t, rng)
    data = np.asarray(data)
    if t.type.is_quantized:
        if data.dtype == np.uint8 and data.shape[-1] == t.type.row_size(t.ne[0]):
            return np.ascontiguousarray(data)
        return quantize(np.ascontiguousarray(data, dtype=np.float32).reshape(shape_of(t)), t.type)
    # no copy where the family's data already has the leaf's dtype (a second leaf-sized array)
    return np.ascontiguousarray(data.reshape(shape_of(t)).astype(t.type.dtype, copy=False))


def quantize(data: np.ndarray, type) -> np.ndarray:
    """Rows of blocks, shape (..., row bytes): libggml's own ggml_quantize_chunk (what
    test-backend-ops uses for its inputs, with a unit importance matrix where the type
    requires one), or without the ggml bridge cases/quants.py's quantizer, byte for byte
    the same (tests/test_quants.py) but up to 100 times slower (a quarter of a test run)."""
    try:
        from cannops.native._ggml import ffi, lib  # built by `make native`
    except ImportError:
        if type.name in quants.SEARCHED:
            raise
        return quants.quantize(data, type)
    n_per_row = data.shape[-1]
    nrows = data.size // n_per_row
    out = np.empty(data.shape[:-1] + (type.row_size(n_per_row),), dtype=np.uint8)
    imatrix = np.ones(n_per_row, np.float32) if lib.ggml_quantize_requires_imatrix(type.value) else None
    lib.ggml_quantize_chunk(type.value, ffi.from_buffer("float[]", data), ffi.from_buffer("char[]", out),
                            0, nrows, n_per_row,
                            ffi.NULL if imatrix is None else ffi.from_buffer("float[]", imatrix))
    return out


def build_quantizer_table(table: str) -> None:
    """Have libggml build a quantizer table now (ggml_quantize_init; nothing without the
    bridge, whose NumPy quantizers need none)."""
    try:
        from cannops.native._ggml import lib
    except ImportError:
        return
    from .types import ggml_type
    name = next(n for n, t in QUANTIZER_TABLES.items() if t == table)
    lib.ggml_quantize_init(ggml_type(name).value)


# --- a tensor's data inside a byte buffer (any device's download, the reference's memory) ---

def stored_view(t: Tensor, buf: np.ndarray, offset: int = 0) -> np.ndarray:
    """The tensor as stored in `buf` from `offset`, through its nb strides: elements of its
    dtype (shape ne[::-1]), or rows of raw blocks (uint8, shape (ne3, ne2, ne1, row bytes))."""
    if t.type.is_quantized:
        shape = (t.ne[3], t.ne[2], t.ne[1], t.type.row_size(t.ne[0]))
        return np.ndarray(shape, np.uint8, buf, offset, (t.nb[3], t.nb[2], t.nb[1], 1))
    return np.ndarray(shape_of(t), t.type.dtype, buf, offset, tuple(reversed(t.nb)))


def values(t: Tensor, buf: np.ndarray, offset: int = 0) -> np.ndarray:
    """Logical values (shape ne[::-1]); quantized tensors decoded to f32 (cases/quants.py)."""
    arr = stored_view(t, buf, offset)
    if t.type.is_quantized:
        return quants.dequantize(arr, t.type)
    return arr
