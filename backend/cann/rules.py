"""What the CANN backend can run: an explicit, declarative rule per ggml op.

A rule names the aclnn operators the native handler calls, the ggml types each tensor
of the node may have, and further conditions with the reason given when they fail.
`supports(graph)` checks every op node of a case without running anything, so
`ops support` answers from here and `ops test` prints `not supported [CANN…]` with the
reason. The types are what both the handler (ggml-cann's mapping) and the aclnn
operators it calls accept on Atlas A2/A3.

Adding an op family: one entry per op (key as the NumPy reference's: "ADD",
"UNARY:SILU"), next to a handler in native/aclnn/ops_<family>.c.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from cannops.backend.base import Support
from cannops.cases.graph import Graph, Tensor

FLOAT = frozenset({"f32", "f16", "bf16"})
ELEMENTS = FLOAT | {"f64", "i8", "i16", "i32", "i64"}   # types with an element aclDataType
Check = tuple[Callable[[Tensor], bool], str]


@dataclass(frozen=True)
class Rule:
    aclnn: tuple[str, ...]                                 # operators the handler calls
    types: Mapping[str, frozenset] = field(default_factory=dict)   # "dst", "src0", ... -> types
    checks: tuple[Check, ...] = ()
    # where the rule accepts cases that ggml-cann v0.20.2's supports_op refuses: which, and
    # why they are kept (the aclnn operators documented for them, checked on CANN-SIM)
    beyond: str = ""

    def check(self, node: Tensor) -> str | None:
        """None when the node is supported, else why not."""
        for role, allowed in self.types.items():
            t = node if role == "dst" else _src(node, int(role[3:]))
            if t is None:
                return f"{role} is missing"
            if t.type.name not in allowed:
                return f"{role} type {t.type.name} not in {{{', '.join(sorted(allowed))}}}"
        for ok, reason in self.checks:
            if not ok(node):
                return reason
        return None


def _src(node: Tensor, i: int) -> Tensor | None:
    return node.src[i] if i < len(node.src) else None


def _same_type(node: Tensor) -> bool:
    return node.src[0].type == node.type


def unary(op: str) -> Rule:
    return Rule((op,), {"src0": FLOAT, "dst": FLOAT}, ((_same_type, "src0 and dst types differ"),))


def binary(op: str) -> Rule:
    return Rule((op,), {"src0": FLOAT, "src1": FLOAT, "dst": FLOAT})


def _convertible(node: Tensor) -> bool:
    s, d = node.src[0].type.name, node.type.name
    return s == d or (s in FLOAT and d in FLOAT)


def _floats(node: Tensor) -> bool:
    return node.src[0].type.name in FLOAT and node.type.name in FLOAT


def copy(floats_only: bool = False) -> Rule:
    checks = ((_convertible, "only float types convert into each other"),)
    if floats_only:
        checks += ((_floats, "an integer copy: ggml-cann v0.20.2 copies f32 / f16 / bf16 only"),)
    return Rule(("InplaceCopy", "Cast"), {"src0": ELEMENTS, "dst": ELEMENTS}, checks)


def _no_bias(node: Tensor) -> bool:
    return node.param_f32(1) == 0.0


def _unit_stride(node: Tensor) -> bool:
    return node.src[0].nb[0] == 4 and node.src[1].nb[0] == 4


RULES: dict[str, Rule] = {
    # UNARY, as ggml-cann maps it (EXPM1, FLOOR, CEIL, ROUND, TRUNC, XIELU have no mapping)
    "UNARY:ABS": unary("Abs"),
    "UNARY:NEG": unary("Neg"),
    "UNARY:SGN": unary("Sign"),
    "UNARY:STEP": unary("GtScalar"),
    "UNARY:EXP": unary("Exp"),
    "UNARY:TANH": unary("Tanh"),
    "UNARY:ELU": unary("Elu"),
    "UNARY:RELU": unary("Relu"),
    "UNARY:SIGMOID": unary("Sigmoid"),
    "UNARY:SILU": unary("Silu"),
    "UNARY:GELU": unary("Gelu"),
    # the operators whose documented formula is the op's; ggml-cann maps GELU_ERF to
    # aclnnGelu (the tanh form) and GELU_QUICK to aclnnGeluV2(0) (erf-GELU, not x*sigmoid(1.702x))
    "UNARY:GELU_ERF": unary("GeluV2"),
    "UNARY:GELU_QUICK": unary("FastGelu"),
    "UNARY:HARDSIGMOID": unary("Hardsigmoid"),
    "UNARY:HARDSWISH": unary("Hardswish"),
    "UNARY:SOFTPLUS": unary("Softplus"),
    # element-wise arithmetic, src1 repeated onto src0
    "ADD": binary("Add"),
    "ADD1": binary("Add"),
    "SUB": binary("Sub"),
    "MUL": binary("Mul"),
    "DIV": binary("Div"),
    # as ggml-cann v0.20.2, which refuses a bias (the handler would add it with InplaceAdds)
    "SCALE": Rule(("Muls", "InplaceAdds"), {"src0": FLOAT, "dst": FLOAT},
                  ((_no_bias, "a bias (b != 0): ggml-cann v0.20.2 refuses it"),)),
    # copies: aclnnInplaceCopy within a type, aclnnCast between float types; CONT and CPY
    # of floats only, as ggml-cann v0.20.2 (aclnn would copy integers too), DUP of any type
    "DUP": copy(),
    "CONT": copy(floats_only=True),
    "CPY": copy(floats_only=True),
    # a depthwise 1-D aclnnConvolution
    "SSM_CONV": Rule(("Convolution",), {"src0": frozenset({"f32"}), "src1": frozenset({"f32"}),
                                        "dst": frozenset({"f32"})},
                     ((_unit_stride, "conv_x and weights need unit element stride"),)),
}


def _load_family_rules() -> None:
    """Families added later keep their entries in rules_<family>.py beside this file
    (each does RULES.update({...})), next to native/aclnn/ops_<family>.c."""
    import importlib
    import pathlib
    for path in sorted(pathlib.Path(__file__).parent.glob("rules_*.py")):
        importlib.import_module(f"{__package__}.{path.stem}")


def rule_key(node: Tensor) -> str:
    return f"{node.op}:{node.op_desc}" if node.op in ("UNARY", "GLU") else node.op


def _refusal(node: Tensor, has_handler: Callable[[Tensor], bool] | None) -> str | None:
    """Why the CANN backend cannot run op node `node` (None: a rule accepts it)."""
    rule = RULES.get(rule_key(node))
    if rule is None:
        return "no aclnn mapping in the CANN backend"
    return rule.check(node) or (has_handler is not None and not has_handler(node)
                                and "no native handler") or None


def supports(graph: Graph, has_handler: Callable[[Tensor], bool] | None = None) -> Support:
    """Every op node of the graph must have a rule that accepts it (and, when given,
    a native handler)."""
    for node in graph.nodes():
        why = not node.is_view() and _refusal(node, has_handler)
        if why:
            return Support(False, f"{rule_key(node)}: {why}")
    return Support(True)


def explain(graph: Graph, has_handler: Callable[[Tensor], bool] | None = None) -> list[str]:
    """One line per op node: the rule that accepts it (its aclnn operators, and why it goes
    beyond ggml-cann where it does) or why it is refused; `ops support --explain`."""
    lines = []
    for node in (n for n in graph.nodes() if not n.is_view()):
        key, why = rule_key(node), _refusal(node, has_handler)
        if why:
            lines.append(f"{key}: refused: {why}")
            continue
        rule = RULES[key]
        lines.append(f"{key}: accepted, runs {', '.join('aclnn' + a for a in rule.aclnn)}"
                     + (f"; beyond ggml-cann v0.20.2: {rule.beyond}" if rule.beyond else ""))
    return lines


_load_family_rules()
