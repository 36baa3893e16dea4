/* FLASH_ATTN_EXT as ggml-cann realises it: one aclnnFusedInferAttentionScoreV2 in f16, with
 * inputLayout "BSND".
 *   q {D, S, N, B} f32, k / v {D, S_kv, N_kv, B} f16: swapping dims 1 and 2 (strides, not
 *   data) reads them as BSND; q is cast to f16 (aclnnCast), and when D is not a multiple of
 *   16 (the operator's D alignment for f16) q, k and v are zero-padded to D16
 *   (aclnnConstantPadNd): zeros add nothing to q.k, and the padded output columns are
 *   dropped.
 *   mask f16 {S_kv, S, 1, B_m} -> pseShift (B_m, N, S, S_kv), added to scale * q.k: its -inf
 *   entries drop keys; ALiBi multiplies head h's plane by its slope (aclnnArange +
 *   aclnnPowScalarTensor in f16, then aclnnInplaceMul).
 *   The f16 result {D16, N, S, B} is dst's layout {D, N, S, B}: one aclnnCast writes dst.
 * Where the aclnn doc is stricter than ggml-cann's call, the doc wins (it marks query, key,
 * value and pseShift "non-contiguous: x"): k / v views are copied into contiguous scratch
 * (aclnnInplaceCopy) instead of being passed strided, and the mask is repeated over heads
 * with aclnnRepeat also without ALiBi, where ggml-cann passes a stride-0 head dim. The
 * padding is dropped by the Cast reading a strided view of the output, not by aclnnSlice.
 * Sinks and logit softcap have no counterpart in this call (refused, as ggml-cann does). */
#include <math.h>

#include "ops_cann.h"

/* The BSND view of a ggml {D, S, N, B} tensor: dims 1 and 2 swapped. */
static void bsnd(const struct ggml_tensor *t, int64_t *ne, size_t *nb) {
    ne[0] = t->ne[0]; ne[1] = t->ne[2]; ne[2] = t->ne[1]; ne[3] = t->ne[3];
    nb[0] = t->nb[0]; nb[1] = t->nb[2]; nb[2] = t->nb[1]; nb[3] = t->nb[3];
}

/* *out = a contiguous f16 BSND copy of t, its D zero-padded to d0: cast (q), pad or copy. */
static int fa_input(struct ops_cann_ctx *ctx, const struct ggml_tensor *t, int64_t d0,
                    aclTensor **out) {
    int64_t ne[4];
    size_t nb[4];
    bsnd(t, ne, nb);
    aclTensor *src = ops_tensor_ex(ctx, t->data, t->type, ne, nb, 4, ACL_FORMAT_ND, 0);
    void *mem;
    if (t->type != GGML_TYPE_F16) {        /* q: f32 -> f16 first, as ggml-cann does */
        aclTensor *half = ops_scratch_tensor(ctx, GGML_TYPE_F16, ne, 4, &mem);
        if (!half) return ctx->rc;
        OPS_ACLNN(ctx, Cast, src, ACL_FLOAT16, half);
        src = half;
    }
    if (d0 == ne[0] && t->type != GGML_TYPE_F16) {
        *out = src;                         /* the cast result is contiguous already */
        return 0;
    }
    const int64_t c_ne[4] = { d0, ne[1], ne[2], ne[3] };
    aclTensor *dst = ops_scratch_tensor(ctx, GGML_TYPE_F16, c_ne, 4, &mem);
    if (!dst) return ctx->rc;
    if (d0 != ne[0]) {
        /* (front, back) pairs from the innermost dim: D's back grows by d0 - D */
        const int64_t pads[8] = { 0, d0 - ne[0], 0, 0, 0, 0, 0, 0 };
        OPS_ACLNN(ctx, ConstantPadNd, src, ops_int_array(ctx, pads, 8), ops_scalar_f32(ctx, 0.0f), dst);
    } else {
        OPS_ACLNN(ctx, InplaceCopy, dst, src);
    }
    *out = dst;
    return 0;
}

/* f16 ALiBi slopes of n_head heads (ggml's formula): m0^(h+1) for h < 2^floor(log2 n),
 * then m1^(2(h-n')+1), each range one aclnnArange of exponents + aclnnPowScalarTensor */
static int alibi_slopes_f16(struct ops_cann_ctx *ctx, void *slopes, int64_t n_head, float max_bias) {
    int64_t n_log2 = 1;
    while (n_log2 * 2 <= n_head) n_log2 *= 2;
    const float base[2] = { powf(2.0f, -max_bias / (float) n_log2),
                            powf(2.0f, -(max_bias / 2.0f) / (float) n_log2) };
    const int64_t count[2] = { n_log2, n_head - n_log2 };
    const float step[2] = { 1.0f, 2.0f };
    const size_t nb = sizeof(uint16_t);
    for (int r = 0; r < 2 && count[r] > 0; r++) {
        void *mem;
        aclTensor *exponent = ops_scratch_tensor(ctx, GGML_TYPE_F16, &count[r], 1, &mem);
        if (!exponent) return ctx->rc;
        OPS_ACLNN(ctx, Arange, ops_scalar_f32(ctx, 1.0f), ops_scalar_f32(ctx, 1.0f + step[r] * (float) count[r]),
                  ops_scalar_f32(ctx, step[r]), exponent);
        aclTensor *out = ops_tensor_ex(ctx, (char *) slopes + (r ? n_log2 * nb : 0), GGML_TYPE_F16,
                                       &count[r], &nb, 1, ACL_FORMAT_ND, 0);
        OPS_ACLNN(ctx, PowScalarTensor, ops_scalar_f32(ctx, base[r]), exponent, out);
    }
    return 0;
}

/* *pse = the mask's rows 0..S-1 repeated over the N heads, (B_m, N, S, S_kv) f16, times the
 * ALiBi slopes when max_bias > 0 */
static int fa_pse(struct ops_cann_ctx *ctx, const struct ggml_tensor *mask, int64_t n_q,
                  int64_t n_head, float max_bias, aclTensor **pse) {
    const int64_t m_ne[4] = { mask->ne[0], n_q, 1, mask->ne[3] };
    aclTensor *m = ops_tensor_ex(ctx, mask->data, GGML_TYPE_F16, m_ne, mask->nb, 4, ACL_FORMAT_ND, 0);
    const int64_t p_ne[4] = { mask->ne[0], n_q, n_head, mask->ne[3] };
    void *mem;
    aclTensor *p = ops_scratch_tensor(ctx, GGML_TYPE_F16, p_ne, 4, &mem);
    if (!p) return ctx->rc;
    const int64_t repeats[4] = { 1, n_head, 1, 1 };        /* aclTensor order: B, N, S, S_kv */
    OPS_ACLNN(ctx, Repeat, m, ops_int_array(ctx, repeats, 4), p);
    if (max_bias > 0.0f) {
        void *slopes = ops_scratch(ctx, (size_t) n_head * sizeof(uint16_t));
        if (!slopes || alibi_slopes_f16(ctx, slopes, n_head, max_bias)) return ctx->rc;
        const int64_t s_ne[4] = { 1, 1, n_head, 1 };
        const size_t h = sizeof(uint16_t);
        const size_t s_nb[4] = { h, h, h, h * n_head };
        OPS_ACLNN(ctx, InplaceMul, p,
                  ops_tensor_ex(ctx, slopes, GGML_TYPE_F16, s_ne, s_nb, 4, ACL_FORMAT_ND, 0));
    }
    *pse = p;
    return 0;
}

static int op_flash_attn_ext(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *q = dst->src[0], *k = dst->src[1], *v = dst->src[2], *mask = dst->src[3];
    const float scale = ops_param_f32(dst, 0), max_bias = ops_param_f32(dst, 1);
    if (q->type != GGML_TYPE_F32 || k->type != GGML_TYPE_F16 || v->type != GGML_TYPE_F16 ||
        dst->type != GGML_TYPE_F32 || dst->src[4] != NULL || ops_param_f32(dst, 2) != 0.0f ||
        k->ne[0] != v->ne[0] || (mask && (mask->type != GGML_TYPE_F16 || mask->ne[2] != 1)))
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "FLASH_ATTN_EXT: unsupported types or parameters");
    const int64_t d = q->ne[0], d16 = (d + 15) / 16 * 16, n_q = q->ne[1], n_head = q->ne[2];

    aclTensor *query, *key, *value, *pse = NULL;
    if (fa_input(ctx, q, d16, &query) || fa_input(ctx, k, d16, &key) || fa_input(ctx, v, d16, &value))
        return ctx->rc;
    if (mask && fa_pse(ctx, mask, n_q, n_head, max_bias, &pse)) return ctx->rc;

    const int64_t o_ne[4] = { d16, n_head, n_q, q->ne[3] };
    void *o_mem;
    aclTensor *out = ops_scratch_tensor(ctx, GGML_TYPE_F16, o_ne, 4, &o_mem);
    if (!out) return ctx->rc;
    char layout[] = "BSND";
    /* pre/next tokens 65535 with no attenMask: no band limit; sparse mode 0; innerPrecise 2
     * (high precision, invalid-row correction) for prefill, 0 for a single query, as ggml-cann */
    OPS_ACLNN(ctx, FusedInferAttentionScoreV2, query, ops_tensor_list(ctx, &key, 1),
              ops_tensor_list(ctx, &value, 1), pse, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
              NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
              n_head, (double) scale, (int64_t) 65535, (int64_t) 65535, layout, k->ne[2],
              (int64_t) 0, (int64_t) (n_q == 1 ? 0 : 2), (int64_t) 0, (int64_t) 0, false,
              (int64_t) 0, (int64_t) 0, out, NULL);

    /* the first D of D16 columns, f16 -> f32, into dst {D, N, S, B} */
    const size_t h = sizeof(uint16_t);
    const size_t o_nb[4] = { h, h * d16, h * d16 * n_head, h * d16 * n_head * n_q };
    aclTensor *kept = ops_tensor_ex(ctx, o_mem, GGML_TYPE_F16, dst->ne, o_nb, 4, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, Cast, kept, ACL_FLOAT, ops_tensor(ctx, dst));
    return 0;
}

OPS_FAMILY(flash_attn) = {
    { GGML_OP_FLASH_ATTN_EXT, OPS_ANY, op_flash_attn_ext },
    OPS_END,
};
