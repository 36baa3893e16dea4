/* ggml tensors as aclTensor descriptors, and the broadcast that ggml's binary ops need. */
#include "ops_cann.h"

aclDataType ops_acl_dtype(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_F32:  return ACL_FLOAT;
        case GGML_TYPE_F16:  return ACL_FLOAT16;
        case GGML_TYPE_BF16: return ACL_BF16;
        case GGML_TYPE_F64:  return ACL_DOUBLE;
        case GGML_TYPE_I8:   return ACL_INT8;
        case GGML_TYPE_I16:  return ACL_INT16;
        case GGML_TYPE_I32:  return ACL_INT32;
        case GGML_TYPE_I64:  return ACL_INT64;
        default:             return ACL_DT_UNDEFINED;
    }
}

size_t ops_elem_size(enum ggml_type type) {
    switch (type) {
        case GGML_TYPE_I8:   return 1;
        case GGML_TYPE_F16:
        case GGML_TYPE_BF16:
        case GGML_TYPE_I16:  return 2;
        case GGML_TYPE_F32:
        case GGML_TYPE_I32:  return 4;
        case GGML_TYPE_F64:
        case GGML_TYPE_I64:  return 8;
        default:             return 0;   /* block-quantized: no per-element strides */
    }
}

int64_t ops_nelements(const struct ggml_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int ops_same_shape(const struct ggml_tensor *a, const struct ggml_tensor *b) {
    for (int i = 0; i < GGML_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return 0;
    return 1;
}

int ops_is_contiguous(const struct ggml_tensor *t) {
    size_t expect = ops_elem_size(t->type);
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        if (t->ne[i] != 1 && t->nb[i] != expect) return 0;
        expect *= (size_t) t->ne[i];
    }
    return 1;
}

/* aclCreateTensor's tensorData must be 32-byte aligned (aolapi operatorlist_00019): a
 * view that starts elsewhere (a ggml view, a slice of a buffer) is described from the
 * aligned address below it, its start becoming the element offset. Device memory comes
 * from aclrtMalloc (64-byte aligned), so that address is still inside the allocation. */
void *ops_data_base(void *data, size_t *offset) {
    uintptr_t at = (uintptr_t) data + *offset;
    *offset = at % OPS_DATA_ALIGN;
    return (void *) (at - *offset);
}

aclTensor *ops_tensor_ex(struct ops_cann_ctx *ctx, void *data, enum ggml_type type,
                         const int64_t *ne, const size_t *nb, int dims, aclFormat format,
                         size_t offset) {
    if (ctx->rc) return NULL;
    size_t es = ops_elem_size(type);
    aclDataType dt = ops_acl_dtype(type);
    if (!es || dt == ACL_DT_UNDEFINED) {
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "ggml type %d has no element-wise aclDataType", (int) type);
        return NULL;
    }
    data = ops_data_base(data, &offset);
    if (dims < 1 || dims > 2 * GGML_MAX_DIMS || offset % es) {
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "bad aclTensor layout (dims %d, offset %zu from a "
                 "32-byte boundary)", dims, offset);
        return NULL;
    }
    /* aclTensor dims run outermost first and its strides count elements */
    int64_t acl_ne[2 * GGML_MAX_DIMS], acl_stride[2 * GGML_MAX_DIMS];
    int64_t storage = 1 + (int64_t) (offset / es);
    for (int i = 0; i < dims; i++) {
        if (nb[i] % es) {
            ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "stride %zu is not a whole number of elements", nb[i]);
            return NULL;
        }
        acl_ne[dims - 1 - i] = ne[i];
        acl_stride[dims - 1 - i] = (int64_t) (nb[i] / es);
        if (ne[i] == 0) storage = 0;
        else if (storage) storage += (ne[i] - 1) * (int64_t) (nb[i] / es);
    }
    /* the storage is the span the view reaches: nothing of a neighbour is described */
    aclTensor *t = ACL.aclCreateTensor(acl_ne, (uint64_t) dims, dt, acl_stride, (int64_t) (offset / es),
                                       format, &storage, 1, data);
    if (!t) {   /* it returns no code: the rejection is a parameter error */
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "aclCreateTensor returned NULL: %s", ops_recent_msg());
        return NULL;
    }
    ops_keep_tensor(ctx, t);
    return t;
}

aclTensor *ops_tensor(struct ops_cann_ctx *ctx, const struct ggml_tensor *t) {
    return ops_tensor_ex(ctx, t->data, t->type, t->ne, t->nb, GGML_MAX_DIMS, ACL_FORMAT_ND, 0);
}

aclTensor *ops_scratch_tensor(struct ops_cann_ctx *ctx, enum ggml_type type, const int64_t *ne,
                              int dims, void **data) {
    size_t es = ops_elem_size(type), nb[2 * GGML_MAX_DIMS];
    int64_t n = 1;
    *data = NULL;
    if (ctx->rc || !es || dims < 1 || dims > 2 * GGML_MAX_DIMS) {
        if (!ctx->rc) ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "bad scratch tensor (type %d, %d dims)", (int) type, dims);
        return NULL;
    }
    for (int i = 0; i < dims; i++) {
        nb[i] = i ? nb[i - 1] * (size_t) ne[i - 1] : es;
        n *= ne[i];
    }
    *data = ops_scratch(ctx, (size_t) (n ? n : 1) * es);
    return *data ? ops_tensor_ex(ctx, *data, type, ne, nb, dims, ACL_FORMAT_ND, 0) : NULL;
}

static aclScalar *scalar_of(struct ops_cann_ctx *ctx, void *value, aclDataType type) {
    if (ctx->rc) return NULL;
    aclScalar *s = ACL.aclCreateScalar(value, type);
    if (!s) {
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "aclCreateScalar returned NULL: %s", ops_recent_msg());
        return NULL;
    }
    ops_keep_scalar(ctx, s);
    return s;
}

aclScalar *ops_scalar_f32(struct ops_cann_ctx *ctx, float value) { return scalar_of(ctx, &value, ACL_FLOAT); }

aclScalar *ops_scalar_i32(struct ops_cann_ctx *ctx, int32_t value) { return scalar_of(ctx, &value, ACL_INT32); }

aclIntArray *ops_int_array(struct ops_cann_ctx *ctx, const int64_t *values, uint64_t count) {
    if (ctx->rc) return NULL;
    aclIntArray *a = ACL.aclCreateIntArray(values, count);
    if (!a) {
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "aclCreateIntArray returned NULL: %s", ops_recent_msg());
        return NULL;
    }
    ops_keep_int_array(ctx, a);
    return a;
}

aclTensorList *ops_tensor_list(struct ops_cann_ctx *ctx, aclTensor *const *items, uint64_t count) {
    if (ctx->rc) return NULL;
    aclTensorList *list = ACL.aclCreateTensorList((const aclTensor *const *) items, count);
    if (!list) {
        ops_fail(ctx, ACLNN_ERR_PARAM_INVALID, "aclCreateTensorList returned NULL: %s", ops_recent_msg());
        return NULL;
    }
    /* the list owns its tensors now: drop them from the node's objects */
    int kept = 0;
    for (int i = 0; i < ctx->n_objs; i++) {
        int owned = 0;
        for (uint64_t j = 0; j < count; j++)
            owned |= ctx->objs[i].kind == OPS_OBJ_TENSOR && ctx->objs[i].p == (void *) items[j];
        if (!owned) ctx->objs[kept++] = ctx->objs[i];
    }
    ctx->n_objs = kept;
    ops_keep_tensor_list(ctx, list);
    return list;
}

/* ggml repeats src1 along dim i when src0->ne[i] = nr * src1->ne[i]; numpy-style
 * broadcasting only stretches size-1 dims. Splitting such a dim into (ne/nr, nr), with
 * src1 of size 1 on the new outer dim, turns the first rule into the second. */
void ops_bcast_tensors(struct ops_cann_ctx *ctx, const struct ggml_tensor *src0,
                       const struct ggml_tensor *src1, const struct ggml_tensor *dst,
                       aclTensor **a, aclTensor **b, aclTensor **out) {
    int64_t ne0[8], ne1[8], ned[8];
    size_t  nb0[8], nb1[8], nbd[8];
    int     d = 0, split = 0;
    for (int i = 0; i < GGML_MAX_DIMS; i++) {
        int64_t nr = src1->ne[i] > 1 ? src0->ne[i] / src1->ne[i] : 1;
        ne0[d] = src0->ne[i] / nr; ne1[d] = src1->ne[i]; ned[d] = dst->ne[i] / nr;
        nb0[d] = src0->nb[i];      nb1[d] = src1->nb[i]; nbd[d] = dst->nb[i];
        d++;
        if (nr != 1) {
            ne0[d] = nr; ne1[d] = 1; ned[d] = nr;
            nb0[d] = nb0[d - 1] * ne0[d - 1];
            nb1[d] = nb1[d - 1] * ne1[d - 1];
            nbd[d] = nbd[d - 1] * ned[d - 1];
            d++;
            split = 1;
        }
    }
    if (!split) {   /* plain numpy broadcasting is enough */
        *a = ops_tensor(ctx, src0);
        *b = ops_tensor(ctx, src1);
        *out = ops_tensor(ctx, dst);
        return;
    }
    *a = ops_tensor_ex(ctx, src0->data, src0->type, ne0, nb0, d, ACL_FORMAT_ND, 0);
    *b = ops_tensor_ex(ctx, src1->data, src1->type, ne1, nb1, d, ACL_FORMAT_ND, 0);
    *out = ops_tensor_ex(ctx, dst->data, dst->type, ned, nbd, d, ACL_FORMAT_ND, 0);
}
