/* SET_ROWS as ggml-cann realises it: one aclnnInplaceIndexCopy per (i2, i3) plane, along
 * the row axis, after an aclnnCast of the rows when their type is not the destination's.
 *   src0 (rows) ne {ne0, r, ne2, ne3}    -> source  [r, ne0]   of plane (i2, i3)
 *   src1 (ids)  ne {r, n2, n3} i32 / i64 -> index   [r]        of plane (i2 % n2, i3 % n3)
 *   dst         ne {ne0, ne1, ne2, ne3}  -> selfRef [ne1, ne0] of plane (i2, i3), dim 0
 * ggml-cann scatters f32 destinations straight from src0, which is right for f32 rows
 * only; here f16 rows are cast first for an f32 destination as well.
 */
#include "ops_cann.h"

static int op_set_rows(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0], *idx = dst->src[1];
    if ((dst->type != GGML_TYPE_F32 && dst->type != GGML_TYPE_F16 && dst->type != GGML_TYPE_BF16) ||
        (src->type != GGML_TYPE_F32 && src->type != GGML_TYPE_F16) ||
        (idx->type != GGML_TYPE_I32 && idx->type != GGML_TYPE_I64) || src->ne[1] != idx->ne[0])
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "SET_ROWS: unexpected types or shapes");

    /* the rows in dst's type: src0 itself, or a contiguous cast copy of it */
    void *rows = src->data;
    size_t nb[GGML_MAX_DIMS] = { src->nb[0], src->nb[1], src->nb[2], src->nb[3] };
    if (src->type != dst->type) {
        aclTensor *cast = ops_scratch_tensor(ctx, dst->type, src->ne, GGML_MAX_DIMS, &rows);
        if (!cast) return ctx->rc;
        OPS_ACLNN(ctx, Cast, ops_tensor(ctx, src), ops_acl_dtype(dst->type), cast);
        ops_contiguous_nb(src->ne, GGML_MAX_DIMS, ops_elem_size(dst->type), nb);
    }

    const int64_t d_ne[2] = { dst->ne[0], dst->ne[1] }, s_ne[2] = { dst->ne[0], idx->ne[0] };
    const size_t  d_nb[2] = { dst->nb[0], dst->nb[1] }, s_nb[2] = { nb[0], nb[1] };
    const int64_t i_ne = idx->ne[0];
    const size_t  i_nb = idx->nb[0];
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < dst->ne[2]; i2++) {
            int mark = ops_objs_mark(ctx);
            aclTensor *self_ref = ops_tensor_ex(ctx, (char *) dst->data + i3 * dst->nb[3] + i2 * dst->nb[2],
                                                dst->type, d_ne, d_nb, 2, ACL_FORMAT_ND, 0);
            /* ids are tiled over dims 2 and 3 (ggml's broadcast) */
            aclTensor *index = ops_tensor_ex(ctx, (char *) idx->data + (i3 % idx->ne[2]) * idx->nb[2] +
                                             (i2 % idx->ne[1]) * idx->nb[1], idx->type, &i_ne, &i_nb, 1,
                                             ACL_FORMAT_ND, 0);
            aclTensor *source = ops_tensor_ex(ctx, (char *) rows + i3 * nb[3] + i2 * nb[2], dst->type,
                                              s_ne, s_nb, 2, ACL_FORMAT_ND, 0);
            OPS_ACLNN(ctx, InplaceIndexCopy, self_ref, (int64_t) 0, index, source);
            ops_objs_release(ctx, mark);
        }
    }
    return 0;
}

OPS_FAMILY(rows) = {
    { GGML_OP_SET_ROWS, OPS_ANY, op_set_rows },
    OPS_END,
};
