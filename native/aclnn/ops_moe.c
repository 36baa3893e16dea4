/* MUL_MAT_ID and OUT_PROD, as ggml-cann realises them.
 *
 * MUL_MAT_ID: src0 = as {k, m, n_expert}, src1 = b {k, n_b, n_tokens}, src2 = ids i32
 * {n_used, n_tokens}, dst {m, n_used, n_tokens}. f32 / f16 experts, token by token:
 *   1. aclnnIndexSelect on the expert axis (ACL dim 0 of as [n_expert, m, k]) with that
 *      token's row of ids gathers the used experts into scratch [n_used, m, k];
 *   2. aclnnBatchMatMul(b rows [n_b, 1, k], gathered^T [n_used, k, m]) -> dst [n_used, 1, m]:
 *      the transpose is a stride swap, and n_b = 1 (one activation for every slot)
 *      broadcasts over the batch axis. cubeMathType USE_FP16 (2), as ggml-cann.
 * ggml's out[:, e, t] uses b[:, e % n_b, t]; with n_b in {1, n_used} that is the batch
 * pairing (or broadcast) above.
 *
 * q4_0 / q8_0 experts (ggml-cann's quantized path) are in the upload layout (ops_quant.h):
 * quants [n_expert, m, k or k/2 bytes], then scales [n_expert, m, k/32].
 * Activations are cast to f16 once. Token by token:
 *   1. two aclnnIndexSelect gather the used experts' quants (as INT8 bytes, whatever the
 *      quant width) and their scales into scratch;
 *   2. per used slot, aclnnWeightQuantBatchMatmulV2 of that slot's activation row [1, k]
 *      with the gathered weight [k, m] and scales [k/32, m] (transposed views, as in
 *      MUL_MAT) -> one f16 row [1, m] of the output,
 * and the f16 output is cast to dst at the end.
 *
 * OUT_PROD: src0 = a {m, k, ne02, ne03}, src1 = b {n, k, ne12, ne13}, dst {m, n, ...}
 * = a b^T per matrix. Per dst matrix: aclnnMatmul(b^T [n, k], a [k, m]) -> dst [n, m],
 * b^T again a stride swap; a's matrix is the one dst matrix i2 // (ne2 / ne02) repeats. */
#include "ops_quant.h"

#define CUBE_ALLOW_FP32_DOWN_PRECISION 1
#define CUBE_USE_FP16 2

static int mul_mat_id_quant(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *as = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const struct ops_quant q = ops_quant_layout(as);
    const int64_t k = as->ne[0], m = as->ne[1], n_used = ids->ne[0], n_b = b->ne[1];
    const int64_t row_q = (int64_t) q.row_q, row_s = k / QK8_0;

    /* every expert's quants (bytes) and scales, and their selection for one token */
    const int64_t q_ne[3] = { row_q, m, as->ne[2] }, s_ne[3] = { row_s, m, as->ne[2] };
    const size_t  q_nb[3] = { 1, q.row_q, q.row_q * m }, s_nb[3] = { 2, q.row_s, q.row_s * m };
    const int64_t sel_q_ne[3] = { row_q, m, n_used }, sel_s_ne[3] = { row_s, m, n_used };
    aclTensor *quants = ops_tensor_ex(ctx, q.quants, GGML_TYPE_I8, q_ne, q_nb, 3, ACL_FORMAT_ND, 0);
    aclTensor *scales = ops_tensor_ex(ctx, q.scales, GGML_TYPE_F16, s_ne, s_nb, 3, ACL_FORMAT_ND, 0);
    void *sel_q, *sel_s, *y16;
    aclTensor *sel_quants = ops_scratch_tensor(ctx, GGML_TYPE_I8, sel_q_ne, 3, &sel_q);
    aclTensor *sel_scales = ops_scratch_tensor(ctx, GGML_TYPE_F16, sel_s_ne, 3, &sel_s);
    aclTensor *y_all = ops_scratch_tensor(ctx, GGML_TYPE_F16, dst->ne, GGML_MAX_DIMS, &y16);
    char *x16 = ops_f16_data(ctx, b);   /* contiguous [n_tokens, n_b, k] */
    if (!quants || !scales || !sel_quants || !sel_scales || !y_all || !x16) return ctx->rc;

    const int64_t x_ne[2] = { k, 1 }, y_ne[2] = { m, 1 };
    const size_t  x_nb[2] = { 2, 2 * (size_t) k }, y_nb[2] = { 2, 2 * (size_t) m };
    for (int64_t t = 0; t < b->ne[2]; t++) {
        int mark = ops_objs_mark(ctx);
        aclTensor *row_ids = ops_tensor_ex(ctx, ids->data, ids->type, ids->ne, ids->nb, 1, ACL_FORMAT_ND,
                                           t * ids->nb[1]);
        OPS_ACLNN(ctx, IndexSelect, quants, (int64_t) 0, row_ids, sel_quants);
        OPS_ACLNN(ctx, IndexSelect, scales, (int64_t) 0, row_ids, sel_scales);
        for (int64_t e = 0; e < n_used; e++) {
            int slot = ops_objs_mark(ctx);
            aclTensor *wq = ops_quant_weight(ctx, (char *) sel_q + e * m * row_q, q.dt, k, m);
            aclTensor *ws = ops_quant_scales(ctx, (char *) sel_s + e * m * q.row_s, k, m);
            aclTensor *xa = ops_tensor_ex(ctx, x16, GGML_TYPE_F16, x_ne, x_nb, 2, ACL_FORMAT_ND,
                                          (size_t) ((t * n_b + e % n_b) * k) * 2);
            aclTensor *ya = ops_tensor_ex(ctx, y16, GGML_TYPE_F16, y_ne, y_nb, 2, ACL_FORMAT_ND,
                                          (size_t) ((t * n_used + e) * m) * 2);
            OPS_ACLNN(ctx, WeightQuantBatchMatmulV2, xa, wq, ws, NULL, NULL, NULL, NULL,
                      (int) q.group, ya);
            ops_objs_release(ctx, slot);
        }
        ops_objs_release(ctx, mark);
    }
    OPS_ACLNN(ctx, Cast, y_all, ops_acl_dtype(dst->type), ops_tensor(ctx, dst));
    return 0;
}

static int op_mul_mat_id(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    if (dst->src[0]->type == GGML_TYPE_Q4_0 || dst->src[0]->type == GGML_TYPE_Q8_0)
        return mul_mat_id_quant(ctx, dst);
    struct ggml_tensor *as = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    const int64_t n_used = ids->ne[0];

    /* the gathered experts: contiguous [n_used, m, k], reused by every token */
    void *sel;
    const int64_t sel_ne[3] = { as->ne[0], as->ne[1], n_used };
    aclTensor *selected = ops_scratch_tensor(ctx, as->type, sel_ne, 3, &sel);
    if (!selected) return ctx->rc;
    const size_t es = ops_elem_size(as->type);
    const int64_t sel_t_ne[3] = { as->ne[1], as->ne[0], n_used };          /* k <-> m */
    const size_t  sel_t_nb[3] = { es * as->ne[0], es, es * as->ne[0] * as->ne[1] };
    aclTensor *experts = ops_tensor_ex(ctx, as->data, as->type, as->ne, as->nb, 3, ACL_FORMAT_ND, 0);

    /* per token: b's rows as [n_b, 1, k], dst's as [n_used, 1, m] */
    const int64_t b_ne[3] = { b->ne[0], 1, b->ne[1] };
    const size_t  b_nb[3] = { b->nb[0], b->nb[1], b->nb[1] };
    const int64_t d_ne[3] = { dst->ne[0], 1, dst->ne[1] };
    const size_t  d_nb[3] = { dst->nb[0], dst->nb[1], dst->nb[1] };
    for (int64_t t = 0; t < b->ne[2]; t++) {
        int mark = ops_objs_mark(ctx);
        aclTensor *row_ids = ops_tensor_ex(ctx, ids->data, ids->type, ids->ne, ids->nb, 1, ACL_FORMAT_ND,
                                           t * ids->nb[1]);
        OPS_ACLNN(ctx, IndexSelect, experts, (int64_t) 0, row_ids, selected);
        aclTensor *w_t = ops_tensor_ex(ctx, sel, as->type, sel_t_ne, sel_t_nb, 3, ACL_FORMAT_ND, 0);
        aclTensor *x = ops_tensor_ex(ctx, b->data, b->type, b_ne, b_nb, 3, ACL_FORMAT_ND, t * b->nb[2]);
        aclTensor *out = ops_tensor_ex(ctx, dst->data, dst->type, d_ne, d_nb, 3, ACL_FORMAT_ND, t * dst->nb[2]);
        OPS_ACLNN(ctx, BatchMatMul, x, w_t, out, (int8_t) CUBE_USE_FP16);
        ops_objs_release(ctx, mark);   /* thousands of tokens: keep the node's objects few */
    }
    return 0;
}

static int op_out_prod(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *a = dst->src[0], *b = dst->src[1];
    const int64_t r2 = dst->ne[2] / a->ne[2], r3 = dst->ne[3] / a->ne[3];
    const int64_t a_ne[2] = { a->ne[0], a->ne[1] }, bt_ne[2] = { b->ne[1], b->ne[0] };
    const size_t  a_nb[2] = { a->nb[0], a->nb[1] }, bt_nb[2] = { b->nb[1], b->nb[0] };
    const int64_t d_ne[2] = { dst->ne[0], dst->ne[1] };
    const size_t  d_nb[2] = { dst->nb[0], dst->nb[1] };
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++) {
            int mark = ops_objs_mark(ctx);
            aclTensor *w = ops_tensor_ex(ctx, a->data, a->type, a_ne, a_nb, 2, ACL_FORMAT_ND,
                                         (i3 / r3) * a->nb[3] + (i2 / r2) * a->nb[2]);
            aclTensor *x_t = ops_tensor_ex(ctx, b->data, b->type, bt_ne, bt_nb, 2, ACL_FORMAT_ND,
                                           i3 * b->nb[3] + i2 * b->nb[2]);
            aclTensor *out = ops_tensor_ex(ctx, dst->data, dst->type, d_ne, d_nb, 2, ACL_FORMAT_ND,
                                           i3 * dst->nb[3] + i2 * dst->nb[2]);
            OPS_ACLNN(ctx, Matmul, x_t, w, out, (int8_t) CUBE_ALLOW_FP32_DOWN_PRECISION);
            ops_objs_release(ctx, mark);
        }
    }
    return 0;
}

OPS_FAMILY(moe) = {
    { GGML_OP_MUL_MAT_ID, OPS_ANY, op_mul_mat_id },
    { GGML_OP_OUT_PROD, OPS_ANY, op_out_prod },
    OPS_END,
};
