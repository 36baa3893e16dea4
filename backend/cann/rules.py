"""What the CANN backend can run: an explicit, declarative rule per ggml op.

A rule names the aclnn operators the native handler calls, the ggml types each tensor
of the node may have, and further conditions with the reason given when they fail.
`supports(graph)` checks every op node of a case without running anything, so
`ops support` answers from here and `ops test` prints `not supported [CANN…]` with the
reason. The types are what both the handler (ggml-cann's mapping) and the aclnn
operators it calls accept on Atlas A2/A3.

The SoC of the device judged ("910B": Atlas A2 / A3, "310P": Atlas inference series; see
soc.py) adds the checks of ggml-cann's `#ifdef ASCEND_310P` branches, per rule in its `soc`
field, for every rule those of SOC_CHECKS (the aclnn pages' limits on that SoC), and refuses
a node whose handler would call an operator the SoC does not offer (soc.UNOFFERED, by
its page and kernel registration; `calls` says which operators a handler calls only for
some nodes).

A refusal is data (refusal.py's Refusal: the check that failed, its SoC, argument or aclnn
operator, and its reason), printed by its str(). Each answer carries its evidence level
(evidence.py, which weighs a refusal's fields: a device run, a device path, a page, a
build's claim), which `supports` returns and `explain` prints with its source.

Adding an op family: a rules_<family>.py beside this file with one entry per op, keyed by
the node's op_key ("ADD", "UNARY:SILU"), next to a handler in native/aclnn/ops_<family>.c.

The rules follow ggml-cann of the catalog version in use (cases/versions.py): a rule is
v0.20.2's, and `From` entries add the checks ggml-cann's supports_op gained at a later
version (ROPE with a rotated-dims offset is refused from 0.25.3 on).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

from cannops.backend.base import Support
from cannops.cases.graph import Graph, Tensor
from cannops.cases.plugins import load_plugins
from cannops.cases.versions import at_or_after, current

from . import evidence
from .refusal import Failed, Refusal, no_handler, no_rule
from .soc import DEFAULT as DEFAULT_SOC, unoffered

FLOAT = frozenset({"f32", "f16", "bf16"})
ELEMENTS = FLOAT | {"f64", "i8", "i16", "i32", "i64"}   # types with an element aclDataType
Check = tuple[Callable[[Tensor], bool], str]


@dataclass(frozen=True)
class From:
    """What ggml-cann's supports_op of a later catalog version checks on top of the
    versions before: from `version` on, `checks` apply too."""
    version: str
    checks: tuple[Check, ...] = ()


@dataclass(frozen=True)
class Rule:
    aclnn: tuple[str, ...]                                 # operators the handler calls
    types: Mapping[str, frozenset] = field(default_factory=dict)   # "dst", "src0", ... -> types
    checks: tuple[Check, ...] = ()
    # where the rule accepts cases that ggml-cann v0.20.2's supports_op refuses: which, and
    # why they are kept (the aclnn operators documented for them, checked on CANN-SIM)
    beyond: str = ""
    # where only some cases go beyond: which (None: every case the rule accepts)
    beyond_when: Callable[[Tensor], bool] | None = None
    # checks refusing what ggml-cann's supports_op claims, each for a measured reason:
    # ggml-cann's output there is wrong (docs/rules-vs-ggml-cann.md's table)
    narrower: tuple[Check, ...] = ()
    # per SoC family, the further checks of ggml-cann's branches for it (#ifdef ASCEND_310P)
    soc: Mapping[str, tuple[Check, ...]] = field(default_factory=dict)

    changes: tuple[From, ...] = ()     # ggml-cann's later versions
    # operator -> whether the handler calls it for this node on this SoC family, for the
    # operators of `aclnn` a handler calls only on some paths (the others: always); an
    # operator called that the SoC does not offer (soc.UNOFFERED) refuses the node
    calls: Mapping[str, Callable[[Tensor, str], bool]] = field(default_factory=dict)

    def goes_beyond(self, node: Tensor) -> bool:
        """Whether the rule accepts `node` where ggml-cann v0.20.2 does not."""
        return bool(self.beyond) and (self.beyond_when is None or self.beyond_when(node))

    def checks_at(self, version: str) -> tuple[Check, ...]:
        """The checks of the rule as ggml-cann of `version` has them."""
        return self.checks + tuple(c for f in self.changes if at_or_after(version, f.version) for c in f.checks)

    def check(self, node: Tensor, soc: str = DEFAULT_SOC, version: str | None = None) -> Refusal | None:
        """None when the node is supported on `soc` (by the rules of `version`, default: the
        catalog version in use), else why not."""
        key = node.op_key
        for role, allowed in self.types.items():
            t = node if role == "dst" else _src(node, int(role[3:]))
            if t is None:
                return Refusal(key, Failed.MISSING, soc, argument=role)
            if t.type.name not in allowed:
                return Refusal(key, Failed.TYPE, soc, argument=role, type=t.type.name, allowed=tuple(sorted(allowed)))
        checks = self.checks_at(version or current()) if self.changes else self.checks
        for failed, group in ((Failed.CHECK, checks), (Failed.SOC, self.soc.get(soc, ())),
                              (Failed.EVERY_RULE_SOC, SOC_CHECKS.get(soc, ())), (Failed.NARROWER, self.narrower)):
            for ok, reason in group:
                if not ok(node):
                    return Refusal(key, failed, soc, reason)
        return next(iter(self.unoffered_calls(node, soc)), None)

    def _calls(self, op: str, node: Tensor, soc: str) -> bool:
        return op not in self.calls or self.calls[op](node, soc)

    def called(self, node: Tensor, soc: str) -> list[str]:
        """The aclnn operators the handler calls for `node` on a SoC of family `soc`."""
        return [op for op in self.aclnn if self._calls(op, node, soc)]

    def unoffered_calls(self, node: Tensor, soc: str) -> list[Refusal]:
        """A refusal per operator called for `node` that `soc` does not offer (soc.UNOFFERED)."""
        return [Refusal(node.op_key, Failed.UNOFFERED, soc, why, operator=op)
                for op in self.aclnn if (why := unoffered(soc, op)) and self._calls(op, node, soc)]

    def soc_refusals(self, node: Tensor, soc: str) -> list[Refusal]:
        """Every refusal of `node` that is `soc`'s own: the rule's checks for that SoC
        (ggml-cann's #ifdef branch), those of every rule there, an operator not offered."""
        groups = ((Failed.SOC, self.soc.get(soc, ())), (Failed.EVERY_RULE_SOC, SOC_CHECKS.get(soc, ())))
        found = [Refusal(node.op_key, failed, soc, reason) for failed, group in groups
                 for ok, reason in group if not ok(node)]
        return found + self.unoffered_calls(node, soc)


def _src(node: Tensor, i: int) -> Tensor | None:
    return node.src[i] if i < len(node.src) else None


def _tensors(node: Tensor):
    return [node] + [s for s in node.src if s is not None]


def no_bf16(node: Tensor) -> bool:
    return all(t.type.name != "bf16" for t in _tensors(node))


def refused(reason: str) -> tuple[Check, ...]:
    """A `soc` entry that refuses every case of the op on that SoC."""
    return ((lambda node: False, reason),)


# every rule's further checks on a SoC: the aclnn pages of the Atlas inference series
# (310P) list no BFLOAT16 for the operators the handlers call (aclnnCast, aclnnAdd, aclnnMm,
# aclnnGatherV2, aclnnRmsNorm, ...: "Atlas 推理系列产品：不支持BFLOAT16"), where ggml-cann's
# supports_op lets most ops through with any type
SOC_CHECKS: dict[str, tuple[Check, ...]] = {
    "310P": ((no_bf16, "bf16 on 310P: the aclnn operators of the Atlas inference series take "
                       "no BFLOAT16"),),
}


def same_type(node: Tensor) -> bool:
    return node.src[0].type == node.type


def unary(op: str) -> Rule:
    """One aclnn operator, src0 and dst of one float type (UNARY and its kin)."""
    return Rule((op,), {"src0": FLOAT, "dst": FLOAT}, ((same_type, "src0 and dst types differ"),))


RULES: dict[str, Rule] = {}   # op_key -> Rule; filled by the rules_<family>.py modules


def refusal(node: Tensor, has_handler: Callable[[Tensor], bool] | None,
            soc: str = DEFAULT_SOC) -> Refusal | None:
    """Why the CANN backend cannot run op node `node` on a SoC of family `soc` (None: a
    rule accepts it)."""
    rule = RULES.get(node.op_key)
    if rule is None:
        return no_rule(node.op_key, soc)
    why = rule.check(node, soc)
    if why is None and has_handler is not None and not has_handler(node):
        return no_handler(node.op_key, soc)
    return why


def judge_node(node: Tensor, has_handler: Callable[[Tensor], bool] | None = None, soc: str = DEFAULT_SOC,
               op: str | None = None) -> tuple[Refusal | None, evidence.Evidence]:
    """(why the node is refused on `soc` or None, the evidence of that answer); `op`: the
    case's op, default the node's."""
    why = refusal(node, has_handler, soc)
    rule, name = RULES.get(node.op_key), op or node.op
    if why:
        # on another SoC than the 910B, every reason of that SoC's own weighs too
        others = rule.soc_refusals(node, soc) if rule is not None and soc != DEFAULT_SOC else []
        return why, evidence.refused(why, others, name)
    assert rule is not None   # a node accepted has its rule (refusal() says NO_RULE otherwise)
    return None, evidence.accepted(node.op_key, rule.called(node, soc), rule.beyond if rule.goes_beyond(node) else "",
                                   soc, name)


def judge(graph: Graph, has_handler: Callable[[Tensor], bool] | None = None, soc: str = DEFAULT_SOC,
          op: str | None = None) -> list[tuple[Tensor, Refusal | None, evidence.Evidence]]:
    """(node, refusal or None, evidence) per op node of the graph, up to the first refused."""
    out = []
    for node in (n for n in graph.nodes() if not n.is_view()):
        out.append((node, *judge_node(node, has_handler, soc, op)))
        if out[-1][1]:
            break
    return out


def supports(graph: Graph, has_handler: Callable[[Tensor], bool] | None = None,
             soc: str = DEFAULT_SOC, op: str | None = None) -> Support:
    """Every op node of the graph must have a rule that accepts it on SoC family `soc` (and,
    when given, a native handler). The answer carries its evidence level (evidence.py; `op`:
    the case's op, default the node's)."""
    judged = judge(graph, has_handler, soc, op)
    level = evidence.of_case(judged).level
    if judged and judged[-1][1]:
        node, why, _ = judged[-1]
        return Support(False, f"{node.op_key}: {why}", level)
    return Support(True, evidence=level)


def explain(graph: Graph, has_handler: Callable[[Tensor], bool] | None = None,
            soc: str = DEFAULT_SOC, op: str | None = None) -> list[str]:
    """Per op node: the rule that accepts it (its aclnn operators, and why it goes beyond
    ggml-cann where it does) or why it is refused, then the evidence of that answer
    (evidence.py; `op`: the case's op); `ops support --explain`."""
    lines = []
    for node in (n for n in graph.nodes() if not n.is_view()):
        key = node.op_key
        why, level = judge_node(node, has_handler, soc, op)
        rule = RULES.get(key)
        if why:
            narrower = why.check is Failed.NARROWER
            lines.append(f"{key}: refused: {why}" + ("; ggml-cann claims it (narrower)" if narrower else ""))
        else:
            assert rule is not None   # accepted: judge_node found its rule
            lines.append(f"{key}: accepted, runs {', '.join('aclnn' + a for a in rule.aclnn)}"
                         + (f"; beyond ggml-cann v0.20.2: {rule.beyond}" if rule.beyond else ""))
        lines.append(f"  evidence: {level}")
    return lines


# every family's entries, in rules_<family>.py beside this file (each does RULES.update),
# next to native/aclnn/ops_<family>.c
load_plugins(__package__, prefix="rules_")
