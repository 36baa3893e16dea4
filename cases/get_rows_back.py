"""GET_ROWS_BACK (test_get_rows_back): the gradient of GET_ROWS, i.e. the rows of `grad`
summed into the rows of a zero f32 matrix shaped like the forward input."""
from __future__ import annotations

from .catalog import Family, Since, register
from .graph import Tensor, new_op, strided_view
from .inputs import shape_of
from .matmul import ALL_TYPES, NEW_TYPES
from .types import F32, I32


def get_rows_back(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """ggml_get_rows_back: rows a (matrix [n, r]) added into rows b (i32 vector of r ids) of
    an f32 [n, m] result; c (the forward input [n, m]) only gives that shape: it is no src."""
    assert a.ne[2] == a.ne[3] == 1 and b.ne[1] == b.ne[2] == b.ne[3] == 1 and b.type == I32
    assert c.ne[2] == c.ne[3] == 1 and a.ne[0] == c.ne[0]
    return new_op(a.graph, "GET_ROWS_BACK", F32, [c.ne[0], c.ne[1], 1, 1], [a, b])


def build_get_rows_back(g, type, n, m, r, b, v):
    in_forward = g.new_tensor(type, [n, m, b], "in_forward")
    rows = g.new_tensor(I32, [r, b], "rows")
    if v:  # the first half of the row ids, through a view
        rows = strided_view(rows, [r // 2, b], "view_of_rows")
    grad = g.new_tensor(type, [n, r, b], "grad")
    return get_rows_back(grad, rows, in_forward)


def init_get_rows_back(t, rng, p):
    if t.name == "rows":
        return rng.integers(0, p["m"], size=shape_of(t))
    return None


def _grid():
    def case(type, n, m, r, b=1, v=0):
        return dict(type=type, n=n, m=m, r=r, b=b, v=v)
    yield case("f32", 1, 8, 2)
    yield case("f32", 1, 70000, 4)   # more rows than CUDA's grid-y limit
    for type in ALL_TYPES:
        for v in (0, 1):
            yield case(type, 256, 5, 4, v=v)
    for v in (0, 1):
        yield case("i32", 256, 5, 4, v=v)


register(Family(
    name="get_rows_back", build=build_get_rows_back, vars=("type", "n", "m", "r", "b", "v"),
    op="GET_ROWS_BACK", init=init_get_rows_back, eval_grid=_grid,
    changes=(Since("0.25.3", add=lambda: [dict(type=t, n=256, m=5, r=4, b=1, v=v)   # tq1_0 joins all_types
                                          for t in NEW_TYPES for v in (0, 1)]),),
))
