"""`ops test --timings`: each op's device time (its compute call alone) against the tool's
own time per case (building, inputs, reference, upload, read-back, comparison)."""
from __future__ import annotations

import statistics

# a case whose compute call takes less than this is "tiny": a few milliseconds of Python per
# case outweigh it whatever is done, so the per-case overhead target (< 10 %) leaves it out
TINY_SECONDS = 0.01


def overhead(r) -> float:
    """The tool's seconds for a case: its wall in the worker less the device's compute call."""
    return max(0.0, r.seconds - r.device_seconds)


def timing_rows(results) -> list[tuple]:
    """(op, cases, device s, overhead s, overhead / device, cases not tiny, median overhead /
    device of those) per op in the order met, then ("all", ...); over the cases that ran."""
    by_op: dict[str, list] = {}
    for r in results:
        if r.device_seconds is not None:
            by_op.setdefault(r.op, []).append(r)
    rows = [_row(op, rs) for op, rs in by_op.items()]
    if len(rows) > 1:
        rows.append(_row("all", [r for rs in by_op.values() for r in rs]))
    return rows


def _row(op: str, rs: list) -> tuple:
    device = sum(r.device_seconds for r in rs)
    over = sum(overhead(r) for r in rs)
    big = [overhead(r) / r.device_seconds for r in rs if r.device_seconds >= TINY_SECONDS]
    return (op, len(rs), device, over, over / device if device else float("inf"), len(big),
            statistics.median(big) if big else None)


def timing_lines(device: str, results) -> list[str]:
    rows = timing_rows(results)
    if not rows:
        return []
    out = [f"Timings on {device} (seconds summed over the cases that ran; device: its compute call, "
           f"overhead: the rest of the case's wall in its worker)",
           f"  {'op':<24} {'cases':>6} {'device':>9} {'overhead':>9} {'ovh/dev':>8}   "
           f"median ovh/dev of cases >= {TINY_SECONDS * 1e3:g} ms"]
    for op, n, device_s, over, ratio, n_big, med in rows:
        tail = f"{med:8.1%} ({n_big})" if med is not None else f"{'-':>8} (0)"
        out.append(f"  {op[:24]:<24} {n:>6} {device_s:>9.3f} {over:>9.3f} {ratio:>8.1%}   {tail}")
    return out
