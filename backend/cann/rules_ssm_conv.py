"""CANN rule of SSM_CONV (native/aclnn/ops_ssm_conv.c): a depthwise 1-D aclnnConvolution."""
from __future__ import annotations

from cannops.cases.graph import Tensor

from .rules import RULES, Rule

F32 = frozenset({"f32"})


def _unit_stride(node: Tensor) -> bool:
    return node.src[0].nb[0] == 4 and node.src[1].nb[0] == 4


RULES.update({
    "SSM_CONV": Rule(("Convolution",), {"src0": F32, "src1": F32, "dst": F32},
                     ((_unit_stride, "conv_x and weights need unit element stride"),)),
})
