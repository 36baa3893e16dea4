"""ACL graph mode against eager, counted (issue 42, part 1): the same perf cases on ggml-cann's
910B and 910B-graph variants through `ops perf -b GGML-CANN0` (the bridge built against
each; the simulator serves ggml-cann in ops' own process and counts every timed compute):
per op execution the same kernels, and fewer host calls in graph mode, where a graph is
captured once and each later compute only replays it.

Made by `make ggml-cann-check` (VARIANTS with 910B and 910B-graph): OPS_COST_GRAPH names
the folder of its two results files; skipped otherwise."""
import json
import os
import pathlib

import pytest

WHERE = os.environ.get("OPS_COST_GRAPH")
pytestmark = pytest.mark.skipif(not WHERE, reason="make ggml-cann-check makes the two runs (OPS_COST_GRAPH)")


def _costs(name: str) -> dict[str, dict]:
    results = json.loads((pathlib.Path(WHERE) / name).read_text())["results"]
    return {f"{r['op']}({r['params']})": r["cost"] for r in results if r["status"] == "OK"}


def test_graph_mode_runs_the_same_kernels_with_fewer_host_calls():
    eager, graph = _costs("910B.json"), _costs("910B-graph.json")
    assert eager.keys() == graph.keys() and len(eager) >= 3
    for name in eager:
        e, g = eager[name], graph[name]
        # each timed compute counted: runs, the op's executions in them (test-backend-ops' "runs")
        assert e["runs"] > 0 and g["runs"] > 0, name
        assert e["kernels"] % e["runs"] == 0 and e["kernels"] * g["runs"] == g["kernels"] * e["runs"], name
        # eager: every kernel a host call, no graph; graph: one replay per compute
        assert e["calls"] == e["kernels"] and e["graph"] is None, name
        assert g["graph"]["replays"] == g["computes"], name
        # the calls are the captures' alone: at most one compute's worth per captured graph
        assert g["calls"] * e["runs"] < e["calls"] * g["runs"], name
        assert g["calls"] <= g["graph"]["captured"] * g["kernels"] // g["computes"] * g["computes"], name
