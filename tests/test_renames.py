"""Cases across catalog versions (cases/renames.py): a case renamed by 0.25.3's new params
has its v0.20.2 name, and perf and status baselines of the other version compare it under
that name."""
import csv
import json

from cannops.cases import all_cases
from cannops.cases.catalog import Case, family
from cannops.cases.renames import aliases, name_in
from cannops.cli.perf_report import load_perf_baseline, markdown_vs_baseline, slower_than_baseline
from cannops.cli.report import load_baseline, markdown_report
from cannops.cli.engine.results import CaseResult, DeviceInfo, Run


def _v0202_names(reference_dir):
    with open(reference_dir / "test-backend-ops-v0.20.2-test-cases.tsv", newline="") as f:
        return {f'{r["op"]}({r["params"]})' for r in csv.DictReader(f, delimiter="\t")}


def test_old_names_are_test_backend_ops_v0202_names_and_map_back(reference_dir):
    """Every 0.25.3 case with a v0.20.2 name that test-backend-ops v0.20.2 printed maps back
    onto itself; most v0.20.2 names are reached (test-backend-ops renamed, not removed, them)."""
    ref = _v0202_names(reference_dir)
    new = all_cases("test", "0.25.3")
    old_cases = {c.name: c for c in all_cases("test", "0.20.2")}
    reached = set()
    for c in new:
        old = name_in(c, "0.20.2")
        if old in ref:
            reached.add(old)
            assert name_in(old_cases[old], "0.25.3") == c.name, (c.name, old)
    renamed = [c for c in new if name_in(c, "0.20.2") not in (None, c.name) and name_in(c, "0.20.2") in ref]
    assert renamed and any(c.op == "MUL_MAT" for c in renamed) and any(c.op == "FLASH_ATTN_EXT" for c in renamed)
    # what is left is what test-backend-ops 0.25.3 dropped: a small part
    assert len(ref - reached) < 0.05 * len(ref), sorted(ref - reached)[:5]


def test_a_new_param_off_its_default_has_no_old_name():
    fam = family("mul_mat", "0.25.3")
    base = next(p for p in fam.eval_grid() if p["type_a"] == "f32" and not p["m_v"])
    plain, strided = Case(fam, base), Case(fam, {**base, "m_v": base["m"] + 8})
    old = name_in(plain, "0.20.2")
    assert old == plain.name.replace(",src_overlap=0,m_v=0,pad=0)", ")") and old != plain.name
    assert name_in(strided, "0.20.2") is None
    # a struct new in 0.25.3 has no name before it
    assert name_in(all_cases("test", "0.25.3")[-1], "0.20.2") in (None, all_cases("test", "0.25.3")[-1].name)
    conv = Case(family("conv_1d_dw", "0.25.3"), next(iter(family("conv_1d_dw", "0.25.3").eval_grid())))
    assert name_in(conv, "0.20.2") is None


def _renamed_perf_case():
    new = all_cases("perf", "0.25.3")
    old = {c.name for c in all_cases("perf", "0.20.2")}
    return next((c, name_in(c, "0.20.2")) for c in new
                if c.op == "MEAN" and name_in(c, "0.20.2") in old and name_in(c, "0.20.2") != c.name)


def test_perf_baseline_of_v0202_compares_a_renamed_case_under_its_old_name(tmp_path):
    case, old_name = _renamed_perf_case()
    before = Run(mode="perf", devices=[DeviceInfo("GGML-CPU")], catalog="0.20.2")
    before.results = [CaseResult("GGML-CPU", "MEAN", old_name[len("MEAN("):-1], "OK", time_us=100.0, n_runs=1)]
    path = tmp_path / "before.json"
    before.write_json(str(path))
    base = load_perf_baseline(str(path))
    assert base.catalog == "0.20.2"
    now = Run(mode="perf", devices=[DeviceInfo("GGML-CPU")], catalog="0.25.3")
    now.results = [CaseResult("GGML-CPU", "MEAN", case.vars, "OK", time_us=150.0, n_runs=1)]
    assert slower_than_baseline(now, base, 10.0) == {"GGML-CPU": {case.name: (100.0, 50.0)}}
    table = "\n".join(markdown_vs_baseline(now, base))
    assert f"| {case.vars} " in table and "100.00" in table and "0.67" in table
    # the same file read as a CSV says no version: the other versions' names are tried
    csv_path = tmp_path / "before.csv"
    csv_path.write_text(f'device,op,params,status,time_us\nGGML-CPU,MEAN,"{old_name[5:-1]}",OK,100.0\n')
    assert slower_than_baseline(now, load_perf_baseline(str(csv_path)), 10.0)["GGML-CPU"][case.name][0] == 100.0


def test_status_report_against_v0202_results_counts_renamed_new_and_gone(tmp_path):
    new = [c for c in all_cases("test", "0.25.3") if c.op in ("MEAN", "CONV_1D_DW")]
    old = [c for c in all_cases("test", "0.20.2") if c.op == "MEAN"]
    renamed = [c for c in new if name_in(c, "0.20.2") in {o.name for o in old} and name_in(c, "0.20.2") != c.name]
    same = [c for c in new if c.name in {o.name for o in old}]
    assert renamed
    before = Run(mode="test", devices=[DeviceInfo("GGML-CPU")], catalog="0.20.2")
    # one renamed case failed then; the extra old name matches nothing now
    fails = name_in(renamed[0], "0.20.2")
    before.results = [CaseResult("GGML-CPU", o.op, o.vars, "FAIL" if o.name == fails else "OK") for o in old]
    before.results.append(CaseResult("GGML-CPU", "MEAN", "type=f32,ne=[1,2,3,4]", "OK"))
    path = tmp_path / "before.json"
    before.write_json(str(path))
    now = Run(mode="test", devices=[DeviceInfo("GGML-CPU")], catalog="0.25.3")
    now.results = [CaseResult("GGML-CPU", c.op, c.vars, "OK", index=i) for i, c in enumerate(new)]
    report = markdown_report(now, load_baseline(str(path)))
    n_new = len(new) - len(same) - len(renamed)
    gone = len(old) + 1 - len(same) - len(renamed)
    assert (f"Catalog 0.20.2 (baseline) -> 0.25.3: {len(same)} cases under the same name, {len(renamed)} "
            f"renamed (compared under their 0.20.2 names), {n_new} new, {gone} gone; 1 of the "
            f"{len(same) + len(renamed)} in both changed status.") in report
    assert f"| {renamed[0].name} | FAIL | OK |" in report
    assert n_new >= 9   # CONV_1D_DW's cases at least
    # the same run as its own baseline: no such line
    path.write_text(json.dumps(now.to_dict()))
    assert "Catalog " not in markdown_report(now, load_baseline(str(path)))


def test_aliases_only_for_names_that_differ():
    names = [c.name for c in all_cases("test", "0.25.3") if c.op in ("ABS", "MEAN")]
    got = aliases(names, "test", "0.25.3", ["0.20.2"])
    assert got and all(n.startswith("MEAN(") for n in got)
    assert aliases(names, "test", "0.25.3", ["0.25.3"]) == {}
