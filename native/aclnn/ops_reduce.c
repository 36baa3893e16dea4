/* Reductions, scans and sorts along ggml's rows (aclnn's last dim, 3 of the 4-D view),
 * as ggml-cann realises them:
 *   SUM / SUM_ROWS   aclnnReduceSum over all dims / dim 3, keepDims
 *   MEAN             aclnnMean over dim 3, keepDim, FLOAT
 *   ARGMAX           aclnnArgMax over dim 3 into dst's 3-D view
 *   COUNT_EQUAL      aclnnEqTensor into scratch of src0's type, aclnnReduceSum to INT64
 *   CUMSUM           aclnnCumsum along dim 3
 *   ARGSORT          aclnnArgsort (INT64 indices into scratch), aclnnCast to dst's INT32
 */
#include "ops_cann.h"

static int reduce_sum(struct ops_cann_ctx *ctx, aclTensor *x, aclTensor *y, enum ggml_type out,
                      const int64_t *dims, uint64_t n) {
    aclIntArray *axes = ops_int_array(ctx, dims, n);
    OPS_ACLNN(ctx, ReduceSum, x, axes, true, ops_acl_dtype(out), y);
    return 0;
}

static int op_sum(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    static const int64_t all[4] = { 0, 1, 2, 3 };
    return reduce_sum(ctx, ops_tensor(ctx, dst->src[0]), ops_tensor(ctx, dst), dst->type, all, 4);
}

static int op_sum_rows(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    static const int64_t rows[1] = { 3 };
    return reduce_sum(ctx, ops_tensor(ctx, dst->src[0]), ops_tensor(ctx, dst), dst->type, rows, 1);
}

static int op_mean(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    static const int64_t rows[1] = { 3 };
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    aclIntArray *axes = ops_int_array(ctx, rows, 1);
    OPS_ACLNN(ctx, Mean, x, axes, true, ACL_FLOAT, y);
    return 0;
}

static int op_argmax(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    /* src {n0, n1, 1, 1} -> aclnn [1, 1, n1, n0]; dst {n1} as 3-D [1, 1, n1] */
    aclTensor *x = ops_tensor(ctx, dst->src[0]);
    aclTensor *y = ops_tensor_ex(ctx, dst->data, dst->type, dst->ne, dst->nb, 3, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, ArgMax, x, (int64_t) 3, false, y);
    return 0;
}

static int op_count_equal(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    static const int64_t all[4] = { 0, 1, 2, 3 };
    struct ggml_tensor *a = dst->src[0];
    size_t es = ops_elem_size(a->type), nb[GGML_MAX_DIMS];
    ops_contiguous_nb(a->ne, GGML_MAX_DIMS, es, nb);
    void *eq = ops_scratch(ctx, (size_t) ops_nelements(a) * es);   /* 0 / 1 in src0's type */
    if (!eq) return ctx->rc;
    aclTensor *e = ops_tensor_ex(ctx, eq, a->type, a->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, EqTensor, ops_tensor(ctx, a), ops_tensor(ctx, dst->src[1]), e);
    return reduce_sum(ctx, e, ops_tensor(ctx, dst), dst->type, all, 4);
}

static int op_cumsum(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    OPS_ACLNN(ctx, Cumsum, x, (int64_t) 3, ops_acl_dtype(dst->type), y);
    return 0;
}

static int op_argsort(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const int descending = dst->op_params[0] == GGML_SORT_ORDER_DESC;
    size_t nb[GGML_MAX_DIMS];
    ops_contiguous_nb(dst->ne, GGML_MAX_DIMS, sizeof(int64_t), nb);
    void *idx = ops_scratch(ctx, (size_t) ops_nelements(dst) * sizeof(int64_t));
    if (!idx) return ctx->rc;
    aclTensor *i64 = ops_tensor_ex(ctx, idx, GGML_TYPE_I64, dst->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, Argsort, ops_tensor(ctx, dst->src[0]), (int64_t) -1, (bool) descending, i64);
    OPS_ACLNN(ctx, Cast, i64, ops_acl_dtype(dst->type), ops_tensor(ctx, dst));
    return 0;
}

OPS_FAMILY(reduce) = {
    { GGML_OP_SUM,         OPS_ANY, op_sum },
    { GGML_OP_SUM_ROWS,    OPS_ANY, op_sum_rows },
    { GGML_OP_MEAN,        OPS_ANY, op_mean },
    { GGML_OP_ARGMAX,      OPS_ANY, op_argmax },
    { GGML_OP_COUNT_EQUAL, OPS_ANY, op_count_equal },
    { GGML_OP_CUMSUM,      OPS_ANY, op_cumsum },
    { GGML_OP_ARGSORT,     OPS_ANY, op_argsort },
    OPS_END,
};
