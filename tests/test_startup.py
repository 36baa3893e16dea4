"""A small run's start-up (issue 23: `ops test -o ABS -b GGML-CPU`, test-backend-ops takes
0.1 s): `ops` itself imports neither NumPy, the catalog, rich, gguf nor the CANN provider;
the cases go to the worker as references (cases/cache.py CaseRef) that it builds; the one
worker is forked ahead, before the cases are chosen, and imports what it needs meanwhile.
The figures are the benchmark's (bench/run.py); these tests hold the behaviour behind them."""
import ast
import os
import subprocess
import sys

import pytest

from cannops.backend.base import list_devices

pytestmark = pytest.mark.skipif("GGML-CPU" not in [n for n, _ in list_devices()], reason="no ggml bridge")

HEAVY = ("numpy", "cannops.cases.catalog", "cannops.backend.reference", "rich", "gguf", "cannops.backend.cann")

# `ops` in a process that says, as it exits, which of HEAVY it imported and how many workers
# it forked or spawned (a forked worker leaves by os._exit: only the main process reports)
OPS = """
import atexit, os, sys
pid = os.getpid()
def report():
    if os.getpid() == pid:
        from cannops.cli.engine import forking
        spawned = "multiprocessing.popen_spawn_posix" in sys.modules
        print("REPORT", ([m for m in %r if m in sys.modules], forking.Forked.count, spawned), file=sys.stderr)
atexit.register(report)
from cannops.cli.main import main
sys.argv = ["ops", *sys.argv[1:]]
main()
""" % (HEAVY,)


@pytest.fixture(scope="module", autouse=True)
def names_cached():
    """The catalog's names come from their cache (a cold one is enumerated here, once)."""
    subprocess.run([sys.executable, "-m", "cannops.cli.main", "list", "cases"], check=True,
                   capture_output=True, timeout=300)


def case_lines(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith("  ABS(")]


def ops(*args, env=None):
    p = subprocess.run([sys.executable, "-c", OPS, *args], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})))
    report = [ln for ln in p.stderr.splitlines() if ln.startswith("REPORT ")]
    assert report, p.stderr[-2000:]
    imported, forks, spawned = ast.literal_eval(report[-1][len("REPORT "):])
    return p, imported, forks, spawned


def test_a_one_case_run_imports_nothing_heavy_and_forks_its_one_worker_ahead():
    p, imported, forks, spawned = ops("test", "-b", "GGML-CPU", "-o", "ABS(type=f32,ne_a=[128,2,2,2],v=0)")
    assert p.returncode == 0 and "  ABS(type=f32,ne_a=[128,2,2,2],v=0): OK" in p.stdout.splitlines(), p.stdout
    assert imported == []
    assert (forks, spawned) == (1, False)


def test_a_short_run_keeps_to_its_one_worker_and_a_long_one_grows_to_its_jobs():
    # -j 2 on a dozen small cases: done before a second worker would pay for itself
    p, imported, forks, spawned = ops("test", "-b", "GGML-CPU", "-o", "ABS", "-j", "2")
    assert p.returncode == 0 and [ln.endswith(": OK") for ln in case_lines(p.stdout)] == [True] * 8, p.stdout
    assert (forks, spawned, imported) == (1, False, [])
    # cases of 0.1 s each: the second worker is forked once this process imported what it needs
    p, imported, forks, spawned = ops("test", "-b", "FAULTY", "-o", "ABS", "-j", "2", env={"OPS_FAULTY": "slow=ABS"})
    assert p.returncode == 0 and [ln.endswith(": OK") for ln in case_lines(p.stdout)] == [True] * 8, p.stdout
    assert (forks, spawned) == (2, False)
    assert "numpy" in imported


def test_a_run_whose_first_device_is_spawned_drops_nothing_it_needs():
    # CANN-SIM's workers are spawned: no worker is forked ahead for it; a later GGML-CPU
    # pool forks its own
    p, imported, forks, spawned = ops("test", "-b", "CANN-SIM,GGML-CPU", "-o", "ABS", "-p", r"f32,ne_a=\[128")
    assert p.returncode == 0 and [ln.endswith(": OK") for ln in case_lines(p.stdout)] == [True] * 4, p.stdout
    assert spawned and forks == 1
