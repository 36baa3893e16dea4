"""`ops support`'s probe (issue 23: every case on every device in under 2 s without its
cache, 12.8 s before): the devices whose support is decided by rules (the CANN rules:
backend.base.open_prober) are asked in the first device's workers, on the graph built once
for the case; a worker answers a batch of cases in one message, and when it dies or hangs
holding several, each goes back alone, so that the FAIL names its case. The figures are
the benchmark's (bench/run.py); these tests hold the behaviour: the decisions are those
each device gives on its own, whatever the cache, the crashes and the hangs."""
import json
import os
import subprocess
import sys

import pytest

from cannops.backend.base import list_devices

OPS = [sys.executable, "-m", "cannops.cli.main"]
DEVICES = [n for n, _ in list_devices()]
pytestmark = pytest.mark.skipif(not {"GGML-CPU", "CANN-SIM"} <= set(DEVICES), reason="no GGML-CPU or CANN-SIM")


def ops(*args, cache="off", **env):
    p = subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, OPS_CACHE_DIR=str(cache), **env))
    return p


def decisions(p) -> dict:
    assert p.returncode == 0, p.stderr[-2000:]
    return {(r["device"], r["op"], r["params"]): (r["status"], r["reason"].split("\n")[0])
            for r in json.loads(p.stdout)["results"]}


def test_a_cold_probe_prints_what_a_warm_one_does_and_each_device_alone(tmp_path):
    # the whole catalog: CANN-SIM's decisions taken in GGML-CPU's workers (cold), read back
    # from the cache (warm), and each device probed on its own (CANN-SIM through its rules
    # in workers of its own)
    names = ops("list", "cases", "--mode", "support", cache=tmp_path)   # the names cache is warm
    assert names.returncode == 0
    cold, warm = ops("support", cache=tmp_path), ops("support", cache=tmp_path)
    assert cold.returncode == warm.returncode == 0 and cold.stdout == warm.stdout, cold.stderr[-2000:]
    assert list(tmp_path.glob("probe-*.pickle"))
    both = decisions(ops("support", "--output", "json"))
    alone = {**decisions(ops("support", "-b", "GGML-CPU", "--output", "json")),
             **decisions(ops("support", "-b", "CANN-SIM", "--output", "json"))}
    assert both == alone and len(both) == 2 * len(names.stdout.split())


def test_the_cann_rules_a_probe_asks_are_the_devices_own():
    from cannops.backend.base import open_device, open_prober
    from cannops.cli.engine.selection import select_cases
    from tests._sample import sample
    device, prober = open_device("CANN-SIM"), open_prober("CANN-SIM")
    try:
        assert (prober.name, prober.description, prober.soc_name) == (device.name, device.description, device.soc_name)
        for case in sample([c for _, c in select_cases("support")], 300):
            g = case.build()
            assert prober.supports(case, g) == device.supports(case, g), case.name
    finally:
        device.close()


def test_a_crash_while_probing_is_that_cases_fail_and_the_rules_decide_all(tmp_path):
    args = ["support", "-b", "FAULTY,CANN-SIM", "-o", "ABS,NEG,SGN", "--output", "json"]
    got = decisions(ops(*args, OPS_FAULTY="segvprobe=NEG"))
    neg = {k: v for k, v in got.items() if k[0] == "FAULTY" and k[1] == "NEG"}
    assert neg and all(s == "FAIL" and why.startswith("worker died: SIGSEGV") for s, why in neg.values())
    assert all(s == "OK" for k, (s, _) in got.items() if k[0] == "FAULTY" and k[1] != "NEG")
    # CANN-SIM rode with FAULTY's workers; the cases FAULTY crashed on it probed on its own
    alone = decisions(ops("support", "-b", "CANN-SIM", "-o", "ABS,NEG,SGN", "--output", "json"))
    assert {k: v for k, v in got.items() if k[0] == "CANN-SIM"} == alone


def test_a_hang_while_probing_is_that_cases_fail(tmp_path):
    args = ["support", "-b", "FAULTY", "-o", "EXP,ABS", "-p", r"type=f32,ne_a=\[5,|ne=\[10,5,4,3\]", "--timeout", "2",
            "--output", "json"]
    got = decisions(ops(*args, OPS_FAULTY="hangprobe=EXP"))
    exp = [v for k, v in got.items() if k[1] == "EXP"]
    assert exp and all(s == "FAIL" and why.startswith("timeout") for s, why in exp)
    assert [s for k, (s, _) in got.items() if k[1] == "ABS"] and all(s == "OK" for k, (s, _) in got.items() if k[1] == "ABS")
