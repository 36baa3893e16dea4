"""`ops support --from-gguf MODEL --run` on CANN-SIM: the estimated device time per op of a
forward pass, calls per token and tokens per second (cli/model_estimate.py), from counted
work written here by hand for a model's cases."""
from types import SimpleNamespace

import pytest

from _gguf_models import write_model, MODELS
from cannops.cases.from_model import derive, read_gguf
from cannops.cli.model_estimate import estimate_lines

LAUNCH = 11.0   # docs/perf-model.md: the 910B's launch figure


@pytest.fixture(scope="module")
def model_cases(tmp_path_factory):
    path = MODELS["llama"](str(tmp_path_factory.mktemp("gguf") / "llama.gguf"))
    return derive(read_gguf(path), batches=(1, 8), ctx=256)


def _results(model_cases, device, cost=None):
    """One result per case; each case's counted work: one call moving nothing (its
    estimate is one launch), unless `cost` says otherwise."""
    one = {"calls": 1, "kernels": 1, "per_call": [{"op": "aclnnX", "unit": "vector",
           "dtype": "float32", "flops": 0, "bytes_read": 0, "bytes_written": 0, "workspace": 0}]}
    out = []
    for mc in model_cases:
        op, _, params = mc.case.name.partition("(")
        out.append(SimpleNamespace(device=device, op=op, params=params[:-1], status="OK",
                                   cost=one if cost is None else cost))
    return out


def test_each_pass_costs_its_cases_launches(model_cases):
    lines = estimate_lines(_results(model_cases, "CANN-SIM"), model_cases, "CANN-SIM")
    text = "\n".join(lines)
    assert "Ascend910B3" in text and "an estimate" in text
    for t in (1, 8):
        runs = sum(mc.by_tokens.get(t, 0) for mc in model_cases)
        us = runs * LAUNCH
        total = next(line for line in lines if line.strip().startswith("total"))
        assert f"{us:.1f}" in total
        graph = runs * 3.0 + LAUNCH              # graph_kernel_us per kernel, one launch
        assert f"{t * 1e6 / us:,.1f} tokens/s at {t} token" in text
        assert f"({t * 1e6 / graph:,.1f} as one ACL graph)" in text
    mul_mat = next(line for line in lines if line.strip().startswith("MUL_MAT "))
    n = sum(mc.by_tokens.get(1, 0) for mc in model_cases if mc.case.op == "MUL_MAT")
    assert mul_mat.split()[1] == f"{n * LAUNCH:.1f}" and mul_mat.split()[3] == f"{n:.2f}"


def test_the_310p_device_is_costed_with_its_own_figures(model_cases):
    text = "\n".join(estimate_lines(_results(model_cases, "CANN-SIM:310P"), model_cases,
                                    "CANN-SIM:310P"))
    assert "Ascend310P3" in text


def test_no_estimate_without_counts(model_cases):
    results = _results(model_cases, "CANN-SIM")
    results[3].cost = None            # a case not run (not supported, or probed only)
    assert estimate_lines(results, model_cases, "CANN-SIM") == []
    assert estimate_lines(_results(model_cases, "GGML-CPU", cost={}), model_cases, "GGML-CPU") == []
