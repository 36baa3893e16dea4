/* The layer's own call trace, for a real CANN device where no simulator sees the calls:
 * while on, the ACL table's aclnn entries (and the four descriptor constructors) are
 * shims that record each call as backend/cann/sim/trace.py records it on the simulator
 * (the same JSON: call, args, workspace, stream, rc, error, cube), then call the real
 * entry. Off, the table holds the real entries: nothing costs anything.
 *
 * Every aclnn call of the layer goes through the ACL table (OPS_ACLNN, testing.c's
 * direct calls), so the table is the one choke point. The shims are generated from the
 * .def files (build_aclnn.py: ops_trace_shims.h); aclTensor & co are opaque on a real
 * runtime, so their constructors' shims keep what each handle was made from.
 * One trace per process (the table is global): a worker runs one case at a time.
 *
 * A recording for a reproducer (ops_cann_trace_start_repro, ops repro on a real NPU) also
 * swaps in shims of the runtime calls a second run needs, recorded as the simulator's
 * recording with `repro` records them: aclrtMalloc (and the address it gave), aclrtFree,
 * aclrtMemcpy / aclrtMemcpyAsync (with the host bytes a copy took or gave: a blob, by its
 * index), aclrtMemset and the stream and device waits; each tensor's storage shape too.
 * Written from CANN's runtime API docs: a copy's host bytes are the source's at the call
 * for host-to-device, the destination's once the call (or, async, the next wait) is done. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_cann.h"

static struct ops_acl_api ops_trace_real;   /* the entries the shims call */
static int g_on, g_repro;
/* A refused runtime call's message, taken for its record and handed to the layer's next
 * aclGetRecentErrMsg (which it reads to report the failure). */
static char g_taken[512];
static int  g_have_taken;

/* ---------------------------------------------------------------- text ---- */

struct text { char *buf; size_t len, cap; };
static struct text g_text,   /* the records */
                   g_pend;   /* runtime records made while an aclnn call is open: after it */

static int grow(struct text *t, size_t need) {
    if (t->len + need < t->cap) return 1;
    size_t cap = t->cap ? 2 * t->cap : 65536;
    while (cap <= t->len + need) cap *= 2;
    char *b = realloc(t->buf, cap);
    if (!b) return 0;   /* the trace is cut short, the run goes on */
    t->buf = b;
    t->cap = cap;
    return 1;
}

static void vput(struct text *t, const char *fmt, va_list ap) {
    for (;;) {
        va_list aq;
        va_copy(aq, ap);
        int n = vsnprintf(t->buf ? t->buf + t->len : NULL, t->buf ? t->cap - t->len : 0, fmt, aq);
        va_end(aq);
        if (n < 0) return;
        if (t->buf && t->len + (size_t) n < t->cap) {
            t->len += (size_t) n;
            return;
        }
        if (!grow(t, (size_t) n + 1)) return;
    }
}

static void put(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vput(&g_text, fmt, ap);
    va_end(ap);
}

static void tput(struct text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vput(t, fmt, ap);
    va_end(ap);
}

#define HEX "\"0x%" PRIxPTR "\""   /* an address, as the simulator's trace writes it */

/* a JSON string (quotes and control characters escaped) into dst[0..n) */
static void json_string(char *dst, size_t n, const char *s) {
    size_t k = 0;
    if (n < 3) return;
    dst[k++] = '"';
    for (; s && *s && k + 8 < n; s++) {
        unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') { dst[k++] = '\\'; dst[k++] = (char) c; }
        else if (c < 0x20) k += (size_t) snprintf(dst + k, n - k, "\\u%04x", c);
        else dst[k++] = (char) c;
    }
    dst[k++] = '"';
    dst[k] = 0;
}

static const char *dtype_name(int t) {   /* as the simulator's dtypes.ACL_NAMES */
    switch (t) {
        case ACL_FLOAT: return "FLOAT";         case ACL_FLOAT16: return "FLOAT16";
        case ACL_DOUBLE: return "DOUBLE";       case ACL_BF16: return "BFLOAT16";
        case ACL_INT8: return "INT8";           case ACL_UINT8: return "UINT8";
        case ACL_INT16: return "INT16";         case ACL_UINT16: return "UINT16";
        case ACL_INT32: return "INT32";         case ACL_UINT32: return "UINT32";
        case ACL_INT64: return "INT64";         case ACL_UINT64: return "UINT64";
        case ACL_BOOL: return "BOOL";           case ACL_COMPLEX64: return "COMPLEX64";
        case ACL_COMPLEX128: return "COMPLEX128"; case ACL_INT4: return "INT4";
        case ACL_COMPLEX32: return "COMPLEX32"; default: return "UNDEFINED";
    }
}

static const char *format_name(int f) {
#define OPS_FORMAT_CASE(name, value) case value: return #name + 11;   /* past "ACL_FORMAT_" */
    switch (f) { OPS_ACL_FORMATS(OPS_FORMAT_CASE) default: return "?"; }
#undef OPS_FORMAT_CASE
}

/* -------------------------------------------------- descriptors' origins ---- */

/* What each handle was made from, as its JSON description: the newest of a reused
 * handle wins. A handle older than the last OPS_TRACE_DESCS is described as unknown. */
#define OPS_TRACE_DESCS 8192   /* MUL_MAT_ID makes over 1024 before it calls */
#define OPS_DESC_LEN 1024   /* a tensor list's items with their storage shapes */
static struct { const void *handle; char json[OPS_DESC_LEN]; } g_descs[OPS_TRACE_DESCS];
static unsigned g_next_desc;

static char *new_desc(const void *handle) {
    unsigned i = g_next_desc++ % OPS_TRACE_DESCS;
    g_descs[i].handle = handle;
    g_descs[i].json[0] = 0;
    return g_descs[i].json;
}

static const char *find_desc(const void *handle, char *unknown, size_t n) {
    for (unsigned k = 0; k < OPS_TRACE_DESCS && k < g_next_desc; k++) {
        unsigned i = (g_next_desc - 1 - k) % OPS_TRACE_DESCS;
        if (g_descs[i].handle == handle) return g_descs[i].json;
    }
    snprintf(unknown, n, "{\"dead\":\"%p\"}", handle);
    return unknown;
}

/* "[1,2,3]" of n int64 values into dst */
static size_t ints(char *dst, size_t n, const int64_t *v, uint64_t count) {
    size_t k = (size_t) snprintf(dst, n, "[");
    for (uint64_t i = 0; i < count && k < n; i++)
        k += (size_t) snprintf(dst + k, n - k, "%s%lld", i ? "," : "", (long long) v[i]);
    if (k < n) k += (size_t) snprintf(dst + k, n - k, "]");
    return k < n ? k : n - 1;
}

static aclTensor *shim_aclCreateTensor(const int64_t *viewDims, uint64_t viewDimsNum, aclDataType dataType,
                                       const int64_t *stride, int64_t offset, aclFormat format,
                                       const int64_t *storageDims, uint64_t storageDimsNum, void *tensorData) {
    aclTensor *t = ops_trace_real.aclCreateTensor(viewDims, viewDimsNum, dataType, stride, offset, format,
                                                  storageDims, storageDimsNum, tensorData);
    if (!t) return t;
    char *d = new_desc(t), ne[160], st[160], storage[160];
    ints(ne, sizeof ne, viewDims, viewDimsNum);
    ints(st, sizeof st, stride, viewDimsNum);
    ints(storage, sizeof storage, storageDims, storageDims ? storageDimsNum : 0);
    size_t k = (size_t) snprintf(d, OPS_DESC_LEN, "{\"dtype\":\"%s\",\"ne\":%s,\"strides\":%s",
                                 dtype_name(dataType), ne, st);
    if (offset && k < OPS_DESC_LEN) k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, ",\"offset\":%lld", (long long) offset);
    if (format != ACL_FORMAT_ND && k < OPS_DESC_LEN)
        k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, ",\"format\":\"%s\"", format_name(format));
    if (k < OPS_DESC_LEN)
        k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, ",\"addr\":\"0x%" PRIxPTR "\"", (uintptr_t) tensorData);
    if (g_repro && k < OPS_DESC_LEN) k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, ",\"storage\":%s", storage);
    if (k < OPS_DESC_LEN) snprintf(d + k, OPS_DESC_LEN - k, "}");
    return t;
}

static aclScalar *shim_aclCreateScalar(void *value, aclDataType dataType) {
    aclScalar *s = ops_trace_real.aclCreateScalar(value, dataType);
    if (!s) return s;
    char *d = new_desc(s);
    switch (dataType) {
        case ACL_FLOAT:  snprintf(d, OPS_DESC_LEN, "{\"scalar\":%.9g,\"dtype\":\"FLOAT\"}", (double) *(float *) value); break;
        case ACL_DOUBLE: snprintf(d, OPS_DESC_LEN, "{\"scalar\":%.17g,\"dtype\":\"DOUBLE\"}", *(double *) value); break;
        case ACL_INT32:  snprintf(d, OPS_DESC_LEN, "{\"scalar\":%d,\"dtype\":\"INT32\"}", *(int32_t *) value); break;
        case ACL_INT64:  snprintf(d, OPS_DESC_LEN, "{\"scalar\":%lld,\"dtype\":\"INT64\"}", (long long) *(int64_t *) value); break;
        case ACL_BOOL:   snprintf(d, OPS_DESC_LEN, "{\"scalar\":%s,\"dtype\":\"BOOL\"}", *(bool *) value ? "true" : "false"); break;
        default:         snprintf(d, OPS_DESC_LEN, "{\"scalar\":null,\"dtype\":\"%s\"}", dtype_name(dataType));
    }
    return s;
}

static aclIntArray *shim_aclCreateIntArray(const int64_t *value, uint64_t size) {
    aclIntArray *a = ops_trace_real.aclCreateIntArray(value, size);
    if (!a) return a;
    char *d = new_desc(a), v[OPS_DESC_LEN - 16];
    ints(v, sizeof v, value, size);
    snprintf(d, OPS_DESC_LEN, "{\"ints\":%s}", v);
    return a;
}

static aclTensorList *shim_aclCreateTensorList(const aclTensor *const *value, uint64_t size) {
    aclTensorList *l = ops_trace_real.aclCreateTensorList(value, size);
    if (!l) return l;
    /* the items' descriptions, as many as fit */
    char *d = new_desc(l), unknown[64];
    size_t k = (size_t) snprintf(d, OPS_DESC_LEN, "{\"list\":[");
    for (uint64_t i = 0; i < size; i++) {
        const char *item = find_desc(value[i], unknown, sizeof unknown);
        if (k + strlen(item) + 4 >= OPS_DESC_LEN) break;
        k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, "%s%s", i ? "," : "", item);
    }
    snprintf(d + k, OPS_DESC_LEN - k, "]}");
    return l;
}

/* -------------------------------------------------------------- calls ---- */

/* The call being recorded: open from its GetWorkspaceSize to the next call (its launch
 * comes in between), then its rc, workspace and stream are written. */
struct ops_trace_call {
    int            open, rc, cube;
    uint64_t       workspace;
    aclOpExecutor *executor;
    void          *stream;
    int            launched;
    char           error[512];
};
static struct ops_trace_call g_call;
static int g_n_calls;

static const char *const CUBE_MODES[] = { "KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32",
                                          "USE_FP32_ADD" };

static void close_call(void) {
    if (!g_call.open) return;
    put("},\"workspace\":%llu", (unsigned long long) g_call.workspace);
    if (g_call.cube >= 0 && g_call.cube < 5) put(",\"cube\":\"%s\"", CUBE_MODES[g_call.cube]);
    if (g_call.launched) put(",\"stream\":\"%p\"", g_call.stream);
    put(",\"rc\":%d", g_call.rc);
    if (g_call.error[0]) put(",\"error\":%s", g_call.error);
    put("}");
    g_call.open = 0;
    if (g_pend.len && grow(&g_text, g_pend.len)) {   /* the runtime calls made meanwhile */
        memcpy(g_text.buf + g_text.len, g_pend.buf, g_pend.len + 1);
        g_text.len += g_pend.len;
    }
    g_pend.len = 0;
}

static struct ops_trace_call *ops_trace_begin(const char *op) {
    close_call();
    g_have_taken = 0;   /* a refused runtime call's message not read is not this call's */
    memset(&g_call, 0, sizeof g_call);
    g_call.cube = -1;
    g_call.open = 1;
    put("%s{\"call\":\"%s\",\"args\":{", g_n_calls++ ? "," : "", op);
    return &g_call;
}

/* the argument's key, after a comma unless it is the call's first (open == 1) */
#define ARG(c, name) put("%s\"%s\":", (c)->open == 1 ? "" : ",", name), (c)->open = 2

static void ops_trace_tensor(struct ops_trace_call *c, const char *name, const void *t) {
    char unknown[64];
    ARG(c, name);
    put("%s", t ? find_desc(t, unknown, sizeof unknown) : "null");
}
#define ops_trace_scalar ops_trace_tensor
#define ops_trace_int_array ops_trace_tensor
#define ops_trace_tensor_list ops_trace_tensor

static void ops_trace_int(struct ops_trace_call *c, const char *name, long long v) {
    ARG(c, name);
    put("%lld", v);
    if (strcmp(name, "cubeMathType") == 0) c->cube = (int) v;
}

static void ops_trace_bool(struct ops_trace_call *c, const char *name, bool v) {
    ARG(c, name);
    put("%s", v ? "true" : "false");
}

static void ops_trace_double(struct ops_trace_call *c, const char *name, double v) {
    ARG(c, name);
    put("%.17g", v);
}

static void ops_trace_dtype(struct ops_trace_call *c, const char *name, aclDataType v) {
    ARG(c, name);
    put("\"%s\"", dtype_name(v));
}

static void ops_trace_str(struct ops_trace_call *c, const char *name, const char *v) {
    char s[256];
    ARG(c, name);
    json_string(s, sizeof s, v);
    put("%s", v ? s : "null");
}

static __attribute__((unused)) void ops_trace_ptr(struct ops_trace_call *c, const char *name, const void *v) {
    ARG(c, name);
    put("\"%p\"", v);
}

static void ops_trace_prepared(struct ops_trace_call *c, int rc, const uint64_t *workspace,
                               aclOpExecutor *const *executor) {
    if (c->open == 1) c->open = 2;
    c->rc = rc;
    c->workspace = workspace ? *workspace : 0;
    c->executor = executor ? *executor : NULL;
}

static void ops_trace_launched(const char *op, aclOpExecutor *executor, void *stream, int rc) {
    if (g_call.open && g_call.executor == executor && !g_call.launched) {
        g_call.launched = 1;
        g_call.stream = stream;
        g_call.rc = rc;
        return;
    }
    /* a launch of an earlier executor (a repeatable one): its own record */
    close_call();
    put("%s{\"call\":\"%s\",\"phase\":\"launch\",\"stream\":\"%p\",\"rc\":%d}", g_n_calls++ ? "," : "", op,
        stream, rc);
}

void ops_trace_error(const char *message) {
    if (g_on && g_call.open && g_call.rc && !g_call.error[0])
        json_string(g_call.error, sizeof g_call.error, message);
}

/* ------------------------------------------------------- runtime calls ---- */

/* The bytes the copies moved (repro), end to end: blob i is g_blobs.buf[at, at + size). */
static struct text g_blobs;
static struct blob { size_t at, size; } *g_blob;
static size_t g_n_blobs, g_cap_blob;
/* Device-to-host aclrtMemcpyAsync copies not yet waited for: their host bytes are the
 * copy's only once the stream is synchronized (the runtime docs), so they are read then. */
static struct unread { size_t blob; const void *host; aclrtStream stream; } *g_unread;
static size_t g_n_unread, g_cap_unread;

static int push(void **items, size_t *cap, size_t n, size_t size) {
    if (n < *cap) return 1;
    size_t c = *cap ? 2 * *cap : 256;
    void *p = realloc(*items, c * size);
    if (!p) return 0;
    *items = p;
    *cap = c;
    return 1;
}

/* A new blob of `size` bytes, copied from `host` (NULL: filled later); -1 when out of memory. */
static long new_blob(const void *host, size_t size) {
    if (!push((void **) &g_blob, &g_cap_blob, g_n_blobs, sizeof *g_blob) || !grow(&g_blobs, size)) return -1;
    if (host) memcpy(g_blobs.buf + g_blobs.len, host, size);
    g_blob[g_n_blobs] = (struct blob) { g_blobs.len, size };
    g_blobs.len += size;
    return (long) g_n_blobs++;
}

static const char *shim_aclGetRecentErrMsg(void) {
    if (g_have_taken) {
        g_have_taken = 0;
        return g_taken;
    }
    return ops_trace_real.aclGetRecentErrMsg ? ops_trace_real.aclGetRecentErrMsg() : NULL;
}

/* A runtime call's record: `args` (its JSON object's members) then its extras where it
 * ran; while an aclnn call is open (between its GetWorkspaceSize and the next call), after it. */
static struct text *runtime_record(const char *name, aclError rc) {
    struct text *t = g_call.open ? &g_pend : &g_text;
    tput(t, "%s{\"call\":\"%s\",\"rc\":%d,", g_n_calls++ ? "," : "", name, (int) rc);
    if (rc) {
        const char *m = ops_trace_real.aclGetRecentErrMsg ? ops_trace_real.aclGetRecentErrMsg() : NULL;
        snprintf(g_taken, sizeof g_taken, "%s", m ? m : "");
        g_have_taken = 1;
        char e[sizeof g_taken + 64];
        json_string(e, sizeof e, g_taken);
        tput(t, "\"error\":%s,", e);
    }
    tput(t, "\"args\":{");
    return t;
}

static void copied(struct text *t, const void *host, size_t count) {
    long i = new_blob(host, count);
    if (i >= 0) tput(t, ",\"data\":%ld", i);
}

static aclError shim_aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy) {
    aclError rc = ops_trace_real.aclrtMalloc(devPtr, size, policy);
    struct text *t = runtime_record("aclrtMalloc", rc);
    tput(t, "\"devPtr\":" HEX ",\"size\":%zu,\"policy\":%d}", (uintptr_t) devPtr, size, (int) policy);
    if (!rc) tput(t, ",\"ptr\":" HEX, (uintptr_t) *devPtr);
    tput(t, "}");
    return rc;
}

static aclError shim_aclrtFree(void *devPtr) {
    aclError rc = ops_trace_real.aclrtFree(devPtr);
    tput(runtime_record("aclrtFree", rc), "\"devPtr\":" HEX "}}", (uintptr_t) devPtr);
    return rc;
}

static aclError shim_aclrtMemset(void *devPtr, size_t maxCount, int32_t value, size_t count) {
    aclError rc = ops_trace_real.aclrtMemset(devPtr, maxCount, value, count);
    tput(runtime_record("aclrtMemset", rc), "\"devPtr\":" HEX ",\"maxCount\":%zu,\"value\":%d,\"count\":%zu}}",
         (uintptr_t) devPtr, maxCount, (int) value, count);
    return rc;
}

static struct text *copy_record(const char *name, aclError rc, void *dst, size_t destMax, const void *src,
                                size_t count, aclrtMemcpyKind kind) {
    struct text *t = runtime_record(name, rc);
    tput(t, "\"dst\":" HEX ",\"destMax\":%zu,\"src\":" HEX ",\"count\":%zu,\"kind\":%d", (uintptr_t) dst, destMax,
         (uintptr_t) src, count, (int) kind);
    return t;
}

static aclError shim_aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count, aclrtMemcpyKind kind) {
    aclError rc = ops_trace_real.aclrtMemcpy(dst, destMax, src, count, kind);
    struct text *t = copy_record("aclrtMemcpy", rc, dst, destMax, src, count, kind);
    tput(t, "}");
    if (!rc && count && (kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_HOST))
        copied(t, kind == ACL_MEMCPY_HOST_TO_DEVICE ? src : dst, count);   /* done: both sides hold them */
    tput(t, "}");
    return rc;
}

static aclError shim_aclrtMemcpyAsync(void *dst, size_t destMax, const void *src, size_t count,
                                      aclrtMemcpyKind kind, aclrtStream stream) {
    aclError rc = ops_trace_real.aclrtMemcpyAsync(dst, destMax, src, count, kind, stream);
    struct text *t = copy_record("aclrtMemcpyAsync", rc, dst, destMax, src, count, kind);
    tput(t, ",\"stream\":" HEX "}", (uintptr_t) stream);
    if (!rc && count && kind == ACL_MEMCPY_HOST_TO_DEVICE) copied(t, src, count);
    if (!rc && count && kind == ACL_MEMCPY_DEVICE_TO_HOST) {   /* its bytes at the next wait */
        long i = new_blob(NULL, count);
        if (i >= 0 && push((void **) &g_unread, &g_cap_unread, g_n_unread, sizeof *g_unread)) {
            g_unread[g_n_unread++] = (struct unread) { (size_t) i, dst, stream };
            tput(t, ",\"data\":%ld", i);
        }
    }
    tput(t, "}");
    return rc;
}

/* The device-to-host copies queued on `stream` (NULL: on any) are done: their bytes. */
static void waited(aclrtStream stream, int any) {
    size_t k = 0;
    for (size_t i = 0; i < g_n_unread; i++) {
        struct unread u = g_unread[i];
        if (any || u.stream == stream) memcpy(g_blobs.buf + g_blob[u.blob].at, u.host, g_blob[u.blob].size);
        else g_unread[k++] = u;
    }
    g_n_unread = k;
}

static aclError shim_aclrtSynchronizeStream(aclrtStream stream) {
    aclError rc = ops_trace_real.aclrtSynchronizeStream(stream);
    if (!rc) waited(stream, 0);
    tput(runtime_record("aclrtSynchronizeStream", rc), "\"stream\":" HEX "}}", (uintptr_t) stream);
    return rc;
}

static aclError shim_aclrtSynchronizeDevice(void) {
    aclError rc = ops_trace_real.aclrtSynchronizeDevice();
    if (!rc) waited(NULL, 1);
    tput(runtime_record("aclrtSynchronizeDevice", rc), "}}");
    return rc;
}

/* the blob i of the last recording: its size, *data its bytes (valid until the next start) */
size_t ops_cann_trace_blob(size_t i, const unsigned char **data) {
    *data = i < g_n_blobs ? (const unsigned char *) g_blobs.buf + g_blob[i].at : NULL;
    return i < g_n_blobs ? g_blob[i].size : 0;
}

#include "ops_trace_shims.h"   /* generated by build_aclnn.py: a shim pair per ACLNN_OP */

/* ----------------------------------------------------------------- API ---- */

static int start(int repro) {
    if (g_on) ACL = ops_trace_real;
    ops_trace_real = ACL;
    ops_trace_swap(&ACL);
#define SHIM(name) if (ACL.name) ACL.name = shim_##name;
    SHIM(aclCreateTensor) SHIM(aclCreateScalar) SHIM(aclCreateIntArray) SHIM(aclCreateTensorList)
    if (repro) {
        SHIM(aclrtMalloc) SHIM(aclrtFree) SHIM(aclrtMemset) SHIM(aclrtMemcpy) SHIM(aclrtMemcpyAsync)
        SHIM(aclrtSynchronizeStream) SHIM(aclrtSynchronizeDevice) SHIM(aclGetRecentErrMsg)
    }
#undef SHIM
    g_on = 1;
    g_repro = repro;
    g_text.len = g_pend.len = g_blobs.len = 0;
    g_n_blobs = g_n_unread = 0;
    g_have_taken = 0;
    g_n_calls = 0;
    g_call.open = 0;
    put("[");
    return 0;
}

int ops_cann_trace_start(void) { return start(0); }

int ops_cann_trace_start_repro(void) { return start(1); }

const char *ops_cann_trace_stop(void) {
    if (!g_on) return "[]";
    close_call();
    put("]");
    ACL = ops_trace_real;
    g_on = 0;
    return g_text.buf ? g_text.buf : "[]";
}
