"""A case's device work, summed from the simulator's cost events (backend/cann/sim/cost.py):
aclnn calls the host issued, kernels the device ran, bytes, FLOPs by unit, workspace,
allocations, copies, synchronisations and ACL graph captures and replays; and its text.

Events are records with a `cost` member: an aclnn call's is its cost record (op, unit,
dtype, flops, bytes_read, bytes_written, workspace; `captured` when launched into a stream
capture); a runtime call's says what it counts (`alloc`, `free`, `copy` + `bytes`, `sync`,
`captured` calls, a `replay`'s summed kernels). They come from ops' own layer in process,
or framed in a toolkit client's stdout among the trace's records (`ops tbo --cost`): the
trace's own records, which carry no `cost`, are passed over."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

COPIES = ("h2d", "d2h", "d2d")
# a toolkit client's switch: its device work counted, the events framed into its stdout
COST_SWITCH = "CANN_SIM_COST"


def empty() -> dict:
    return {"calls": 0, "kernels": 0, "by_op": {}, "bytes_read": 0, "bytes_written": 0,
            "flops": {"cube": 0, "vector": 0}, "workspace_bytes": 0, "allocs": 0, "frees": 0,
            **{k: [0, 0] for k in COPIES}, "syncs": 0, "graph": None, "per_call": []}


def _call(cost: dict, rec: Mapping) -> None:
    """An aclnn call: the host's; its kernel now, unless it was captured (then per replay)."""
    cost["calls"] += 1
    cost["workspace_bytes"] += rec["workspace"]
    cost["per_call"].append({k: rec[k] for k in ("op", "unit", "dtype", "flops", "bytes_read",
                                                  "bytes_written", "workspace")})
    op = cost["by_op"].setdefault(rec["op"], {"calls": 0, "bytes_read": 0, "bytes_written": 0,
                                              "flops": 0, "unit": rec["unit"]})
    op["calls"] += 1
    for k in ("bytes_read", "bytes_written", "flops"):
        op[k] += rec[k]
    if not rec.get("captured"):
        _kernels(cost, 1, rec["bytes_read"], rec["bytes_written"], {rec["unit"]: rec["flops"]})


def _kernels(cost: dict, n: int, read: int, written: int, flops: Mapping) -> None:
    cost["kernels"] += n
    cost["bytes_read"] += read
    cost["bytes_written"] += written
    for unit, f in flops.items():
        cost["flops"][unit] = cost["flops"].get(unit, 0) + f


def _graph(cost: dict) -> dict:
    if cost["graph"] is None:
        cost["graph"] = {"captured": 0, "replays": 0}
    return cost["graph"]


def _runtime(cost: dict, what: Mapping) -> None:
    if "alloc" in what:
        cost["allocs"] += 1
    elif "free" in what:
        cost["frees"] += 1
    elif "copy" in what:
        if what["copy"] in COPIES:
            cost[what["copy"]][0] += 1
            cost[what["copy"]][1] += what["bytes"]
    elif "sync" in what:
        cost["syncs"] += 1
    elif "replay" in what:
        r = what["replay"]
        _graph(cost)["replays"] += 1
        _kernels(cost, r["kernels"], r["bytes_read"], r["bytes_written"], r["flops"])
    elif "captured" in what:
        _graph(cost)["captured"] += 1


def summarise(events: Iterable[Mapping], per_call: bool = True) -> dict:
    """The case's `cost` from its events, in order; without `per_call`, no per-call list."""
    cost = empty()
    for e in events:
        what = e.get("cost") if isinstance(e, Mapping) else None
        if not isinstance(what, Mapping) or e.get("rc"):
            continue
        if "op" in what:
            _call(cost, what)
        else:
            _runtime(cost, what)
    if not per_call:
        del cost["per_call"]
    return cost


def si(n: float, unit: str) -> str:
    """4100 B -> '4.1 kB'."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= scale:
            return f"{n / scale:.3g} {prefix}{unit}"
    return f"{n:.0f} {unit}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def headline(cost: Mapping) -> str:
    """One line: calls, kernels, bytes, FLOPs by unit, syncs (and the graph's part)."""
    flops = [si(f, f"FLOP {unit}") for unit, f in cost["flops"].items() if f] or ["0 FLOP"]
    text = (f"{_plural(cost['calls'], 'call')}, {_plural(cost['kernels'], 'kernel')}, "
            f"{si(cost['bytes_read'] + cost['bytes_written'], 'B')}, {' + '.join(flops)}, "
            f"{_plural(cost['syncs'], 'sync')}")
    g = cost.get("graph")
    if g:
        text += f", graph {g['captured']} captured / {g['replays']} replays"
    return text
