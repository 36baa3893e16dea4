/* Data movement: REPEAT, REPEAT_BACK, CONCAT, GET_ROWS, PAD, PAD_REFLECT_1D, ROLL, ARANGE,
 * FILL, TRI, DIAG, DIAG_MASK_INF, with the aclnn operators ggml-cann chooses for them.
 *
 * aclTensor dims run outermost first, so ggml dim d is aclnn dim 3 - d of a 4-D tensor;
 * views are described in ggml order (ne[0] innermost) and reversed by ops_tensor_ex.
 */
#include <math.h>

#include "ops_cann.h"

#define QK8_0 32   /* ggml's block_q8_0: an f16 scale, then 32 int8 quants (34 bytes) */

/* REPEAT: aclnnRepeat with one repeat count per dim, outermost first. */
static int op_repeat(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    int64_t repeats[GGML_MAX_DIMS];
    for (int i = 0; i < GGML_MAX_DIMS; i++) repeats[GGML_MAX_DIMS - 1 - i] = dst->ne[i] / src->ne[i];
    aclTensor *x = ops_tensor(ctx, src), *y = ops_tensor(ctx, dst);
    OPS_ACLNN(ctx, Repeat, x, ops_int_array(ctx, repeats, GGML_MAX_DIMS), y);
    return 0;
}

/* REPEAT_BACK (no ggml-cann mapping; aclnn expresses it): every repeated dim of src is
 * split into (tile, within-tile) dims and aclnnReduceSum sums over the tile dims. */
static int op_repeat_back(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    int64_t ne[2 * GGML_MAX_DIMS], tiles[GGML_MAX_DIMS];
    size_t  nb[2 * GGML_MAX_DIMS];
    int     d = 0, n_tiles = 0;
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        int64_t nr = src->ne[i] / dst->ne[i];
        ne[d] = dst->ne[i];
        nb[d++] = src->nb[i];
        if (nr > 1) {   /* tile t of dim i starts at element t * dst->ne[i] */
            ne[d] = nr;
            nb[d] = src->nb[i] * (size_t) dst->ne[i];
            tiles[n_tiles++] = d++;
        }
    }
    aclTensor *y = ops_tensor(ctx, dst);
    if (!n_tiles) {   /* nothing repeated: a copy (an empty dim list would reduce all) */
        OPS_ACLNN(ctx, InplaceCopy, y, ops_tensor(ctx, src));
        return 0;
    }
    for (int k = 0; k < n_tiles; k++) tiles[k] = d - 1 - tiles[k];   /* aclnn dim numbers */
    aclTensor *x = ops_tensor_ex(ctx, src->data, src->type, ne, nb, d, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, ReduceSum, x, ops_int_array(ctx, tiles, (uint64_t) n_tiles), false,
              ops_acl_dtype(dst->type), y);
    return 0;
}

/* A block-quantized tensor as the INT8 bytes of its rows (whole blocks: ggml keeps
 * ne[0] a multiple of the block size); dst, contiguous, gives the bytes per element. */
static aclTensor *row_bytes(struct ops_cann_ctx *ctx, const struct ggml_tensor *t,
                            const struct ggml_tensor *dst) {
    const int64_t ne[GGML_MAX_DIMS] = { (int64_t) dst->nb[1] * t->ne[0] / dst->ne[0], t->ne[1], t->ne[2], t->ne[3] };
    const size_t  nb[GGML_MAX_DIMS] = { 1, t->nb[1], t->nb[2], t->nb[3] };
    return ops_tensor_ex(ctx, t->data, GGML_TYPE_I8, ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
}

/* A q4_0 / q8_0 tensor (or a view of one) in ggml-cann's device layout
 * (backend/cann/layout.py): *q its quants as bytes (ne0 / 2 or ne0 per row), *s its f16
 * scales (ne0 / 32 per row), both in the two regions of its base's memory. */
static void split_regions(struct ops_cann_ctx *ctx, const struct ggml_tensor *t, aclTensor **q,
                          aclTensor **s) {
    const struct ggml_tensor *base = t->view_src ? t->view_src : t;
    const size_t  ts = t->type == GGML_TYPE_Q4_0 ? 18 : 2 + QK8_0, qb = ts - 2;  /* bytes per block */
    const size_t  first = t->view_offs / ts;                /* the view's first block */
    char         *scales = (char *) base->data + (size_t) (ops_nelements(base) / QK8_0) * qb;
    int64_t q_ne[GGML_MAX_DIMS], s_ne[GGML_MAX_DIMS];
    size_t  q_nb[GGML_MAX_DIMS], s_nb[GGML_MAX_DIMS];
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        q_ne[i] = s_ne[i] = t->ne[i];
        q_nb[i] = t->nb[i] / ts * qb;   /* a row's blocks become its quants, and its scales */
        s_nb[i] = t->nb[i] / ts * 2;
    }
    q_ne[0] = t->ne[0] / QK8_0 * (int64_t) qb;   q_nb[0] = 1;
    s_ne[0] = t->ne[0] / QK8_0;                  s_nb[0] = 2;
    *q = ops_tensor_ex(ctx, (char *) base->data + first * qb, GGML_TYPE_I8, q_ne, q_nb,
                       GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    *s = ops_tensor_ex(ctx, scales + first * 2, GGML_TYPE_F16, s_ne, s_nb, GGML_MAX_DIMS,
                       ACL_FORMAT_ND, 0);
}

/* CONCAT: aclnnCat of the two sources along aclnn dim 3 - dim (block-quantized ones as
 * bytes: rows of whole blocks concatenate like any other data; q4_0 / q8_0, split on the
 * device into quants and scales, by one Cat of each region). */
static int op_concat(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    const int32_t dim = dst->op_params[0];
    if (dim < 0 || dim >= GGML_MAX_DIMS)
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "CONCAT: dim %d out of range", (int) dim);
    if (dst->type == GGML_TYPE_Q4_0 || dst->type == GGML_TYPE_Q8_0) {
        aclTensor *q[2], *s[2], *yq, *ys;
        for (int i = 0; i < 2; i++) split_regions(ctx, dst->src[i], &q[i], &s[i]);
        split_regions(ctx, dst, &yq, &ys);
        if (ctx->rc) return ctx->rc;
        OPS_ACLNN(ctx, Cat, ops_tensor_list(ctx, q, 2), (int64_t) (GGML_MAX_DIMS - 1 - dim), yq);
        OPS_ACLNN(ctx, Cat, ops_tensor_list(ctx, s, 2), (int64_t) (GGML_MAX_DIMS - 1 - dim), ys);
        return 0;
    }
    const int bytes = ops_elem_size(dst->type) == 0;
    aclTensor *parts[2], *y;
    for (int i = 0; i < 2; i++)
        parts[i] = bytes ? row_bytes(ctx, dst->src[i], dst) : ops_tensor(ctx, dst->src[i]);
    y = bytes ? row_bytes(ctx, dst, dst) : ops_tensor(ctx, dst);
    if (ctx->rc) return ctx->rc;
    aclTensorList *list = ops_tensor_list(ctx, parts, 2);
    OPS_ACLNN(ctx, Cat, list, (int64_t) (GGML_MAX_DIMS - 1 - dim), y);
    return 0;
}

/* GET_ROWS, as ggml-cann does it: one aclnnGatherV2 (dim 0 of a [rows, ne0] view) per
 * (i2, i3) slice, from src0 itself when its type is dst's, else from a copy converted
 * with aclnnCast (f16 / bf16 -> f32) or dequantized with aclnnMul (q8_0: quants * scale,
 * read from the quant and scale regions of ggml-cann's upload layout).
 * With many slices (700 x 100 in test-backend-ops) that is as many launches; there, when
 * the slices' rows lie evenly spaced, the row ids are offset to one [slices * ne1, ne0]
 * view instead (aclnnArange of the slice bases, aclnnAdd) and gathered by one launch. */
#define GATHER_LOOP_MAX 16
#define F32_EXACT_INT   (1 << 24)   /* aclnnArange takes float scalars here */

static int gather_batched(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, void *base,
                          const size_t *nb) {
    const struct ggml_tensor *src = dst->src[0], *idx = dst->src[1];
    const int64_t n_slices = src->ne[2] * src->ne[3], n_rows = n_slices * src->ne[1];
    const size_t  i32 = sizeof(int32_t);
    int32_t *bases = ops_scratch(ctx, (size_t) n_slices * i32);
    int32_t *ids = ops_scratch(ctx, (size_t) ops_nelements(idx) * i32);
    if (!bases || !ids) return ctx->rc;
    const size_t b_nb = i32;
    aclTensor *b_vec = ops_tensor_ex(ctx, bases, GGML_TYPE_I32, &n_slices, &b_nb, 1, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, Arange, ops_scalar_f32(ctx, 0.0f), ops_scalar_f32(ctx, (float) n_rows),
              ops_scalar_f32(ctx, (float) src->ne[1]), b_vec);
    /* row id + base of its slice: ids {r, ne2, ne3} + bases {1, ne2, ne3} */
    const int64_t b_ne[3] = { 1, src->ne[2], src->ne[3] };
    const size_t  b_nb3[3] = { i32, i32, i32 * (size_t) src->ne[2] };
    size_t id_nb[3];
    ops_contiguous_nb(idx->ne, 3, i32, id_nb);
    aclTensor *row_ids = ops_tensor_ex(ctx, idx->data, idx->type, idx->ne, idx->nb, 3, ACL_FORMAT_ND, 0);
    aclTensor *slice_bases = ops_tensor_ex(ctx, bases, GGML_TYPE_I32, b_ne, b_nb3, 3, ACL_FORMAT_ND, 0);
    aclTensor *flat_ids = ops_tensor_ex(ctx, ids, GGML_TYPE_I32, idx->ne, id_nb, 3, ACL_FORMAT_ND, 0);
    /* alpha must cast to the promoted type, INT32: an integer 1, never a float */
    OPS_ACLNN(ctx, Add, row_ids, slice_bases, ops_scalar_i32(ctx, 1), flat_ids);
    const int64_t r_ne[2] = { src->ne[0], n_rows };
    aclTensor *rows = ops_tensor_ex(ctx, base, dst->type, r_ne, nb, 2, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, GatherV2, rows, (int64_t) 0, flat_ids, ops_tensor(ctx, dst));
    return 0;
}

static int gather_slices(struct ops_cann_ctx *ctx, struct ggml_tensor *dst, void *base,
                         const size_t *nb) {
    const struct ggml_tensor *src = dst->src[0], *idx = dst->src[1];
    const int64_t n_slices = src->ne[2] * src->ne[3];
    if (n_slices > GATHER_LOOP_MAX && n_slices * src->ne[1] < F32_EXACT_INT && idx->type == GGML_TYPE_I32 &&
        nb[2] == nb[1] * (size_t) src->ne[1] && nb[3] == nb[2] * (size_t) src->ne[2])
        return gather_batched(ctx, dst, base, nb);
    const int64_t s_ne[2] = { src->ne[0], src->ne[1] }, d_ne[2] = { dst->ne[0], idx->ne[0] };
    const size_t  s_nb[2] = { nb[0], nb[1] }, d_nb[2] = { dst->nb[0], dst->nb[1] };
    const int64_t i_ne = idx->ne[0];
    const size_t  i_nb = idx->nb[0];
    for (int64_t i3 = 0; i3 < src->ne[3]; i3++) {
        for (int64_t i2 = 0; i2 < src->ne[2]; i2++) {
            int mark = ops_objs_mark(ctx);
            aclTensor *rows = ops_tensor_ex(ctx, (char *) base + i3 * nb[3] + i2 * nb[2], dst->type,
                                            s_ne, s_nb, 2, ACL_FORMAT_ND, 0);
            aclTensor *ids = ops_tensor_ex(ctx, (char *) idx->data + i3 * idx->nb[2] + i2 * idx->nb[1],
                                           idx->type, &i_ne, &i_nb, 1, ACL_FORMAT_ND, 0);
            aclTensor *out = ops_tensor_ex(ctx, (char *) dst->data + i3 * dst->nb[3] + i2 * dst->nb[2],
                                           dst->type, d_ne, d_nb, 2, ACL_FORMAT_ND, 0);
            OPS_ACLNN(ctx, GatherV2, rows, (int64_t) 0, ids, out);
            ops_objs_release(ctx, mark);   /* thousands of slices: keep the node's objects few */
        }
    }
    return 0;
}

static int op_get_rows(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    if (src->type == dst->type) return gather_slices(ctx, dst, src->data, src->nb);

    size_t es = ops_elem_size(dst->type), nb[GGML_MAX_DIMS + 1];
    void *conv = ops_scratch(ctx, (size_t) ops_nelements(src) * es);
    if (!conv) return ctx->rc;
    if (src->type == GGML_TYPE_Q8_0) {
        /* ggml-cann's upload layout (backend/cann/layout.py): every int8 quant in element
         * order, then every block's f16 scale; 5-D views [32 | 1] x blocks x ne1 x ne2 x ne3 */
        const int64_t n_blk = ops_nelements(src) / QK8_0;
        int64_t q_ne[GGML_MAX_DIMS + 1] = { QK8_0, src->ne[0] / QK8_0, src->ne[1], src->ne[2], src->ne[3] };
        int64_t s_ne[GGML_MAX_DIMS + 1] = { 1, src->ne[0] / QK8_0, src->ne[1], src->ne[2], src->ne[3] };
        size_t  q_nb[GGML_MAX_DIMS + 1], s_nb[GGML_MAX_DIMS + 1];
        ops_contiguous_nb(q_ne, GGML_MAX_DIMS + 1, 1, q_nb);
        ops_contiguous_nb(s_ne, GGML_MAX_DIMS + 1, 2, s_nb);
        aclTensor *quants = ops_tensor_ex(ctx, src->data, GGML_TYPE_I8, q_ne, q_nb,
                                          GGML_MAX_DIMS + 1, ACL_FORMAT_ND, 0);
        aclTensor *scales = ops_tensor_ex(ctx, (char *) src->data + n_blk * QK8_0, GGML_TYPE_F16,
                                          s_ne, s_nb, GGML_MAX_DIMS + 1, ACL_FORMAT_ND, 0);
        ops_contiguous_nb(q_ne, GGML_MAX_DIMS + 1, es, nb);
        aclTensor *out = ops_tensor_ex(ctx, conv, dst->type, q_ne, nb, GGML_MAX_DIMS + 1, ACL_FORMAT_ND, 0);
        OPS_ACLNN(ctx, Mul, quants, scales, out);
    } else {
        ops_contiguous_nb(src->ne, GGML_MAX_DIMS, es, nb);
        aclTensor *out = ops_tensor_ex(ctx, conv, dst->type, src->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
        OPS_ACLNN(ctx, Cast, ops_tensor(ctx, src), ops_acl_dtype(dst->type), out);
    }
    ops_contiguous_nb(src->ne, GGML_MAX_DIMS, es, nb);
    return gather_slices(ctx, dst, conv, nb);
}

/* Circular padding of ggml dims 0 and 1 (aclnnCircularPad2d pads the last two aclnn
 * dims), from x to y, both given as 4-D ggml-order views. */
static int circular_pad2d(struct ops_cann_ctx *ctx, aclTensor *x, aclTensor *y,
                          int64_t l0, int64_t r0, int64_t l1, int64_t r1) {
    const int64_t padding[4] = { l0, r0, l1, r1 };   /* left, right, top, bottom */
    OPS_ACLNN(ctx, CircularPad2d, x, ops_int_array(ctx, padding, 4), y);
    return 0;
}

/* The same tensor with ggml dims (2, 3) moved innermost: {ne2, ne3, ne0, ne1}. */
static aclTensor *dims23_inner(struct ops_cann_ctx *ctx, void *data, enum ggml_type type,
                               const int64_t *ne, const size_t *nb) {
    const int64_t t_ne[4] = { ne[2], ne[3], ne[0], ne[1] };
    const size_t  t_nb[4] = { nb[2], nb[3], nb[0], nb[1] };
    return ops_tensor_ex(ctx, data, type, t_ne, t_nb, 4, ACL_FORMAT_ND, 0);
}

/* PAD: aclnnConstantPadNd with ggml's (left, right) pairs, innermost dim first, as the
 * operator takes them; circular padding (not in ggml-cann) as one or two
 * aclnnCircularPad2d passes: dims 0-1, then dims 2-3 through a transposed view. */
static int op_pad(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const int32_t *p = dst->op_params;
    if (!p[8]) {
        int64_t pads[2 * GGML_MAX_DIMS];
        for (int i = 0; i < 2 * GGML_MAX_DIMS; i++) pads[i] = p[i];
        aclTensor *x = ops_tensor(ctx, src), *y = ops_tensor(ctx, dst);
        OPS_ACLNN(ctx, ConstantPadNd, x, ops_int_array(ctx, pads, 2 * GGML_MAX_DIMS),
                  ops_scalar_f32(ctx, 0.0f), y);
        return 0;
    }
    const int inner = p[0] || p[1] || p[2] || p[3], outer = p[4] || p[5] || p[6] || p[7];
    if (!outer) return circular_pad2d(ctx, ops_tensor(ctx, src), ops_tensor(ctx, dst), p[0], p[1], p[2], p[3]);
    /* the middle stage: dims 0-1 padded, dims 2-3 not yet */
    int64_t m_ne[GGML_MAX_DIMS] = { dst->ne[0], dst->ne[1], src->ne[2], src->ne[3] };
    size_t  m_nb[GGML_MAX_DIMS];
    void   *m_data = src->data;
    if (inner) {
        ops_contiguous_nb(m_ne, GGML_MAX_DIMS, ops_elem_size(src->type), m_nb);
        m_data = ops_scratch(ctx, m_nb[3] * (size_t) m_ne[3]);
        if (!m_data) return ctx->rc;
        aclTensor *t = ops_tensor_ex(ctx, m_data, src->type, m_ne, m_nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
        int rc = circular_pad2d(ctx, ops_tensor(ctx, src), t, p[0], p[1], p[2], p[3]);
        if (rc) return rc;
    } else {
        for (int i = 0; i < GGML_MAX_DIMS; i++) m_nb[i] = src->nb[i];
    }
    return circular_pad2d(ctx, dims23_inner(ctx, m_data, src->type, m_ne, m_nb),
                          dims23_inner(ctx, dst->data, dst->type, dst->ne, dst->nb), p[4], p[5], p[6], p[7]);
}

/* PAD_REFLECT_1D: aclnnReflectionPad1d over 3-D views (ne2 and ne3 merged). */
static int op_pad_reflect_1d(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    if (src->nb[3] != src->nb[2] * (size_t) src->ne[2] || dst->nb[3] != dst->nb[2] * (size_t) dst->ne[2])
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "PAD_REFLECT_1D: dims 2 and 3 must merge");
    const int64_t padding[2] = { dst->op_params[0], dst->op_params[1] };
    const int64_t x_ne[3] = { src->ne[0], src->ne[1], src->ne[2] * src->ne[3] };
    const int64_t y_ne[3] = { dst->ne[0], dst->ne[1], dst->ne[2] * dst->ne[3] };
    aclTensor *x = ops_tensor_ex(ctx, src->data, src->type, x_ne, src->nb, 3, ACL_FORMAT_ND, 0);
    aclTensor *y = ops_tensor_ex(ctx, dst->data, dst->type, y_ne, dst->nb, 3, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, ReflectionPad1d, x, ops_int_array(ctx, padding, 2), y);
    return 0;
}

/* ROLL (no ggml-cann mapping; its aclnn_roll helper shows the call): one aclnnRoll with
 * a shift for every aclnn dim. */
static int op_roll(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    int64_t shifts[GGML_MAX_DIMS], dims[GGML_MAX_DIMS];
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        dims[i] = i;
        shifts[i] = dst->op_params[GGML_MAX_DIMS - 1 - i];
    }
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    OPS_ACLNN(ctx, Roll, x, ops_int_array(ctx, shifts, GGML_MAX_DIMS), ops_int_array(ctx, dims, GGML_MAX_DIMS), y);
    return 0;
}

/* ARANGE: aclnnArange(start, stop, step) into the 1-D dst. */
static int op_arange(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclScalar *start = ops_scalar_f32(ctx, ops_param_f32(dst, 0));
    aclScalar *stop = ops_scalar_f32(ctx, ops_param_f32(dst, 1));
    aclScalar *step = ops_scalar_f32(ctx, ops_param_f32(dst, 2));
    const int64_t n = ops_nelements(dst);
    const size_t  nb = dst->nb[0];
    OPS_ACLNN(ctx, Arange, start, stop, step, ops_tensor_ex(ctx, dst->data, dst->type, &n, &nb, 1, ACL_FORMAT_ND, 0));
    return 0;
}

/* FILL: aclnnInplaceFillScalar of dst with the constant. */
static int op_fill(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    OPS_ACLNN(ctx, InplaceFillScalar, ops_tensor(ctx, dst), ops_scalar_f32(ctx, ops_param_f32(dst, 0)));
    return 0;
}

/* TRI: aclnnTril / aclnnTriu on the last two aclnn dims (ggml's rows, columns). */
static int op_tri(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    aclTensor *x = ops_tensor(ctx, dst->src[0]), *y = ops_tensor(ctx, dst);
    switch (dst->op_params[0]) {   /* enum ggml_tri_type */
        case GGML_TRI_TYPE_UPPER_DIAG: OPS_ACLNN(ctx, Triu, x, (int64_t) 0, y); break;
        case GGML_TRI_TYPE_UPPER:      OPS_ACLNN(ctx, Triu, x, (int64_t) 1, y); break;
        case GGML_TRI_TYPE_LOWER_DIAG: OPS_ACLNN(ctx, Tril, x, (int64_t) 0, y); break;
        case GGML_TRI_TYPE_LOWER:      OPS_ACLNN(ctx, Tril, x, (int64_t) -1, y); break;
        default: return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "TRI: unknown type %d", (int) dst->op_params[0]);
    }
    return 0;
}

/* DIAG: dst zeroed by aclnnInplaceFillScalar, then src copied onto its diagonal, a view
 * whose innermost stride steps one row and one column at once. */
static int op_diag(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    OPS_ACLNN(ctx, InplaceFillScalar, ops_tensor(ctx, dst), ops_scalar_f32(ctx, 0.0f));
    const int64_t ne[3] = { src->ne[0], src->ne[2], src->ne[3] };
    const size_t  s_nb[3] = { src->nb[0], src->nb[2], src->nb[3] };
    const size_t  d_nb[3] = { dst->nb[0] + dst->nb[1], dst->nb[2], dst->nb[3] };
    aclTensor *diagonal = ops_tensor_ex(ctx, dst->data, dst->type, ne, d_nb, 3, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, InplaceCopy, diagonal, ops_tensor_ex(ctx, src->data, src->type, ne, s_nb, 3, ACL_FORMAT_ND, 0));
    return 0;
}

/* DIAG_MASK_INF as ggml-cann does it: a -inf tensor keeps its part above diagonal
 * n_past + 1 (aclnnInplaceTriu), src keeps the part on and below it (aclnnTril), and
 * their sum (aclnnInplaceAdd) is src where column <= row + n_past, -inf elsewhere. */
static int op_diag_mask_inf(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *src = dst->src[0];
    const int64_t k = (int64_t) dst->op_params[0] + 1;
    size_t nb[GGML_MAX_DIMS];
    ops_contiguous_nb(src->ne, GGML_MAX_DIMS, ops_elem_size(src->type), nb);
    void *buf = ops_scratch(ctx, nb[3] * (size_t) src->ne[3]);
    if (!buf) return ctx->rc;
    aclTensor *mask = ops_tensor_ex(ctx, buf, src->type, src->ne, nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
    aclTensor *y = ops_tensor(ctx, dst);
    OPS_ACLNN(ctx, InplaceFillScalar, mask, ops_scalar_f32(ctx, -INFINITY));
    OPS_ACLNN(ctx, InplaceTriu, mask, k);
    OPS_ACLNN(ctx, Tril, ops_tensor(ctx, src), k, y);
    OPS_ACLNN(ctx, InplaceAdd, y, mask, ops_scalar_f32(ctx, 1.0f));
    return 0;
}

OPS_FAMILY(movement) = {
    { GGML_OP_REPEAT,         OPS_ANY, op_repeat },
    { GGML_OP_REPEAT_BACK,    OPS_ANY, op_repeat_back },
    { GGML_OP_CONCAT,         OPS_ANY, op_concat },
    { GGML_OP_GET_ROWS,       OPS_ANY, op_get_rows },
    { GGML_OP_PAD,            OPS_ANY, op_pad },
    { GGML_OP_PAD_REFLECT_1D, OPS_ANY, op_pad_reflect_1d },
    { GGML_OP_ROLL,           OPS_ANY, op_roll },
    { GGML_OP_ARANGE,         OPS_ANY, op_arange },
    { GGML_OP_FILL,           OPS_ANY, op_fill },
    { GGML_OP_TRI,            OPS_ANY, op_tri },
    { GGML_OP_DIAG,           OPS_ANY, op_diag },
    { GGML_OP_DIAG_MASK_INF,  OPS_ANY, op_diag_mask_inf },
    OPS_END,
};
