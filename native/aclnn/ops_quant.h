/* q4_0 / q8_0 weights in ggml-cann's upload layout (backend/cann/layout.py), as the
 * quantized MUL_MAT (ops_matmul.c, which defines these) and MUL_MAT_ID (ops_moe.c) paths
 * hand them to aclnnWeightQuantBatchMatmulV2: all quants of the tensor first (int8, or
 * signed int4 two to a byte), then every 32-quant block's f16 scale. */
#ifndef OPS_QUANT_H
#define OPS_QUANT_H

#include "ops_cann.h"

#define QK8_0 32   /* quants per scale, q4_0 and q8_0 alike */

struct ops_quant {
    aclDataType dt;       /* ACL_INT4 or ACL_INT8 */
    size_t      row_q;    /* bytes of one weight row's quants (k, or k / 2) */
    size_t      row_s;    /* bytes of one weight row's scales (k / 32 f16) */
    char       *quants;   /* the quants region */
    char       *scales;   /* the scales region, right after the quants */
    int64_t     group;    /* antiquantGroupSize: 32, or 0 (per channel) where k is one group */
};

struct ops_quant ops_quant_layout(const struct ggml_tensor *w);

/* `rows` weight rows of k quants at `data`, as the operator's transposed weight (k, rows) */
aclTensor *ops_quant_weight(struct ops_cann_ctx *ctx, void *data, aclDataType dt, int64_t k,
                            int64_t rows);

/* their scales at `data` (row_s bytes a row), transposed the same way: (k / 32, rows) */
aclTensor *ops_quant_scales(struct ops_cann_ctx *ctx, void *data, int64_t k, int64_t rows);

/* t's values as a contiguous f16 buffer: t's own data when it already is one, else an
 * aclnnCast into scratch memory. NULL on failure (ctx->rc set). */
void *ops_f16_data(struct ops_cann_ctx *ctx, const struct ggml_tensor *t);

#endif
