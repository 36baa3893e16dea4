"""What is pure, cached per version of the sources: the catalog's case names, and (for the
probe) each device's support decisions, under the user's cache directory.

A cache entry is named by a hash of the sources it derives from (the .py files of cases/,
and for support decisions backend/ and the device's own identity), so an edited catalog or
device never meets a stale entry. Nothing here imports NumPy or the catalog itself: with
a warm cache, `ops list cases` imports neither. OPS_CACHE_DIR moves the cache (`off`
disables it); an unwritable cache directory only costs the speed.

Every cache of ops (this one, and the reference cache: cli/engine/refcache.py) keeps to
the same two rules (docs/caches.md):
* it touches only what it made: its root holds its marker (MARKER, written when the cache
  made or first took the folder), and it creates, reads and deletes only entries of its own
  names there; a folder that holds anything else and has no marker is refused (ForeignFolder:
  one line, exit status 2), never written into nor pruned;
* an entry says what it is and carries a digest of its bytes (seal / unseal), both checked on
  every read: an entry that is not what was asked for, or whose bytes changed, is a miss
  (computed again), never taken as a result.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
import re
from operator import itemgetter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent   # the folder holding cases/, backend/, cli/
_hashes: dict[str, str] = {}

MARKER = "CACHEDIR.TAG"   # the cache-directory tag that backup tools know, with ops' own line
_TAG = "Signature: 8a477f597d28d172789f06886806bc55"   # bford.info/cachedir: the tag's first line
_ENTRY_MAGIC = b"ops-cache-entry/1\n"
# the names cache's own entries (and a writer's temporary file; digest-*: the reference cache's
# digests of libraries, cli/engine/refcache.py); `reference` is the reference cache's root,
# with a marker of its own
OWN_NAMES = re.compile(r"(names|families|probe|digest)-[\w.+-]+\.pickle|\.tmp-\w+|reference")


class ForeignFolder(Exception):
    """A cache folder that holds what the cache did not put there: refused (one line, exit
    status 2), as the cache would otherwise write there, and its prune delete there."""


def _owner_line(kind: str) -> str:
    return f"# a cache folder of ops (cannops): its {kind} cache. ops reads, writes and deletes only its own entries here."


def claim(root: Path, kind: str, own) -> Path | None:
    """`root` as the folder of the cache `kind`: made with its marker; or found with it; or an
    existing folder taken (the marker written) where it is empty or holds only entries that
    `own(entry: os.DirEntry)` says are this cache's (made by an ops without markers). A
    folder holding anything else, or another cache's marker: ForeignFolder. None where it
    cannot be made or marked (a read-only place: the cache is then off, costing speed)."""
    marker = root / MARKER
    try:
        text = marker.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        text = None
    except NotADirectoryError:
        return _refuse(root, kind, "it is not a folder")
    except OSError:
        return None if not root.is_dir() else _refuse(root, kind, f"its {MARKER} cannot be read")
    if text is not None:
        if text.startswith(_TAG) and _owner_line(kind) in text:
            return root
        return _refuse(root, kind, f"its {MARKER} is not of the ops {kind} cache")
    try:
        with os.scandir(root) as it:
            foreign = [e.name for e in it if not own(e)]
    except FileNotFoundError:
        foreign = []
    except NotADirectoryError:
        return _refuse(root, kind, "it is not a folder")
    except OSError:
        return None
    if foreign:
        return _refuse(root, kind, f"it holds {', '.join(sorted(foreign)[:3])}{', ...' if len(foreign) > 3 else ''}, "
                                   f"which ops did not put there")
    try:
        root.mkdir(parents=True, exist_ok=True)
        write_atomically(marker, f"{_TAG}\n{_owner_line(kind)}\n# see docs/caches.md in ops' sources\n".encode())
    except OSError:
        return None
    return root


def _refuse(root: Path, kind: str, why: str):
    var = "OPS_REF_CACHE" if kind == "reference" else "OPS_CACHE_DIR"
    raise ForeignFolder(f"the {kind} cache will not use {root}: {why} (set {var} to a new or empty folder, "
                        f"or to off)")


def seal(what: dict, obj) -> bytes:
    """An entry's bytes: a line saying what it is (`what`: its key fields, and where given
    the shapes and dtypes it holds) with the digest of its pickled object, then that object."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    head = dict(what, bytes=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return _ENTRY_MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + payload


def unseal(data: bytes, what: dict):
    """The object of an entry's bytes (seal) where it says it is `what` and its bytes match
    their digest; else None (a miss). Returns (object, its header)."""
    if not data.startswith(_ENTRY_MAGIC):
        return None, None
    end = data.find(b"\n", len(_ENTRY_MAGIC))
    try:
        head = json.loads(data[len(_ENTRY_MAGIC):end])
    except ValueError:
        return None, None
    payload = memoryview(data)[end + 1:]
    if (not isinstance(head, dict) or any(head.get(k) != v for k, v in what.items())
            or head.get("bytes") != len(payload) or head.get("sha256") != hashlib.sha256(payload).hexdigest()):
        return None, None
    try:
        return pickle.loads(payload), head
    except Exception:   # another Python's pickle
        return None, None


def write_atomically(path: Path, data: bytes) -> None:
    """A reader sees the old file or the new one, never half; on an error (a full disk) no
    temporary file is left behind and the OSError is raised."""
    import tempfile   # only where a cache is written: its imports (shutil, random) cost a run 4 ms
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


STALE_TMP_S = 3600   # a writer's temporary file this old is of a writer that died (kill -9)


def sweep_tmp(folder: Path) -> None:
    """Remove the temporary files of writers that died (.tmp-*, an hour old): the cache's own."""
    import time
    now = time.time()
    try:
        with os.scandir(folder) as it:
            for e in it:
                if e.name.startswith(".tmp-") and e.is_file(follow_symlinks=False) and \
                        now - e.stat(follow_symlinks=False).st_mtime > STALE_TMP_S:
                    os.unlink(e.path)
    except OSError:
        pass


_claimed: dict[str, Path | None] = {}


def cache_dir() -> Path | None:
    """The cache's folder (claimed: see claim), None when off or not writable.
    ForeignFolder where OPS_CACHE_DIR names a folder of other things."""
    where = os.environ.get("OPS_CACHE_DIR")
    if where == "off":
        return None
    if not where:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        where = os.path.join(base, "cannops-ops")
    if where not in _claimed:
        claimed = claim(Path(where), "names", lambda e: OWN_NAMES.fullmatch(e.name) is not None)
        if claimed is not None:
            sweep_tmp(claimed)
        _claimed[where] = claimed
    return _claimed[where]


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
    """The cached object called `name`, or None (absent, or not that entry: see unseal)."""
    d = cache_dir()
    if d is None:
        return None
    try:
        data = (d / name).read_bytes()
    except OSError:
        return None
    return unseal(data, {"entry": name})[0]


def store(name: str, obj) -> None:
    """Write atomically, sealed (a concurrent reader sees the old entry or the new one)."""
    d = cache_dir()
    if d is None:
        return
    try:
        write_atomically(d / name, seal({"entry": name}, obj))
    except OSError:
        pass


def discard(name: str) -> None:
    """Remove an entry found to be wrong (its next use computes it again)."""
    d = cache_dir()
    if d is not None and OWN_NAMES.fullmatch(name):
        try:
            os.unlink(d / name)
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
        from .catalog import StaleName, case_named, family_case
        op, vars, family, k, mode, version = self
        try:
            return family_case(family, version, mode, k, op, vars)
        except StaleName:
            # the names cache placed this name wrongly: it goes (the next run computes it
            # again), and the case is found by its name, so that what runs is what is named
            discard(_entry("names", mode, version))
            discard(_entry("families", mode, version))
            return case_named(mode, version, op, vars)


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
