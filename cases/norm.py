"""Row and group normalisations: test_norm (NORM), test_rms_norm (RMS_NORM), test_l2_norm
(L2_NORM), test_group_norm (GROUP_NORM), and the fused test-mode chains RMS_NORM_MUL_ADD,
NORM_MUL_ADD, ADD_RMS_NORM and GROUP_NORM_MUL_ADD (checked on their final output only)."""
from __future__ import annotations

from .catalog import Family, new_params, register
from .binary import binary_inplace
from .graph import Tensor, add, mul, new_op, permute, scale, set_param, view, view_of
from .inputs import uniform_init

# --- constructors (ggml.c): the result is a dup of `a` (or, in place, a view of it) ---


def _like(a: Tensor, op: str, inplace: bool = False, i32=(), f32=()) -> Tensor:
    """ggml_dup_tensor(a) (contiguous, same type and ne) or ggml_view_tensor(a) when in place."""
    if not inplace:
        return new_op(a.graph, op, a.type, a.ne, [a], i32=i32, f32=f32)
    t = view_of(a, op, a.ne, a.nb)
    t.set_params_i32(i32)
    t.set_params_f32(f32, len(i32))
    return t


def check_eps(op: str, eps: float) -> None:
    """The domain of NORM, RMS_NORM and L2_NORM: ggml's CPU kernels GGML_ASSERT(eps >= 0.0f)
    (ggml-cpu/ops.cpp), so a NaN or negative eps aborts the process: refused as a bad case."""
    if not eps >= 0.0:
        raise ValueError(f"{op}: eps = {eps}: ggml asserts eps >= 0")


def norm(a: Tensor, eps: float, inplace: bool = False) -> Tensor:
    """ggml_norm: op_params = [eps]."""
    check_eps("NORM", eps)
    return _like(a, "NORM", inplace, f32=[eps])


def rms_norm(a: Tensor, eps: float, inplace: bool = False) -> Tensor:
    """ggml_rms_norm: op_params = [eps]."""
    check_eps("RMS_NORM", eps)
    return _like(a, "RMS_NORM", inplace, f32=[eps])


def l2_norm(a: Tensor, eps: float, inplace: bool = False) -> Tensor:
    """ggml_l2_norm: op_params = [eps]."""
    check_eps("L2_NORM", eps)
    return _like(a, "L2_NORM", inplace, f32=[eps])


def group_norm(a: Tensor, n_groups: int, eps: float, inplace: bool = False) -> Tensor:
    """ggml_group_norm: op_params = [n_groups (i32), eps (f32)]."""
    return _like(a, "GROUP_NORM", inplace, i32=[n_groups], f32=[eps])


# --- case graphs ---

EPS = (0.0, 1e-6, 1e-4, 1e-1, 10.0)


def _input(g, type, ne, v=False, noncontig_rows=False, param=False):
    """`a` (a gradient parameter with `param`), optionally a permuted tensor whose rows are
    not contiguous, optionally a view of half of it in every dim (test_norm / test_l2_norm)."""
    if noncontig_rows:
        leaf = g.new_tensor(type, [ne[1], ne[0], ne[2], ne[3]], "a")
        a = permute(leaf, 1, 0, 2, 3)
    else:
        a = leaf = g.new_tensor(type, ne, "a")
    if param:
        set_param(leaf)
    if v:
        a = view(a, [n // 2 for n in a.ne], a.nb[1:], 0)
    return a


init_pm10 = uniform_init(-10.0, 10.0)


register(Family(
    name="norm",
    build=lambda g, type, ne, v, eps, noncontig_rows: norm(_input(g, type, ne, v, noncontig_rows), eps),
    vars=("type", "ne", "v", "eps", "noncontig_rows"),
    op="NORM",
    eval_grid=lambda: [
        dict(type="f32", ne=[n, 5, 4, 3], v=v, eps=eps, noncontig_rows=nc)
        for eps in EPS
        for n in (64, 1025, 33, 132, 260)
        # permuted rows only for 64 and 1025
        for v, nc in [(False, False), (True, False), (False, True)][:3 if n in (64, 1025) else 2]],
))

register(Family(
    name="rms_norm",
    build=lambda g, type, ne, v, eps, inplace: rms_norm(_input(g, type, ne, v, param=True), eps, inplace),
    vars=("type", "ne", "v", "eps", "inplace"),
    op="RMS_NORM",
    init=init_pm10,
    grad_eps=1.0,
    grad_precise=True,
    eval_grid=lambda: [
        dict(type="f32", ne=[n, 5, 4, 3], v=v, eps=eps, inplace=False)
        for eps in EPS for n in (64, 1025, 33, 132, 260) for v in (False, True)
    ] + [dict(type="f32", ne=[64, 5, 4, 3], v=False, eps=1e-6, inplace=True)],
))

register(Family(
    name="l2_norm",
    build=lambda g, type, ne, eps, v, noncontig_rows: l2_norm(_input(g, type, ne, v, noncontig_rows), eps),
    vars=("type", "ne", "eps", "v", "noncontig_rows"),
    op="L2_NORM",
    eval_grid=lambda: [
        dict(type="f32", ne=[n, 5, 4, 3], eps=eps, v=v, noncontig_rows=nc)
        for eps in EPS for n in (64, 1025)
        for v, nc in [(False, False), (True, False), (False, True)]],
))

register(Family(
    name="group_norm",
    build=lambda g, type, ne, num_groups, eps: group_norm(g.new_tensor(type, ne, "a"), num_groups, eps),
    vars=("type", "ne", "num_groups", "eps"),
    op="GROUP_NORM",
    eval_grid=lambda: [dict(type="f32", ne=ne, num_groups=32, eps=1e-6)
                       for ne in ([64, 64, 320, 1], [9, 9, 1280, 1])],
))


# --- fused chains (test mode only) ---

def build_rms_norm_mul_add(g, type, ne, eps, broadcast, multi_add, post_mul=False, alias_rms_input=False,
                           weight_broadcast=False):
    """0.25.3 adds: a scalar d added before the norm and multiplied after (post_mul), the
    final add in place into the norm's input (alias_rms_input), a weight b of one row."""
    big = [ne[0] * 2, ne[1] * 3, ne[2] * 3, ne[3] * 4] if broadcast else ne
    a, b, c = (set_param(g.new_tensor(type, n, name)) for n, name in
               ((big, "a"), ([ne[0]] if weight_broadcast else ne, "b"), (ne, "c")))
    a = add(add(a, b), c)  # use a, b, c early, as the struct does
    d = set_param(g.new_tensor(type, [1], "d")) if post_mul else None
    if post_mul:
        a = add(a, d)
    if multi_add:
        a = add(add(a, b), c)
    m = mul(rms_norm(a, eps), b)
    out = binary_inplace("ADD", a, m) if alias_rms_input else add(m, c)
    return mul(out, d) if post_mul else out


def build_norm_mul_add(g, type, ne, eps, broadcast):
    big = [ne[0], ne[1] * 2, ne[2] * 2, ne[3] * 2] if broadcast else ne
    a, w, b = (set_param(g.new_tensor(type, n, name)) for n, name in ((big, "a"), (ne, "w"), (ne, "b")))
    a = add(add(a, w), b)
    return add(mul(norm(a, eps), w), b)


def build_add_rms_norm(g, type, ne, eps, broadcast):
    big = [ne[0] * 2, ne[1] * 3, ne[2] * 3, ne[3] * 4] if broadcast else ne
    a, b = set_param(g.new_tensor(type, big, "a")), set_param(g.new_tensor(type, ne, "b"))
    return rms_norm(add(a, b), eps)


def build_group_norm_mul_add(g, type, ne, num_groups, eps):
    a, w, b = (set_param(g.new_tensor(type, ne, n)) for n in "awb")
    return add(mul(group_norm(a, num_groups, eps), w), b)


FUSED_EPS = (0.0, 1e-6, 1e-4, 1e-1, 1.0)
SINGLE_ROWS = (1, 511, 1025, 8192, 33 * 512)


register(Family(
    name="rms_norm_mul_add",
    build=build_rms_norm_mul_add,
    vars=("type", "ne", "eps", "broadcast", "multi_add"),
    op="RMS_NORM_MUL_ADD",
    init=init_pm10,
    fused=True,
    eval_grid=lambda: [
        dict(type="f32", ne=[n, 5, 4, 3], eps=eps, broadcast=bc, multi_add=False)
        for eps in FUSED_EPS for n in (64, 1025) for bc in (False, True)
    ] + [dict(type="f32", ne=[n, 1, 1, 1], eps=1e-6, broadcast=False, multi_add=ma)
         for n in SINGLE_ROWS for ma in (False, True)],
    changes=(new_params("0.25.3", ("type", "ne", "eps", "broadcast", "multi_add"), post_mul=False,
                        alias_rms_input=False, weight_broadcast=False, add=lambda: [
                            dict(type="f32", ne=ne, eps=1e-6, broadcast=False, multi_add=False, **kw)
                            for ne, kw in (([1536, 1, 1, 1], dict(post_mul=True)), ([256, 4, 1, 1], dict(post_mul=True)),
                                           ([256, 4, 3, 2], dict(post_mul=True)),
                                           ([256, 4, 3, 2], dict(post_mul=True, weight_broadcast=True)),
                                           ([1536, 1, 1, 1], dict(alias_rms_input=True)),
                                           ([256, 4, 1, 1], dict(alias_rms_input=True)))]),),
))

register(Family(
    name="norm_mul_add",
    build=build_norm_mul_add,
    vars=("type", "ne", "eps", "broadcast"),
    op="NORM_MUL_ADD",
    fused=True,
    eval_grid=lambda: [dict(type="f32", ne=[n, 5, 4, 3], eps=eps, broadcast=bc)
                       for eps in FUSED_EPS for n in (64, 1025) for bc in (False, True)],
))

register(Family(
    name="add_rms_norm",
    build=build_add_rms_norm,
    vars=("type", "ne", "eps", "broadcast"),
    op="ADD_RMS_NORM",
    init=init_pm10,
    fused=True,
    eval_grid=lambda: [
        dict(type="f32", ne=[n, 5, 4, 3], eps=eps, broadcast=bc)
        for eps in FUSED_EPS for n in (64, 1025) for bc in (False, True)
    ] + [dict(type="f32", ne=[n, 1, 1, 1], eps=1e-6, broadcast=False) for n in SINGLE_ROWS],
))

register(Family(
    name="group_norm_mul_add",
    build=build_group_norm_mul_add,
    vars=("type", "ne", "num_groups", "eps"),
    op="GROUP_NORM_MUL_ADD",
    fused=True,
    eval_grid=lambda: [dict(type="f32", ne=ne, num_groups=4, eps=1e-5)
                       for ne in ([64, 64, 320, 1], [9, 9, 1280, 1])],
))


# --- 0.25.3's fused test-mode structs: test_norm_scale, test_add_add ---

def build_norm_scale(g, type, ne, eps, rms, scale_):
    a = g.new_tensor(type, ne, "a")
    return scale((rms_norm if rms else norm)(a, eps), scale_)


register(Family(
    name="norm_scale",
    build=lambda g, scale, **p: build_norm_scale(g, scale_=scale, **p),
    vars=("type", "ne", "eps", "rms", "scale"),
    op=lambda p: "RMS_NORM_SCALE" if p["rms"] else "NORM_SCALE",
    fused=True,
    since="0.25.3",
    eval_grid=lambda: [dict(type="f32", ne=[n, 5, 4, 3], eps=eps, rms=rms, scale=1.5)
                       for eps in (0.0, 1e-6, 1e-4, 1e-1, 10.0) for n in (64, 1025) for rms in (False, True)],
))


def build_add_add(g, type, type_addend, ne, broadcast, view_):
    """(a + b) + c, a possibly a view into a larger parent, c possibly one row."""
    if view_:
        parent = g.new_tensor(type, [ne[0] * 3, ne[1] * 2, ne[2], ne[3]], "a_parent")
        a = view(parent, ne, parent.nb[1:])
        a.name = "a"
    else:
        a = g.new_tensor(type, ne, "a")
    b = g.new_tensor(type_addend, ne, "b")
    c = g.new_tensor(type_addend, [ne[0], 1, 1, 1] if broadcast else ne, "c")
    return add(add(a, b), c)


register(Family(
    name="add_add",
    build=lambda g, view, **p: build_add_add(g, view_=view, **p),
    vars=("type", "type_addend", "ne", "broadcast", "view"),
    op="ADD_ADD",
    fused=True,
    since="0.25.3",
    eval_grid=lambda: [dict(type=t, type_addend=ta, ne=[n, 5, 4, 3], broadcast=bc, view=v)
                       for n in (64, 1025)
                       for t, ta, bc, v in (("f32", "f32", False, False), ("f32", "f32", True, False),
                                            ("f32", "f32", False, True), ("f16", "f16", False, False),
                                            ("f16", "f32", False, False), ("f16", "f32", True, False))],
))


def build_l2_norm_batch(g, type, ne, n_norms, eps, strided):
    """test_l2_norm_batch (0.25.3): n_norms same-shape L2 norms in one graph, of strided views
    of one qkv-like buffer or of separate tensors, summed so that they stay adjacent."""
    parent = g.new_tensor(type, [ne[0], ne[1] * n_norms, ne[2], ne[3]], "parent") if strided else None
    norms = []
    for t in range(n_norms):
        src = (view(parent, ne, parent.nb[1:], t * ne[1] * parent.nb[1]) if strided
               else g.new_tensor(type, ne, f"src{t}"))
        norms.append(l2_norm(src, eps))
    out = norms[-1]
    for n in reversed(norms[:-1]):
        out = add(n, out)
    return out


register(Family(
    name="l2_norm_batch",
    build=build_l2_norm_batch,
    vars=("type", "ne", "n_norms", "eps", "strided"),
    op="L2_NORM_BATCH",
    fused=True,
    since="0.25.3",
    eval_grid=lambda: [dict(type="f32", ne=[n, 5, 4, 3], n_norms=k, eps=eps, strided=st)
                       for eps in (0.0, 1e-6, 1e-4, 1e-1, 10.0) for n in (64, 1025)
                       for k, st in ((2, True), (4, True), (4, False))],
    perf_grid=lambda: [dict(type="f32", ne=[n, 16, 16, 1], n_norms=k, eps=1e-12, strided=True)
                       for n in (128, 256) for k in (2, 4)],
))
