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
 * One trace per process (the table is global): a worker runs one case at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops_cann.h"

static struct ops_acl_api ops_trace_real;   /* the entries the shims call */
static int g_on;

/* ---------------------------------------------------------------- text ---- */

static char  *g_buf;
static size_t g_len, g_cap;

static void put(const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(g_buf ? g_buf + g_len : NULL, g_buf ? g_cap - g_len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (g_buf && g_len + (size_t) n < g_cap) {
            g_len += (size_t) n;
            return;
        }
        size_t cap = g_cap ? 2 * g_cap : 65536;
        while (cap <= g_len + (size_t) n) cap *= 2;
        char *b = realloc(g_buf, cap);
        if (!b) return;   /* the trace is cut short, the run goes on */
        g_buf = b;
        g_cap = cap;
    }
}

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
#define OPS_TRACE_DESCS 1024
#define OPS_DESC_LEN 320
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
    char *d = new_desc(t), ne[128], st[128];
    ints(ne, sizeof ne, viewDims, viewDimsNum);
    ints(st, sizeof st, stride, viewDimsNum);
    size_t k = (size_t) snprintf(d, OPS_DESC_LEN, "{\"dtype\":\"%s\",\"ne\":%s,\"strides\":%s",
                                 dtype_name(dataType), ne, st);
    if (offset && k < OPS_DESC_LEN) k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, ",\"offset\":%lld", (long long) offset);
    if (format != ACL_FORMAT_ND && k < OPS_DESC_LEN)
        k += (size_t) snprintf(d + k, OPS_DESC_LEN - k, ",\"format\":\"%s\"", format_name(format));
    if (k < OPS_DESC_LEN) snprintf(d + k, OPS_DESC_LEN - k, ",\"addr\":\"%p\"}", tensorData);
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
}

static struct ops_trace_call *ops_trace_begin(const char *op) {
    close_call();
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

#include "ops_trace_shims.h"   /* generated by build_aclnn.py: a shim pair per ACLNN_OP */

/* ----------------------------------------------------------------- API ---- */

int ops_cann_trace_start(void) {
    if (!g_on) {
        ops_trace_real = ACL;
        ops_trace_swap(&ACL);
#define SHIM(name) if (ACL.name) ACL.name = shim_##name;
        SHIM(aclCreateTensor) SHIM(aclCreateScalar) SHIM(aclCreateIntArray) SHIM(aclCreateTensorList)
#undef SHIM
        g_on = 1;
    }
    g_len = 0;
    g_n_calls = 0;
    g_call.open = 0;
    put("[");
    return 0;
}

const char *ops_cann_trace_stop(void) {
    if (!g_on) return "[]";
    close_call();
    put("]");
    ACL = ops_trace_real;
    g_on = 0;
    return g_buf ? g_buf : "[]";
}
