"""`ops tbo` on the simulated toolkit: each case's ACL / aclnn calls, recorded by the simulator
in the binary's own process and framed into its stdout (CANN_SIM_TRACE), attributed to the
case line that follows them; and the simulator's hygiene switches (--poison, --check-inputs).

The marker logic is tested on the byte stream (frames in the middle of a line, cut by a
chunk's end, the old printer's order) and end to end on a small C client of the toolkit that
prints as test-backend-ops does and never flushes its stdout itself; then on ggml-cann's
test-backend-ops where `make ggml-cann` has built it."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

from cannops.backend.trace import FRAME, Unframer, frame, unframe
from cannops.cli.engine.tbo_console import Console, Reader

OPS = [sys.executable, "-m", "cannops.cli.main"]
ROOT = pathlib.Path(__file__).resolve().parents[1]
GGML_CANN = ROOT / "build" / "ggml-cann" / "910B" / "bin" / "test-backend-ops"


def _call(n: int, rc: int = 0) -> dict:
    return {"call": "aclnnAdd", "args": {"self": {"dtype": "FLOAT", "ne": [n], "strides": [1]}}, "rc": rc}


def _cases(chunks: list[bytes]) -> dict:
    got = []
    reader = Reader(got.append)
    console = Console(reader)
    for c in chunks:
        console.feed(c)
    console.close()
    return reader, {f"{x.op}({x.params})": x for x in got}


# --- the stream ------------------------------------------------------------------------------

def test_frames_come_out_of_the_bytes_in_their_place():
    hello = {"simulator": "CANN-SIM", "soc": "Ascend910B3"}
    data = b"Backend 1/1: CANN0\n" + frame(hello) + b"  A(n=1): OK\n" + b"[A] ERR" + frame(_call(2)) + b" = 1 > 0\n"
    u = Unframer()
    parts = [p for k in range(0, len(data), 7) for p in u.feed(data[k:k + 7])] + u.close()
    assert [p for p in parts if isinstance(p, dict)] == [hello, _call(2)]
    assert b"".join(p for p in parts if isinstance(p, bytes)) == b"Backend 1/1: CANN0\n  A(n=1): OK\n[A] ERR = 1 > 0\n"
    # a record separator that starts no frame is the program's; a frame cut by a death too
    assert unframe(b"x\x1ey\nz") == (b"x\x1ey\nz", [])
    assert unframe(b"ok\n" + FRAME + b'{"call": "aclnnA') == (b"ok\n" + FRAME + b'{"call": "aclnnA', [])


def test_each_case_gets_the_calls_before_its_line():
    """0.25.3's order: a case's calls, its check fragments (a frame may fall among them),
    then its line; a case not supported makes no call."""
    stream = [b"Backend 1/2: CANN0\n", frame({"call": "aclInit", "rc": 100002}),
              b"  Device description: Ascend910B3\n  Device memory: 8192 MB (8192 MB free)\n",
              frame(_call(1)), b"  ADD(n=1): OK\n", b"  ADD(n=2): not supported [CANN0] \n",
              frame(_call(3)), b"[ADD] ERR = 0.5 > 0.0000001 ", frame(_call(3)), b"  ADD(n=3): FAIL\n",
              frame(_call(4)), frame(_call(4, 161002))]
    # the same bytes cut anywhere give the same cases
    whole = b"".join(stream)
    for chunks in (stream, [whole[k:k + 5] for k in range(0, len(whole), 5)]):
        reader, got = _cases(chunks)
        assert [len(x.calls) for x in got.values()] == [1, 0, 2]
        assert [c["args"]["self"]["ne"] for c in got["ADD(n=3)"].calls] == [[3], [3]]
        assert got["ADD(n=3)"].checks == ["[ADD] ERR = 0.5 > 0.0000001"]
        assert reader.calls == [_call(4), _call(4, 161002)]   # the died case's, up to the abort


def test_an_old_ggml_names_the_case_before_its_calls():
    reader, got = _cases([b"Backend 1/1: CANN0\n", b"  ADD(n=1): ", frame(_call(1)), b"OK\n",
                          b"  ADD(n=2): ", frame(_call(2)), b"FAIL\n"])
    assert [x.calls for x in got.values()] == [[_call(1)], [_call(2)]]


# --- a C client of the toolkit -------------------------------------------------------------

# A test-backend-ops in miniature: `support` lists its cases, `test -o OP [-p REGEX]` runs
# them, each case's aclnnAdd calls on n + 1 elements (so a call says whose it is), its line
# printed after them with printf alone (the simulator's flush puts it in the pipe in time).
CLIENT = textwrap.dedent(r"""
    #include <regex.h>
    #include <stdio.h>
    #include <stdint.h>
    #include <stdlib.h>
    #include <string.h>
    #include <math.h>
    #include <acl/acl.h>
    #include <aclnnop/aclnn_add.h>

    static const struct { const char *op, *params, *what; } CASES[] = {
        {"ADD", "n=1", "ok"}, {"ADD", "n=2", "ns"}, {"ADD", "n=3", "fail"}, {"ADD", "n=4", "die"},
        {"ADD", "n=5", "ok"}, {"ADD", "n=6", "alias"}, {"ADD", "n=7", "unwritten"},
        {"MUL", "n=8", "ok"}, {"MUL", "n=9", "fail"}, {"MUL", "n=10", "ok"},
    };
    static aclrtStream s;

    static aclTensor *vec(void *p, int64_t n, aclDataType t) {
        int64_t d[1] = {n}, st[1] = {1};
        return aclCreateTensor(d, 1, t, st, 0, ACL_FORMAT_ND, d, 1, p);
    }
    /* out = a + b over n elements; the refusal's code, as ggml-cann's ACL_CHECK sees it */
    static int add(void *a, void *b, void *out, int64_t n, aclDataType out_type) {
        float one = 1.0f; uint64_t ws; aclOpExecutor *ex;
        aclTensor *ta = vec(a, n, ACL_FLOAT), *tb = vec(b, n, ACL_FLOAT), *to = vec(out, n, out_type);
        aclScalar *alpha = aclCreateScalar(&one, ACL_FLOAT);
        int r = aclnnAddGetWorkspaceSize(ta, tb, alpha, to, &ws, &ex);
        if (!r) r = aclnnAdd(NULL, ws, ex, s);
        if (!r) r = aclrtSynchronizeStream(s);
        aclDestroyTensor(ta); aclDestroyTensor(tb); aclDestroyTensor(to); aclDestroyScalar(alpha);
        return r;
    }
    static void die(int r) {
        fprintf(stderr, "CANN error: %s\n", aclGetRecentErrMsg());
        fprintf(stderr, "/src/ggml-cann/ggml-cann.cpp:70: CANN error\n");
        (void) r; abort();
    }
    static int run(int n, const char *what, const char *op) {   /* 1: OK */
        size_t bytes = (n + 1) * sizeof(float);
        float x[16], y[16];
        for (int i = 0; i <= n; i++) x[i] = i;
        void *a, *b;
        aclrtMalloc(&a, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
        aclrtMalloc(&b, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
        aclrtMemcpy(a, bytes, x, bytes, ACL_MEMCPY_HOST_TO_DEVICE);
        int ok = 1, r = add(a, a, b, n + 1, ACL_FLOAT);
        if (r) die(r);
        if (!strcmp(what, "fail")) {
            printf("[%s] ERR = 0.500000000 > 0.000000100 ", op);   /* a fragment, then more calls */
            if ((r = add(b, a, b, n + 1, ACL_FLOAT))) die(r);
            ok = 0;
        } else if (!strcmp(what, "die")) {
            if ((r = add(a, a, b, n + 1, ACL_INT8))) die(r);   /* refused: int8 out */
        } else if (!strcmp(what, "alias")) {
            if ((r = add(b, a, b, n + 1, ACL_FLOAT))) die(r);  /* out == self */
        } else if (!strcmp(what, "unwritten")) {
            void *c;
            aclrtMalloc(&c, bytes, ACL_MEM_MALLOC_HUGE_FIRST);
            if ((r = add(a, a, c, n, ACL_FLOAT))) die(r);     /* its last element left alone */
            aclrtMemcpy(y, bytes, c, bytes, ACL_MEMCPY_DEVICE_TO_HOST);
            for (int i = 0; i <= n && ok; i++)
                if (isnan(y[i])) { printf("[%s] NaN at index %d (CANN0=nan CPU=%f) ", op, i, 2.0 * i); ok = 0; }
            aclrtFree(c);
        }
        aclrtFree(a); aclrtFree(b);
        return ok;
    }

    int main(int argc, char **argv) {
        const char *mode = argc > 1 ? argv[1] : "test", *ops = NULL, *params = NULL;
        for (int i = 1; i + 1 < argc; i++) {
            if (!strcmp(argv[i], "-o")) ops = argv[i + 1];
            if (!strcmp(argv[i], "-p")) params = argv[i + 1];
        }
        regex_t rx;
        int bad = params && regcomp(&rx, params, REG_EXTENDED | REG_NOSUB);   /* not POSIX: none */
        aclInit(NULL);
        aclrtSetDevice(0);
        aclrtCreateStream(&s);
        printf("Testing 2 devices\n\nBackend 1/2: CANN0\n  Device description: %s\n", aclrtGetSocName());
        printf("  Device memory: 8192 MB (8192 MB free)\n\n");
        int n_ok = 0, n_run = 0;
        for (size_t k = 0; k < sizeof CASES / sizeof CASES[0]; k++) {
            if (ops && strcmp(ops, CASES[k].op)) continue;
            if (params && (bad || regexec(&rx, CASES[k].params, 0, NULL, 0))) continue;
            const char *what = CASES[k].what;
            if (!strcmp(mode, "support")) {
                printf("  %s(%s): %s\n", CASES[k].op, CASES[k].params, strcmp(what, "ns") ? "SUPPORTED" : "NOT SUPPORTED");
                continue;
            }
            if (!strcmp(what, "ns")) {
                printf("  %s(%s): not supported [CANN0] \n", CASES[k].op, CASES[k].params);
                continue;
            }
            int ok = run(atoi(CASES[k].params + 2), what, CASES[k].op);
            n_run++, n_ok += ok;
            printf("  %s(%s): %s\n", CASES[k].op, CASES[k].params, ok ? "OK" : "FAIL");
        }
        if (!strcmp(mode, "test")) printf("  %d/%d tests passed\n", n_ok, n_run);
        printf("  Backend CANN0: %s\nBackend 2/2: CPU\n  Skipping\n", n_ok == n_run ? "OK" : "FAIL");
        printf("%d/2 backends passed\n%s\n", 1 + (n_ok == n_run), n_ok == n_run ? "OK" : "FAIL");
        aclrtDestroyStream(s);
        aclrtResetDevice(0);
        return n_ok == n_run ? 0 : 1;
    }
""")


@pytest.fixture(scope="module")
def client(request, tmp_path_factory):
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    toolkit = request.getfixturevalue("toolkit")   # (conftest.py: built once, after the check)
    src = tmp_path_factory.mktemp("tbo-client") / "test-backend-ops.c"
    src.write_text(CLIENT)
    exe = src.with_suffix("")
    lib64 = toolkit / "lib64"
    subprocess.run(["cc", "-Wall", "-Werror", "-o", str(exe), str(src), "-I", str(toolkit / "include"),
                    "-L", str(lib64), "-lascendcl", "-lnnopbase", "-lopapi", "-lm", f"-Wl,-rpath,{lib64}"],
                   check=True)
    return str(exe)


def ops(*args, timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=timeout, env=env)


def results(path) -> tuple[dict, dict]:
    run = json.loads(pathlib.Path(path).read_text())
    return run, {r["name"]: r for r in run["results"]}


def sizes(r: dict) -> set:
    return {tuple(c["args"]["self"]["ne"]) for c in r["trace"]}


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_each_case_of_a_client_gets_its_own_calls(client, tmp_path, jobs):
    p = ops("tbo", client, "-o", "ADD,MUL", "--trace", "-j", jobs, "--results", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    run, got = results(tmp_path / "r.json")
    assert "hygiene" not in run
    for name, r in got.items():
        n = int(name.split("n=")[1].rstrip(")"))
        if r["status"] == "not supported":
            assert r["trace"] == [], name
        else:   # (the unwritten case's second call leaves the last element out)
            assert r["trace"][0]["args"]["self"]["ne"] == [n + 1] and sizes(r) <= {(n + 1,), (n,)}, name
    assert [c["call"] for c in got["ADD(n=3)"]["trace"]] == ["aclnnAdd", "aclnnAdd"]
    assert got["MUL(n=9)"]["status"] == "FAIL" and len(got["MUL(n=9)"]["trace"]) == 2
    # the death: its calls up to the refused one, which is its blame, shown under its line
    died = got["ADD(n=4)"]
    assert died["reason"].startswith("aborted") and [c.get("rc", 0) for c in died["trace"]] == [0, 161002]
    assert died["blame"] == "aclnnAdd (call 2 of 2) returned 161002"
    assert "> #2 aclnnAdd(self=FLOAT[5], other=FLOAT[5], alpha=1, out=INT8[5]) -> 161002" in p.stdout
    assert got["ADD(n=5)"]["status"] == "OK"   # the op went on after the death, traced as before


def test_without_trace_only_a_fail_keeps_its_calls(client, tmp_path):
    p = ops("tbo", client, "-o", "MUL", "--results", str(tmp_path / "r.json"))
    assert p.returncode == 1
    _, got = results(tmp_path / "r.json")
    assert {n: len(r["trace"]) for n, r in got.items()} == {"MUL(n=8)": 0, "MUL(n=9)": 2, "MUL(n=10)": 0}
    assert "calls on CANN0:" in p.stdout and "#2 aclnnAdd(self=FLOAT[10], other=FLOAT[10]" in p.stdout


def test_check_inputs_and_poison_reach_the_client(client, tmp_path):
    plain = tmp_path / "plain.json"
    assert ops("tbo", client, "-o", "ADD", "-p", "n=[67]", "--results", str(plain)).returncode == 0
    p = ops("tbo", client, "-o", "ADD", "-p", "n=[67]", "--check-inputs", "--poison",
            "--results", str(tmp_path / "r.json"))
    assert p.returncode == 1
    run, got = results(tmp_path / "r.json")
    assert run["hygiene"] == "poison,check-inputs"
    alias, unwritten = got["ADD(n=6)"], got["ADD(n=7)"]
    assert "overlaps self" in alias["reason"] and "(CANN_SIM_CHECK_INPUTS)" in alias["reason"]
    assert alias["blame"] == "aclnnAdd (call 2 of 2) returned 161002"
    assert unwritten["status"] == "FAIL" and unwritten["reason"].startswith("[ADD] NaN at index 7")
    # a resume must keep the modes
    p = ops("tbo", client, "-o", "ADD", "-p", "n=[67]", "--resume", str(tmp_path / "r.json"))
    assert p.returncode == 2 and "poison" in p.stderr


def test_the_modes_need_the_simulated_toolkit(tmp_path):
    fake = tmp_path / "test-backend-ops"
    fake.write_text("#!/bin/sh\nprintf 'Testing 1 devices\\n\\nBackend 1/1: CANN0\\n  Device description: "
                    "Ascend910B3\\n  ADD(n=1): SUPPORTED\\n'\n")
    fake.chmod(0o755)
    for flag in ("--trace", "--poison", "--check-inputs"):
        p = ops("tbo", str(fake), flag, "--results", str(tmp_path / "r.json"))
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert f"{flag}: test-backend-ops does not run on the simulated toolkit" in p.stderr
    assert not (tmp_path / "r.json").exists()


# --- ggml-cann's test-backend-ops (make ggml-cann) ----------------------------------------------

needs_ggml_cann = pytest.mark.skipif(not GGML_CANN.exists(), reason="no ggml-cann build (make ggml-cann)")


@needs_ggml_cann
def test_ggml_cann_deaths_show_the_refused_call(tmp_path):
    """docs/upstream/swiglu-strided-view.md and rope-cache-overrun.md, under their died lines."""
    p = ops("tbo", str(GGML_CANN), "-o", "SWIGLU,ROPE", "-j", "2", "-p", r"SWIGLU=type=f16,ne_a=\[128,2,2,2\],v=1",
            "-p", r"ROPE=ne_a=\[256,8,512,1\]", "--results", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    _, got = results(tmp_path / "r.json")
    died = {r["op"]: r for r in got.values() if r["status"] == "FAIL"}
    # (a build with -g, as make ggml-cann makes now, names the call's line: test_callsite_ggml.py)
    assert re.fullmatch(r"aclnnSwiGlu \(call 1 of 1\)( in ggml_cann_swiglu, aclnn_ops\.cpp:\d+)? returned 161002",
                        died["SWIGLU"]["blame"]), died["SWIGLU"]["blame"]
    assert died["SWIGLU"]["trace"][-1]["args"]["x"]["strides"] == [768, 384, 1]
    assert died["ROPE"]["blame"].startswith("aclnnRepeat") and "not inside one live device allocation" in \
        died["ROPE"]["trace"][-1]["error"]
    assert "> #1 aclnnSwiGlu(x=FLOAT16[4,2,128]/[768,384,1], dim=2, out=FLOAT16[4,2,64]) -> 161002" in p.stdout


@needs_ggml_cann
def test_ggml_cann_add_writes_out_over_self_under_check_inputs(tmp_path):
    """ggml-cann 0.25.3's fused ADD chain (nf=16, an unlisted whole-graph case) adds into dst
    with aclnnAdd(out == self): refused under --check-inputs, the call under the death."""
    p = ops("tbo", str(GGML_CANN), "-o", "ADD", "-p", "nf=16", "--check-inputs", "--results", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    run, got = results(tmp_path / "r.json")
    assert run["hygiene"] == "check-inputs"
    (died,) = [r for r in got.values() if r["status"] == "FAIL"]
    call = died["trace"][-1]
    assert call["call"] == "aclnnAdd" and call["args"]["out"]["addr"] == call["args"]["self"]["addr"]
    assert call["args"]["self"]["ne"] == [3, 4, 5, 16] and "CANN_SIM_CHECK_INPUTS" in call["error"]
