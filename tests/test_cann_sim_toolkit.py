"""The CANN simulator as a CANN toolkit (make cann-sim-toolkit): a C program that knows
nothing of Python builds against its headers, links CANN's library names, and runs aclnn
operators on the simulator, with the simulator's rules applied to it."""
import os
import shutil
import subprocess
import textwrap

import pytest

from cannops.native import build_aclnn, cann_sim_toolkit

pytestmark = pytest.mark.skipif(not shutil.which("cc") or not shutil.which("c++"),
                                reason="no C / C++ compiler")

CLIENT = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdint.h>
    #include <string.h>
    #include <acl/acl.h>
    #include <aclnnop/aclnn_add.h>
    #include <aclnnop/aclnn_cast.h>

    #define CHECK(x) do { int r_ = (x); if (r_) { printf("FAILED %s = %d: %s\n", #x, r_, \
        aclGetRecentErrMsg()); return 1; } } while (0)

    static aclTensor *vec(void *data, int64_t n, aclDataType t) {
        int64_t dims[1] = {n}, strides[1] = {1};
        return aclCreateTensor(dims, 1, t, strides, 0, ACL_FORMAT_ND, dims, 1, data);
    }

    int main(int argc, char **argv) {
        enum { N = 8 };
        size_t bytes = N * sizeof(float);
        float x[N], y[N], z[N];
        for (int i = 0; i < N; i++) { x[i] = i; y[i] = 0.5f * i; }
        CHECK(aclInit(NULL));
        CHECK(aclrtSetDevice(0));
        printf("soc %s\n", aclrtGetSocName());
        aclrtStream s;
        CHECK(aclrtCreateStream(&s));
        void *a, *b, *c;
        CHECK(aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemcpy(a, bytes, x, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
        CHECK(aclrtMemcpy(b, bytes, y, bytes, ACL_MEMCPY_HOST_TO_DEVICE));
        printf("align128 %d\n", (int) ((uintptr_t) a % 128 == 0));
        if (argc > 1 && !strcmp(argv[1], "storage")) {
            /* the last 4 elements, described as ggml-cann's data-pointer views are: a
               storage of 4 elements that leaves out the view's offset of 4 */
            int64_t dims[1] = {4}, strides[1] = {1}, storage[1] = {4};
            aclTensor *t = aclCreateTensor(dims, 1, ACL_FLOAT, strides, 4, ACL_FORMAT_ND, storage, 1, a);
            printf("view beyond storage: %s\n", t ? "created" : aclGetRecentErrMsg());
            if (t) aclDestroyTensor(t);
        }
        aclTensor *ta = vec(a, N, ACL_FLOAT), *tb = vec(b, N, ACL_FLOAT), *tc = vec(c, N, ACL_FLOAT);
        float one = 1.0f;
        aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
        uint64_t ws;
        aclOpExecutor *ex;
        CHECK(aclnnAddGetWorkspaceSize(ta, tb, alpha, tc, &ws, &ex));
        CHECK(aclnnAdd(NULL, ws, ex, s));
        if (argc > 1 && !strcmp(argv[1], "unsynchronised")) {
            /* the queued Add has not run: the output still holds fresh-memory bytes */
            CHECK(aclrtMemcpy(z, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
            printf("before sync %08x\n", *(unsigned *) z);
        }
        CHECK(aclrtSynchronizeStream(s));
        CHECK(aclrtMemcpy(z, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
        for (int i = 0; i < N; i++) printf("%g ", z[i]);
        printf("\n");
        /* float -> int32 is no conversion aclnnCast refuses, but an int8 out of Add is */
        aclTensor *ti = vec(c, N, ACL_INT8);
        int r = aclnnAddGetWorkspaceSize(ta, tb, alpha, ti, &ws, &ex);
        printf("int8 out: %d %s\n", r, r ? aclGetRecentErrMsg() : "");
        aclDestroyTensor(ti);
        aclDestroyTensor(ta); aclDestroyTensor(tb); aclDestroyTensor(tc);
        aclDestroyScalar(alpha);
        CHECK(aclrtFree(a)); CHECK(aclrtFree(b));
        if (!(argc > 1 && !strcmp(argv[1], "leak"))) CHECK(aclrtFree(c));
        CHECK(aclrtDestroyStream(s));
        CHECK(aclrtResetDevice(0));
        CHECK(aclFinalize());
        return 0;
    }
""")


@pytest.fixture(scope="module")
def client(toolkit, tmp_path_factory):
    src = tmp_path_factory.mktemp("client") / "client.c"
    src.write_text(CLIENT)
    exe = src.with_suffix("")
    lib64 = toolkit / "lib64"
    subprocess.run(["cc", "-Wall", "-Werror", "-o", str(exe), str(src), "-I", str(toolkit / "include"),
                    "-L", str(lib64), "-lascendcl", "-lnnopbase", "-lopapi", f"-Wl,-rpath,{lib64}"],
                   check=True)
    return exe


def run(exe, *args, **env):
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_a_c_program_runs_aclnn_on_the_simulator(client):
    proc = run(client)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert out[0].startswith("soc Ascend")
    assert out[1] == "align128 0"     # aclrtMalloc: 64-byte aligned as documented, never more
    assert [float(v) for v in out[2].split()] == [1.5 * i for i in range(8)]
    # the simulator's dtype rule reaches the foreign client: code 161002 and its reason
    assert out[3].startswith("int8 out: 161002") and "INT8" in out[3]


def test_the_simulators_rules_apply_to_a_foreign_client(client):
    """Work queued on a stream runs at synchronisation; memory never freed is reported."""
    proc = run(client, "unsynchronised")
    assert proc.returncode == 0 and "before sync a5a5a5a5" in proc.stdout, proc.stdout
    proc = run(client, "leak")
    assert proc.returncode == 0
    assert "CANN-SIM: leak at" in proc.stderr and "1 device allocation(s), 32 bytes" in proc.stderr


def test_entry_points_live_in_cann_s_libraries(toolkit):
    """Each library exports its own headers' entry points, as CANN splits them."""
    def exported(lib):
        nm = subprocess.run(["nm", "-D", "--defined-only", str(toolkit / "lib64" / lib)],
                            capture_output=True, text=True, check=True).stdout
        return {line.split()[-1] for line in nm.splitlines()}
    ascendcl, nnopbase, opapi = (exported(f"lib{n}.so") for n in ("ascendcl", "nnopbase", "opapi"))
    assert {"aclInit", "aclrtMalloc", "aclrtMemcpyAsync"} <= ascendcl
    assert {"aclCreateTensor", "aclDestroyAclOpExecutor"} <= nnopbase
    assert {"aclnnAdd", "aclnnAddGetWorkspaceSize", "aclnnMm"} <= opapi
    assert not {"aclnnAdd", "aclCreateTensor"} & ascendcl and "aclInit" not in opapi
    eps = build_aclnn.def_entries()
    assert len(ascendcl | nnopbase | opapi) == len({e.name for e in eps}) == len(eps)
    assert (toolkit / "lib64" / "libacl_op_compiler.so").exists()


def test_every_header_compiles_as_cxx(toolkit, tmp_path):
    """ggml-cann is C++: every generated header, included alone, compiles there."""
    headers = build_aclnn.declared_headers()
    src = tmp_path / "all.cpp"
    src.write_text("".join(f"#include <{h}>\n" for h in headers) + "int main() { return 0; }\n")
    subprocess.run(["c++", "-std=c++17", "-fsyntax-only", "-I", str(toolkit / "include"), str(src)],
                   check=True)
    assert "aclnnop/aclnn_add.h" in headers and "aclnn/aclnn_base.h" in headers


def test_set_env_and_marker(toolkit):
    env = subprocess.run(["sh", "-c", f". {toolkit}/set_env.sh && env"], capture_output=True,
                         text=True, check=True).stdout
    assert f"ASCEND_TOOLKIT_HOME={toolkit}" in env and f"{toolkit}/lib64" in env
    assert "CANN_SIM_SOC=Ascend910B3" in env
    assert cann_sim_toolkit.is_simulated(toolkit)
    assert build_aclnn.entry_points()   # the same .def files both read


# a Python process whose own native layer the simulator serves (device CANN-SIM) loads the
# toolkit's libascendcl and calls it: the backend's entry point refuses to serve both
BESIDE = """
import sys, cffi
import cannops.backend.cann.sim.binding
ffi = cffi.FFI()
ffi.cdef("int aclInit(const char *configPath);")
ffi.dlopen(sys.argv[1] + "/lib64/libascendcl.so").aclInit(ffi.NULL)
"""


def test_the_library_serves_through_the_entry_point_the_backend_names(toolkit):
    """native/ names no module above it: the entry point comes from the build's caller
    (cannops.backend.cann.sim.toolkit), is recorded in the marker, and is what runs."""
    import json
    import sys

    from cannops.backend.cann.sim import toolkit as sim_toolkit
    assert json.loads((toolkit / cann_sim_toolkit.MARKER).read_text())["serve"] == sim_toolkit.ENTRY
    p = subprocess.run([sys.executable, "-c", BESIDE, str(toolkit)], capture_output=True, text=True, timeout=300)
    assert "the simulated toolkit cannot run beside it" in p.stderr, p.stderr[-2000:]
    assert f"{sim_toolkit.__file__}" in p.stderr     # raised by the entry point itself
    with pytest.raises(ValueError, match="module:function"):
        cann_sim_toolkit.build(toolkit / "unused", serve="import os")


def test_named_relaxations_let_a_client_go_on_and_say_so(client):
    """ggml-cann relies on more than the docs promise (128-byte aligned buffers, views whose
    storage leaves out their offset): the launchers of make ggml-cann name each rule they
    relax, and every use of a relaxed rule is still printed."""
    strict = run(client, "storage")
    assert "view beyond storage: aclCreateTensor: view dims [4]" in strict.stdout
    assert "CANN-SIM refused: aclCreateTensor" in strict.stderr
    relaxed = run(client, "storage", CANN_SIM_ALLOW="storage-shape", CANN_SIM_MALLOC_ALIGN="128")
    assert relaxed.returncode == 0, relaxed.stdout + relaxed.stderr
    assert "view beyond storage: created" in relaxed.stdout and "align128 1" in relaxed.stdout
    assert "CANN-SIM tolerated [storage-shape]: aclCreateTensor" in relaxed.stderr
    bad = run(client, CANN_SIM_ALLOW="everything")
    assert bad.returncode == 1 and "unknown rule 'everything'" in bad.stdout
    bad = run(client, CANN_SIM_MALLOC_ALIGN="96")
    assert bad.returncode == 1 and "not a power of two" in bad.stdout
