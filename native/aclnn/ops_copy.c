/* DUP / CONT / CPY: a strided copy, with a type conversion when the types differ
 * (aclnnInplaceCopy / aclnnCast), as ggml-cann's dup does. */
#include "ops_cann.h"

static int copy_or_cast(struct ops_cann_ctx *ctx, aclTensor *src, enum ggml_type src_type,
                        aclTensor *dst, enum ggml_type dst_type) {
    if (src_type == dst_type) {
        OPS_ACLNN(ctx, InplaceCopy, dst, src);
    } else {
        OPS_ACLNN(ctx, Cast, src, ops_acl_dtype(dst_type), dst);
    }
    return 0;
}

static int op_dup(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    if (ops_same_shape(src, dst))
        return copy_or_cast(ctx, ops_tensor(ctx, src), src->type, ops_tensor(ctx, dst), dst->type);

    /* Same element count, other shape: ggml copies in row-major order of the logical
     * elements. Make the source contiguous (in scratch memory unless it already is),
     * read it back with dst's shape, then copy / convert into dst. */
    size_t es = ops_elem_size(src->type), nb[GGML_MAX_DIMS];
    if (!es) return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "DUP of a block-quantized source");
    void *flat = src->data;
    if (!ops_is_contiguous(src)) {
        flat = ops_scratch(ctx, (size_t) ops_nelements(src) * es);
        if (!flat) return ctx->rc;
        ops_contiguous_nb(src->ne, GGML_MAX_DIMS, es, nb);
        aclTensor *packed = ops_tensor_ex(ctx, flat, src->type, src->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
        OPS_ACLNN(ctx, InplaceCopy, packed, ops_tensor(ctx, src));
    }
    ops_contiguous_nb(dst->ne, GGML_MAX_DIMS, es, nb);
    aclTensor *reshaped = ops_tensor_ex(ctx, flat, src->type, dst->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    return copy_or_cast(ctx, reshaped, src->type, ops_tensor(ctx, dst), dst->type);
}

OPS_FAMILY(copy) = {
    { GGML_OP_DUP,  OPS_ANY, op_dup },
    { GGML_OP_CONT, OPS_ANY, op_dup },
    { GGML_OP_CPY,  OPS_ANY, op_dup },   /* dst is the view of the destination tensor */
    OPS_END,
};
