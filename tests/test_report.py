"""The CI's status report: per-op status from case results, the markdown summary in the
Ascend CI's format, the changed-status table against a baseline, per-op logs, and the
report files a CI keeps (`--summary-file`, `--log-dir`)."""
import json
import os
import re

import pytest

from cannops.cli.report import load_baseline, markdown_report
from cannops.cli.engine.results import CaseResult, DeviceInfo, Run
from cannops.cli.support import device_statuses
from _ops import ops


# the CI's symbols, as its reports spell them (the spec, written out independently here)
SYMBOL = {"supported": "\u2705", "partial": "\U0001f7e1", "fail": "\u274c",
          "unsupported": "\u2753", "unknown": "\U0001f50d"}
BY_SYMBOL = {v: k for k, v in SYMBOL.items()}
CLASSES = list(SYMBOL)

# per status, a set of case statuses that gives it
CASES_FOR = {
    "supported": ["OK", "OK", "known deviation"],
    "partial": ["OK", "not supported"],
    "fail": ["OK", "not supported", "FAIL"],
    "unsupported": ["not supported", "not supported"],
    "unknown": ["skipped", "skipped"],
}


def results_for(op_status: dict, device="CANN0", start=0):
    out, i = [], start
    for op, status in op_status.items():
        for k, st in enumerate(CASES_FOR[status]):
            out.append(CaseResult(device=device, op=op, params=f"type=f32,k={k}", status=st,
                                  reason="[X] NMSE = 1.0 > 1e-07" if st == "FAIL" else "",
                                  note="recorded" if st == "known deviation" else "", index=i))
            i += 1
    return out


def make_run(op_status: dict, devices=("CANN0",), ops_filter=None, mode="test") -> Run:
    run = Run(mode=mode, ops_filter=ops_filter, version="test")
    for d in devices:
        run.devices.append(DeviceInfo(d, f"{d} device"))
        run.results += results_for(op_status, d)
    return run


def table_rows(text: str, heading: str) -> list[tuple[str, ...]]:
    """The rows of the first table after `heading` (header and rule excluded)."""
    body = text.split(heading, 1)[1]
    rows = []
    for line in body.splitlines()[1:]:
        if not line.startswith("|"):
            if rows or line.strip():
                if rows:
                    break
            continue
        cells = tuple(c.strip() for c in line.strip("|").split("|"))
        rows.append(cells)
    return rows[2:]


# --- per-op status ------------------------------------------------------------------------

@pytest.mark.parametrize("status", CLASSES)
def test_each_status_class_from_case_results(status):
    run = make_run({"OPX": status})
    assert device_statuses(run) == {"CANN0": {"OPX": status}}


def test_one_failing_case_among_unsupported_ones_is_fail_not_partial():
    run = make_run({})
    run.results = [CaseResult("CANN0", "OPX", f"k={k}", s, index=k)
                   for k, s in enumerate(["not supported"] * 5 + ["FAIL"])]
    assert device_statuses(run)["CANN0"]["OPX"] == "fail"


def test_unknown_when_the_filter_named_an_op_without_cases():
    run = make_run({"ABS": "supported"}, ops_filter="ABS,NEG,SSM_CONV(type=f32,ne_a=[3,1024,1,1],ne_b=[3,1024,1,1])")
    assert device_statuses(run)["CANN0"] == {"ABS": "supported", "NEG": "unknown", "SSM_CONV": "unknown"}


def test_unknown_on_a_device_without_results_for_the_op():
    run = make_run({"ABS": "supported"}, devices=("CANN0", "GGML-CPU"))
    run.results = [r for r in run.results if r.device == "CANN0"]
    assert device_statuses(run) == {"CANN0": {"ABS": "supported"}, "GGML-CPU": {"ABS": "unknown"}}


def test_an_unavailable_device_leaves_skipped_cases_and_unknown_ops(monkeypatch):
    from cannops.cli.engine import RunSpec, runner
    from cannops.cli.printers import QuietPrinter
    from cannops.cli.engine.selection import select_cases

    class DeadPool:
        def __init__(self, name, *a, **kw):
            pass

        def start(self):
            raise runner.WorkerStartError("no NPU here")

        def close(self):
            pass

    monkeypatch.setattr(runner, "WorkerPool", DeadPool)
    cases = select_cases("test", "ABS,NEG")
    run = runner.run_cases(cases, ["CANN0"], RunSpec(ops_filter="ABS,NEG"), QuietPrinter("test"))
    assert len(run.results) == len(cases)
    assert all(r.status == "skipped" and r.reason == "no NPU here" for r in run.results)
    assert device_statuses(run) == {"CANN0": {"ABS": "unknown", "NEG": "unknown"}}
    assert run.exit_status == 1
    # the results file keeps them, so `ops support --results` sees the same
    again = Run.from_dict(json.loads(json.dumps(run.to_dict())))
    assert device_statuses(again) == device_statuses(run)


# --- the summary table ---------------------------------------------------------------------

def test_summary_is_ordered_by_status_then_name_with_the_tips_line():
    statuses = {"ZETA": "supported", "ALPHA": "unknown", "MUL": "fail", "ADD": "supported",
                "ADD1": "partial", "CPY": "unsupported", "BETA": "partial"}
    text = markdown_report(make_run(statuses))
    lines = text.splitlines()
    assert lines[:4] == ["### Backend Operator Support Summary", "", "| Operator | Status |", "| --- | --- |"]
    assert table_rows(text, "### Backend Operator Support Summary") == [
        ("ADD", SYMBOL["supported"]), ("ZETA", SYMBOL["supported"]), ("ADD1", SYMBOL["partial"]),
        ("BETA", SYMBOL["partial"]), ("MUL", SYMBOL["fail"]), ("CPY", SYMBOL["unsupported"]),
        ("ALPHA", SYMBOL["unknown"])]
    assert lines[-2:] == ["", "Tips: \u2705 supported, \U0001f7e1 partially supported, \u274c fail, "
                              "\u2753 unsupported, \U0001f50d unknown"]
    assert text.endswith("unknown\n") and "Operators with changed status" not in text


def test_several_devices_get_one_block_each():
    run = make_run({"ABS": "supported"}, devices=("CANN0", "GGML-CPU"))
    run.results += results_for({"NEG": "fail"}, "GGML-CPU", start=100)
    text = markdown_report(run)
    assert text.count("### Backend Operator Support Summary (") == 2
    assert table_rows(text, "### Backend Operator Support Summary (CANN0)") == [
        ("ABS", SYMBOL["supported"]), ("NEG", SYMBOL["unknown"])]
    assert table_rows(text, "### Backend Operator Support Summary (GGML-CPU)") == [
        ("ABS", SYMBOL["supported"]), ("NEG", SYMBOL["fail"])]
    # and such a report is a baseline, device by device
    path_statuses = {"CANN0": {"ABS": "supported", "NEG": "unknown"}, "GGML-CPU": {"ABS": "supported", "NEG": "fail"}}
    from cannops.cli.report import parse_summary
    assert parse_summary(text) == path_statuses


# --- the changed-status table: every kind of transition -----------------------------------

def _baseline_md(statuses: dict) -> str:
    rows = "".join(f"| {op} | {SYMBOL[s]} |\n" for op, s in statuses.items())
    return ("### Backend Operator Support Summary\n\n| Operator | Status |\n| --- | --- |\n" + rows
            + "\nTips: whatever the CI said\n")


def _transitions():
    before, after = {}, {}
    for a in CLASSES:
        for b in CLASSES:
            op = f"{a}_TO_{b}".upper()
            before[op], after[op] = a, b
    after["NEW_OP"] = "supported"       # not in the baseline: it was unknown
    before["GONE_OP"] = "fail"          # not in this run: not looked at
    return before, after


@pytest.mark.parametrize("kind", ["markdown", "json"])
def test_every_transition_is_listed_and_only_changes(tmp_path, kind):
    before, after = _transitions()
    base = tmp_path / "base"
    if kind == "markdown":
        base.write_text(_baseline_md(before), encoding="utf-8")
    else:
        base.write_text(json.dumps(make_run(before).to_dict()))
    run = make_run(after)
    text = markdown_report(run, load_baseline(str(base)))
    expected = sorted((op, f"{a} ({SYMBOL[a]})", f"{after[op]} ({SYMBOL[after[op]]})")
                      for op, a in [*before.items(), ("NEW_OP", "unknown")]
                      if op in after and a != after[op])
    assert len(expected) == 5 * 4 + 1
    assert table_rows(text, "### Operators with changed status") == expected
    heads = re.findall(r"^#### (\S+) log \((\w+) -> (\w+)\)$", text, re.M)
    assert heads == [(op, a.split()[0], b.split()[0]) for op, a, b in expected]


def test_no_change_says_so(tmp_path):
    run = make_run({"ABS": "supported", "NEG": "partial"})
    base = tmp_path / "base.md"
    base.write_text(markdown_report(run), encoding="utf-8")
    text = markdown_report(run, load_baseline(str(base)))
    assert text.endswith("### Operators with changed status\n\nNo operator changed status.\n")


def test_log_section_is_the_ops_case_lines_and_its_last_120_lines():
    run = make_run({"ABS": "supported"})
    run.results = [CaseResult("CANN0", "ABS", f"n={k}", "OK", index=k) for k in range(200)]
    text = markdown_report(run, {None: {"ABS": "fail"}})
    block = text.split("#### ABS log (fail -> supported)\n```text\n", 1)[1]
    body = block[:block.index("\n```")].splitlines()
    assert len(body) == 120
    case_lines = [ln for ln in body if ln.startswith("  ABS(")]
    assert case_lines[-1] == "  ABS(n=199): OK" and case_lines[0] == f"  ABS(n={200 - len(case_lines)}): OK"
    assert body[-4:] == ["  Backend CANN0: OK", "", "1/1 backends passed", "OK"]


# --- the CI's own reports ------------------------------------------------------------------

def _ci_table(text: str) -> dict[str, str]:
    summary = text.split("### Backend Operator Support Summary", 1)[1].split("Tips:", 1)[0]
    rows = re.findall(r"^\| ([A-Z0-9_]+) \| (\S+) \|$", summary, re.M)
    return {op: BY_SYMBOL[sym] for op, sym in rows}


def test_reproduces_the_ci_report_b_from_a_and_b_statuses(reference_dir, tmp_path):
    a_md = reference_dir / "ci-summary-example-a.md"
    b_text = (reference_dir / "ci-summary-example-b.md").read_text(encoding="utf-8")
    b_status = _ci_table(b_text)
    assert len(b_status) > 50
    results = tmp_path / "b.json"
    results.write_text(json.dumps(make_run(b_status).to_dict()))
    p = ops("support", "--results", str(results), "--markdown", "--baseline", str(a_md))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    # the summary and the changed-status tables, byte for byte
    end = "| OUT_PROD | fail (\u274c) | partial (\U0001f7e1) |\n"
    assert end in b_text and end in out
    assert out[:out.index(end) + len(end)] == b_text[:b_text.index(end) + len(end)]
    # one log section per changed op, laid out as the CI's
    sections = re.findall(r"\n\n(#### \S+ log \(\w+ -> \w+\))\n```text\n(.*?)\n```(?=\n)", out, re.S)
    ci_sections = re.findall(r"\n\n(#### \S+ log \(\w+ -> \w+\))\n```text\n(.*?)\n```(?=\n)", b_text, re.S)
    assert [h for h, _ in sections] == [h for h, _ in ci_sections] == [
        "#### GATED_LINEAR_ATTN log (partial -> supported)", "#### OUT_PROD log (fail -> partial)"]
    for (head, body), op in zip(sections, ["GATED_LINEAR_ATTN", "OUT_PROD"]):
        lines = body.splitlines()
        case_lines = [ln for ln in lines if ln.startswith(f"  {op}(")]
        assert len(case_lines) == len(CASES_FOR[b_status[op]])
        assert case_lines[0] == f"  {op}(type=f32,k=0): OK"
        assert lines[-1] == "OK"
    assert out.endswith("OK\n```\n") and b_text.endswith("OK\n```\n")


def test_ci_report_a_is_read_as_a_baseline(reference_dir):
    a = load_baseline(str(reference_dir / "ci-summary-example-a.md"))
    assert list(a) == [None]
    assert a[None]["OUT_PROD"] == "fail" and a[None]["GATED_LINEAR_ATTN"] == "partial"
    assert a[None]["SSM_CONV"] == "supported" and a[None]["ABS"] == "supported"
    text = (reference_dir / "ci-summary-example-a.md").read_text(encoding="utf-8")
    assert len(a[None]) == len(re.findall(r"^\| [A-Z0-9_]+ \| \S+ \|$", text, re.M))


def test_against_ci_report_a_only_real_changes_are_changes(reference_dir, tmp_path):
    """Report a as the baseline of a run that has, besides ops of a's status: a real change
    (OUT_PROD ❌ -> 🟡), an op with no supported case (ROPE_BACK: 🟡 by the CI's substring
    rule, ❓ by its cases) and an op the CI does not run (ADD_ID): the changed table and its
    logs hold OUT_PROD alone; ROPE_BACK and ADD_ID have one line each."""
    a = _ci_table((reference_dir / "ci-summary-example-a.md").read_text(encoding="utf-8"))
    statuses = {op: s for op, s in a.items() if s != "partial"}
    statuses.update(OUT_PROD="partial", ROPE_BACK="unsupported", ADD_ID="supported")
    results = tmp_path / "r.json"
    results.write_text(json.dumps(make_run(statuses).to_dict()))
    p = ops("support", "--results", str(results), "--markdown", "--baseline",
            str(reference_dir / "ci-summary-example-a.md"))
    assert p.returncode == 0, p.stderr
    assert table_rows(p.stdout, "### Operators with changed status") == [
        ("OUT_PROD", "fail (\u274c)", "partial (\U0001f7e1)")]
    assert re.findall(r"^#### (\S+) log", p.stdout, re.M) == ["OUT_PROD"]
    rule = [ln for ln in p.stdout.splitlines() if ln.startswith("Not changes, the CI's classification only: ")]
    assert len(rule) == 1 and rule[0].split(": ", 1)[1].startswith("ROPE_BACK (\U0001f7e1 there, \u2753 here)")
    absent = [ln for ln in p.stdout.splitlines() if ln.startswith("Not in the baseline's report")]
    assert len(absent) == 1 and absent[0].endswith(": ADD_ID (1 op).")
    assert "| ROPE_BACK | \u2753 |" in p.stdout and "| ADD_ID | \u2705 |" in p.stdout   # ops' own statuses


# --- through `ops`: logs, summary file, bad baselines --------------------------------------

def test_ops_test_writes_logs_and_a_summary_file_that_changes_only_when_it_must(tmp_path):
    logs, summary, res = tmp_path / "logs", tmp_path / "summary.md", tmp_path / "r.json"
    env = {"OPS_FAULTY": "overrun=ABS"}
    args = ["test", "-b", "FAULTY", "-o", "ABS,SGN", "-p", "type=f32", "--results", str(res),
            "--log-dir", str(logs), "--summary-file", str(summary)]
    p = ops(*args, env=env)
    assert p.returncode == 1, p.stderr
    assert sorted(os.listdir(logs)) == ["ABS.log", "SGN.log"]
    for op in ("ABS", "SGN"):
        console = [ln for ln in p.stdout.splitlines() if ln.startswith(f"  {op}(")]
        log = (logs / f"{op}.log").read_text().splitlines()
        assert console and [ln for ln in log if ln.startswith(f"  {op}(")] == console
    assert "FAIL" in (logs / "ABS.log").read_text() and "Backend FAULTY: FAIL" in (logs / "ABS.log").read_text()
    text = summary.read_text(encoding="utf-8")
    assert table_rows(text, "### Backend Operator Support Summary") == [("SGN", "\u2705"), ("ABS", "\u274c")]
    # the same report again: the file is left alone
    os.utime(summary, (1_000_000, 1_000_000))
    p = ops(*args, "--baseline", str(summary), env=env)
    assert p.returncode == 1
    assert summary.read_text(encoding="utf-8") != text  # now with a (no-)change section
    os.utime(summary, (1_000_000, 1_000_000))
    p = ops(*args, "--baseline", str(res), env=env)
    assert os.stat(summary).st_mtime == 1_000_000
    assert summary.read_text(encoding="utf-8").endswith("No operator changed status.\n")
    # a fixed ABS: the report changes, with ABS's log
    p = ops(*args, "--baseline", str(res), env={"OPS_FAULTY": "none=X"})
    assert p.returncode == 0, p.stderr
    text = summary.read_text(encoding="utf-8")
    assert table_rows(text, "### Operators with changed status") == [("ABS", "fail (\u274c)", "supported (\u2705)")]
    assert "#### ABS log (fail -> supported)\n```text\n" in text and "  ABS(type=f32" in text


def test_ops_support_probe_run_and_results_agree_on_statuses(tmp_path):
    sel = ["-b", "GGML-CPU", "-o", "ABS,MUL_MAT(type_a=f32,type_b=f16,m=16,n=1,k=256,bs=[1,1],nr=[1,1],"
           "per=[0,1,2,3],k_v=0,o=1),MUL_MAT(type_a=f32,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],"
           "per=[0,1,2,3],k_v=0,o=1)"]
    probe = ops("support", *sel, "--markdown")
    computed = ops("support", *sel, "--run", "--output", "json")
    assert probe.returncode == 0 and computed.returncode == 0, probe.stderr + computed.stderr
    rows = table_rows(probe.stdout, "### Backend Operator Support Summary")
    assert rows == [("ABS", "\u2705"), ("MUL_MAT", "\U0001f7e1")]
    res = tmp_path / "r.json"
    res.write_text(computed.stdout)
    assert json.loads(computed.stdout)["mode"] == "test"  # --run computed the cases
    again = ops("support", "--results", str(res), "--markdown")
    assert again.returncode == 0 and again.stdout == probe.stdout
    console = ops("support", "--results", str(res))
    assert "partial (1/2)" in console.stdout and "supported (" in console.stdout


def test_ops_support_run_counts_failures(tmp_path):
    p = ops("support", "-b", "FAULTY", "-o", "ABS,SGN", "-p", "type=f32", "--run", "--markdown",
            env={"OPS_FAULTY": "overrun=ABS"})
    assert p.returncode == 1
    assert table_rows(p.stdout, "### Backend Operator Support Summary") == [("SGN", "\u2705"), ("ABS", "\u274c")]
    probe = ops("support", "-b", "FAULTY", "-o", "ABS,SGN", "-p", "type=f32", "--markdown",
                env={"OPS_FAULTY": "overrun=ABS"})
    assert probe.returncode == 0
    assert table_rows(probe.stdout, "### Backend Operator Support Summary") == [("ABS", "\u2705"), ("SGN", "\u2705")]


@pytest.mark.parametrize("content,message", [
    (None, "cannot read baseline"),
    ("{not json", "is not valid JSON"),
    ('{"schema": "other"}', "not an ops results file"),
    ("# a README\n\nnothing here\n", "no '### Backend Operator Support Summary' heading"),
    ("### Backend Operator Support Summary\n\n| Operator | Status |\n| --- | --- |\n| ABS | OK |\n",
     "unknown status 'OK' for ABS"),
])
def test_bad_baseline_is_one_line_and_status_2(tmp_path, content, message):
    base = tmp_path / "base.md"
    if content is not None:
        base.write_text(content)
    res = tmp_path / "r.json"
    res.write_text(json.dumps(make_run({"ABS": "supported"}).to_dict()))
    p = ops("support", "--results", str(res), "--markdown", "--baseline", str(base))
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    # ops test checks it before running anything
    p = ops("test", "-b", "NUMPY", "-o", "ABS", "--summary-file", str(tmp_path / "s.md"), "--baseline", str(base))
    assert p.returncode == 2 and message in p.stderr and p.stdout == ""


@pytest.mark.parametrize("args,message", [
    (["support", "--results", "R", "-o", "ABS"], "--results classifies a saved file: -o cannot go with it"),
    (["support", "--results", "R", "--run"], "--results classifies a saved file: --run cannot go with it"),
    (["support", "--markdown", "--output", "csv"], "--markdown prints the report"),
    (["test", "-o", "ABS", "--baseline", "R"], "--baseline compares status reports: give --summary-file FILE too"),
    (["support", "--results", "/nonexistent.json"], "cannot read /nonexistent.json"),
])
def test_bad_report_options(args, message):
    p = ops(*args)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
