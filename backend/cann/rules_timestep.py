"""Rule of TIMESTEP_EMBEDDING (native/aclnn/ops_timestep.c)."""
from __future__ import annotations

from .rules import RULES, Rule

F32 = frozenset({"f32"})


def _timesteps_vector(node) -> bool:
    t = node.src[0]
    return t.ne[1] == t.ne[2] == t.ne[3] == 1 and node.param_i32(0) >= 2


RULES.update({
    "TIMESTEP_EMBEDDING": Rule(("Arange", "Muls", "Exp", "Mul", "Cos", "Sin", "InplaceFillScalar"),
                               {"src0": F32, "dst": F32},
                               ((_timesteps_vector, "timesteps must be a vector and dim >= 2"),)),
})
