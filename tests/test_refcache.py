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
NAMES = [
    "MUL_MAT(type_a=iq2_xxs,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)",
    "GET_ROWS(type=iq3_s,n=256,m=5,r=4,be1=1,be2=1,v=0)",
    "TOP_K(type=f32,ne=[16,10,10,10],k=2,ties=0)",
    "ABS(type=f32,ne_a=[128,2,2,2],v=0)",
    "RMS_NORM_MUL_ADD(type=f32,ne=[64,5,4,3],eps=0.000000,broadcast=0,multi_add=0)",
]
CASES = ",".join(NAMES)
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
    assert counts == {"hits": 0, "computed": 5, "rejected": 0} and not os.path.exists(where)
    cold, counts = run(tmp_path, "-b", "GGML-CPU", "-j", "2", OPS_REF_CACHE=where)
    assert counts == {"hits": 0, "computed": 5, "rejected": 0}
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
    refs = [p for p in entries if not p.name.endswith(".inputs.pickle")]
    assert again == first and counts["hits"] == 0 and counts["rejected"] == len(refs)


def test_several_devices_compute_each_reference_once_even_without_the_cache(tmp_path):
    got, counts = run(tmp_path, "-b", "GGML-CPU,NUMPY", "--no-ref-cache")
    assert len(got) == 10
    # the second device reads what the first computed (all but entries too cheap to keep)
    assert counts["computed"] + counts["hits"] == 10 and counts["hits"] >= 3
    assert not [d for d in os.listdir(tmp_path.parent) if d.startswith("ops-references-")]


def _key(case="X()"):
    return refcache.entry_key("0.20.2", case, 0)


def test_entries_are_kept_only_where_worth_their_disk(tmp_path):
    import numpy as np
    big = {0: (np.zeros(refcache.MAX_ENTRY_BYTES // 4 + 1, np.float32), [])}
    small = {0: (np.ones(4, np.float32), [])}
    entry = tmp_path / "ab" / ("0" * 38 + ".pickle")
    assert not refcache.store(entry, _key(), big, 100.0)
    assert not refcache.store(entry, _key(), {0: (np.zeros(10**6, np.float32), [])}, 1e-6)
    assert refcache.store(entry, _key(), small, 1e-3)
    assert refcache.load(entry, _key("Y()")) == (None, True)    # another case's: rejected
    refs, found = refcache.load(entry, _key("X()"))
    assert found and refs[0][0].tolist() == [1, 1, 1, 1]


def _entries(root, n, size=300_000):
    import time
    paths = []
    for i in range(n):
        p = root / "ab" / f"{i:038x}.pickle"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"x" * size)
        os.utime(p, (time.time() + i, time.time() + i))
        paths.append(p)
    return paths


def test_prune_keeps_the_cache_under_its_limit(tmp_path, monkeypatch):
    _entries(tmp_path, 6)
    monkeypatch.setenv("OPS_REF_CACHE_MAX_MB", "1")
    refcache.prune(tmp_path)
    assert sorted(p.name[-8:] for p in (tmp_path / "ab").iterdir()) == ["3.pickle", "4.pickle", "5.pickle"]


def test_prune_deletes_only_the_caches_own_entries(tmp_path, monkeypatch):
    """Issue 32, 1: files next to the entries (a user's, another tool's) are neither counted
    nor deleted, whatever their age and size."""
    import time
    _entries(tmp_path, 2)
    others = [tmp_path / "big.bin", tmp_path / "ab" / "notes.txt", tmp_path / "cd" / "x.pickle",
              tmp_path / "ab" / "0123.pickle"]
    for p in others:
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(b"y" * 400_000)
        os.utime(p, (time.time() - 10**6, time.time() - 10**6))   # older than every entry
    monkeypatch.setenv("OPS_REF_CACHE_MAX_MB", "0")
    refcache.prune(tmp_path)
    assert all(p.exists() for p in others)
    assert not list((tmp_path / "ab").glob("0" * 30 + "*.pickle"))


def _ops(*args, **env):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=600, env={**os.environ, **env})


@pytest.mark.parametrize("var", ["OPS_REF_CACHE", "OPS_CACHE_DIR"])
def test_a_cache_folder_of_other_things_is_refused_untouched(tmp_path, var):
    """Issue 32, 1: a cache pointed at a folder it did not make, holding other files, is one
    line and exit status 2; nothing there is written nor deleted."""
    folder = tmp_path / "mine"
    (folder / "ab").mkdir(parents=True)
    files = {folder / "notes.txt": b"my notes", folder / "ab" / "data.bin": b"z" * 100_000}
    for p, data in files.items():
        p.write_bytes(data)
    env = {var: str(folder), "OPS_REF_CACHE_MAX_MB": "0"}
    if var == "OPS_CACHE_DIR":
        env["OPS_REF_CACHE"] = ""
    p = _ops("test", "-b", "GGML-CPU", "-o", "ABS", "-p", r"ne_a=\[5,", **env)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert f"cache will not use {folder}: it holds" in p.stderr and "Traceback" not in p.stderr
    assert {q: q.read_bytes() for q in folder.rglob("*") if q.is_file()} == files
    # an empty folder, or a new one, is taken, and marked as the cache's
    for where in (tmp_path / "empty", tmp_path / "new" / "refs"):
        if where.name == "empty":
            where.mkdir()
        p = _ops("test", "-b", "GGML-CPU", "-o", "ABS", "-p", r"ne_a=\[5,", **{**env, var: str(where)})
        assert p.returncode == 0, p.stderr
        assert (where / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_a_cache_of_an_ops_without_markers_is_taken(tmp_path):
    """A folder holding only entries of the cache's own names (an earlier ops made it) is
    taken and marked; another cache's marker is refused."""
    (tmp_path / "refs").mkdir()
    _entries(tmp_path / "refs", 1)
    os.environ["OPS_REF_CACHE"] = str(tmp_path / "refs")
    try:
        assert refcache.location() == tmp_path / "refs"
        assert (tmp_path / "refs" / "CACHEDIR.TAG").exists()
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
        os.environ["OPS_REF_CACHE"] = str(tmp_path / "other")
        with pytest.raises(refcache.ForeignFolder, match="its CACHEDIR.TAG is not of the ops reference cache"):
            refcache.location()
    finally:
        del os.environ["OPS_REF_CACHE"]


def _tamper(path, at=0.6, n=64):
    """Garble n bytes of an entry's file from `at` of its length on (in its values)."""
    data = bytearray(path.read_bytes())
    i = int(len(data) * at)
    data[i:i + n] = bytes(b ^ 0xFF for b in data[i:i + n])
    path.write_bytes(bytes(data))


def test_a_changed_entry_is_a_miss_never_a_verdict(tmp_path):
    """Issue 32, 2: a reference entry whose values changed (a flipped bit, an edit) was
    taken: a correct device then failed in every later run. It is rejected, computed again
    and counted."""
    where = tmp_path / "refs"
    args = ["-b", "GGML-CPU", "-j", "1", "-o", "ABS,RMS_NORM_MUL_ADD", "-p", r"ne_a=\[128|ne=\[64,5"]
    first, counts = run(tmp_path, *args, OPS_REF_CACHE=str(where))
    entries = sorted(where.rglob("*.pickle"))
    refs = [p for p in entries if not p.name.endswith(".inputs.pickle")]   # inputs: garbled too
    # an entry is kept only where computing it took longer than reading it would: on an
    # idle machine some of these small references are not worth their disk (seen: 1 of 2)
    assert len(refs) >= 1 and counts["computed"] == len(first)
    for p in entries:
        _tamper(p)
    again, counts = run(tmp_path, *args, OPS_REF_CACHE=str(where))
    assert again == first and {r[2] for r in again} == {"OK"}
    assert counts["rejected"] == len(refs) and counts["hits"] == 0
    # computed again and kept whole (or, not worth their disk this time, removed): the next
    # run takes every entry there
    kept = len([p for p in where.rglob("*.pickle") if not p.name.endswith(".inputs.pickle")])
    _, counts = run(tmp_path, *args, OPS_REF_CACHE=str(where))
    assert counts["hits"] == kept and counts["rejected"] == 0


def test_an_entry_of_another_case_is_rejected(tmp_path):
    """An entry copied over another's (same shapes, another case) says what it is: rejected."""
    import numpy as np
    a, b = tmp_path / "ab" / ("1" * 38 + ".pickle"), tmp_path / "ab" / ("2" * 38 + ".pickle")
    refs = {3: (np.arange(8, dtype=np.float32), [])}
    assert refcache.store(a, _key("ABS(x)"), refs, 1.0)
    b.write_bytes(a.read_bytes())
    assert refcache.load(b, _key("ABS(x)")) == (None, True)   # another entry's name
    assert refcache.load(a, _key("SGN(x)")) == (None, True)
    assert refcache.load(a, {**_key("ABS(x)"), "seed": 1}) == (None, True)
    assert refcache.load(a, _key("ABS(x)"))[0][3][0].tolist() == list(range(8))


@pytest.mark.parametrize("value", ["off", ""])
def test_location_follows_the_environment(monkeypatch, tmp_path, value):
    monkeypatch.setenv("OPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("OPS_REF_CACHE", value)
    assert refcache.location() == (None if value == "off" else tmp_path / "reference")
    assert refcache.location(enabled=False) is None


def _kept_inputs(where) -> set[str]:
    """The cases whose inputs the cache holds, read from the entries' headers."""
    return {json.loads(p.read_bytes().split(b"\n")[1])["case"] for p in where.rglob("*.inputs.pickle")}


def test_inputs_needing_a_costly_table_are_kept_beside_the_reference(tmp_path):
    where = tmp_path / "refs"
    cold, _ = run(tmp_path, "-b", "GGML-CPU", OPS_REF_CACHE=str(where))
    # the iq2_xxs MUL_MAT and the iq3_s GET_ROWS: a re-run builds no quantizer table
    assert {c for c in NAMES if "iq" in c} <= _kept_inputs(where)
    warm, counts = run(tmp_path, "-b", "GGML-CPU", OPS_REF_CACHE=str(where))
    assert warm == cold and counts["hits"] >= 3


def test_inputs_costlier_to_draw_than_to_read_are_kept_and_read_back(tmp_path, monkeypatch):
    """A warm run draws and quantizes nothing it kept: a q4_K MUL_MAT's weights take a
    second to quantize, a read of them milliseconds (test_entries_are_kept_only_where_worth_their_disk:
    the rule)."""
    import numpy as np

    from cannops.cases.catalog import Case
    from cannops.cli.engine import execute
    from cannops.cli.engine.selection import select_cases
    slow = "MUL_MAT(type_a=q4_K,type_b=f32,m=1024,n=1,k=1024,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"
    (_, case), = select_cases("test", slow)
    g = case.build()
    first = execute._inputs(case, g, 5, str(tmp_path))
    assert _kept_inputs(tmp_path) == {case.name}
    monkeypatch.setattr(Case, "init_inputs", lambda *a, **k: pytest.fail("drawn again"))
    again = execute._inputs(case, g, 5, str(tmp_path))
    assert sorted(again) == sorted(first) and all(np.array_equal(first[i], again[i]) for i in first)


def test_the_key_follows_the_librarys_content_not_its_path_or_time(tmp_path, monkeypatch):
    """Issue 32, 8: the key held the library's path, size and mtime: a byte-identical rebuild
    (a CI's fresh checkout) never hit, two checkouts never shared. It holds the content's
    digest, computed once per build (kept under the file's path, size, time and inode)."""
    pytest.importorskip("cannops.native._ggml")
    from cannops.backend import ggml
    monkeypatch.setenv("OPS_CACHE_DIR", str(tmp_path / "cache"))
    lib, other = tmp_path / "a" / "libggml-cpu.so", tmp_path / "b" / "libggml-cpu.so"
    for p in (lib, other):
        p.parent.mkdir()
        p.write_bytes(b"\x7fELF build 1")
    monkeypatch.setattr(ggml, "library_files", lambda: [str(lib)])

    def identity():
        monkeypatch.setattr(refcache, "_identity", None)
        return refcache.entry_key("0.20.2", "ABS(x)", 0)["code"]
    first = identity()
    os.utime(lib, (1, 1))              # rebuilt, the same bytes
    assert identity() == first
    monkeypatch.setattr(ggml, "library_files", lambda: [str(other)])
    assert identity() == first         # another checkout of the same build
    other.write_bytes(b"\x7fELF build 2")
    assert identity() != first
    # computed once per build seen: the bridge, and the four stamps of the fakes
    assert len(list((tmp_path / "cache").glob("digest-*.pickle"))) == 5


def test_the_reference_cache_never_takes_the_names_caches_folder(tmp_path):
    """Found probing issue 32 again: OPS_REF_CACHE naming OPS_CACHE_DIR's folder, new, was
    marked as the reference cache's, and the names cache then refused its own folder in every
    later run. The names cache claims its folder first: the reference cache is refused."""
    env = {"OPS_CACHE_DIR": str(tmp_path / "c"), "OPS_REF_CACHE": str(tmp_path / "c")}
    p = _ops("test", "-b", "NUMPY", "-o", "ABS", "-p", r"ne_a=\[5,", **env)
    assert p.returncode == 2 and "the reference cache will not use" in p.stderr, p.stderr
    p = _ops("list", "ops", OPS_CACHE_DIR=str(tmp_path / "c"))
    assert p.returncode == 0 and "ABS" in p.stdout.split(), p.stderr


@pytest.mark.parametrize("limit", ["nan", "-5"])
def test_a_limit_that_is_no_number_of_megabytes_keeps_the_default(tmp_path, monkeypatch, limit):
    _entries(tmp_path, 3)
    monkeypatch.setenv("OPS_REF_CACHE_MAX_MB", limit)
    refcache.prune(tmp_path)
    assert len(list((tmp_path / "ab").iterdir())) == 3
