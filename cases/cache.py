"""What is pure, cached per version of the sources: the catalog's case names, and (for the
probe) each device's support decisions, under the user's cache directory.

A cache entry is named by a hash of the sources it derives from (the .py files of cases/,
and for support decisions backend/ and the device's own identity), so an edited catalog or
device never meets a stale entry. Nothing here imports NumPy or the catalog itself: with
a warm cache, `ops list cases` imports neither. OPS_CACHE_DIR moves the cache (`off`
disables it); an unwritable cache directory only costs the speed.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle
from operator import itemgetter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent   # the folder holding cases/, backend/, cli/
_hashes: dict[str, str] = {}


def cache_dir() -> Path | None:
    where = os.environ.get("OPS_CACHE_DIR")
    if where == "off":
        return None
    if where:
        return Path(where)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cannops-ops"


def sources_hash(*folders: str) -> str:
    """A hash of every .py file under the folders (relative path and content)."""
    key = ",".join(folders)
    if key not in _hashes:
        h = hashlib.sha256()
        for folder in folders:
            for path in sorted((ROOT / folder).rglob("*.py")):
                h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
        _hashes[key] = h.hexdigest()[:24]
    return _hashes[key]


def load(name: str):
    """The cached object called `name`, or None."""
    d = cache_dir()
    if d is None:
        return None
    try:
        with open(d / name, "rb") as f:
            return pickle.load(f)
    except Exception:   # absent, unreadable or from an incompatible Python: recompute
        return None


def store(name: str, obj) -> None:
    """Write atomically (a concurrent reader sees the old entry or the new one, never half)."""
    d = cache_dir()
    if d is None:
        return
    try:
        import tempfile
        d.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(obj, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, d / name)
    except OSError:
        pass


class CaseName(tuple):
    """A case as far as its name goes: (op, vars), without its family, params or graph."""

    __slots__ = ()
    op = property(itemgetter(0))     # C-level getters: a selection reads them 20,000 times
    vars = property(itemgetter(1))
    name = property(lambda self: f"{self[0]}({self[1]})")


class CaseRef(CaseName):
    """A catalog case as a selection hands it to a worker: its name, and where its family
    enumerates it ((op, vars, family, k, mode, version): the k-th case of that family in
    `mode`), so that choosing and sending cases imports neither NumPy nor the catalog:
    the worker builds the Case (`resolve`). A built Case resolves to itself."""

    __slots__ = ()

    def resolve(self):
        from .catalog import family_case
        op, vars, family, k, mode, version = self
        return family_case(family, version, mode, k, op, vars)


def case_refs(mode: str, positions: list[int], version: str | None = None) -> list[CaseRef]:
    """The cases at these positions of catalog.all_cases(mode, version), ascending, as
    CaseRefs: their names from the names cache, their families from the family runs."""
    from .versions import current
    version = version or current()
    names = case_names(mode, version)
    out, runs, start = [], iter(family_runs(mode, version)), 0
    family, end = None, 0
    for pos in positions:
        while pos >= end:
            start = end
            family, n = next(runs)
            end = start + n
        out.append(CaseRef((*names[pos], family, pos - start, mode, version)))
    return out


def op_names() -> list[str]:
    """Every op name of the catalog (test mode has them all), sorted."""
    return sorted({c[0] for c in case_names("test")})


def case_names(mode: str, version: str | None = None) -> list[CaseName]:
    """The names of catalog.all_cases(mode, version), in its order; computed once per
    version of the sources and catalog version (default: the one in use)."""
    from .versions import current
    version = version or current()
    return _case_names(_entry("names", mode, version), str(cache_dir()), mode, version)


@functools.lru_cache(maxsize=None)
def _case_names(entry: str, where: str, mode: str, version: str) -> list[CaseName]:
    """Read once per process and cache entry (a selection and the op names both read them)."""
    rows = load(entry)
    if rows is None:
        rows, _ = _enumerate(mode, version)
    return list(map(CaseName, rows))


def family_runs(mode: str, version: str | None = None) -> list[tuple[str, int]]:
    """The catalog's order by family: (family name, number of its cases) in turn, so that a
    selection builds the cases of the families it picks from, not the whole catalog."""
    from .versions import current
    version = version or current()
    return _family_runs(_entry("families", mode, version), str(cache_dir()), mode, version)


@functools.lru_cache(maxsize=None)
def _family_runs(entry: str, where: str, mode: str, version: str) -> list[tuple[str, int]]:
    runs = load(entry)
    if runs is None:
        _, runs = _enumerate(mode, version)
    return runs


def _entry(what: str, mode: str, version: str) -> str:
    return f"{what}-{mode}-{sources_hash('cases')}-{version}.pickle"


def _enumerate(mode: str, version: str):
    """Names and family runs of the whole catalog, computed (once per process) and stored."""
    rows, runs = _computed(mode, version, sources_hash("cases"))
    store(_entry("names", mode, version), rows)
    store(_entry("families", mode, version), runs)
    return rows, runs


@functools.lru_cache(maxsize=None)
def _computed(mode: str, version: str, sources: str):
    from .catalog import all_cases
    cases = all_cases(mode, version)
    rows = [(c.op, c.vars) for c in cases]
    runs: list[tuple[str, int]] = []
    for c in cases:
        if runs and runs[-1][0] == c.family.name:
            runs[-1] = (c.family.name, runs[-1][1] + 1)
        else:
            runs.append((c.family.name, 1))
    return rows, runs
