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
reading them back would (at READ_BYTES_PER_S). The cache holds at most `OPS_REF_CACHE_MAX_MB`
(default MAX_MB): past that, a run that added entries removes the least recently written
first. An unreadable or unwritable entry only costs the speed.

The inputs of a case whose quantized leaves need one of libggml's costly quantizer tables
(cases/tables.py QUANTIZER_TABLES: seconds to build, once per process) are kept too, beside
its reference: a re-run then builds no table at all.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

MAX_ENTRY_BYTES = 32 << 20
READ_BYTES_PER_S = 200e6   # reading an entry back, unpickling included, on a busy machine
MAX_MB = 2048
_identity: str | None = None


def location(enabled: bool = True) -> Path | None:
    """The directory of the reference cache, None when it is off."""
    where = os.environ.get("OPS_REF_CACHE", "")
    if not enabled or where == "off":
        return None
    if where:
        return Path(where)
    from cannops.cases.cache import cache_dir
    base = cache_dir()
    return None if base is None else base / "reference"


def _code_identity() -> str:
    """What a reference depends on besides the case and the seed: the sources that make the
    inputs and compute the reference, NumPy, and libggml's quantizer (quantized inputs)."""
    global _identity
    if _identity is None:
        import numpy as np

        from cannops.cases.cache import sources_hash
        parts = [sources_hash("cases", "backend/reference"), np.__version__]
        try:
            from cannops.backend.base import file_identity
            from cannops.backend.ggml import library_files
            from cannops.native import _ggml
            parts += [file_identity(_ggml.__file__)] + [file_identity(f) for f in library_files()]
        except Exception:   # no bridge: the NumPy quantizers make the inputs
            parts.append("numpy-quantizers")
        _identity = "|".join(parts)
    return _identity


def entry_path(where: Path, version: str, case_name: str, seed: int, what: str = "reference") -> Path:
    """The entry of a case's reference, or (what="inputs") of its inputs."""
    h = hashlib.sha256(f"{version}|{case_name}|{seed}|{_code_identity()}".encode()).hexdigest()
    return where / h[:2] / f"{h[2:40]}{'' if what == 'reference' else '.' + what}.pickle"


def load(path: Path, case_name: str) -> dict | None:
    """The entry's dict ({node index: (reference values, source values)}, or {leaf index:
    data} for inputs), or None."""
    try:
        with open(path, "rb") as f:
            name, refs = pickle.load(f)
    except Exception:   # absent, half-written by a crashed writer, another Python: recompute
        return None
    return refs if name == case_name else None


def store(path: Path, case_name: str, refs: dict, seconds: float) -> bool:
    """Keep the entry, computed in `seconds`, if it is worth its disk (True: kept). Written
    atomically: a reader sees the whole entry or none."""
    size = sum(map(_nbytes, refs.values()))
    if size > MAX_ENTRY_BYTES or seconds < size / READ_BYTES_PER_S:
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump((case_name, refs), f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
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
    """Keep the cache under OPS_REF_CACHE_MAX_MB: the entries written longest ago go first."""
    try:
        limit = float(os.environ.get("OPS_REF_CACHE_MAX_MB", MAX_MB)) * 2**20
    except ValueError:
        limit = MAX_MB * 2**20
    where = Path(where)
    entries = []
    for sub in (where.iterdir() if where.is_dir() else ()):
        try:
            with os.scandir(sub) as it:
                entries += [(e.stat().st_mtime, e.stat().st_size, e.path) for e in it if e.is_file()]
        except OSError:
            continue
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(p)
            total -= size
        except OSError:
            pass
