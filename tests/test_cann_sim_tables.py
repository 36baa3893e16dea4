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
from test_cann_sim_strict import A, L, S, T, acl, call_op, dev  # noqa: E402,F401
from cannops.native._aclnn import ffi, lib  # noqa: E402

DATA = json.loads((pathlib.Path(__file__).parent / "data" / "ascend-tables.json").read_text())
OPS = DATA["operators"]
ALL = sorted({dtypes.short(a) for a in dtypes.BY_NAME.values()} & {
    "f32", "f16", "bf16", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "bool",
    "c64", "c128"})


FLOATS = {"f32", "f16", "bf16", "f64", "c64", "c128"}
NCL, NCHW, NHWC = lib.ACL_FORMAT_NCL, lib.ACL_FORMAT_NCHW, lib.ACL_FORMAT_NHWC


def unary(d):
    return T(d, 4), T(d, 4)


def to_float(d):
    """The pages' integer / bool inputs give a FLOAT out."""
    return T(d, 4), T(d if d in FLOATS else "f32", 4)


def _fias(d):
    """aclnnFusedInferAttentionScoreV2, BSH, B = Q_S = N = 1, KV_S = 2, D = 16; query, key,
    value and attentionOut of one type. An INT8 one is the page's full quantization: INT8
    in and out with deqScale1, quantScale1, deqScale2 and quantScale2."""
    quant = (T("u64", 1), T("f32", 1), T("u64", 1), T("f32", 1)) if d == "s8" else (None,) * 4
    return ((T(d, 1, 1, 16), L(T(d, 1, 2, 16)), L(T(d, 1, 2, 16))) + (None,) * 4 + quant + (None,) * 13
            + (1, 1.0, 65535, 65535, ffi.new("char[]", b"BSH"), 0, 0, 0, 0, 0, False, 0, 0, T(d, 1, 1, 16), None))


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
    "LogSoftmax": ("self", lambda d: (T(d, 2, 4), -1, T(d, 2, 4))),
    "Ger": ("self", lambda d: (T(d, 2), T(d, 3), T(d, 2, 3))),
    "InplaceEqTensor": ("selfRef", lambda d: (T(d, 4), T(d, 4))),
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
    # the other operators with a dtype table (issue 19, item 4)
    "AddRmsNorm": ("x1", lambda d: (T(d, 2, 4), T(d, 2, 4), T(d, 4), 1e-6, T(d, 2, 4), T("f32", 2, 1),
                                    T(d, 2, 4))),
    "Adds": ("self", lambda d: (T(d, 4), S(d, 1), S(d, 1), T(d, 4))),
    "Muls": ("self", lambda d: (T(d, 4), S(d, 1), T(d, 4))),
    "InplaceAdd": ("selfRef", lambda d: (T(d, 4), T(d, 4), S(d, 1))),
    "InplaceSub": ("selfRef", lambda d: (T(d, 4), T(d, 4), S(d, 1))),
    "InplaceMul": ("selfRef", lambda d: (T(d, 4), T(d, 4))),
    "InplaceDiv": ("selfRef", lambda d: (T(d, 4), T(d, 4))),
    "InplaceAdds": ("selfRef", lambda d: (T(d, 4), S(d, 1), S(d, 1))),
    "InplaceSubs": ("selfRef", lambda d: (T(d, 4), S(d, 1), S(d, 1))),
    "InplaceMuls": ("selfRef", lambda d: (T(d, 4), S(d, 1))),
    "InplaceDivs": ("selfRef", lambda d: (T(d, 4), S(d, 1))),
    "InplacePowTensorTensor": ("self", lambda d: (T(d, 4), T(d, 4))),
    "PowScalarTensor": ("exponent", lambda d: (S(d, 2), T(d, 4), T(d, 4))),
    "InplaceExp": ("selfRef", lambda d: (T(d, 4),)),
    "InplaceSin": ("selfRef", lambda d: (T(d, 4),)),
    "InplaceCos": ("inputRef", lambda d: (T(d, 4),)),
    "InplaceFillScalar": ("selfRef", lambda d: (T(d, 4), S(d, 1))),
    "InplaceTriu": ("selfRef", lambda d: (T(d, 3, 3), 0)),
    "InplaceThreshold": ("selfRef", lambda d: (T(d, 4), S(d, 0), S(d, 0))),
    "InplaceClampMax": ("selfRef", lambda d: (T(d, 4), S(d, 1))),
    "Clamp": ("self", lambda d: (T(d, 4), S(d, 0), S(d, 1), T(d, 4))),
    "ClampMin": ("self", lambda d: (T(d, 4), S(d, 0), T(d, 4))),
    "GtScalar": ("self", lambda d: (T(d, 4), S(d, 0), T("bool", 4))),
    "Elu": ("self", lambda d: (T(d, 4), S("f32", 1), S("f32", 1), S("f32", 1), T(d, 4))),
    "Softplus": ("self", lambda d: (T(d, 4), S("f32", 1), S("f32", 20), T(d, 4))),
    "SwiGlu": ("x", lambda d: (T(d, 2, 4), -1, T(d, 2, 2))),
    "GeGluV3": ("self", lambda d: (T(d, 2, 4), -1, 0, False, T(d, 2, 2), T(d, 2, 2))),
    "Mean": ("self", lambda d: (T(d, 2, 4), A(1), True, acl(d), T(d, 2, 1))),
    "Norm": ("self", lambda d: (T(d, 2, 4), S("f32", 2), A(1), False, T(d, 2))),
    "LayerNorm": ("input", lambda d: (T(d, 2, 4), A(4), None, None, 1e-5, T(d, 2, 4), T(d, 2, 1), T(d, 2, 1))),
    "GroupNorm": ("self", lambda d: (T(d, 2, 4, 3), T(d, 4), T(d, 4), 2, 4, 3, 2, 1e-5, T(d, 2, 4, 3),
                                     T(d, 2, 2), T(d, 2, 2))),
    "SoftmaxCrossEntropyWithLogits": ("features", lambda d: (T(d, 2, 4), T(d, 2, 4), T(d, 2), T(d, 2, 4))),
    "Mm": ("self", lambda d: (T(d, 2, 3), T(d, 3, 4), T(d, 2, 4), 0)),
    "Matmul": ("self", lambda d: (T(d, 2, 3), T(d, 3, 4), T(d, 2, 4), 0)),
    "BatchMatMul": ("self", lambda d: (T(d, 2, 2, 3), T(d, 2, 3, 4), T(d, 2, 2, 4), 0)),
    "Mv": ("self", lambda d: (T(d, 2, 3), T(d, 3), T(d, 2), 0)),
    "Slice": ("self", lambda d: (T(d, 4, 2), 0, 0, 2, 1, T(d, 2, 2))),
    "ConstantPadNd": ("self", lambda d: (T(d, 2, 2), A(1, 1), S(d, 0), T(d, 2, 4))),
    "ReflectionPad1d": ("self", lambda d: (T(d, 2, 4), A(1, 1), T(d, 2, 6))),
    "CircularPad2d": ("self", lambda d: (T(d, 1, 3, 3), A(1, 1, 1, 1), T(d, 1, 5, 5))),
    "RepeatInterleaveIntWithDim": ("self", lambda d: (T(d, 3, 2), 2, 0, 6, T(d, 6, 2))),
    "InplaceIndexCopy": ("selfRef", lambda d: (T(d, 4, 2), 0, T("s32", 2), T(d, 2, 2))),
    "InplaceIndexFillTensor": ("selfRef", lambda d: (T(d, 2, 4), 1, A(0), S(d, 1))),
    "Im2col": ("self", lambda d: (T(d, 1, 1, 3, 3), A(2, 2), A(1, 1), A(0, 0), A(1, 1), T(d, 1, 4, 4))),
    "AvgPool2d": ("self", lambda d: (T(d, 1, 4, 4, fmt=NCL), A(2, 2), A(2, 2), A(0, 0), False, True, 0, 0,
                                     T(d, 1, 2, 2, fmt=NCL))),
    "MaxPool": ("self", lambda d: (T(d, 1, 1, 4, 4), A(2, 2), A(2, 2), 0, A(0, 0), A(1, 1), 0,
                                   T(d, 1, 1, 2, 2))),
    "TriangularSolve": ("self", lambda d: (T(d, 3, 2), T(d, 3, 3), True, False, False, T(d, 3, 2), T(d, 3, 3))),
    "TransMatmulWeight": ("mmWeightRef", lambda d: (T(d, 32, 32),)),
    "Cat": ("tensors", lambda d: (L(T(d, 2, 2), T(d, 2, 2)), 0, T(d, 4, 2))),
    "Arange": ("out", lambda d: (S("s32", 0), S("s32", 4), S("s32", 1), T(d, 4))),
    "Convolution": ("input", lambda d: (T(d, 1, 2, 5, fmt=NCL), T(d, 3, 2, 2, fmt=NCL), None, A(1), A(0), A(1),
                                        False, A(0), 1, T(d, 1, 3, 4, fmt=NCL), 0)),
    "RotaryPositionEmbedding": ("x", lambda d: (T(d, 1, 2, 1, 4), T(d, 1, 2, 1, 4), T(d, 1, 2, 1, 4), 0,
                                                T(d, 1, 2, 1, 4))),
    # ops-cv's image pages; NHWC, where the bilinear page takes DOUBLE (NCHW: no DOUBLE)
    "UpsampleNearest2d": ("self", lambda d: (T(d, 1, 1, 2, 2, fmt=NCHW), A(4, 4), T(d, 1, 1, 4, 4, fmt=NCHW))),
    "UpsampleBilinear2d": ("self", lambda d: (T(d, 1, 2, 2, 1, fmt=NHWC), A(4, 4), False, 0.0, 0.0,
                                              T(d, 1, 4, 4, 1, fmt=NHWC))),
    # x, antiquantScale (per channel) and y of one type, an INT8 weight (k, n) = (64, 4)
    "WeightQuantBatchMatmulV2": ("x", lambda d: (T(d, 2, 64), T("s8", 64, 4), T(d, 4), None, None, None, None,
                                                 0, T(d, 2, 4))),
    "FusedInferAttentionScoreV2": ("query", _fias),
}

# (operator, dtype) -> why the simulator and the A2 data differ
NOT_TAKEN = {   # listed for A2, refused by the simulator
    ("FusedInferAttentionScoreV2", "s8"): "an INT8 query is the page's full quantization (deqScale1, quantScale1, "
                                          "deqScale2, quantScale2), which the A2 kernel registration and tiling "
                                          "check take too; not simulated: refused as ACLNN_ERR_INNER",
}
NOT_LISTED = {   # taken by the simulator, not listed for A2
}


def test_data_covers_every_simulated_operator(dev):
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    assert set(SIM) == set(OPS), "rerun bench/extract_ascend_tables.py"
    assert all(len(sha) == 40 for sha in DATA["sources"].values())
    assert all(e["page"] for e in OPS.values()), "an operator without a page in the mirrors"


@pytest.mark.parametrize("op", sorted(PROBES))
def test_simulator_takes_what_a2_lists(dev, op):
    _probe_against_page(dev, op, "A2", PROBES[op], NOT_TAKEN, NOT_LISTED)


def _probe_against_page(dev, op, product, probe, not_taken, not_listed):
    """Every dtype the page lists for `product` is taken by the simulator and no other,
    but for the (op, dtype) pairs judged in `not_taken` / `not_listed`."""
    param, make = probe
    listed = set(OPS[op][product][param])
    if OPS[op]["support"][product] != "offered":   # no 310P rows: the page's A2 dtypes less
        listed = set(OPS[op]["A2"][param]) - {"bf16"}   # BFLOAT16 (soc.py)
    taken = {d for d in ALL if call_op(dev, op, *make(d)) == 0}
    missing = {d for d in listed & set(ALL) - taken if (op, d) not in not_taken}
    extra = {d for d in taken - listed if (op, d) not in not_listed}
    assert not missing, f"aclnn{op} {param}: listed for {product} ({OPS[op]['page']}), refused: {sorted(missing)}"
    assert not extra, f"aclnn{op} {param}: taken on {product}, not listed: {sorted(extra)}"


# ------------------------------------------------- operators the 310P does not offer ---------

def _page_path(entry: str) -> str:
    return entry.split(":", 1)[1] if ":" in entry else entry.split(" ", 1)[1]


STATES = {"offered", "not offered", "not documented"}


def _on_310p(state: str) -> dict[str, str]:
    return {n: e["page"] for n, e in OPS.items() if e["page"] and e["support"]["310P"] == state}


def _source_refuses_310p(entry: dict) -> bool:
    """The operator's kernel registrations (op_host/*_def.cpp) name Atlas A2 SoCs but not
    ascend310p: the source, too, has no 310P kernel."""
    reg = entry["registered"]
    return "ascend310p" not in reg and any(s.startswith("ascend910") for s in reg)


def test_310p_unoffered_operators_follow_pages_and_sources():
    """Each page gives A2 and the 310P one of three states; soc.UNOFFERED["310P"] (the
    simulator's and the rules' table) is exactly the operators whose page does not offer
    the Atlas inference series (不支持, or no row) and whose kernel registration leaves it
    out too, each with its own page. A page's "no" that the source does not back (no A2
    kernel registered either, or an ascend310p one) is overruled: offered."""
    from cannops.backend.cann.soc import UNOFFERED
    assert all(set(e["support"]) == {"A2", "310P"} and set(e["support"].values()) <= STATES
               for e in OPS.values() if e["page"])
    pages = {n: e["page"] for n, e in OPS.items()
             if e["page"] and e["support"]["310P"] != "offered" and _source_refuses_310p(e)}
    assert {n: _page_path(p) for n, p in UNOFFERED["310P"].items()} == \
        {n: _page_path(p) for n, p in pages.items()}
    overruled = {n for n, e in OPS.items() if e["page"] and e["support"]["310P"] != "offered"} - set(pages)
    assert {"Add", "Div", "Exp", "LayerNorm", "InplaceIndexCopy", "Im2col"} <= overruled
    assert "ascend310p" in OPS["LayerNorm"]["registered"]   # the page's 不支持 against its own source
    assert all(e["support"]["A2"] == "offered" for e in OPS.values() if e["page"])   # the 910B offers all


def _prepare_on(monkeypatch, soc_name, op, allowed=frozenset()):
    """aclnn<op>GetWorkspaceSize's framework checks with every argument nullptr, on SoC
    soc_name: the SimError's (code, message), or (0, "") where the operator's own checks
    are reached and pass."""
    from cannops.backend.cann.sim import aclnn, state
    from cannops.backend.cann.sim.refusals import SimError
    from cannops.native._aclnn import ffi
    monkeypatch.setattr(state.STATE, "soc", soc_name)
    monkeypatch.setattr(state.STATE, "allowed", frozenset(allowed))
    import inspect
    n = len(inspect.signature(aclnn.OPS[op]).parameters)
    args = [ffi.NULL] * n + [ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")]
    try:
        aclnn._prepare(op, args)
        return 0, ""
    except SimError as e:
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
    assert "names Atlas A2 SoCs but not ascend310p" in msg, msg
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


# ------------------------------------------- documented scalar ranges and shape limits ----

F = "f32"
# (operator, the page's rule, a call that breaks it, the same call within it): the
# simulator refuses the first with ACLNN_ERR_PARAM_INVALID and takes the second
PRECONDITIONS = [
    ("GroupNorm", "eps > 0",
     (T(F, 2, 4, 3), T(F, 4), T(F, 4), 2, 4, 3, 2, 0.0, T(F, 2, 4, 3), T(F, 2, 2), T(F, 2, 2)),
     (T(F, 2, 4, 3), T(F, 4), T(F, 4), 2, 4, 3, 2, 1e-5, T(F, 2, 4, 3), T(F, 2, 2), T(F, 2, 2))),
    ("GroupNorm", "group > 0",
     (T(F, 2, 4, 3), T(F, 4), T(F, 4), 2, 4, 3, 0, 1e-5, T(F, 2, 4, 3), T(F, 2, 2), T(F, 2, 2)),
     (T(F, 2, 4, 3), T(F, 4), T(F, 4), 2, 4, 3, 1, 1e-5, T(F, 2, 4, 3), T(F, 2, 1), T(F, 2, 1))),
    ("Arange", "step > 0 needs start < end",
     (S(F, 4.0), S(F, 0.0), S(F, 1.0), T(F, 4)), (S(F, 0.0), S(F, 4.0), S(F, 1.0), T(F, 4))),
    ("Arange", "step != 0",
     (S(F, 0.0), S(F, 4.0), S(F, 0.0), T(F, 4)), (S(F, 4.0), S(F, 0.0), S(F, -1.0), T(F, 4))),
    ("Slice", "step > 0", (T(F, 4, 2), 0, 0, 4, 0, T(F, 4, 2)), (T(F, 4, 2), 0, 0, 4, 2, T(F, 2, 2))),
    ("Slice", "dim in [-n, n-1]", (T(F, 4, 2), 2, 0, 4, 1, T(F, 4, 2)), (T(F, 4, 2), -2, 0, 4, 1, T(F, 4, 2))),
    ("RepeatInterleaveIntWithDim", "repeats >= 0",
     (T(F, 3, 2), -1, 0, -3, T(F, 0, 2)), (T(F, 3, 2), 2, 0, 6, T(F, 6, 2))),
    ("ArgMax", "dim in [-n, n)", (T(F, 2, 4), 2, False, T("s64", 2)), (T(F, 2, 4), -1, False, T("s64", 2))),
    ("Cumsum", "dim in [-n, n-1]", (T(F, 2, 4), 2, acl(F), T(F, 2, 4)), (T(F, 2, 4), -2, acl(F), T(F, 2, 4))),
    ("ReduceSum", "dims in [-n, n-1]",
     (T(F, 2, 4), A(2), True, acl(F), T(F, 2, 1)), (T(F, 2, 4), A(-1), True, acl(F), T(F, 2, 1))),
    ("Softmax", "dim in [-n, n-1]", (T(F, 2, 4), 2, T(F, 2, 4)), (T(F, 2, 4), -2, T(F, 2, 4))),
    ("Roll", "dims in [-n, n-1]", (T(F, 2, 4), A(1), A(2), T(F, 2, 4)), (T(F, 2, 4), A(1), A(-1), T(F, 2, 4))),
    ("GatherV2", "dim in [-n, n-1]",
     (T(F, 4, 2), 2, T("s32", 2), T(F, 2, 2)), (T(F, 4, 2), -2, T("s32", 2), T(F, 2, 2))),
    ("SwiGlu", "dim in [-n, n-1], that dim even",
     (T(F, 2, 3), -1, T(F, 2, 1)), (T(F, 2, 4), -1, T(F, 2, 2))),
    ("Norm", "dims not repeated", (T(F, 2, 4), S(F, 2.0), A(1, 1), False, T(F, 2)),
     (T(F, 2, 4), S(F, 2.0), A(1), False, T(F, 2))),
    ("InplaceIndexFillTensor", "dim in [-n, n)", (T(F, 2, 4), 2, A(0), S(F, 1.0)), (T(F, 2, 4), 1, A(0), S(F, 1.0))),
    ("AvgPool2d", "kernelSize > 0",
     (T(F, 1, 4, 4, fmt=lib.ACL_FORMAT_NCL), A(0, 2), A(2, 2), A(0, 0), False, True, 0, 0,
      T(F, 1, 2, 2, fmt=lib.ACL_FORMAT_NCL)),
     (T(F, 1, 4, 4, fmt=lib.ACL_FORMAT_NCL), A(2, 2), A(2, 2), A(0, 0), False, True, 0, 0,
      T(F, 1, 2, 2, fmt=lib.ACL_FORMAT_NCL))),
    ("Convolution", "groups in [1, 65535]",
     (T(F, 1, 2, 5, fmt=lib.ACL_FORMAT_NCL), T(F, 3, 2, 2, fmt=lib.ACL_FORMAT_NCL), None, A(1), A(0), A(1), False,
      A(0), 0, T(F, 1, 3, 4, fmt=lib.ACL_FORMAT_NCL), 0),
     (T(F, 1, 2, 5, fmt=lib.ACL_FORMAT_NCL), T(F, 3, 2, 2, fmt=lib.ACL_FORMAT_NCL), None, A(1), A(0), A(1), False,
      A(0), 1, T(F, 1, 3, 4, fmt=lib.ACL_FORMAT_NCL), 0)),
    ("Convolution", "stride > 0",
     (T(F, 1, 2, 5, fmt=lib.ACL_FORMAT_NCL), T(F, 3, 2, 2, fmt=lib.ACL_FORMAT_NCL), None, A(0), A(0), A(1), False,
      A(0), 1, T(F, 1, 3, 4, fmt=lib.ACL_FORMAT_NCL), 0),
     (T(F, 1, 2, 5, fmt=lib.ACL_FORMAT_NCL), T(F, 3, 2, 2, fmt=lib.ACL_FORMAT_NCL), None, A(1), A(0), A(1), False,
      A(0), 1, T(F, 1, 3, 4, fmt=lib.ACL_FORMAT_NCL), 0)),
    # scalar dtypes
    ("Norm", "pScalar FLOAT", (T(F, 2, 4), S("s32", 2), A(1), False, T(F, 2)),
     (T(F, 2, 4), S(F, 2.0), A(1), False, T(F, 2))),
    ("InplaceAdds", "other: no complex", (T(F, 4), S("c64", 1.0), S(F, 1.0)), (T(F, 4), S(F, -1.0), S(F, 1.0))),
    ("Muls", "other: converts with self", (T("s32", 4), S("c64", 1.0), T("s32", 4)),
     (T("s32", 4), S("s32", 3), T("s32", 4))),
    ("LeakyRelu", "negativeSlope FLOAT", (T(F, 4), S("c64", 0.1), T(F, 4)), (T(F, 4), S(F, 0.1), T(F, 4))),
]


@pytest.mark.parametrize("op, rule, bad, good", PRECONDITIONS,
                         ids=[f"{op}: {rule}" for op, rule, *_ in PRECONDITIONS])
def test_documented_preconditions_are_checked(dev, op, rule, bad, good):
    from cannops.native._aclnn import lib
    assert call_op(dev, op, *good) == 0, f"aclnn{op}: a call within '{rule}' is refused"
    assert call_op(dev, op, *bad) == lib.ACLNN_ERR_PARAM_INVALID, f"aclnn{op}: '{rule}' is not checked"


def _shape(rank):
    return (1,) * (rank - 1) + (4,) if rank else ()


def _same(n, tail=()):
    """A call with n tensors of one shape (then `tail`'s arguments)."""
    return lambda s: tuple(T(F, *s) for _ in range(n)) + tail


# operator -> (its parameter in the page's 维度(shape) column, its call for a shape): the
# shape-agnostic operators, whose ranks the pages state
RANK_PROBES = {
    **{op: ("self", _same(2)) for op in ("Abs", "Neg", "Relu", "Sigmoid", "Silu", "Gelu", "FastGelu",
                                         "Hardsigmoid", "Hardswish", "Sqrt", "Log")},
    "Elu": ("self", lambda s: (T(F, *s), S(F, 1.0), S(F, 1.0), S(F, 1.0), T(F, *s))),
    "GeluV2": ("x", lambda s: (T(F, *s), 0, T(F, *s))),
    "LeakyRelu": ("self", lambda s: (T(F, *s), S(F, 0.1), T(F, *s))),
    "Softplus": ("self", lambda s: (T(F, *s), S(F, 1.0), S(F, 20.0), T(F, *s))),
    "Add": ("self", lambda s: (T(F, *s), T(F, *s), S(F, 1), T(F, *s))),
    "Sub": ("self", lambda s: (T(F, *s), T(F, *s), S(F, 1), T(F, *s))),
    "EqTensor": ("self", lambda s: (T(F, *s), T(F, *s), T("bool", *s))),
    "Cast": ("self", lambda s: (T(F, *s), acl("f16"), T("f16", *s))),
    "Adds": ("self", lambda s: (T(F, *s), S(F, 1.0), S(F, 1.0), T(F, *s))),
    "InplaceAdds": ("selfRef", lambda s: (T(F, *s), S(F, 1.0), S(F, 1.0))),
    "InplaceSubs": ("selfRef", lambda s: (T(F, *s), S(F, 1.0), S(F, 1.0))),
    "InplaceAdd": ("selfRef", lambda s: (T(F, *s), T(F, *s), S(F, 1.0))),
    "InplaceSub": ("selfRef", lambda s: (T(F, *s), T(F, *s), S(F, 1.0))),
    "InplaceCopy": ("selfRef", _same(2)),
    "GtScalar": ("self", lambda s: (T(F, *s), S(F, 0.0), T("bool", *s))),
    "Clamp": ("self", lambda s: (T(F, *s), S(F, 0.0), S(F, 1.0), T(F, *s))),
    "Softmax": ("self", lambda s: (T(F, *s), -1 if s else 0, T(F, *s))),
    "Roll": ("x", lambda s: (T(F, *s), A(1), A(len(s) - 1 if s else 0), T(F, *s))),
    "InplaceIndexFillTensor": ("selfRef", lambda s: (T(F, *s), 0, A(0), S(F, 1.0))),
}


# operator -> why a rank below the page's lowest is taken
LOWEST_RANK_NOT_CHECKED = {
    "Clamp": "the 维度 column says 1-8, but the page's return codes and op_api's CheckShape "
             "(OP_CHECK_MAX_DIM only) refuse only more than 8 dims: the source followed",
    "Log": "the 维度 column says 1-8, but the return codes name only 'more than 8' and op_api "
           "checks the same shape of self and out only: the source followed",
}


@pytest.mark.parametrize("op", sorted(RANK_PROBES))
def test_simulator_ranks_follow_the_pages(dev, op):
    """The page's 维度(shape) column: its highest rank is taken and one more refused; where
    it states a lowest rank above 0, one less is refused."""
    param, make = RANK_PROBES[op]
    lo, hi = OPS[op]["dims"][param]
    assert call_op(dev, op, *make(_shape(hi))) == 0, f"aclnn{op}: {hi}-D {param} refused"
    assert call_op(dev, op, *make(_shape(hi + 1))) == lib.ACLNN_ERR_PARAM_INVALID, \
        f"aclnn{op}: {hi + 1}-D {param} taken ({OPS[op]['page']}: {lo}-{hi})"
    if lo > 0 and op not in LOWEST_RANK_NOT_CHECKED:
        assert call_op(dev, op, *make(_shape(lo - 1))) == lib.ACLNN_ERR_PARAM_INVALID, \
            f"aclnn{op}: {lo - 1}-D {param} taken ({OPS[op]['page']}: {lo}-{hi})"


# (operator, dtype) -> why the simulator on 310P and the 310P data differ
_BF16_SOURCE = ("the page lists BFLOAT16 with no Atlas inference series note; op_api takes BF16 "
                "on DAV_2201 / regbase only (aclnn_sigmoid.cpp CheckSocVersionIsSupportBf16, "
                "aclnn_norm.cpp, elu.cpp, aclnn_argsort.cpp): the source followed, no BF16 on 310P")
NOT_TAKEN_310P = {
    **{(op, "bf16"): _BF16_SOURCE for op in ("Elu", "InplaceCopy", "InplaceMuls", "Norm", "Roll", "Sigmoid",
                                             "Argsort")},
    **{("Argsort", d): "the page's A2 / A3 note removes UINT16/32/64 and names no 310P; "
                       "aclnn_argsort.cpp's default (310P) list has none of them: source followed"
       for d in ("u16", "u32", "u64")},
    **{("Cat", d): "the page's 310P note removes BFLOAT16 only; aclnn_cat.cpp's DAV_2002 list has no "
                   "UINT16/32/64 (the A2 / A3 note removes them too): source followed"
       for d in ("u16", "u32", "u64")},
    ("Convolution", "bf16"): "the page's constraint table (约束说明, not extracted) says the Atlas "
                             "inference series takes no BFLOAT16 input / weight",
    ("WeightQuantBatchMatmulV2", "bf16"): "the page's Atlas inference series block (约束说明, not extracted) "
                                          "says x FLOAT16 only, as op_api's DAV_2002 list does",
}
NOT_LISTED_310P = {
    ("UpsampleNearest2d", "f32"): "the page's 310P note refuses FLOAT32 (and BFLOAT16); op_api's default "
                                  "(DAV_2002) list has FLOAT and sends it to the AI core path as on A2, and "
                                  "ggml-cann's 310P UPSCALE calls it with f32: source followed",
}
# cubeMathType 0 (KEEP_DTYPE) is not offered for FLOAT on the 310P's cube: the 310P probes
# of the cube operators ask for 1, as ggml-cann's ASCEND_310P branches do
PROBES_310P = {
    "Mm": ("self", lambda d: (T(d, 2, 3), T(d, 3, 4), T(d, 2, 4), 1)),
    "Matmul": ("self", lambda d: (T(d, 2, 3), T(d, 3, 4), T(d, 2, 4), 1)),
    "BatchMatMul": ("self", lambda d: (T(d, 2, 2, 3), T(d, 2, 3, 4), T(d, 2, 2, 4), 1)),
    "Mv": ("self", lambda d: (T(d, 2, 3), T(d, 3), T(d, 2), 1)),
    "AvgPool2d": ("self", lambda d: (T(d, 1, 4, 4, fmt=NCL), A(2, 2), A(2, 2), A(0, 0), False, True, 0, 1,
                                     T(d, 1, 2, 2, fmt=NCL))),
    "Convolution": ("input", lambda d: (T(d, 1, 2, 5, fmt=NCL), T(d, 3, 2, 2, fmt=NCL), None, A(1), A(0), A(1),
                                        False, A(0), 1, T(d, 1, 3, 4, fmt=NCL), 1)),
}


def _offered_on_310p():
    from cannops.backend.cann.soc import UNOFFERED
    return sorted(op for op in PROBES if op not in UNOFFERED["310P"] and OPS[op].get("310P"))


@pytest.mark.parametrize("op", _offered_on_310p())
def test_simulator_takes_what_310p_lists(dev, monkeypatch, op):
    """The same probes on the simulated Ascend310P3 (its operator checks, then the SoC's
    own, aclnn.check_soc), against the page's Atlas 推理系列产品 dtypes."""
    from cannops.backend.cann.sim import aclnn, state
    monkeypatch.setattr(state.STATE, "soc", "Ascend310P3")
    prepare = aclnn.OPS[op]
    monkeypatch.setitem(aclnn.OPS, op, lambda *a: aclnn.check_soc(op, prepare(*a)))
    _probe_against_page(dev, op, "310P", PROBES_310P.get(op, PROBES[op]), NOT_TAKEN_310P, NOT_LISTED_310P)


def test_undocumented_operator_is_offered_on_310p_without_bf16(dev, monkeypatch):
    """A page silent on the 310P offers its operator there with its dtypes less BFLOAT16
    unless the source registers no 310P kernel. No silent page's operator is offered today:
    aclnnRotaryPositionEmbedding (registered for A2 only), taken off UNOFFERED, stands in."""
    from cannops.backend.cann import soc
    from cannops.backend.cann.sim import aclnn, state
    op = "RotaryPositionEmbedding"
    assert OPS[op]["support"]["310P"] == "not documented"
    code, msg = _prepare_on(monkeypatch, "Ascend310P3", op)
    assert "not ascend310p" in msg, msg   # as it stands: refused
    monkeypatch.setitem(soc.UNOFFERED, "310P", {k: v for k, v in soc.UNOFFERED["310P"].items() if k != op})
    monkeypatch.setattr(state.STATE, "soc", "Ascend310P3")
    prepare = aclnn.OPS[op]
    monkeypatch.setitem(aclnn.OPS, op, lambda *a: aclnn.check_soc(op, aclnn.check_soc(op) or prepare(*a)))
    param, make = PROBES[op]
    taken = {d for d in ALL if call_op(dev, op, *make(d)) == 0}
    assert taken == set(OPS[op]["table"][param]) & set(ALL) - {"bf16"}, sorted(taken)
