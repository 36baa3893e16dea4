/* ROPE as ggml-cann (v0.20.2, the Atlas A2/A3 path) realises it: a sin/cos cache, then one
 * aclnnRotaryPositionEmbedding over BSND views of ggml's {D, N, S, B} rows.
 *
 *   cache: theta_k = pos * theta_scale^e_k * yarn_k / ff_k  ({L = rope_dims/2, 1, S, 1})
 *     theta_scale^e_k  a host table (vision restarts e at each section), copied to the device
 *     yarn_k           YaRN's blend fs + (1 - fs) * ramp_k * ext_factor (aclnnArange and
 *                      in-place scalar ops), or just fs without YaRN
 *     ff_k             freq factors (aclnnDiv)
 *     pos              the token's position, or for M-RoPE modes the position row each pair
 *                      uses (aclnnIndexSelect of the {S, 4} positions by a host table)
 *   sin/cos (aclnnSin / aclnnCos), times attn_factor (and YaRN's magnitude), widened to
 *   rope_dims: repeated [t0..tL, t0..tL] for NeoX / M-RoPE / vision (rotate-half, mode 0),
 *   interleaved [t0 t0 t1 t1 ..] for normal mode (mode 1).
 *   rotation: f16 rows go through f32 copies (aclnnCast); rows longer than rope_dims are
 *   rotated on a head view and their tail copied (aclnnInplaceCopy).
 *
 * ggml-cann keeps the cache (and the host tables) per device across nodes; here every node
 * builds its own, so the host tables are copied synchronously after the stream is idle
 * (the memory pool is stream-ordered: a block may still be in use by queued work).
 * ROPE_BACK has no ggml-cann implementation (its supports_op lists ROPE only).
 */
#include <math.h>
#include <stdlib.h>

#include "ops_cann.h"

#define ROPE_NEOX   2
#define ROPE_MROPE  8
#define ROPE_VISION 24
#define ROPE_IMROPE 40

/* YaRN's correction range: the dims whose wavelength spans beta turns of n_ctx_orig. */
static float corr_dim(int n_dims, int n_ctx_orig, float beta, float base) {
    return n_dims * logf(n_ctx_orig / (beta * 2 * (float) M_PI)) / (2 * logf(base));
}

/* A host table copied into new scratch memory, once the stream is idle. */
static void *upload(struct ops_cann_ctx *ctx, const void *host, size_t size) {
    void *p = ops_scratch(ctx, size);
    if (!p) return NULL;
    int rc = ACL.aclrtSynchronizeStream(ctx->stream);
    if (!rc) rc = ACL.aclrtMemcpy(p, size, host, size, ACL_MEMCPY_HOST_TO_DEVICE);
    if (rc) {
        ops_acl_fail(ctx, rc, "ROPE: copying a host table");
        return NULL;
    }
    return p;
}

/* Which of the four position rows (t, h, w, e) pair k uses in an M-RoPE mode. */
static int mrope_row(int k, const int s[4], int imrope) {
    const int sector = k % (s[0] + s[1] + s[2] + s[3]);
    if (imrope) {   /* t, h, w take turns while each has sectors left */
        if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
        if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
        if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
        return 3;
    }
    return sector < s[0] ? 0 : sector < s[0] + s[1] ? 1 : sector < s[0] + s[1] + s[2] ? 2 : 3;
}

/* sin and cos {rope_dims, 1, S, 1} of every (token, rotated dim). */
static int rope_cache(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, int64_t rope_dims,
                      int neox, aclTensor **sin_out, aclTensor **cos_out) {
    struct ggml_tensor *pos = dst->src[1], *ff = dst->src[2];
    const int n_dims = dst->op_params[1], mode = dst->op_params[2], n_ctx_orig = dst->op_params[4];
    const float base = ops_param_f32(dst, 5), fs = ops_param_f32(dst, 6), ef = ops_param_f32(dst, 7);
    float attn = ops_param_f32(dst, 8);
    const float beta_fast = ops_param_f32(dst, 9), beta_slow = ops_param_f32(dst, 10);
    const int *sections = &dst->op_params[11];
    const int64_t L = rope_dims / 2, S = dst->ne[2];
    const float theta_scale = powf(base, -2.0f / n_dims);

    /* theta_scale^e_k on the host; vision restarts the exponent at each section */
    float *exps = malloc(sizeof(float) * L);
    if (!exps) return ops_fail(ctx, ACL_ERROR_BAD_ALLOC, "ROPE: out of host memory");
    const int sect = sections[0] + sections[1] + sections[2] + sections[3];
    for (int64_t k = 0; k < L; k++) {
        const int sector = mode == ROPE_VISION ? (int) (k % sect) : -1;
        const int restart = sector == 0 || sector == sections[0] || sector == sections[0] + sections[1] ||
                            sector == sections[0] + sections[1] + sections[2];
        exps[k] = k == 0 || (mode == ROPE_VISION && restart) ? 1.0f : exps[k - 1] * theta_scale;
    }
    void *exps_dev = upload(ctx, exps, sizeof(float) * L);
    free(exps);
    if (!exps_dev) return ctx->rc;
    const size_t f_nb[4] = { sizeof(float), sizeof(float) * L, sizeof(float) * L, sizeof(float) * L };
    aclTensor *scale = ops_tensor_ex(ctx, exps_dev, GGML_TYPE_F32, &L, f_nb, 1, ACL_FORMAT_ND, 0);

    if (ef != 0.0f) {
        /* ramp_k = 1 - clamp((k - low) / max(0.001, high - low), 0, 1); the factor is
         * fs + (1 - fs) * ramp_k * ef, built in place as ggml-cann does */
        const float low = fmaxf(0.0f, floorf(corr_dim(n_dims, n_ctx_orig, beta_fast, base)));
        const float high = fminf(n_dims - 1.0f, ceilf(corr_dim(n_dims, n_ctx_orig, beta_slow, base)));
        const float denom = (high - low) > 0.001f ? high - low : 0.001f;  /* MAX(0.001, -inf) */
        void *ramp_buf;
        aclTensor *ramp = ops_scratch_tensor(ctx, GGML_TYPE_F32, &L, 1, &ramp_buf);
        aclScalar *one = ops_scalar_f32(ctx, 1.0f), *zero = ops_scalar_f32(ctx, 0.0f);
        OPS_ACLNN(ctx, Arange, zero, ops_scalar_f32(ctx, (float) L), one, ramp);
        OPS_ACLNN(ctx, InplaceSubs, ramp, ops_scalar_f32(ctx, low), one);
        OPS_ACLNN(ctx, InplaceDivs, ramp, ops_scalar_f32(ctx, denom));
        OPS_ACLNN(ctx, InplaceThreshold, ramp, zero, zero);                 /* max(0, y) */
        OPS_ACLNN(ctx, InplaceClampMax, ramp, one);                         /* min(1, .) */
        OPS_ACLNN(ctx, InplaceSubs, ramp, one, one);                        /* -ramp */
        OPS_ACLNN(ctx, InplaceMuls, ramp, ops_scalar_f32(ctx, ef));          /* -ramp * ef */
        OPS_ACLNN(ctx, InplaceMuls, ramp, ops_scalar_f32(ctx, fs - 1.0f));
        OPS_ACLNN(ctx, InplaceAdds, ramp, ops_scalar_f32(ctx, fs), one);
        OPS_ACLNN(ctx, InplaceMul, scale, ramp);
        attn *= 1.0f + 0.1f * logf(1.0f / fs);   /* YaRN's magnitude */
    } else if (fs != 1.0f) {
        OPS_ACLNN(ctx, InplaceMuls, scale, ops_scalar_f32(ctx, fs));
    }

    if (ff) {   /* {1, 1, 1, L} as ggml-cann views the factors */
        const int64_t ne4[4] = { L, 1, 1, 1 };
        aclTensor *fac = ops_tensor_ex(ctx, ff->data, ff->type, ne4, f_nb, 4, ACL_FORMAT_ND, 0);
        void *q_buf;
        aclTensor *q = ops_scratch_tensor(ctx, GGML_TYPE_F32, ne4, 4, &q_buf);
        OPS_ACLNN(ctx, Div, scale, fac, q);
        scale = q;
    }

    aclTensor *p;
    if (mode & ROPE_MROPE) {
        /* rows[k] = which position row pair k takes; the chosen positions {S, L} are read
         * transposed as {L, 1, S, 1} */
        int32_t *rows = malloc(sizeof(int32_t) * L);
        if (!rows) return ops_fail(ctx, ACL_ERROR_BAD_ALLOC, "ROPE: out of host memory");
        for (int64_t k = 0; k < L; k++) rows[k] = mrope_row((int) k, sections, mode == ROPE_IMROPE);
        void *rows_dev = upload(ctx, rows, sizeof(int32_t) * L);
        free(rows);
        if (!rows_dev) return ctx->rc;
        const size_t i_nb[1] = { sizeof(int32_t) };
        aclTensor *index = ops_tensor_ex(ctx, rows_dev, GGML_TYPE_I32, &L, i_nb, 1, ACL_FORMAT_ND, 0);
        const int64_t p_ne[2] = { S, 4 }, sel_ne[2] = { S, L };
        const size_t p_nb[2] = { sizeof(int32_t), sizeof(int32_t) * S };
        aclTensor *pos4 = ops_tensor_ex(ctx, pos->data, GGML_TYPE_I32, p_ne, p_nb, 2, ACL_FORMAT_ND, 0);
        void *sel_buf;
        aclTensor *sel = ops_scratch_tensor(ctx, GGML_TYPE_I32, sel_ne, 2, &sel_buf);
        OPS_ACLNN(ctx, IndexSelect, pos4, 0, index, sel);
        const int64_t t_ne[4] = { L, 1, S, 1 };
        const size_t t_nb[4] = { sizeof(int32_t) * S, sizeof(int32_t) * S, sizeof(int32_t), sizeof(int32_t) * S * L };
        p = ops_tensor_ex(ctx, sel_buf, GGML_TYPE_I32, t_ne, t_nb, 4, ACL_FORMAT_ND, 0);
    } else {   /* one position per token, {1, 1, S, 1}, broadcast over the pairs */
        const int64_t p_ne[4] = { 1, 1, S, 1 };
        const size_t p_nb[4] = { sizeof(int32_t), sizeof(int32_t), sizeof(int32_t), sizeof(int32_t) * S };
        p = ops_tensor_ex(ctx, pos->data, GGML_TYPE_I32, p_ne, p_nb, 4, ACL_FORMAT_ND, 0);
    }

    const int64_t c_ne[4] = { L, 1, S, 1 }, r_ne[4] = { rope_dims, 1, S, 1 };
    void *theta_buf, *sin_buf, *cos_buf, *sr_buf, *cr_buf;
    aclTensor *theta = ops_scratch_tensor(ctx, GGML_TYPE_F32, c_ne, 4, &theta_buf);
    OPS_ACLNN(ctx, Mul, p, scale, theta);
    aclTensor *sin_t = ops_scratch_tensor(ctx, GGML_TYPE_F32, c_ne, 4, &sin_buf);
    aclTensor *cos_t = ops_scratch_tensor(ctx, GGML_TYPE_F32, c_ne, 4, &cos_buf);
    OPS_ACLNN(ctx, Sin, theta, sin_t);
    OPS_ACLNN(ctx, Cos, theta, cos_t);
    if (attn != 1.0f) {
        OPS_ACLNN(ctx, InplaceMuls, sin_t, ops_scalar_f32(ctx, attn));
        OPS_ACLNN(ctx, InplaceMuls, cos_t, ops_scalar_f32(ctx, attn));
    }
    *sin_out = ops_scratch_tensor(ctx, GGML_TYPE_F32, r_ne, 4, &sr_buf);
    *cos_out = ops_scratch_tensor(ctx, GGML_TYPE_F32, r_ne, 4, &cr_buf);
    if (neox) {   /* [t0..tL, t0..tL]: the innermost dim repeated twice */
        const int64_t reps[4] = { 1, 1, 1, 2 };
        aclIntArray *r = ops_int_array(ctx, reps, 4);
        OPS_ACLNN(ctx, Repeat, sin_t, r, *sin_out);
        OPS_ACLNN(ctx, Repeat, cos_t, r, *cos_out);
    } else {      /* [t0 t0 t1 t1 ..]: each value twice along the innermost dim (acl dim 3) */
        OPS_ACLNN(ctx, RepeatInterleaveIntWithDim, sin_t, 2, 3, rope_dims, *sin_out);
        OPS_ACLNN(ctx, RepeatInterleaveIntWithDim, cos_t, 2, 3, rope_dims, *cos_out);
    }
    return 0;
}

/* ggml-cann's ASCEND_310P rotation (no aclnnRotaryPositionEmbedding there), for f32 rows
 * rotated whole: y = x * cos + roll(x) * sign * sin, where roll swaps each pair (interleaved)
 * or the two halves (NeoX) and sign is -1 on the element that takes its partner's value
 * negated ([-1, 1, -1, 1, ..] or [-1 .. -1, 1 .. 1]). */
static int rotate_310p(struct ops_cann_ctx *ctx, void *x_buf, void *y_buf, const int64_t ne[4],
                       int neox, aclTensor *cos_t, aclTensor *sin_t) {
    size_t nb[4];
    ops_contiguous_nb(ne, 4, sizeof(float), nb);
    aclTensor *x = ops_tensor_ex(ctx, x_buf, GGML_TYPE_F32, ne, nb, 4, ACL_FORMAT_ND, 0);
    aclTensor *y = ops_tensor_ex(ctx, y_buf, GGML_TYPE_F32, ne, nb, 4, ACL_FORMAT_ND, 0);
    void *r_buf, *s_buf, *t_buf;
    aclTensor *rolled = ops_scratch_tensor(ctx, GGML_TYPE_F32, ne, 4, &r_buf);
    const int64_t dim = 3;
    if (neox) {
        const int64_t shift = ne[0] / 2;
        OPS_ACLNN(ctx, Roll, x, ops_int_array(ctx, &shift, 1), ops_int_array(ctx, &dim, 1), rolled);
    } else {   /* pairs as rows of 2: rolling each by one swaps it */
        const int64_t pair_ne[4] = { 2, ne[0] / 2 * ne[1], ne[2], ne[3] };
        size_t pair_nb[4];
        ops_contiguous_nb(pair_ne, 4, sizeof(float), pair_nb);
        const int64_t shift = 1;
        OPS_ACLNN(ctx, Roll, ops_tensor_ex(ctx, x_buf, GGML_TYPE_F32, pair_ne, pair_nb, 4, ACL_FORMAT_ND, 0),
                  ops_int_array(ctx, &shift, 1), ops_int_array(ctx, &dim, 1),
                  ops_tensor_ex(ctx, r_buf, GGML_TYPE_F32, pair_ne, pair_nb, 4, ACL_FORMAT_ND, 0));
    }
    const int64_t sign_ne[4] = { ne[0], 1, 1, 1 };
    aclTensor *sign = ops_scratch_tensor(ctx, GGML_TYPE_F32, sign_ne, 4, &s_buf);
    OPS_ACLNN(ctx, InplaceFillScalar, sign, ops_scalar_f32(ctx, 1.0f));
    /* the negated elements: the first half (NeoX), or the first of each pair (stride 2) */
    const int64_t neg_ne[4] = { ne[0] / 2, 1, 1, 1 };
    const size_t neg_nb[4] = { neox ? sizeof(float) : 2 * sizeof(float), ne[0] * sizeof(float),
                               ne[0] * sizeof(float), ne[0] * sizeof(float) };
    OPS_ACLNN(ctx, InplaceFillScalar, ops_tensor_ex(ctx, s_buf, GGML_TYPE_F32, neg_ne, neg_nb, 4,
                                                    ACL_FORMAT_ND, 0), ops_scalar_f32(ctx, -1.0f));
    OPS_ACLNN(ctx, InplaceMul, rolled, sign);
    OPS_ACLNN(ctx, InplaceMul, rolled, sin_t);
    aclTensor *xc = ops_scratch_tensor(ctx, GGML_TYPE_F32, ne, 4, &t_buf);
    OPS_ACLNN(ctx, Mul, x, cos_t, xc);
    OPS_ACLNN(ctx, Add, xc, rolled, ops_scalar_f32(ctx, 1.0f), y);
    return 0;
}

static int op_rope(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const int n_dims = dst->op_params[1], mode = dst->op_params[2];
    if ((src->type != GGML_TYPE_F32 && src->type != GGML_TYPE_F16) || dst->type != src->type ||
        dst->src[1]->type != GGML_TYPE_I32 || n_dims % 2 || n_dims > src->ne[0])
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "ROPE: unexpected types or n_dims");
    const int *sec = &dst->op_params[11];
    if ((mode & ROPE_MROPE) && sec[0] + sec[1] + sec[2] + sec[3] <= 0)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "ROPE: M-RoPE modes need sections");
    const int neox = (mode & ROPE_NEOX) || (mode & ROPE_MROPE);
    /* vision rotates pairs (k, k + n_dims) of the whole row: rotate-half over ne0 */
    const int64_t rope_dims = mode == ROPE_VISION ? src->ne[0] : n_dims;
    const int64_t tail = src->ne[0] - rope_dims;

    aclTensor *sin_t = NULL, *cos_t = NULL;
    int rc = rope_cache(ctx, dst, rope_dims, neox, &sin_t, &cos_t);
    if (rc) return rc;
    const int64_t acl_mode = neox ? 0 : 1;   /* 0: rotate-half, 1: interleaved pairs */

    /* f16 rows are rotated as f32 copies, then cast back */
    const int f16 = src->type == GGML_TYPE_F16;
    void *x_buf = src->data, *y_buf = dst->data;
    const size_t *x_nb = src->nb, *y_nb = dst->nb;
    size_t f32_nb[4];
    aclTensor *x_all = ops_tensor(ctx, src), *y_all = ops_tensor(ctx, dst);
    if (f16) {
        aclTensor *xf = ops_scratch_tensor(ctx, GGML_TYPE_F32, src->ne, 4, &x_buf);
        aclTensor *yf = ops_scratch_tensor(ctx, GGML_TYPE_F32, dst->ne, 4, &y_buf);
        OPS_ACLNN(ctx, Cast, x_all, ACL_FLOAT, xf);
        x_all = xf, y_all = yf;
        ops_contiguous_nb(src->ne, 4, sizeof(float), f32_nb);
        x_nb = y_nb = f32_nb;
    }

    if (ctx->soc_310p) {
        /* the 310P rule admits contiguous rows rotated whole only */
        if (tail > 0 || !ops_is_contiguous(src) || !ops_is_contiguous(dst))
            return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "ROPE on 310P: contiguous rows rotated whole only");
        if (!f16) {   /* in place or not, rotate into a copy first: y may alias x */
            void *c_buf;
            aclTensor *c = ops_scratch_tensor(ctx, GGML_TYPE_F32, src->ne, 4, &c_buf);
            OPS_ACLNN(ctx, InplaceCopy, c, x_all);
            x_buf = c_buf;
        }
        int rc310 = rotate_310p(ctx, x_buf, y_buf, src->ne, neox, cos_t, sin_t);
        if (rc310) return rc310;
    } else if (tail > 0) {
        /* the rotated head into a contiguous buffer (the operator's out is contiguous),
         * then into dst's rows; the tail copied as it is */
        const int64_t head_ne[4] = { rope_dims, src->ne[1], src->ne[2], src->ne[3] };
        const int64_t tail_ne[4] = { tail, src->ne[1], src->ne[2], src->ne[3] };
        void *h_buf;
        aclTensor *x_head = ops_tensor_ex(ctx, x_buf, GGML_TYPE_F32, head_ne, x_nb, 4, ACL_FORMAT_ND, 0);
        aclTensor *h = ops_scratch_tensor(ctx, GGML_TYPE_F32, head_ne, 4, &h_buf);
        OPS_ACLNN(ctx, RotaryPositionEmbedding, x_head, cos_t, sin_t, acl_mode, h);
        aclTensor *y_head = ops_tensor_ex(ctx, y_buf, GGML_TYPE_F32, head_ne, y_nb, 4, ACL_FORMAT_ND, 0);
        OPS_ACLNN(ctx, InplaceCopy, y_head, h);
        const size_t offs = rope_dims * sizeof(float);
        aclTensor *x_tail = ops_tensor_ex(ctx, x_buf, GGML_TYPE_F32, tail_ne, x_nb, 4, ACL_FORMAT_ND, offs);
        aclTensor *y_tail = ops_tensor_ex(ctx, y_buf, GGML_TYPE_F32, tail_ne, y_nb, 4, ACL_FORMAT_ND, offs);
        OPS_ACLNN(ctx, InplaceCopy, y_tail, x_tail);
    } else if (!f16 && src->data == dst->data && !ops_is_contiguous(src)) {
        /* in place on strided rows: rotate contiguous copies, then write back */
        void *a_buf, *b_buf;
        aclTensor *a = ops_scratch_tensor(ctx, GGML_TYPE_F32, src->ne, 4, &a_buf);
        aclTensor *b = ops_scratch_tensor(ctx, GGML_TYPE_F32, src->ne, 4, &b_buf);
        OPS_ACLNN(ctx, InplaceCopy, a, x_all);
        OPS_ACLNN(ctx, RotaryPositionEmbedding, a, cos_t, sin_t, acl_mode, b);
        OPS_ACLNN(ctx, InplaceCopy, y_all, b);
    } else {
        OPS_ACLNN(ctx, RotaryPositionEmbedding, x_all, cos_t, sin_t, acl_mode, y_all);
    }

    if (f16) OPS_ACLNN(ctx, Cast, y_all, ACL_FLOAT16, ops_tensor(ctx, dst));
    return 0;
}

OPS_FAMILY(rope) = {
    { GGML_OP_ROPE, OPS_ANY, op_rope },
    OPS_END,
};
