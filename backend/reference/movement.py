"""Data-movement ops, from ggml's documented semantics.

Arrays are logical values of shape ne[::-1]: ggml dim d is NumPy axis 3 - d. Copies keep
their values exactly (no float round trip); type conversions go through f32 as ggml's CPU
does, and f32 -> i32 truncates toward zero (a C cast).
"""
from __future__ import annotations

import numpy as np

from cannops.cases.inputs import shape_of

from . import f32, reference


def axis(dim: int) -> int:
    """NumPy axis of ggml dim `dim`."""
    return 3 - dim


def _convert_src(node, a):
    """Values of a ready to be written into node: f16/bf16 pass through f32 when converted."""
    src = node.src[0]
    return f32(a) if src.type != node.type and src.type.is_float else a


def _copy_values(node, a, *_):
    """DUP / CONT / CPY: the source's elements in row-major order, in the node's shape."""
    return _convert_src(node, a).reshape(shape_of(node))


def _copy_blocks(node, a, *_):
    """The same, on quantized blocks as stored (rows of bytes), when no conversion happens."""
    size = node.type.type_size
    blocks = np.ascontiguousarray(a).reshape(-1, size)
    return blocks.reshape(node.ne[3], node.ne[2], node.ne[1], node.type.row_size(node.ne[0]))


reference("DUP", "CONT", "CPY", raw=_copy_blocks)(_copy_values)


@reference("REPEAT")
def repeat(node, a):
    return np.tile(a, [n // m for n, m in zip(shape_of(node), a.shape)])


@reference("REPEAT_BACK")
def repeat_back(node, a):
    """Sum of the tiles of a: axis k of a splits into (repeats, size of the result)."""
    out = shape_of(node)
    split = [x for n, m in zip(out, a.shape) for x in (m // n, n)]
    return f32(a).reshape(split).sum(axis=(0, 2, 4, 6), dtype=np.float32)


def _concat_blocks(node, a, b):
    # dim 0 joins rows of whole blocks (both ne0 are multiples of the block size)
    return np.concatenate([a, b], axis=axis(node.param_i32(0)))


@reference("CONCAT", raw=_concat_blocks)
def concat(node, a, b):
    return np.concatenate([a, b], axis=axis(node.param_i32(0)))


@reference("GET_ROWS")
def get_rows(node, a, rows):
    """out[i3, i2, i1, :] = a[i3, i2, rows[i3, i2, i1], :] (rows: i32, shape [1, ne3, ne2, r])."""
    ids = rows[0].astype(np.int64)
    i3 = np.arange(a.shape[0])[:, None, None]
    i2 = np.arange(a.shape[1])[None, :, None]
    out = a[i3, i2, ids]
    return out if node.type.is_int else f32(out)


@reference("PAD")
def pad(node, a):
    """Zeros around a (left lp, right rp per dim), or with `circular` the torus wrap of a."""
    lp = [node.param_i32(2 * d) for d in range(4)]
    if node.param_i32(8):
        idx = [(np.arange(n) - lp[d]) % a.shape[axis(d)] for d, n in enumerate(node.ne)]
        return a[np.ix_(*idx[::-1])]
    rp = [node.param_i32(2 * d + 1) for d in range(4)]
    return np.pad(a, [(lp[d], rp[d]) for d in (3, 2, 1, 0)])


@reference("PAD_REFLECT_1D")
def pad_reflect_1d(node, a):
    """Mirror padding of dim 0 around the edge elements, which are not repeated."""
    p0, p1 = node.param_i32(0), node.param_i32(1)
    return np.pad(a, [(0, 0)] * 3 + [(p0, p1)], mode="reflect")


@reference("ROLL")
def roll(node, a):
    """out[i] = a[(i - shift) mod n] along each dim."""
    shifts = [node.param_i32(d) for d in range(4)]
    return np.roll(a, shifts[::-1], axis=(0, 1, 2, 3))


@reference("ARANGE")
def arange(node):
    start, step = np.float32(node.param_f32(0)), np.float32(node.param_f32(2))
    return start + step * np.arange(node.ne[0], dtype=np.float32)


@reference("FILL")
def fill(node, a):
    return np.full(a.shape, node.param_f32(0), dtype=np.float32)


# enum ggml_tri_type -> what is kept, as np.tril / np.triu offset (col - row)
_TRI = {0: (np.triu, 0), 1: (np.triu, 1), 2: (np.tril, 0), 3: (np.tril, -1)}


@reference("TRI")
def tri(node, a):
    """Keeps the upper / lower triangle (row = dim 1, col = dim 0), with or without the
    diagonal; zeros elsewhere."""
    fn, k = _TRI[node.param_i32(0)]
    return fn(a, k)


@reference("DIAG")
def diag(node, a):
    """[n, 1, ne2, ne3] -> [n, n, ne2, ne3], a on the diagonal, zeros elsewhere."""
    n = a.shape[-1]
    return np.where(np.eye(n, dtype=bool), a, np.zeros((), a.dtype))


@reference("DIAG_MASK_INF")
def diag_mask_inf(node, a):
    """-inf where col > n_past + row (row = dim 1, col = dim 0)."""
    n_past = node.param_i32(0)
    rows, cols = a.shape[-2:]
    mask = np.arange(cols)[None, :] > n_past + np.arange(rows)[:, None]
    return np.where(mask, np.float32(-np.inf), a)
