"""`ops tbo` on a console and files it does not control (issue 43): a binary that prints a
name twice, says FAIL only in its summary or its exit status, leaves cases unrun, prints
lines built to make a reader quadratic, frames records that are no records, sleeps in its
listing, or outlives an `ops tbo` killed; a --log-dir holding others' files; --trace on a
resumed run made without it. Each test's stand-in test-backend-ops is a small script
driven by a spec.json beside it."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from cannops.cli.engine import log_processes

OPS = [sys.executable, "-m", "cannops.cli.main"]

FAKE = textwrap.dedent(r'''
    import json, os, re, sys, time
    HERE = os.path.dirname(os.path.abspath(__file__))
    spec = json.load(open(os.path.join(HERE, "spec.json")))
    args = sys.argv[1:]
    mode = args[0] if args and args[0] in ("test", "support") else "test"
    opt = lambda f: args[args.index(f) + 1] if f in args else None
    ops, p = opt("-o"), opt("-p")
    with open(os.path.join(HERE, "pids.txt"), "a") as f:
        f.write(f"{mode} {os.getpid()}\n")
    def say(s=""):
        sys.stdout.write(s + "\n"); sys.stdout.flush()
    if os.environ.get("CANN_SIM_TRACE") and spec.get("simulated"):
        say("\x1ecann-sim " + json.dumps({"simulator": "CANN-SIM", "soc": "Ascend910B3"}))
    if mode == "support":
        time.sleep(spec.get("support_sleep", 0))
    say("Backend 1/1: CANN0")
    say("  Device description: Ascend910B3")
    say("  Device memory: 100 MB (100 MB free)")
    failed = False
    for op, params, what, listed in spec["cases"]:
        if (ops and op not in ops.split(",")) or (p and not re.search(p, params)):
            continue
        head = f"  {op}({params}): "
        if mode == "support":
            if listed:
                say(head + "SUPPORTED")
            continue
        if what == "ok":
            say(head + "OK")
        elif what == "fail":
            say(f"[{op}] ERR = 0.5 > 0.0000001 " + head + "FAIL")
            failed = True
        elif what == "abort":
            os.abort()
        elif what == "ok_then_abort":   # its line, then the process dies on its way out
            say(head + "OK")
            os.abort()
        elif what == "sleep":
            time.sleep(120)
        elif what.startswith("raw:"):   # the console's own bytes (frames, odd lines)
            sys.stdout.write(what[4:]); sys.stdout.flush()
        # "silent": no line at all (a case not run)
    failed = failed or spec.get("summary") == "FAIL"
    say("  Backend CANN0: " + ("FAIL" if failed else "OK"))
    say(f"{0 if failed else 1}/1 backends passed")
    say("FAIL" if failed else "OK")
    sys.exit(spec.get("exit", 1 if failed else 0))
''')


def make_binary(folder, cases, **spec) -> str:
    folder.mkdir(exist_ok=True)
    exe = folder / "test-backend-ops"
    exe.write_text(f"#!{sys.executable}\n" + FAKE)
    exe.chmod(0o755)
    (folder / "spec.json").write_text(json.dumps({"cases": cases, **spec}))
    return str(exe)


def ops(*args, timeout=120):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=timeout)


def results(path) -> dict:
    return {r["name"]: r for r in json.loads(open(path).read())["results"]}


def pids(binary, mode) -> list[int]:
    path = os.path.join(os.path.dirname(binary), "pids.txt")
    if not os.path.exists(path):
        return []
    return [int(pid) for m, pid in (ln.split() for ln in open(path).read().splitlines()) if m == mode]


def alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie has ended: its parent just has not reaped it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate, seconds=30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# --- what a case is, and what the run's exit status says ------------------------------------

def test_a_name_printed_twice_keeps_its_worst_status_and_both_lines(tmp_path):
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True], ["ADD", "n=2", "ok", True],
                                          ["ADD", "n=1", "fail", False]])   # the catalog's name again
    res = tmp_path / "r.json"
    p = ops("tbo", binary, "-o", "ADD", "--results", str(res))
    assert p.returncode == 1, p.stderr
    r = results(res)
    assert sorted(r) == ["ADD(n=1)", "ADD(n=2)"]
    assert r["ADD(n=1)"]["status"] == "FAIL" and r["ADD(n=2)"]["status"] == "OK"
    assert r["ADD(n=1)"]["reason"].startswith("[ADD] ERR = 0.5 > 0.0000001")
    assert "printed twice: the other line OK" in r["ADD(n=1)"]["reason"]


def test_the_binarys_own_fail_summary_or_exit_status_is_a_fail(tmp_path):
    """Every case line OK, but the summary says FAIL (or the exit status is 1): a FAIL of
    the process, not an OK run."""
    cases = [["ADD", "n=1", "ok", True], ["ADD", "n=2", "ok", True]]
    summary = "Backend CANN0: FAIL; 0/1 backends passed; FAIL; exit status 1"
    for name, spec, said in [("summary", {"summary": "FAIL"}, summary), ("exit", {"exit": 1}, "exit status 1")]:
        binary = make_binary(tmp_path / name, cases, **spec)
        res = tmp_path / f"{name}.json"
        p = ops("tbo", binary, "-o", "ADD", "--results", str(res))
        assert p.returncode == 1, (name, p.stderr)
        r = results(res)
        assert r["ADD(n=1)"]["status"] == r["ADD(n=2)"]["status"] == "OK"
        (fail,) = [x for x in r.values() if x["status"] == "FAIL"]
        assert fail["name"] == "ADD(#3)" and f"the binary said FAIL ({said})" in fail["reason"], fail


def test_cases_not_run_fail_the_exit_status_unless_allowed(tmp_path):
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True], ["ADD", "n=2", "silent", True]])
    p = ops("tbo", binary, "-o", "ADD")
    assert p.returncode == 1 and "ops: 1 case not run (--allow-not-run takes that as a pass)" in p.stderr
    assert ops("tbo", binary, "-o", "ADD", "--allow-not-run").returncode == 0


# --- the console: bounded, linear, its frames checked --------------------------------------

HOSTILE_LINES = r'''
import sys, time
from cannops.cli.engine.tbo_console import Reader, death_story
big, small = 1 << 18, 60_000   # past the bound on a line (cut there), and within it
lines = ["  A(" * (big // 4) + ": x",                    # many names, no status
         "  A(" + "): " * (big // 3) + "nothing",        # many `): `, none a status
         "[" * small + "  A(x): FAIL",                   # check fragments that never close
         "failed to allocate tensors [" * (small // 28) + "  A(x): OK",
         "  Device description: x" + " " * big + "y",
         "  B(y): " + "z" * 10,                          # an old ggml's head, then ...
         "not supported " * (big // 14) + "x",           # ... a status line of many
         "(a" * (big // 2) + "+0x1)[0x"]                 # backtrace frames that never close
got = []
reader = Reader(got.append)
reader.feed("Backend 1/1: CANN0")
t0 = time.process_time()
for ln in lines:
    reader.feed(ln)
death_story(134, reader.side)
print(len(got), round(time.process_time() - t0, 3))
'''


def test_lines_built_to_make_the_reader_quadratic_are_read_in_linear_time():
    """Lines of 256 KiB that made a pattern try every position against the whole rest
    (a minute or more each before): all read (each cut to MAX_LINE) in a child with a time
    limit far above what a linear reading takes."""
    p = subprocess.run([sys.executable, "-c", HOSTILE_LINES], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split()[0] == "3"   # A(x) FAIL, A(x) OK (after its allocation failures), B(y)


def test_a_line_is_cut_as_it_comes_and_a_frame_held_is_bounded():
    from cannops.backend.trace import FRAME, MAX_FRAME
    from cannops.cli.engine.tbo_console import MAX_LINE, Console, Reader
    got, lines = [], []
    reader = Reader(got.append)
    reader.feed = lambda raw, feed=reader.feed: (lines.append(raw), feed(raw))
    console = Console(reader)
    big = b"x" * (8 << 20)
    for k in range(0, len(big), 65536):   # an 8 MiB line in a process's 64 KiB reads
        console.feed(big[k:k + 65536])
        assert len(console.buf) <= MAX_LINE
    console.feed(b"\n" + FRAME + b"1" * (MAX_FRAME + 10))   # a frame without its end
    assert len(console.frames.held) <= MAX_FRAME + len(FRAME)
    console.feed(b"1\n  A(x): OK\n")
    console.close()
    assert len(lines[0]) < MAX_LINE + 100 and lines[0].endswith(f"[... {(8 << 20) - MAX_LINE} bytes cut]")
    assert got[0].calls == [{"call": "(bad record)", "note": f"a frame of {len(FRAME) + MAX_FRAME + 12} bytes, "
                                                               f"over the {MAX_FRAME} a record may take"}]


def test_a_cases_records_are_bounded():
    """Records without end before a case line (each a dict in memory): the first MAX_CALLS
    kept, and the failed ones after them up to as many again, the rest counted."""
    from cannops.backend.trace import frame
    from cannops.cli.engine.tbo_console import MAX_CALLS, Console, Reader
    got = []
    console = Console(Reader(got.append))
    call = {"call": "aclnnAdd", "rc": 0}
    console.feed(b"".join([frame(call)] * (3 * MAX_CALLS) + [frame({**call, "rc": 5})] + [b"  A(x): FAIL\n"]))
    console.close()
    calls = got[0].calls
    assert len(calls) == MAX_CALLS + 2 and calls[-2]["rc"] == 5
    left = {"call": "(calls left out)", "note": f"{2 * MAX_CALLS} more, past the {MAX_CALLS} a case keeps"}
    assert calls[-1] == left


def test_a_fault_of_ops_itself_still_writes_the_results(tmp_path, monkeypatch):
    """Whatever raises inside the run (here: after the first process of MUL), the cases
    finished are in the results file, marked interrupted, and the journal stays for --resume."""
    from cannops.cli.engine import tbo as engine_tbo
    from cannops.cli.tbo import TboOptions, run_binary
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True], ["MUL", "n=1", "ok", True]])

    def fault(self):
        if self.job.op == "MUL":
            raise RuntimeError("a fault of ops")
    monkeypatch.setattr(engine_tbo._OpRun, "settle_suspect", fault)
    res = tmp_path / "r.json"
    with pytest.raises(RuntimeError, match="a fault of ops"):
        run_binary(TboOptions(binary=binary, ops=("ADD", "MUL"), output="json", results_path=str(res)))
    doc = json.loads(res.read_text())
    assert doc["interrupted"] is True and [r["name"] for r in doc["results"]] == ["ADD(n=1)", "MUL(n=1)"]
    assert (tmp_path / "r.json.partial.jsonl").exists()


def test_frames_that_are_no_records_are_kept_as_bad_and_the_results_written(tmp_path):
    """A frame nested 100,000 deep (RecursionError), a call that is not a string (it broke
    the blame of the FAIL that followed), a tensor without strides: each a `(bad record)`
    note in the FAIL's trace, the run's results written."""
    deep = "\x1ecann-sim " + "[" * 100_000 + "]" * 100_000 + "\n"
    frames = [deep, '\x1ecann-sim {"call": 5, "rc": 1}\n',
              '\x1ecann-sim {"call": "aclnnAdd", "args": {"self": {"dtype": "FLOAT", "ne": [2]}}, "rc": 3}\n']
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "raw:" + "".join(frames), True],
                                          ["ADD", "n=1", "fail", False]], simulated=True)
    res = tmp_path / "r.json"
    p = ops("tbo", binary, "-o", "ADD", "--results", str(res))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    (r,) = results(res).values()
    assert r["status"] == "FAIL"
    assert [c["call"] for c in r["trace"]] == ["(bad record)"] * 3
    notes = [c["note"] for c in r["trace"]]
    assert notes == ["a frame that is not JSON (or nested too deep to read)",
                     "a call record whose call is not a string",
                     "a call record with a tensor whose strides is not a list of integers"]


# --- processes: every limit and signal, and none outlives ops -------------------------------

def test_the_support_listing_honours_the_timeout(tmp_path):
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True]], support_sleep=60)
    p = ops("tbo", binary, "--timeout", "1", timeout=30)
    assert p.returncode == 2 and "support did not end in 1 s (--timeout)" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not any(map(alive, pids(binary, "support")))


def test_sigterm_while_listing_ends_ops_and_its_child(tmp_path):
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True]], support_sleep=60)
    proc = subprocess.Popen([*OPS, "tbo", binary], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: pids(binary, "support"))
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted before the run, while test-backend-ops listed its cases" in err
    assert wait_for(lambda: not any(map(alive, pids(binary, "support"))), 10)


def test_the_child_dies_with_a_killed_ops(tmp_path):
    """kill -9 of ops tbo (no handler runs): its test-backend-ops gets SIGKILL from the
    kernel (the parent-death signal), not left running for minutes."""
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "sleep", True]])
    proc = subprocess.Popen([*OPS, "tbo", binary, "-o", "ADD"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: pids(binary, "test"))
        (child,) = pids(binary, "test")
        assert alive(child)
        proc.kill()
        proc.wait(timeout=30)
        assert wait_for(lambda: not alive(child), 10), "test-backend-ops outlived ops tbo"
    finally:
        if proc.poll() is None:
            proc.kill()


# --- blame after a death -----------------------------------------------------------------------

def test_the_suspect_of_a_death_runs_alone_and_a_death_on_the_way_out_blames_none(tmp_path):
    """The whole op dies in an unlisted case (U) between A and B: B is only suspected, and
    runs alone (before: with C and D); it prints its line and the process then dies on its
    way out: that death is nobody's, not C's (which it never ran), and C, D run after."""
    binary = make_binary(tmp_path / "b", [["ADD", "A", "ok", True], ["ADD", "U,nf=2", "abort", False],
                                          ["ADD", "B", "ok_then_abort", True], ["ADD", "C", "ok", True],
                                          ["ADD", "D", "ok", True]])
    res, logs = tmp_path / "r.json", tmp_path / "logs"
    p = ops("tbo", binary, "-o", "ADD", "--results", str(res), "--log-dir", str(logs))
    assert p.returncode == 1, p.stderr
    commands = [c for c, _ in log_processes((logs / "ADD.log").read_text())]
    assert commands[1].endswith("-p ^(B)$"), commands   # the suspect alone
    r = results(res)
    assert {k: v["status"] for k, v in r.items() if not k.startswith("ADD(#")} == {
        "ADD(A)": "OK", "ADD(B)": "OK", "ADD(C)": "OK", "ADD(D)": "OK"}
    unnamed = sorted((v["index"], v["reason"]) for k, v in r.items() if k.startswith("ADD(#"))
    assert len(unnamed) == 2
    assert "laid first on B, which printed its line when run alone" in unnamed[0][1]
    assert unnamed[1][1].startswith("aborted (") and "on its way out; the op goes on" in unnamed[1][1]


# --- files: --log-dir, --trace --resume ------------------------------------------------------

def test_log_dir_never_appends_to_nor_follows_a_file_it_did_not_create(tmp_path):
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True], ["MUL", "n=1", "ok", True]])
    logs, elsewhere = tmp_path / "logs", tmp_path / "elsewhere.txt"
    logs.mkdir()
    (logs / "ADD.log").write_text("someone's notes\n")
    elsewhere.write_text("not a log\n")
    (logs / "MUL.log").symlink_to(elsewhere)
    p = ops("tbo", binary, "-o", "ADD,MUL", "--log-dir", str(logs))
    assert p.returncode == 0, p.stderr
    assert (logs / "ADD.log").read_text() == "someone's notes\n" and elsewhere.read_text() == "not a log\n"
    for op in ("ADD", "MUL"):
        (command, console), = log_processes((logs / f"{op}.2.log").read_text())
        assert f"-o {op}" in command and f"  {op}(n=1): OK" in console


def test_trace_on_a_resumed_run_made_without_it_is_refused(tmp_path):
    """Its finished cases are not run again, so they would stay without calls while the
    file says every case has them: one line, exit 2, before any case; and the other way."""
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True]], simulated=True)
    res = tmp_path / "r.json"
    assert ops("tbo", binary, "-o", "ADD", "--results", str(res)).returncode == 0
    p = ops("tbo", binary, "-o", "ADD", "--resume", str(res), "--trace")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "is of a run made without --trace" in p.stderr
    traced = tmp_path / "t.json"
    assert ops("tbo", binary, "-o", "ADD", "--results", str(traced), "--trace").returncode == 0
    p = ops("tbo", binary, "-o", "ADD", "--resume", str(traced))
    assert p.returncode == 2 and "its run was made with --trace; resume it with --trace" in p.stderr
    assert ops("tbo", binary, "-o", "ADD", "--resume", str(traced), "--trace").returncode == 0


def test_control_characters_of_the_console_reach_neither_terminal_nor_results(tmp_path):
    """A case name holding a bell or an OSC escape (which is no colour code) was printed raw
    (found by bench/probe43.py): shown escaped, as a GGUF's names are."""
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "raw:  ADD(n=\x1b]0;title\x07\x08\x9b): FAIL\n", True]])
    res = tmp_path / "r.json"
    p = ops("tbo", binary, "-o", "ADD", "--results", str(res))
    assert p.returncode == 1, p.stderr
    for text in (p.stdout, p.stderr, res.read_text(encoding="utf-8")):
        assert not any(c in text for c in "\x1b\x07\x08\x9b"), text
    assert "ADD(n=\\x1b]0;title\\x07\\x08\\x9b)" in results(res)
