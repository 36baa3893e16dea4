/* GGML_OP_GLU, as ggml-cann realises it: out = act(x) * g, where x and g are the two
 * halves of src0's rows (exchanged when swapped) or src0 and src1 (split form).
 *
 * The generic path is two operators: the activation into dst, then aclnnInplaceMul by
 * the gate. SWIGLU and GEGLU / GEGLU_ERF on one tensor, unswapped, with an even row
 * length, use the fused aclnnSwiGlu / aclnnGeGluV3 instead (aclnnSwiGlu only where x and
 * out are contiguous, as its documentation requires). SWIGLU_OAI, which ggml-cann does
 * not map, is composed of Clamp / Muls / InplaceSigmoid / Mul / Adds; SWIGLU_CLAMP (ggml 0.25.3)
 * of Clamp / Silu / Clamp / InplaceMul, as ggml-cann 0.25.3 does.
 */
#include <math.h>

#include "ops_cann.h"

/* ggml 0.25.3 appends SWIGLU_CLAMP to enum ggml_glu_op; the layer builds against the
 * wheel's v0.20.2 ggml.h, which ends at GEGLU_QUICK */
#define OPS_GLU_OP_SWIGLU_CLAMP (GGML_GLU_OP_GEGLU_QUICK + 1)

enum act { ACT_RELU, ACT_GELU_TANH, ACT_GELU_ERF, ACT_GELU_QUICK, ACT_SILU };

/* The activation input x and the gate g of a GLU node. */
static void glu_operands(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, aclTensor **x, aclTensor **g) {
    struct ggml_tensor *a = dst->src[0], *b = dst->src[1];
    if (b) {
        *x = ops_tensor(ctx, a);
        *g = ops_tensor(ctx, b);
        return;
    }
    /* halves of each row: the first ne0/2 elements, then the next ne0/2 */
    const int64_t ne[GGML_MAX_DIMS] = { a->ne[0] / 2, a->ne[1], a->ne[2], a->ne[3] };
    const size_t second = (size_t) ne[0] * ops_elem_size(a->type);
    aclTensor *lo = ops_tensor_ex(ctx, a->data, a->type, ne, a->nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    aclTensor *hi = ops_tensor_ex(ctx, a->data, a->type, ne, a->nb, GGML_MAX_DIMS, ACL_FORMAT_ND, second);
    const int swapped = dst->op_params[1] != 0;
    *x = swapped ? hi : lo;
    *g = swapped ? lo : hi;
}

static int activation(struct ops_cann_ctx *ctx, enum act act, aclTensor *x, aclTensor *y) {
    switch (act) {
        case ACT_RELU:       OPS_ACLNN(ctx, Relu, x, y); break;
        case ACT_GELU_TANH:  OPS_ACLNN(ctx, Gelu, x, y); break;     /* the docs' tanh form */
        case ACT_GELU_ERF:   OPS_ACLNN(ctx, GeluV2, x, (int64_t) 0, y); break;   /* 0: none */
        case ACT_GELU_QUICK: OPS_ACLNN(ctx, FastGelu, x, y); break;  /* x * sigmoid(1.702 x); ggml-cann's GeluV2(0) is erf-GELU */
        case ACT_SILU:       OPS_ACLNN(ctx, Silu, x, y); break;
    }
    return 0;
}

static int gated(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, enum act act) {
    aclTensor *x, *g, *y = ops_tensor(ctx, dst);
    glu_operands(ctx, dst, &x, &g);
    int rc = activation(ctx, act, x, y);
    if (rc) return rc;
    OPS_ACLNN(ctx, InplaceMul, y, g);
    return 0;
}

/* One tensor, standard order, even rows: the fused kernels can split it themselves. */
static int fusable(const struct ggml_tensor *dst) {
    return dst->src[1] == NULL && dst->op_params[1] == 0 && dst->src[0]->ne[0] % 2 == 0;
}

static int op_reglu(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) { return gated(ctx, dst, ACT_RELU); }
static int op_geglu_quick(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) { return gated(ctx, dst, ACT_GELU_QUICK); }

static int op_swiglu(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *a = dst->src[0];
    if (!fusable(dst) || !ops_is_contiguous(a) || !ops_is_contiguous(dst))
        return gated(ctx, dst, ACT_SILU);
    /* 3-D views {ne0, ne1, ne2*ne3} (ggml-cann's layout for the kernel's tiling), split
     * along the innermost dim: aclnn dim 2 */
    const int64_t ne_x[3] = { a->ne[0], a->ne[1], a->ne[2] * a->ne[3] };
    const int64_t ne_y[3] = { dst->ne[0], dst->ne[1], dst->ne[2] * dst->ne[3] };
    aclTensor *x = ops_tensor_ex(ctx, a->data, a->type, ne_x, a->nb, 3, ACL_FORMAT_ND, 0);
    aclTensor *y = ops_tensor_ex(ctx, dst->data, dst->type, ne_y, dst->nb, 3, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, SwiGlu, x, (int64_t) 2, y);
    return 0;
}

static int geglu(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, int erf) {
    if (!fusable(dst)) return gated(ctx, dst, erf ? ACT_GELU_ERF : ACT_GELU_TANH);
    size_t es = ops_elem_size(dst->type), nb[GGML_MAX_DIMS];
    ops_contiguous_nb(dst->ne, GGML_MAX_DIMS, es, nb);
    void *gelu = ops_scratch(ctx, (size_t) ops_nelements(dst) * es);   /* outGelu: unused */
    if (!gelu) return ctx->rc;
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    aclTensor *y_gelu = ops_tensor_ex(ctx, gelu, dst->type, dst->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    /* dim 3 is ggml's dim 0; approximate per the docs: 0 none (erf), 1 tanh (ggml-cann
     * passes them the other way round); activateLeft: gelu(first half) * second half */
    OPS_ACLNN(ctx, GeGluV3, x, (int64_t) 3, (int64_t) (erf ? 0 : 1), true, y, y_gelu);
    return 0;
}

static int op_geglu(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) { return geglu(ctx, dst, 0); }
static int op_geglu_erf(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) { return geglu(ctx, dst, 1); }

/* out = min(x, limit) * sigmoid(alpha * min(x, limit)) * (clamp(g, -limit, limit) + 1) */
static int op_swiglu_oai(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const float alpha = ops_param_f32(dst, 2), limit = ops_param_f32(dst, 3);
    size_t es = ops_elem_size(dst->type), nb[GGML_MAX_DIMS];
    ops_contiguous_nb(dst->ne, GGML_MAX_DIMS, es, nb);
    const size_t bytes = (size_t) ops_nelements(dst) * es;
    void *xc_mem = ops_scratch(ctx, bytes), *s_mem = ops_scratch(ctx, bytes);
    if (!xc_mem || !s_mem) return ctx->rc;
    aclTensor *x, *g, *y = ops_tensor(ctx, dst);
    glu_operands(ctx, dst, &x, &g);
    aclTensor *xc = ops_tensor_ex(ctx, xc_mem, dst->type, dst->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    aclTensor *s = ops_tensor_ex(ctx, s_mem, dst->type, dst->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    aclScalar *lo = ops_scalar_f32(ctx, -INFINITY), *hi = ops_scalar_f32(ctx, limit);
    aclScalar *neg = ops_scalar_f32(ctx, -limit), *k = ops_scalar_f32(ctx, alpha);
    aclScalar *one = ops_scalar_f32(ctx, 1.0f);
    OPS_ACLNN(ctx, Clamp, x, lo, hi, xc);         /* xc = min(x, limit) */
    OPS_ACLNN(ctx, Muls, xc, k, s);               /* s = sigmoid(alpha * xc) */
    OPS_ACLNN(ctx, InplaceSigmoid, s);
    OPS_ACLNN(ctx, Mul, xc, s, y);                /* y = xc * s */
    OPS_ACLNN(ctx, Clamp, g, neg, hi, s);         /* s = clamp(g) + 1 */
    OPS_ACLNN(ctx, InplaceAdds, s, one, one);
    OPS_ACLNN(ctx, InplaceMul, y, s);
    return 0;
}

/* out = silu(min(x, limit)) * clamp(g, -limit, limit) */
static int op_swiglu_clamp(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const float limit = ops_param_f32(dst, 3);
    size_t es = ops_elem_size(dst->type), nb[GGML_MAX_DIMS];
    ops_contiguous_nb(dst->ne, GGML_MAX_DIMS, es, nb);
    void *tmp_mem = ops_scratch(ctx, (size_t) ops_nelements(dst) * es);
    if (!tmp_mem) return ctx->rc;
    aclTensor *x, *g, *y = ops_tensor(ctx, dst);
    glu_operands(ctx, dst, &x, &g);
    aclTensor *tmp = ops_tensor_ex(ctx, tmp_mem, dst->type, dst->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    aclScalar *lo = ops_scalar_f32(ctx, -INFINITY), *hi = ops_scalar_f32(ctx, limit);
    aclScalar *neg = ops_scalar_f32(ctx, -limit);
    OPS_ACLNN(ctx, Clamp, x, lo, hi, tmp);        /* tmp = min(x, limit) */
    OPS_ACLNN(ctx, Silu, tmp, y);
    OPS_ACLNN(ctx, Clamp, g, neg, hi, tmp);       /* tmp = clamp(g, -limit, limit) */
    OPS_ACLNN(ctx, InplaceMul, y, tmp);
    return 0;
}

OPS_FAMILY(glu) = {
    { GGML_OP_GLU, GGML_GLU_OP_REGLU,       op_reglu },
    { GGML_OP_GLU, GGML_GLU_OP_GEGLU,       op_geglu },
    { GGML_OP_GLU, GGML_GLU_OP_SWIGLU,      op_swiglu },
    { GGML_OP_GLU, GGML_GLU_OP_SWIGLU_OAI,  op_swiglu_oai },
    { GGML_OP_GLU, GGML_GLU_OP_GEGLU_ERF,   op_geglu_erf },
    { GGML_OP_GLU, GGML_GLU_OP_GEGLU_QUICK, op_geglu_quick },
    { GGML_OP_GLU, OPS_GLU_OP_SWIGLU_CLAMP, op_swiglu_clamp },
    OPS_END,
};
