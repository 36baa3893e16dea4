"""`ops` end to end on the real devices: the acceptance lines of the README and docs/."""
import json
import os
import re
import subprocess
import sys

import pytest

from cannops.backend.base import list_devices

OPS = [sys.executable, "-m", "cannops.cli.main"]
DEVICES = [n for n, _ in list_devices()]


def ops(*args):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("device", [d for d in ("GGML-CPU", "CANN-SIM") if d in DEVICES])
def test_ssm_conv_prints_the_45_reference_cases_all_ok(device, reference_dir):
    p = ops("test", "-o", "SSM_CONV", "-b", device, "-j", "2")
    assert p.returncode == 0, p.stdout[-2000:]
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("  SSM_CONV(")]
    expected = {f"SSM_CONV({ln.split(chr(9))[1]})" for ln in
                (reference_dir / "test-backend-ops-v0.20.2-cases.tsv").read_text().splitlines()
                if ln.startswith("SSM_CONV\t")}
    assert len(lines) == 45
    assert {ln.strip().rsplit(": ", 1)[0] for ln in lines} == expected
    assert all(ln.endswith(": OK") for ln in lines)
    # test-backend-ops' layout around the case lines
    assert p.stdout.startswith("Testing 1 device\n\nBackend 1/1: " + device)
    assert "  45/45 tests passed" in p.stdout and p.stdout.rstrip().endswith("OK")


def test_piped_output_is_plain_text():
    p = ops("test", "-o", "ABS", "-b", "NUMPY")
    assert "\x1b[" not in p.stdout


def test_full_case_names_and_params_regex_select_cases():
    name = "ABS(type=f32,ne_a=[5,7,11,13],v=1)"
    p = ops("list", "cases", "-o", name + ",SGN", "-p", r"f32.*v=1")
    assert p.stdout.split() == [name, "SGN(type=f32,ne_a=[128,2,2,2],v=1)", "SGN(type=f32,ne_a=[5,7,11,13],v=1)"]


def test_sample_keeps_at_most_n_cases_per_op_the_same_in_every_run():
    from cannops.cli.engine.selection import hash_sample, select_cases
    every = [c.name for _, c in select_cases("test", "ABS,TOP_K,SOFTCAP")]
    picked = ops("list", "cases", "-o", "ABS,TOP_K,SOFTCAP", "--sample", "3").stdout.split()
    assert sorted(n.split("(")[0] for n in picked) == ["ABS"] * 3 + ["SOFTCAP"] + ["TOP_K"] * 3
    assert picked == [n for n in every if n in picked]   # catalog order
    # -p applies first; the pick of an op does not depend on the other ops selected
    assert ops("list", "cases", "-o", "TOP_K", "--sample", "3").stdout.split() == \
        [n for n in picked if n.startswith("TOP_K(")]
    ties = [c for _, c in select_cases("test", "TOP_K", "ties=1")]
    assert ops("list", "cases", "-o", "TOP_K", "-p", "ties=1", "--sample", "2").stdout.split() == \
        [c.name for c in hash_sample(ties, 2)]
    doc = json.loads(ops("test", "-o", "ABS", "-b", "NUMPY", "--sample", "2", "--output", "json").stdout)
    assert doc["sample"] == 2 and len(doc["results"]) == 2
    p = ops("test", "-o", "ABS", "--sample", "0")
    assert p.returncode == 2 and "--sample must be at least 1" in p.stderr


def test_json_output_carries_run_and_case_fields():
    p = ops("test", "-o", "SQRT", "-b", "NUMPY", "--seed", "7", "--output", "json")
    doc = json.loads(p.stdout)
    assert doc["mode"] == "test" and doc["seed"] == 7 and doc["ops_filter"] == "SQRT"
    assert doc["devices"][0]["name"] == "NUMPY"
    r = doc["results"][0]
    assert r["op"] == "SQRT" and r["status"] == "OK" and r["error"] == 0.0


def test_perf_prints_runs_throughput_and_how_far_to_trust_them():
    p = ops("perf", "-o", "ADD", "-b", "NUMPY", "--min-time", "0.01", "-p", "nr=\\[1,1,1,1\\]")
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("  ADD(")]
    assert lines and all(re.search(r" runs - +[\d.]+ us/run ±( *[\d.]+%|  \?  ) - ", ln) and "GB/s" in ln
                         for ln in lines)
    assert "  Timing: host wall clock; us/run is the median over batches" in p.stdout
    doc = json.loads(ops("perf", "-o", "ADD", "-b", "NUMPY", "--min-time", "0.01", "-p", "nr=\\[1,1,1,1\\]",
                        "--output", "json").stdout)
    for r in doc["results"]:
        # every figure says how many batches it took, their spread, and the machine's state
        assert r["batches"] >= 1 and r["clock"] == "host wall clock" and r["load"] >= 0
        assert (r["spread"] is None) == (r["batches"] < 3)
        assert ("spread unknown" in r["doubts"]) == (r["spread"] is None)


@pytest.mark.skipif("GGML-CPU" not in DEVICES, reason="needs the ggml bridge")
def test_perf_computes_on_test_backend_ops_threads_unless_told_and_records_them():
    # test-backend-ops sets its CPU backend to half the cores (N_THREADS / 2): perf does the
    # same so that us/run compare; test gives each worker its share of all cores
    cores = os.cpu_count() or 1
    perf = ("perf", "-o", "ADD", "-b", "GGML-CPU", "--min-time", "0.01", "-p", "nr=\\[1,1,1,1\\]")
    doc = json.loads(ops(*perf, "--output", "json").stdout)
    assert doc["devices"][0]["threads"] == max(1, cores // 2)
    p = ops(*perf, "--threads", "3")
    assert p.returncode == 0 and "  Threads: 3\n" in p.stdout, p.stdout
    doc = json.loads(ops("test", "-o", "ABS", "-b", "GGML-CPU", "--sample", "1", "--output", "json").stdout)
    assert doc["devices"][0]["threads"] == cores
    p = ops(*perf, "--threads", "0")
    assert p.returncode == 2 and p.stderr == "ops: error: --threads must be at least 1 (got 0)\n"


@pytest.mark.skipif("GGML-CPU" not in DEVICES, reason="needs the ggml bridge")
def test_a_case_the_reference_cannot_compute_blames_numpy_not_the_device(tmp_path):
    # ggml-CPU copies f32 into q4_K; here the reference is run without its q4_K encoder
    # (every catalog case ggml-CPU runs now has a reference)
    name = ("CPY(type_src=f32,type_dst=q4_K,ne_src=[256,4,4,4],permute_src=[0,0,0,0],"
            "permute_dst=[0,0,0,0],_src_transpose=0)")
    res = tmp_path / "r.json"
    # (a sitecustomize, so that the runner's spawned workers drop it too)
    (tmp_path / "sitecustomize.py").write_text(
        "from cannops.cases import quants\nquants.OWN_QUANT.pop('q4_K', None)\n")
    path = [str(tmp_path), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    p = subprocess.run([*OPS, "test", "-b", "GGML-CPU", "-o", name, "--results", str(res)],
                       capture_output=True, text=True, timeout=600, env=env)
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"  {name}: "))
    assert "not supported [NUMPY] no NumPy quantizer for q4_K" in line and "GGML-CPU]" not in line
    r = json.loads(res.read_text())["results"][0]
    assert (r["device"], r["status"], r["by"]) == ("GGML-CPU", "not supported", "NUMPY")
    assert r["reason"].startswith("no NumPy quantizer for q4_K")
    xml = ops("support", "--results", str(res), "--output", "junit").stdout
    assert 'message="not supported [NUMPY]: no NumPy quantizer for q4_K' in xml


def test_support_explain_names_the_rule_per_case():
    p = ops("support", "--explain", "-b", "CANN-SIM", "-o", "ROLL,SOFT_MAX",
            "-p", r"shift0=3.*permute=0|ne=\[16,16,1,1\],mask=0,sinks=[01],m_prec=f32,nr23=\[1,1\],scale=1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    roll = lines.index("ROLL(shift0=3,shift1=-2,shift3=1,shift4=-1,permute=0)")
    assert lines[roll + 1].startswith("  ROLL: accepted, runs aclnnRoll; beyond ggml-cann v0.20.2:")
    sinks = [i for i, ln in enumerate(lines) if ln.startswith("SOFT_MAX(") and "sinks=1" in ln]
    assert sinks and "refused: attention sinks" in lines[sinks[0] + 1]
    plain = [i for i, ln in enumerate(lines) if ln.startswith("SOFT_MAX(") and "sinks=0" in ln]
    assert plain and "accepted, runs aclnn" in lines[plain[0] + 1]
    p = ops("support", "--explain", "-b", "GGML-CPU", "-o", "ROLL")
    assert p.returncode == 2 and "no CANN device selected" in p.stderr


def test_docs_list_every_rule_beyond_or_narrower_than_ggml_cann():
    import pathlib
    from cannops.backend.cann.rules import RULES
    table = pathlib.Path(__file__).parents[1].joinpath("docs", "rules-vs-ggml-cann.md").read_text()
    table = table[table.index("# Where the CANN rules differ"):table.index("`tests/test_cli.py` checks")]
    missing = [k for k, r in RULES.items() if (r.beyond or r.narrower) and f"{k}" not in table]
    assert not missing, f"docs/rules-vs-ggml-cann.md's table of rules beyond / narrower than ggml-cann misses {missing}"


def test_list_devices_says_which_libggml():
    p = ops("list", "devices")
    assert p.returncode == 0
    lines = p.stdout.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("GGML-CPU\t"))
    assert lines[i + 1].startswith("  library: /") and "libggml" in lines[i + 1] and re.search(r"\(ggml \d+\.\d+\.\d+, commit \w+\)$", lines[i + 1])
    assert lines[i + 2].startswith("  features: ")
