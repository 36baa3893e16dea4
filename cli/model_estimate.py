"""`ops support --from-gguf MODEL --run` on CANN-SIM: per op, the estimated device time of
one forward pass at each batch size (1: decode, 512: prefill), its share, the host calls
per token, and the estimated tokens per second, eager and as one ACL graph, from each
case's counted work (docs/perf-model.md). An estimate, labelled so, never a measurement."""
from __future__ import annotations


def _soc(device: str) -> str:
    """The SoC family a simulated device's name carries (CANN-SIM:310P), else the default."""
    from cannops.backend.cann.soc import DEFAULT, SIMULATED
    family = device.partition(":")[2].upper()
    return family if family in SIMULATED else DEFAULT


def _runs(results, model_cases, n_tokens: int) -> list[tuple[str, int, dict]] | None:
    """(op, count, cost) of each case the pass of `n_tokens` runs; None when a case of it
    carries no counted work (not run, not supported, or a device that does not count)."""
    cost_by_name = {f"{r.op}({r.params})": getattr(r, "cost", None) for r in results}
    out = []
    for mc in model_cases:
        count = mc.by_tokens.get(n_tokens, 0)
        if count:
            cost = cost_by_name.get(mc.case.name)
            if not cost:
                return None
            out.append((mc.case.op, count, cost))
    return out


def _row(name: str, est: dict, batches: list[int], us: dict, calls: dict) -> str:
    cells = "".join(f"  {us[t]:>12.1f} {100 * us[t] / (est[t]['us'] or 1):>5.1f}%"
                    + f" {calls[t] / t:>8.2f}" for t in batches)
    return f"  {name:<16}{cells}".rstrip()


def estimate_lines(results, model_cases, device: str) -> list[str]:
    """The estimate's lines for one device's results ([] when its cases carry no counts)."""
    from cannops.backend.cann import perf_model
    batches = sorted({t for mc in model_cases for t in mc.by_tokens})
    passes = {t: _runs(results, model_cases, t) for t in batches}
    if not batches or any(runs is None for runs in passes.values()):
        return []
    est = {t: perf_model.estimate_forward(_soc(device), runs) for t, runs in passes.items()}
    graph = {t: perf_model.estimate_forward(_soc(device), runs, graph=True)["us"]
             for t, runs in passes.items()}
    head = "".join(f"  {f'est. us @{t}':>12} {'share':>6} {'calls/tk':>8}" for t in batches)
    lines = ["", f"  est. device time of one forward pass on {est[batches[0]]['soc']} "
                 f"(an estimate from counted work, {perf_model.MODEL_VERSION}: docs/perf-model.md)",
             f"  {'op':<16}{head}"]
    for op in dict.fromkeys(mc.case.op for mc in model_cases):
        lines.append(_row(op, est, batches, {t: est[t]["by_op"].get(op, 0.0) for t in batches},
                          {t: est[t]["calls_by_op"].get(op, 0) for t in batches}))
    lines.append(_row("total", est, batches, {t: est[t]["us"] for t in batches},
                      {t: est[t]["calls"] for t in batches}))
    rates = "; ".join(f"{t * 1e6 / est[t]['us']:,.1f} tokens/s at {t} token{'s' * (t > 1)} per pass "
                      f"({t * 1e6 / graph[t]:,.1f} as one ACL graph)"
                      for t in batches if est[t]["us"] > 0 and graph[t] > 0)
    lines.append(f"  => est. {rates} (an estimate, not a measurement)")
    return lines
