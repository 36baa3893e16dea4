"""`ops support --from-gguf MODEL`: per op of a model, its status on each device, the share
of the model's FLOPs it carries and the evidence behind the verdict, and whether the model
runs there or which ops ggml's scheduler would hand to the CPU; on CANN-SIM with --run, the
estimated device time per op and tokens per second (cli/model_estimate.py)."""
from __future__ import annotations

from .engine import FAIL, OK
from .model_estimate import estimate_lines


def _evidence(device: str, computed: bool) -> str:
    how = "computed, compared with the NumPy reference" if computed else "probed (the device's supports_op)"
    return how + ("; simulated device" if device.split(":")[0].endswith("-SIM") else "")


def _levels(results) -> str:
    """The evidence levels of an op's verdicts (a CANN device's, backend/cann/evidence.py):
    one level, or each with its count."""
    from .support import evidence_counts
    counts = evidence_counts(results)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{level} {n}" for level, n in counts.items())


def report_lines(run, model_cases, model_name: str, computed: bool) -> list[str]:
    """The report of one run of a model's cases (support mode, or test mode with --run)."""
    flops_by_name = {mc.case.name: mc.flops() for mc in model_cases}
    flops_by_op: dict[str, int] = {}
    cases_by_op: dict[str, int] = {}
    for mc in model_cases:
        flops_by_op[mc.case.op] = flops_by_op.get(mc.case.op, 0) + mc.flops()
        cases_by_op[mc.case.op] = cases_by_op.get(mc.case.op, 0) + 1
    total = sum(flops_by_op.values()) or 1
    devices = list(dict.fromkeys(r.device for r in run.results))
    lines = [f"{model_name}: {len(model_cases)} cases of {len(cases_by_op)} ops "
             f"(FLOPs: the matrix products and attention of one forward pass per batch)"]
    for dev in devices:
        got: dict[str, list] = {}
        for r in run.results:
            if r.device == dev:
                got.setdefault(r.op, []).append(r)
        lines += ["", f"{dev} ({_evidence(dev, computed)})",
                  f"  {'op':<16} {'status':<32} {'FLOPs':>7}  cases  evidence"]
        fallback, failing, fallback_flops = [], [], 0
        for op in cases_by_op:
            rs = got.get(op, [])
            ok = sum(r.status == OK for r in rs)
            fails = sum(r.status == FAIL for r in rs)
            if fails:
                status = f"FAIL ({fails} of {len(rs)})"
                failing.append(op)
            elif ok == len(rs) and rs:
                status = "supported"
            elif ok:
                status = f"partial ({ok} of {len(rs)}): rest on CPU"
                fallback.append(op)
            else:
                status = "not supported: on CPU"
                fallback.append(op)
            fallback_flops += sum(flops_by_name.get(f"{r.op}({r.params})", 0) for r in rs if r.status != OK)
            share = 100 * flops_by_op[op] / total
            lines.append(f"  {op:<16} {status:<32} {share:6.1f}%  {cases_by_op[op]:>5}  {_levels(rs)}".rstrip())
            why = next((r.reason for r in rs if r.status != OK and r.reason), "")
            if why:
                lines.append(f"    why: {why}")
        if failing:
            verdict = f"does not run correctly: {', '.join(failing)} FAIL"
        elif fallback:
            verdict = (f"runs with CPU fallback: ggml's scheduler would run {', '.join(fallback)} on the CPU "
                       f"({100 * fallback_flops / total:.1f}% of the FLOPs)")
        else:
            verdict = "runs entirely on the device"
        lines.append(f"  => {model_name} on {dev}: {verdict}")
        lines += estimate_lines([r for r in run.results if r.device == dev], model_cases, dev)
        if "FLASH_ATTN_EXT" in fallback:
            lines.append("     (llama.cpp's --flash-attn auto would attend without it instead: "
                         "--no-flash-attn reports that graph)")
    return lines
