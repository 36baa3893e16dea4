/* GGML_OP_UNARY: one aclnn operator per ggml_unary_op whose documented formula is the
 * ggml op's: GELU is aclnnGelu (the tanh form), GELU_ERF aclnnGeluV2 with approximate 0
 * (none: x * Phi(x)), GELU_QUICK aclnnFastGelu (x / (1 + exp(-1.702 x))). ggml-cann maps
 * GELU_ERF to aclnnGelu and GELU_QUICK to aclnnGeluV2(0), two other formulas. STEP is
 * x > 0 and ELU / SOFTPLUS pass ggml's fixed constants. */
#include "ops_cann.h"

OPS_SIMPLE_UNARY(op_abs, Abs)
OPS_SIMPLE_UNARY(op_neg, Neg)
OPS_SIMPLE_UNARY(op_sgn, Sign)
OPS_SIMPLE_UNARY(op_exp, Exp)
OPS_SIMPLE_UNARY(op_tanh, Tanh)
OPS_SIMPLE_UNARY(op_relu, Relu)
OPS_SIMPLE_UNARY(op_sigmoid, Sigmoid)
OPS_SIMPLE_UNARY(op_silu, Silu)
OPS_SIMPLE_UNARY(op_gelu, Gelu)
OPS_SIMPLE_UNARY(op_gelu_quick, FastGelu)
OPS_SIMPLE_UNARY(op_hardsigmoid, Hardsigmoid)
OPS_SIMPLE_UNARY(op_hardswish, Hardswish)

static int op_gelu_erf(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    OPS_ACLNN(ctx, GeluV2, x, (int64_t) 0, y);   /* approximate 0: none, the erf form */
    return 0;
}

static int op_elu(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    aclScalar *one = ops_scalar_f32(ctx, 1.0f);   /* alpha = scale = inputScale = 1 */
    OPS_ACLNN(ctx, Elu, x, one, one, one, y);
    return 0;
}

static int op_step(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    aclScalar *zero = ops_scalar_f32(ctx, 0.0f);
    OPS_ACLNN(ctx, GtScalar, x, zero, y);   /* the 0/1 result converts to dst's type */
    return 0;
}

static int op_softplus(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    aclScalar *beta = ops_scalar_f32(ctx, 1.0f), *threshold = ops_scalar_f32(ctx, 20.0f);
    OPS_ACLNN(ctx, Softplus, x, beta, threshold, y);
    return 0;
}

OPS_FAMILY(unary) = {
    { GGML_OP_UNARY, GGML_UNARY_OP_ABS,         op_abs },
    { GGML_OP_UNARY, GGML_UNARY_OP_NEG,         op_neg },
    { GGML_OP_UNARY, GGML_UNARY_OP_SGN,         op_sgn },
    { GGML_OP_UNARY, GGML_UNARY_OP_STEP,        op_step },
    { GGML_OP_UNARY, GGML_UNARY_OP_EXP,         op_exp },
    { GGML_OP_UNARY, GGML_UNARY_OP_TANH,        op_tanh },
    { GGML_OP_UNARY, GGML_UNARY_OP_ELU,         op_elu },
    { GGML_OP_UNARY, GGML_UNARY_OP_RELU,        op_relu },
    { GGML_OP_UNARY, GGML_UNARY_OP_SIGMOID,     op_sigmoid },
    { GGML_OP_UNARY, GGML_UNARY_OP_SILU,        op_silu },
    { GGML_OP_UNARY, GGML_UNARY_OP_GELU,        op_gelu },
    { GGML_OP_UNARY, GGML_UNARY_OP_GELU_ERF,    op_gelu_erf },
    { GGML_OP_UNARY, GGML_UNARY_OP_GELU_QUICK,  op_gelu_quick },
    { GGML_OP_UNARY, GGML_UNARY_OP_HARDSIGMOID, op_hardsigmoid },
    { GGML_OP_UNARY, GGML_UNARY_OP_HARDSWISH,   op_hardswish },
    { GGML_OP_UNARY, GGML_UNARY_OP_SOFTPLUS,    op_softplus },
    OPS_END,
};
