"""The simulator's dtype tables against Ascend's own: tests/data/ascend-tables.json, made by
bench/extract_ascend_tables.py from the hicann op repositories (each page's parameter
table and its Atlas A2 notes, the system tests' dtype combinations; commits recorded).

For each probed operator, every dtype the A2 data lists for its first parameter is taken
by the simulator's GetWorkspaceSize checks, and every dtype the simulator takes is listed,
unless an exception below says why."""
import json
import pathlib

import pytest

cann = pytest.importorskip("cannops.backend.cann")
from cannops.backend.cann.sim import dtypes  # noqa: E402
from test_cann_sim_strict import A, S, T, acl, call_op, dev  # noqa: E402,F401

DATA = json.loads((pathlib.Path(__file__).parent / "data" / "ascend-tables.json").read_text())
OPS = DATA["operators"]
ALL = sorted({dtypes.short(a) for a in dtypes.BY_NAME.values()} & {
    "f32", "f16", "bf16", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "bool",
    "c64", "c128"})


FLOATS = {"f32", "f16", "bf16", "f64", "c64", "c128"}


def unary(d):
    return T(d, 4), T(d, 4)


def to_float(d):
    """The pages' integer / bool inputs give a FLOAT out."""
    return T(d, 4), T(d if d in FLOATS else "f32", 4)


# operator -> (the page's parameter the dtype goes to, its call with that dtype everywhere
# the page asks for the same type)
PROBES = {
    **{op: ("self", unary) for op in ("Neg", "Relu", "Sigmoid", "Silu", "Gelu", "FastGelu",
                                      "Hardsigmoid", "Hardswish", "Sign")},
    **{op: ("self", to_float) for op in ("Exp", "Tanh", "Sqrt", "Log", "Sin")},
    "Cos": ("input", to_float),
    "Abs": ("self", lambda d: (T(d, 4), T("f32" if d == "c64" else d, 4))),   # |c64| is real
    "GeluV2": ("x", lambda d: (T(d, 4), 0, T(d, 4))),
    "Softmax": ("self", lambda d: (T(d, 2, 4), -1, T(d, 2, 4))),
    "Argsort": ("self", lambda d: (T(d, 2, 4), -1, False, T("s64", 2, 4))),
    "Add": ("self", lambda d: (T(d, 4), T(d, 4), S(d, 1), T(d, 4))),
    "Sub": ("self", lambda d: (T(d, 4), T(d, 4), S(d, 1), T(d, 4))),
    "Mul": ("self", lambda d: (T(d, 4), T(d, 4), T(d, 4))),
    "Div": ("self", lambda d: (T(d, 4), T(d, 4), T(d, 4))),
    "Cast": ("self", lambda d: (T(d, 4), acl(d), T(d, 4))),
    "InplaceCopy": ("selfRef", lambda d: (T(d, 4), T(d, 4))),
    "IndexSelect": ("self", lambda d: (T(d, 4, 2), 0, T("s32", 2), T(d, 2, 2))),
    "GatherV2": ("self", lambda d: (T(d, 4, 2), 0, T("s32", 2), T(d, 2, 2))),
    "EqTensor": ("self", lambda d: (T(d, 4), T(d, 4), T("bool", 4))),
    "Cumsum": ("self", lambda d: (T(d, 4), 0, acl(d), T(d, 4))),
    "ReduceSum": ("self", lambda d: (T(d, 2, 4), A(1), True, acl(d), T(d, 2, 1))),
    "Permute": ("self", lambda d: (T(d, 2, 4), A(1, 0), T(d, 4, 2))),
    "Tril": ("self", lambda d: (T(d, 3, 3), 0, T(d, 3, 3))),
    "Triu": ("self", lambda d: (T(d, 3, 3), 0, T(d, 3, 3))),
    "Repeat": ("self", lambda d: (T(d, 2), A(2), T(d, 4))),
    "Roll": ("x", lambda d: (T(d, 4), A(1), A(0), T(d, 4))),
    "InplaceZero": ("selfRef", lambda d: (T(d, 4),)),
    "ArgMax": ("self", lambda d: (T(d, 2, 4), 1, False, T("s64", 2))),
    "LeakyRelu": ("self", lambda d: (T(d, 4), S("f32", 0.1), T(d, 4))),
    "RmsNorm": ("x", lambda d: (T(d, 2, 4), T(d, 4), 1e-6, T(d, 2, 4), T("f32", 2))),
}

# (operator, dtype) -> why the simulator and the A2 data differ
NOT_TAKEN = {   # listed for A2, refused by the simulator
}
NOT_LISTED = {   # taken by the simulator, not listed for A2
}


def test_data_covers_every_simulated_operator(dev):
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    assert set(SIM) == set(OPS), "rerun bench/extract_ascend_tables.py"
    assert all(len(sha) == 40 for sha in DATA["sources"].values())
    # pages the mirrors lack (ops-nn carries no aclnnUpsample{Nearest,Bilinear}2d page)
    assert {n for n, e in OPS.items() if not e["page"]} <= {"UpsampleNearest2d", "UpsampleBilinear2d"}


@pytest.mark.parametrize("op", sorted(PROBES))
def test_simulator_takes_what_a2_lists(dev, op):
    param, make = PROBES[op]
    listed = set(OPS[op]["A2"][param])
    taken = {d for d in ALL if call_op(dev, op, *make(d)) == 0}
    missing = {d for d in listed & set(ALL) - taken if (op, d) not in NOT_TAKEN}
    extra = {d for d in taken - listed if (op, d) not in NOT_LISTED}
    assert not missing, f"aclnn{op} {param}: listed for A2 ({OPS[op]['page']}), refused: {sorted(missing)}"
    assert not extra, f"aclnn{op} {param}: taken, not listed for A2: {sorted(extra)}"


# ------------------------------------------------- operators the 310P's pages do not offer ----

def _page_path(entry: str) -> str:
    return entry.split(":", 1)[1] if ":" in entry else entry.split(" ", 1)[1]


def test_310p_unoffered_operators_follow_the_pages():
    """soc.UNOFFERED["310P"] (the simulator's and the rules' table) is exactly the operators
    whose extracted page marks the Atlas inference series 不支持 or has no row for it, each
    with its own page."""
    from cannops.backend.cann.soc import UNOFFERED
    pages = {n: e["page"] for n, e in OPS.items() if e["page"] and not e["support"].get("310P")}
    assert set(UNOFFERED["310P"]) == set(pages)
    assert {n: _page_path(p) for n, p in UNOFFERED["310P"].items()} == \
        {n: _page_path(p) for n, p in pages.items()}
    assert all(e["support"].get("A2") for e in OPS.values() if e["page"])   # the 910B offers all


def _prepare_on(monkeypatch, soc_name, op, allowed=frozenset()):
    """aclnn<op>GetWorkspaceSize's framework checks with every argument nullptr, on SoC
    soc_name: the SimError's (code, message), or (0, "") where the operator's own checks
    are reached and pass."""
    from cannops.backend.cann.sim import aclnn, runtime
    from cannops.native._aclnn import ffi
    monkeypatch.setattr(runtime.STATE, "soc", soc_name)
    monkeypatch.setattr(runtime.STATE, "allowed", frozenset(allowed))
    import inspect
    n = len(inspect.signature(aclnn.OPS[op]).parameters)
    args = [ffi.NULL] * n + [ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")]
    try:
        aclnn._prepare(op, args)
        return 0, ""
    except runtime.SimError as e:
        return e.code, str(e)
    except Exception as e:  # noqa: BLE001 - an operator's checks stumbling on nullptr
        return -1, repr(e)


def _unoffered():
    from cannops.backend.cann.soc import UNOFFERED
    return sorted(UNOFFERED["310P"])


@pytest.mark.parametrize("op", _unoffered())
def test_simulator_refuses_unoffered_operators_on_310p(dev, monkeypatch, op):
    from cannops.backend.cann.soc import UNOFFERED
    from cannops.native._aclnn import lib
    code, msg = _prepare_on(monkeypatch, "Ascend310P3", op)
    assert code == lib.ACLNN_ERR_INNER_FIND_KERNEL_ERROR, msg
    assert f"aclnn{op}GetWorkspaceSize" in msg and UNOFFERED["310P"][op] in msg
    # on the 910B the same call reaches the operator's own checks (its nullptr refusal)
    code, msg = _prepare_on(monkeypatch, "Ascend910B3", op)
    assert "not offered" not in msg
    # and CANN_SIM_ALLOW=unoffered-operator lets a foreign client (ggml-cann's 310P build) by
    code, msg = _prepare_on(monkeypatch, "Ascend310P3", op, {"unoffered-operator"})
    assert "not offered" not in msg


def test_offered_operators_pass_on_310p(dev, monkeypatch):
    """An operator the 310P's page offers (aclnnMul, aclnnAdds, aclnnReduceSum) is not
    refused there for its availability."""
    for op in ("Mul", "Adds", "ReduceSum", "Repeat", "Roll"):
        code, msg = _prepare_on(monkeypatch, "Ascend310P3", op)
        assert "not offered" not in msg, msg
