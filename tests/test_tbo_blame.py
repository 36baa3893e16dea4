"""The numeric blame of `ops tbo` (cli/engine/tbo_replay.py) on a small C client of the
simulated toolkit, compiled here with -g: a FAIL by a check is run again alone with each
call evaluated in float64 in the client's process; a precision fault planted in the
simulator (CANN_SIM_FAULT) is named, a wrong argument in the client is "every call
computed what it was asked", with the call's line."""
from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from cannops.backend.trace import replayed
from cannops.cli.engine.results import FAIL, CaseResult
from cannops.cli.engine.tbo_replay import MAX_PER_OP, Replayer, wanted
from tests.test_callsite import compile_client
from tests.test_tbo_trace import OPS

# SOFT_MAX: aclnnSoftmax on 64 floats, checked in double (NMSE, as test-backend-ops);
# SCALE: y = x * 0.5 asked of aclnnMuls with 1.5 (the client's own logic fault)
CLIENT = textwrap.dedent(r"""
    #include <stdio.h>
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    #include <acl/acl.h>
    #include <aclnnop/aclnn_softmax.h>
    #include <aclnnop/aclnn_mul.h>

    #define N 64
    static aclrtStream s;
    static aclTensor *vec(void *p) {
        int64_t d[1] = {N}, st[1] = {1};
        return aclCreateTensor(d, 1, ACL_FLOAT, st, 0, ACL_FORMAT_ND, d, 1, p);
    }
    static void softmax(aclTensor *x, aclTensor *y) {
        uint64_t ws; aclOpExecutor *ex;
        aclnnSoftmaxGetWorkspaceSize(x, 0, y, &ws, &ex);   /* SOFTMAX */
        aclnnSoftmax(NULL, ws, ex, s);
    }
    static void scale(aclTensor *x, aclTensor *y, float v) {
        uint64_t ws; aclOpExecutor *ex;
        aclScalar *k = aclCreateScalar(&v, ACL_FLOAT);
        aclnnMulsGetWorkspaceSize(x, k, y, &ws, &ex);   /* MULS */
        aclnnMuls(NULL, ws, ex, s);
        aclDestroyScalar(k);
    }
    static int run(const char *op) {
        float x[N], y[N]; double want[N], sum = 0, num = 0, den = 0;
        for (int i = 0; i < N; i++) x[i] = (float) sin(i * 0.7) * 3.0f;
        void *a, *b;
        aclrtMalloc(&a, sizeof x, ACL_MEM_MALLOC_HUGE_FIRST);
        aclrtMalloc(&b, sizeof x, ACL_MEM_MALLOC_HUGE_FIRST);
        aclrtMemcpy(a, sizeof x, x, sizeof x, ACL_MEMCPY_HOST_TO_DEVICE);
        aclTensor *ta = vec(a), *tb = vec(b);
        if (!strcmp(op, "SOFT_MAX")) {
            softmax(ta, tb);
            for (int i = 0; i < N; i++) sum += exp((double) x[i]);
            for (int i = 0; i < N; i++) want[i] = exp((double) x[i]) / sum;
        } else {
            scale(ta, tb, 1.5f);   /* PLANTED: the case asks for 0.5 */
            for (int i = 0; i < N; i++) want[i] = x[i] * 0.5;
        }
        aclrtSynchronizeStream(s);
        aclrtMemcpy(y, sizeof y, b, sizeof y, ACL_MEMCPY_DEVICE_TO_HOST);
        for (int i = 0; i < N; i++) num += (y[i] - want[i]) * (y[i] - want[i]), den += want[i] * want[i];
        aclDestroyTensor(ta); aclDestroyTensor(tb); aclrtFree(a); aclrtFree(b);
        if (num / den > 1e-7) { printf("[%s] ERR = %.9f > 0.000000100 ", op, num / den); return 0; }
        return 1;
    }
    int main(int argc, char **argv) {
        const char *mode = argc > 1 ? argv[1] : "test", *ops = NULL;
        static const char *CASES[] = {"SOFT_MAX", "SCALE"};
        for (int i = 1; i + 1 < argc; i++) if (!strcmp(argv[i], "-o")) ops = argv[i + 1];
        aclInit(NULL); aclrtSetDevice(0); aclrtCreateStream(&s);
        printf("Testing 2 devices\n\nBackend 1/2: CANN0\n  Device description: %s\n", aclrtGetSocName());
        printf("  Device memory: 8192 MB (8192 MB free)\n\n");
        int bad = 0;
        for (int k = 0; k < 2; k++) {
            if (ops && strcmp(ops, CASES[k])) continue;
            if (!strcmp(mode, "support")) { printf("  %s(n=64): SUPPORTED\n", CASES[k]); continue; }
            int ok = run(CASES[k]);
            bad += !ok;
            printf("  %s(n=64): %s\n", CASES[k], ok ? "OK" : "FAIL");
        }
        printf("  Backend CANN0: %s\nBackend 2/2: CPU\n  Skipping\n", bad ? "FAIL" : "OK");
        printf("%d/2 backends passed\n%s\n", 2 - !!bad, bad ? "FAIL" : "OK");
        aclrtDestroyStream(s); aclrtResetDevice(0);
        return bad != 0;
    }
""")


def _line(mark: str) -> int:
    return next(i for i, s in enumerate(CLIENT.splitlines(), 1) if mark in s)


@pytest.fixture(scope="module")
def client(request, tmp_path_factory):
    return compile_client(request, tmp_path_factory, CLIENT, "tbo-blame")


def tbo(client, tmp_path, *args, fault=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    if fault:
        env["CANN_SIM_FAULT"] = fault
    p = subprocess.run([*OPS, "tbo", client, *args, "--results", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=300, env=env)
    got = {r["op"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    return p, got


def test_a_precision_fault_in_the_simulator_is_named(client, tmp_path):
    p, got = tbo(client, tmp_path, "-o", "SOFT_MAX")
    assert p.returncode == 0 and got["SOFT_MAX"]["status"] == "OK", p.stdout   # no fault: it passes
    p, got = tbo(client, tmp_path, "-o", "SOFT_MAX", fault="softmax-bf16")
    r = got["SOFT_MAX"]
    assert p.returncode == 1 and r["status"] == "FAIL", p.stdout
    assert r["blame"].startswith(f"aclnnSoftmax (call 1 of 1) in softmax, test-backend-ops.c:{_line('SOFTMAX')} "
                                 "out of tolerance (own NMSE ")
    own = r["trace"][0]["own_nmse"]
    # BF16's rounding (8 bits of mantissa), far above its FLOAT output's own
    assert 1e-7 < own < 1e-4 and r["trace"][0]["floor_nmse"] < 1e-12
    assert f"> #1 aclnnSoftmax(self=FLOAT[64], dim=0, out=FLOAT[64]) own NMSE {own:.3g}" in p.stdout


def test_a_wrong_argument_is_every_call_computed_what_it_was_asked(client, tmp_path):
    p, got = tbo(client, tmp_path, "-o", "SCALE")
    r = got["SCALE"]
    assert r["status"] == "FAIL" and r["blame"].startswith("every call computed what it was asked"), r
    assert r["blame"].endswith("the fault is in the calls' arguments or their order")
    assert f"aclnnMuls (call 1 of 1) in scale, test-backend-ops.c:{_line('MULS')}" in r["blame"]
    assert r["trace"][0]["args"]["other"]["scalar"] == 1.5 and r["trace"][0]["own_nmse"] < 1e-12
    assert "#1 aclnnMuls(self=FLOAT[64], other=1.5, out=FLOAT[64]) own NMSE" in p.stdout


def test_a_bad_fault_name_is_refused(client, tmp_path):
    p = subprocess.run([client, "test"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "CANN_SIM_FAULT": "no-such"})
    assert "CANN_SIM_FAULT='no-such' is not one of softmax-bf16" in p.stdout + p.stderr


def test_only_a_fail_by_a_check_is_run_again():
    check = CaseResult(device="CANN0", op="SCALE", params="n=1", status=FAIL, reason="[SCALE] ERR = 1 > 0",
                       metric="ERR", error=1.0, trace=[{"call": "aclnnMuls", "rc": 0}])
    assert wanted(True, check, False)
    assert not wanted(False, check, False)   # not on the simulator
    assert not wanted(True, check, True)     # a death
    refused = CaseResult(device="CANN0", op="SCALE", params="n=1", status=FAIL, reason="[SCALE] ERR = 1 > 0",
                         metric="ERR", trace=[{"call": "aclnnMuls", "rc": 161002}])
    assert not wanted(True, refused, False)


def test_an_op_replays_its_first_fails_only():
    replayer, runs = Replayer(True), []

    def rerun(env):
        runs.append(env)
        return None, 1
    for k in range(MAX_PER_OP + 2):
        r = CaseResult(device="CANN0", op="SCALE", params=f"n={k}", status=FAIL, reason="[SCALE] ERR = 1 > 0",
                       metric="ERR", error=1.0, trace=[{"call": "aclnnMuls", "rc": 0}])
        r = replayer(r, False, rerun)
        assert r.blame.startswith("not replayed: " + ("its rerun alone printed no line" if k < MAX_PER_OP else
                                                       f"{MAX_PER_OP} FAILs of SCALE were already"))
    assert runs == [{"CANN_SIM_BLAME": "1"}] * MAX_PER_OP


def test_a_replay_record_goes_to_the_call_it_names():
    calls = [{"call": "aclnnMuls", "i": 3}, {"call": "aclrtMemcpyAsync"}, {"call": "aclnnSoftmax", "i": 5}]
    replayed(calls, {"replay": 5, "own_nmse": 0.25, "floor_nmse": 1e-8, "junk": 1})
    replayed(calls, {"replay": 9, "own_nmse": 1.0})
    replayed(calls, {"replay": "3", "own_nmse": 1.0})
    assert calls[2] == {"call": "aclnnSoftmax", "i": 5, "own_nmse": 0.25, "floor_nmse": 1e-8}
    assert "own_nmse" not in calls[0]
