/* Test-only entry points: each plays a deliberately broken ACL / aclnn call sequence,
 * so that tests can show the CANN simulator catches it. On real hardware the broken
 * sequences may well "work": only the simulator promises to notice.
 * Convention: the return value is what the runtime answered to the broken step
 * (0: it let it pass), err holds aclGetRecentErrMsg's text; -1 means the set-up failed. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ops_cann.h"

static aclTensor *vector_f32(struct ops_cann_ctx *ctx, void *data, int64_t count) {
    const size_t nb = sizeof(float);
    return ops_tensor_ex(ctx, data, GGML_TYPE_F32, &count, &nb, 1, ACL_FORMAT_ND, 0);
}

static int muls(struct ops_cann_ctx *ctx, aclTensor *x, float s, aclTensor *y) {
    aclScalar *scale = ops_scalar_f32(ctx, s);
    OPS_ACLNN(ctx, Muls, x, scale, y);
    return 0;
}

static int setup_failed(struct ops_cann_ctx *ctx) {
    ops_node_end(ctx);
    return -1;
}

static void copy_msg(char *err, size_t n) {
    const char *m = ACL.aclGetRecentErrMsg();
    ops_set_err(err, n, "%s", m ? m : "");
}

/* y = 2 * x is launched, then y is read back before and after aclrtSynchronizeStream. */
int ops_cann_test_missing_sync(struct ops_cann_ctx *ctx, const float *x, int64_t count,
                               float *before_sync, float *after_sync, char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    size_t bytes = (size_t) count * sizeof(float);
    void *a = ops_scratch(ctx, bytes), *b = ops_scratch(ctx, bytes);
    if (!a || !b || ACL.aclrtMemcpy(a, bytes, x, bytes, ACL_MEMCPY_HOST_TO_DEVICE) ||
        ACL.aclrtMemset(b, bytes, 0, bytes) || muls(ctx, vector_f32(ctx, a, count), 2.0f, vector_f32(ctx, b, count)))
        return setup_failed(ctx);
    int rc = ACL.aclrtMemcpy(before_sync, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_HOST);   /* no sync */
    if (!rc) rc = ACL.aclrtSynchronizeStream(ctx->stream);
    if (!rc) rc = ACL.aclrtMemcpy(after_sync, bytes, b, bytes, ACL_MEMCPY_DEVICE_TO_HOST);
    if (rc) copy_msg(err, n);
    ops_node_end(ctx);
    return rc;
}

/* Device memory is written, freed, then read. */
int ops_cann_test_use_after_free(struct ops_cann_ctx *ctx, const void *data, size_t size,
                                 void *read_back, char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    void *p = NULL;
    if (ACL.aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST) ||
        ACL.aclrtMemcpy(p, size, data, size, ACL_MEMCPY_HOST_TO_DEVICE) || ACL.aclrtFree(p))
        return -1;
    int rc = ACL.aclrtMemcpy(read_back, size, p, size, ACL_MEMCPY_DEVICE_TO_HOST);
    if (rc) copy_msg(err, n);
    return rc;
}

/* A 4-element view over a 3-element storage. */
int ops_cann_test_view_outside_storage(struct ops_cann_ctx *ctx, char *err, size_t n) {
    void *p = NULL;
    ops_node_begin(ctx, err, n);
    if (ctx->rc || ACL.aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST)) return -1;
    const int64_t dims[1] = { 4 }, strides[1] = { 1 }, storage[1] = { 3 };
    aclTensor *t = ACL.aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, storage, 1, p);
    int rc = t ? 0 : ACLNN_ERR_PARAM_INVALID;
    if (t) ACL.aclDestroyTensor(t);
    else copy_msg(err, n);
    ACL.aclrtFree(p);
    return rc;
}

/* One GetWorkspaceSize, two launches of its executor. */
int ops_cann_test_executor_reuse(struct ops_cann_ctx *ctx, char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    void *a = ops_scratch(ctx, 64), *b = ops_scratch(ctx, 64);
    aclScalar *two = ops_scalar_f32(ctx, 2.0f);
    aclTensor *x = a ? vector_f32(ctx, a, 16) : NULL, *y = b ? vector_f32(ctx, b, 16) : NULL;
    uint64_t ws = 0;
    aclOpExecutor *ex = NULL;
    if (ctx->rc || ACL.aclnnMulsGetWorkspaceSize(x, two, y, &ws, &ex) || ws ||
        ACL.aclnnMuls(NULL, 0, ex, ctx->stream))
        return setup_failed(ctx);
    int rc = ACL.aclnnMuls(NULL, 0, ex, ctx->stream);
    if (rc) copy_msg(err, n);
    ACL.aclrtSynchronizeStream(ctx->stream);
    ops_node_end(ctx);
    return rc;
}

/* An aclnnAdd that asks for workspace (a transposed input has to be gathered first):
 * its executor, or NULL. */
static aclOpExecutor *add_needing_workspace(struct ops_cann_ctx *ctx, uint64_t *ws) {
    void *a = ops_scratch(ctx, 256), *b = ops_scratch(ctx, 256), *c = ops_scratch(ctx, 256);
    const int64_t ne[2] = { 8, 8 };
    const size_t nb[2] = { sizeof(float), 8 * sizeof(float) }, nbt[2] = { 8 * sizeof(float), sizeof(float) };
    aclTensor *x = a ? ops_tensor_ex(ctx, a, GGML_TYPE_F32, ne, nbt, 2, ACL_FORMAT_ND, 0) : NULL;
    aclTensor *y = b ? ops_tensor_ex(ctx, b, GGML_TYPE_F32, ne, nb, 2, ACL_FORMAT_ND, 0) : NULL;
    aclTensor *z = c ? ops_tensor_ex(ctx, c, GGML_TYPE_F32, ne, nb, 2, ACL_FORMAT_ND, 0) : NULL;
    aclScalar *one = ops_scalar_f32(ctx, 1.0f);
    aclOpExecutor *ex = NULL;
    if (ctx->rc || ACL.aclnnAddGetWorkspaceSize(x, y, one, z, ws, &ex) || *ws == 0) return NULL;
    return ex;
}

/* An operator that asks for workspace is launched with one byte less than it asked for. */
int ops_cann_test_short_workspace(struct ops_cann_ctx *ctx, char *err, size_t n) {
    uint64_t ws = 0;
    ops_node_begin(ctx, err, n);
    aclOpExecutor *ex = add_needing_workspace(ctx, &ws);
    if (!ex) {
        ops_set_err(err, n, "aclnnAdd asked for no workspace");
        return setup_failed(ctx);
    }
    void *w = ops_scratch(ctx, ws - 1);
    if (!w) return setup_failed(ctx);
    int rc = ACL.aclnnAdd(w, ws - 1, ex, ctx->stream);
    if (rc) copy_msg(err, n);
    ACL.aclrtSynchronizeStream(ctx->stream);
    ops_node_end(ctx);
    return rc;
}

/* Device memory that is never freed. */
int ops_cann_test_leak(struct ops_cann_ctx *ctx, size_t size, char *err, size_t n) {
    void *p = NULL;
    ops_node_begin(ctx, err, n);
    if (ctx->rc) return -1;
    int rc = ACL.aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST);
    if (rc) copy_msg(err, n);
    return rc;
}

int ops_cann_test_async_copy(struct ops_cann_ctx *ctx, int how, char *err, size_t n) {
    enum { SIZE = 256 };
    ops_node_begin(ctx, err, n);
    char *a = ops_scratch(ctx, 2 * SIZE), *b = ops_scratch(ctx, 2 * SIZE);
    void *pinned = NULL, *pageable = aligned_alloc(64, SIZE);   /* aligned: only pinning is wrong */
    if (!a || !b || !pageable || ACL.aclrtMallocHost(&pinned, SIZE)) {
        free(pageable);
        return setup_failed(ctx);
    }
    memset(pageable, 1, SIZE);
    memset(pinned, 1, SIZE);
    int rc = 0;
    switch (how) {
        case OPS_TEST_COPY_ALIGNED_D2D:
            rc = ACL.aclrtMemcpyAsync(b, SIZE, a, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, ctx->stream); break;
        case OPS_TEST_COPY_UNALIGNED_D2D:   /* 4 bytes into the allocation */
            rc = ACL.aclrtMemcpyAsync(b, SIZE, a + 4, SIZE, ACL_MEMCPY_DEVICE_TO_DEVICE, ctx->stream); break;
        case OPS_TEST_COPY_PAGEABLE_H2D:
            rc = ACL.aclrtMemcpyAsync(b, SIZE, pageable, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, ctx->stream); break;
        case OPS_TEST_COPY_PINNED_H2D:
            rc = ACL.aclrtMemcpyAsync(b, SIZE, pinned, SIZE, ACL_MEMCPY_HOST_TO_DEVICE, ctx->stream); break;
        case OPS_TEST_COPY_H2H:
            rc = ACL.aclrtMemcpyAsync(pinned, SIZE, pageable, SIZE, ACL_MEMCPY_HOST_TO_HOST, ctx->stream); break;
    }
    if (rc) copy_msg(err, n);
    int sync = ACL.aclrtSynchronizeStream(ctx->stream);   /* before the host memory goes */
    if (!rc && sync) {
        rc = sync;
        copy_msg(err, n);
    }
    ACL.aclrtFreeHost(pinned);
    free(pageable);
    ops_node_end(ctx);
    return rc;
}

struct thread_job { struct ops_cann_ctx *ctx; int set_context, rc; char msg[512]; };

static void *thread_body(void *arg) {
    struct thread_job *job = arg;
    aclrtStream s = NULL;
    void *p = NULL;
    job->rc = job->set_context ? ACL.aclrtSetCurrentContext(job->ctx->acl_context) : 0;
    if (!job->rc) job->rc = ACL.aclrtCreateStream(&s);
    if (!job->rc) job->rc = ACL.aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST);
    if (job->rc) snprintf(job->msg, sizeof job->msg, "%s", ops_recent_msg());
    if (p) ACL.aclrtFree(p);
    if (s) ACL.aclrtDestroyStream(s);
    return NULL;
}

int ops_cann_test_thread_context(struct ops_cann_ctx *ctx, int set_context, char *err, size_t n) {
    struct thread_job job = { ctx, set_context, 0, "" };
    pthread_t t;
    if (pthread_create(&t, NULL, thread_body, &job)) return -1;
    pthread_join(t, NULL);
    ops_set_err(err, n, "%s", job.msg);
    return job.rc;
}

/* The launch is given an impossible workspace size, so the pool cannot provide it. */
int ops_cann_test_workspace_failure(struct ops_cann_ctx *ctx, char *err, size_t n) {
    uint64_t ws = 0;
    ops_node_begin(ctx, err, n);
    aclOpExecutor *ex = add_needing_workspace(ctx, &ws);
    if (!ex) return setup_failed(ctx);
    int rc = ops_launch(ctx, "aclnnAdd", ACL.aclnnAdd, (uint64_t) 1 << 60, ex);
    ops_node_end(ctx);
    return rc;
}

int ops_cann_test_executor_dropped(struct ops_cann_ctx *ctx, char *err, size_t n) {
    uint64_t ws = 0;
    ops_node_begin(ctx, err, n);
    aclOpExecutor *ex = add_needing_workspace(ctx, &ws);
    ops_node_end(ctx);
    return ex ? 0 : -1;
}
