"""The counted device work of a run's cases (`cost`, backend/cost.py) as tables: per case and
per op, on the console (`ops test --cost`, `ops tbo --cost`) or in markdown; the estimated
device time beside the counts, always labelled an estimate."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from cannops.backend.cost import headline

# the SoC whose estimate goes beside the counts (backend/cann/perf_model.py, issue 42 part 2)
ESTIMATE_SOC = "910B"

def estimate(cost: Mapping, soc: str = ESTIMATE_SOC) -> float | None:
    """The estimated device µs of a case's counted calls (backend/cann/perf_model.py; its
    copies and syncs left out), None where the model has no figures for the SoC: never a
    measurement."""
    try:
        from cannops.backend.cann.perf_model import estimate_case
    except ImportError:
        return None
    try:
        # the calls' device time: a case's copies and syncs are the harness's (uploads, read-back)
        return float(estimate_case(soc, cost, transfers=False)["us"])
    except (KeyError, ValueError):
        return None


def work_text(cost: Mapping) -> str:
    """The headline with the estimate where the model is there: `... [est. 12.3 µs (910B)]`;
    where the count holds many runs of the op (perf on the simulated toolkit), per run."""
    us, runs = estimate(cost), cost.get("runs")
    if not runs:
        return headline(cost) + (f" [est. {us:.1f} µs ({ESTIMATE_SOC})]" if us is not None else "")
    text = (f"{headline(cost)}; per run {cost['calls'] / runs:.3g} calls, {cost['kernels'] / runs:.3g} kernels"
            + (f" [est. {us / runs:.2f} µs/run ({ESTIMATE_SOC})]" if us is not None else ""))
    return text

HEAD = ("calls", "kernels", "read B", "written B", "cube FLOP", "vector FLOP", "ws B", "syncs",
        "h2d", "d2h", "allocs")


def counted(results: Iterable) -> list:
    return [r for r in results if getattr(r, "cost", None)]


def row(cost: dict) -> list[str]:
    f = cost["flops"]
    return [str(cost["calls"]), str(cost["kernels"]), str(cost["bytes_read"]), str(cost["bytes_written"]),
            str(f.get("cube", 0)), str(f.get("vector", 0)), str(cost["workspace_bytes"]), str(cost["syncs"]),
            f"{cost['h2d'][0]}/{cost['h2d'][1]}", f"{cost['d2h'][0]}/{cost['d2h'][1]}", str(cost["allocs"])]


def _est(cost: dict) -> str:
    us = estimate(cost)
    return "" if us is None else f"{us:.1f}"


def per_op(results: list) -> dict[str, dict]:
    """Per op: its cases' counts summed (calls, kernels, bytes, FLOPs, syncs) and their number."""
    ops: dict[str, dict] = {}
    for r in results:
        c, o = r.cost, ops.setdefault(r.op, {"cases": 0, "calls": 0, "kernels": 0, "bytes": 0,
                                             "cube": 0, "vector": 0, "syncs": 0})
        o["cases"] += 1
        for k in ("calls", "kernels", "syncs"):
            o[k] += c[k]
        o["bytes"] += c["bytes_read"] + c["bytes_written"]
        o["cube"] += c["flops"].get("cube", 0)
        o["vector"] += c["flops"].get("vector", 0)
    return ops


def _table(head: list[str], rows: list[list[str]], first: int) -> list[str]:
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i < first else c.rjust(w)   # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    return [fmt(head)] + [fmt(r) for r in rows]


def cost_lines(results: Iterable, device: str = "") -> list[str]:
    """The console tables: one row per counted case, then one per op."""
    rs = counted(results)
    if not rs:
        return []
    est = any(estimate(r.cost) is not None for r in rs[:1])
    head = ["case", *HEAD] + ([f"est. µs ({ESTIMATE_SOC})"] if est else [])
    rows = [[r.name, *row(r.cost)] + ([_est(r.cost)] if est else []) for r in rs]
    title = f"Device work counted{' on ' + device if device else ''} (the simulator's count of what a device is asked to do"
    title += ("; est. = the calls' device time estimated from published figures (copies and syncs left out), "
              "not a measurement)") if est else ")"
    out = ["", title] + _table(head, rows, 1)
    ops = per_op(rs)
    out += [""] + _table(["op", "cases", "calls", "kernels", "bytes", "cube FLOP", "vector FLOP", "syncs"],
                         [[op, *(str(o[k]) for k in ("cases", "calls", "kernels", "bytes", "cube", "vector",
                                                      "syncs"))] for op, o in ops.items()], 1)
    return out


def echo_cost_tables(run, err: bool = False) -> None:
    """--cost: each device's tables after the run (on stderr where stdout is machine-readable)."""
    import click
    for d in run.devices:
        for ln in cost_lines(run.by_device(d.name), d.name):
            click.echo(ln, err=err)
