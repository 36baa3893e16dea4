"""Reductions, scans and sorts along rows (ne0, NumPy's last axis): SUM, SUM_ROWS, MEAN,
ARGMAX, COUNT_EQUAL, CUMSUM, ARGSORT. Sums are accumulated in f64, then rounded."""
from __future__ import annotations

import numpy as np

from . import f32, reference

SORT_DESC = 1  # enum ggml_sort_order


@reference("SUM")
def sum_all(node, a):
    return np.sum(f32(a), dtype=np.float64).reshape(1)


@reference("SUM_ROWS")
def sum_rows(node, a):
    return np.sum(f32(a), axis=-1, keepdims=True, dtype=np.float64)


@reference("MEAN")
def mean(node, a):
    return np.mean(f32(a), axis=-1, keepdims=True, dtype=np.float64)


@reference("ARGMAX")
def argmax(node, a):
    """Index of each row's maximum; a is a matrix. Ties are left open by ggml (its CPU
    takes the last maximum, NumPy the first): the cases' rows hold distinct values."""
    return np.argmax(f32(a), axis=-1).reshape(1, 1, 1, -1)


@reference("COUNT_EQUAL")
def count_equal(node, a, b):
    return np.array([np.count_nonzero(a == b)], dtype=np.int64)


@reference("CUMSUM")
def cumsum(node, a):
    return np.cumsum(f32(a), axis=-1, dtype=np.float64)


@reference("ARGSORT")
def argsort(node, a):
    """Per row, the indices that sort it ascending (order 0) or descending (order 1);
    equal values keep their index order."""
    a = f32(a)
    keys = -a if node.param_i32(0) == SORT_DESC else a
    return np.argsort(keys, axis=-1, kind="stable")
