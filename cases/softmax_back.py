"""test_soft_max_back (SOFT_MAX_BACK): the gradient of a scaled softmax, given the softmax's
output y and the incoming gradient dy."""
from __future__ import annotations

from .catalog import Family, register
from .graph import Tensor, new_op


def soft_max_ext_back(dy: Tensor, y: Tensor, scale: float = 1.0, max_bias: float = 0.0) -> Tensor:
    """ggml_soft_max_ext_back: dx = scale * y * (dy - dot(y, dy)) per row; op_params =
    [scale, max_bias], src = [dy, y]; the result has dy's type and shape."""
    return new_op(dy.graph, "SOFT_MAX_BACK", dy.type, dy.ne, [dy, y], f32=[scale, max_bias])


def build_soft_max_back(g, type, ne, scale, max_bias):
    out = soft_max_ext_back(g.new_tensor(type, ne, "a"), g.new_tensor(type, ne, "b"), scale, max_bias)
    out.name = "out"
    return out


def soft_max_back_grid():
    cases = []
    for max_bias in (0.0, 8.0):
        for scale in (1.0, 0.1):
            for ne0 in (16, 1024):
                for ne1 in (16, 1024):
                    # square rows, rows one shorter than a SIMD multiple, and batched planes
                    for ne in ([ne0, ne1, 1, 1], [ne0 - 1, ne1 - 1, 1, 1], [ne0, ne1, 2, 3]):
                        cases.append(dict(type="f32", ne=ne, scale=scale, max_bias=max_bias))
    return cases


register(Family(
    name="soft_max_back",
    build=build_soft_max_back,
    vars=("type", "ne", "scale", "max_bias"),
    op="SOFT_MAX_BACK",
    eval_grid=soft_max_back_grid,
))
