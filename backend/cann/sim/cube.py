"""The cube unit's math modes (cubeMathType) for FLOAT inputs, per simulated SoC family:
how the cube takes f32 under each mode, or that the mode is refused. The matmul pages
(aclnnMm, aclnnMatmul, aclnnBatchMatMul) and aclnnConvolution's SoC columns give them; the
checks on half types (2 refuses BFLOAT16, 3 non-FLOAT) stay with each operator."""
from __future__ import annotations

from .aclnn import invalid
from .runtime import soc_family

KEEP, HF32, F16 = "f32", "hf32", "f16"
FLOAT_INPUTS = {
    # Atlas A2 / A3: an f32 cube; 1 and 3 round to HFLOAT32, 2 to FLOAT16
    "910B": {0: KEEP, 1: HF32, 2: F16, 3: HF32, 4: KEEP},
    # Atlas inference series (aclnnMm: "当输入数据类型为FLOAT32时不支持cubeMathType=0",
    # "cubeMathType=1，当输入数据类型为FLOAT32时，会转换为FLOAT16计算", "不支持cubeMathType=3";
    # aclnnConvolution's 310P column alike): no f32 cube, no HFLOAT32
    "310P": {0: None, 1: F16, 2: F16, 3: None, 4: KEEP},
}


def float_mode(cube: int) -> str:
    """How the simulated SoC's cube takes FLOAT inputs under cubeMathType `cube`."""
    soc = soc_family()
    mode = FLOAT_INPUTS[soc].get(cube, KEEP)
    if mode is None:
        raise invalid(f"cubeMathType {cube} is not supported for FLOAT inputs on {soc} "
                      f"(the Atlas inference series' cube has no f32 / HFLOAT32)")
    return mode
