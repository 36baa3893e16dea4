"""Catalog versions: the ggml releases whose test-backend-ops the catalog mirrors, and the
one in use.

v0.20.2 is the catalog as the families declare it (the libggml-python wheel's ggml); each
later version is a delta on the one before, declared on the families (`Since` entries,
catalog.py). The version in use is, in order: OPS_CATALOG (set by `--catalog`, inherited
by the worker processes), the version of the ggml the GGML devices run (the newest catalog
version not after it), and the newest when there is no ggml bridge. Nothing here imports
NumPy or the catalog.
"""
from __future__ import annotations

import functools
import os

VERSIONS = ("0.20.2", "0.25.3")
OLDEST, NEWEST = VERSIONS[0], VERSIONS[-1]
ENV = "OPS_CATALOG"


@functools.lru_cache(maxsize=None)   # asked by graph builders of every case (Graph.ggml_at_least)
def key(version: str) -> tuple[int, ...]:
    """'v0.25.3' or '0.25.3' -> (0, 25, 3)."""
    return tuple(int(x) for x in version.strip().lstrip("v").split("."))


def normalize(version: str) -> str:
    """A catalog version as `--catalog` may give it ('v0.20.2', '0.25.3'); ValueError
    names the known ones."""
    try:
        k = key(version)
    except ValueError:
        k = None
    for v in VERSIONS:
        if key(v) == k:
            return v
    raise ValueError(f"unknown catalog version {version!r} (known: {', '.join(VERSIONS)})")


def for_ggml(ggml_version: str | None) -> str:
    """The catalog of a ggml release: the newest catalog version not after it (the oldest
    for an older ggml; the newest when its version is unknown)."""
    try:
        k = key(ggml_version or "")
    except ValueError:
        return NEWEST
    older = [v for v in VERSIONS if key(v) <= k]
    return older[-1] if older else OLDEST


@functools.lru_cache(maxsize=None)
def ggml_version() -> str | None:
    """The version of the libggml the bridge loads, None without a bridge."""
    try:
        from cannops.native._ggml import ffi, lib
        return ffi.string(lib.ggml_version()).decode()
    except Exception:   # no bridge built, no libggml: a run with no ggml device
        return None


def current() -> str:
    """The catalog version in use in this process (see the module's docstring)."""
    wanted = os.environ.get(ENV)
    if wanted:
        return normalize(wanted)
    return for_ggml(ggml_version())


def describe() -> str:
    """The catalog in use and why, for `ops list devices`."""
    v, g = current(), ggml_version()
    why = ("--catalog / OPS_CATALOG" if os.environ.get(ENV) and (g is None or for_ggml(g) != v)
           else f"that of the GGML devices' ggml {g}" if g else "the newest: no ggml device")
    return f"{v} ({why}; known: {', '.join(VERSIONS)})"


def use(version: str | None) -> str:
    """Select a catalog version for this process and its workers (None: the default);
    returns it. ValueError for an unknown version."""
    v = normalize(version) if version else current()
    os.environ[ENV] = v
    return v


def at_or_after(version: str, since: str) -> bool:
    return key(version) >= key(since)
