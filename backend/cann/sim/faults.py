"""Test-only precision faults of the simulator's operators (CANN_SIM_FAULT=name, read at
aclInit), as OPS_CANN_FAULT plants wrong calls in ops' own layer: an operator that computes
less precisely than its page says, for the numeric blame of a toolkit client's case
(`ops tbo`, docs/trace-and-blame.md) to find. Only the stored results are spoiled: the
blame's float64 evaluation of the same plan computes what the operator should have.

  softmax-bf16   aclnnSoftmax's results rounded through BF16 (as a kernel that keeps its
                 exponentials in BF16), whatever its output type.
"""
from __future__ import annotations

import os

import numpy as np

from .binding import lib

from . import dtypes
from .refusals import SimError

SWITCH = "CANN_SIM_FAULT"
FAULTS = {"softmax-bf16": ("Softmax", lib.ACL_BF16)}   # name -> (operator, type its results go through)


def fault_from_env() -> str | None:
    """CANN_SIM_FAULT: one name of FAULTS, unset or empty for none; anything else refused."""
    name = os.environ.get(SWITCH, "")
    if not name:
        return None
    if name not in FAULTS:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"{SWITCH}={name[:40]!r} is not one of {', '.join(sorted(FAULTS))}")
    return name


def spoiled(fault: str | None, operator: str, results: tuple) -> tuple:
    """The operator's results as the planted fault leaves them (as they are without one)."""
    if fault is None or FAULTS[fault][0] != operator:
        return results
    through = FAULTS[fault][1]
    return tuple(dtypes.convert(np.asarray(r), through).astype(np.asarray(r).dtype) for r in results)
