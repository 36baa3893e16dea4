"""Catalog versions (cases/versions.py): the version in use, a later version as deltas on
the families, and the catalog version recorded by results, resumes and merges."""
import json

import pytest

from cannops.cases import versions
from cannops.cases.catalog import Family, Since, all_cases, at_version, new_params
from cannops.cli.engine.results import Run, load_resume, merge_runs
from _ops import ops


def test_versions_are_named_and_picked_by_ggml_release():
    assert versions.normalize("v0.20.2") == "0.20.2" and versions.normalize("0.25.3") == "0.25.3"
    with pytest.raises(ValueError, match="known: 0.20.2, 0.25.3"):
        versions.normalize("0.22")
    assert versions.for_ggml("0.20.2") == "0.20.2"
    assert versions.for_ggml("0.24.0") == "0.20.2"      # the newest catalog not after it
    assert versions.for_ggml("0.25.3") == versions.for_ggml("0.30.0") == "0.25.3"
    assert versions.for_ggml(None) == versions.NEWEST    # no ggml device


def test_a_renamed_struct_keeps_its_old_names_at_the_old_version():
    old = {c.name for c in all_cases("support", "0.20.2") if c.op == "CONV_2D"}
    new = {c.name for c in all_cases("support", "0.25.3") if c.op == "CONV_2D"}
    assert old and all(n.endswith(",cwhn=0)") or n.endswith(",cwhn=1)") for n in old)
    # every old name comes back when the new param is removed
    assert {n.replace(",kernel_offset=0)", ")") for n in new} >= old


def test_since_deltas_add_points_and_params_with_their_defaults():
    def build(g, a, b=0):
        return None
    fam = Family(name="x", build=build, vars=("a",), op="X", eval_grid=lambda: [dict(a=1), dict(a=2)],
                 perf_grid=lambda: [dict(a=7)],
                 changes=(new_params("9.0.0", ("a",), c=0, add=lambda: [dict(a=3, c=5)],
                                     perf_add=lambda: [dict(a=8)]),
                          Since("9.1.0", drop=lambda p: p["a"] == 2)))
    from cannops.cases import catalog
    catalog.FAMILIES.__class__.__setitem__(catalog.FAMILIES, "x", fam)
    catalog._ORDER["x"] = ("test", 10 ** 6)
    try:
        old = list(at_version("x", "0.20.2").eval_grid())
        at_9 = at_version("x", "9.0.0")
        assert old == [dict(a=1), dict(a=2)]
        assert [at_9.vars_str(p) for p in at_9.eval_grid()] == ["a=1,c=0", "a=2,c=0", "a=3,c=5"]
        assert [p["a"] for p in at_version("x", "9.1.0").eval_grid()] == [1, 3]
        # the perf grid takes its own new points, with the new params' defaults
        assert list(at_version("x", "0.20.2").perf_grid()) == [dict(a=7)]
        assert [at_9.vars_str(p) for p in at_9.perf_grid()] == ["a=7,c=0", "a=8,c=0"]
        at_9.build(None, a=1, c=0)                      # c at its default: dropped
        with pytest.raises(NotImplementedError, match="c=5"):
            at_9.build(None, a=3, c=5)                  # a value build() does not model
    finally:
        dict.__delitem__(catalog.FAMILIES, "x")   # its resolved versions stay cached, unused
        del catalog._ORDER["x"]


def test_catalog_option_and_list_devices():
    p = ops("list", "cases", "-o", "CONV_2D", "--catalog", "0.25.3")
    assert p.returncode == 0 and p.stdout.splitlines()[0].endswith(",kernel_offset=0)")
    p = ops("list", "cases", "-o", "CONV_2D", "--catalog", "v0.20.2")
    assert p.returncode == 0 and "kernel_offset" not in p.stdout
    p = ops("list", "cases", "--catalog", "0.22")
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "unknown catalog version" in p.stderr
    p = ops("list", "devices", "--catalog", "0.25.3")
    assert "catalog: 0.25.3" in p.stdout


def test_results_record_the_catalog_and_refuse_to_mix_versions(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, version in ((a, "0.20.2"), (b, "0.25.3")):
        p = ops("test", "-b", "NUMPY", "-o", "ABS", "-p", "f32", "--shard", "1/2", "--catalog", version,
                "--results", str(path))
        assert p.returncode == 0, p.stderr
        assert json.loads(path.read_text())["catalog"] == version
    with pytest.raises(ValueError, match="different catalog versions"):
        merge_runs([Run.from_dict(json.loads(a.read_text())), Run.from_dict(json.loads(b.read_text()))])
    p = ops("merge", str(a), str(b))
    assert p.returncode == 2 and "catalog" in p.stderr and p.stderr.strip().count("\n") == 0
    with pytest.raises(ValueError, match="catalog 0.20.2, this run's of 0.25.3"):
        load_resume(str(a), Run(mode="test", shard="1/2", ops_filter="ABS", params_filter="f32", catalog="0.25.3"))
    p = ops("test", "-b", "NUMPY", "-o", "ABS", "-p", "f32", "--shard", "1/2", "--catalog", "0.25.3",
            "--resume", str(a))
    assert p.returncode == 2 and "--catalog 0.20.2 resumes it" in p.stderr


def test_a_results_file_without_a_catalog_is_of_v0_20_2():
    assert Run.from_dict({"schema": "ops-results/1", "mode": "test"}).catalog == "0.20.2"
