"""Refusals: SimError, by which an entry point returns an ACL code, and the rules a client
may be let off (CANN_SIM_ALLOW) or have its refusals logged for (CANN_SIM_LOG)."""
from __future__ import annotations

import os
import sys

from .binding import lib


class SimError(Exception):
    """An entry point refuses: `code` is returned, the message is aclGetRecentErrMsg."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)


# Every refusal on stderr: a foreign client (ggml-cann through the simulated toolkit) may
# ignore a NULL descriptor and hand it to the next call, whose error then hides the rule
# that really refused. CANN_SIM_LOG=1 / 0 forces it on / off; by default it is on in a
# toolkit client and off in ops' own layer, which reports every refusal itself.
LOG_REFUSALS = os.environ.get("CANN_SIM_LOG", "1" if "_cannsim" in sys.modules else "0") == "1"


# Rules a client may be let off (CANN_SIM_ALLOW=<rule>,...; read at aclInit), so that one
# documented violation does not hide everything behind it; each use is still printed as a
# finding. The real memory-safety checks stay.
RELAXATIONS = {
    "storage-shape": "aclCreateTensor: the storage shape need not cover the view (an empty "
                     "view may have negative storage dims); the memory the view reaches must "
                     "still lie in one live allocation when an operator runs",
    "tensor-data-align": "aclCreateTensor: tensorData need not be 32-byte aligned (its page "
                         "says it must be, or the behaviour is undefined); ggml-cann hands a "
                         "view's own data pointer (tensor->data, base + view offset) instead "
                         "of the aligned base and an element offset",
    "fias-strided-inputs": "aclnnFusedInferAttentionScoreV2: key, value and pseShift may be "
                           "strided views (its page marks them non-contiguous ×; the 910B CI "
                           "passes ggml-cann's FLASH_ATTN_EXT, which hands over ggml's K / V "
                           "with BSND strides and a mask broadcast over heads by a 0 stride)",
    "origin-format": "an operator whose page lists format ND only takes an origin format "
                     "(NCL, NCHW, NHWC, NCDHW, NDHWC, NC) tagging the same plain memory (the "
                     "910B CI passes ggml-cann's CONV_TRANSPOSE_1D, which zeroes an NCL dst)",
    "scalar-out-shape": "a reduction to a 0-d result takes a [1] out (the 910B CI passes "
                        "ggml-cann's CROSS_ENTROPY_LOSS, whose ReduceSum writes a [1] out)",
    "unoffered-operator": "an aclnn operator that neither its page nor its kernel "
                          "registration offers on the simulated SoC (soc.UNOFFERED: on the "
                          "310P aclnnCircularPad2d, FusedInferAttentionScoreV2, "
                          "RotaryPositionEmbedding) runs there as on the 910B",
    "async-copy-align": "aclrtMemcpyAsync takes device addresses that are not 64-byte aligned "
                        "(an older page asked for it, the current hicann/runtime one does not; "
                        "the 910B CI passes ggml-cann's IM2COL, which copies from 32-byte offsets)",
}


def allowed_from_env() -> frozenset[str]:
    names = frozenset(n for n in os.environ.get("CANN_SIM_ALLOW", "").split(",") if n)
    unknown = sorted(names - RELAXATIONS.keys())
    if unknown:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"CANN_SIM_ALLOW: unknown rule {unknown[0]!r} (known: {', '.join(RELAXATIONS)})")
    return names
