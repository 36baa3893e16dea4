/* TIMESTEP_EMBEDDING: dst[j] = [cos(t_j * f_0..f_{h-1}), sin(t_j * f_0..f_{h-1}) (, 0)] with
 * f_i = exp(-ln(max_period) * i / h), h = dim / 2, as ggml-cann computes it: aclnnArange,
 * aclnnMuls, aclnnExp for the frequencies, aclnnMul of the timesteps (a column) by them,
 * then aclnnCos / aclnnSin. ggml-cann concatenates the two halves into dst; here each is
 * written straight into its half of dst's rows, and an odd dim's last column is zeroed
 * with aclnnInplaceFillScalar (ggml-cann has no case for it). */
#include <math.h>

#include "ops_cann.h"

static int op_timestep_embedding(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const int dim = dst->op_params[0], max_period = dst->op_params[1];
    int64_t half = dim / 2;
    const int64_t n = src->ne[0];
    void *ar_buf, *fr_buf, *arg_buf;

    aclTensor *ar = ops_scratch_tensor(ctx, GGML_TYPE_F32, &half, 1, &ar_buf);
    OPS_ACLNN(ctx, Arange, ops_scalar_f32(ctx, 0.0f), ops_scalar_f32(ctx, (float) half),
              ops_scalar_f32(ctx, 1.0f), ar);
    aclTensor *fr = ops_scratch_tensor(ctx, GGML_TYPE_F32, &half, 1, &fr_buf);
    OPS_ACLNN(ctx, Muls, ar, ops_scalar_f32(ctx, -logf((float) max_period) / (float) half), fr);
    OPS_ACLNN(ctx, Exp, fr, ar);   /* ar now holds the frequencies */

    /* the timesteps as a column {1, n} times the frequency row {half, 1} */
    const int64_t t_ne[2] = { 1, n }, f_ne[2] = { half, 1 }, a_ne[2] = { half, n };
    const size_t  t_nb[2] = { src->nb[0], src->nb[0] }, f_nb[2] = { sizeof(float), sizeof(float) * half };
    aclTensor *t = ops_tensor_ex(ctx, src->data, src->type, t_ne, t_nb, 2, ACL_FORMAT_ND, 0);
    aclTensor *freq = ops_tensor_ex(ctx, ar_buf, GGML_TYPE_F32, f_ne, f_nb, 2, ACL_FORMAT_ND, 0);
    aclTensor *args = ops_scratch_tensor(ctx, GGML_TYPE_F32, a_ne, 2, &arg_buf);
    OPS_ACLNN(ctx, Mul, t, freq, args);

    const size_t d_nb[2] = { dst->nb[0], dst->nb[1] };
    aclTensor *cos_half = ops_tensor_ex(ctx, dst->data, dst->type, a_ne, d_nb, 2, ACL_FORMAT_ND, 0);
    aclTensor *sin_half = ops_tensor_ex(ctx, dst->data, dst->type, a_ne, d_nb, 2, ACL_FORMAT_ND,
                                        (size_t) half * dst->nb[0]);
    OPS_ACLNN(ctx, Cos, args, cos_half);
    OPS_ACLNN(ctx, Sin, args, sin_half);
    if (dim % 2) {
        const int64_t z_ne[2] = { 1, n };
        aclTensor *last = ops_tensor_ex(ctx, dst->data, dst->type, z_ne, d_nb, 2, ACL_FORMAT_ND,
                                        (size_t) (2 * half) * dst->nb[0]);
        OPS_ACLNN(ctx, InplaceFillScalar, last, ops_scalar_f32(ctx, 0.0f));
    }
    return 0;
}

OPS_FAMILY(timestep) = {
    { GGML_OP_TIMESTEP_EMBEDDING, OPS_ANY, op_timestep_embedding },
    OPS_END,
};
