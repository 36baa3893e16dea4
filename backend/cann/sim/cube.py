"""The cube unit's math modes (cubeMathType) for FLOAT inputs, per simulated SoC family:
how the cube takes f32 under each mode, or that the mode is refused; and `Cube`, the
precision model of one product (operand rounding, f32 accumulation, output stage). The
matmul pages (aclnnMm, aclnnMatmul, aclnnBatchMatMul) and aclnnConvolution's SoC columns
give the modes; the checks on half types (2 refuses BFLOAT16, 3 non-FLOAT) stay with each
operator."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import dtypes
from .aclnn import as_f32, in_type, invalid
from .state import soc_family

KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32, USE_FP32_ADD = range(5)
KEEP, HF32, F16 = "f32", "hf32", "f16"
FLOAT_INPUTS: dict[str, dict[int, str | None]] = {   # SoC -> cubeMathType -> mode (None: refused)
    # Atlas A2 / A3: an f32 cube; 1 and 3 round to HFLOAT32, 2 to FLOAT16
    "910B": {0: KEEP, 1: HF32, 2: F16, 3: HF32, 4: KEEP},
    # Atlas inference series (aclnnMm: "当输入数据类型为FLOAT32时不支持cubeMathType=0",
    # "cubeMathType=1，当输入数据类型为FLOAT32时，会转换为FLOAT16计算", "不支持cubeMathType=3";
    # aclnnConvolution's 310P column alike): no f32 cube, no HFLOAT32
    "310P": {0: None, 1: F16, 2: F16, 3: None, 4: KEEP},
}
HF32_DROP = 12   # 910B's HF32 keeps 11 of f32's 23 mantissa bits (ops-nn's goldens)


def float_mode(cube: int) -> str:
    """How the simulated SoC's cube takes FLOAT inputs under cubeMathType `cube`."""
    soc = soc_family()
    mode = FLOAT_INPUTS[soc].get(cube, KEEP)
    if mode is None:
        raise invalid(f"cubeMathType {cube} is not supported for FLOAT inputs on {soc} "
                      f"(the Atlas inference series' cube has no f32 / HFLOAT32)")
    return mode


def hf32(a: np.ndarray) -> np.ndarray:
    """f32 values as the 910B cube reads them in HF32: the low 12 mantissa bits dropped,
    rounding half away from zero. The goldens' formula (ops-nn conv/conv2d_v2/tests/
    assets/golden.py simulate_hf32_precision, "Ascend910B": ((x >> 11) + 1) >> 1 << 12;
    matmul/common/tests/st/arch35/matmul_golden_util.py hf32_truncate_np alike)."""
    u = np.array(a, np.float32).view(np.uint32)   # a fresh copy, rounded in place
    u += np.uint32(1 << (HF32_DROP - 1))
    u &= np.uint32((0xFFFFFFFF << HF32_DROP) & 0xFFFFFFFF)
    return u.view(np.float32)


@dataclass(frozen=True)
class Cube:
    """A cube unit's product of operands of the deduced type `work` under cubeMathType
    `mode` (ops-nn matmul/common/op_host/op_api/matmul_util.cpp, SetMmSupportDType and
    Dav2201MatMulRule; conv/convolution_forward/op_host/op_api/aclnn_convolution.cpp,
    UpdateOutputDtype): f32 operands enter as the SoC's `float_mode` says (f32, HF32 or
    f16); USE_FP16 also makes the kernel's output FLOAT16 whatever out is (cast to out
    after). Products are exact and accumulate in f32 (the L0C buffer)."""
    work: int
    mode: int

    @property
    def operands(self) -> str:
        return float_mode(self.mode) if dtypes.short(self.work) == "f32" else KEEP

    @property
    def rounds(self) -> bool:
        """Whether the operands are rounded on their way into the cube."""
        return self.operands != KEEP

    def operand(self, v: np.ndarray) -> np.ndarray:
        v = as_f32(np.asarray(v))
        if dtypes.EXACT:   # the blame's float64 evaluation: the product's meaning
            return v
        mode = self.operands
        if mode == F16:
            with np.errstate(over="ignore"):   # past 65504 is inf, as the cast gives
                return v.astype(np.float16).astype(np.float32)
        return hf32(v) if mode == HF32 else v

    @property
    def output(self) -> int | None:
        """The kernel's output type where it is narrower than the product's f32."""
        return dtypes.BY_NAME["f16"] if self.mode == USE_FP16 and dtypes.short(self.work) != "bf16" else None

    def result(self, fn: Callable[..., object]) -> Callable[..., object]:
        """fn (the product) with the kernel's output stage."""
        return in_type(self.output, fn) if self.output is not None else fn


def cube_of(work: int, mode: int) -> Cube:
    """The checked model: a mode the SoC refuses for FLOAT inputs raises here."""
    c = Cube(work, mode)
    c.operands   # noqa: B018 (float_mode's check)
    return c
