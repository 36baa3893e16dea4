"""`ops support`'s probe from the cache: a device's support decisions are pure (the catalog's
sources, the device's sources and its library decide them), so a probe that ran once is
answered again from the user's cache without building a graph or starting a worker.

The cache holds, per device key (cases.cache), the DeviceInfo of the probe that filled it
and each case's status and reason; a probe whose cases are not all there runs as before
(workers, graphs) and adds its answers.
"""
from __future__ import annotations

import hashlib

from cannops.cases import cache
from cannops.cases.versions import current

from . import __version__
from .options import check_common, checked_selection, ops_text, selected_devices
from .results import NOT_SUPPORTED, OK, CaseResult, Run
from .selection import BadInput


def _entry(device: str) -> str | None:
    """The cache entry of a device's decisions, or None when they are not cached."""
    from cannops.backend.base import probe_key
    key = probe_key(device)
    if key is None:
        return None
    # the cases and the CANN rules follow the catalog version
    h = hashlib.sha256(f"{key}|{current()}|{cache.sources_hash('cases', 'backend', 'native')}".encode())
    return f"probe-{h.hexdigest()[:24]}.pickle"


def cached_probe(ops, params, backends, jobs, timeout, seed, shard, soc=None) -> Run | None:
    """The probe's Run from the cache, exactly as the workers would have made it; None when
    a device or a case is not cached (or the cache is off). Bad input raises as run_mode."""
    check_common(jobs, timeout, seed)
    ops = ops_text(ops)
    if cache.cache_dir() is None:
        return None
    cases = checked_selection("support", ops, params, shard, names_only=True)
    targets = selected_devices(backends, soc=soc)
    if not targets:
        raise BadInput("no device available (see `ops list devices`)")
    run = Run(mode="support", seed=seed, ops_filter=ops, params_filter=params, shard=shard, version=__version__,
              catalog=current())
    for target in targets:
        # one CANN-SIM per SoC (--soc 910B,310P) is probed anew: the key names one SoC only
        entry = _entry(target.label) if target.members == (target.label,) and not target.env else None
        stored = cache.load(entry) if entry else None
        if stored is None:
            return None
        decisions = stored["decisions"]
        try:
            run.results.extend(CaseResult(target.label, c.op, c.vars, *decisions[c.name], index=idx)
                               for idx, c in cases)
        except KeyError:
            return None
        run.devices.append(stored["info"])
    return run


def remember(run: Run) -> None:
    """Keep the decisions of a finished probe (its OK and not supported cases), device by
    device, added to what the cache held."""
    if run.interrupted or cache.cache_dir() is None:
        return
    from cannops.backend.base import list_devices
    known = {name for name, _ in list_devices([info.name for info in run.devices])}
    decided: dict[str, list] = {}
    for r in run.results:
        if r.status in (OK, NOT_SUPPORTED) and not r.ran_on:
            decided.setdefault(r.device, []).append(r)
    for info in run.devices:
        if info.name not in known:
            continue   # CANN-SIM:<SOC> (--soc with several SoCs): not a discovered device
        entry = _entry(info.name)
        if entry is None:
            continue
        stored = cache.load(entry) or {"decisions": {}}
        stored["info"] = info
        stored["decisions"].update((f"{r.op}({r.params})", (r.status, r.reason)) for r in decided.get(info.name, ()))
        cache.store(entry, stored)
