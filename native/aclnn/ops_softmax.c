/* SOFT_MAX: softmax(src * scale + slope * mask) over ggml rows, as ggml-cann builds it:
 *   aclnnMuls(src, scale) into scratch logits;
 *   with a mask: the mask rows broadcast onto the logits (dims 2 and 3 of the logits tile
 *   the mask's, so each is split in (mask ne, repeats)) and added with aclnnInplaceAdd;
 *   with ALiBi (max_bias > 0) the mask is first multiplied (aclnnMul) by per-head slopes
 *   m0^(h+1) / m1^(2(h-n)+1), made with aclnnArange + aclnnPowScalarTensor;
 *   aclnnSoftmax over the last dim into dst.
 * Attention sinks (src[2], one logit per head), which ggml-cann refuses, are one more
 * column of the logits: the softmax runs over ne0 + 1 columns (the sink column filled by
 * aclnnInplaceCopy from the sinks) and the first ne0 are copied to dst. */
#include <math.h>

#include "ops_cann.h"

/* out[i] = base ^ (start + i * step), i < count, in f32 */
static int pow_range(struct ops_cann_ctx *ctx, void *out, float base, float start, float step,
                     int64_t count) {
    void *mem;
    aclTensor *exponent = ops_scratch_tensor(ctx, GGML_TYPE_F32, &count, 1, &mem);
    OPS_ACLNN(ctx, Arange, ops_scalar_f32(ctx, start), ops_scalar_f32(ctx, start + step * (float) count),
              ops_scalar_f32(ctx, step), exponent);
    const size_t nb = sizeof(float);
    aclTensor *result = ops_tensor_ex(ctx, out, GGML_TYPE_F32, &count, &nb, 1, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, PowScalarTensor, ops_scalar_f32(ctx, base), exponent, result);
    return 0;
}

/* ALiBi slopes of n_head heads (ggml's formula) into f32 slopes[n_head] */
static int alibi_slopes(struct ops_cann_ctx *ctx, void *slopes, int64_t n_head, float max_bias) {
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= n_head) n_log2 *= 2;   /* 2^floor(log2(n_head)) */
    const float m0 = powf(2.0f, -max_bias / (float) n_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / (float) n_log2);
    int rc = pow_range(ctx, slopes, m0, 1.0f, 1.0f, n_log2);
    if (!rc && n_log2 < n_head)
        rc = pow_range(ctx, (char *) slopes + n_log2 * sizeof(float), m1, 1.0f, 2.0f, n_head - n_log2);
    return rc;
}

/* logits (ne, nb of the logits buffer) += slope * mask, mask rows 0..ne1-1 */
static int add_mask(struct ops_cann_ctx *ctx, void *logits, enum ggml_type type, const int64_t *ne,
                    const size_t *nb, const struct ggml_tensor *mask, float max_bias) {
    const int64_t m2 = mask->ne[2], m3 = mask->ne[3], r2 = ne[2] / m2, r3 = ne[3] / m3;
    /* head h = i + m2 * j (i < m2, j < r2) reads mask plane i: ggml tiles the mask */
    const int64_t l_ne[6] = { ne[0], ne[1], m2, r2, m3, r3 };
    const size_t  l_nb[6] = { nb[0], nb[1], nb[2], nb[2] * m2, nb[3], nb[3] * m3 };
    const int64_t m_ne[6] = { ne[0], ne[1], m2, 1, m3, 1 };
    const size_t  m_nb[6] = { mask->nb[0], mask->nb[1], mask->nb[2], mask->nb[2] * m2, mask->nb[3],
                              mask->nb[3] * m3 };
    aclTensor *target = ops_tensor_ex(ctx, logits, type, l_ne, l_nb, 6, ACL_FORMAT_ND, 0);
    aclTensor *m = ops_tensor_ex(ctx, mask->data, mask->type, m_ne, m_nb, 6, ACL_FORMAT_ND, 0);
    aclScalar *one = ops_scalar_f32(ctx, 1.0f);
    if (max_bias <= 0.0f) {
        OPS_ACLNN(ctx, InplaceAdd, target, m, one);
        return 0;
    }
    void *slopes = ops_scratch(ctx, (size_t) ne[2] * sizeof(float)), *mem;
    if (!slopes || alibi_slopes(ctx, slopes, ne[2], max_bias)) return ctx->rc;
    const int64_t s_ne[6] = { 1, 1, m2, r2, 1, 1 };
    const size_t  f = sizeof(float);
    const size_t  s_nb[6] = { f, f, f, f * m2, f * ne[2], f * ne[2] };
    aclTensor *s = ops_tensor_ex(ctx, slopes, GGML_TYPE_F32, s_ne, s_nb, 6, ACL_FORMAT_ND, 0);
    const int64_t b_ne[6] = { ne[0], ne[1], m2, r2, m3, 1 };
    aclTensor *bias = ops_scratch_tensor(ctx, GGML_TYPE_F32, b_ne, 6, &mem);
    OPS_ACLNN(ctx, Mul, s, m, bias);
    OPS_ACLNN(ctx, InplaceAdd, target, bias, one);
    return 0;
}

static int op_soft_max(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0], *mask = dst->src[1], *sinks = dst->src[2];
    const float scale = ops_param_f32(dst, 0), max_bias = ops_param_f32(dst, 1);
    const int64_t *ne = src->ne;
    /* the logits' type: src's (test-only fault softmax-bf16-logits: BF16, so that the
     * aclnnMuls that writes them rounds away half of an f32's mantissa) */
    const enum ggml_type lt = ops_fault("softmax-bf16-logits") ? GGML_TYPE_BF16 : src->type;
    const size_t es = ops_elem_size(lt);
    /* the logits: ne0 (+1 sink) columns per row, contiguous, in scratch */
    const int64_t row = ne[0] + (sinks != NULL);
    const int64_t full_ne[GGML_MAX_DIMS] = { row, ne[1], ne[2], ne[3] };
    void *buf;
    aclTensor *full = ops_scratch_tensor(ctx, lt, full_ne, GGML_MAX_DIMS, &buf);
    if (!full) return ctx->rc;
    const size_t nb[GGML_MAX_DIMS] = { es, es * row, es * row * ne[1], es * row * ne[1] * ne[2] };
    aclTensor *logits = ops_tensor_ex(ctx, buf, lt, ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, Muls, ops_tensor(ctx, src), ops_scalar_f32(ctx, scale), logits);
    if (mask && add_mask(ctx, buf, lt, ne, nb, mask, max_bias)) return ctx->rc;
    if (!sinks) {   /* test-only fault softmax-bad-dim: a dim past the 4 dims, refused */
        OPS_ACLNN(ctx, Softmax, full, ops_fault("softmax-bad-dim") ? 4 : 3, ops_tensor(ctx, dst));
        return 0;
    }
    /* sink h fills the last column of every row of head h */
    const int64_t col_ne[GGML_MAX_DIMS] = { 1, ne[1], ne[2], ne[3] };
    aclTensor *col = ops_tensor_ex(ctx, buf, lt, col_ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND,
                                   (size_t) ne[0] * es);
    const int64_t sk_ne[GGML_MAX_DIMS] = { 1, 1, ne[2], 1 };
    const size_t  sk_nb[GGML_MAX_DIMS] = { sinks->nb[0], sinks->nb[0], sinks->nb[0], sinks->nb[0] * ne[2] };
    aclTensor *sk = ops_tensor_ex(ctx, sinks->data, sinks->type, sk_ne, sk_nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, InplaceCopy, col, sk);
    void *pbuf;
    aclTensor *probs = ops_scratch_tensor(ctx, lt, full_ne, GGML_MAX_DIMS, &pbuf);
    OPS_ACLNN(ctx, Softmax, full, 3, probs);
    aclTensor *kept = ops_tensor_ex(ctx, pbuf, lt, ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, InplaceCopy, ops_tensor(ctx, dst), kept);
    return 0;
}

OPS_FAMILY(softmax) = {
    { GGML_OP_SOFT_MAX, OPS_ANY, op_soft_max },
    OPS_END,
};
