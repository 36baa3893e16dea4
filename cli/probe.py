"""`ops support`'s probe from the cache: a device's support decisions are pure (the catalog's
sources, the device's sources and its library decide them), so a probe that ran once is
answered again from the user's cache without building a graph or starting a worker.

The cache holds, per device key (cases.cache), the DeviceInfo of the probe that filled it
and each case's status, reason and evidence level; a probe whose cases are not all there runs as before
(workers, graphs) and adds its answers.
"""
from __future__ import annotations

import hashlib

from cannops.cases import cache
from cannops.cases.versions import current

from . import __version__
from .options import check_common, checked_selection, graph_file_cases, selected_devices, selection_ops
from .engine import NOT_SUPPORTED, OK, BadInput, CaseResult, Resumed, Run


def _entry(device: str) -> str | None:
    """The cache entry of a device's decisions, or None when they are not cached."""
    from cannops.backend.base import probe_key
    key = probe_key(device)
    if key is None:
        return None
    # the cases and the CANN rules follow the catalog version
    h = hashlib.sha256(f"{key}|{current()}|{cache.sources_hash('cases', 'backend', 'native')}".encode())
    return f"probe-{h.hexdigest()[:24]}.pickle"


def _decided(device: str, case, decision: tuple, index: int) -> CaseResult:
    """A cached decision, (status, reason, evidence), as the probe's result."""
    status, reason, *evidence = decision
    return CaseResult(device, case.op, case.vars, status, reason, evidence="".join(evidence), index=index)


def cached_probe(ops, params, backends, jobs, timeout, seed, shard, soc=None,
                 sample=None, cases_file=None) -> tuple[Run | None, Resumed, list]:
    """The probe's Run from the cache, exactly as the workers would have made it, where
    every case of every device is there (else None; None too when the cache is off); the
    decisions that are there, for a probe of the others only (runner.run_cases takes them
    as a resumed run's); and the selected cases (run_mode's `cases`). Bad input raises as
    run_mode."""
    check_common(jobs, timeout, seed)
    ops = selection_ops(ops, cases_file)
    known = Resumed()
    cases = graph_file_cases(cases_file, params, shard, sample)
    if cases is None:
        cases = checked_selection("support", ops, params, shard, sample=sample, refs=True)
    if cache.cache_dir() is None:
        return None, known, cases
    targets = selected_devices(backends, soc=soc)
    if not targets:
        raise BadInput("no device available (see `ops list devices`)")
    complete = True
    for target in targets:
        # one CANN-SIM per SoC (--soc 910B,310P) is probed anew: the key names one SoC only
        entry = _entry(target.label) if target.members == (target.label,) and not target.env else None
        stored = cache.load(entry) if entry else None
        if stored is None:
            complete = False
            continue
        decisions = stored["decisions"]
        got = {(idx, target.label): _decided(target.label, c, decisions[c.name], idx)
               for idx, c in cases if c.name in decisions}
        known.results.update(got)
        known.devices[target.label] = stored["info"]
        complete = complete and len(got) == len(cases)
    if not complete:
        return None, known, cases
    run = Run(mode="support", seed=seed, ops_filter=ops, params_filter=params, shard=shard, sample=sample,
              version=__version__, catalog=current())
    run.results = list(known.results.values())   # device by device, in case order
    run.devices = list(known.devices.values())
    return run, known, cases


def remember(run: Run, known: Resumed | None = None) -> None:
    """Keep the decisions of a finished probe (its OK and not supported cases), device by
    device, added to what the cache held; `known`: the decisions that came from it."""
    if run.interrupted or cache.cache_dir() is None:
        return
    from cannops.backend.base import list_devices
    discovered = {name for name, _ in list_devices([info.name for info in run.devices])}
    cached = known.results if known is not None else {}
    decided: dict[str, list] = {}
    for r in run.results:
        if r.status in (OK, NOT_SUPPORTED) and not r.ran_on and (r.index, r.device) not in cached:
            decided.setdefault(r.device, []).append(r)
    for info in run.devices:
        if info.name not in discovered or info.name not in decided:
            continue   # nothing new, or CANN-SIM:<SOC> (--soc with several SoCs): not a discovered device
        entry = _entry(info.name)
        if entry is None:
            continue
        stored = cache.load(entry) or {"decisions": {}}
        stored["info"] = info
        stored["decisions"].update((f"{r.op}({r.params})", (r.status, r.reason, r.evidence))
                                   for r in decided[info.name])
        cache.store(entry, stored)
