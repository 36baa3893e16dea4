"""Why the CANN rules refuse an op node, as data: which check refused it, on which SoC, for
which argument or aclnn operator, with the reason the check gives.

rules.py makes a `Refusal` where a check fails; evidence.py reads its fields to weigh it;
`str()` renders the sentence that `ops support` and `ops test` print (unchanged by being
data). Neither side parses the other's text, and this module imports neither of them.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Failed(enum.Enum):
    """Which of a rule's checks refused a node (rules.Rule's fields), or why no rule ran."""
    NO_RULE = "no rule"              # no rule for the node's op
    NO_HANDLER = "no handler"        # a rule, but no native handler for the node
    MISSING = "missing"              # a tensor of the rule's `types` is absent
    TYPE = "type"                    # a tensor's type is not among the rule's `types`
    CHECK = "check"                  # one of the rule's `checks` (or a later version's `From`)
    SOC = "soc"                      # the rule's `soc` checks: ggml-cann's #ifdef branch
    EVERY_RULE_SOC = "every rule's soc"   # rules.SOC_CHECKS: a SoC's checks of every rule
    NARROWER = "narrower"            # the rule's `narrower`: where ggml-cann's output is wrong
    UNOFFERED = "unoffered"          # the handler calls an aclnn operator the SoC does not offer


NO_RULE_REASON = "no aclnn mapping in the CANN backend"
NO_HANDLER_REASON = "no native handler"


@dataclass(frozen=True)
class Refusal:
    op_key: str                   # the node's op ("ADD", "UNARY:SILU")
    check: Failed
    soc: str                      # the SoC family judged ("910B", "310P")
    reason: str = ""              # the check's own words (for UNOFFERED: the SoC's)
    argument: str = ""            # MISSING, TYPE: the tensor's role ("src0", "dst")
    type: str = ""                # TYPE: the tensor's type
    allowed: tuple[str, ...] = ()  # TYPE: the types the rule takes, sorted
    operator: str = ""            # UNOFFERED: the aclnn operator without its prefix ("RmsNorm")

    def __str__(self) -> str:
        if self.check is Failed.MISSING:
            return f"{self.argument} is missing"
        if self.check is Failed.TYPE:
            return f"{self.argument} type {self.type} not in {{{', '.join(self.allowed)}}}"
        if self.check is Failed.UNOFFERED:
            return f"aclnn{self.operator} on {self.soc}: {self.reason}"
        return self.reason


def no_rule(op_key: str, soc: str) -> Refusal:
    return Refusal(op_key, Failed.NO_RULE, soc, NO_RULE_REASON)


def no_handler(op_key: str, soc: str) -> Refusal:
    return Refusal(op_key, Failed.NO_HANDLER, soc, NO_HANDLER_REASON)
