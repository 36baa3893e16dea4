"""The estimated device time (backend/cann/perf_model.py): the roofline's equations checked
against figures computed by hand, the figures' sources, and the error on the op-level
measurements of real devices that docs/perf-model.md publishes."""
import ast
import re
from pathlib import Path

import pytest

from cannops.backend.cann import perf_model
import perf_calibration

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "perf-model.md"

# the published figures, written here by hand (docs/perf-model.md): 910B3 cube FP16
# 294.9 TFLOPS, HBM 1.6 TB/s, 310P3 204 GB/s; the launch 11 us measured
B3_CUBE_FP16 = 294.9e12
B3_HBM = 1.6e12
LAUNCH = 11.0
CUBE_EFF = 0.927          # limulidae: 328 TFLOPS measured on a 910B2 of 353.8
MEM_EFF = 0.764           # FlagGems #6324: 1.223 TB/s sustained of 1.6


def _call(unit="vector", dtype="float16", flops=0, read=0, written=0, op="aclnnX"):
    return {"op": op, "unit": unit, "dtype": dtype, "flops": flops, "bytes_read": read,
            "bytes_written": written, "workspace": 0}


def test_a_big_matmul_costs_its_flops_over_the_cube_peak():
    # MUL_MAT f16 m=n=k=4096: 2*4096^3 FLOPs, 3 * 4096^2 * 2 bytes moved
    flops = 2 * 4096 ** 3
    moved = 3 * 4096 * 4096 * 2
    rec = _call("cube", "float16", flops, 2 * 4096 * 4096 * 2, 4096 * 4096 * 2, "aclnnMatmul")
    want = LAUNCH + flops / (B3_CUBE_FP16 * CUBE_EFF) * 1e6   # 11 + 502.8 us
    assert moved / B3_HBM * 1e6 < 100                   # memory far below compute
    assert perf_model.estimate_call("Ascend910B3", rec) == pytest.approx(want, rel=1e-9)
    est = perf_model.estimate_case("Ascend910B3", {"per_call": [rec]})
    assert est["bound"] == ["compute"] and est["us"] == pytest.approx(want, rel=1e-9)


def test_a_copy_costs_its_bytes_over_the_bandwidth():
    # 64 MiB read and written by one call: 134,217,728 bytes / (1.6 TB/s * 0.764) = 109.8 us
    size = 64 * 2 ** 20
    rec = _call("vector", "float32", 0, size, size, "aclnnInplaceCopy")
    want = LAUNCH + 2 * size / (B3_HBM * MEM_EFF) * 1e6
    assert perf_model.estimate_call("910B", rec) == pytest.approx(want, rel=1e-9)
    assert perf_model.estimate_case("910B", {"per_call": [rec]})["bound"] == ["memory"]


def test_the_bound_switches_where_device_work_passes_the_launch():
    # the launch (11 us) buys 11e-6 * 1.6e12 * 0.764 = 13.4 MB of memory traffic on the 910B3
    at = int(LAUNCH * 1e-6 * B3_HBM * MEM_EFF)
    below = _call(read=at // 2 - 1000, written=at // 2 - 1000)
    above = _call(read=at // 2 + 1000, written=at // 2 + 1000)
    est = perf_model.estimate_case("Ascend910B3", {"per_call": [below, above]})
    assert est["bound"] == ["launch", "memory"]
    # the same bytes on the 910B4 (0.8 TB/s) are memory-bound already below
    assert perf_model.estimate_case("Ascend910B4", {"per_call": [below]})["bound"] == ["memory"]


def test_a_dtype_the_unit_lacks_runs_at_its_fp32_rate():
    # the 310P has no BF16: a bf16 matmul is costed at its cube FP32 rate, 140/8 TFLOPS
    rec = _call("cube", "bfloat16", 10 ** 12)
    est = perf_model.estimate_call("310P", rec)
    assert est - perf_model.figures("310P")["launch_us"].value == pytest.approx(1e12 / (17.5e12 * CUBE_EFF) * 1e6)


def test_int8_on_the_cube_counts_at_its_int8_rate():
    # 910B3: 589.8 TOPS INT8, twice its FP16 rate
    rec = _call("cube", "int8", 2 * 10 ** 12)
    est = perf_model.estimate_call("Ascend910B3", rec) - LAUNCH
    assert est == pytest.approx(2e12 / (589.8e12 * CUBE_EFF) * 1e6)


def test_a_case_adds_its_syncs_and_host_copies():
    fig = perf_model.figures("Ascend910B3")
    cost = {"per_call": [_call()], "syncs": 2, "h2d": [3, 63_000_000], "d2h": [1, 0]}
    est = perf_model.estimate_case("Ascend910B3", cost)
    want = (LAUNCH + 2 * fig["sync_us"].value + 4 * fig["copy_us"].value
            + 63e6 / 31.5e9 * 1e6)                       # 2,000 us over PCIe 4.0 x16
    assert est["us"] == pytest.approx(want)
    assert est["soc"] == "Ascend910B3" and est["model"] == perf_model.MODEL_VERSION


def test_graph_replay_replaces_each_launch_by_one_per_replay():
    fig = perf_model.figures("910B")
    calls = [_call() for _ in range(10)]
    eager = perf_model.estimate_case("910B", {"per_call": calls})
    graph = perf_model.estimate_case("910B", {"per_call": calls,
                                              "graph": {"captured": 10, "replays": 1}})
    assert eager["us"] == pytest.approx(10 * LAUNCH)
    assert graph["us"] == pytest.approx(10 * fig["graph_kernel_us"].value + LAUNCH)
    assert graph["us"] < eager["us"]


def test_a_family_names_the_simulated_chip_and_an_unknown_soc_is_refused():
    assert perf_model.resolve("910B") == "Ascend910B3"
    assert perf_model.resolve("310p") == "Ascend310P3"
    assert perf_model.resolve("Ascend910B4") == "Ascend910B4"
    with pytest.raises(ValueError, match="Ascend910B2"):
        perf_model.resolve("Ascend910A")


def test_chip_variants_differ_where_their_published_figures_do():
    b2, b3, b4 = (perf_model.figures(f"Ascend910B{i}") for i in (2, 3, 4))
    assert b2["cube_fp16_tflops"].value > b3["cube_fp16_tflops"].value > b4["cube_fp16_tflops"].value
    assert b4["memory_gbs"].value == b3["memory_gbs"].value / 2


def test_every_figure_has_a_kind_and_a_source():
    for chip, table in {**perf_model.SOCS, "efficiency": perf_model.EFFICIENCY}.items():
        for name, fig in table.items():
            assert fig.kind in perf_model.KINDS, (chip, name)
            assert len(fig.source) > 20, (chip, name)
            assert fig.value >= 0, (chip, name)


def test_every_source_is_cited_by_a_figure_and_the_page():
    text = DOC.read_text()
    tables = [*perf_model.SOCS.values(), perf_model.EFFICIENCY]
    cited = " ".join(f.source for t in tables for f in t.values())
    for key, source in perf_model.SOURCES.items():
        assert source in cited, key
        assert f"`{key}`" in text, f"docs/perf-model.md does not list source {key}"


def test_every_assumed_figure_is_listed_as_such_on_the_page():
    text = DOC.read_text()
    assumed = {name for t in perf_model.SOCS.values() for name, f in t.items()
               if f.kind == "assumed"}
    assert assumed
    for name in assumed:
        assert re.search(rf"`{name}`[^\n]*assumed", text), name


def test_the_model_imports_nothing_of_the_simulator():
    tree = ast.parse((ROOT / "backend" / "cann" / "perf_model.py").read_text())
    names = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [n for n in names if "sim" in n.split(".")], names


def test_the_error_on_measured_ops_is_what_the_page_says():
    text = DOC.read_text()
    assert perf_calibration.markdown() in text
    for independent in (False, True):
        median, low, high = perf_calibration.summary(independent)
        assert 0.8 <= median <= 1.25
        assert f"median {median:.2f}, lowest {low:.2f}, highest {high:.2f}" in text


def test_a_forward_pass_sums_its_cases_times_their_counts():
    # a case of 2 calls (each 11 us + 1.6 MB at 1.6 TB/s * 0.764: 1.309 us) run 3 times,
    # and one of 1 call run once: 7 calls of 12.309 us, 7 host calls
    call = LAUNCH + 1.6e6 / (B3_HBM * MEM_EFF) * 1e6
    big = {"calls": 2, "kernels": 2, "per_call": [_call(read=800_000, written=800_000)] * 2}
    small = {"calls": 1, "kernels": 1, "per_call": [_call(read=800_000, written=800_000)]}
    est = perf_model.estimate_forward("Ascend910B3", [("ADD", 3, big), ("MUL", 1, small)])
    assert est["us"] == pytest.approx(7 * call)
    assert est["by_op"] == pytest.approx({"ADD": 6 * call, "MUL": call})
    assert est["calls"] == 7 and est["calls_by_op"] == {"ADD": 6, "MUL": 1} and est["kernels"] == 7


def test_without_per_call_records_each_op_is_one_roofline_of_its_summed_calls():
    # ops test without --cost keeps by_op only: 3 aclnnAdd calls moving 16 MB in all cost
    # 3 launches and one roofline of the sum, 16e6 / (1.6e12 * 0.764) = 13.09 us
    cost = {"calls": 3, "by_op": {"aclnnAdd": {"calls": 3, "bytes_read": 10_000_000,
                                               "bytes_written": 6_000_000, "flops": 0,
                                               "unit": "vector"}}}
    est = perf_model.estimate_case("Ascend910B3", cost)
    assert est["basis"] == "by_op"
    assert est["us"] == pytest.approx(3 * LAUNCH + 16e6 / (B3_HBM * MEM_EFF) * 1e6)


def test_each_replay_runs_every_kernel_of_the_graph():
    fig = perf_model.figures("910B")
    calls = [_call() for _ in range(4)]
    graph = perf_model.estimate_case("910B", {"per_call": calls,
                                              "graph": {"captured": 4, "replays": 3}})
    assert graph["us"] == pytest.approx(3 * (4 * fig["graph_kernel_us"].value + LAUNCH))


def test_a_forward_pass_leaves_the_tests_copies_out_and_can_run_as_one_graph():
    fig = perf_model.figures("910B")
    cost = {"calls": 2, "kernels": 2, "per_call": [_call(), _call()], "syncs": 2,
            "h2d": [5, 10 ** 6], "d2h": [5, 10 ** 6]}
    eager = perf_model.estimate_forward("910B", [("ADD", 10, cost)])
    graph = perf_model.estimate_forward("910B", [("ADD", 10, cost)], graph=True)
    assert eager["us"] == pytest.approx(20 * LAUNCH)
    assert graph["us"] == pytest.approx(20 * fig["graph_kernel_us"].value + LAUNCH)


def test_without_transfers_a_case_is_its_calls_alone():
    cost = {"per_call": [_call()], "syncs": 2, "h2d": [5, 10 ** 6], "d2h": [5, 10 ** 6]}
    assert perf_model.estimate_case("910B", cost, transfers=False)["us"] == pytest.approx(LAUNCH)
    assert perf_model.estimate_case("910B", cost)["us"] > 10 * LAUNCH
