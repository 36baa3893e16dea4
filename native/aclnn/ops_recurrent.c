/* GATED_LINEAR_ATTN and SOLVE_TRI as ggml-cann realises them.
 *
 * GATED_LINEAR_ATTN: the initial states are copied into dst's state rows, then, one
 * (sequence, head, token) at a time, on the head's D x D state S (row i = key channel):
 *     S = S * g (a column)  +  k (a column) x v (a row)      aclnnMul, InplaceMul, InplaceAdd
 *     y = scale * S^T q                                      aclnnMv on S's transposed strides,
 *                                                            aclnnInplaceMuls
 * dst {D*H, T + D*B}: the T token rows of outputs, then the B sequences' states.
 *
 * SOLVE_TRI: one batched aclnnTriangularSolve of A X = B, A lower triangular; ggml's
 * {n, n, b2, b3} is aclnn's [b3, b2, n, n] (row = ne1), so no transposition is needed. */
#include "ops_cann.h"

static int op_gated_linear_attn(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *k = dst->src[0], *v = dst->src[1], *q = dst->src[2], *g = dst->src[3];
    struct ggml_tensor *s = dst->src[4];
    const int64_t B = s->ne[1], T = k->ne[2], H = k->ne[1], D = dst->ne[0] / H, L = T / B;
    const float scale = ops_param_f32(dst, 0);
    const size_t f = sizeof(float), state0 = (size_t) (T * H * D) * f;
    for (int i = 0; i < 5; i++)
        if (dst->src[i]->type != GGML_TYPE_F32 || !ops_is_contiguous(dst->src[i]))
            return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "GATED_LINEAR_ATTN: f32 contiguous sources expected");

    /* dst's state rows start as the given states (same {D*D*H, B} layout) */
    const size_t s_nb[2] = { s->nb[0], s->nb[1] };
    OPS_ACLNN(ctx, InplaceCopy, ops_tensor_ex(ctx, dst->data, dst->type, s->ne, s_nb, 2, ACL_FORMAT_ND, state0),
              ops_tensor_ex(ctx, s->data, s->type, s->ne, s_nb, 2, ACL_FORMAT_ND, 0));

    const int64_t col_ne[2] = { 1, D }, row_ne[2] = { D, 1 }, sq_ne[2] = { D, D }, vec_ne[1] = { D };
    const size_t  col_nb[2] = { f, f }, row_nb[2] = { f, D * f }, sq_nb[2] = { f, D * f },
                  sqt_nb[2] = { D * f, f }, vec_nb[1] = { f };
    void *kv_buf;
    aclTensor *kv = ops_scratch_tensor(ctx, GGML_TYPE_F32, sq_ne, 2, &kv_buf);   /* k x v, reused */
    for (int64_t b = 0; b < B; b++) {
        for (int64_t h = 0; h < H; h++) {
            const size_t s_off = state0 + (size_t) (b * H * D * D + h * D * D) * f;
            for (int64_t l = 0; l < L; l++) {
                int mark = ops_objs_mark(ctx);
                const size_t t_off = (size_t) (b * L * H * D + l * H * D + h * D) * f;
                aclTensor *S   = ops_tensor_ex(ctx, dst->data, dst->type, sq_ne, sq_nb, 2, ACL_FORMAT_ND, s_off);
                aclTensor *S_t = ops_tensor_ex(ctx, dst->data, dst->type, sq_ne, sqt_nb, 2, ACL_FORMAT_ND, s_off);
                aclTensor *kc  = ops_tensor_ex(ctx, k->data, k->type, col_ne, col_nb, 2, ACL_FORMAT_ND, t_off);
                aclTensor *gc  = ops_tensor_ex(ctx, g->data, g->type, col_ne, col_nb, 2, ACL_FORMAT_ND, t_off);
                aclTensor *vr  = ops_tensor_ex(ctx, v->data, v->type, row_ne, row_nb, 2, ACL_FORMAT_ND, t_off);
                aclTensor *qv  = ops_tensor_ex(ctx, q->data, q->type, vec_ne, vec_nb, 1, ACL_FORMAT_ND, t_off);
                aclTensor *y   = ops_tensor_ex(ctx, dst->data, dst->type, vec_ne, vec_nb, 1, ACL_FORMAT_ND, t_off);
                OPS_ACLNN(ctx, Mul, kc, vr, kv);
                OPS_ACLNN(ctx, InplaceMul, S, gc);
                OPS_ACLNN(ctx, InplaceAdd, S, kv, ops_scalar_f32(ctx, 1.0f));
                /* cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION), as ggml-cann: HF32 on A2/A3 */
                OPS_ACLNN(ctx, Mv, S_t, qv, y, (int8_t) 1);
                OPS_ACLNN(ctx, InplaceMuls, y, ops_scalar_f32(ctx, scale));
                ops_objs_release(ctx, mark);   /* T * H launches: keep the node's objects few */
            }
        }
    }
    return 0;
}

static int op_solve_tri(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *a = dst->src[0], *b = dst->src[1];
    if (a->type != GGML_TYPE_F32 || b->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "SOLVE_TRI: f32 expected");
    /* mOut, the triangular copy of A that the operator also returns: scratch */
    void *m_buf;
    aclTensor *m = ops_scratch_tensor(ctx, a->type, a->ne, GGML_MAX_DIMS, &m_buf);
    OPS_ACLNN(ctx, TriangularSolve, ops_tensor(ctx, b), ops_tensor(ctx, a),
              false /* lower */, false /* A, not A^T */, false /* A's own diagonal */,
              ops_tensor(ctx, dst), m);
    return 0;
}

OPS_FAMILY(recurrent) = {
    { GGML_OP_GATED_LINEAR_ATTN, OPS_ANY, op_gated_linear_attn },
    { GGML_OP_SOLVE_TRI,         OPS_ANY, op_solve_tri },
    OPS_END,
};
