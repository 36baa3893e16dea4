"""Gated linear units (GGML_OP_GLU): out = act(x) * g per row.

Without a second source, each row of a holds [x | g] (nc = ne0 of the output elements each;
an odd last element is unused) and `swapped` (op_params[1]) exchanges the halves; with a
second source b, x = a and g = b."""
from __future__ import annotations

import numpy as np

from . import f32, reference
from .unary import gelu, gelu_erf, gelu_quick, silu


def swiglu_oai(x, g, alpha, limit):
    """gpt-oss SwiGLU: x capped above at limit, g clipped to [-limit, limit], g + 1."""
    x = np.minimum(x, limit)
    g = np.clip(g, -limit, limit)
    return x / (1.0 + np.exp(-alpha * x)) * (g + 1.0)


GATES = {
    "REGLU": lambda x, g: np.where(x > 0, x * g, 0.0),
    "GEGLU": lambda x, g: gelu(x) * g,
    "SWIGLU": lambda x, g: silu(x) * g,
    "GEGLU_ERF": lambda x, g: gelu_erf(x) * g,
    "GEGLU_QUICK": lambda x, g: gelu_quick(x) * g,
}


def halves(node, a, b):
    """(x, g) of a GLU node."""
    if b is not None:
        return f32(a), f32(b)
    nc = node.ne[0]
    lo, hi = f32(a[..., :nc]), f32(a[..., nc:2 * nc])
    return (hi, lo) if node.param_i32(1) else (lo, hi)


for _name, _fn in GATES.items():
    reference(f"GLU:{_name}")(lambda node, a, b=None, _fn=_fn: _fn(*halves(node, a, b)))


def swiglu_clamp(x, g, limit):
    """SwiGLU with the gate capped above at limit and the value clipped to [-limit, limit]."""
    x = np.minimum(x, limit)
    return x / (1.0 + np.exp(-x)) * np.clip(g, -limit, limit)


@reference("GLU:SWIGLU_CLAMP")
def _swiglu_clamp(node, a, b=None):
    return swiglu_clamp(*halves(node, a, b), np.float32(node.param_f32(3)))


@reference("GLU:SWIGLU_OAI")
def _swiglu_oai(node, a, b=None):
    alpha, limit = np.float32(node.param_f32(2)), np.float32(node.param_f32(3))
    return swiglu_oai(*halves(node, a, b), alpha, limit)
