/* The native layer's public entry points: what Python (cffi) calls.
 *
 * Every function that can fail returns 0 or the ACL / aclnn error code, and writes a
 * one-line explanation (with aclGetRecentErrMsg's text when the runtime gave one) into
 * err[0..n). Nothing here aborts the process.
 */
#ifndef OPS_CANN_API_H
#define OPS_CANN_API_H

#ifndef OPS_CDEF
#include <stddef.h>
#include <stdint.h>
#endif

struct ops_cann_ctx;
struct ggml_tensor;

/* Bind the ACL / aclnn function table, once per process: to the real CANN libraries
 * (libs: ':'-separated paths of libascendcl, libnnopbase, libopapi) or, with
 * simulate != 0, to the CANN simulator. Then aclInit. */
int ops_cann_load(const char *libs, int simulate, char *err, size_t n);
int ops_cann_simulated(void);              /* 1: simulator, 0: real CANN, -1: not loaded */
int ops_cann_device_count(uint32_t *count, char *err, size_t n);
const char *ops_cann_soc_name(void);
int ops_cann_finalize(char *err, size_t n);   /* aclFinalize; the table stays bound */
/* Where an entry point was found: 0 and the library's path in err ("CANN simulator" when
 * simulated), or ACLNN_ERR_INNER_FIND_KERNEL_ERROR and the libraries it is in none of. */
int ops_cann_find_symbol(const char *name, char *err, size_t n);

/* One device: its stream and its memory pool. */
struct ops_cann_ctx *ops_cann_ctx_new(int32_t device, char *err, size_t n);
int ops_cann_ctx_free(struct ops_cann_ctx *ctx, char *err, size_t n);
int ops_cann_mem_info(struct ops_cann_ctx *ctx, size_t *free_bytes, size_t *total_bytes,
                      char *err, size_t n);

/* Device memory from the pool (128-byte granules, reused across cases). */
void *ops_cann_alloc(struct ops_cann_ctx *ctx, size_t size, char *err, size_t n);
void ops_cann_release(struct ops_cann_ctx *ctx, void *ptr);
size_t ops_cann_pool_held(struct ops_cann_ctx *ctx);   /* bytes the pool holds */
int ops_cann_pool_trim(struct ops_cann_ctx *ctx, char *err, size_t n);   /* free the excess */
/* blocks taken from the pool and given back since the context was made (a case's own
 * allocations, whether or not the pool held the block already) */
void ops_cann_pool_counts(struct ops_cann_ctx *ctx, uint64_t *takes, uint64_t *returns);
int ops_cann_upload(struct ops_cann_ctx *ctx, void *dst, const void *src, size_t size,
                    char *err, size_t n);
int ops_cann_download(struct ops_cann_ctx *ctx, void *dst, const void *src, size_t size,
                      char *err, size_t n);
int ops_cann_synchronize(struct ops_cann_ctx *ctx, char *err, size_t n);

/* Ops: whether a handler exists for (op, sub-op), and realising one node with aclnn
 * calls queued on the stream (synchronise before reading results). subop: the
 * ggml_unary_op / ggml_glu_op for UNARY / GLU nodes, -1 otherwise. */
int ops_cann_has_handler(int op, int subop);
int ops_cann_compute(struct ops_cann_ctx *ctx, struct ggml_tensor *node, char *err, size_t n);
/* n_runs launches of one node between two events; *ms is the device time between them. */
int ops_cann_time(struct ops_cann_ctx *ctx, struct ggml_tensor *node, int n_runs, float *ms,
                  char *err, size_t n);

/* The layer's own call trace (trace.c), for a device no simulator sees: between start
 * and stop every aclnn call is recorded; stop returns the records as a JSON array (the
 * simulator's trace schema), valid until the next start. One per process. */
int ops_cann_trace_start(void);
const char *ops_cann_trace_stop(void);
/* A recording for a reproducer (ops repro): the runtime calls too (allocations, copies with
 * the host bytes they moved, memsets, waits) and the tensors' storage shapes; blob i (a
 * record's "data") is ops_cann_trace_blob's, valid until the next start. */
int ops_cann_trace_start_repro(void);
size_t ops_cann_trace_blob(size_t i, const unsigned char **data);

/* Test-only entry points: deliberately broken call sequences (see testing.c). */
int ops_cann_test_missing_sync(struct ops_cann_ctx *ctx, const float *x, int64_t count,
                               float *before_sync, float *after_sync, char *err, size_t n);
int ops_cann_test_use_after_free(struct ops_cann_ctx *ctx, const void *data, size_t size,
                                 void *read_back, char *err, size_t n);
int ops_cann_test_view_outside_storage(struct ops_cann_ctx *ctx, char *err, size_t n);
int ops_cann_test_executor_reuse(struct ops_cann_ctx *ctx, char *err, size_t n);
int ops_cann_test_short_workspace(struct ops_cann_ctx *ctx, char *err, size_t n);
int ops_cann_test_leak(struct ops_cann_ctx *ctx, size_t size, char *err, size_t n);
/* One aclrtMemcpyAsync of 256 bytes: how (OPS_TEST_COPY_*) says what is wrong with it. */
enum { OPS_TEST_COPY_ALIGNED_D2D, OPS_TEST_COPY_UNALIGNED_D2D, OPS_TEST_COPY_PAGEABLE_H2D,
       OPS_TEST_COPY_PINNED_H2D, OPS_TEST_COPY_H2H };
int ops_cann_test_async_copy(struct ops_cann_ctx *ctx, int how, char *err, size_t n);
/* A new thread creates a stream and allocates, having made ctx's context current in it
 * (set_context) or not. */
int ops_cann_test_thread_context(struct ops_cann_ctx *ctx, int set_context, char *err, size_t n);
/* An operator whose workspace cannot be allocated (the layer's own launch path), and
 * an executor made by GetWorkspaceSize and then forgotten (a leak). */
int ops_cann_test_workspace_failure(struct ops_cann_ctx *ctx, char *err, size_t n);
int ops_cann_test_executor_dropped(struct ops_cann_ctx *ctx, char *err, size_t n);

#endif /* OPS_CANN_API_H */
