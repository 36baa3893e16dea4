"""ggml-cann on the CANN simulator, timed (part of `make bench` when build/ggml-cann/910B
exists; alone: python bench/ggml_cann.py [--binary PATH] [-o OPS]):

* the shim: a C program built against the simulated toolkit calls a cheap entry point
  (aclrtGetDevice) and a small aclnnAdd (GetWorkspaceSize, launch, synchronize) N times;
  the same Python functions called from Python give the simulator's own cost, so the
  difference is what the C -> libascendcl -> libcannsim -> Python crossing adds per call;
* time per case, op by op: test-backend-ops of ggml-cann on the simulated CANN0 (its
  cases, one process per op, as the Ascend CI runs it) next to `ops test -b CANN-SIM -j 1`
  (ops' own aclnn layer, its catalog's cases of the same op). Both are the simulator's
  cost on this CPU, not a device's.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
TOOLKIT = ROOT / "build" / "cann-sim-toolkit"

SHIM = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdlib.h>
    #include <time.h>
    #include <acl/acl.h>
    #include <aclnnop/aclnn_add.h>
    static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
    int main(int argc, char **argv) {
        int n = atoi(argv[1]), dev;
        aclInit(NULL); aclrtSetDevice(0);
        aclrtStream s; aclrtCreateStream(&s);
        void *a; aclrtMalloc(&a, 64, ACL_MEM_MALLOC_HUGE_FIRST);
        int64_t dims[1] = {16}, strides[1] = {1};
        aclTensor *t = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, dims, 1, a);
        float one = 1; aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
        double t0 = now();
        for (int i = 0; i < n; i++) aclrtGetDevice(&dev);
        double t1 = now();
        for (int i = 0; i < n; i++) {
            uint64_t ws; aclOpExecutor *ex;
            aclnnAddGetWorkspaceSize(t, t, alpha, t, &ws, &ex);
            aclnnAdd(NULL, ws, ex, s);
            aclrtSynchronizeStream(s);
        }
        double t2 = now();
        printf("%.3f %.3f\n", 1e6 * (t1 - t0) / n, 1e6 * (t2 - t1) / n);
        aclDestroyTensor(t); aclDestroyScalar(alpha); aclrtFree(a); aclrtDestroyStream(s);
        aclrtResetDevice(0); aclFinalize();
        return 0;
    }
""")

# the same calls from Python, through the simulator's own functions: no C crossing
PY_SIDE = textwrap.dedent("""
    import sys, time
    from cannops.native._aclnn import ffi, lib
    from cannops.backend.cann import sim
    sim.install()
    from cannops.backend.cann.sim.aclnn import _launch, _prepare
    from cannops.backend.cann.sim.runtime import RUNTIME as R
    n = int(sys.argv[1])
    R["aclInit"](ffi.NULL); R["aclrtSetDevice"](0)
    s = ffi.new("void **"); R["aclrtCreateStream"](s)
    a = ffi.new("void **"); R["aclrtMalloc"](a, 64, 0)
    dims = ffi.new("int64_t[]", [16]); strides = ffi.new("int64_t[]", [1])
    t = R["aclCreateTensor"](dims, 1, lib.ACL_FLOAT, strides, 0, lib.ACL_FORMAT_ND, dims, 1, a[0])
    one = ffi.new("float *", 1.0); alpha = R["aclCreateScalar"](one, lib.ACL_FLOAT)
    dev = ffi.new("int32_t *")
    t0 = time.perf_counter()
    for _ in range(n):
        R["aclrtGetDevice"](dev)
    t1 = time.perf_counter()
    ws = ffi.new("uint64_t *"); ex = ffi.new("aclOpExecutor **")
    t1 = time.perf_counter()
    for _ in range(n):
        _prepare("Add", (t, t, alpha, t, ws, ex))
        _launch("Add", ffi.NULL, ws[0], ex[0], s[0])
        R["aclrtSynchronizeStream"](s[0])
    t2 = time.perf_counter()
    print(f"{1e6 * (t1 - t0) / n:.3f} {1e6 * (t2 - t1) / n:.3f}")
""")


def _best(cmd: list[str], repeat: int = 5) -> list[float]:
    """Each figure's least disturbed of `repeat` runs (a shared machine)."""
    runs = [[float(x) for x in subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.split()]
            for _ in range(repeat)]
    return [min(r[i] for r in runs) for i in range(len(runs[0]))]


def shim(n: int = 5000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "shim.c"
        src.write_text(SHIM)
        exe = src.with_suffix("")
        lib64 = TOOLKIT / "lib64"
        subprocess.run(["cc", "-O2", "-o", str(exe), str(src), "-I", str(TOOLKIT / "include"),
                        "-L", str(lib64), "-lascendcl", "-lnnopbase", "-lopapi", f"-Wl,-rpath,{lib64}"],
                       check=True)
        c = _best([str(exe), str(n)])
    py = _best([sys.executable, "-c", PY_SIDE, str(n)])
    print(f"shim, {n} calls each, best of 5: aclrtGetDevice {c[0]:.2f} us from C, {py[0]:.2f} us from Python "
          f"(crossing {c[0] - py[0]:.2f} us); aclnnAdd of 16 floats + sync {c[1]:.1f} us from C, "
          f"{py[1]:.1f} us from Python (crossing {c[1] - py[1]:.1f} us, "
          f"{100 * (c[1] - py[1]) / c[1]:.0f} % of the call)", flush=True)


def per_case(binary: str, ops: list[str]) -> None:
    import json
    print(f"{'op':<16} {'tbo cases':>9} {'tbo us/case':>11} {'ops cases':>9} {'ops us/case':>11}")
    for op in ops:
        runs = []
        for cmd in (["tbo", binary, "-b", "CANN0", "--timeout", "900"], ["test", "-b", "CANN-SIM", "-j", "1"]):
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "cannops.cli.main", *cmd, "-o", op, "--output", "json"],
                                 capture_output=True, text=True)
            s = time.perf_counter() - t0
            c = next(iter(json.loads(out.stdout)["summary"].values()), {})
            runs.append((c.get("OK", 0) + c.get("FAIL", 0), s))
        (n_tbo, s_tbo), (n_ops, s_ops) = runs
        print(f"{op:<16} {n_tbo:>9} {1e6 * s_tbo / max(n_tbo, 1):>11.0f} "
              f"{n_ops:>9} {1e6 * s_ops / max(n_ops, 1):>11.0f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=str(ROOT / "build/ggml-cann/910B/bin/test-backend-ops"))
    ap.add_argument("-o", dest="ops", default="ADD,SOFT_MAX,RMS_NORM,GET_ROWS,CPY,SET_ROWS")
    args = ap.parse_args()
    if not (TOOLKIT / "cann-sim.json").exists() or not os.path.exists(args.binary):
        print("ggml-cann bench: no simulated toolkit or ggml-cann build (make ggml-cann)")
        return 0
    print(f"ggml-cann on the simulator (load average {os.getloadavg()[0]:.1f}):")
    shim()
    per_case(args.binary, args.ops.split(","))
    return 0


if __name__ == "__main__":
    sys.exit(main())
