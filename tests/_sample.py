"""Deterministic samples of big case grids, and a check of sampled cases on a device
through the runner's own test path (cli/engine/execute.py), in this process.

    cases = sample(cases_of("ROPE", "ROPE_BACK"), 60)
    assert_ok("GGML-CPU", cases)

A sample is chosen by a hash of the case name, so it does not shift when a grid grows
elsewhere, and is returned in catalog order.
"""
from __future__ import annotations

import functools

from cannops.backend.base import open_device
from cannops.cases import all_cases
from cannops.cli.engine.execute import CaseOptions, test as run_test
from cannops.cli.engine.results import DEVIATION, NOT_SUPPORTED, OK
from cannops.cli.engine.selection import hash_sample as sample   # `ops test --sample`'s pick


@functools.lru_cache(maxsize=None)
def _catalog(mode: str) -> tuple:
    return tuple(all_cases(mode))


def cases_of(*ops: str, mode: str = "test") -> list:
    """Every catalog case of these op names (test mode: fused cases included); the catalog
    is enumerated once per mode and test session."""
    return [c for c in _catalog(mode) if c.op in ops]


def run_cases(device_name: str, cases: list, seed: int = 0) -> list:
    """CaseResults of the cases on the device, as `ops test` computes them."""
    dev = open_device(device_name)
    try:
        return [run_test(dev, c, CaseOptions(seed=seed)) for c in cases]
    finally:
        dev.close()


def assert_ok(device_name: str, cases: list, allow_unsupported: bool = False) -> list:
    """Every case is OK (or a recorded known deviation) on the device; returns the results.
    allow_unsupported: cases the device does not support are let through (never FAILs)."""
    results = run_cases(device_name, cases)
    bad = [f"{r.op}({r.params}): {r.status}: {r.reason}" for r in results
           if r.status not in (OK, DEVIATION) and not (allow_unsupported and r.status == NOT_SUPPORTED)]
    assert not bad, f"{len(bad)} of {len(results)} cases not OK on {device_name}:\n" + "\n".join(bad[:10])
    return results
