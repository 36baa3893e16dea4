"""Training ops: test_cross_entropy_loss (CROSS_ENTROPY_LOSS), test_cross_entropy_loss_back
(CROSS_ENTROPY_LOSS_BACK), test_opt_step_adamw (OPT_STEP_ADAMW), test_opt_step_sgd
(OPT_STEP_SGD) and the backward ops test_silu_back (SILU_BACK) and test_rms_norm_back
(RMS_NORM_BACK). The optimizer steps update their parameter in place: the node is a view
of it, as ggml.c builds it."""
from __future__ import annotations

from .catalog import Family, register
from .graph import FLAG_PARAM, Tensor, new_op, set_param, view_of
from .inputs import uniform_init
from .softmax import soft_max_ext
from .types import F32


def cross_entropy_loss(a: Tensor, b: Tensor) -> Tensor:
    """ggml_cross_entropy_loss: logits a, label probabilities b (same shape) -> {1}."""
    assert a.ne == b.ne
    return new_op(a.graph, "CROSS_ENTROPY_LOSS", a.type, [1], [a, b])


def cross_entropy_loss_back(grad: Tensor, a: Tensor, b: Tensor) -> Tensor:
    """ggml_cross_entropy_loss_back: d loss {1}, logits a, labels b -> d logits (a's shape)."""
    assert grad.nelements() == 1 and a.ne == b.ne
    return new_op(a.graph, "CROSS_ENTROPY_LOSS_BACK", a.type, a.ne, [grad, a, b])


def _step_of(a: Tensor, op: str, srcs) -> Tensor:
    assert a.flags & FLAG_PARAM, f"{op} updates a parameter (ggml_set_param)"
    t = view_of(a, op, a.ne, a.nb)   # ggml_view_tensor: the update is written into a
    t.src = [a] + list(srcs)
    return t


def opt_step_adamw(a: Tensor, grad: Tensor, m: Tensor, v: Tensor, params: Tensor) -> Tensor:
    """ggml_opt_step_adamw: params {7} = [alpha, beta1, beta2, eps, wd, beta1h, beta2h];
    m and v (the moments) are updated in place too."""
    assert a.ne == grad.ne == m.ne == v.ne and params.type == F32 and params.nelements() == 7
    return _step_of(a, "OPT_STEP_ADAMW", [grad, m, v, params])


def opt_step_sgd(a: Tensor, grad: Tensor, params: Tensor) -> Tensor:
    """ggml_opt_step_sgd: params {2} = [alpha, wd]."""
    assert a.ne == grad.ne and params.type == F32 and params.nelements() == 2
    return _step_of(a, "OPT_STEP_SGD", [grad, params])


def silu_back(a: Tensor, b: Tensor) -> Tensor:
    """ggml_silu_back: src0 = the output gradient dy, src1 = the forward input x."""
    return new_op(a.graph, "SILU_BACK", a.type, a.ne, [a, b])


def rms_norm_back(a: Tensor, b: Tensor, eps: float) -> Tensor:
    """ggml_rms_norm_back: src0 = the output gradient, src1 = the forward input; op_params = [eps]."""
    return new_op(a.graph, "RMS_NORM_BACK", a.type, a.ne, [a, b], f32=[eps])


# --- cases ---

def build_cross_entropy_loss(g, type, ne):
    logits = g.new_tensor(type, ne, "logits")
    set_param(logits)
    labels = soft_max_ext(g.new_tensor(type, ne, "labels"))  # rows of probabilities
    return cross_entropy_loss(logits, labels)


def build_cross_entropy_loss_back(g, type, ne):
    grad = g.new_tensor(F32, [1], "grad")
    logits = g.new_tensor(type, ne, "logits")
    labels = soft_max_ext(g.new_tensor(type, ne, "labels"))
    return cross_entropy_loss_back(grad, logits, labels)


def build_adamw(g, type, ne):
    a = g.new_tensor(type, ne, "a")
    set_param(a)
    grad, m, v = (g.new_tensor(type, ne, n) for n in ("grad", "grad_m", "grad_v"))
    return opt_step_adamw(a, grad, m, v, g.new_tensor(F32, [7], "adamw_params"))


def build_sgd(g, type, ne):
    a = g.new_tensor(type, ne, "a")
    set_param(a)
    return opt_step_sgd(a, g.new_tensor(type, ne, "grad"), g.new_tensor(F32, [2], "sgd_params"))


CE_GRID = lambda: [dict(type="f32", ne=[10, 5, 4, 3]), dict(type="f32", ne=[30000, 1, 1, 1])]

register(Family(
    name="cross_entropy_loss", build=build_cross_entropy_loss, vars=("type", "ne"), op="CROSS_ENTROPY_LOSS",
    eval_grid=CE_GRID,
    init=uniform_init(-100.0, 100.0),   # wide logits: a near-linear softmax for numeric gradients
    grad_eps=1.0,
    grad_precise=True,
))
register(Family(
    name="cross_entropy_loss_back", build=build_cross_entropy_loss_back, vars=("type", "ne"),
    op="CROSS_ENTROPY_LOSS_BACK", eval_grid=CE_GRID,
))
register(Family(
    name="opt_step_adamw", build=build_adamw, vars=("type", "ne"), op="OPT_STEP_ADAMW",
    eval_grid=lambda: [dict(type="f32", ne=[10, 5, 4, 3])],
    init=uniform_init(0.0, 1.0),   # grad_v and the hyper-parameters must be non-negative
    in_grad=False,               # test-backend-ops' grad mode leaves it out, unprinted
))
register(Family(
    name="opt_step_sgd", build=build_sgd, vars=("type", "ne"), op="OPT_STEP_SGD",
    eval_grid=lambda: [dict(type="f32", ne=[10, 5, 4, 3])],
    init=uniform_init(0.0, 1.0),
    grad_precise=True,
))
register(Family(
    name="silu_back",
    build=lambda g, type, ne, eps: silu_back(g.new_tensor(type, ne, "a"), g.new_tensor(type, ne, "grad")),
    vars=("type", "ne", "eps"), op="SILU_BACK",
    eval_grid=lambda: [dict(type="f32", ne=[64, 5, 4, 3], eps=1e-6)],
))
register(Family(
    name="rms_norm_back",
    build=lambda g, type, ne, eps: rms_norm_back(g.new_tensor(type, ne, "a"), g.new_tensor(type, ne, "b"), eps),
    vars=("type", "ne", "eps"), op="RMS_NORM_BACK",
    eval_grid=lambda: [dict(type="f32", ne=[n, 5, 4, 3], eps=eps)
                       for eps in (0.0, 1e-6, 1e-4, 1e-1, 10.0) for n in (64, 1025)],
    init=uniform_init(-10.0, 10.0),
))
