"""The 约束说明 caveats the simulator models (docs/cann-sim-caveats.md): a page's caveat
that op_api does not enforce is taken with a warning (kept in the call trace), a limit
both state is refused, and aclnnMatmul's 1-D dot ignores cubeMathType."""
import numpy as np
import pytest

pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors  # noqa: E402
from cannops.backend.cann.sim.state import STATE  # noqa: E402
from cannops.native._aclnn import lib  # noqa: E402
from test_cann_sim_strict import NCL, PARAM_INVALID, A, S, T, call_op, dev  # noqa: E402,F401

GROUP_NORM = lambda eps: (T("f32", 2, 4, 3), T("f32", 4), T("f32", 4), 2, 4, 3, 2, eps,  # noqa: E731
                          T("f32", 2, 4, 3), T("f32", 2, 2), T("f32", 2, 2))


@pytest.mark.parametrize("op, args, warned", [
    ("GroupNorm", GROUP_NORM(1e-6), True),       # both GROUP_NORM cases of the catalog
    ("GroupNorm", GROUP_NORM(1e-5), False),
    ("InplaceAdds", (T("f32", 4), S("f32", -1.0), S("f32", 1.0)), True),
    ("InplaceAdds", (T("f32", 4), S("f32", 0.0), S("f32", 1.0)), True),
    ("InplaceAdds", (T("f32", 4), S("f32", 1.0), S("f32", 1.0)), False),
])
def test_a_caveat_op_api_does_not_check_is_taken_with_a_warning(dev, op, args, warned):
    STATE.warnings = []
    assert call_op(dev, op, *args) == 0
    assert any(w.startswith(f"aclnn{op}:") for w in STATE.warnings) is warned, STATE.warnings


def test_inplace_adds_computes_a_value_outside_its_range():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        plan = SIM["InplaceAdds"](t.tensor([4], lib.ACL_FLOAT), t.scalar_f32(-1.5), t.scalar_f32(2.0))
        x = np.arange(4, dtype=np.float32)
        assert np.array_equal(plan.compute(x), x - 3)
    finally:
        t.close()


CONV = lambda length, pad, out: (T("f32", 1, 2, length, fmt=NCL), T("f32", 3, 2, 2, fmt=NCL), None,  # noqa: E731
                                 A(1), A(pad), A(1), False, A(0), 1, T("f32", 1, 3, out, fmt=NCL), 0)


@pytest.mark.parametrize("args, code", [
    (CONV(5, 255, 514), 0),                      # a forward conv1d pads at most 255
    (CONV(5, 256, 516), PARAM_INVALID),
    (CONV(1_000_000, 0, 999_999), 0),            # every dim at most 1,000,000
    (CONV(1_000_001, 0, 1_000_000), PARAM_INVALID),
])
def test_convolution_limits_of_its_constraints_table(dev, args, code):
    assert call_op(dev, "Convolution", *args) == code


@pytest.mark.parametrize("index, code", [(T("s32", 1), 0), (T("s32"), PARAM_INVALID), (T("s32", 2), PARAM_INVALID)])
def test_index_select_of_a_0d_self_takes_an_index_of_shape_1(dev, index, code):
    out = T("f32", int(np.prod(index[2])))   # the out shape each index would give
    assert call_op(dev, "IndexSelect", T("f32"), 0, index, out) == code


def test_a_1d_dot_ignores_cube_math_type():
    """Two 1-D operands: aclnnMatmul's dot, no cube, so ALLOW_FP32_DOWN_PRECISION keeps
    f32 (2-D operands are rounded to HF32 under it)."""
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        F32 = lib.ACL_FLOAT
        x, w = np.array([1 + 2.0 ** -12, 0], np.float32), np.array([1, 0], np.float32)
        dot = SIM["Matmul"](t.tensor([2], F32), t.tensor([2], F32), t.tensor([], F32), 1).compute(x, w)
        assert dot == np.float32(1 + 2.0 ** -12)
        mm = SIM["Matmul"](t.tensor([1, 2], F32), t.tensor([2, 1], F32), t.tensor([1, 1], F32), 1)
        assert mm.compute(x.reshape(1, 2), w.reshape(2, 1))[0, 0] == np.float32(1 + 2.0 ** -11)
    finally:
        t.close()


def test_the_group_norm_cases_carry_the_warning_on_their_call(dev):
    """End to end through ops' layer: the catalog's GROUP_NORM (eps 1e-6) records the
    caveat on its aclnnGroupNorm call, as `ops test --trace` keeps it."""
    from cannops.backend import trace
    from cannops.cases.catalog import all_cases
    from cannops.cli.engine.execute import check_indices
    case = next(c for c in all_cases() if c.op == "GROUP_NORM")
    g = case.build()
    calls = dev.run_traced(case, g, case.init_inputs(g, 0), check_indices(g)).calls
    gn = next(c for c in calls if c["call"] == "aclnnGroupNorm")
    assert "eps 1e-06 is below 1e-05" in gn["warnings"][0]
    assert " warning: aclnnGroupNorm: eps" in trace.call_text(gn)
