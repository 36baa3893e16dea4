"""Binary element-wise ops (ADD, SUB, MUL, DIV, ADD_ID) and region writes (ACC, SET).

ADD/SUB/MUL/DIV repeat b onto a: along each dimension a's size is a multiple of b's and
a[.., i, ..] pairs with b[.., i % nb, ..] (ggml_can_repeat), which is more than NumPy's
size-1 broadcasting. Floats are computed in f32 and rounded to the output type.
"""
from __future__ import annotations

import numpy as np

from . import f32, reference

OPS = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide}


def repeat_apply(fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """fn(a, b repeated to a's shape): each axis of size r*n is split into (r, n) so that
    b, of size n there, broadcasts over r without being copied."""
    assert a.ndim == b.ndim and all(s % n == 0 for s, n in zip(a.shape, b.shape)), (a.shape, b.shape)
    split_a = [x for s, n in zip(a.shape, b.shape) for x in (s // n, n)]
    split_b = [x for n in b.shape for x in (1, n)]
    return fn(a.reshape(split_a), b.reshape(split_b)).reshape(a.shape)


for _op, _fn in OPS.items():
    reference(_op)(lambda node, a, b, _fn=_fn: repeat_apply(_fn, f32(a), f32(b)))


@reference("ADD_ID")
def add_id(node, a, b, ids):
    """a: [n_token, n_used, n_embd], b: [n_experts, n_embd], ids: [n_token, n_used];
    each row of a gets the row of b its id names."""
    a = f32(a)
    rows = f32(b)[0, 0][ids[0, 0]]      # [n_token, n_used, n_embd]
    return a + rows[None]


def region(out: np.ndarray, shape, nb1: int, nb2: int, nb3: int, offset: int) -> np.ndarray:
    """A writable strided window onto a C-contiguous array, with ggml's byte strides
    (nb0 = element size) and byte offset: the view ACC and SET write through."""
    item = out.itemsize
    strides = (nb3, nb2, nb1, item)
    last = offset + sum((n - 1) * s for n, s in zip(shape, strides)) + item
    assert offset % item == 0 and last <= out.nbytes, "region outside the destination"
    flat = out.reshape(-1)[offset // item:]
    return np.lib.stride_tricks.as_strided(flat, shape=shape, strides=strides)


def _region_params(node):
    return node.params_i32(4)  # nb1, nb2, nb3, offset


@reference("ACC")
def acc(node, a, b):
    """A copy of a, with b added onto the region (nb1, nb2, nb3, offset) of it."""
    out = np.array(f32(a), order="C")
    win = region(out, b.shape, *_region_params(node))
    win += f32(b)
    return out


@reference("SET")
def set_region(node, a, b):
    """A copy of a, with the region (nb1, nb2, nb3, offset) of it replaced by b."""
    out = np.array(a, order="C")
    region(out, b.shape, *_region_params(node))[...] = b.astype(out.dtype)
    return out
