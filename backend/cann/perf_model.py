"""The estimated device time of counted aclnn work on an Ascend SoC: a launch overhead plus a
roofline (FLOPs over the unit's peak, bytes over the memory bandwidth) of published figures,
each figure with its source (docs/perf-model.md). An estimate, never a measurement."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from . import soc as socs

# Bumped whenever a figure or an equation changes, so that two estimates compare only
# where they were made by the same model.
MODEL_VERSION = "roofline-3"

# Figure kinds: "vendor" (a datasheet or a vendor's own configuration), "measured" (a
# published measurement on a device), "derived" (computed from figures of the other kinds,
# the computation in the source), "assumed" (no published figure found: listed as such in
# docs/perf-model.md, and the first thing to replace when one turns up).
KINDS = ("vendor", "measured", "derived", "assumed")


@dataclass(frozen=True)
class Figure:
    value: float
    kind: str
    source: str


# The sources, named once: the table below cites them by key.
SOURCES = {
    "hw-b234": "a performance-model configuration HWConf (public GitHub file) whose "
               "figures are 'vendor-published hardware specifications': per die cube "
               "FP16/INT8 and vector FP16/INT8 TFLOPS, HBM bandwidth, for Ascend_910b2 / "
               "910b3 / 910b4",
    "hw-clock": "an earlier version of that HWConf (Copyright 2025 Huawei): cube 16x16x16x2 "
                "ops per cycle per AI core; vector 128 FP16 elements per cycle",
    "duo": "Atlas 300I Duo (two Ascend 310P3 per card): 280 TOPS INT8, 96 GB LPDDR4X, "
           "408 GB/s per card (avalanchenoticias.com.br report of the card's datasheet, "
           "Gamers Nexus / ComputerBase)",
    "limulidae": "limulidae (public GitHub README): measured matmul on a 910B, BF16 328 "
                 "TFLOPS, FP32 87 TFLOPS",
    "tbo-floor": "hipudding/llama.cpp#2 (ggml-cann's TODO list, 2024): test-backend-ops perf "
                 "on CANN0, GELU and SILU f32 ne=[7,13,19,23] (310 kB) and [128,10,10,10] "
                 "(1000 kB) both 11.08-11.09 us/run: one aclnn call per op, host-bound",
    "ascend-rs": "ascend-rs.org appendix F: one kernel launch + aclrtSynchronizeStream, "
                 "wall clock, median of 10: gelu/relu/sigmoid 256..16384 elements 19-31 us "
                 "on a 910B3, 75-89 us on a 310P",
    "swiglu": "FlagGems #6324: torch_npu npu_swiglu f16 kernel durations on the device "
              "(mode=kernel) on an Ascend NPU of 1.6 TB/s HBM: the smallest inputs 2.5-4.2 us, "
              "[10000,65536] (1.97 GB moved, past any cache) 1610.5 us",
    "pcie4": "PCIe 4.0 x16 (Atlas 800T A2 / Atlas 300I Duo host link): 31.5 GB/s per "
             "direction theoretical",
}


def _f(value: float, kind: str, *keys: str, note: str = "") -> Figure:
    text = "; ".join(SOURCES[k] for k in keys)
    return Figure(value, kind, f"{note} [{text}]" if note else text)


def _b_series(cube_fp16: float, cube_int8: float, vector_fp16: float,
              hbm_gbs: float) -> dict[str, Figure]:
    """The Atlas A2 (910B) figures of one variant from its cube and vector FP16 peaks and
    its HBM bandwidth; the shared per-call figures are the same on every variant."""
    return {
        "cube_fp16_tflops": _f(cube_fp16, "vendor", "hw-b234"),
        "cube_bf16_tflops": _f(cube_fp16, "vendor", "hw-b234",
                               note="the A2 cube runs BF16 at its FP16 rate"),
        "cube_int8_tops": _f(cube_int8, "vendor", "hw-b234"),
        # FP32 on the cube: limulidae measured 87 FP32 against 328 BF16 TFLOPS (0.27)
        "cube_fp32_tflops": _f(cube_fp16 / 4, "derived", "limulidae",
                               note="FP16 peak / 4 (measured FP32/BF16 = 87/328)"),
        "vector_fp16_tflops": _f(vector_fp16, "vendor", "hw-b234"),
        "vector_bf16_tflops": _f(vector_fp16, "derived", "hw-b234",
                                 note="as FP16: same element width"),
        "vector_fp32_tflops": _f(vector_fp16 / 2, "derived", "hw-clock",
                                 note="FP16 / 2: a vector repeat holds half as many f32"),
        "memory_gbs": _f(hbm_gbs, "vendor", "hw-b234"),
        "launch_us": _f(11.0, "measured", "tbo-floor",
                        note="floor of single-call ops less their memory time"),
        "sync_us": _f(10.0, "derived", "ascend-rs", "tbo-floor",
                      note="910B3 launch+sync round trip (19-31 us, median ~21) less launch"),
        "graph_kernel_us": _f(3.0, "measured", "swiglu",
                              note="a kernel's least duration on the device (2.5-4.2 us), "
                                   "its cost in an ACL graph replay"),
        "pcie_gbs": _f(31.5, "vendor", "pcie4"),
        "copy_us": _f(10.0, "assumed", "ascend-rs",
                      note="per host<->device copy: as a synchronised call"),
    }


def _p_series() -> dict[str, Figure]:
    """The Atlas inference series (310P3) figures, per chip (an Atlas 300I Duo card holds
    two)."""
    int8 = 280.0 / 2
    return {
        "cube_fp16_tflops": _f(int8 / 2, "derived", "duo",
                               note="140 TOPS INT8 per chip / 2 (INT8 = 2x FP16 on the cube)"),
        "cube_bf16_tflops": _f(0.0, "vendor", "duo", note="no BF16 on the 310P"),
        "cube_int8_tops": _f(int8, "derived", "duo", note="280 TOPS per card / 2 chips"),
        "cube_fp32_tflops": _f(int8 / 8, "derived", "duo", "limulidae",
                               note="FP16 peak / 4, as on the 910B"),
        "vector_fp16_tflops": _f(int8 / 2 * 22 / 353.8, "derived", "duo", "hw-b234",
                                 note="cube FP16 x the 910B2's vector/cube ratio 22/353.8"),
        "vector_bf16_tflops": _f(0.0, "vendor", "duo", note="no BF16 on the 310P"),
        "vector_fp32_tflops": _f(int8 / 4 * 22 / 353.8, "derived", "duo", "hw-b234",
                                 note="vector FP16 / 2"),
        "memory_gbs": _f(408.0 / 2, "derived", "duo", note="408 GB/s per card / 2 chips"),
        "launch_us": _f(11.0 * 75 / 21, "derived", "ascend-rs", "tbo-floor",
                        note="910B launch x the 310P/910B3 round-trip ratio 75/21"),
        "sync_us": _f(10.0 * 75 / 21, "derived", "ascend-rs",
                      note="910B sync x the 310P/910B3 round-trip ratio 75/21"),
        "graph_kernel_us": _f(3.0, "assumed", "swiglu",
                              note="the 910B's: no 310P figure published"),
        "pcie_gbs": _f(31.5, "vendor", "pcie4"),
        "copy_us": _f(10.0 * 75 / 21, "assumed", "ascend-rs",
                      note="per host<->device copy: as a synchronised call"),
    }


# Per chip as aclrtGetSocName names it. The Ascend910B1 has no published figure apart from
# the others' (docs/perf-model.md): it is left out rather than guessed.
SOCS: dict[str, dict[str, Figure]] = {
    "Ascend910B2": _b_series(353.8, 707.9, 22.0, 1600.0),
    "Ascend910B3": _b_series(294.9, 589.8, 18.4, 1600.0),
    "Ascend910B4": _b_series(245.7, 491.5, 15.4, 800.0),
    "Ascend310P3": _p_series(),
}

# Efficiency factors, the fraction of a peak a kernel sustains, each from one measurement
# (docs/perf-model.md marks it in the calibration table): the cube's from limulidae's BF16
# matmul (328 TFLOPS; a 910B2, the only variant published above 328: 328 / 353.8), the
# memory's from the largest npu_swiglu (1.97 GB in 1610.5 - 3 us: 1.223 TB/s of 1.6); none
# for the vector unit, whose op-level figures do not separate a factor.
EFFICIENCY: dict[str, Figure] = {
    "cube": _f(round(328 / 353.8, 3), "measured", "limulidae", "hw-b234",
               note="328 measured / 353.8 peak (910B2)"),
    "vector": _f(1.0, "assumed", "tbo-floor", note="no op-level figure separates it"),
    "memory": _f(0.764, "measured", "swiglu", "hw-b234",
                 note="1.223 TB/s sustained / 1.6 peak; the 310P's assumed alike"),
}

_DTYPE_KEYS = {"float16": "fp16", "f16": "fp16", "bfloat16": "bf16", "bf16": "bf16",
               "float32": "fp32", "f32": "fp32", "int8": "int8", "i8": "int8"}


def resolve(soc: str) -> str:
    """The chip whose figures an estimate uses: a chip name of SOCS, or a family ("910B",
    "310P") for the chip CANN-SIM simulates; ValueError names an unknown one."""
    if soc in SOCS:
        return soc
    chip = socs.SIMULATED.get(soc.upper()) if isinstance(soc, str) else None
    if chip is None or chip not in SOCS:
        raise ValueError(f"no figures for SoC {soc!r}: one of "
                         f"{', '.join(list(socs.FAMILIES) + sorted(SOCS))}")
    return chip


def figures(soc: str) -> dict[str, Figure]:
    return SOCS[resolve(soc)]


def _peak_flops(table: Mapping[str, Figure], unit: str, dtype: str) -> float:
    """FLOPs per second of `unit` for `dtype`; an integer dtype counts in OPS. A dtype
    the unit has no figure for (or 0: not offered) falls back to its FP32 rate."""
    key = _DTYPE_KEYS.get(str(dtype).lower(), "fp32")
    if unit == "cube":
        name = "cube_int8_tops" if key == "int8" else f"cube_{key}_tflops"
    else:
        name = f"vector_{'fp16' if key == 'int8' else key}_tflops"
    fig = table.get(name)
    if fig is None or fig.value <= 0:
        fig = table[f"{unit}_fp32_tflops"]
    return fig.value * 1e12


def _roofline_us(table: Mapping[str, Figure], record: Mapping) -> tuple[float, float]:
    """(compute µs, memory µs) of one call record."""
    unit = "cube" if record.get("unit") == "cube" else "vector"
    flops = max(0, int(record.get("flops", 0)))
    moved = max(0, int(record.get("bytes_read", 0))) + max(0, int(record.get("bytes_written", 0)))
    compute = flops / (_peak_flops(table, unit, record.get("dtype", "float32"))
                       * EFFICIENCY[unit].value) * 1e6
    memory = moved / (table["memory_gbs"].value * 1e9 * EFFICIENCY["memory"].value) * 1e6
    return compute, memory


def _bound(overhead: float, compute: float, memory: float) -> str:
    """What dominates a call: the launch when it costs at least the device work."""
    if overhead >= max(compute, memory):
        return "launch"
    return "compute" if compute > memory else "memory"


def estimate_call(soc: str, record: Mapping, *, graph: bool = False) -> float:
    """Estimated µs of one aclnn call: launch + max(compute, memory). In ACL graph replay
    (`graph`) the host launch is replaced by the device's per-kernel dispatch."""
    table = figures(soc)
    overhead = table["graph_kernel_us" if graph else "launch_us"].value
    compute, memory = _roofline_us(table, record)
    return overhead + max(compute, memory)


def _call_bound(table: Mapping[str, Figure], record: Mapping, graph: bool) -> str:
    overhead = table["graph_kernel_us" if graph else "launch_us"].value
    return _bound(overhead, *_roofline_us(table, record))


def _pair(value) -> tuple[int, int]:
    """A [count, bytes] pair of the cost dict (None or absent: nothing)."""
    if not value:
        return 0, 0
    count, size = value
    return max(0, int(count)), max(0, int(size))


def _transfer_us(table: Mapping[str, Figure], cost: Mapping) -> dict[str, float]:
    """µs of host<->device copies (latency + bytes over PCIe), device-to-device copies
    (a launch + read and write at the memory bandwidth) and synchronisations."""
    out = {}
    for key in ("h2d", "d2h"):
        count, size = _pair(cost.get(key))
        out[key] = count * table["copy_us"].value + size / (table["pcie_gbs"].value * 1e9) * 1e6
    count, size = _pair(cost.get("d2d"))
    out["d2d"] = (count * table["launch_us"].value
                  + 2 * size / (table["memory_gbs"].value * 1e9 * EFFICIENCY["memory"].value) * 1e6)
    out["sync"] = max(0, int(cost.get("syncs", 0) or 0)) * table["sync_us"].value
    return out


def _graph_replays(cost: Mapping) -> int:
    graph = cost.get("graph") or {}
    return max(0, int(graph.get("replays", 0) or 0))


def _records(cost: Mapping) -> tuple[list[Mapping], list[int], str]:
    """The call records a case's estimate is made of, how many calls each stands for, and
    from what: `per_call` (one record per call), else `by_op` (one record per operator, its
    calls summed; the dtype is not kept there, f16 assumed: the cube's and the vector's
    usual rate), else nothing."""
    calls = cost.get("per_call")
    if calls:
        return list(calls), [1] * len(calls), "per_call"
    ops = cost.get("by_op") or {}
    records: list[Mapping] = [{"op": op, "unit": v.get("unit", "vector"), "dtype": v.get("dtype", "float16"),
                "flops": v.get("flops", 0), "bytes_read": v.get("bytes_read", 0),
                "bytes_written": v.get("bytes_written", 0)} for op, v in ops.items()]
    return records, [max(0, int(v.get("calls", 1))) for v in ops.values()], "by_op" if ops else ""


def _calls_us(chip: str, cost: Mapping, graph: bool) -> tuple[list[float], list[str], str]:
    """µs of each call record (or per-operator record) of a case, launched on the host
    (eager) or dispatched from a graph replay, with its bound and the records' basis."""
    table = SOCS[chip]
    records, counts, basis = _records(cost)
    overhead = table["graph_kernel_us" if graph else "launch_us"].value
    # a by_op record stands for n calls: n launches around their summed device work
    per_call = [estimate_call(chip, rec, graph=graph) + (n - 1) * overhead
                for rec, n in zip(records, counts)]
    return per_call, [_call_bound(table, r, graph) for r in records], basis


def estimate_case(soc: str, cost: Mapping, *, transfers: bool = True) -> dict:
    """The estimate of one case's counted work: per call µs and what bounds it, the host
    copies and synchronisations (without `transfers`: left out, as test-backend-ops' perf
    mode times the compute alone, the inputs already uploaded), and the total `us`. In ACL
    graph mode (`graph.replays` > 0) the calls are the kernels of the captured graph, each
    replay runs them all at the device's per-kernel dispatch and costs one host launch;
    the capture's own host calls are not charged (once per graph, not per compute)."""
    chip = resolve(soc)
    table = SOCS[chip]
    replays = _graph_replays(cost)
    per_call, bound, basis = _calls_us(chip, cost, replays > 0)
    extra = _transfer_us(table, cost) if transfers else {}
    if replays:
        per_call = [replays * us for us in per_call]
        extra["graph_launch"] = replays * table["launch_us"].value
    total = sum(per_call) + sum(extra.values())
    return {"us": total, "soc": chip, "model": MODEL_VERSION, "estimate": True,
            "per_call_us": per_call, "bound": bound, "other_us": extra, "basis": basis}


def _count(cost: Mapping, key: str) -> int:
    """A case's host calls or device kernels (absent: one per call record)."""
    value = cost.get(key)
    return max(0, int(len(cost.get("per_call") or ()) if value is None else value))


def estimate_forward(soc: str, runs, *, graph: bool = False) -> dict:
    """The estimate of one forward pass of a model: `runs` is (op, count, cost) per case,
    `count` how many times the pass runs that case. Only the cases' calls count: a pass's
    tensors stay on the device, so a case's copies and synchronisations (the test's
    uploads and read-backs) are left out. Eager, each call is a host launch; with `graph`,
    the pass is one ACL graph: its calls are kernels dispatched on the device, and the
    pass costs one host launch. Returns the total µs, per op its µs and host calls, and
    the pass's host calls and device kernels."""
    chip = resolve(soc)
    by_op: dict[str, float] = {}
    calls_by_op: dict[str, int] = {}
    kernels = 0
    for op, count, cost in runs:
        by_op[op] = by_op.get(op, 0.0) + count * sum(_calls_us(chip, cost, graph)[0])
        calls_by_op[op] = calls_by_op.get(op, 0) + count * _count(cost, "calls")
        kernels += count * _count(cost, "kernels")
    launch = SOCS[chip]["launch_us"].value if graph else 0.0
    return {"us": sum(by_op.values()) + launch, "by_op": by_op, "calls_by_op": calls_by_op,
            "calls": sum(calls_by_op.values()), "kernels": kernels, "soc": chip,
            "graph": graph, "model": MODEL_VERSION}
