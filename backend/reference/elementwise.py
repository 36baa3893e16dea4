"""Element-wise ops outside GGML_OP_UNARY: SQR, SQRT, LOG, SIN, COS, CLAMP, LEAKY_RELU, SCALE
(computed in f32, as ggml's CPU does for f16 too; the write rounds to the node's type)."""
from __future__ import annotations

import numpy as np

from . import f32, reference

SIMPLE = {"SQR": np.square, "SQRT": np.sqrt, "LOG": np.log, "SIN": np.sin, "COS": np.cos}

for _name, _fn in SIMPLE.items():
    reference(_name)(lambda node, a, _fn=_fn: _fn(f32(a)))


@reference("CLAMP")
def clamp(node, a):
    lo, hi = np.float32(node.param_f32(0)), np.float32(node.param_f32(1))
    return np.maximum(np.minimum(f32(a), hi), lo)


@reference("LEAKY_RELU")
def leaky_relu(node, a):
    x = f32(a)
    return np.where(x > 0, x, np.float32(node.param_f32(0)) * x)


@reference("SCALE")
def scale(node, a):
    s, b = np.float32(node.param_f32(0)), np.float32(node.param_f32(1))
    return f32(a) * s + b
