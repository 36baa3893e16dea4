"""aclnnSoftmaxCrossEntropyWithLogits (ops-nn): per row of features (logits) and labels
(probabilities), loss = -sum_j labels_j log softmax(features)_j and backprop =
softmax(features) - labels; aclnnGer (ops-math math/ger/docs/aclnnGer.md): the outer
product out[i, j] = self[i] * vec2[j] of two 1-D tensors (OUT_PROD in ggml-cann 0.9.x).

Docs' rules checked (A2/A3): features and labels 2-D, of one shape and one dtype (FLOAT,
FLOAT16, BFLOAT16); loss 1-D of the rows, backprop of features' shape, both of features'
dtype; ND. Half types compute in f32.
"""
from __future__ import annotations

import numpy as np

from .aclnn import (Plan, as_compute, in_type, invalid, need_cast, need_dims, need_dtype, need_same_dtype,
                    need_same_shape, operator, promote, tensor)
from .cost import per_element

TYPES = {"f32", "f16", "bf16"}


@operator("SoftmaxCrossEntropyWithLogits", flops=per_element(8))
def softmax_cross_entropy_with_logits(features, labels, loss, backprop):
    x, p = tensor(features, "features"), tensor(labels, "labels")
    l, g = tensor(loss, "loss"), tensor(backprop, "backprop")
    for t, what in ((x, "features"), (p, "labels"), (l, "loss"), (g, "backprop")):
        need_dtype(t, what, TYPES)
    for t, what in ((p, "labels"), (l, "loss"), (g, "backprop")):
        need_same_dtype(x, t, "features", what)
    need_dims((x, "features"), (p, "labels"), (g, "backprop"), lo=2, hi=2)
    need_dims((l, "loss"), lo=1, hi=1)
    need_same_shape(x, p, "features", "labels")
    need_same_shape(x, g, "features", "backprop")
    if l.dims != x.dims[:1]:
        raise invalid(f"loss shape {list(l.dims)} should be [{x.dims[0]}]")
    work = x.dtype

    def compute(xv, pv):
        z = as_compute(xv, work)
        z = z - z.max(axis=1, keepdims=True)
        log_sm = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        pv = as_compute(pv, work)
        return -(pv * log_sm).sum(axis=1), np.exp(log_sm) - pv

    return Plan(compute, [x, p], [l, g])


# Ger's page: FLOAT, FLOAT16, DOUBLE, INT32, INT64, INT16, INT8, UINT8, BOOL, COMPLEX64,
# COMPLEX128 for self, vec2 and out (no BFLOAT16)
GER_TYPES = {"f32", "f16", "f64", "s32", "s64", "s16", "s8", "u8", "bool", "c64", "c128"}


@operator("Ger")
def ger(self, vec2, out):
    """self and vec2 1-D, promoted to one type that converts to out's; out 2-D of
    [len(self), len(vec2)]; non-contiguous inputs are taken (the page's √). Computed as
    the binary operators are: in the deduced type (f32 for FLOAT16), rounded to it."""
    x, v, y = tensor(self, "self"), tensor(vec2, "vec2"), tensor(out, "out")
    for t, what in ((x, "self"), (v, "vec2"), (y, "out")):
        need_dtype(t, what, GER_TYPES)
    need_dims((x, "self"), (v, "vec2"), lo=1, hi=1)
    need_dims((y, "out"), lo=2, hi=2)
    work = promote(x.dtype, v.dtype, "self", "vec2")
    need_cast(work, y.dtype, "deduced type -> out")
    if tuple(y.dims) != (x.dims[0], v.dims[0]):
        raise invalid(f"out shape {list(y.dims)} should be [{x.dims[0]}, {v.dims[0]}] (self, vec2)")
    return Plan(in_type(work, lambda a, b: np.multiply.outer(as_compute(a, work), as_compute(b, work))),
                [x, v], [y])
