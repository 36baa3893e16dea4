/* ADD / ADD1 / SUB / MUL / DIV with ggml's repeat-broadcast of src1, and SCALE. */
#include <math.h>

#include "ops_cann.h"

static int op_add(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    aclScalar *alpha = ops_scalar_f32(ctx, 1.0f);
    OPS_ACLNN(ctx, Add, a, b, alpha, out);
    return 0;
}

static int op_sub(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    aclScalar *alpha = ops_scalar_f32(ctx, 1.0f);
    OPS_ACLNN(ctx, Sub, a, b, alpha, out);
    return 0;
}

static int op_mul(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    OPS_ACLNN(ctx, Mul, a, b, out);
    return 0;
}

static int op_div(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *a, *b, *out;
    ops_bcast_tensors(ctx, dst->src[0], dst->src[1], dst, &a, &b, &out);
    OPS_ACLNN(ctx, Div, a, b, out);
    return 0;
}

/* Test-only faults of SCALE (OPS_CANN_FAULT), one per hygiene mode of `ops test`
 * (docs/hygiene.md): every other call nudges the scale by one ulp (--repeat), the last
 * element of each row is left out of both views (--poison), or the product is made in
 * src and copied to dst (--check-inputs). Each still passes test-backend-ops' NMSE. */
static int scale_faulty(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, aclTensor **x, aclTensor **y,
                        float *scale) {
    static unsigned calls;
    if (ops_fault("scale-nondeterministic") && (calls++ & 1)) *scale = nextafterf(*scale, INFINITY);
    if (ops_fault("scale-short-rows") && dst->ne[0] > 1) {
        const int64_t ne[4] = { dst->ne[0] - 1, dst->ne[1], dst->ne[2], dst->ne[3] };
        *x = ops_tensor_ex(ctx, dst->src[0]->data, dst->src[0]->type, ne, dst->src[0]->nb, 4, ACL_FORMAT_ND, 0);
        *y = ops_tensor_ex(ctx, dst->data, dst->type, ne, dst->nb, 4, ACL_FORMAT_ND, 0);
    }
    if (ops_fault("scale-into-src")) {
        aclScalar *s = ops_scalar_f32(ctx, *scale);
        OPS_ACLNN(ctx, Muls, *x, s, *x);
        OPS_ACLNN(ctx, InplaceCopy, *y, *x);
        return 1;
    }
    return 0;
}

/* dst = src * scale + bias. ggml-cann runs only aclnnMuls (and refuses bias != 0);
 * the bias is one more in-place aclnnInplaceAdds on dst, queued after it. */
static int op_scale(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    float scale = ops_param_f32(dst, 0), bias = ops_param_f32(dst, 1);
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    if (!scale_faulty(ctx, dst, &x, &y, &scale)) {
        aclScalar *s = ops_scalar_f32(ctx, scale);
        OPS_ACLNN(ctx, Muls, x, s, y);
    }
    if (bias != 0.0f) {
        aclScalar *b = ops_scalar_f32(ctx, bias), *one = ops_scalar_f32(ctx, 1.0f);
        OPS_ACLNN(ctx, InplaceAdds, y, b, one);
    }
    return 0;
}

OPS_FAMILY(binary) = {
    { GGML_OP_ADD,   OPS_ANY, op_add },
    { GGML_OP_ADD1,  OPS_ANY, op_add },   /* src1 has one element: a plain broadcast */
    { GGML_OP_SUB,   OPS_ANY, op_sub },
    { GGML_OP_MUL,   OPS_ANY, op_mul },
    { GGML_OP_DIV,   OPS_ANY, op_div },
    { GGML_OP_SCALE, OPS_ANY, op_scale },
    OPS_END,
};
