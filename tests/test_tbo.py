"""`ops tbo BINARY` against a stand-in test-backend-ops that prints the real console forms of
ggml 0.25.3 (tests/test-backend-ops.cpp, console_printer and test_case::eval): OK, not
supported, a FAIL led by each of its checks (ERR, NaN, inf, sentinel), an allocation that
prints no case line, an abort with its GGML_ASSERT and backtrace, the simulator's refusal;
the support mode that lists the cases (fused ones left out); the summary lines."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import xml.etree.ElementTree as ET

import pytest

from _proc import cmdline, proc_stats
from cannops.cli.engine import case_statuses, is_death, load_run, log_processes
from cannops.cli.engine.tbo_console import Reader, death_story
from _ops import OPS, ops


# (op, params, what it does, listed by support mode)
CASES = [
    ["ABS", "type=f32,v=0", "ok", True],
    ["ABS", "type=f16,v=0", "ok", True],
    ["GET_ROWS", "type=f32,v=0", "ok", True],
    ["GET_ROWS", "type=q8_0,v=0", "err", True],
    ["GET_ROWS", "type=q8_0,v=1", "abort", True],
    ["GET_ROWS", "type=q4_1,v=0", "ns", True],
    ["GET_ROWS", "type=f16,v=0", "nan", True],
    ["GET_ROWS", "type=bf16,v=0", "ok", True],
    ["GET_ROWS", "type=f32,v=0,nf=2", "ok", False],   # a whole-graph case under the op's name
    ["MUL", "type=f32,a=0", "inf", True],
    ["MUL", "type=f32,a=1", "sentinel", True],
    ["MUL", "type=f16,a=0", "refused", True],
    ["MUL", "type=f16,a=1", "alloc", True],
    ["MUL", "type=bf16,a=0", "ok", True],
    ["CPY", "type_src=f32,type_dst=q4_1", "ns", True],
    ["CPY", "type_src=f32,type_dst=q5_1", "ns", True],
    ["RMS_NORM_MUL_ADD", "type=f32,eps=0.000001", "ok", False],
    ["RMS_NORM_MUL_ADD", "type=f32,eps=0.100000", "err2", False],
    ["ADD_RMS_NORM", "type=f32,n=1", "ok", False],
    ["ADD_RMS_NORM", "type=f32,n=2", "abort", False],
    ["ADD_RMS_NORM", "type=f32,n=3", "ok", False],
    ["SCALE", "type=f32,s=1", "ok", True],
    ["SCALE", "type=f32,s=2,nf=2", "abort", False],   # dies among the listed cases, unnamed
    ["SCALE", "type=f32,s=3", "ok", True],
    ["SOFT_MAX", "type=f32,n=1", "ok", True],
    ["SOFT_MAX", "type=f32,n=2", "slow", True],
    ["SOFT_MAX", "type=f32,n=3", "ok", True],
    ["SOFT_MAX", "type=f32,n=4,nf=2", "ok", False],
]

FAKE = textwrap.dedent(r'''
    import json, os, re, sys, time
    HERE = os.path.dirname(os.path.abspath(__file__))
    CASES = json.load(open(os.path.join(HERE, "cases.json")))
    SLOW = float(os.environ.get("FAKE_SLOW", "0.2"))
    args = sys.argv[1:]
    if "--help" in args:   # a ggml from before --test-file: an unknown argument prints the usage
        print("Usage: test-backend-ops [mode] [-o <op>] [-b <backend>] [-p <params regex>]"); sys.exit(1)
    mode = args[0] if args and args[0] in ("test", "support", "perf", "grad") else "test"
    opt = lambda f: args[args.index(f) + 1] if f in args else None
    dev, ops, p = opt("-b"), opt("-o"), opt("-p")
    out = sys.stdout
    def say(s=""):
        out.write(s + "\n"); out.flush()
    GREEN, RED, END = "\x1b[1;32m", "\x1b[1;31m", "\x1b[0m"
    FRAG = {"err": "[{op}] ERR = 1.989549812 > 0.000000100 ",
            "err2": "[RMS_NORM] ERR = 0.000001000 > 0.000000100 [ADD] ERR = 0.250000000 > 0.000000100 ",
            "nan": "[{op}] NaN at index 3 (CANN0=nan CPU=1.500000) ",
            "inf": "[{op}] inf mismatch: CANN0=inf CPU=1.000000 ",
            "sentinel": "sentinel mismatch: sent_3 "}
    BT = ("libggml-base.so.0(+0x151a4)[0xffff9e6951a4]\n"
          "libggml-base.so.0(ggml_print_backtrace+0x21c)[0xffff9e69565c]\n"
          "libggml-base.so.0(ggml_abort+0x134)[0xffff9e695824]\n"
          "libggml-cann.so.0(_Z18ggml_cann_ssm_convR25ggml_backend_cann_contextP11ggml_tensor+0x414)[0xffff9e051a84]\n"
          "libggml-cann.so.0(+0x26820)[0xffff9e056820]\n"
          "libggml-base.so.0(ggml_backend_graph_compute+0x14)[0xffff9e6ab184]\n")
    sys.stderr.write("CANN-SIM refused: aclInit: only once per process\n")
    say("Testing 2 devices"); say()
    say("Backend 1/2: CANN0")
    ok = True
    if dev not in (None, "CANN0"):
        say("  Skipping")
    else:
        say("  Device description: Ascend910B1")
        say("  Device memory: 62420 MB (62055 MB free)")
        say()
        picked = [c for c in CASES if (ops is None or c[0] in ops.split(",")) and (p is None or re.search(p, c[1]))]
        n_ok = n_run = 0
        for op, params, what, listed in picked:
            head = f"  {op}({params}): "
            if mode == "support":
                if listed:
                    say(head + (f"{RED}NOT SUPPORTED{END}" if what == "ns" else f"{GREEN}SUPPORTED{END}"))
                continue
            with open(os.path.join(HERE, "ran.txt"), "a") as f:
                f.write(f"{op}({params})\n")
            if what == "ns":
                say(head + "not supported [CANN0] ")
                continue
            n_run += 1
            if what == "ok":
                say(head + f"{GREEN}OK{END}")
                n_ok += 1
            elif what == "slow":
                time.sleep(SLOW)
                say(head + f"{GREEN}OK{END}")
                n_ok += 1
            elif what == "abort":
                sys.stderr.write("/src/ggml/src/ggml-cann/aclnn_ops.cpp:3723: GGML_ASSERT(dst->ne[0] == nr) failed\n" + BT)
                sys.stderr.flush()
                os.abort()
            elif what == "refused":
                sys.stderr.write("CANN-SIM refused: aclnnMul: other's dtype BFLOAT16 is not supported\n"
                                 "CANN error: EZ1001: the simulator refused the call\n"
                                 "  current device: 0, in function ggml_cann_mul at /src/ggml-cann/aclnn_ops.cpp:120\n"
                                 "  aclnnMulGetWorkspaceSize(acl_src0, acl_src1, acl_dst, &workspaceSize, &executor)\n"
                                 "/src/ggml/src/ggml-cann/ggml-cann.cpp:68: CANN error\n" + BT)
                sys.stderr.flush()
                os.abort()
            elif what == "alloc":
                out.write("failed to allocate tensors [CANN0] ")
                ok = False
            else:
                say(FRAG[what].format(op=op) + head + f"{RED}FAIL{END}")
                ok = False
        if mode == "test":
            say(f"  {n_ok}/{n_run} tests passed")
        say("  Backend CANN0: " + (f"{GREEN}OK{END}" if ok else f"{RED}FAIL{END}"))
    say("Backend 2/2: CPU")
    say("  Skipping")
    say(f"{1 + ok}/2 backends passed")
    say(f"{GREEN}OK{END}" if ok else f"{RED}FAIL{END}")
    sys.exit(0 if ok else 1)
''')


# a test-export-graph-ops line (0.25.3): ADD of two f32 [4,2,1,1], its name
GRAPH_LINE = "2 0 4 2 1 1 16 " + "0 " * 16 + "2 0 4 2 1 1 4 16 32 32 0 4 2 1 1 4 16 32 32 ffn_out-0"


@pytest.fixture
def binary(tmp_path):
    """A build dir as `make ggml-cann` leaves it: bin/test-backend-ops and source.json."""
    build = tmp_path / "build"
    (build / "bin").mkdir(parents=True)
    exe = build / "bin" / "test-backend-ops"
    exe.write_text(f"#!{sys.executable}\n" + FAKE)
    exe.chmod(0o755)
    (build / "bin" / "cases.json").write_text(json.dumps(CASES))
    (build / "source.json").write_text(json.dumps({
        "kind": "release", "name": "llama-cpp-python==0.3.36", "ggml_version": "0.25.3", "variant": "910B",
        "soc": "Ascend910B3", "built": "2026-11-27T07:00:00Z", "cmake": {"SOC_TYPE": "Ascend910B3"}}))
    return str(exe)


def by_name(path) -> dict:
    return {r["name"]: r for r in json.loads(open(path).read())["results"]}


def ran(binary) -> list[str]:
    path = os.path.join(os.path.dirname(binary), "ran.txt")
    return open(path).read().splitlines() if os.path.exists(path) else []


# --- the console, line by line ---------------------------------------------------------------

def _read(lines):
    got = []
    reader = Reader(got.append)
    for ln in lines:
        reader.feed(ln)
    return reader, {f"{x.op}({x.params})": x.result("CANN0") for x in got}


def test_every_fail_form_and_not_supported_are_read():
    reader, r = _read([
        "Backend 1/2: CANN0", "  Device description: Ascend910B1", "  Device memory: 62420 MB (62055 MB free)", "",
        "  ABS(type=f32): \x1b[1;32mOK\x1b[0m",
        "[GET_ROWS] ERR = 1.989549812 > 0.000000100   GET_ROWS(type=q8_0): \x1b[1;31mFAIL\x1b[0m",
        "[GET_ROWS] NaN at index 3 (CANN0=nan CPU=1.500000)   GET_ROWS(type=f16): FAIL",
        "[MUL] inf mismatch: CANN0=inf CPU=1.000000   MUL(type=f32): FAIL",
        "sentinel mismatch: sent_3   MUL(type=f16): FAIL",
        "[RMS_NORM] ERR = 0.000001000 > 0.000000100 [ADD] ERR = 0.250000000 > 0.000000100   RMS_NORM_MUL_ADD(eps=0.1): FAIL",
        "  CPY(type_src=f32): not supported [CANN0] ",
        "  CPY(type_src=bf16): not supported [CPU] ",
        "  CPY(type_src=f16): not supported [CANN0, CPU] ",
        "failed to allocate tensors [CANN0]   ADD(type=f32): OK",
    ])
    info = reader.devices["CANN0"]
    assert (info.description, info.soc, info.memory_total) == ("Ascend910B1", "Ascend910B1", 62420 << 20)
    assert r["ABS(type=f32)"].status == "OK"
    err = r["GET_ROWS(type=q8_0)"]
    assert (err.status, err.error, err.threshold, err.metric) == ("FAIL", 1.989549812, 1e-7, "ERR")
    assert err.reason == "[GET_ROWS] ERR = 1.989549812 > 0.000000100"
    nan = r["GET_ROWS(type=f16)"]
    assert nan.metric == "NaN" and nan.worst[0][0] == 3 and nan.worst[0][2] == 1.5
    assert r["MUL(type=f32)"].reason == "[MUL] inf mismatch: CANN0=inf CPU=1.000000"
    assert r["MUL(type=f16)"].reason == "sentinel mismatch: sent_3"
    fused = r["RMS_NORM_MUL_ADD(eps=0.1)"]
    assert fused.error == 0.000001 and fused.reason.count("ERR =") == 2   # the first failing node's figure
    assert r["CPY(type_src=f32)"].status == "not supported" and r["CPY(type_src=f32)"].by == ""
    assert r["CPY(type_src=bf16)"].by == "CPU"   # the reference cannot do it
    assert "CANN0, CPU" in r["CPY(type_src=f16)"].reason
    # the allocation failure printed no case line: it is not the next case's
    assert r["ADD(type=f32)"].status == "OK" and reader.orphans() == ["failed to allocate tensors [CANN0]"]


def test_an_old_ggml_names_the_case_before_it_runs():
    """Before ggml's printer (2025) the name came first; stderr lines may land after it."""
    reader, r = _read(["Backend 1/1: CANN0", "  ADD(type=f32): CANN-SIM tolerated [x]: y", "OK",
                       "  ADD(type=f16): "])
    assert r["ADD(type=f32)"].status == "OK"
    assert reader.head.params == "type=f16"   # the case running when it died


def test_the_story_of_an_abort_gdb_and_glibc_backtraces():
    gdb = ["/w/ggml/src/ggml-cann/aclnn_ops.cpp:3723: GGML_ASSERT(dst->ne[0] == nr) failed",
           "#0  0x00007fa4532f1c17 in __GI___wait4 (pid=13699, stat_loc=0x0) at wait4.c:30",
           "#1  0x00007fa45379f3bb in ggml_print_backtrace () from libggml-base.so.0",
           "#2  0x00007fa45379f50e in ggml_abort () from libggml-base.so.0",
           "#3  0x00007fa45365f490 in ggml_cann_ssm_conv(ggml_backend_cann_context&, ggml_tensor*) () from x.so",
           "#4  0x00007fa4536652e7 in ggml_cann_compute_forward(ggml_backend_cann_context&, ggml_tensor*) ()"]
    assert death_story(-6, gdb) == ("aborted (killed by SIGABRT): aclnn_ops.cpp:3723: GGML_ASSERT(dst->ne[0] == nr) "
                                    "failed in ggml_cann_ssm_conv < ggml_cann_compute_forward")
    glibc = ["CANN-SIM refused: aclnnMul: no", "CANN error: EZ1001: refused",
             "/src/ggml-cann.cpp:68: CANN error", "libggml-base.so.0(ggml_abort+0x134)[0xffff9e695824]",
             "libggml-cann.so.0(_Z18ggml_cann_ssm_convR25ggml_backend_cann_contextP11ggml_tensor+0x414)[0xff]"]
    story = death_story(134, glibc).splitlines()
    assert story[0] == "aborted (exit status 134 (abort)): ggml-cann.cpp:68: CANN error in ggml_cann_ssm_conv"
    assert story[1:] == ["CANN-SIM refused: aclnnMul: no", "CANN error: EZ1001: refused"]
    assert death_story(None, [], timeout=5).startswith("timeout: still running after 5 s")
    # a build with -g (make ggml-cann): gdb names glibc's frames and gives each its line
    debug = ["/s/ggml-cann/ggml-cann.cpp:70: CANN error",
             "#0  0x00007fd785811c17 in __GI___wait4 (pid=pid@entry=21363) at ../sysdeps/unix/sysv/linux/wait4.c:30",
             "#1  0x00007fd785811b97 in __GI___waitpid (pid=pid@entry=21363) at ./posix/waitpid.c:38",
             "#2  0x00007fd785cf668b in ggml_print_backtrace () at /s/ggml.c:235",
             "#3  0x00007fd785cf67de in ggml_abort (file=0x7f \"x\", line=70, fmt=0x7f \"CANN error\") at /s/ggml.c:269",
             "#4  0x00007fd785c8fe43 in ggml_cann_error (stmt=0x7f \"aclnnCumsum\") at /s/ggml-cann.cpp:70",
             "#5  0x00007fd785c7ca06 in ggml_cann_cumsum (ctx=..., dst=dst@entry=0x55) at /s/aclnn_ops.cpp:822",
             "#6  0x00007fd785c9794d in ggml_cann_compute_forward (dst=0x55, ctx=...) at /s/ggml-cann.cpp:2014"]
    assert death_story(-6, debug) == ("aborted (killed by SIGABRT): ggml-cann.cpp:70: CANN error in ggml_cann_cumsum < "
                                      "ggml_cann_compute_forward")


# --- ops tbo ----------------------------------------------------------------------------------

def test_a_run_with_aborts_gives_results_junit_and_logs(binary, tmp_path):
    res, logs = tmp_path / "r.json", tmp_path / "logs"
    p = ops("tbo", binary, "-o", "ABS,GET_ROWS,MUL,CPY,RMS_NORM_MUL_ADD", "--results", str(res),
            "--log-dir", str(logs), "--output", "junit", "-j", "2")
    assert p.returncode == 1, p.stderr   # cases FAILed
    doc = json.loads(res.read_text())
    assert doc["mode"] == "test" and doc["catalog"] == "0.25.3"
    assert doc["source"]["ggml_version"] == "0.25.3" and doc["source"]["name"] == "llama-cpp-python==0.3.36"
    assert doc["source"]["binary"] == binary
    assert doc["devices"][0]["name"] == "CANN0" and doc["devices"][0]["soc"] == "Ascend910B1"
    r = {k: (v["status"], v["reason"].splitlines()[0] if v["reason"] else "") for k, v in by_name(res).items()}
    assert r == {
        "ABS(type=f32,v=0)": ("OK", ""), "ABS(type=f16,v=0)": ("OK", ""),
        "GET_ROWS(type=f32,v=0)": ("OK", ""),
        "GET_ROWS(type=q8_0,v=0)": ("FAIL", "[GET_ROWS] ERR = 1.989549812 > 0.000000100"),
        "GET_ROWS(type=q8_0,v=1)": ("FAIL", "aborted (killed by SIGABRT): aclnn_ops.cpp:3723: "
                                            "GGML_ASSERT(dst->ne[0] == nr) failed in ggml_cann_ssm_conv < "
                                            "ggml_backend_graph_compute"),
        "GET_ROWS(type=q4_1,v=0)": ("not supported", ""),
        "GET_ROWS(type=f16,v=0)": ("FAIL", "[GET_ROWS] NaN at index 3 (CANN0=nan CPU=1.500000)"),
        "GET_ROWS(type=bf16,v=0)": ("OK", ""),   # the op went on after the abort
        "GET_ROWS(type=f32,v=0,nf=2)": ("OK", ""),   # unlisted, after the abort: reached too
        "MUL(type=f32,a=0)": ("FAIL", "[MUL] inf mismatch: CANN0=inf CPU=1.000000"),
        "MUL(type=f32,a=1)": ("FAIL", "sentinel mismatch: sent_3"),
        "MUL(type=f16,a=0)": ("FAIL", "aborted (killed by SIGABRT): ggml-cann.cpp:68: CANN error in "
                                      "ggml_cann_ssm_conv < ggml_backend_graph_compute"),
        "MUL(type=f16,a=1)": ("FAIL", "failed to allocate tensors [CANN0]"),
        "MUL(type=bf16,a=0)": ("OK", ""),
        "CPY(type_src=f32,type_dst=q4_1)": ("not supported", ""),
        "CPY(type_src=f32,type_dst=q5_1)": ("not supported", ""),
        "RMS_NORM_MUL_ADD(type=f32,eps=0.000001)": ("OK", ""),   # fused: not listed, run by name
        "RMS_NORM_MUL_ADD(type=f32,eps=0.100000)": ("FAIL", "[RMS_NORM] ERR = 0.000001000 > 0.000000100; "
                                                             "[ADD] ERR = 0.250000000 > 0.000000100"),
    }
    refused = by_name(res)["MUL(type=f16,a=0)"]["reason"]
    assert "CANN-SIM refused: aclnnMul: other's dtype BFLOAT16 is not supported" in refused
    assert "CANN error: EZ1001" in refused and "only once per process" not in refused
    # one testcase per case; a FAIL's message is its first line
    root = ET.fromstring(p.stdout)
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("18", "8", "3")
    msgs = {tc.get("name"): tc.find("failure").get("message") for tc in root.iter("testcase")
            if tc.find("failure") is not None}
    assert "GGML_ASSERT(dst->ne[0] == nr)" in msgs["GET_ROWS(type=q8_0,v=1)"]
    # the raw console of every process of the op (all, the suspect of its death alone with the
    # rest by name, the rest after it by name, the unlisted rest)
    log = (logs / "GET_ROWS.log").read_text()
    assert log.count("Testing 2 devices") == 4 and "GGML_ASSERT(dst->ne[0] == nr) failed" in log
    # each process after its command: the first is the CI's OP.log, its abort and no case after it
    procs = log_processes(log)
    assert [cmd.split(" -p ")[0] for cmd, _ in procs] == [f"{binary} test -b CANN0 -o GET_ROWS"] * 4
    first = procs[0][1]
    assert "GGML_ASSERT(dst->ne[0] == nr) failed" in first and "type=bf16,v=0" not in first
    assert case_statuses(first, "GET_ROWS") == {"type=f32,v=0": "OK", "type=q8_0,v=0": "FAIL"}
    assert case_statuses(log, "GET_ROWS")["type=bf16,v=0"] == "OK"
    deaths = {r.name for r in load_run(str(res)).results if is_death(r)}
    assert deaths == {"GET_ROWS(type=q8_0,v=1)", "MUL(type=f16,a=0)"}


def test_the_report_against_ops_results_and_against_a_ci_report(binary, tmp_path):
    res, old = tmp_path / "r.json", tmp_path / "old.json"
    assert ops("tbo", binary, "-o", "ABS,GET_ROWS,CPY", "--results", str(res)).returncode == 1
    doc = json.loads(res.read_text())
    for r in doc["results"]:   # the earlier run: GET_ROWS passed
        if r["op"] == "GET_ROWS" and r["status"] == "FAIL":
            r["status"], r["reason"] = "OK", ""
    old.write_text(json.dumps(doc))
    p = ops("support", "--results", str(res), "--markdown", "--baseline", str(old))
    assert p.returncode == 0, p.stderr
    assert "| GET_ROWS | partial (\U0001f7e1) | fail (\u274c) |" in p.stdout
    tail = p.stdout.split("#### GET_ROWS log (partial -> fail)")[1]
    assert "GGML_ASSERT(dst->ne[0] == nr) failed in ggml_cann_ssm_conv < ggml_backend_graph_compute FAIL" in tail
    assert "CI's classification" not in p.stdout   # a results file: no classification to undo
    # a CI report: CPY (no case supported) is 🟡 there by its substring rule
    ci = tmp_path / "ci.md"
    ci.write_text("### Backend Operator Support Summary\n\n| Operator | Status |\n| --- | --- |\n"
                  "| ABS | \u2705 |\n| CPY | \U0001f7e1 |\n| GET_ROWS | \U0001f7e1 |\n\n"
                  "Tips: \u2705 supported, \U0001f7e1 partially supported, \u274c fail, \u2753 unsupported, "
                  "\U0001f50d unknown\n")
    p = ops("support", "--results", str(res), "--markdown", "--baseline", str(ci))
    changed, rule = p.stdout.split("### Operators with changed status")[1].split(
        "Not changes, the CI's classification only: ")
    assert "| GET_ROWS | partial (\U0001f7e1) | fail (\u274c) |" in changed and "CPY" not in changed
    assert rule.startswith("CPY (\U0001f7e1 there, \u2753 here) \u2014 1 op with no supported case")
    assert "| CPY | \u2753 |" in p.stdout   # the status table keeps ops' own status


def test_resume_after_a_kill_runs_only_what_was_not_done(binary, tmp_path):
    res = tmp_path / "r.json"
    journal = tmp_path / "r.json.partial.jsonl"
    proc = subprocess.Popen([*OPS, "tbo", binary, "-o", "ABS,SOFT_MAX", "--results", str(res)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, FAKE_SLOW="60"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:   # until SOFT_MAX's first case is journalled
        if journal.exists() and "SOFT_MAX(type=f32,n=1)" in journal.read_text():
            break
        time.sleep(0.1)
    proc.kill()
    proc.wait()
    for pid, _ in list(proc_stats()):   # its test-backend-ops (a session of its own) goes too
        if binary in cmdline(pid):
            os.kill(pid, signal.SIGKILL)
    assert not res.exists()
    before = ran(binary)
    assert before == ["ABS(type=f32,v=0)", "ABS(type=f16,v=0)", "SOFT_MAX(type=f32,n=1)", "SOFT_MAX(type=f32,n=2)"]
    p = ops("tbo", binary, "-o", "ABS,SOFT_MAX", "--resume", str(res))
    assert p.returncode == 0, p.stderr
    assert ran(binary)[len(before):] == ["SOFT_MAX(type=f32,n=2)", "SOFT_MAX(type=f32,n=3)",
                                         "SOFT_MAX(type=f32,n=4,nf=2)"]
    r = by_name(res)
    assert len(r) == 6 and all(x["status"] == "OK" for x in r.values())
    assert not journal.exists()
    # another selection is not resumed
    p = ops("tbo", binary, "-o", "ABS", "--resume", str(res))
    assert p.returncode == 2 and "another selection" in p.stderr


def test_an_interrupt_keeps_what_was_computed(binary, tmp_path):
    res = tmp_path / "r.json"
    proc = subprocess.Popen([*OPS, "tbo", binary, "-o", "ABS,SOFT_MAX", "--results", str(res)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, FAKE_SLOW="60"))
    journal = tmp_path / "r.json.partial.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and "n=1" in journal.read_text()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(res.read_text())
    assert doc["interrupted"] is True
    assert sorted(r["name"] for r in doc["results"]) == ["ABS(type=f16,v=0)", "ABS(type=f32,v=0)",
                                                         "SOFT_MAX(type=f32,n=1)"]
    assert not any(binary in cmdline(pid) for pid, _ in proc_stats())   # its process is gone


def test_a_case_over_the_time_limit_fails_and_the_op_goes_on(binary, tmp_path):
    res = tmp_path / "r.json"
    p = ops("tbo", binary, "-o", "SOFT_MAX", "--timeout", "3", "--results", str(res), env={"FAKE_SLOW": "60"})
    assert p.returncode == 1
    r = by_name(res)
    assert [r[f"SOFT_MAX(type=f32,n={n})"]["status"] for n in (1, 2, 3)] == ["OK", "FAIL", "OK"]
    assert r["SOFT_MAX(type=f32,n=4,nf=2)"]["status"] == "OK"
    assert r["SOFT_MAX(type=f32,n=2)"]["reason"].startswith("timeout: still running after 3 s")


def test_shards_merge_into_the_whole_run(binary, tmp_path):
    whole, a, b, merged = (tmp_path / f"{n}.json" for n in ("whole", "a", "b", "merged"))
    sel = ["-o", "ABS,GET_ROWS,MUL,CPY"]
    ops("tbo", binary, *sel, "--results", str(whole))
    ops("tbo", binary, *sel, "--shard", "1/2", "--results", str(a))
    ops("tbo", binary, *sel, "--shard", "2/2", "--results", str(b))
    assert by_name(a).keys().isdisjoint(by_name(b).keys()) and by_name(a) and by_name(b)
    p = ops("merge", str(a), str(b), "--out", str(merged))
    assert p.returncode == 0, p.stderr
    strip = lambda d: {k: (v["status"], v["index"]) for k, v in d.items()}
    assert strip(by_name(merged)) == strip(by_name(whole))


def test_an_unlisted_op_stops_at_an_abort_it_cannot_name(binary, tmp_path):
    res = tmp_path / "r.json"
    p = ops("tbo", binary, "-o", "ADD_RMS_NORM", "--results", str(res))
    assert p.returncode == 1
    r = by_name(res)
    assert list(r) == ["ADD_RMS_NORM(type=f32,n=1)", "ADD_RMS_NORM(#2)"]
    assert ran(binary) == ["ADD_RMS_NORM(type=f32,n=1)", "ADD_RMS_NORM(type=f32,n=2)"]   # no further
    assert "GGML_ASSERT" in r["ADD_RMS_NORM(#2)"]["reason"] and "no name" in r["ADD_RMS_NORM(#2)"]["reason"]


def test_a_death_among_the_listed_cases_is_not_laid_on_the_next_one_that_passes_alone(binary, tmp_path):
    """Test mode prints a case's line after its calls and runs unlisted whole-graph cases among
    the listed ones: a death without a line is only suspected of the next listed case, which
    runs alone; it passes there, so the death is an unnamed unlisted case's, recorded once."""
    res = tmp_path / "r.json"
    p = ops("tbo", binary, "-o", "SCALE", "--results", str(res))
    assert p.returncode == 1, p.stderr
    r = by_name(res)
    assert {k: v["status"] for k, v in r.items()} == {
        "SCALE(type=f32,s=1)": "OK", "SCALE(type=f32,s=3)": "OK", "SCALE(#3)": "FAIL"}
    assert "GGML_ASSERT" in r["SCALE(#3)"]["reason"]
    assert "laid first on type=f32,s=3, which printed its line when run alone" in r["SCALE(#3)"]["reason"]
    # the whole op, then the suspect alone, then the unlisted rest (which dies again, not recorded twice)
    assert ran(binary) == ["SCALE(type=f32,s=1)", "SCALE(type=f32,s=2,nf=2)", "SCALE(type=f32,s=3)",
                           "SCALE(type=f32,s=2,nf=2)"]


def test_require_clean(binary):
    assert ops("tbo", binary, "-o", "CPY").returncode == 0
    p = ops("tbo", binary, "-o", "CPY", "--require-clean")
    assert p.returncode == 1 and "CPY printed no OK case" in p.stderr


def test_a_whole_run_finds_every_op_and_the_fused_ones(binary, tmp_path):
    res = tmp_path / "r.json"
    ops("tbo", binary, "--results", str(res), "-j", "2")
    assert {r["op"] for r in by_name(res).values()} == {c[0] for c in CASES}


def test_a_cases_file_runs_exactly_its_cases_and_says_which_the_binary_lacks(binary, tmp_path):
    """ops tbo --cases NAMES: each name selected by an exact params regex (ggml of any
    version reads it), an abort isolated as with -o, the fused case run by name, and a
    name off the binary's grid (a model's own shape) a result that says it was not run."""
    names = ["GET_ROWS(type=f32,v=0)", "GET_ROWS(type=q8_0,v=1)", "GET_ROWS(type=bf16,v=0)",
             "ABS(type=f32,v=7)", "RMS_NORM_MUL_ADD(type=f32,eps=0.000001)", "MUL(type=bf16,a=0)"]
    cases, res = tmp_path / "model.cases", tmp_path / "r.json"
    cases.write_text("# from a model\n" + "\n".join(f"{n}\t# x2" for n in names) + "\n")
    p = ops("tbo", binary, "--cases", str(cases), "--results", str(res))
    assert p.returncode == 1, p.stderr   # the abort
    r = {k: (v["status"], v["reason"].splitlines()[0] if v["reason"] else "") for k, v in by_name(res).items()}
    assert set(r) == set(names)
    assert r["GET_ROWS(type=q8_0,v=1)"][0] == "FAIL" and r["GET_ROWS(type=bf16,v=0)"] == ("OK", "")
    assert r["RMS_NORM_MUL_ADD(type=f32,eps=0.000001)"] == ("OK", "") and r["MUL(type=bf16,a=0)"] == ("OK", "")
    assert r["ABS(type=f32,v=7)"] == ("skipped", "not run: test-backend-ops has no such case (its support mode "
                                                 "does not list it and its test mode printed no line for it)")
    assert sorted(set(ran(binary))) == sorted(n for n in names if n != "ABS(type=f32,v=7)")
    # -p narrows the file's names; resuming checks the same selection
    p = ops("tbo", binary, "--cases", str(cases), "-p", "GET_ROWS=bf16", "--results", str(tmp_path / "p.json"))
    assert p.returncode == 1 and "ops: 1 case not run (--allow-not-run" in p.stderr, p.stderr   # ABS(v=7)
    p = ops("tbo", binary, "--cases", str(cases), "-p", "GET_ROWS=bf16", "--results", str(tmp_path / "p.json"),
            "--allow-not-run")
    assert p.returncode == 0, p.stderr
    assert "GET_ROWS(type=q8_0,v=1)" not in by_name(tmp_path / "p.json")
    assert "GET_ROWS(type=bf16,v=0)" in by_name(tmp_path / "p.json")


@pytest.mark.parametrize("args, message", [
    (["tbo", "{bin}", "--cases", "{graph}"], "does not take --test-file (its usage does not list it)"),
    (["tbo", "{bin}", "--cases", "{names}", "-o", "ABS"], "--cases names the cases: it cannot go with -o"),
    (["tbo", "{bin}", "--cases", "{names}", "-p", "nothing"], "no case selected from --cases"),
    (["tbo", "{bin}", "--cases", "{bad_graph}"], "line 2: not a test-export-graph-ops line"),
    (["tbo", "/no/such/binary"], "/no/such/binary: no such file"),
    (["tbo", "{dir}"], "is a directory"),
    (["tbo", "{noexec}"], "is not executable"),
    (["tbo", "{bin}", "-o", "add"], "ops tbo takes op names"),
    (["tbo", "{bin}", "-o", "ADDD"], "unknown op 'ADDD'"),
    (["tbo", "{bin}", "-b", "CUDA0"], "has no device CUDA0 (it has CANN0, CPU)"),
    (["tbo", "{bin}", "-p", "GET_ROWS=("], "bad -p regex"),
    (["tbo", "{bin}", "--shard", "3/2"], "bad --shard"),
    (["tbo", "{bin}", "-j", "0"], "-j must be at least 1"),
    (["tbo", "{bin}", "--timeout", "0"], "--timeout must be a positive number"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_case(binary, tmp_path, args, message):
    noexec, graph, bad_graph, names = (tmp_path / n for n in ("noexec", "graph.txt", "bad.txt", "names.cases"))
    noexec.write_text("")
    graph.write_text(GRAPH_LINE + "\n")
    bad_graph.write_text(GRAPH_LINE + "\n1 2 3\n")
    names.write_text("ABS(type=f32,v=0)\n")
    args = [a.format(dir=tmp_path, noexec=noexec, bin=binary, graph=graph, bad_graph=bad_graph, names=names)
            for a in args]
    res = tmp_path / "r.json"
    p = ops(*args, "--results", str(res))
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not res.exists() and not ran(binary)


def test_only_a_report_by_the_ci_rule_has_changes_set_apart(tmp_path):
    """A markdown baseline with a ❓ is not by the CI's rule (it never gives one): its
    changes are all changes; without one, those its rule explains are set apart."""
    from cannops.cli.engine.results import CaseResult, DeviceInfo, Run
    from cannops.cli.report import load_baseline, markdown_report
    run = Run(mode="test", devices=[DeviceInfo("CANN0")], results=[
        CaseResult("CANN0", "CPY", "a", "not supported", index=0), CaseResult("CANN0", "ABS", "a", "OK", index=1)])
    table = "### Backend Operator Support Summary\n\n| Operator | Status |\n| --- | --- |\n"
    ours, ci = tmp_path / "ours.md", tmp_path / "ci.md"
    ours.write_text(table + "| CPY | \U0001f7e1 |\n| ABS | \u2753 |\n")
    ci.write_text(table + "| CPY | \U0001f7e1 |\n| ABS | \u2705 |\n")
    text = markdown_report(run, load_baseline(str(ours)))
    assert "| CPY | partial (\U0001f7e1) | unsupported (\u2753) |" in text and "CI's classification" not in text
    text = markdown_report(run, load_baseline(str(ci)))
    assert text.split("Not changes, the CI's classification only: ")[1].startswith("CPY (")
    assert "No operator changed status." in text
