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
 * A BFLOAT16 operand with a FLOAT16 / FLOAT32 one is first converted to f32 (exact):
 * aclnnMatmul's page forbids the pair on A2 / A3; ops-nn's rule table takes it (ggml-cann
 * passes it as is) and computes the same values (docs/cann-sim-dtypes.md). */
#include <string.h>

#include "ops_quant.h"

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
    ops_contiguous_nb(t->ne, GGML_MAX_DIMS, sizeof(float), t->nb);
    return 0;
}

/* MUL_MAT with a q4_0 / q8_0 weight, as ggml-cann's quantized path: per batch, one
 * aclnnWeightQuantBatchMatmulV2 of the f16 activations x [n, k] with the weight [k, m]
 * (int8 or int4 quants, a transposed view: strides (1, k)) and its f16 scales [k/32, m]
 * (transposed too), one scale per 32 quants along k (antiquantGroupSize 32; with k == 32
 * that is one per row: group size 0, per channel). The weight is in ggml-cann's upload
 * layout (ops_quant.h). Activations are cast to f16 first when they are f32, the f16
 * product is cast to dst. The operator takes at most 65535 weight rows: longer weights
 * go in slices. */
#define WQBMM_MAX_ROWS 65535

/* aclnnCast of t into the f16 tensor out (a function of its own: OPS_ACLNN returns an int) */
static int cast_f16(struct ops_cann_ctx *ctx, const struct ggml_tensor *t, aclTensor *out) {
    OPS_ACLNN(ctx, Cast, ops_tensor(ctx, t), ACL_FLOAT16, out);
    return 0;
}

struct ops_quant ops_quant_layout(const struct ggml_tensor *w) {
    struct ops_quant q;
    const int64_t k = w->ne[0];
    q.dt     = w->type == GGML_TYPE_Q4_0 ? ACL_INT4 : ACL_INT8;
    q.row_q  = q.dt == ACL_INT4 ? (size_t) k / 2 : (size_t) k;
    q.row_s  = (size_t) (k / QK8_0) * 2;
    q.quants = w->data;
    q.scales = (char *) w->data + (size_t) (ops_nelements(w) / k) * q.row_q;
    q.group  = k > QK8_0 ? QK8_0 : 0;
    return q;
}

aclTensor *ops_quant_weight(struct ops_cann_ctx *ctx, void *data, aclDataType dt, int64_t k,
                            int64_t rows) {
    if (ctx->rc) return NULL;
    /* ops_tensor_ex addresses whole bytes: int4 needs its own descriptor (two per byte) */
    size_t lead = 0;
    void *base = ops_data_base(data, &lead);
    const int64_t offset = (int64_t) lead * (dt == ACL_INT4 ? 2 : 1);
    const int64_t dims[2] = { k, rows }, strides[2] = { 1, k }, storage = offset + k * rows;
    aclTensor *t = ACL.aclCreateTensor(dims, 2, dt, strides, offset, ACL_FORMAT_ND, &storage, 1, base);
    if (!t) {
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "aclCreateTensor returned NULL: %s", ops_recent_msg());
        return NULL;
    }
    ops_keep_tensor(ctx, t);
    return t;
}

aclTensor *ops_quant_scales(struct ops_cann_ctx *ctx, void *data, int64_t k, int64_t rows) {
    const int64_t ne[2] = { rows, k / QK8_0 };
    const size_t  nb[2] = { (size_t) (k / QK8_0) * 2, 2 };
    return ops_tensor_ex(ctx, data, GGML_TYPE_F16, ne, nb, 2, ACL_FORMAT_ND, 0);
}

void *ops_f16_data(struct ops_cann_ctx *ctx, const struct ggml_tensor *t) {
    if (t->type == GGML_TYPE_F16) return t->data;
    void *data;
    aclTensor *f16 = ops_scratch_tensor(ctx, GGML_TYPE_F16, t->ne, GGML_MAX_DIMS, &data);
    return f16 && !cast_f16(ctx, t, f16) ? data : NULL;
}

static int mul_mat_quant(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
    const struct ops_quant q = ops_quant_layout(w);
    const int64_t k = w->ne[0], m = w->ne[1], n = x->ne[1];

    void *x16 = ops_f16_data(ctx, x);
    void *y16;
    aclTensor *y_all = ops_scratch_tensor(ctx, GGML_TYPE_F16, dst->ne, GGML_MAX_DIMS, &y16);
    if (!x16 || !y_all) return ctx->rc;

    const int64_t x_ne[2] = { k, n };
    const size_t  x_nb[2] = { 2, 2 * (size_t) k };
    for (int64_t i3 = 0; i3 < x->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < x->ne[2]; i2++) {
            /* src0 batch serving this src1 batch (ggml's repetition of each weight) */
            const int64_t b0 = (i3 / (x->ne[3] / w->ne[3])) * w->ne[2] + i2 / (x->ne[2] / w->ne[2]);
            const int64_t b1 = i3 * x->ne[2] + i2;
            int mark = ops_objs_mark(ctx);
            aclTensor *xa = ops_tensor_ex(ctx, (char *) x16 + (size_t) (b1 * n * k) * 2, GGML_TYPE_F16,
                                          x_ne, x_nb, 2, ACL_FORMAT_ND, 0);
            for (int64_t r0 = 0; r0 < m; r0 += WQBMM_MAX_ROWS) {
                const int64_t rows = m - r0 < WQBMM_MAX_ROWS ? m - r0 : WQBMM_MAX_ROWS;
                const int64_t first = b0 * m + r0;   /* first weight row of the slice */
                const int64_t y_ne[2] = { rows, n };
                const size_t  y_nb[2] = { 2, 2 * (size_t) m };
                aclTensor *wq = ops_quant_weight(ctx, q.quants + (size_t) first * q.row_q, q.dt, k, rows);
                aclTensor *ws = ops_quant_scales(ctx, q.scales + (size_t) first * q.row_s, k, rows);
                aclTensor *ya = ops_tensor_ex(ctx, (char *) y16 + (size_t) (b1 * n * m + r0) * 2,
                                              GGML_TYPE_F16, y_ne, y_nb, 2, ACL_FORMAT_ND, 0);
                OPS_ACLNN(ctx, WeightQuantBatchMatmulV2, xa, wq, ws, NULL, NULL, NULL, NULL,
                          (int) q.group, ya);
            }
            ops_objs_release(ctx, mark);   /* many batches: keep the node's objects few */
        }
    }
    OPS_ACLNN(ctx, Cast, y_all, ops_acl_dtype(dst->type), ops_tensor(ctx, dst));
    return 0;
}

static int op_mul_mat(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    if (dst->src[0]->type == GGML_TYPE_Q4_0 || dst->src[0]->type == GGML_TYPE_Q8_0)
        return mul_mat_quant(ctx, dst);
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
