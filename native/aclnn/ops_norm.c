/* NORM / RMS_NORM / L2_NORM / GROUP_NORM over ggml's rows (ne0) or channel groups (ne2),
 * with the aclnn norm operators ggml-cann uses:
 *   NORM        aclnnLayerNorm over the last dim, no weight / bias
 *   RMS_NORM    aclnnRmsNorm with a gamma of ones (aclnnInplaceFillScalar) and an f32 rstd
 *   L2_NORM     aclnnNorm (p = 2, keepdim) -> aclnnClampMin(eps) when eps > 0 -> aclnnDiv
 *   GROUP_NORM  aclnnGroupNorm on [N = ne3, C = ne2, H*W = ne1*ne0]
 * Where the operator's docs ask for more than ggml-cann gives it, the handler does it:
 * RmsNorm takes contiguous input only (a strided view is packed first), GroupNorm's
 * mean / rstd outputs have self's type and are sized in bytes of that type. */
#include "ops_cann.h"

static int op_norm(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    aclTensor *x = ops_tensor(ctx, src), *y = ops_tensor(ctx, dst);
    const int64_t rows = src->ne[0];
    aclIntArray *normalized = ops_int_array(ctx, &rows, 1);
    OPS_ACLNN(ctx, LayerNorm, x, normalized, NULL, NULL, (double) ops_param_f32(dst, 0), y, NULL, NULL);
    return 0;
}

static int op_rms_norm(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    void *mem;
    aclTensor *x = ops_tensor(ctx, src);
    if (!ops_is_contiguous(src)) {   /* aclnnRmsNorm: "不支持输入非连续" */
        aclTensor *packed = ops_scratch_tensor(ctx, src->type, src->ne, GGML_MAX_DIMS, &mem);
        OPS_ACLNN(ctx, InplaceCopy, packed, x);
        x = packed;
    }
    /* gamma = ones over the normalised dim, of dst's type */
    aclTensor *gamma = ops_scratch_tensor(ctx, dst->type, src->ne, 1, &mem);
    OPS_ACLNN(ctx, InplaceFillScalar, gamma, ops_scalar_f32(ctx, 1.0f));
    /* rstd: f32, shaped like x without the normalised dim */
    aclTensor *rstd = ops_scratch_tensor(ctx, GGML_TYPE_F32, src->ne + 1, GGML_MAX_DIMS - 1, &mem);
    OPS_ACLNN(ctx, RmsNorm, x, gamma, (double) ops_param_f32(dst, 0), ops_tensor(ctx, dst), rstd);
    return 0;
}

static int op_l2_norm(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const float eps = ops_param_f32(dst, 0);
    void *mem;
    aclTensor *x = ops_tensor(ctx, src);
    /* ||row||_2 into an f32 {1, ne1, ne2, ne3}: acl dim 3 is ggml's ne0 */
    const int64_t norm_ne[GGML_MAX_DIMS] = { 1, src->ne[1], src->ne[2], src->ne[3] };
    aclTensor *norm = ops_scratch_tensor(ctx, GGML_TYPE_F32, norm_ne, GGML_MAX_DIMS, &mem);
    const int64_t last = GGML_MAX_DIMS - 1;
    OPS_ACLNN(ctx, Norm, x, ops_scalar_f32(ctx, 2.0f), ops_int_array(ctx, &last, 1), true, norm);
    if (eps > 0.0f) {   /* x / max(||x||, eps) */
        aclTensor *clamped = ops_scratch_tensor(ctx, GGML_TYPE_F32, norm_ne, GGML_MAX_DIMS, &mem);
        OPS_ACLNN(ctx, ClampMin, norm, ops_scalar_f32(ctx, eps), clamped);
        norm = clamped;
    }
    OPS_ACLNN(ctx, Div, x, norm, ops_tensor(ctx, dst));
    return 0;
}

static int op_group_norm(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const int64_t groups = dst->op_params[0];
    const float eps = ops_param_f32(dst, 1);
    const int64_t n = src->ne[3], c = src->ne[2], hxw = src->ne[0] * src->ne[1];
    void *mem;
    /* meanOut / rstdOut: (N, group), self's type */
    const int64_t stat_ne[2] = { groups, n };
    aclTensor *mean = ops_scratch_tensor(ctx, src->type, stat_ne, 2, &mem);
    aclTensor *rstd = ops_scratch_tensor(ctx, src->type, stat_ne, 2, &mem);
    OPS_ACLNN(ctx, GroupNorm, ops_tensor(ctx, src), NULL, NULL, n, c, hxw, groups, (double) eps,
              ops_tensor(ctx, dst), mean, rstd);
    return 0;
}

OPS_FAMILY(norm) = {
    { GGML_OP_NORM,       OPS_ANY, op_norm },
    { GGML_OP_RMS_NORM,   OPS_ANY, op_rms_norm },
    { GGML_OP_L2_NORM,    OPS_ANY, op_l2_norm },
    { GGML_OP_GROUP_NORM, OPS_ANY, op_group_norm },
    OPS_END,
};
