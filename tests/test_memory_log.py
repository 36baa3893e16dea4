"""OPS_MEMORY_LOG (cli/engine/memlog.py): a worker logs each case's peak memory and CPU by
phase, which bench/catalog35.py attributes the whole catalog's peak with (docs/memory.md);
without it, a worker logs nothing."""
import json
import os
import subprocess
import sys

from cannops.backend.base import open_device
from cannops.cases import all_cases
from cannops.cli.engine.execute import CaseOptions, test as run_test
from cannops.cli.engine.memlog import ENV
from cannops.cli.engine.worker import _InWorker

ADD = "ADD(type=f32,ne=[64,262144,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"   # 2 x 64 MiB in


class Pipe:
    def send(self, msg):
        pass


def test_a_case_logs_its_phases_with_their_arrays_and_peaks(tmp_path, monkeypatch):
    log = tmp_path / "memory.jsonl"
    monkeypatch.setenv(ENV, str(log))
    ctx = _InWorker(Pipe())
    case = next(c for c in all_cases() if c.name == ADD)
    dev = open_device("GGML-CPU")
    try:
        ctx.memory.start()
        result = run_test(dev, case, CaseOptions(seed=0), ctx=ctx)
        ctx.memory.end(result)
    finally:
        dev.close()
    (rec,) = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert rec["case"] == ADD and rec["status"] == "OK" and rec["pid"] == os.getpid()
    ph = rec["phases"]
    assert list(ph) == ["inputs", "reference", "run", "judge", "rest"]
    assert ph["inputs"]["mib"] == 128 and ph["reference"]["mib"] == 64 and ph["run"]["mib"] == 64
    # the peaks hold what each phase made: inputs, then the reference's output, then the
    # device's copy of all three tensors (192 MiB) with its output read back
    assert ph["inputs"]["peak_mib"] >= rec["base_mib"] + 120
    assert ph["run"]["peak_mib"] >= ph["reference"]["peak_mib"] + 100
    assert rec["peak_mib"] == max(p["peak_mib"] for p in ph.values()) and rec["t1"] >= rec["t0"]
    assert ph["reference"]["cpu"] >= 0 and sum(p["cpu"] for p in ph.values()) > 0


def test_ops_with_the_log_set_writes_one_line_per_case_and_none_without(tmp_path):
    log = tmp_path / "memory.jsonl"
    cmd = [sys.executable, "-m", "cannops.cli.main", "test", "-b", "GGML-CPU", "-o", "ABS,NEG", "--sample", "3"]
    env = {**os.environ, "OPS_REF_CACHE": "off"}
    subprocess.run(cmd, env={**env, ENV: str(log)}, check=True, capture_output=True)
    recs = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert sorted(r["op"] for r in recs) == ["ABS"] * 3 + ["NEG"] * 3
    log.unlink()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    assert not log.exists()
