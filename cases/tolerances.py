"""Looser `ops test --strict` bounds shared by several families (catalog.Tolerance), each
with the reason its ops are less precise than their output type; the figures are
ggml-CPU's worst error over the catalog with a margin (docs/strict.md).

A sum of K products carries a rounding error that grows with the terms, not with the
result, which may cancel to ~0: these bounds are in units of the reference's root mean
square (atol_rms). Which operand is rounded where is the family's `operand(params)`: the
type of the weights / kernel, into whose precision backends convert the other operand.
"""
from __future__ import annotations

from typing import Callable

from .catalog import Params, Tolerance
from .implementations import ACLNN, ACLNN_310P
from .types import ggml_type


def _quantized(name: str) -> bool:
    return ggml_type(name).is_quantized


def dot_products(operand: Callable[[Params], str]) -> tuple[Tolerance, ...]:
    """Bounds of a family of sums of products (matrix products, convolutions, attention)."""
    return (
        Tolerance("f32 sums of up to thousands of products: rounding grows with the terms",
                  atol_rms=2 ** -18),
        Tolerance("f16 operand: backends convert the other operand to f16 for the products "
                  "(ggml-CPU's vec_dot_type), 2^-11 relative per term", rtol=2 ** -10, atol_rms=2 ** -9,
                  when=lambda p: operand(p) == "f16"),
        Tolerance("bf16 operand: the other operand converted to bf16 for the products, "
                  "2^-8 relative per term", rtol=2 ** -7, atol_rms=2 ** -6,
                  when=lambda p: operand(p) == "bf16"),
        Tolerance("quantized weights: ggml-CPU quantizes the activations to q8_0 / q8_1 / q8_K "
                  "blocks for the dot products, ~2^-8 of each block's largest value per term",
                  rtol=2 ** -6, atol_rms=2 ** -5, when=lambda p: _quantized(operand(p))),
    )


# ggml-cann's matrix products (and the native layer's, as ggml-cann) run f32 operands with
# cubeMathType USE_FP16 or ALLOW_FP32_DOWN_PRECISION: rounded to f16 / HF32 on the cube unit
CANN_CUBE_F32 = Tolerance(
    "f32 matrix products on CANN run with cubeMathType USE_FP16 / ALLOW_FP32_DOWN_PRECISION "
    "(as ggml-cann): the operands are rounded to f16 or HF32, 2^-11 relative per term",
    rtol=2 ** -10, atol_rms=2 ** -9, impl=ACLNN)


def on_310p(reason: str, rtol: float = 0.0, atol_rms: float = 0.0,
             when: Callable[[Params], bool] = lambda params: True) -> tuple[Tolerance, ...]:
    """A bound for the 310P's CANN devices only (the simulated one and a real one)."""
    return (Tolerance(reason, rtol=rtol, atol_rms=atol_rms, when=when, impl=ACLNN_310P),)


# convolutions on the 310P: the layer (as ggml-cann's ASCEND_310P branches) asks
# aclnnConvolution for cubeMathType 1, which the 310P's cube (no f32 there) computes in f16
# for f32 operands: operands rounded to f16 (2^-11 relative), the result written in f16
CUBE_F16_310P = on_310p(
    "310P: aclnnConvolution under cubeMathType 1 computes f32 operands in f16 (operands and "
    "result rounded to f16, 2^-11 relative each)", rtol=2 ** -10, atol_rms=2 ** -8)


RUNNING_SUMS = Tolerance(
    "running sums along rows of up to ~376,000 elements, accumulated in f32", atol_rms=2 ** -13)

ILL_CONDITIONED = Tolerance(
    "forward substitution with random triangular matrices: rounding grows with the "
    "condition number, huge for uniform entries, so single solutions may carry f32 errors "
    "beyond their own size; only the NMSE can judge these", rtol=1.0, atol_rms=2.0 ** 8)

QUANTIZED_DST = Tolerance(
    "quantized destination: an element on a rounding boundary may land one quantization step "
    "either way (a 4-bit step is ~1/8 of its block's range)", atol_rms=2 ** -2,
    when=lambda p: _quantized(p["type_dst"]))

ROTATION_ANGLES = Tolerance(
    "rotation angles p * base^(-2i/n) reach thousands of radians and are formed in f32 "
    "(ggml: theta *= theta_scale per pair), their rounding moves an output by ~1e-4 of the "
    "input's magnitude", atol_rms=2 ** -11)

# a matrix product with operand A's type in params["type_a"], on ggml or a CANN cube unit
MATMUL = dot_products(lambda p: p["type_a"]) + (CANN_CUBE_F32,)
