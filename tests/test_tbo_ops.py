"""bench/tbo_ops.py, the op-by-op runner of test-backend-ops, against a stand-in binary
that prints test-backend-ops' line shapes: a FAIL line led by the failed check, a case
that aborts the process with nothing printed, and the support-mode listing the runner
uses to name the case that died."""
import importlib.util
import json
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent

# The stand-in's cases of op GET_ROWS, in enumeration order, with what each does.
CASES = {"type=f32,v=0": "OK", "type=q8_0,v=0": "FAIL", "type=q8_0,v=1": "abort",
         "type=q4_1,v=0": "not supported", "type=f16,v=0": "OK"}
SLOW = {"type=f32,v=0": "OK", "type=f16,v=0": "hang", "type=bf16,v=0": "OK",
        "type=q8_0,v=0": "hang", "type=q4_0,v=0": "OK"}

FAKE = textwrap.dedent("""\
    import os, re, sys, time
    CASES = eval(os.environ["FAKE_CASES"])
    args = sys.argv[1:]
    if args == ["--list-ops"]:
        print("Available ops:\\n  GET_ROWS"); sys.exit(0)
    mode, p = args[0], (args[args.index("-p") + 1] if "-p" in args else ".")
    picked = [c for c in CASES if re.search(p, c)]
    for c in picked:
        what = CASES[c]
        if mode == "support":
            print(f"  GET_ROWS({c}): \\x1b[1;32mOK\\x1b[0m" if what != "not supported"
                  else f"  GET_ROWS({c}): not supported [CANN0]")
        elif what == "hang":
            time.sleep(60)
        elif what == "abort":
            sys.stdout.flush(); sys.stderr.write("CANN error: aclnnSomething\\n"); sys.exit(134)
        elif what == "crash":     # its name printed, then a signal (test-backend-ops' order)
            print(f"  GET_ROWS({c}): ", end="", flush=True); os.kill(os.getpid(), 11)
        elif what == "FAIL":
            print(f"[GET_ROWS] ERR = 1.989549812 > 0.000000100   GET_ROWS({c}): \\x1b[1;31mFAIL\\x1b[0m")
        else:
            print(f"  GET_ROWS({c}): {what}" + (" [CANN0]" if what == "not supported" else ""), flush=True)
    print("  Backend CANN0: OK\\n  3/3 tests passed")
    sys.exit(1 if any(CASES[c] == "FAIL" for c in picked) else 0)
""")


def _runner():
    spec = importlib.util.spec_from_file_location("tbo_ops", ROOT / "bench" / "tbo_ops.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fake(tmp_path, monkeypatch, cases=CASES):
    monkeypatch.setenv("FAKE_CASES", repr(cases))
    script = tmp_path / "test-backend-ops"
    script.write_text(f"#!{sys.executable}\n" + FAKE)
    script.chmod(0o755)
    return str(script)


def test_prefixed_fail_lines_and_the_aborting_case_are_both_counted(tmp_path, monkeypatch):
    r = _runner().run_op(_fake(tmp_path, monkeypatch), "CANN0", "GET_ROWS", timeout=60)
    assert r["cases"] == {"type=f32,v=0": "OK", "type=q8_0,v=0": "FAIL", "type=q8_0,v=1": "FAIL",
                          "type=q4_1,v=0": "not supported", "type=f16,v=0": "OK"}
    # the death is blamed on the case that printed nothing, not on the FAIL before it
    assert [d["case"] for d in r["deaths"]] == ["type=q8_0,v=1"]
    assert r["counts"] == {"OK": 2, "not supported": 1, "FAIL": 2, "skipped": 0}


def test_require_clean_and_the_json_report(tmp_path, monkeypatch):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "tbo_ops.py"), _fake(tmp_path, monkeypatch),
                           "--json", str(out), "--require-clean"], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "2 OK, 1 not supported, 2 FAIL; died: 1 op(s)" in proc.stdout
    assert json.loads(out.read_text())["ops"][0]["counts"]["FAIL"] == 2


def test_a_process_out_of_time_goes_on_and_only_a_case_alone_over_it_fails(tmp_path, monkeypatch):
    """The op's process is killed at the limit: cases that were still finishing are not
    to blame (the rest runs in chunks); a case that alone outlasts the limit fails."""
    r = _runner().run_op(_fake(tmp_path, monkeypatch, SLOW), "CANN0", "GET_ROWS", timeout=1)
    assert r["cases"] == {"type=f32,v=0": "OK", "type=f16,v=0": "FAIL", "type=bf16,v=0": "OK",
                          "type=q8_0,v=0": "FAIL", "type=q4_0,v=0": "OK"}
    assert [(d["rc"], d["case"]) for d in r["deaths"]] == [("timeout", "type=f16,v=0"),
                                                          ("timeout", "type=q8_0,v=0")]


def test_a_crash_after_the_case_name_is_that_case(tmp_path, monkeypatch):
    """A process killed by a signal after printing "  OP(params): ": that case died, not
    the next one (the replay's transient SIGSEGVs blamed two cases before)."""
    cases = {"type=f32,v=0": "OK", "type=f16,v=0": "crash", "type=bf16,v=0": "OK"}
    r = _runner().run_op(_fake(tmp_path, monkeypatch, cases), "CANN0", "GET_ROWS", timeout=60)
    assert r["cases"] == {"type=f32,v=0": "OK", "type=f16,v=0": "FAIL", "type=bf16,v=0": "OK"}
    assert [(d["case"], d["rc"]) for d in r["deaths"]] == [("type=f16,v=0", -11)]
