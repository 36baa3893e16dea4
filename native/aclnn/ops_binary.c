/* ADD / ADD1 / SUB / MUL / DIV with ggml's repeat-broadcast of src1, and SCALE. */
#include "ops_cann.h"

/* dst = src0 + sign * src1 (src1 repeated) without aclnnAdd / aclnnSub, whose pages do not
 * offer the 310P: both operands are copied (converted to dst's type, src1 broadcast by
 * aclnnInplaceCopy) into the two halves of a {dst's shape, 2} scratch buffer, src1's
 * negated in place for SUB (exact), and aclnnReduceSum sums over the pair dim into dst:
 * the one rounding of a + b that aclnnAdd makes. */
static int add_by_sum(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, float sign) {
    const size_t es = ops_elem_size(dst->type);
    const int64_t pair_ne[GGML_MAX_DIMS + 1] = { dst->ne[0], dst->ne[1], dst->ne[2], dst->ne[3], 2 };
    size_t pair_nb[GGML_MAX_DIMS + 1];
    ops_contiguous_nb(pair_ne, GGML_MAX_DIMS + 1, es, pair_nb);
    char *pair = ops_scratch(ctx, pair_nb[GGML_MAX_DIMS] * 2);
    if (!pair) return ctx->rc;
    struct ggml_tensor half = *dst;   /* dst's shape, contiguous, in the scratch */
    for (int i = 0; i < GGML_MAX_DIMS; i++) half.nb[i] = pair_nb[i];
    half.data = pair;
    OPS_ACLNN(ctx, InplaceCopy, ops_tensor(ctx, &half), ops_tensor(ctx, dst->src[0]));
    half.data = pair + pair_nb[GGML_MAX_DIMS];
    aclTensor *a, *b, *second;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], &half, &a, &b, &second);
    OPS_ACLNN(ctx, InplaceCopy, second, b);   /* src broadcasts to selfRef (its page) */
    if (sign != 1.0f)
        OPS_ACLNN(ctx, InplaceMuls, ops_tensor(ctx, &half), ops_scalar_f32(ctx, sign));
    const int64_t outer = 0;   /* aclnn's dim 0: the pair */
    OPS_ACLNN(ctx, ReduceSum, ops_tensor_ex(ctx, pair, dst->type, pair_ne, pair_nb, GGML_MAX_DIMS + 1,
                                            ACL_FORMAT_ND, 0),
              ops_int_array(ctx, &outer, 1), false, ops_acl_dtype(dst->type), ops_tensor(ctx, dst));
    return 0;
}

static int op_add(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    if (ctx->soc_310p) return add_by_sum(ctx, dst, 1.0f);
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    aclScalar *alpha = ops_scalar_f32(ctx, 1.0f);
    OPS_ACLNN(ctx, Add, a, b, alpha, out);
    return 0;
}

static int op_sub(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    if (ctx->soc_310p) return add_by_sum(ctx, dst, -1.0f);
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    aclScalar *alpha = ops_scalar_f32(ctx, 1.0f);
    OPS_ACLNN(ctx, Sub, a, b, alpha, out);
    return 0;
}

static int op_mul(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    OPS_ACLNN(ctx, Mul, a, b, out);
    return 0;
}

static int op_div(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    OPS_ACLNN(ctx, Div, a, b, out);
    return 0;
}

/* dst = src * scale + bias. ggml-cann runs only aclnnMuls (and refuses bias != 0);
 * the bias is one more in-place aclnnInplaceAdds on dst, queued after it. */
static int op_scale(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    float scale = ops_param_f32(dst, 0), bias = ops_param_f32(dst, 1);
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    aclScalar *s = ops_scalar_f32(ctx, scale);
    OPS_ACLNN(ctx, Muls, x, s, y);
    if (bias != 0.0f) {
        aclScalar *b = ops_scalar_f32(ctx, bias), *one = ops_scalar_f32(ctx, 1.0f);
        OPS_ACLNN(ctx, InplaceAdds, y, b, one);
    }
    return 0;
}

OPS_FAMILY(binary) = {
    { GGML_OP_ADD,   OPS_ANY, op_add },
    { GGML_OP_ADD1,  OPS_ANY, op_add },   /* src1 has one element: a plain broadcast */
    { GGML_OP_SUB,   OPS_ANY, op_sub },
    { GGML_OP_MUL,   OPS_ANY, op_mul },
    { GGML_OP_DIV,   OPS_ANY, op_div },
    { GGML_OP_SCALE, OPS_ANY, op_scale },
    OPS_END,
};
