/* Runtime side of the layer: binding the ACL table (real libraries or simulator),
 * aclInit / aclFinalize, device contexts (one stream each), the device memory pool,
 * host<->device copies and errors. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_cann.h"

struct ops_acl_api ACL;

static int g_mode = -1;          /* -1 unbound, 0 real CANN, 1 simulator */
static int g_initialised;        /* aclInit succeeded and aclFinalize not yet called */

/* ---------------------------------------------------------------- errors ---- */

void ops_set_err(char *err, size_t n, const char *fmt, ...) {
    if (!err || !n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

int ops_fail(struct ops_cann_ctx *ctx, int rc, const char *fmt, ...) {
    if (ctx->rc) return ctx->rc;   /* keep the first failure: later ones are its echoes */
    ctx->rc = rc ? rc : ACL_ERROR_FAILURE;
    if (ctx->err && ctx->errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx->err, ctx->errn, fmt, ap);
        va_end(ap);
    }
    return ctx->rc;
}

const char *ops_recent_msg(void) {
    const char *m = ACL.aclGetRecentErrMsg ? ACL.aclGetRecentErrMsg() : NULL;
    return m && *m ? m : "(aclGetRecentErrMsg: no message)";
}

int ops_acl_fail(struct ops_cann_ctx *ctx, int rc, const char *what) {
    return ops_fail(ctx, rc, "%s failed: error %d: %s", what, rc, ops_recent_msg());
}

/* Errors of the entry points that have no context. */
#define CHECK_ACL(call, what)                                                        \
    do {                                                                             \
        int rc_ = (call);                                                            \
        if (rc_ != 0) {                                                              \
            ops_set_err(err, n, "%s failed: error %d: %s", what, rc_, ops_recent_msg()); \
            return rc_;                                                              \
        }                                                                            \
    } while (0)

/* ------------------------------------------------------------- binding ---- */

/* The libraries symbols are looked up in, in order: libascendcl, libnnopbase, then
 * every libopapi*.so of the toolkit (newer CANN splits the aclnn operators over one
 * library per operator repository; Python's toolkit discovery gives the order). */
#define OPS_MAX_LIBS 16
static void *g_libs[OPS_MAX_LIBS];
static char  g_lib_names[OPS_MAX_LIBS][256];
static int   g_n_libs;

static int find_symbol_in(const char *name, void **p) {
    for (int i = 0; i < g_n_libs; i++) {
        if ((*p = dlsym(g_libs[i], name))) return i;
    }
    return -1;
}

static void *find_symbol(const char *name) {
    void *p = NULL;
    find_symbol_in(name, &p);
    return p;
}

/* "name is in none of libascendcl.so, libnnopbase.so, libopapi_math.so" */
static void missing_symbol(const char *name, char *err, size_t n) {
    char list[1024] = "";
    for (int i = 0; i < g_n_libs; i++) {
        const char *base = strrchr(g_lib_names[i], '/');
        base = base ? base + 1 : g_lib_names[i];
        if (strlen(list) + strlen(base) + 3 < sizeof list)
            strcat(strcat(list, i ? ", " : ""), base);
    }
    ops_set_err(err, n, "%s is in none of %s", name, g_n_libs ? list : "(no library loaded)");
}

int ops_cann_find_symbol(const char *name, char *err, size_t n) {
    void *p = NULL;
    if (g_mode == 1) {
        ops_set_err(err, n, "CANN simulator");
        return 0;
    }
    int i = find_symbol_in(name, &p);
    if (i < 0) {
        missing_symbol(name, err, n);
        return ACLNN_ERR_INNER_FIND_KERNEL_ERROR;
    }
    ops_set_err(err, n, "%s", g_lib_names[i]);
    return 0;
}

int ops_missing_op(struct ops_cann_ctx *ctx, const char *op) {
    char name[128], msg[1200];
    snprintf(name, sizeof name, "%sGetWorkspaceSize", op);
    if (find_symbol(name)) snprintf(name, sizeof name, "%s", op);
    missing_symbol(name, msg, sizeof msg);
    return ops_fail(ctx, ACLNN_ERR_INNER_FIND_KERNEL_ERROR, "%s: this CANN installation lacks %s",
                    msg, op);
}

static int open_libraries(const char *libs, char *err, size_t n) {
    char list[4096];
    snprintf(list, sizeof list, "%s", libs);
    for (char *save = NULL, *path = strtok_r(list, ":", &save); path;
         path = strtok_r(NULL, ":", &save)) {
        if (g_n_libs == OPS_MAX_LIBS) break;
        /* RTLD_GLOBAL: libopapi resolves libnnopbase's symbols through the global scope */
        void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (!h) {
            ops_set_err(err, n, "dlopen %s: %s", path, dlerror());
            return ACL_ERROR_FAILURE;
        }
        snprintf(g_lib_names[g_n_libs], sizeof g_lib_names[0], "%s", path);
        g_libs[g_n_libs++] = h;
    }
    /* ACL runtime entries are required; an aclnn operator missing from an older CANN
     * stays NULL and makes only the ops that need it fail, with a clear message. */
    char missing[1024] = "";
#define ACL_INCLUDE(header)
#define ACL_FN(ret, name, params)                                         \
    *(void **) (&ACL.name) = find_symbol(#name);                          \
    if (!ACL.name && strlen(missing) + sizeof(#name) + 2 < sizeof missing) \
        strcat(strcat(missing, missing[0] ? ", " : ""), #name);
#define ACLNN_OP(name, ...)                                                          \
    *(void **) (&ACL.aclnn##name##GetWorkspaceSize) = find_symbol("aclnn" #name      \
                                                                  "GetWorkspaceSize"); \
    *(void **) (&ACL.aclnn##name) = find_symbol("aclnn" #name);
#include "ops_api_list.h"
#undef ACL_INCLUDE
#undef ACL_FN
#undef ACLNN_OP
    if (missing[0]) {
        char where[1200];
        missing_symbol(missing, where, sizeof where);
        ops_set_err(err, n, "CANN libraries lack ACL entry points: %s", where);
        return ACL_ERROR_FAILURE;
    }
    return 0;
}

int ops_cann_load(const char *libs, int simulate, char *err, size_t n) {
    if (g_initialised) {
        if (g_mode != (simulate != 0)) {
            ops_set_err(err, n, "the ACL table is already bound to the %s",
                        g_mode ? "simulator" : "real CANN libraries");
            return ACL_ERROR_REPEAT_INITIALIZE;
        }
        return 0;
    }
    /* Not initialised: first binding, or a finalised real runtime that showed no device
     * and is replaced by the simulator. */
    if (simulate) {
        ops_bind_simulator(&ACL);
    } else {
        int rc = open_libraries(libs ? libs : "", err, n);
        if (rc) return rc;
    }
    CHECK_ACL(ACL.aclInit(NULL), "aclInit");
    g_mode = simulate != 0;
    g_initialised = 1;
    return 0;
}

int ops_cann_simulated(void) { return g_mode; }

int ops_cann_finalize(char *err, size_t n) {
    if (!g_initialised) return 0;
    g_initialised = 0;
    CHECK_ACL(ACL.aclFinalize(), "aclFinalize");
    return 0;
}

int ops_cann_device_count(uint32_t *count, char *err, size_t n) {
    *count = 0;
    if (!g_initialised) {
        ops_set_err(err, n, "ACL is not initialised");
        return ACL_ERROR_UNINITIALIZE;
    }
    CHECK_ACL(ACL.aclrtGetDeviceCount(count), "aclrtGetDeviceCount");
    return 0;
}

const char *ops_cann_soc_name(void) {
    const char *s = g_initialised ? ACL.aclrtGetSocName() : NULL;
    return s ? s : "";
}

/* ------------------------------------------------------------- context ---- */

/* The context current on this thread (ACL's current context is per thread), so that
 * switching costs nothing when one device is used at a time. A device reset may destroy
 * a context and a later aclrtSetDevice hand out the same pointer: each reset starts a
 * new epoch, and a thread's cache is trusted only within the epoch it was made in. */
static _Thread_local aclrtContext t_current;
static _Thread_local unsigned     t_epoch;
static unsigned                   g_epoch = 1;

static void remember_current(aclrtContext c) {
    t_current = c;
    t_epoch = __atomic_load_n(&g_epoch, __ATOMIC_ACQUIRE);
}

struct ops_cann_ctx *ops_cann_ctx_new(int32_t device, char *err, size_t n) {
    if (!g_initialised) {
        ops_set_err(err, n, "ACL is not initialised");
        return NULL;
    }
    struct ops_cann_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        ops_set_err(err, n, "out of host memory");
        return NULL;
    }
    ctx->device = device;
    int rc = ACL.aclrtSetDevice(device);
    if (rc) {
        ops_set_err(err, n, "aclrtSetDevice(%d) failed: error %d: %s", device, rc, ops_recent_msg());
        free(ctx);
        return NULL;
    }
    rc = ACL.aclrtGetCurrentContext(&ctx->acl_context);
    if (!rc) rc = ACL.aclrtCreateStream(&ctx->stream);
    if (rc) {
        ops_set_err(err, n, "creating the device's stream failed: error %d: %s", rc, ops_recent_msg());
        ACL.aclrtResetDevice(device);
        free(ctx);
        return NULL;
    }
    remember_current(ctx->acl_context);   /* aclrtSetDevice made it current here */
    const char *soc = ACL.aclrtGetSocName();
    ctx->soc_310p = soc && strncmp(soc, "Ascend310P", 10) == 0;
    return ctx;
}

static int pool_free_unused(struct ops_cann_ctx *ctx, int all) {
    int rc = 0, kept = 0;
    for (int i = 0; i < ctx->n_blocks; i++) {
        struct ops_block b = ctx->blocks[i];
        if (b.used && !all) {
            ctx->blocks[kept++] = b;
            continue;
        }
        int r = ACL.aclrtFree(b.ptr);
        if (r && !rc) rc = r;
    }
    ctx->n_blocks = kept;
    return rc;
}

int ops_use(struct ops_cann_ctx *ctx) {
    if (t_current == ctx->acl_context && t_epoch == __atomic_load_n(&g_epoch, __ATOMIC_ACQUIRE))
        return 0;
    int rc = ACL.aclrtSetCurrentContext(ctx->acl_context);
    if (rc) return ops_acl_fail(ctx, rc, "aclrtSetCurrentContext");
    remember_current(ctx->acl_context);
    return 0;
}

int ops_cann_ctx_free(struct ops_cann_ctx *ctx, char *err, size_t n) {
    if (!ctx) return 0;
    ops_node_begin(ctx, err, n);
    /* queued work may still use pool memory: finish it before freeing anything */
    int rc = g_initialised ? ctx->rc : 0;
    if (g_initialised && !rc) rc = ACL.aclrtSynchronizeStream(ctx->stream);
    if (g_initialised) {
        int r = pool_free_unused(ctx, 1);
        if (!rc) rc = r;
        r = ACL.aclrtDestroyStream(ctx->stream);
        if (!rc) rc = r;
        r = ACL.aclrtResetDevice(ctx->device);
        if (!rc) rc = r;
        t_current = NULL;   /* the device's context may be gone with the reset */
        __atomic_add_fetch(&g_epoch, 1, __ATOMIC_RELEASE);
    }
    if (rc) ops_set_err(err, n, "releasing device %d failed: error %d: %s", ctx->device, rc,
                        ops_recent_msg());
    free(ctx->blocks);
    free(ctx);
    return rc;
}

int ops_cann_mem_info(struct ops_cann_ctx *ctx, size_t *free_bytes, size_t *total_bytes,
                      char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    if (ctx->rc) return ctx->rc;
    CHECK_ACL(ACL.aclrtGetMemInfo(ACL_HBM_MEM, free_bytes, total_bytes), "aclrtGetMemInfo");
    return 0;
}

/* ---------------------------------------------------------------- pool ---- */

/* Sizes are rounded to 128 bytes (ggml-cann's buffer alignment); a free block is
 * reused when it is large enough and not more than twice the request, so that a few
 * big blocks are not pinned by small tensors. On allocation failure the unused blocks
 * are given back to the runtime and the allocation is tried once more. */
void *ops_pool_alloc(struct ops_cann_ctx *ctx, size_t size) {
    size = (size + 127) & ~(size_t) 127;
    if (size == 0) size = 128;
    int best = -1;
    for (int i = 0; i < ctx->n_blocks; i++) {
        struct ops_block *b = &ctx->blocks[i];
        if (!b->used && b->size >= size && b->size <= 2 * size &&
            (best < 0 || b->size < ctx->blocks[best].size))
            best = i;
    }
    if (best >= 0) {
        ctx->blocks[best].used = 1;
        return ctx->blocks[best].ptr;
    }
    if (ctx->n_blocks == ctx->cap_blocks) {
        int cap = ctx->cap_blocks ? 2 * ctx->cap_blocks : 64;
        struct ops_block *nb = realloc(ctx->blocks, cap * sizeof *nb);
        if (!nb) {
            ops_fail(ctx, ACL_ERROR_BAD_ALLOC, "out of host memory");
            return NULL;
        }
        ctx->blocks = nb;
        ctx->cap_blocks = cap;
    }
    void *p = NULL;
    int rc = ACL.aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST);
    if (rc && !ACL.aclrtSynchronizeStream(ctx->stream)) {   /* idle first: see pool_trim */
        pool_free_unused(ctx, 0);
        rc = ACL.aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST);
    }
    if (rc) {
        ops_fail(ctx, rc, "aclrtMalloc(%zu) failed: error %d: %s", size, rc, ops_recent_msg());
        return NULL;
    }
    ctx->blocks[ctx->n_blocks++] = (struct ops_block){ p, size, 1 };
    return p;
}

void ops_pool_release(struct ops_cann_ctx *ctx, void *ptr) {
    for (int i = 0; i < ctx->n_blocks; i++) {
        if (ctx->blocks[i].ptr == ptr) {
            ctx->blocks[i].used = 0;
            return;
        }
    }
}

/* Unused blocks beyond this many bytes go back to the runtime, so that a run over
 * cases of many sizes does not pin device memory it no longer needs. Only with an
 * idle stream: queued work may still read a block the pool calls unused. */
#define OPS_POOL_KEEP ((size_t) 256 << 20)

int ops_cann_pool_trim(struct ops_cann_ctx *ctx, char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    if (ctx->rc) return ctx->rc;
    size_t unused = 0;
    for (int i = 0; i < ctx->n_blocks; i++)
        if (!ctx->blocks[i].used) unused += ctx->blocks[i].size;
    if (unused <= OPS_POOL_KEEP) return 0;
    CHECK_ACL(ACL.aclrtSynchronizeStream(ctx->stream), "aclrtSynchronizeStream");
    CHECK_ACL(pool_free_unused(ctx, 0), "aclrtFree");
    return 0;
}

void *ops_cann_alloc(struct ops_cann_ctx *ctx, size_t size, char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    return ctx->rc ? NULL : ops_pool_alloc(ctx, size);
}

void ops_cann_release(struct ops_cann_ctx *ctx, void *ptr) { ops_pool_release(ctx, ptr); }

size_t ops_cann_pool_held(struct ops_cann_ctx *ctx) {
    size_t total = 0;
    for (int i = 0; i < ctx->n_blocks; i++) total += ctx->blocks[i].size;
    return total;
}

/* ------------------------------------------------------ node scratch ---- */

void ops_node_begin(struct ops_cann_ctx *ctx, char *err, size_t n) {
    ctx->rc = 0;
    ctx->err = err;
    ctx->errn = n;
    ctx->n_objs = 0;
    if (err && n) err[0] = 0;
    ops_use(ctx);   /* a failure is kept in ctx->rc */
}

static void keep(struct ops_cann_ctx *ctx, enum ops_obj_kind kind, void *p) {
    if (ctx->n_objs == OPS_MAX_NODE_OBJS) {
        ops_fail(ctx, ACL_ERROR_FAILURE, "more than %d ACL objects in one node", OPS_MAX_NODE_OBJS);
        return;
    }
    ctx->objs[ctx->n_objs].kind = kind;
    ctx->objs[ctx->n_objs].p = p;
    ctx->n_objs++;
}

void ops_keep_tensor(struct ops_cann_ctx *ctx, aclTensor *t) { keep(ctx, OPS_OBJ_TENSOR, t); }
void ops_keep_scalar(struct ops_cann_ctx *ctx, aclScalar *s) { keep(ctx, OPS_OBJ_SCALAR, s); }
void ops_keep_int_array(struct ops_cann_ctx *ctx, aclIntArray *a) { keep(ctx, OPS_OBJ_INT_ARRAY, a); }
void ops_keep_tensor_list(struct ops_cann_ctx *ctx, aclTensorList *l) { keep(ctx, OPS_OBJ_TENSOR_LIST, l); }

void *ops_scratch(struct ops_cann_ctx *ctx, size_t size) {
    void *p = ops_pool_alloc(ctx, size);
    if (p) keep(ctx, OPS_OBJ_SCRATCH, p);
    return p;
}

/* Work already launched keeps its own copy of the descriptors, and the pool is
 * stream-ordered (a block is only reused by later work on the same stream), so both
 * can go as soon as the node's launches are queued. */
void ops_node_end(struct ops_cann_ctx *ctx) { ops_objs_release(ctx, 0); }

int ops_objs_mark(struct ops_cann_ctx *ctx) { return ctx->n_objs; }

void ops_objs_release(struct ops_cann_ctx *ctx, int mark) {
    for (int i = ctx->n_objs - 1; i >= mark; i--) {
        void *p = ctx->objs[i].p;
        int rc = 0;
        switch (ctx->objs[i].kind) {
            case OPS_OBJ_TENSOR:    rc = ACL.aclDestroyTensor(p); break;
            case OPS_OBJ_SCALAR:    rc = ACL.aclDestroyScalar(p); break;
            case OPS_OBJ_INT_ARRAY: rc = ACL.aclDestroyIntArray(p); break;
            case OPS_OBJ_SCRATCH:   ops_pool_release(ctx, p); break;
            case OPS_OBJ_TENSOR_LIST: rc = ACL.aclDestroyTensorList(p); break;
        }
        if (rc) ops_acl_fail(ctx, rc, "destroying an ACL object");
    }
    ctx->n_objs = mark;
}

/* ------------------------------------------------------------- copies ---- */

int ops_cann_upload(struct ops_cann_ctx *ctx, void *dst, const void *src, size_t size,
                    char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    if (ctx->rc || !size) return ctx->rc;
    CHECK_ACL(ACL.aclrtMemcpy(dst, size, src, size, ACL_MEMCPY_HOST_TO_DEVICE), "aclrtMemcpy(H2D)");
    return 0;
}

int ops_cann_download(struct ops_cann_ctx *ctx, void *dst, const void *src, size_t size,
                      char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    if (ctx->rc || !size) return ctx->rc;
    CHECK_ACL(ACL.aclrtMemcpy(dst, size, src, size, ACL_MEMCPY_DEVICE_TO_HOST), "aclrtMemcpy(D2H)");
    return 0;
}

int ops_cann_synchronize(struct ops_cann_ctx *ctx, char *err, size_t n) {
    ops_node_begin(ctx, err, n);
    if (ctx->rc) return ctx->rc;
    CHECK_ACL(ACL.aclrtSynchronizeStream(ctx->stream), "aclrtSynchronizeStream");
    return 0;
}

/* ------------------------------------------------------------- launch ---- */

/* An executor that will not be launched. Only its launch releases an ordinary executor
 * (acl_meta.h); made repeatable, its release passes to the caller, who destroys it with
 * aclDestroyAclOpExecutor (the aclSetAclOpExecutorRepeatable / aclDestroyAclOpExecutor
 * docs). The failure that stopped the launch stays the one reported. */
static int drop_executor(struct ops_cann_ctx *ctx, const char *name, aclOpExecutor *executor) {
    int rc = ACL.aclSetAclOpExecutorRepeatable(executor);
    if (!rc) rc = ACL.aclDestroyAclOpExecutor(executor);
    if (rc) {   /* appended: the executor's host memory is lost */
        size_t used = ctx->err ? strlen(ctx->err) : 0;
        if (ctx->err && used < ctx->errn)
            snprintf(ctx->err + used, ctx->errn - used, "; releasing the executor of %s failed: "
                     "error %d: %s", name, rc, ops_recent_msg());
    }
    return ctx->rc;
}

int ops_launch(struct ops_cann_ctx *ctx, const char *name,
               aclnnStatus (*fn)(void *, uint64_t, aclOpExecutor *, aclrtStream),
               uint64_t workspace_size, aclOpExecutor *executor) {
    void *ws = NULL;
    if (workspace_size > 0) {
        ws = ops_scratch(ctx, workspace_size);
        if (!ws) return drop_executor(ctx, name, executor);
    }
    int rc = fn(ws, workspace_size, executor, ctx->stream);
    return rc ? ops_acl_fail(ctx, rc, name) : 0;
}
