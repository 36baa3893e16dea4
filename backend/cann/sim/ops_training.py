"""aclnnSoftmaxCrossEntropyWithLogits (ops-nn): per row of features (logits) and labels
(probabilities), loss = -sum_j labels_j log softmax(features)_j and backprop =
softmax(features) - labels.

Docs' rules checked (A2/A3): features and labels 2-D, of one shape and one dtype (FLOAT,
FLOAT16, BFLOAT16); loss 1-D of the rows, backprop of features' shape, both of features'
dtype; ND. Half types compute in f32.
"""
from __future__ import annotations

import numpy as np

from .aclnn import Plan, as_compute, invalid, need_dims, need_dtype, need_same_dtype, need_same_shape, operator, tensor

TYPES = {"f32", "f16", "bf16"}


@operator("SoftmaxCrossEntropyWithLogits")
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
