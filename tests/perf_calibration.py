"""Op-level figures measured on real Ascend devices, each case's aclnn work counted by hand
from its shapes (and, for ggml-cann, from its source of the time), and the estimate's error
on them (docs/perf-model.md, "Calibration"). The data a change to
backend/cann/perf_model.py is checked against."""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from cannops.backend.cann import perf_model

HIPUDDING_2 = "https://github.com/hipudding/llama.cpp/issues/2"
TORCH_910B2 = "https://github.com/zzc0721/torch-performance-test-data/issues/109"
SWIGLU_6324 = "https://github.com/flagos-ai/FlagGems/pull/6324"
F16, F32 = 2, 4


@dataclass(frozen=True)
class Row:
    case: str
    measured_us: float
    soc: str            # the chip whose figures estimate it
    source: str
    cost: dict          # the counted work, by hand
    # "run": a run's wall time as the benchmark loop measures it (launches included);
    # "kernel": the kernel's duration on the device, estimated as a kernel of a graph
    # replay (graph_kernel_us + roofline), no host launch
    measured: str = "run"
    basis: str = ""     # the figure this row was read from ("": an independent check)


def _record(op: str, unit: str, dtype: str, read: int, written: int, flops: int = 0) -> dict:
    return {"op": op, "unit": unit, "dtype": dtype, "flops": flops,
            "bytes_read": read, "bytes_written": written, "workspace": 0}


def _one(op: str, read: int, written: int, flops: int = 0, dtype: str = "float32",
         unit: str = "vector") -> dict:
    return {"per_call": [_record(op, unit, dtype, read, written, flops)]}


def _unary(op: str, n: int) -> dict:
    # ggml-cann (2024): one aclnn call, the f32 tensor read once and written once
    return _one(op, n * F32, n * F32, flops=n)


def _acc() -> dict:
    # ACC(ne_a=[1024,577,1,1], ne_b=[1024,576,1,1]), not in place: aclrtMemcpyAsync of
    # src0 into dst (device to device), then aclnnAdd of src0's and dst's [1024,576] views
    # with src1 (ggml_cann_acc, 2024)
    a, b = 1024 * 577 * F32, 1024 * 576 * F32
    return {**_one("aclnnAdd", 2 * b, b, flops=1024 * 576), "d2d": [1, a]}


def _group_norm() -> dict:
    # GROUP_NORM(ne=[64,64,320,1], 32 groups): one aclnnGroupNorm; x read once and written
    # once (a second read for the statistics is not assumed), mean/rstd 2x32 f32
    n = 64 * 64 * 320
    return _one("aclnnGroupNorm", n * F32, n * F32 + 2 * 32 * F32, flops=8 * n)


def _matmul(n: int, dtype: str, size: int) -> dict:
    # torch.matmul of two n x n matrices (aclnnMatmul): 2n^3 FLOPs on the cube, both
    # operands read and the product written once
    return _one("aclnnMatmul", 2 * n * n * size, n * n * size, 2 * n ** 3, dtype, "cube")


def _swiglu(shape: tuple[int, ...]) -> dict:
    # torch_npu npu_swiglu, f16: x [..., 2d] read once, silu(x1) * x2 [..., d] written once
    n = 1
    for d in shape:
        n *= d
    return _one("aclnnSwiGlu", n * F16, n // 2 * F16, flops=3 * n, dtype="float16")


# the device of hipudding/llama.cpp#2 is "CANN0", a 910B whose variant the issue does not
# name; ggml-cann was developed on Ascend910B3 then (llama.cpp#13042's log names one)
TBO_SOC = "Ascend910B3"
# FlagGems #6324 names an Ascend NPU, not its variant: its largest swiglu sustains 1.22 TB/s,
# past the 910B4's 0.8, so a 1.6 TB/s part (910B2 / B3: the same HBM figure)
SWIGLU_SOC = "Ascend910B3"


def _tbo_rows() -> list[Row]:
    launch = "launch_us"
    return [
        Row("GELU(type=f32,ne=[128,10,10,10])", 11.09, TBO_SOC, HIPUDDING_2,
            _unary("aclnnGelu", 128000), basis=launch),
        Row("GELU(type=f32,ne=[7,13,19,23])", 11.08, TBO_SOC, HIPUDDING_2,
            _unary("aclnnGelu", 39767), basis=launch),
        Row("SILU(type=f32,ne=[128,10,10,10])", 11.09, TBO_SOC, HIPUDDING_2,
            _unary("aclnnSilu", 128000), basis=launch),
        Row("SILU(type=f32,ne=[7,13,19,23])", 11.08, TBO_SOC, HIPUDDING_2,
            _unary("aclnnSilu", 39767), basis=launch),
        Row("ACC(type=f32,ne_a=[1024,577,1,1],ne_b=[1024,576,1,1])", 12.37, TBO_SOC,
            HIPUDDING_2, _acc()),
        Row("GROUP_NORM(type=f32,ne=[64,64,320,1],num_groups=32)", 24.46, TBO_SOC, HIPUDDING_2,
            _group_norm()),
    ]


def _matmul_rows() -> list[Row]:
    """torch_npu matmul TFLOPS on an Ascend910B2 (the issue's table), as us per call."""
    tflops = {"float16": [98.08, 251.01, 314.52, 305.46, 274.76],
              "float32": [46.30, 76.92, 84.53, 80.43, 79.69]}
    out = []
    for dtype, values in tflops.items():
        size = F16 if dtype == "float16" else F32
        for n, t in zip((1024, 2048, 4096, 8192, 10240), values):
            out.append(Row(f"torch.matmul {dtype} {n}x{n} @ {n}x{n}",
                           round(2 * n ** 3 / (t * 1e12) * 1e6, 2), "Ascend910B2", TORCH_910B2,
                           _matmul(n, dtype, size)))
    return out


def _swiglu_rows() -> list[Row]:
    """npu_swiglu f16 device kernel durations (mode=kernel) of FlagGems #6324, in ms there."""
    ms = {(2560, 2048): 0.017084, (15000, 2048): 0.048458, (268435456,): 0.667183,
          (10000, 65536): 1.610495, (8192, 128): 0.011830, (15000, 128): 0.013148,
          (10000, 256): 0.013624, (100, 256, 100): 0.033369, (100, 65536, 100): 6.333231}
    # the smallest kernels (2.5-4.2 us) are the source of graph_kernel_us, the largest
    # stream that no cache holds (1.97 GB) the source of the memory efficiency
    return [Row(f"npu_swiglu f16 {list(shape)}", round(v * 1000, 2), SWIGLU_SOC, SWIGLU_6324,
                _swiglu(shape), measured="kernel",
                basis="memory efficiency" if shape == (10000, 65536) else "")
            for shape, v in ms.items()]


# each row with its chip, what was measured, and the figure it is the basis of, if any
MEASURED: list[Row] = _tbo_rows() + _matmul_rows() + _swiglu_rows()


def estimate(row: Row) -> dict:
    """The estimate of a row as measured: a run's (launches included), or a kernel's on the
    device (each call as a kernel of an ACL graph replay, no host launch)."""
    if row.measured == "run":
        return perf_model.estimate_case(row.soc, row.cost)
    calls = row.cost["per_call"]
    per_call = [perf_model.estimate_call(row.soc, r, graph=True) for r in calls]
    bound = perf_model.estimate_case(row.soc, {**row.cost, "graph": {"replays": 1}})["bound"]
    return {"us": sum(per_call), "per_call_us": per_call, "bound": bound}


def rows() -> list[tuple[Row, float, float, str]]:
    """(row, estimated us, est/measured, bound of its dearest call)."""
    out = []
    for row in MEASURED:
        est = estimate(row)
        worst = max(range(len(est["per_call_us"])), key=est["per_call_us"].__getitem__)
        out.append((row, est["us"], est["us"] / row.measured_us, est["bound"][worst]))
    return out


def summary(independent: bool = False) -> tuple[float, float, float]:
    """(median, min, max) of est/measured over MEASURED (`independent`: less the rows a
    figure of the model was read from)."""
    ratios = [ratio for row, _, ratio, _ in rows() if not (independent and row.basis)]
    return statistics.median(ratios), min(ratios), max(ratios)


def markdown() -> str:
    lines = ["| case | chip | measured | us | est. us | est./measured | bound | basis of |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for row, est, ratio, bound in rows():
        lines.append(f"| `{row.case}` | {row.soc} | {row.measured} | {row.measured_us:.2f} | "
                     f"{est:.2f} | {ratio:.2f} | {bound} | {row.basis} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())
    print("all: median %.2f, lowest %.2f, highest %.2f" % summary())
    print("independent: median %.2f, lowest %.2f, highest %.2f" % summary(True))
