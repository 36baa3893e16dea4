"""The catalogs' ops that no CANN rule maps to aclnn operators, each with why: these nodes are
refused on CANN0 and CANN-SIM ("no aclnn mapping in the CANN backend"), and have no rule,
native handler, aclnn declaration or simulator operator by design (`ops list ops --parts`;
tests/test_parts.py holds every op of the catalogs to a part or a reason here).

Each one is refused by ggml-cann 0.25.3 too: its supports_op has no case for it (`default:
return false`; for UNARY, its sub-op switch's default) and aclnn_ops.cpp no handler, read in
llama-cpp-python 0.3.36's vendor/llama.cpp/ggml/src/ggml-cann/ggml-cann.cpp. An op that gains
a rule leaves this table (a rule and a reason for having none are refused together).
"""
from __future__ import annotations

_GGML_CANN = "ggml-cann 0.25.3 has no handler for it (supports_op: default false)"
_BACKWARD = f"a training op: {_GGML_CANN}"
_RECURRENT = f"a recurrent-model op with no one aclnn operator for its scan: {_GGML_CANN}"
_UNARY_LEFT_OUT = f"a unary sub-op ggml-cann's unary switch leaves out: {_GGML_CANN}"

UNMAPPED: dict[str, str] = {
    "COL2IM_1D": _GGML_CANN,
    "CONV_3D": _GGML_CANN,
    "CONV_TRANSPOSE_2D": _GGML_CANN,
    "IM2COL_3D": _GGML_CANN,
    "CROSS_ENTROPY_LOSS_BACK": _BACKWARD,
    "GET_ROWS_BACK": _BACKWARD,
    "OPT_STEP_ADAMW": _BACKWARD,
    "OPT_STEP_SGD": _BACKWARD,
    "RMS_NORM_BACK": _BACKWARD,
    "ROPE_BACK": _BACKWARD,
    "SILU_BACK": _BACKWARD,
    "SOFT_MAX_BACK": _BACKWARD,
    "GATED_DELTA_NET": _RECURRENT,
    "RWKV_WKV6": _RECURRENT,
    "RWKV_WKV7": _RECURRENT,
    "SSM_SCAN": _RECURRENT,
    "DSV4_HC_COMB": _GGML_CANN,
    "DSV4_HC_POST": _GGML_CANN,
    "DSV4_HC_PRE": _GGML_CANN,
    "LIGHTNING_INDEXER": _GGML_CANN,
    "TOP_K": _GGML_CANN,
    "UNARY:CEIL": _UNARY_LEFT_OUT,
    "UNARY:EXPM1": _UNARY_LEFT_OUT,
    "UNARY:FLOOR": _UNARY_LEFT_OUT,
    "UNARY:ROUND": _UNARY_LEFT_OUT,
    "UNARY:TRUNC": _UNARY_LEFT_OUT,
    "UNARY:XIELU": _UNARY_LEFT_OUT,
}
