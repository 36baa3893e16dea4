/* Convolutions over aclnnConvolution.
 *
 * CONV_TRANSPOSE_1D as ggml-cann v0.20.2 realises it: a transposed 1-D convolution
 * (transposed = true, stride s0, no padding, dilation 1) per slice of at most 255 kernel
 * taps (aclnn's limit for a transposed kernel's L on Atlas A2/A3), each part shifted to
 * its taps' place with aclnnConstantPadNd and summed into dst.
 *   src0 (kernel) ne {K, OC, IC}  -> weight [IC, OC, K]  (transposed: in-channels first)
 *   src1 (input)  ne {L, IC, 1}   -> input  [1, IC, L]
 *   dst           ne {L_out, OC, 1} -> output [1, OC, L_out], L_out = (L-1)*s0 + K
 *
 * Beyond ggml-cann (v0.20.2 has no CONV_2D / CONV_2D_DW): one forward aclnnConvolution,
 * which computes them exactly.
 *   src0 (kernel) ne {KW, KH, IC, OC} -> weight [OC, IC, KH, KW]  (CONV_2D_DW: [C, 1, KH, KW])
 *   src1 (input)  ne {W, H, C, N}     -> input  [N, C, H, W]
 *   dst           ne {OW, OH, OC, N}  -> output [N, OC, OH, OW]
 * test-backend-ops' CWHN layouts are permuted views: the strides say so, nothing is copied.
 */
#include "ops_cann.h"

#define CONV_T1D_MAX_TAPS 255

/* A contiguous scratch tensor of 3 dims, described twice over the same memory: ND (for
 * the element-wise operators, whose docs take ND) and NCL (for aclnnConvolution). */
static aclTensor *scratch_3d(struct ops_cann_ctx *ctx, enum ggml_type type, const int64_t *ne,
                             aclTensor **ncl) {
    void *data = NULL;
    size_t nb[3];
    aclTensor *nd = ops_scratch_tensor(ctx, type, ne, 3, &data);
    ops_contiguous_nb(ne, 3, ops_elem_size(type), nb);
    *ncl = data ? ops_tensor_ex(ctx, data, type, ne, nb, 3, ACL_FORMAT_NCL, 0) : NULL;
    return nd;
}

static int op_conv_transpose_1d(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
    const int64_t K = w->ne[0], L = x->ne[0], L_out = dst->ne[0], s0 = dst->op_params[0];
    if (w->type != GGML_TYPE_F32 || x->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 ||
        w->ne[2] != x->ne[1] || L_out != (L - 1) * s0 + K)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "CONV_TRANSPOSE_1D: unexpected types or shapes");

    aclTensor *input  = ops_tensor_ex(ctx, x->data, x->type, x->ne, x->nb, 3, ACL_FORMAT_NCL, 0);
    aclTensor *kernel = ops_tensor_ex(ctx, w->data, w->type, w->ne, w->nb, 3, ACL_FORMAT_ND, 0);
    aclTensor *out    = ops_tensor_ex(ctx, dst->data, dst->type, dst->ne, dst->nb, 3, ACL_FORMAT_ND, 0);
    const int64_t one = 1, zero = 0;
    aclIntArray *stride = ops_int_array(ctx, &s0, 1), *dilation = ops_int_array(ctx, &one, 1);
    aclIntArray *padding = ops_int_array(ctx, &zero, 1);   /* also the outputPadding */
    aclScalar *alpha = ops_scalar_f32(ctx, 1.0f), *fill = ops_scalar_f32(ctx, 0.0f);

    OPS_ACLNN(ctx, InplaceZero, out);
    for (int64_t k0 = 0; k0 < K; k0 += CONV_T1D_MAX_TAPS) {
        const int64_t k1 = k0 + CONV_T1D_MAX_TAPS < K ? k0 + CONV_T1D_MAX_TAPS : K;
        int mark = ops_objs_mark(ctx);
        /* taps [k0, k1) of the kernel, packed */
        const int64_t part_ne[3] = { k1 - k0, w->ne[1], w->ne[2] };
        aclTensor *part_w_ncl, *part_w = scratch_3d(ctx, w->type, part_ne, &part_w_ncl);
        OPS_ACLNN(ctx, Slice, kernel, (int64_t) -1, k0, k1, (int64_t) 1, part_w);
        /* what those taps scatter: (L-1)*s0 + (k1-k0) samples, starting at sample k0 of dst */
        const int64_t part_ne_out[3] = { (L - 1) * s0 + (k1 - k0), dst->ne[1], dst->ne[2] };
        aclTensor *part_y_ncl, *part_y = scratch_3d(ctx, dst->type, part_ne_out, &part_y_ncl);
        OPS_ACLNN(ctx, InplaceZero, part_y);
        /* cubeMathType 0 (KEEP_DTYPE), 1 on 310P, as ggml-cann */
        OPS_ACLNN(ctx, Convolution, input, part_w_ncl, NULL, stride, padding, dilation, true, padding,
                  (int64_t) 1, part_y_ncl, ops_cube_keep(ctx));
        const int64_t shift[2] = { k0, L_out - ((L - 1) * s0 + k1) };   /* (left, right) of L */
        aclTensor *unused_ncl, *shifted = scratch_3d(ctx, dst->type, dst->ne, &unused_ncl);
        OPS_ACLNN(ctx, InplaceZero, shifted);
        OPS_ACLNN(ctx, ConstantPadNd, part_y, ops_int_array(ctx, shift, 2), fill, shifted);
        OPS_ACLNN(ctx, InplaceAdd, out, shifted, alpha);
        ops_objs_release(ctx, mark);
    }
    return 0;
}

/* CONV_2D and CONV_2D_DW: op_params [s0, s1, p0, p1, d0, d1], index 0 the W axis; aclnn
 * lists the spatial values outermost first (H, W). */
static int conv_2d(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, const int64_t *w_ne,
                   const size_t *w_nb, int64_t groups) {
    struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
    const int32_t *p = dst->op_params;
    aclTensor *input  = ops_tensor_ex(ctx, x->data, x->type, x->ne, x->nb, 4, ACL_FORMAT_NCHW, 0);
    aclTensor *weight = ops_tensor_ex(ctx, w->data, w->type, w_ne, w_nb, 4, ACL_FORMAT_NCHW, 0);
    aclTensor *output = ops_tensor_ex(ctx, dst->data, dst->type, dst->ne, dst->nb, 4, ACL_FORMAT_NCHW, 0);
    const int64_t stride[2] = { p[1], p[0] }, padding[2] = { p[3], p[2] }, dilation[2] = { p[5], p[4] };
    const int64_t no_output_padding[2] = { 0, 0 };
    /* cubeMathType 0 (KEEP_DTYPE) as ggml-cann's other convolutions: f32 stays f32 (1 on 310P) */
    OPS_ACLNN(ctx, Convolution, input, weight, NULL, ops_int_array(ctx, stride, 2),
              ops_int_array(ctx, padding, 2), ops_int_array(ctx, dilation, 2), false,
              ops_int_array(ctx, no_output_padding, 2), groups, output, ops_cube_keep(ctx));
    return 0;
}

static int op_conv_2d(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
    if (x->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || w->ne[2] != x->ne[2])
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "CONV_2D: unexpected types or shapes");
    return conv_2d(ctx, dst, w->ne, w->nb, 1);
}

static int op_conv_2d_dw(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *w = dst->src[0], *x = dst->src[1];
    if (x->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 || w->ne[2] != 1 || w->ne[3] != x->ne[2])
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "CONV_2D_DW: unexpected types or shapes");
    /* one filter per channel, groups = C: kernel {KW, KH, 1, C} is already [C, 1, KH, KW] */
    return conv_2d(ctx, dst, w->ne, w->nb, x->ne[2]);
}

OPS_FAMILY(conv) = {
    { GGML_OP_CONV_TRANSPOSE_1D, OPS_ANY, op_conv_transpose_1d },
    { GGML_OP_CONV_2D, OPS_ANY, op_conv_2d },
    { GGML_OP_CONV_2D_DW, OPS_ANY, op_conv_2d_dw },
    OPS_END,
};
