/* MUL_MAT with f32 / f16 / bf16 operands, as ggml-cann's floating-point path does it:
 * dst^T = src1^T-rows times src0 transposed, i.e. out[.., n, m] = x[.., n, k] @ w^T[.., k, m]
 * where x = src1 (the activations), w = src0 (the weight, ne {k, m}) read as a transposed
 * view (strides swapped, no copy), and dst (ne {m, n}).
 *
 * Batches: ggml lets src0's dims 2 / 3 divide src1's, src0 batch b serving src1 batches
 * b*r .. b*r + r-1. Each such dim is split in (r, ne/r) with src0 of size 1 on the
 * inner part, so that aclnn's numpy broadcasting applies.
 *   no batch at all  -> aclnnMm     (2-D), cubeMathType USE_FP16 (2), as ggml-cann
 *   otherwise        -> aclnnMatmul (up to 6-D), cubeMathType ALLOW_FP32_DOWN_PRECISION (1)
 * aclnn cannot deduce a type for BFLOAT16 with FLOAT16 / FLOAT32 (A2 / A3), which
 * ggml-cann would pass as is: such operands are first converted to f32 (exact). */
#include <string.h>

#include "ops_cann.h"

#define CUBE_ALLOW_FP32_DOWN_PRECISION 1
#define CUBE_USE_FP16 2

/* *t becomes a contiguous f32 copy of itself in scratch memory (aclnnCast) */
static int to_f32(struct ops_cann_ctx *ctx, struct ggml_tensor *t) {
    if (t->type == GGML_TYPE_F32) return 0;
    void *data;
    aclTensor *src = ops_tensor(ctx, t);
    aclTensor *f32 = ops_scratch_tensor(ctx, GGML_TYPE_F32, t->ne, GGML_MAX_DIMS, &data);
    OPS_ACLNN(ctx, Cast, src, ACL_FLOAT, f32);
    t->type = GGML_TYPE_F32;
    t->data = data;
    t->nb[0] = sizeof(float);
    for (int i = 1; i < GGML_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t) t->ne[i - 1];
    return 0;
}

static int op_mul_mat(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor w = *dst->src[0], x = *dst->src[1];   /* copies: may be re-pointed */
    if (w.type != x.type && (w.type == GGML_TYPE_BF16 || x.type == GGML_TYPE_BF16)) {
        if (to_f32(ctx, &w) || to_f32(ctx, &x)) return ctx->rc;
    }

    int64_t xne[6], wne[6], dne[6];
    size_t  xnb[6], wnb[6], dnb[6];
    int     d = 0;
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        const int64_t r = i < 2 ? 1 : x.ne[i] / w.ne[i];
        if (r != 1) {   /* the repeats of one src0 batch, innermost */
            xne[d] = dne[d] = r;   wne[d] = 1;
            xnb[d] = x.nb[i];      dnb[d] = dst->nb[i];   wnb[d] = w.nb[i];
            d++;
        }
        xne[d] = x.ne[i] / r;   dne[d] = dst->ne[i] / r;   wne[d] = w.ne[i];
        xnb[d] = x.nb[i] * r;   dnb[d] = dst->nb[i] * r;   wnb[d] = w.nb[i];
        d++;
    }
    /* w^T: swap the two matrix dims of the weight view */
    int64_t tne[6];
    size_t  tnb[6];
    memcpy(tne, wne, sizeof tne);
    memcpy(tnb, wnb, sizeof tnb);
    tne[0] = wne[1]; tne[1] = wne[0];
    tnb[0] = wnb[1]; tnb[1] = wnb[0];

    const int batched = x.ne[2] != 1 || x.ne[3] != 1;
    const int dims = batched ? d : 2;
    aclTensor *a = ops_tensor_ex(ctx, x.data, x.type, xne, xnb, dims, ACL_FORMAT_ND, 0);
    aclTensor *b = ops_tensor_ex(ctx, w.data, w.type, tne, tnb, dims, ACL_FORMAT_ND, 0);
    aclTensor *out = ops_tensor_ex(ctx, dst->data, dst->type, dne, dnb, dims, ACL_FORMAT_ND, 0);
    if (!batched) {
        /* USE_FP16 is refused for BFLOAT16 inputs, which the cube takes as they are */
        int8_t cube = x.type == GGML_TYPE_BF16 ? CUBE_ALLOW_FP32_DOWN_PRECISION : CUBE_USE_FP16;
        OPS_ACLNN(ctx, Mm, a, b, out, cube);
    } else {
        OPS_ACLNN(ctx, Matmul, a, b, out, (int8_t) CUBE_ALLOW_FP32_DOWN_PRECISION);
    }
    return 0;
}

OPS_FAMILY(matmul) = {
    { GGML_OP_MUL_MAT, OPS_ANY, op_mul_mat },
    OPS_END,
};
