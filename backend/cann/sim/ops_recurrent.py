"""aclnnInplaceMuls (ops-math mul), aclnnMv (ops-nn matmul: matrix times vector) and
aclnnTriangularSolve (ops-math triangular_solve).

aclnnInplaceMuls: selfRef *= other (a scalar), as aclnnMuls with out = selfRef: the
tensor-scalar promotion table, the result converting back to selfRef's dtype.

aclnnMv: self 2-D (n x m), vec 1-D (m), out 1-D (n), all of one dtype (FLOAT16, FLOAT,
BFLOAT16 on A2/A3), cubeMathType 0..4 (1 and 3 round FLOAT inputs to HFLOAT32 as
aclnnMatmul does, 2 to FLOAT16; 0 keeps FLOAT on A2/A3). Accumulates in f32.

aclnnTriangularSolve: X with A X = self (A^T X = self when transpose), A square on its last
two dims and upper (or lower) triangular, its other triangle never read; unitriangular
takes the diagonal as ones (then FLOAT only). self and A FLOAT / DOUBLE / COMPLEX64 /
COMPLEX128 of one dtype, 2-8 dims, self[-2] == A[-2], batch dims broadcasting; xOut of
the broadcast batch + self's last two dims, mOut (the triangle of A that was used) of the
broadcast batch + A's last two; both of self's dtype. The solve is a substitution row by
row in self's type (f32 / c64; f64 / c128 only for DOUBLE / COMPLEX128), each row's sum
of products in that type, as a kernel of that type computes.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .aclnn import Plan, broadcast, invalid, need_dims, need_dtype, need_same_dtype, operator, tensor
from .cost import CUBE, matmul_flops
from .cube import USE_HF32, cube_of

MV_TYPES = {"f16", "f32", "bf16"}
SOLVE_TYPES = {"f32", "f64", "c64", "c128"}


@operator("Mv", unit=CUBE, flops=matmul_flops)
def mv(self, vec, out, cube_math_type):
    a, x, y = tensor(self, "self"), tensor(vec, "vec"), tensor(out, "out")
    for t, what in ((a, "self"), (x, "vec"), (y, "out")):
        need_dtype(t, what, MV_TYPES)
    need_same_dtype(a, x, "self", "vec")
    need_same_dtype(a, y, "self", "out")
    need_dims((a, "self"), lo=2, hi=2)
    need_dims((x, "vec"), (y, "out"), lo=1, hi=1)
    n, m = a.dims
    if x.dims != (m,) or y.dims != (n,):
        raise invalid(f"self {list(a.dims)}, vec {list(x.dims)}, out {list(y.dims)}: "
                      f"expected vec [{m}] and out [{n}]")
    if cube_math_type not in range(5):
        raise invalid(f"cubeMathType {cube_math_type} should be in 0..4")
    w = dtypes.short(a.dtype)
    if cube_math_type == USE_HF32 and w != "f32":
        raise invalid("cubeMathType USE_HF32 needs FLOAT inputs")

    cube = cube_of(a.dtype, cube_math_type)   # aclnnMatmul's cube model
    return Plan(cube.result(lambda av, xv: cube.operand(av) @ cube.operand(xv)), [a, x], [y])


def _substitute(t: np.ndarray, rhs: np.ndarray, lower: bool) -> np.ndarray:
    """X with T X = rhs, T triangular: forward (lower) or back substitution, in T's type."""
    n = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(t.shape[:-2], rhs.shape[:-2]) + rhs.shape[-2:], t.dtype)
    for i in (range(n) if lower else range(n - 1, -1, -1)):
        done = slice(0, i) if lower else slice(i + 1, n)
        s = rhs[..., i, :] - (t[..., i:i + 1, done] @ x[..., done, :])[..., 0, :]
        x[..., i, :] = s / t[..., i, i, None]
    return x


@operator("TriangularSolve")
def triangular_solve(self, A, upper, transpose, unitriangular, x_out, m_out):
    b, a = tensor(self, "self"), tensor(A, "A")
    x, m = tensor(x_out, "xOut"), tensor(m_out, "mOut")
    for t, what in ((b, "self"), (a, "A"), (x, "xOut"), (m, "mOut")):
        need_dtype(t, what, SOLVE_TYPES)
    need_same_dtype(b, a, "self", "A")
    need_same_dtype(b, x, "self", "xOut")
    need_same_dtype(b, m, "self", "mOut")
    if unitriangular and dtypes.short(b.dtype) != "f32":
        raise invalid("unitriangular needs FLOAT tensors")
    need_dims((b, "self"), (a, "A"), lo=2, hi=8)
    if a.dims[-1] != a.dims[-2]:
        raise invalid(f"A {list(a.dims)} is not square on its last two dims")
    if b.dims[-2] != a.dims[-2]:
        raise invalid(f"self[-2] = {b.dims[-2]} should equal A[-2] = {a.dims[-2]}")
    batch = broadcast(b.dims[:-2], a.dims[:-2], "self batch", "A batch")
    if x.dims != batch + b.dims[-2:]:
        raise invalid(f"xOut shape {list(x.dims)} should be {list(batch + b.dims[-2:])}")
    if m.dims != batch + a.dims[-2:]:
        raise invalid(f"mOut shape {list(m.dims)} should be {list(batch + a.dims[-2:])}")
    work = dtypes.compute_dtype(b.dtype)

    def compute(bv, av):
        tri = np.triu(av) if upper else np.tril(av)
        used = np.broadcast_to(tri, batch + a.dims[-2:])
        sys = used.astype(work)
        if unitriangular:
            k = sys.shape[-1]
            sys = sys.copy()
            sys[..., np.arange(k), np.arange(k)] = 1
        if transpose:
            sys = np.swapaxes(sys, -1, -2)
        rhs = np.broadcast_to(np.asarray(bv, work), batch + b.dims[-2:])
        return _substitute(sys, rhs, lower=upper == bool(transpose)), used

    return Plan(compute, [b, a], [x, m])
