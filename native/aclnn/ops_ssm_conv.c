/* SSM_CONV as ggml-cann realises it: one depthwise 1-D convolution (aclnnConvolution,
 * groups = channels, stride 1, no padding) over NCL views of ggml's tensors.
 *   src0 (conv_x)  ne {d_conv-1+n_t, d_inner, n_s}  -> input  [N=n_s, C=d_inner, L]
 *   src1 (weights) ne {d_conv, d_inner}             -> weight [C, 1, K=d_conv]
 *   dst            ne {d_inner, n_t, n_s}           -> output [N, C, L=n_t], a transposed view
 */
#include "ops_cann.h"

static int op_ssm_conv(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *x = dst->src[0], *w = dst->src[1];
    const int64_t d_conv = w->ne[0], d_inner = x->ne[1], n_t = dst->ne[1], n_s = x->ne[2];
    if (x->type != GGML_TYPE_F32 || w->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 ||
        x->nb[0] != sizeof(float) || w->nb[0] != sizeof(float) || dst->ne[0] != d_inner ||
        w->ne[1] != d_inner || x->ne[0] != d_conv - 1 + n_t)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "SSM_CONV: unexpected types or shapes");

    aclTensor *input = ops_tensor_ex(ctx, x->data, x->type, x->ne, x->nb, 3, ACL_FORMAT_NCL, 0);

    /* weight [C, 1, K]: the middle (in-channels per group) dim has size 1, any stride */
    const int64_t w_ne[3] = { d_conv, 1, d_inner };
    const size_t  w_nb[3] = { w->nb[0], w->nb[1], w->nb[1] };
    aclTensor *weight = ops_tensor_ex(ctx, w->data, w->type, w_ne, w_nb, 3, ACL_FORMAT_NCL, 0);

    /* dst is {C, L, N} in memory; NCL needs L innermost: swap the strides, not the data */
    const int64_t y_ne[3] = { n_t, d_inner, n_s };
    const size_t  y_nb[3] = { dst->nb[1], dst->nb[0], dst->nb[2] };
    aclTensor *output = ops_tensor_ex(ctx, dst->data, dst->type, y_ne, y_nb, 3, ACL_FORMAT_NCL, 0);

    const int64_t one = 1, zero = 0;
    aclIntArray *stride = ops_int_array(ctx, &one, 1), *dilation = ops_int_array(ctx, &one, 1);
    aclIntArray *padding = ops_int_array(ctx, &zero, 1);
    /* cubeMathType 0 (KEEP_DTYPE): f32 stays f32 on SoCs whose cube unit computes f32;
     * 1 on 310P, as ggml-cann */
    OPS_ACLNN(ctx, Convolution, input, weight, NULL, stride, padding, dilation, false, padding,
              d_inner, output, ops_cube_keep(ctx));
    return 0;
}

OPS_FAMILY(ssm_conv) = {
    { GGML_OP_SSM_CONV, OPS_ANY, op_ssm_conv },
    OPS_END,
};
