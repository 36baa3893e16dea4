/* Image ops: IM2COL, POOL_2D and UPSCALE as ggml-cann realises them, and POOL_1D (beyond
 * ggml-cann) as a pool over one-row images.
 *
 * ggml images are {W, H, C, N}; their 4-D aclTensors (dims reversed) are NCHW.
 *   IM2COL   aclnnIm2col -> [N, C*KH*KW, L = OH*OW] in scratch, then one copy (aclnnInplaceCopy,
 *            or aclnnCast when dst is another type) into dst {C*KH*KW, OW, OH, N} seen with
 *            its first two strides swapped: the transpose ggml-cann does with aclnnPermute.
 *   POOL_2D  avg: aclnnAvgPool2d (count_include_pad); max: aclnnConstantPadNd with -FLT_MAX
 *            into scratch, then aclnnMaxPool without padding.
 *   UPSCALE  aclnnUpsampleNearest2d to (ne1, ne0); bilinear (beyond ggml-cann)
 *            aclnnUpsampleBilinear2d.
 */
#include <float.h>

#include "ops_cann.h"

/* dst {K, L, B} (K innermost, contiguous rows of K) as the ND tensor [B, K, L]:
 * the transpose of the last two dims, by strides. */
static aclTensor *transposed_rows(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, int64_t k,
                                  int64_t l, int64_t b) {
    const int64_t ne[3] = { l, k, b };
    const size_t  nb[3] = { (size_t) k * dst->nb[0], dst->nb[0], (size_t) (k * l) * dst->nb[0] };
    return ops_tensor_ex(ctx, dst->data, dst->type, ne, nb, 3, ACL_FORMAT_ND, 0);
}

/* src copied into dst, converted when their types differ */
static int copy_or_cast(struct ops_cann_ctx *ctx, aclTensor *src, enum ggml_type src_type,
                        aclTensor *dst, enum ggml_type dst_type) {
    if (src_type == dst_type)
        OPS_ACLNN(ctx, InplaceCopy, dst, src);
    else
        OPS_ACLNN(ctx, Cast, src, ops_acl_dtype(dst_type), dst);
    return 0;
}

/* IM2COL. aclnnIm2col is 2-D only; for 1-D ggml-cann keeps its call 2-D: the image
 * {IW, IC, B} becomes [1, B, IC, IW], the kernel height is IC with padding 1 and stride 1,
 * so the output has 3 rows (offsets -1, 0, +1) of which the middle one is the 1-D im2col. */
static int op_im2col(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *ker = dst->src[0], *img = dst->src[1];
    const int32_t *op = dst->op_params;
    const int is_2d = op[6] == 1;
    const int64_t kh = ker->ne[1], kw = ker->ne[0];
    const int64_t c = img->ne[2], n = img->ne[3];             /* 1-D: c is the batch, n = 1 */
    const int64_t ow = dst->ne[1], oh = is_2d ? dst->ne[2] : 1;
    const int64_t rows = is_2d ? 1 : 3;                       /* output rows aclnnIm2col makes */
    const int64_t kernel[2] = { kh, kw };
    const int64_t dilation[2] = { is_2d ? op[5] : 1, op[4] };
    const int64_t padding[2] = { is_2d ? op[3] : 1, op[2] };
    const int64_t stride[2] = { is_2d ? op[1] : 1, op[0] };
    if (!is_2d && img->ne[1] != kh)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "IM2COL 1-D: image channels %lld != kernel's %lld",
                        (long long) img->ne[1], (long long) kh);

    const int64_t l = oh * ow * rows, k = c * kh * kw;
    const int64_t cols_ne[3] = { l, k, n };                   /* [N, C*KH*KW, L] */
    void *cols_data;
    aclTensor *cols = ops_scratch_tensor(ctx, img->type, cols_ne, 3, &cols_data);
    OPS_ACLNN(ctx, Im2col, ops_tensor(ctx, img), ops_int_array(ctx, kernel, 2), ops_int_array(ctx, dilation, 2),
              ops_int_array(ctx, padding, 2), ops_int_array(ctx, stride, 2), cols);

    if (is_2d)
        return copy_or_cast(ctx, cols, img->type, transposed_rows(ctx, dst, k, l, n), dst->type);

    /* 1-D: the middle row of every (batch, kernel tap) column, as [B, KH*KW, OW]; dst is
     * {KH*KW, OW, B}, its [B, KH*KW, OW] view again by swapped strides */
    const size_t es = ops_elem_size(img->type);
    const int64_t mid_ne[3] = { ow, kh * kw, c };
    const size_t  mid_nb[3] = { es, (size_t) l * es, (size_t) (l * kh * kw) * es };
    aclTensor *mid = ops_tensor_ex(ctx, cols_data, img->type, mid_ne, mid_nb, 3, ACL_FORMAT_ND,
                                   (size_t) ow * es);
    return copy_or_cast(ctx, mid, img->type, transposed_rows(ctx, dst, kh * kw, ow, c), dst->type);
}

/* a 4-D view of a ggml tensor in a given format */
static aclTensor *as_4d(struct ops_cann_ctx *ctx, const struct ggml_tensor *t, aclFormat format) {
    return ops_tensor_ex(ctx, t->data, t->type, t->ne, t->nb, 4, format, 0);
}

/* Max pooling of src into dst, windows k (ggml order: W, H), strides s, paddings p; the
 * padding (-FLT_MAX, which a max ignores) is made explicit first, as ggml-cann does.
 * ggml-cann sizes that scratch as nbytes(src) + 2*p0 + 2*p1*nb1, short of the padded image
 * it holds; here it is the padded image. */
static int max_pool(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, const int64_t k[2],
                    const int64_t s[2], const int64_t p[2]) {
    struct ggml_tensor *src = dst->src[0];
    const int64_t padded_ne[4] = { src->ne[0] + 2 * p[0], src->ne[1] + 2 * p[1], src->ne[2], src->ne[3] };
    void *padded_data;
    aclTensor *padded = ops_scratch_tensor(ctx, src->type, padded_ne, 4, &padded_data);
    const int64_t pads[8] = { p[0], p[0], p[1], p[1], 0, 0, 0, 0 };   /* last dim first */
    OPS_ACLNN(ctx, ConstantPadNd, as_4d(ctx, src, ACL_FORMAT_ND), ops_int_array(ctx, pads, 8),
              ops_scalar_f32(ctx, -FLT_MAX), padded);

    const int64_t kernel[2] = { k[1], k[0] }, strides[2] = { s[1], s[0] };
    const int64_t no_pads[4] = { 0, 0, 0, 0 }, dilations[2] = { 1, 1 };
    OPS_ACLNN(ctx, MaxPool, padded, ops_int_array(ctx, kernel, 2), ops_int_array(ctx, strides, 2), (int64_t) 0,
              ops_int_array(ctx, no_pads, 4), ops_int_array(ctx, dilations, 2), (int64_t) 0,
              as_4d(ctx, dst, ACL_FORMAT_ND));
    return 0;
}

/* Average pooling by aclnnAvgPool2d over NCHW views; include_pad: divide by the whole
 * window (POOL_2D) or by the values inside the image (POOL_1D). */
static int avg_pool(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, const int64_t k[2],
                    const int64_t s[2], const int64_t p[2], bool include_pad) {
    const int64_t kernel[2] = { k[1], k[0] }, strides[2] = { s[1], s[0] }, paddings[2] = { p[1], p[0] };
    /* cubeMathType 0 (KEEP_DTYPE): f32 stays f32 on Atlas A2/A3; 1 on 310P, as ggml-cann */
    OPS_ACLNN(ctx, AvgPool2d, as_4d(ctx, dst->src[0], ACL_FORMAT_NCHW), ops_int_array(ctx, kernel, 2),
              ops_int_array(ctx, strides, 2), ops_int_array(ctx, paddings, 2), false, include_pad,
              (int64_t) 0, ops_cube_keep(ctx), as_4d(ctx, dst, ACL_FORMAT_NCHW));
    return 0;
}

/* POOL_2D: op_params = [op, k0, k1, s0, s1, p0, p1] */
static int op_pool_2d(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const int32_t *op = dst->op_params;
    const int64_t k[2] = { op[1], op[2] }, s[2] = { op[3], op[4] }, p[2] = { op[5], op[6] };
    return op[0] == 0 ? max_pool(ctx, dst, k, s, p) : avg_pool(ctx, dst, k, s, p, true);
}

/* POOL_1D: op_params = [op, k0, s0, p0]; a 2-D pool with a 1-row kernel over {W, rows...}.
 * ggml's 1-D average counts only the values inside the row: count_include_pad off. */
static int op_pool_1d(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const int32_t *op = dst->op_params;
    const int64_t k[2] = { op[1], 1 }, s[2] = { op[2], 1 }, p[2] = { op[3], 0 };
    return op[0] == 0 ? max_pool(ctx, dst, k, s, p) : avg_pool(ctx, dst, k, s, p, false);
}

/* UPSCALE to (ne1, ne0) with ne2 / ne3 kept: nearest by aclnnUpsampleNearest2d, as
 * ggml-cann; bilinear (beyond ggml-cann v0.20.2, which maps only nearest) by
 * aclnnUpsampleBilinear2d, whose half-pixel or corner-aligned sampling with edge clamping is
 * ggml's. The scales passed are dst / src, so that floor(src * scale) is dst's size. */
static int op_upscale(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const int32_t mode = dst->op_params[0];
    const int64_t size[2] = { dst->ne[1], dst->ne[0] };
    aclTensor *x = as_4d(ctx, src, ACL_FORMAT_NCHW), *y = as_4d(ctx, dst, ACL_FORMAT_NCHW);
    if ((mode & 0xFF) == 0) {
        OPS_ACLNN(ctx, UpsampleNearest2d, x, ops_int_array(ctx, size, 2), y);
        return 0;
    }
    const bool align_corners = (mode & (1 << 8)) != 0;
    OPS_ACLNN(ctx, UpsampleBilinear2d, x, ops_int_array(ctx, size, 2), align_corners,
              (double) dst->ne[1] / (double) src->ne[1], (double) dst->ne[0] / (double) src->ne[0], y);
    return 0;
}

OPS_FAMILY(image) = {
    { GGML_OP_IM2COL, OPS_ANY, op_im2col },
    { GGML_OP_POOL_2D, OPS_ANY, op_pool_2d },
    { GGML_OP_POOL_1D, OPS_ANY, op_pool_1d },
    { GGML_OP_UPSCALE, OPS_ANY, op_upscale },
    OPS_END,
};
