"""The standalone C program of `ops repro` on a ggml device: each case's graph built with
ggml's own C API, as the Recorder wrote it down (recorder.py), on the device initialised by
its ggml name; the inputs uploaded from the .npy files, the graph computed, and the last
case's outputs compared byte for byte with the stored device outputs (and, for the
reader, with the reference)."""
from __future__ import annotations

from cannops.backend.repro import Step, c_string, comment, make_path, makefile

from .recorder import GraphProgram

PRELUDE = r"""#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "repro.h"

#include <sys/stat.h>

#ifndef GGML_LIBDIR
#define GGML_LIBDIR ""
#endif

static void upload(struct ggml_tensor *t, const char *path) {
    size_t size = ggml_nbytes(t);
    void *data = repro_read_exact(path, size);
    ggml_backend_tensor_set(t, data, 0, size);
    free(data);
}

/* A tensor's values as floats, ggml's element order (ne0 fastest), through its strides;
 * NULL for a type without a conversion to float. */
static float *values(const struct ggml_tensor *t, const unsigned char *raw) {
    const struct ggml_type_traits *traits = ggml_get_type_traits(t->type);
    int64_t ne0 = t->ne[0];
    float *out = malloc((size_t) (ggml_nelements(t) ? ggml_nelements(t) : 1) * sizeof(float));
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
        const unsigned char *row = raw + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
        float *dst = out + ((i3 * t->ne[2] + i2) * t->ne[1] + i1) * ne0;
        for (int64_t i0 = 0; i0 < ne0 && (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_I32); i0++) {
            int32_t i32;
            memcpy(t->type == GGML_TYPE_F32 ? (void *) &dst[i0] : (void *) &i32, row + i0 * t->nb[0], 4);
            if (t->type == GGML_TYPE_I32) dst[i0] = (float) i32;
        }
        if (t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_I32) continue;
        if (!traits->to_float || (!ggml_is_quantized(t->type) && t->nb[0] != ggml_type_size(t->type))) {
            free(out);
            return NULL;
        }
        traits->to_float(row, dst, ne0);
    }
    return out;
}

/* 1 when the tensor's bytes are the stored device output's; its error against the
 * reference printed either way. */
static inline int check(const char *what, struct ggml_tensor *t, const char *device_npy, const char *reference_npy,
                 double threshold) {
    size_t size = ggml_nbytes(t);
    unsigned char *raw = malloc(size ? size : 1);
    ggml_backend_tensor_get(t, raw, 0, size);
    int same = repro_same_bytes(what, raw, size, device_npy, 0);
    float *v = values(t, raw);
    if (v) repro_vs_reference(what, v, (size_t) ggml_nelements(t), reference_npy, threshold);
    free(v);
    free(raw);
    return same;
}

static void compute(ggml_backend_t backend, struct ggml_cgraph *gf, const char *name) {
    enum ggml_status status = ggml_backend_graph_compute(backend, gf);
    if (status != GGML_STATUS_SUCCESS) {
        fprintf(stderr, "repro: ggml_backend_graph_compute of %s: %s\n", name, ggml_status_to_string(status));
        exit(2);
    }
}
"""

MAIN = r"""
static int run(void) {
    if (GGML_LIBDIR[0]) {   /* backends built as loadable modules, as ops loads them */
        ggml_backend_load_all_from_path(GGML_LIBDIR);
        struct stat st;
        if (stat(GGML_LIBDIR "/../bin", &st) == 0) ggml_backend_load_all_from_path(GGML_LIBDIR "/../bin");
    }
    ggml_backend_dev_t dev = ggml_backend_dev_by_name(DEVICE);
    if (!dev) {
        fprintf(stderr, "repro: no ggml device %s in this ggml; it has:", DEVICE);
        for (size_t i = 0; i < ggml_backend_dev_count(); i++)
            fprintf(stderr, " %s", ggml_backend_dev_name(ggml_backend_dev_get(i)));
        fprintf(stderr, "\n");
        return 2;
    }
    ggml_backend_t backend = ggml_backend_dev_init(dev, NULL);
    if (!backend) {
        fprintf(stderr, "repro: ggml_backend_dev_init(%s) failed\n", DEVICE);
        return 2;
    }
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
    ggml_backend_set_n_threads_t set_threads = (ggml_backend_set_n_threads_t)
        ggml_backend_reg_get_proc_address(reg, "ggml_backend_set_n_threads");
    if (set_threads) set_threads(backend, N_THREADS);
    printf("ggml %s, device %s (%s)\n", ggml_version(), DEVICE, ggml_backend_dev_description(dev));
    int same = 1;
%(calls)s    ggml_backend_free(backend);
#ifndef EXPECT_DEATH
    printf(same ? "reproduced: the device's outputs are the stored ones, byte for byte\n"
                : "NOT reproduced: the device's outputs differ from the stored ones\n");
#endif
    return same ? 0 : 1;
}

int main(void) {
#ifdef EXPECT_DEATH   /* the recorded run died in its last case: the cases run in a child that must die so */
    return repro_expect_death(run, EXPECT_DEATH, EXPECT_SIGNAL, EXPECT_EXIT, EXPECT_MESSAGE);
#else
    return run();
#endif
}
"""


def program(device: str, n_threads: int, steps: list[Step], programs: list[GraphProgram], title: str,
            death=None) -> str:
    """repro.c: one function a case, main() running them in order on one backend (state a
    backend keeps between graphs, such as ggml-cann's ROPE cache, carries over, as in ops).
    With `death` (the recorded run's process died in the last case: repro_run.Death), they
    run in a child that must end the same way, saying the same."""
    parts = [comment(title), "", PRELUDE, f"#define DEVICE {c_string(device)}",
             f"#define N_THREADS {n_threads}", ""]
    if death is not None:
        parts += [f"#define EXPECT_DEATH {c_string(f'case {len(steps)} ({steps[-1].name})')}",
                  f"#define EXPECT_SIGNAL {max(-death.exitcode, 0)}", f"#define EXPECT_EXIT {max(death.exitcode, 0)}",
                  f"#define EXPECT_MESSAGE {c_string(death.expected)}", ""]
    calls = []
    for k, (step, prog) in enumerate(zip(steps, programs), 1):
        parts.append(_case(k, len(steps), step, prog))
        calls.append(f"    same = case_{k}(backend) && same;\n")
    parts.append(MAIN.replace("%(calls)s", "".join(calls)))
    return "\n".join(parts)


def _case(k: int, n: int, step: Step, prog: GraphProgram) -> str:
    role = ": compared" if step.checked else ": the recorded run died in it" if k == n else ", run before the last"
    body = [f"/* case {k} of {n}{role} */",
            comment(step.name),
            f"static int case_{k}(ggml_backend_t backend) {{",
            f"    struct ggml_init_params params = {{ ggml_tensor_overhead() * {prog.n_objs} + "
            f"ggml_graph_overhead_custom({prog.graph_size}, false), NULL, true }};",
            "    struct ggml_context * ctx = ggml_init(params);",
            "    /* the graph, as ops built it through ggml's constructors */"]
    body += ["    " + line for line in prog.lines]
    body += ["    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);",
             "    if (!buf) { fprintf(stderr, \"repro: cannot allocate the tensors\\n\"); exit(2); }",
             "    ggml_backend_buffer_clear(buf, 0);   /* op outputs start at zero, as in ops' run */"]
    body += [f"    upload({var}, {c_string(path)});" for var, path in step.inputs.items()]
    body += [f"    struct ggml_cgraph * gf = ggml_new_graph_custom(ctx, {prog.graph_size}, false);",
             f"    ggml_build_forward_expand(gf, {prog.out});",
             f"    compute(backend, gf, {c_string(step.folder)});",
             "    int same = 1;"]
    body += [f"    same = check({c_string(c.label)}, {c.where}, {c_string(c.device)}, {c_string(c.reference)}, "
             f"{c.threshold!r}) && same;" for c in step.checked]
    body += ["    ggml_backend_buffer_free(buf);", "    ggml_free(ctx);", "    return same;", "}", ""]
    return "\n".join(body)


def build_files(default_prefix: str, title: str, env: dict[str, str]) -> str:
    """The Makefile: GGML_PREFIX (include/, lib/ or lib64/), the bridge's ggml by default."""
    variables = [
        "# the ggml install prefix to build against (the one ops ran on by default)",
        f"GGML_PREFIX ?= {make_path(default_prefix, 'GGML_PREFIX')}",
        "GGML_LIBDIR ?= $(patsubst %/,%,$(dir $(firstword $(wildcard $(GGML_PREFIX)/lib/libggml.so "
        "$(GGML_PREFIX)/lib64/libggml.so))))",
    ]
    build = ("$(CC) $(CFLAGS) -I$(GGML_PREFIX)/include -DGGML_LIBDIR='\"$(GGML_LIBDIR)\"' -o $@ repro.c "
             "-L$(GGML_LIBDIR) -Wl,-rpath,$(GGML_LIBDIR) -lggml -lggml-base -lm")
    return makefile(title, variables, build, env)
