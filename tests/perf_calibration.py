"""Op-level figures measured on real Ascend devices, each case's aclnn work counted by hand
from its shapes and from the ggml-cann source of its time, and the estimate's error on them
(docs/perf-model.md, "Calibration"). The data a change to backend/cann/perf_model.py is
checked against."""
from __future__ import annotations

import statistics

from cannops.backend.cann import perf_model

HIPUDDING_2 = "https://github.com/hipudding/llama.cpp/issues/2"
F32 = 4


def _vector(op: str, read: int, written: int, flops: int = 0, dtype: str = "float32") -> dict:
    return {"op": op, "unit": "vector", "dtype": dtype, "flops": flops,
            "bytes_read": read, "bytes_written": written, "workspace": 0}


def _unary(op: str, n: int) -> dict:
    # ggml-cann (2024): one aclnn call, the f32 tensor read once and written once
    return {"per_call": [_vector(op, n * F32, n * F32, flops=n)]}


def _acc() -> dict:
    # ACC(ne_a=[1024,577,1,1], ne_b=[1024,576,1,1]), not in place: aclrtMemcpyAsync of
    # src0 into dst (device to device), then aclnnAdd of src0's and dst's [1024,576] views
    # with src1 (ggml_cann_acc, 2024)
    a, b = 1024 * 577 * F32, 1024 * 576 * F32
    return {"per_call": [_vector("aclnnAdd", 2 * b, b, flops=1024 * 576)], "d2d": [1, a]}


def _group_norm() -> dict:
    # GROUP_NORM(ne=[64,64,320,1], 32 groups): one aclnnGroupNorm, x read twice (mean and
    # variance, then normalise) is not assumed: read once, written once, mean/rstd 2x32 f32
    n = 64 * 64 * 320
    return {"per_call": [_vector("aclnnGroupNorm", n * F32, n * F32 + 2 * 32 * F32,
                                 flops=8 * n)]}


# (case, us/run measured, kB/run as printed, source, counted cost)
MEASURED = [
    ("GELU(type=f32,ne=[128,10,10,10])", 11.09, 1000, HIPUDDING_2, _unary("aclnnGelu", 128000)),
    ("GELU(type=f32,ne=[7,13,19,23])", 11.08, 310, HIPUDDING_2, _unary("aclnnGelu", 39767)),
    ("SILU(type=f32,ne=[128,10,10,10])", 11.09, 1000, HIPUDDING_2, _unary("aclnnSilu", 128000)),
    ("SILU(type=f32,ne=[7,13,19,23])", 11.08, 310, HIPUDDING_2, _unary("aclnnSilu", 39767)),
    ("ACC(type=f32,ne_a=[1024,577,1,1],ne_b=[1024,576,1,1])", 12.37, 6920, HIPUDDING_2, _acc()),
    ("GROUP_NORM(type=f32,ne=[64,64,320,1],num_groups=32)", 24.46, 10240, HIPUDDING_2,
     _group_norm()),
]

# the device of hipudding/llama.cpp#2 is "CANN0", a 910B whose variant the issue does not
# name; ggml-cann was developed on Ascend910B3 then (llama.cpp#13042's log names one)
SOC = "Ascend910B3"


def rows(soc: str = SOC) -> list[tuple[str, float, float, float, str]]:
    """(case, measured us, estimated us, est/measured, bound of its dearest call)."""
    out = []
    for case, measured, _kb, _src, cost in MEASURED:
        est = perf_model.estimate_case(soc, cost)
        worst = max(range(len(est["per_call_us"])), key=est["per_call_us"].__getitem__)
        out.append((case, measured, est["us"], est["us"] / measured, est["bound"][worst]))
    return out


def summary(soc: str = SOC) -> tuple[float, float, float]:
    """(median, min, max) of est/measured over MEASURED."""
    ratios = [r[3] for r in rows(soc)]
    return statistics.median(ratios), min(ratios), max(ratios)


def markdown(soc: str = SOC) -> str:
    lines = ["| case | measured us/run | est. us | est./measured | bound |",
             "| --- | ---: | ---: | ---: | --- |"]
    for case, measured, est, ratio, bound in rows(soc):
        lines.append(f"| `{case}` | {measured:.2f} | {est:.2f} | {ratio:.2f} | {bound} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
    print("median %.2f, lowest %.2f, highest %.2f" % summary())
