/* repro.h: what every reproducer written by `ops repro` shares (copied beside its repro.c):
 * reading the files it was written with, comparing bytes with the stored device output,
 * and the error against the stored reference, measured as ops measures it (NMSE). */
#ifndef OPS_REPRO_H
#define OPS_REPRO_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* A file of the reproducer's folder, whole; a missing one ends the program (exit 2). */
static void *repro_read(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "repro: cannot open %s (run it from its folder: make run)\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = malloc(n > 0 ? (size_t) n : 1);
    if (!data || (n > 0 && fread(data, 1, (size_t) n, f) != (size_t) n)) {
        fprintf(stderr, "repro: cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    if (size) *size = (size_t) n;
    return data;
}

/* A file's data that must be exactly `size` bytes (an input, a stored output): a .npy
 * file's array (C order, written by ops) after its header, else the whole file. */
static void *repro_read_exact(const char *path, size_t size) {
    size_t n = 0, skip = 0;
    unsigned char *data = repro_read(path, &n);
    if (n >= 10 && memcmp(data, "\x93NUMPY", 6) == 0)   /* magic, version, header length */
        skip = data[6] == 1 ? 10 + (size_t) (data[8] | data[9] << 8)
                            : 12 + (size_t) (data[8] | data[9] << 8 | data[10] << 16 | (size_t) data[11] << 24);
    if (n < skip || n - skip != size) {
        fprintf(stderr, "repro: %s holds %zu bytes of data, %zu expected\n", path, n - skip, size);
        exit(2);
    }
    memmove(data, data + skip, size);
    return data;
}

/* 1 when the device's bytes are the stored device output's, else 0 (with the first
 * difference; `quiet`: nothing said when they are the same). */
static int repro_same_bytes(const char *what, const void *got, size_t size, const char *stored_path, int quiet) {
    unsigned char *stored = repro_read_exact(stored_path, size);
    const unsigned char *g = got;
    size_t i = 0;
    while (i < size && g[i] == stored[i]) i++;
    if (i == size && !quiet)
        printf("  %s: %zu bytes, identical to the stored device output (%s)\n", what, size, stored_path);
    else if (i < size)
        printf("  %s: differs from the stored device output (%s) at byte %zu of %zu: 0x%02x, stored 0x%02x\n",
               what, stored_path, i, size, g[i], stored[i]);
    free(stored);
    return i == size;
}

/* The output's values against the reference's (float64, ggml's element order), as ops
 * judges them: NMSE = sum((out - ref)^2) / sum(ref^2), against the case's threshold. */
static void repro_vs_reference(const char *what, const float *got, size_t n, const char *ref_path,
                               double threshold) {
    double *ref = repro_read_exact(ref_path, n * sizeof(double));
    double err = 0, norm = 0, worst = 0;
    size_t at = 0, nan_mismatch = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(ref[i]) || isnan(got[i])) {
            nan_mismatch += isnan(ref[i]) != isnan(got[i]);
            continue;
        }
        double d = (double) got[i] - ref[i];
        err += d * d;
        norm += ref[i] * ref[i];
        if (fabs(d) > worst) { worst = fabs(d); at = i; }
    }
    double nmse = norm > 0 ? err / norm : err;
    printf("  %s vs the reference: NMSE = %.9f %s %.9f (%s); largest |error| %.6g at element %zu "
           "(got %.9g, reference %.9g)", what, nmse, nmse > threshold ? ">" : "<=", threshold,
           nmse > threshold || nan_mismatch ? "FAIL" : "OK", worst, at, n ? got[at] : 0.0, n ? ref[at] : 0.0);
    if (nan_mismatch) printf("; %zu elements NaN on one side only", nan_mismatch);
    printf("\n");
    free(ref);
}

static inline float repro_f16(uint16_t h) {
    uint32_t sign = (uint32_t) (h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    float v;
    if (exp == 0) v = ldexpf((float) man, -24);
    else if (exp == 31) v = man ? NAN : INFINITY;
    else v = ldexpf((float) (man | 0x400), (int) exp - 25);
    return sign ? -v : v;
}

static inline float repro_bf16(uint16_t h) {
    uint32_t bits = (uint32_t) h << 16;
    float v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

/* How a process ended, in words: "killed by SIGABRT", "exit status 1" (sig 0: exit `code`). */
static inline void repro_ended(int sig, int code, char *text, size_t size) {
    static const struct { int sig; const char *name; } names[] = {
        {SIGABRT, "SIGABRT"}, {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"},
        {SIGKILL, "SIGKILL"}, {SIGTERM, "SIGTERM"}};
    if (!sig) {
        snprintf(text, size, "exit status %d", code);
        return;
    }
    snprintf(text, size, "killed by signal %d", sig);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) snprintf(text, size, "killed by %s", names[i].name);
}

/* For a run that killed its process: body() in a child, its output (stdout and stderr)
 * read and passed on. 0 when it dies as the recorded run did (`sig`, else exit status
 * `code`) with `message` in its output; 1 when it does not (the case computes: fixed, or
 * it dies otherwise); 2 when it stops on an error of the program's own (exit 2, no message). */
static inline int repro_expect_death(int (*body)(void), const char *where, int sig, int code, const char *message) {
    int fds[2];
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds) != 0) { perror("repro: pipe"); return 2; }
    pid_t pid = fork();
    if (pid < 0) { perror("repro: fork"); return 2; }
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        close(fds[1]);
        setenv("GGML_NO_BACKTRACE", "1", 0);   /* ggml's abort would attach gdb for a backtrace */
        exit(body());
    }
    close(fds[1]);
    size_t len = 0, cap = 1 << 16;
    char *text = malloc(cap), chunk[4096];
    ssize_t n;
    while ((n = read(fds[0], chunk, sizeof chunk)) > 0) {
        fwrite(chunk, 1, (size_t) n, stdout);
        if (len + (size_t) n + 1 > cap) text = realloc(text, cap = 2 * (len + (size_t) n + 1));
        memcpy(text + len, chunk, (size_t) n);
        len += (size_t) n;
    }
    text[len] = 0;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    char how[64], expected[64];
    repro_ended(WIFSIGNALED(status) ? WTERMSIG(status) : 0, WIFEXITED(status) ? WEXITSTATUS(status) : 0, how,
                sizeof how);
    int same_end = sig ? WIFSIGNALED(status) && WTERMSIG(status) == sig : WIFEXITED(status) && WEXITSTATUS(status) == code;
    int said = strstr(text, message) != NULL;
    free(text);
    repro_ended(sig, code, expected, sizeof expected);
    if (same_end && said) {
        printf("reproduced: %s dies as in the recorded run (%s), saying \"%s\"\n", where, how, message);
        return 0;
    }
    if (!said && WIFEXITED(status) && WEXITSTATUS(status) == 2) return 2;
    printf("NOT reproduced: %s %s%s; the recorded run was %s, saying \"%s\"\n", where,
           WIFEXITED(status) && WEXITSTATUS(status) <= 1 ? "ran to its end, " : "", how, expected, message);
    return 1;
}

#endif
