"""The NumPy reference's outputs kept on disk: a case's reference is a pure function of the
catalog version, the case, the seed and the code that makes its inputs and computes it, so a
run computes it once for every device, and a run that comes again (a CI re-running the same
cases) pays only for the device.

An entry is named by a hash of (catalog version, case name, seed, the sources of cases/ and
backend/reference/, NumPy's version, and the libggml quantizer that makes quantized inputs),
and holds, per checked node, the reference values as the comparison reads them (and the
node's source values for a family whose metric takes them). It lives under the user's cache
directory (cases/cache.py: `OPS_CACHE_DIR`), in `reference/`; `OPS_REF_CACHE=off` or
`ops test --no-ref-cache` turns it off (a run of several devices then keeps its entries in a
temporary directory of its own, removed at the end), `OPS_REF_CACHE=DIR` moves it. Entries
of outputs over MAX_ENTRY_BYTES are not kept: reading them back would cost about what
computing them does, for the disk they take; nor those whose computation took less than
reading them back would (READ_SECONDS, then READ_BYTES_PER_S). The cache holds at most `OPS_REF_CACHE_MAX_MB`
(default MAX_MB): past that, a run that added entries removes the least recently written
first. An unreadable or unwritable entry only costs the speed.

It keeps to the rules of every ops cache (cases/cache.py, docs/caches.md): its folder holds
its marker, and it creates, reads and prunes only entries of its own names (XX/<38 hex>.pickle,
XX/<38 hex>.inputs.pickle); a folder of other things is refused. Each entry says what it is
(its kind, case, catalog version, seed, the code's identity, the shapes and dtypes it holds)
and carries a digest of its bytes, all checked on every read: an entry that fails is a miss,
computed again and counted (`rejected` in the run's reference_cache figures), never a verdict.

A case's inputs are kept too, beside its reference, by the same rule (drawing and
quantizing them took longer than reading them back would: a warm run then draws nothing,
and quantizes nothing), and always where its quantized leaves need one of libggml's costly
quantizer tables (cases/tables.py QUANTIZER_TABLES: seconds to build, once per process): a
re-run then builds no table at all.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
from pathlib import Path

from cannops.cases.cache import STALE_TMP_S, ForeignFolder, claim, seal, sweep_tmp, unseal, write_atomically

MAX_ENTRY_BYTES = 32 << 20
READ_BYTES_PER_S = 200e6   # reading an entry back, unpickling included, on a busy machine
READ_SECONDS = 1e-4        # ... and opening it, its header and digest: 70-140 us for a small one
MAX_MB = 2048
_identity: str | None = None
_SUB = re.compile(r"[0-9a-f]{2}")
_ENTRY = re.compile(r"[0-9a-f]{38}(\.inputs)?\.pickle")
_TMP = re.compile(r"\.tmp-\w+")
_claimed: dict[str, Path | None] = {}

__all__ = ["ForeignFolder", "location", "reference_dir", "entry_path", "entry_key", "load", "store", "prune"]


def _own(entry: os.DirEntry) -> bool:
    """An entry of the cache's root that an ops (with or without markers) made."""
    if not (_SUB.fullmatch(entry.name) and entry.is_dir(follow_symlinks=False)):
        return False
    with os.scandir(entry.path) as it:
        return all(_ENTRY.fullmatch(e.name) or _TMP.fullmatch(e.name) for e in it)


def location(enabled: bool = True) -> Path | None:
    """The directory of the reference cache, None when it is off (or cannot be made).
    ForeignFolder where it names a folder of other things (cases/cache.py claim)."""
    where = os.environ.get("OPS_REF_CACHE", "")
    if not enabled or where == "off":
        return None
    from cannops.cases.cache import cache_dir
    # the names cache's root is claimed first: an OPS_REF_CACHE naming it is then refused
    # (its marker is the names cache's), never marked as the reference cache's
    base = cache_dir()
    if not where:
        if base is None:
            return None
        where = str(base / "reference")
    if where not in _claimed:
        _claimed[where] = claim(Path(where), "reference", _own)
    return _claimed[where]


reference_dir = location   # the engine's API name (cli/engine/__init__.py)


def _code_identity() -> str:
    """What a reference depends on besides the case and the seed: the sources that make the
    inputs and compute the reference, NumPy, and libggml's quantizer (quantized inputs)."""
    global _identity
    if _identity is None:
        import numpy as np

        from cannops.cases.cache import sources_hash
        parts = [sources_hash("cases", "backend/reference"), np.__version__]
        try:
            from cannops.backend.ggml import library_files
            from cannops.native import _ggml
            files = dict.fromkeys(os.path.realpath(f) for f in [_ggml.__file__, *library_files()])
            parts += [content_digest(f) for f in files]
        except Exception:   # no bridge: the NumPy quantizers make the inputs
            parts.append("numpy-quantizers")
        _identity = hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]
    return _identity


def content_digest(path: str) -> str:
    """The SHA-256 of a file's bytes (a library: its content, not its path nor its time, so
    that a byte-identical rebuild, or another checkout of the same build, shares the
    entries), computed once per build: kept in the names cache (cases/cache.py) under the
    file's path, size, time and inode, which a rebuild changes."""
    from cannops.cases import cache
    st = os.stat(path)
    stamp = f"{path}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
    entry = f"digest-{hashlib.sha256(stamp.encode()).hexdigest()[:24]}.pickle"
    known = cache.load(entry)
    if isinstance(known, dict) and known.get("stamp") == stamp:
        return known["sha256"]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    cache.store(entry, {"stamp": stamp, "sha256": h.hexdigest()})
    return h.hexdigest()


def entry_key(version: str, case_name: str, seed: int, what: str = "reference") -> dict:
    """What an entry is: the fields it is named by, which it carries and a read checks."""
    return {"kind": what, "catalog": version, "case": case_name, "seed": seed, "code": _code_identity()}


def entry_path(where: Path, version: str, case_name: str, seed: int, what: str = "reference") -> Path:
    """The entry of a case's reference, or (what="inputs") of its inputs."""
    h = hashlib.sha256(f"{version}|{case_name}|{seed}|{_code_identity()}".encode()).hexdigest()
    return where / h[:2] / f"{h[2:40]}{'' if what == 'reference' else '.' + what}.pickle"


def _arrays(value) -> list:
    """The shapes and dtypes of a reference entry's value (values, source values) or of an
    input's data, as the entry's header records them."""
    arrays = [value[0], *value[1]] if isinstance(value, tuple) else [value]
    return [None if a is None else [list(a.shape), a.dtype.str] for a in arrays]


def _describe(refs: dict) -> dict:
    return {str(i): _arrays(v) for i, v in refs.items()}


def load(path: Path, key: dict) -> tuple[dict | None, bool]:
    """The entry's dict ({node index: (reference values, source values)}, or {leaf index:
    data} for inputs) where it is the entry of `key` (entry_key), holds the shapes and dtypes
    it says and its bytes match their digest; and whether an entry was there (one there and
    None: it was rejected)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None, False
    refs, head = unseal(data, {**key, "entry": _name(path)})
    try:
        if refs is not None and isinstance(refs, dict) and _describe(refs) == head.get("arrays"):
            return refs, True
    except Exception:   # not arrays where arrays were said to be
        pass
    return None, True


def _name(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


def store(path: Path, key: dict, refs: dict, seconds: float) -> bool:
    """Keep the entry, computed in `seconds`, if it is worth its disk (True: kept; else an
    entry there, rejected by load, goes). Written atomically: a reader sees the whole entry
    or none."""
    size = sum(map(_nbytes, refs.values()))
    if size > MAX_ENTRY_BYTES or seconds < READ_SECONDS + size / READ_BYTES_PER_S:
        _unlink(str(path))
        return False
    try:
        path.parent.mkdir(exist_ok=True)   # the root is the claimed cache's: never made here
        write_atomically(path, seal({**key, "entry": _name(path), "arrays": _describe(refs)}, refs))
    except OSError:
        return False
    return True


def _nbytes(value) -> int:
    """Bytes of a reference entry's value (values, source values) or of an input's data."""
    if isinstance(value, tuple):
        ref, srcs = value
        return ref.nbytes + sum(s.nbytes for s in srcs if s is not None)
    return value.nbytes


def prune(where: Path | str) -> None:
    """Keep the cache under OPS_REF_CACHE_MAX_MB: the entries written longest ago go first.
    Only the cache's own entries count and go (and temporary files of writers long dead);
    nothing else in the folder is looked at."""
    try:
        limit = float(os.environ.get("OPS_REF_CACHE_MAX_MB", MAX_MB)) * 2**20
    except ValueError:
        limit = MAX_MB * 2**20
    if not limit >= 0:   # nan, or below 0: a slip, not "remove every entry"
        limit = MAX_MB * 2**20
    where = Path(where)
    sweep_tmp(where)   # the marker's writer's
    entries, now = [], time.time()
    try:
        subs = [e.path for e in os.scandir(where) if _SUB.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return
    for sub in subs:
        try:
            with os.scandir(sub) as it:
                for e in it:
                    if not e.is_file(follow_symlinks=False):
                        continue
                    st = e.stat(follow_symlinks=False)
                    if _ENTRY.fullmatch(e.name):
                        entries.append((st.st_mtime, st.st_size, e.path))
                    elif _TMP.fullmatch(e.name) and now - st.st_mtime > STALE_TMP_S:
                        _unlink(e.path)
        except OSError:
            continue
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= limit:
            break
        if _unlink(p):
            total -= size


def _unlink(path: str) -> bool:
    try:
        os.unlink(path)
        return True
    except OSError:
        return False
