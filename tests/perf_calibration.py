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


# the device of hipudding/llama.cpp#2 is "CANN0", a 910B whose variant the issue does not
# name; ggml-cann was developed on Ascend910B3 then (llama.cpp#13042's log names one)
TBO_SOC = "Ascend910B3"
TORCH_910B2 = "https://github.com/zzc0721/torch-performance-test-data/issues/109"


def _matmul(n: int, dtype: str, size: int) -> dict:
    # torch.matmul of two n x n matrices (torch_npu, aclnnMatmul): 2n^3 FLOPs on the cube,
    # both operands read and the product written once
    return {"per_call": [{"op": "aclnnMatmul", "unit": "cube", "dtype": dtype,
                          "flops": 2 * n ** 3, "bytes_read": 2 * n * n * size,
                          "bytes_written": n * n * size, "workspace": 0}]}


def _matmul_rows() -> list:
    """torch_npu matmul TFLOPS on an Ascend910B2 (the issue's table), as us per call."""
    tflops = {"float16": [98.08, 251.01, 314.52, 305.46, 274.76],
              "float32": [46.30, 76.92, 84.53, 80.43, 79.69]}
    out = []
    for dtype, values in tflops.items():
        size = 2 if dtype == "float16" else 4
        for n, t in zip((1024, 2048, 4096, 8192, 10240), values):
            us = 2 * n ** 3 / (t * 1e12) * 1e6
            out.append((f"torch.matmul {dtype} {n}x{n} @ {n}x{n}", round(us, 2), "Ascend910B2",
                        TORCH_910B2, _matmul(n, dtype, size)))
    return out


# (case, us per run measured, the chip whose figures estimate it, source, counted cost)
MEASURED = [
    ("GELU(type=f32,ne=[128,10,10,10])", 11.09, TBO_SOC, HIPUDDING_2, _unary("aclnnGelu", 128000)),
    ("GELU(type=f32,ne=[7,13,19,23])", 11.08, TBO_SOC, HIPUDDING_2, _unary("aclnnGelu", 39767)),
    ("SILU(type=f32,ne=[128,10,10,10])", 11.09, TBO_SOC, HIPUDDING_2, _unary("aclnnSilu", 128000)),
    ("SILU(type=f32,ne=[7,13,19,23])", 11.08, TBO_SOC, HIPUDDING_2, _unary("aclnnSilu", 39767)),
    ("ACC(type=f32,ne_a=[1024,577,1,1],ne_b=[1024,576,1,1])", 12.37, TBO_SOC, HIPUDDING_2, _acc()),
    ("GROUP_NORM(type=f32,ne=[64,64,320,1],num_groups=32)", 24.46, TBO_SOC, HIPUDDING_2,
     _group_norm()),
] + _matmul_rows()

# the rows the launch figure was read from: they agree by construction
LAUNCH_ROWS = 4


def rows() -> list[tuple[str, float, float, float, str, str]]:
    """(case, measured us, estimated us, est/measured, bound of its dearest call, chip)."""
    out = []
    for case, measured, soc, _src, cost in MEASURED:
        est = perf_model.estimate_case(soc, cost)
        worst = max(range(len(est["per_call_us"])), key=est["per_call_us"].__getitem__)
        out.append((case, measured, est["us"], est["us"] / measured, est["bound"][worst], soc))
    return out


def summary(independent: bool = False) -> tuple[float, float, float]:
    """(median, min, max) of est/measured over MEASURED (`independent`: less the rows the
    launch figure was read from)."""
    ratios = [r[3] for r in rows()[LAUNCH_ROWS if independent else 0:]]
    return statistics.median(ratios), min(ratios), max(ratios)


def markdown() -> str:
    lines = ["| case | chip | measured us | est. us | est./measured | bound |",
             "| --- | --- | ---: | ---: | ---: | --- |"]
    for case, measured, est, ratio, bound, soc in rows():
        lines.append(f"| `{case}` | {soc} | {measured:.2f} | {est:.2f} | {ratio:.2f} | {bound} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
    print("all: median %.2f, lowest %.2f, highest %.2f" % summary())
    print("independent: median %.2f, lowest %.2f, highest %.2f" % summary(True))
