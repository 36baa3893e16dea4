"""The pytest plugin: `pytest --ops-op OP --ops-device DEV` collects one item per case, and
-k, -x, --lf, --junitxml and pytest-xdist work on them; without --ops-op it does nothing."""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from cannops.backend.base import list_devices

# ABS's 8 grid cases, and one off the grid that FAULTY's mod7 gets wrong (10 % 7 == 3)
WRONG = "ABS(type=f32,ne_a=[10,1,1,1],v=0)"
ABS_AND_WRONG = ["--ops-op", "ABS", "--ops-op", WRONG, "--ops-device", "FAULTY"]


def pytest_in(path, *args):
    env = dict(os.environ, OPS_FAULTY="mod7=ABS")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", *args], cwd=path,
                          capture_output=True, text=True, timeout=300, env=env)


def summary(p) -> str:
    return p.stdout.strip().splitlines()[-1]


def test_cases_are_items_with_junit_lf_x_and_k(tmp_path):
    p = pytest_in(tmp_path, *ABS_AND_WRONG, "--junitxml", "junit.xml")
    assert p.returncode == 1, p.stdout
    assert "1 failed, 8 passed" in summary(p)
    # the failure: the case line's figures and the elements furthest from the reference
    assert f"{WRONG} on FAULTY: FAIL" in p.stdout and "[ABS] NMSE = " in p.stdout
    worst = p.stdout.split("worst elements (flat index: got, expected):\n")[1].splitlines()[0]
    index, values = worst.strip().split(": ")
    got, expected = map(float, values.split(", "))
    assert index == "[9]" and got == pytest.approx(expected + 1)   # mod7 adds 1 to the last element
    cases = ET.parse(tmp_path / "junit.xml").getroot().iter("testcase")
    by_name = {c.get("name"): c for c in cases}
    assert len(by_name) == 9 and "ABS[type=f16,ne_a=[5,7,11,13],v=1]" in by_name
    assert [n for n, c in by_name.items() if c.find("failure") is not None] == ["ABS[type=f32,ne_a=[10,1,1,1],v=0]"]

    again = pytest_in(tmp_path, *ABS_AND_WRONG, "--lf")
    assert "1 failed, 8 deselected" in summary(again), again.stdout
    only_f16 = pytest_in(tmp_path, *ABS_AND_WRONG, "-k", "f16")
    assert "4 passed, 5 deselected" in summary(only_f16), only_f16.stdout
    stop = pytest_in(tmp_path, "--ops-op", f"{WRONG},ABS(type=f32,ne_a=[17,1,1,1],v=0)", "--ops-device", "FAULTY", "-x")
    assert "1 failed" in summary(stop) and "passed" not in summary(stop), stop.stdout


@pytest.mark.skipif("GGML-CPU" not in [n for n, _ in list_devices()], reason="no ggml bridge")
def test_abs_on_ggml_cpu_passes_under_xdist(tmp_path):
    p = pytest_in(tmp_path, "--ops-op", "ABS", "--ops-device", "GGML-CPU", "-n", "2")
    assert p.returncode == 0, p.stdout
    assert "2 workers [8 items]" in p.stdout and "8 passed" in summary(p)


def test_without_ops_op_the_plugin_collects_and_imports_nothing(tmp_path):
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    code = ("import sys; PLUGIN = ('cannops.cli', 'cannops.cli.engine', 'cannops.cli.pytest_plugin'); "
            "import sys, pytest; rc = pytest.main(['-q', '-p', 'no:cacheprovider', sys.argv[1]]); "
            "print(sorted(m for m in sys.modules if m.startswith('cannops.') and m not in PLUGIN))")
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert "1 passed" in p.stdout and p.stdout.strip().endswith("[]"), p.stdout


@pytest.mark.parametrize("args,message", [
    (["--ops-timeout", "-1"], "--ops-timeout must be a positive number"),
    (["--ops-timeout", "0"], "--ops-timeout must be a positive number"),
    (["--ops-timeout", "nan"], "--ops-timeout must be a positive number"),
    (["--ops-timeout", "inf"], "--ops-timeout must be a positive number"),
    (["--ops-timeout", "1e300"], "--ops-timeout must be a positive number"),
    (["--ops-seed", "-5"], "--ops-seed must be at least 0"),
    (["--ops-op", ","], "names no op"),
    (["--ops-device", "NOPE"], "NOPE"),
])
def test_bad_option_values_are_usage_errors(tmp_path, args, message):
    """Issue 32, 6: the plugin's options ran with values `ops test` refuses (a timeout of
    inf: a 950-line OverflowError traceback, seed -5: device failures); they go through
    the same validators: a usage error, one line, nothing run."""
    op = [] if args[0] == "--ops-op" else ["--ops-op", "ABS"]
    p = pytest_in(tmp_path, *op, "--ops-device", "NUMPY", *args)
    assert p.returncode == 4, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert message in p.stderr and "Traceback" not in p.stderr + p.stdout and len(p.stderr.splitlines()) <= 2
