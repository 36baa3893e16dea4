"""The reference cache (cli/engine/refcache.py) and the workers' quantizer-table lanes
(cli/engine/pool.py) change no result: a fixed-seed run gives the same statuses, reasons and
errors with the cache off, cold and warm, at -j 1 and -j 2; a warm run takes its references
from the cache; a run of several devices computes each reference once."""
import json
import os
import subprocess
import sys

import pytest

from cannops.cli.engine import refcache

OPS = [sys.executable, "-m", "cannops.cli.main"]
# quantized inputs whose libggml tables are costly (iq2_xxs, iq3_s: cli/engine/pool.py's lanes),
# a metric that takes the sources (TOP_K), a plain op, a fused case
CASES = ",".join([
    "MUL_MAT(type_a=iq2_xxs,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)",
    "GET_ROWS(type=iq3_s,n=256,m=5,r=4,be1=1,be2=1,v=0)",
    "TOP_K(type=f32,ne=[16,10,10,10],k=2,ties=0)",
    "ABS(type=f32,ne_a=[128,2,2,2],v=0)",
    "RMS_NORM_MUL_ADD(type=f32,ne=[64,5,4,3],eps=0.000000,broadcast=0,multi_add=0)",
])
FIELDS = ("device", "name", "status", "reason", "error", "threshold", "by", "note")


def run(tmp_path, *args, **env):
    p = subprocess.run([*OPS, "test", "-o", CASES, "--seed", "5", "--output", "json", *args],
                       capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert p.returncode in (0, 1), p.stderr
    doc = json.loads(p.stdout)
    return [tuple(r.get(k) for k in FIELDS) for r in doc["results"]], doc.get("reference_cache")


def test_the_cases_exist():
    from cannops.cli.engine.selection import select_cases
    assert len(select_cases("test", CASES)) == 5


def test_results_are_the_same_with_the_cache_off_cold_and_warm(tmp_path):
    where = str(tmp_path / "refs")
    off, counts = run(tmp_path, "-b", "GGML-CPU", "-j", "1", "--no-ref-cache")
    assert counts == {"hits": 0, "computed": 5} and not os.path.exists(where)
    cold, counts = run(tmp_path, "-b", "GGML-CPU", "-j", "2", OPS_REF_CACHE=where)
    assert counts == {"hits": 0, "computed": 5}
    warm, counts = run(tmp_path, "-b", "GGML-CPU", "-j", "2", OPS_REF_CACHE=where)
    assert counts["hits"] >= 3 and counts["hits"] + counts["computed"] == 5
    assert off == cold == warm
    assert [r[2] for r in off] == ["OK"] * 5
    # another seed is another reference
    _, counts = run(tmp_path, "-b", "GGML-CPU", "--seed", "6", OPS_REF_CACHE=where)
    assert counts["hits"] == 0


def test_a_broken_entry_is_computed_again(tmp_path):
    where = tmp_path / "refs"
    first, _ = run(tmp_path, "-b", "GGML-CPU", OPS_REF_CACHE=str(where))
    entries = [p for p in where.rglob("*.pickle")]
    assert entries
    for p in entries:
        p.write_bytes(p.read_bytes()[:20])    # a writer killed half way
    again, counts = run(tmp_path, "-b", "GGML-CPU", OPS_REF_CACHE=str(where))
    assert again == first and counts["hits"] == 0


def test_several_devices_compute_each_reference_once_even_without_the_cache(tmp_path):
    got, counts = run(tmp_path, "-b", "GGML-CPU,NUMPY", "--no-ref-cache")
    assert len(got) == 10
    # the second device reads what the first computed (all but entries too cheap to keep)
    assert counts["computed"] + counts["hits"] == 10 and counts["hits"] >= 3
    assert not [d for d in os.listdir(tmp_path.parent) if d.startswith("ops-references-")]


def test_entries_are_kept_only_where_worth_their_disk(tmp_path):
    import numpy as np
    big = {0: (np.zeros(refcache.MAX_ENTRY_BYTES // 4 + 1, np.float32), [])}
    small = {0: (np.ones(4, np.float32), [])}
    assert not refcache.store(tmp_path / "a" / "big.pickle", "X()", big, 100.0)
    assert not refcache.store(tmp_path / "a" / "cheap.pickle", "X()", {0: (np.zeros(10**6, np.float32), [])}, 1e-6)
    assert refcache.store(tmp_path / "a" / "small.pickle", "X()", small, 1e-3)
    assert refcache.load(tmp_path / "a" / "small.pickle", "Y()") is None    # another case's
    assert refcache.load(tmp_path / "a" / "small.pickle", "X()")[0][0].tolist() == [1, 1, 1, 1]


def test_prune_keeps_the_cache_under_its_limit(tmp_path, monkeypatch):
    import time
    for i in range(6):
        p = tmp_path / "ab" / f"{i}.pickle"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"x" * 300_000)
        os.utime(p, (time.time() + i, time.time() + i))
    monkeypatch.setenv("OPS_REF_CACHE_MAX_MB", "1")
    refcache.prune(tmp_path)
    assert sorted(p.name for p in (tmp_path / "ab").iterdir()) == ["3.pickle", "4.pickle", "5.pickle"]


@pytest.mark.parametrize("value", ["off", ""])
def test_location_follows_the_environment(monkeypatch, tmp_path, value):
    monkeypatch.setenv("OPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPS_REF_CACHE", value)
    assert refcache.location() == (None if value == "off" else tmp_path / "reference")
    assert refcache.location(enabled=False) is None


def test_inputs_needing_a_costly_table_are_kept_beside_the_reference(tmp_path):
    where = tmp_path / "refs"
    cold, _ = run(tmp_path, "-b", "GGML-CPU", OPS_REF_CACHE=str(where))
    # the iq2_xxs MUL_MAT and the iq3_s GET_ROWS: a re-run builds no quantizer table
    assert len(list(where.rglob("*.inputs.pickle"))) == 2
    warm, counts = run(tmp_path, "-b", "GGML-CPU", OPS_REF_CACHE=str(where))
    assert warm == cold and counts["hits"] >= 3
