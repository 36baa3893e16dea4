/* SQR, SQRT, LOG, SIN, COS, CLAMP, LEAKY_RELU, and the region writes ACC and SET, as
 * ggml-cann realises them: one aclnn operator each (SQR is x * x), ACC / SET copy src0
 * into dst first (unless in place) and then add / copy src1 into a strided view of dst.
 * Where dst is src (v0.20.2's ggml_clamp, leaky_relu with inplace) CLAMP and LEAKY_RELU
 * call the operators' documented in-place forms, aclnnInplaceHardtanh (a clamp with scalar
 * bounds: aclnn has no aclnnInplaceClamp) and aclnnInplaceLeakyRelu: ggml-cann passes
 * out == self to aclnnClamp / aclnnLeakyRelu, which their pages do not promise to take.
 * ADD_ID, which ggml-cann does not map: aclnnGatherV2 of b's rows by ids, then aclnnAdd. */
#include "ops_cann.h"

OPS_SIMPLE_UNARY(op_sqrt, Sqrt)
OPS_SIMPLE_UNARY(op_log, Log)
OPS_SIMPLE_UNARY(op_sin, Sin)
OPS_SIMPLE_UNARY(op_cos, Cos)

static int op_sqr(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    OPS_ACLNN(ctx, Mul, x, x, y);
    return 0;
}

static int in_place(const struct ggml_tensor *dst) {
    return dst->data == dst->src[0]->data;
}

static int op_clamp(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const float min = ops_param_f32(dst, 0), max = ops_param_f32(dst, 1);
    aclTensor *x = ops_tensor(ctx, dst->src[0]);
    aclScalar *lo = ops_scalar_f32(ctx, min), *hi = ops_scalar_f32(ctx, max);
    if (in_place(dst)) {
        /* Hardtanh refuses min > max; ggml's max(min(x, max), min) is then min everywhere,
         * which is Hardtanh(min, min) */
        OPS_ACLNN(ctx, InplaceHardtanh, x, lo, min > max ? lo : hi);
        return 0;
    }
    OPS_ACLNN(ctx, Clamp, x, lo, hi, ops_tensor(ctx, dst));
    return 0;
}

static int op_leaky_relu(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]);
    aclScalar *slope = ops_scalar_f32(ctx, ops_param_f32(dst, 0));
    if (in_place(dst)) {
        OPS_ACLNN(ctx, InplaceLeakyRelu, x, slope);
        return 0;
    }
    OPS_ACLNN(ctx, LeakyRelu, x, slope, ops_tensor(ctx, dst));
    return 0;
}

/* dst = src0, before the region is written: a device-to-device copy on the stream when
 * both are contiguous (as ggml-cann does) and 64-byte aligned (aclrtMemcpyAsync requires
 * it of both addresses; a view may start anywhere), an aclnnInplaceCopy otherwise. */
static int copy_src0(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src0 = dst->src[0];
    if (src0->data == dst->data) return 0;
    if (ops_is_contiguous(src0) && ops_is_contiguous(dst) &&
        ((uintptr_t) src0->data | (uintptr_t) dst->data) % OPS_ASYNC_COPY_ALIGN == 0) {
        size_t n = (size_t) ops_nelements(dst) * ops_elem_size(dst->type);
        int rc = ACL.aclrtMemcpyAsync(dst->data, n, src0->data, n, ACL_MEMCPY_DEVICE_TO_DEVICE, ctx->stream);
        return rc ? ops_acl_fail(ctx, rc, "aclrtMemcpyAsync") : 0;
    }
    OPS_ACLNN(ctx, InplaceCopy, ops_tensor(ctx, dst), ops_tensor(ctx, src0));
    return 0;
}

/* The region of t that src1 is written to: src1's shape, the byte strides nb1..nb3 and
 * the byte offset of op_params. */
static aclTensor *region(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, struct ggml_tensor *t) {
    const size_t nb[GGML_MAX_DIMS] = { ops_elem_size(t->type), (size_t) dst->op_params[0],
                                       (size_t) dst->op_params[1], (size_t) dst->op_params[2] };
    return ops_tensor_ex(ctx, t->data, t->type, dst->src[1]->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND,
                         (size_t) dst->op_params[3]);
}

static int op_acc(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const int inplace = dst->op_params[4] != 0;
    aclTensor *b = ops_tensor(ctx, dst->src[1]);
    aclScalar *one = ops_scalar_f32(ctx, 1.0f);
    if (inplace) {   /* dst is src0 */
        OPS_ACLNN(ctx, InplaceAdd, region(ctx, dst, dst), b, one);
        return 0;
    }
    int rc = copy_src0(ctx, dst);
    if (rc) return rc;
    OPS_ACLNN(ctx, Add, region(ctx, dst, dst->src[0]), b, one, region(ctx, dst, dst));
    return 0;
}

static int op_set(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    if (!dst->op_params[4]) {
        int rc = copy_src0(ctx, dst);
        if (rc) return rc;
    }
    OPS_ACLNN(ctx, InplaceCopy, region(ctx, dst, dst), ops_tensor(ctx, dst->src[1]));
    return 0;
}

/* dst[i0, i1, i2] = a[i0, i1, i2] + b[i0, ids[i1, i2]]: the picked rows of b gathered
 * into scratch ([n_token, n_used, n_embd], contiguous), then added to a. */
static int op_add_id(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *a = dst->src[0], *b = dst->src[1], *ids = dst->src[2];
    if (ids->ne[2] != 1 || ids->ne[3] != 1 || a->ne[3] != 1 || b->ne[2] != 1 || b->ne[3] != 1)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "ADD_ID: unexpected shapes");
    size_t es = ops_elem_size(b->type), nb[GGML_MAX_DIMS];
    ops_contiguous_nb(dst->ne, GGML_MAX_DIMS, es, nb);
    void *rows = ops_scratch(ctx, (size_t) ops_nelements(dst) * es);
    if (!rows) return ctx->rc;
    aclTensor *table = ops_tensor_ex(ctx, b->data, b->type, b->ne, b->nb, 2, ACL_FORMAT_ND, 0);
    aclTensor *index = ops_tensor_ex(ctx, ids->data, ids->type, ids->ne, ids->nb, 2, ACL_FORMAT_ND, 0);
    aclTensor *picked = ops_tensor_ex(ctx, rows, b->type, dst->ne, nb, 3, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, GatherV2, table, (int64_t) 0, index, picked);
    aclTensor *x = ops_tensor_ex(ctx, a->data, a->type, a->ne, a->nb, 3, ACL_FORMAT_ND, 0);
    aclTensor *y = ops_tensor_ex(ctx, dst->data, dst->type, dst->ne, dst->nb, 3, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, Add, x, picked, ops_scalar_f32(ctx, 1.0f), y);
    return 0;
}

OPS_FAMILY(elementwise) = {
    { GGML_OP_SQR,        OPS_ANY, op_sqr },
    { GGML_OP_SQRT,       OPS_ANY, op_sqrt },
    { GGML_OP_LOG,        OPS_ANY, op_log },
    { GGML_OP_SIN,        OPS_ANY, op_sin },
    { GGML_OP_COS,        OPS_ANY, op_cos },
    { GGML_OP_CLAMP,      OPS_ANY, op_clamp },
    { GGML_OP_LEAKY_RELU, OPS_ANY, op_leaky_relu },
    { GGML_OP_ACC,        OPS_ANY, op_acc },
    { GGML_OP_SET,        OPS_ANY, op_set },
    { GGML_OP_ADD_ID,     OPS_ANY, op_add_id },
    OPS_END,
};
