"""Nothing lost, nothing replaced, no tracebacks (issue 12): a device that cannot be reopened,
output paths that are links or special files, killed runs resumed, shards that do not make
a whole, empty selections, bad numbers, closed pipes, slow stops, full disks, malformed
results files, and the smaller ones."""
import errno
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from _proc import cmdline as _cmdline, proc_stats

OPS = [sys.executable, "-m", "cannops.cli.main"]
TWO = ["-o", "ABS,SGN", "-p", r"type=f32,ne_a=\[5,.*v=0"]  # two cases


def ops(*args, env=None, **kw):
    e = dict(os.environ, **(env or {}))
    return subprocess.run([*OPS, *args], capture_output=True, text=True, env=e, timeout=300, **kw)


def load(path):
    with open(path) as f:
        return json.load(f)


def one_line_error(p, message):
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


# --- 1. a device that cannot be reopened after a crash ---------------------------------------

@pytest.mark.parametrize("reopen", ["die", "hang"])
def test_a_device_that_cannot_be_reopened_costs_its_cases_only(tmp_path, reopen):
    res = tmp_path / "r.json"
    env = {"OPS_FAULTY": "abort=ABS", "OPS_FAULTY_REOPEN": reopen, "TMPDIR": str(tmp_path)}
    t0 = time.monotonic()
    p = ops("test", "-b", "FAULTY,NUMPY", *TWO, "--timeout", "2", "--results", str(res), env=env)
    assert time.monotonic() - t0 < 60  # not 120 s for the hang: --timeout, at least 20 s
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    doc = load(res)
    faulty = [r for r in doc["results"] if r["device"] == "FAULTY"]
    assert faulty[0]["op"] == "ABS" and faulty[0]["status"] == "FAIL" and "SIGABRT" in faulty[0]["reason"]
    assert faulty[1]["status"] == "skipped" and "after a crash" in faulty[1]["reason"]
    assert "worker died: SIGABRT" in p.stdout  # the crashing case's FAIL line was printed
    assert doc["summary"]["NUMPY"]["OK"] == 2  # the other device went on


# --- 2. output paths: links and special files ------------------------------------------------

def test_results_are_written_through_a_link_and_into_a_fifo(tmp_path):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target)
    p = ops("test", "-b", "NUMPY", *TWO, "--results", str(link))
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and load(target)["summary"]["NUMPY"]["OK"] == 2

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    p = ops("merge", str(target), "--out", str(fifo))
    reader.join(60)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and json.loads(got[0])["summary"]["NUMPY"]["OK"] == 2
    p = ops("test", "-b", "NUMPY", *TWO, "--results", os.devnull)
    assert p.returncode == 0 and stat.S_ISCHR(os.stat(os.devnull).st_mode), p.stderr


def test_a_regular_file_is_replaced_atomically_keeping_its_mode(tmp_path):
    from cannops.cli.engine.results import write_file
    path = tmp_path / "r.json"
    path.write_text("old")
    os.chmod(path, 0o640)
    write_file(str(path), "new")
    assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == 0o640
    assert os.listdir(tmp_path) == ["r.json"]


# --- 10. kill -9, then --resume ---------------------------------------------------------------

def _children(pid: int) -> list[int]:
    """The worker processes of a running `ops` (from /proc: Linux): spawned ones, or forked
    ones (cli/engine/forking.py FORKABLE, their command line the main's), not the resource tracker."""
    return [p for p, fields in proc_stats() if int(fields[1]) == pid
            and "resource_tracker" not in _cmdline(p)]


def test_a_killed_run_is_resumed_without_recomputing_its_finished_cases(tmp_path):
    res = tmp_path / "r.json"
    args = ["test", "-b", "FAULTY", "-o", "ABS,EXP", "-p", "type=f16,.*v=0", "--results", str(res)]
    env = dict(os.environ, OPS_FAULTY="hang=EXP", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*OPS, *args, "--timeout", "600"], stdout=subprocess.PIPE, text=True, env=env)
    seen = 0
    while seen < 2:  # in catalog order the two ABS cases come first, then EXP hangs
        line = proc.stdout.readline()
        assert line, "ops ended before printing the ABS cases"
        seen += line.startswith("  ABS(")
    time.sleep(0.5)
    workers = _children(proc.pid)
    assert workers
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    proc.stdout.close()
    assert not res.exists()
    # its workers, one of them hung in a case, stop by themselves
    deadline = time.monotonic() + 10
    while any(_cmdline(w) for w in workers):   # gone (a zombie has no command line)
        assert time.monotonic() < deadline, "orphaned workers still run"
        time.sleep(0.2)
    journal = tmp_path / "r.json.partial.jsonl"
    assert sum('"result"' in ln for ln in journal.read_text().splitlines()) == 2
    # resumed where abort=ABS would FAIL every ABS case: they are taken, not run again
    p = ops(*args, "--resume", str(res), env={"OPS_FAULTY": "abort=ABS"})
    assert p.returncode == 0, p.stdout[-2000:]
    doc = load(res)
    assert [r["status"] for r in doc["results"]] == ["OK"] * 4 and not doc["interrupted"]
    assert [r["op"] for r in doc["results"]] == ["ABS", "ABS", "EXP", "EXP"]
    assert not journal.exists()
    # another selection is refused
    p = ops("test", "-b", "FAULTY", "-o", "ABS", "--resume", str(res), env={"OPS_FAULTY": "x=Y"})
    one_line_error(p, "another selection")


# --- 3. merges of shards that do not make a whole --------------------------------------------

@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("shards")
    out = {}
    for s in ("1/2", "2/2", "1/3"):
        path = d / f"s{s.replace('/', 'of')}.json"
        ops("test", "-b", "NUMPY", *TWO, "--shard", s, "--results", str(path))
        out[s] = str(path)
    return out


@pytest.mark.parametrize("names,message", [
    (["1/2", "1/2"], "shard 1/2 is given twice"),
    (["1/2", "1/3"], "cannot merge shards of different splits"),
    (["1/2"], "missing shard 2/2"),
])
def test_merge_refuses_shards_that_do_not_make_a_whole(shards, names, message):
    one_line_error(ops("merge", *(shards[n] for n in names)), message)


def test_merge_allow_partial_marks_the_run_partial(shards, tmp_path):
    p = ops("merge", shards["1/2"], "--allow-partial", "--out", str(tmp_path / "m.json"))
    assert p.returncode == 0, p.stderr
    assert load(tmp_path / "m.json")["interrupted"] is True
    p = ops("merge", shards["1/2"], shards["2/2"])
    assert p.returncode == 0 and json.loads(p.stdout)["interrupted"] is False


# --- 4, 5. empty selections, bad numbers ------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["test", "-o", ""], "no case selected"),
    (["test", "-o", ","], "no case selected"),
    (["test", "-o", " "], "no case selected"),
    (["test", "-b", "NUMPY", "-o", "ABS", "-p", "zzz"], "no case selected"),
    (["perf", "-b", "NUMPY", "-o", "ABS"], "ABS has no perf cases"),
    (["test", "--seed", "-1"], "--seed must be at least 0"),
    (["test", "--timeout", "inf"], "--timeout must be a positive number"),
    (["test", "--timeout", "1e20"], "--timeout must be a positive number"),
    (["test", "--timeout", "nan"], "--timeout must be a positive number"),
    (["perf", "--min-time", "nan"], "--min-time must be a positive number"),
    (["test", "-p", "(" * 1200 + ")" * 1200], "bad -p regex"),
])
def test_bad_selections_and_numbers_are_one_line_and_status_2(args, message):
    one_line_error(ops(*args), message)


def test_repeated_o_accumulates(tmp_path):
    p = ops("test", "-b", "NUMPY", "-o", "ABS", "-o", "SGN", "-p", r"type=f32,ne_a=\[5,.*v=0",
            "--output", "json")
    assert p.returncode == 0, p.stderr
    assert [r["op"] for r in json.loads(p.stdout)["results"]] == ["ABS", "SGN"]


# --- 6. closed pipes ----------------------------------------------------------------------------

def _head_1(args, env=None, lines=1):
    """`ops ARGS | head -1` (lines=0: a reader that leaves at once, so that the first write
    fails whatever the pipe's capacity): returns (exit status, stderr)."""
    proc = subprocess.Popen([*OPS, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, **(env or {})))
    for _ in range(lines):
        proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(120), err


def test_a_closed_pipe_stops_quietly_and_every_file_is_written(tmp_path):
    summary, logs = tmp_path / "s.md", tmp_path / "logs"
    rc, err = _head_1(["test", "-b", "NUMPY", "-o", "ABS,SGN,NEG", "--output", "json",
                       "--summary-file", str(summary), "--log-dir", str(logs)], lines=0)
    assert rc == 128 + signal.SIGPIPE and "Traceback" not in err, err
    assert summary.read_text().strip() and sorted(os.listdir(logs)) == ["ABS.log", "NEG.log", "SGN.log"]
    res = tmp_path / "r.json"
    ops("test", "-b", "NUMPY", *TWO, "--results", str(res))
    rc, err = _head_1(["support", "--results", str(res)], env={"COLUMNS": "80"})
    assert rc in (0, 128 + signal.SIGPIPE) and "Traceback" not in err, err


# --- 7. a quick stop -------------------------------------------------------------------------

def test_sigterm_stops_busy_workers_at_once(tmp_path):
    res = tmp_path / "r.json"
    env = dict(os.environ, OPS_FAULTY="hang=EXP", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*OPS, "test", "-b", "FAULTY", "-o", "ABS,EXP", "-p", "type=f16,.*v=0", "-j", "2",
                             "--timeout", "600", "--results", str(res)], stdout=subprocess.PIPE, text=True, env=env)
    seen = 0
    while seen < 2:
        line = proc.stdout.readline()
        assert line
        seen += line.startswith("  ABS(")
    time.sleep(1.0)  # both workers now hang on an EXP case
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 1.5  # was 2 s per busy worker, one after the other
    assert proc.returncode == 128 + signal.SIGTERM and load(res)["interrupted"] is True


# --- 8. a full disk ------------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--results", "--summary-file"])
def test_a_full_disk_is_one_line_and_status_2(flag):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    one_line_error(ops("test", "-b", "NUMPY", *TWO, flag, "/dev/full"), "cannot write /dev/full: No space left")
    assert not os.path.exists("/dev/full.partial.jsonl")  # a device gets no journal beside it


def test_a_failed_write_leaves_no_temp_file(tmp_path, monkeypatch):
    from cannops.cli.engine import results

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        results.write_file(str(tmp_path / "r.json"), "x" * 100000)
    assert os.listdir(tmp_path) == []


# --- 9. malformed results files ------------------------------------------------------------

GOOD = {"schema": "ops-results/1", "mode": "test", "seed": 0, "interrupted": False,
        "devices": [{"name": "NUMPY"}],
        "results": [{"device": "NUMPY", "op": "ABS", "params": "type=f32", "status": "OK", "index": 0}]}


def _with(path, **change):
    doc = json.loads(json.dumps(GOOD))
    for k, v in change.items():
        if k.startswith("r_"):
            doc["results"][0][k[2:]] = v
        else:
            doc[k] = v
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("change,message", [
    ({"r_op": None}, "results[0]: op is null, expected a string"),
    ({"r_device": 3}, "results[0]: device is 3, expected a string"),
    ({"r_status": "maybe"}, "results[0]: unknown status 'maybe'"),
    ({"interrupted": "no"}, "interrupted is \"no\", expected true/false"),
    ({"mode": "bogus"}, "unknown mode 'bogus'"),
    ({"results": {}}, "results is {}, expected a list"),
])
def test_a_malformed_results_file_is_one_line_naming_the_file(tmp_path, change, message):
    path = _with(tmp_path / "bad.json", **change)
    one_line_error(ops("support", "--results", path), message)
    assert path in ops("merge", path).stderr
    p = ops("test", "-b", "NUMPY", *TWO, "--summary-file", str(tmp_path / "s.md"), "--baseline", path)
    one_line_error(p, path)


def test_every_mode_is_valid_and_undecodable_bytes_name_the_file(tmp_path):
    for mode in ("test", "perf", "support", "grad"):
        assert ops("merge", _with(tmp_path / f"{mode}.json", mode=mode)).returncode == 0
    bad = tmp_path / "bytes.json"
    bad.write_bytes(b'{"schema": "\xff\xfe"}')
    one_line_error(ops("merge", str(bad)), str(bad))
    one_line_error(ops("support", "--results", str(bad)), str(bad))


# --- 10. the smaller ones ----------------------------------------------------------------------

def test_a_crash_keeps_the_devices_own_lines_first(tmp_path):
    from cannops.cli.engine.pool import _tail
    log = tmp_path / "w.log"
    frames = "".join(f'  File "x.py", line {i} in f{i}\n' for i in range(30))
    log.write_text("ggml.c:123: GGML_ASSERT(a->ne[0] == b->ne[0]) failed\x1b[31m\x07\n"
                   "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n" + frames)
    tail = _tail(str(log)).splitlines()
    assert tail[0] == "ggml.c:123: GGML_ASSERT(a->ne[0] == b->ne[0]) failed[31m"  # no ESC, no BEL
    assert tail[1] == "Fatal Python error: Aborted" and len(tail) == 8


def test_ops_alone_prints_its_usage():
    p = ops()
    assert p.returncode == 0 and p.stdout.startswith("Usage: ops") and "error" not in p.stderr


def test_help_lists_options_as_declared():
    out = ops("test", "--help").stdout
    flags = ["-o OPS", "-p REGEX", "-b DEVICE", "-j INTEGER", "--timeout", "--seed", "--shard",
             "--output", "--results", "--resume", "--log-dir", "--summary-file", "--baseline"]
    at = [out.index("  " + f) for f in flags]
    assert at == sorted(at)


def test_markdown_under_an_ascii_console(tmp_path):
    p = ops("support", "-b", "NUMPY", "-o", "ABS", "--markdown", env={"PYTHONIOENCODING": "ascii"})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_ctrl_c_while_a_worker_starts_prints_no_worker_traceback(tmp_path):
    proc = subprocess.Popen([*OPS, "test", "-b", "NUMPY", "-o", "ABS"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(1.5)  # the worker is being spawned, or has just started
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert "KeyboardInterrupt" not in err and "Traceback" not in err, err
