"""The cache of pure results (cases/cache.py, cli/probe.py): the cached names and support
decisions are exactly those computed without it."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from cannops.backend.base import list_devices
from cannops.cases import cache
from cannops.cases.versions import current
from cannops.cli import probe
from tests._sample import _catalog, sample

OPS = [sys.executable, "-m", "cannops.cli.main"]
DEVICES = [n for n, _ in list_devices()]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OPS_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("mode", ["test", "support", "perf"])
def test_cached_names_are_the_catalogs(cache_dir, mode):
    catalog = [(c.op, c.vars) for c in _catalog(mode)]
    assert cache.case_names(mode) == catalog           # computed, then stored
    assert list(cache_dir.glob(f"names-{mode}-{cache.sources_hash('cases')}-{current()}.pickle"))
    cached = cache.case_names(mode)                    # read back
    assert cached == catalog and all(c.name == f"{op}({v})" for c, (op, v) in zip(cached[:50], catalog))


def test_a_cache_from_other_sources_is_not_read(cache_dir):
    cache.store(f"names-perf-{cache.sources_hash('cases')}-{current()}.pickle", [("ADD", "stale")])
    assert cache.case_names("perf")[0] == ("ADD", "stale")   # the entry of these sources is read
    cache._hashes["cases"] = "another-version"
    try:
        assert cache.case_names("perf")[0] != ("ADD", "stale")
    finally:
        cache._hashes.pop("cases")


def test_names_selection_matches_the_catalogs():
    from cannops.cli.engine.selection import select_cases
    for args in (("test", "ADD,MUL_MAT", "f16", None), ("support", None, "type=q4_0", "3/7"),
                 ("test", "SOFT_MAX(type=f32,ne=[16,16,1,1],mask=0,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,inplace=0)", None, None)):
        full = [(i, c.name) for i, c in select_cases(*args)]
        names = [(i, c.name) for i, c in select_cases(*args, names_only=True)]
        assert names == full and full


@pytest.mark.parametrize("mode", ["test", "support", "perf"])
def test_case_references_build_the_catalogs_cases(mode):
    # a worker builds each case from its reference (family, place) and the name the
    # names cache gives it, without formatting the name again: the params must be those
    # the catalog's own enumeration gives that name
    catalog = _catalog(mode)
    refs = cache.case_refs(mode, list(range(len(catalog))))
    built = [r.resolve() for r in refs]
    assert [(c.name, c.family.name, c.params, c.mode) for c in built] == \
        [(c.name, c.family.name, c.params, c.mode) for c in catalog]
    assert [c.vars for c in built[::97]] == [c.family.vars_str(c.params) for c in built[::97]]


def _support(env_cache, *args):
    env = dict(os.environ, OPS_CACHE_DIR=env_cache)
    p = subprocess.run([*OPS, "support", "--output", "json", *args], capture_output=True, text=True,
                       env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    return doc["devices"], doc["results"]


def test_cached_probe_gives_the_computed_decisions(cache_dir):
    names = sorted({c.name for c in sample(list(_catalog("support")), 150)})
    args = ["-o", ",".join(names)]
    args_kw = dict(ops=(",".join(names),), params=None, backends=(), jobs=1, timeout=None, seed=0, shard=None)
    run, known, _ = probe.cached_probe(**args_kw)
    assert run is None and not known.results              # nothing cached yet
    uncached = _support("off", *args)
    cold = _support(str(cache_dir), *args)                 # computed, and remembered
    run, known, _ = probe.cached_probe(**args_kw)
    assert run is not None and len(run.results) == len(uncached[1]) == len(known.results)
    warm = _support(str(cache_dir), *args)                 # answered from the cache
    for got in (cold, warm):
        assert got[0] == uncached[0]
        diff = [(a, b) for a, b in zip(got[1], uncached[1]) if a != b]
        assert not diff and len(got[1]) == len(uncached[1]), diff[:2]
    statuses = {r["status"] for r in uncached[1]}
    assert statuses == {"OK", "not supported"}             # the sample has both kinds of answer
    # a probe of cases some of which are not cached yet computes them (them only), and
    # remembers them
    more = ["-o", ",".join(names) + ",ABS"]
    more_kw = dict(args_kw, ops=(",".join(names) + ",ABS",))
    run, known, _ = probe.cached_probe(**more_kw)
    assert run is None and len(known.results) == len(uncached[1])
    assert _support(str(cache_dir), *more) == _support("off", *more)
    run, known, _ = probe.cached_probe(**more_kw)
    assert run is not None and len(run.results) == len(uncached[1]) + 2 * 8


@pytest.mark.skipif("GGML-CPU" not in DEVICES, reason="no ggml bridge")
def test_a_rebuilt_library_is_another_device(tmp_path, monkeypatch):
    """The ggml device's key names its library files by size and time: decisions of an
    old build are not taken for a new one."""
    from cannops.backend import ggml
    assert all(f in ggml.probe_key("GGML-CPU") for f in ggml.library_files()) and ggml.library_files()
    fake = tmp_path / "libggml-cpu.so"
    fake.write_bytes(b"old")
    monkeypatch.setattr(ggml, "library_files", lambda: [str(fake)])
    before = ggml.probe_key("GGML-CPU")
    fake.write_bytes(b"rebuilt")
    assert ggml.probe_key("GGML-CPU") != before


# --- issue 32: an entry is what it says it is, or a miss -----------------------------------------

def _edit_by_hand(path, fn):
    """Change an entry's object as a user would with pickle, leaving the rest of the file be."""
    import pickle
    data = path.read_bytes()
    magic = b"ops-cache-entry/1\n"
    end = data.index(b"\n", len(magic)) + 1 if data.startswith(magic) else 0
    path.write_bytes(data[:end] + pickle.dumps(fn(pickle.loads(data[end:]))))


def _table(env_cache, *args):
    env = dict(os.environ, OPS_CACHE_DIR=env_cache, COLUMNS="200")
    p = subprocess.run([*OPS, "support", *args], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_support_decisions_set_by_hand_are_not_taken(tmp_path):
    """Issue 32, 2: decisions edited in the cache made `ops support` print `supported` for a
    partial op; the entry's digest no longer matches: a miss, probed again."""
    args = ("-b", "CANN-SIM", "-o", "GET_ROWS", "-p", "type=f16|type=q4_0")
    first = _table(str(tmp_path), *args)
    assert "partial" in first
    entries = list(tmp_path.glob("probe-*.pickle"))
    assert len(entries) == 1

    def all_supported(stored):
        stored["decisions"] = {name: ("OK", "") for name in stored["decisions"]}
        return stored
    _edit_by_hand(entries[0], all_supported)
    assert _table(str(tmp_path), *args) == first


def test_a_names_cache_edited_by_hand_relabels_nothing(tmp_path):
    """Issue 32, 3: two names swapped in the names cache ran each case under the other's name,
    and the wrong reference then stayed in the reference cache (the next run, with a sound
    names cache, failed): the edited entry is a miss, and no reference is kept wrongly."""
    a, b = "ABS(type=f16,ne_a=[128,2,2,2],v=0)", "ABS(type=f16,ne_a=[5,7,11,13],v=0)"
    env = dict(os.environ, OPS_CACHE_DIR=str(tmp_path / "c"), OPS_REF_CACHE=str(tmp_path / "r"))

    def test_a():
        p = subprocess.run([*OPS, "test", "-b", "GGML-CPU", "-o", a, "--output", "json"], capture_output=True,
                           text=True, env=env, timeout=600)
        assert p.returncode == 0, (p.stdout[-2000:], p.stderr[-2000:])
        return [(r["name"], r["status"]) for r in json.loads(p.stdout)["results"]]
    assert test_a() == [(a, "OK")]
    names = next((tmp_path / "c").glob("names-test-*.pickle"))

    def swap(rows):
        i, j = rows.index(tuple(a[:-1].split("(", 1))), rows.index(tuple(b[:-1].split("(", 1)))
        rows[i], rows[j] = rows[j], rows[i]
        return rows
    _edit_by_hand(names, swap)
    shutil.rmtree(tmp_path / "r")
    assert test_a() == [(a, "OK")]
    names.unlink()
    assert test_a() == [(a, "OK")]


def test_a_case_is_never_resolved_under_another_name(cache_dir):
    """Issue 32, 3: even a names entry that is whole but wrong (sealed with swapped names)
    resolves each name to its own case, and the wrong entry goes."""
    from cannops.cases.catalog import case_named
    a, b = ("ABS", "type=f16,ne_a=[128,2,2,2],v=0"), ("ABS", "type=f16,ne_a=[5,7,11,13],v=0")
    rows = list(cache.case_names("test"))
    entry = f"names-test-{cache.sources_hash('cases')}-{current()}.pickle"
    i, j = rows.index(a), rows.index(b)
    rows[i], rows[j] = rows[j], rows[i]
    cache.store(entry, [tuple(r) for r in rows])
    cache._case_names.cache_clear()
    try:
        ref, = cache.case_refs("test", [i])
        assert ref.name == "ABS(" + b[1] + ")"
        case = ref.resolve()
        assert (case.op, case.vars) == b and case.params == case_named("test", current(), *b).params
        assert not (cache_dir / entry).exists()   # the next run enumerates the names again
    finally:
        cache._case_names.cache_clear()


def test_a_full_disk_leaves_no_temporary_file(cache_dir, monkeypatch):
    """Issue 32, 9: on a full disk cache.store left its .tmp-* files, which nothing removed;
    those a killed writer leaves go after an hour."""
    import errno
    import time

    class Full:
        def __reduce__(self):
            raise OSError(errno.ENOSPC, "No space left on device")
    cache.store("names-x.pickle", [Full()])                 # the write fails half way
    real = os.replace

    def full(*a):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    cache.store("names-y.pickle", [1, 2, 3])                # the rename fails
    monkeypatch.setattr(os, "replace", real)
    assert sorted(p.name for p in cache_dir.iterdir()) == ["CACHEDIR.TAG"]
    old, new = cache_dir / ".tmp-dead1", cache_dir / ".tmp-live1"
    for p in (old, new):
        p.write_bytes(b"x")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    cache._claimed.clear()
    cache.cache_dir()
    assert not old.exists() and new.exists()
