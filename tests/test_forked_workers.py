"""Workers forked from `ops` (cli/engine/forking.py FORKABLE) are isolated as spawned ones are: a
crash is its case's FAIL, and a worker keeps no file of the main process open (the results
journal's lock goes with the main process, whatever a hung worker does)."""
import os
import signal
import subprocess
import sys
import time

from _proc import cmdline as _cmdline, proc_stats

OPS = [sys.executable, "-m", "cannops.cli.main"]


def _open_files(pid: int) -> list[str]:
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return out


def test_a_forked_worker_holds_no_file_of_the_main_process(tmp_path):
    res = tmp_path / "r.json"
    env = dict(os.environ, OPS_FAULTY="hang=EXP", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*OPS, "test", "-b", "FAULTY", "-o", "EXP", "-p", "type=f32", "--timeout", "600",
                             "--results", str(res)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        while not proc.stdout.readline().startswith("Backend 1/1"):
            pass
        deadline = time.monotonic() + 60
        while not (workers := [p for p, f in proc_stats() if int(f[1]) == proc.pid]):
            assert time.monotonic() < deadline, "no worker"
            time.sleep(0.1)
        journal = str(res) + ".partial.jsonl"
        assert journal in _open_files(proc.pid)
        for w in workers:
            assert _cmdline(w) == _cmdline(proc.pid)          # forked, not spawned
            assert not [f for f in _open_files(w) if f.startswith(str(tmp_path))]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        proc.stdout.close()


def test_a_crash_in_a_forked_worker_is_its_cases_fail(tmp_path):
    p = subprocess.run([*OPS, "test", "-b", "FAULTY", "-o", "NEG,SGN", "-p", r"type=f32,ne_a=\[5,.*v=0"],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, OPS_FAULTY="segv=NEG"))
    neg = [ln for ln in p.stdout.splitlines() if ln.startswith("  NEG(")]
    sgn = [ln for ln in p.stdout.splitlines() if ln.startswith("  SGN(")]
    assert len(neg) == len(sgn) == 1, p.stdout[-2000:]
    assert "SIGSEGV" in neg[0] and neg[0].endswith("FAIL") and sgn[0].endswith("OK")
    assert p.returncode == 1
