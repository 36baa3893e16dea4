/* CROSS_ENTROPY_LOSS as ggml-cann realises it: logits and labels viewed as [rows, classes],
 * aclnnSoftmaxCrossEntropyWithLogits gives each row's loss (and a backprop, unused here),
 * aclnnReduceSum adds the rows' losses and aclnnMuls scales the sum by 1 / rows into dst.
 * ggml-cann reduces with keepDims false into a {1} tensor; keepDims true gives exactly
 * that shape (without it the reduced shape of a vector is a 0-d tensor). */
#include "ops_cann.h"

static int op_cross_entropy_loss(struct ops_cann_ctx *ctx, struct ggml_tensor *dst) {
    struct ggml_tensor *logits = dst->src[0], *labels = dst->src[1];
    const int64_t nc = logits->ne[0], nr = ops_nelements(logits) / nc;
    if (logits->type != GGML_TYPE_F32 || labels->type != GGML_TYPE_F32 || dst->type != GGML_TYPE_F32 ||
        !ops_is_contiguous(logits) || !ops_is_contiguous(labels) || !ops_same_shape(logits, labels))
        return ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "CROSS_ENTROPY_LOSS: f32 contiguous same-shape sources expected");

    const int64_t m_ne[2] = { nc, nr }, r_ne[1] = { nr }, one = 1;
    const size_t  m_nb[2] = { sizeof(float), nc * sizeof(float) }, one_nb[1] = { sizeof(float) };
    aclTensor *features = ops_tensor_ex(ctx, logits->data, logits->type, m_ne, m_nb, 2, ACL_FORMAT_ND, 0);
    aclTensor *probs    = ops_tensor_ex(ctx, labels->data, labels->type, m_ne, m_nb, 2, ACL_FORMAT_ND, 0);
    void *loss_buf, *grad_buf, *sum_buf;
    aclTensor *loss = ops_scratch_tensor(ctx, GGML_TYPE_F32, r_ne, 1, &loss_buf);
    aclTensor *backprop = ops_scratch_tensor(ctx, GGML_TYPE_F32, m_ne, 2, &grad_buf);
    OPS_ACLNN(ctx, SoftmaxCrossEntropyWithLogits, features, probs, loss, backprop);

    const int64_t dim0 = 0;
    aclTensor *sum = ops_scratch_tensor(ctx, GGML_TYPE_F32, &one, 1, &sum_buf);
    OPS_ACLNN(ctx, ReduceSum, loss, ops_int_array(ctx, &dim0, 1), true, ACL_FLOAT, sum);
    aclTensor *out = ops_tensor_ex(ctx, dst->data, dst->type, &one, one_nb, 1, ACL_FORMAT_ND, 0);
    OPS_ACLNN(ctx, Muls, sum, ops_scalar_f32(ctx, 1.0f / (float) nr), out);
    return 0;
}

OPS_FAMILY(training) = {
    { GGML_OP_CROSS_ENTROPY_LOSS, OPS_ANY, op_cross_entropy_loss },
    OPS_END,
};
