"""The evidence level of each CANN verdict (backend/cann/evidence.py): its facts checked
against their sources (the extracted aclnn pages, ggml-cann 0.25.3's code where it is
unpacked, the Ascend CI's report and its replay), and the levels as `ops support`,
`--explain`, the results file and `--soc-evidence pages` give them."""
import collections
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from cannops.backend.cann import evidence as ev
from cannops.backend.cann.rules import RULES
from cannops.backend.cann.soc import ENV, PAGES_WITHOUT_310P, UNOFFERED

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLES = json.loads((ROOT / "tests" / "data" / "ascend-tables.json").read_text())["operators"]
REPO = {"ops-math": "M", "ops-nn": "N", "ops-transformer": "X", "ops-cv": "C"}
GGML_CANN = ROOT / "build" / "sdist" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp" / "ggml" / "src" / "ggml-cann"
OPS = [sys.executable, "-m", "cannops.cli.main"]


def ops(*args, env=None):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, OPS_CATALOG="0.20.2", **(env or {})))


def _layer_operators() -> set[str]:
    return {op for rule in RULES.values() for op in rule.aclnn}


# --- the facts against their sources ---------------------------------------------------------

def test_pages_without_310p_are_the_extracted_pages():
    """soc.PAGES_WITHOUT_310P is every extracted page that says 不支持 for the Atlas
    inference series or has no row for it ("silent"), each with its own page."""
    expected = {}
    for name, entry in TABLES.items():
        state = entry["support"]["310P"]
        if entry["page"] and state != "offered":
            repo, path = entry["page"].split(":", 1)
            expected[name] = f"{REPO[repo]} {path}" + (" (silent)" if state == "not documented" else "")
    assert PAGES_WITHOUT_310P == expected
    assert set(UNOFFERED["310P"]) < set(PAGES_WITHOUT_310P)


def test_every_operator_the_layer_calls_on_the_310p_has_a_level():
    """Each aclnn operator of the rules has a level from its facts: device path where
    ggml-cann's 310P code calls it, page and source agree where both refuse it, build
    claims it where only the source offers it, page alone where the page offers it."""
    levels = collections.Counter()
    for op in sorted(_layer_operators()):
        assert op in TABLES, f"aclnn{op}: no extracted page, so no page evidence"
        e = ev.operator_evidence(op, "310P")
        offered = TABLES[op]["support"]["310P"] == "offered"
        if op in UNOFFERED["310P"]:
            want = ev.PAGE_AND_SOURCE
        elif op in ev.DEVICE_PATHS_310P:
            want = ev.DEVICE_PATH
        else:
            want = ev.PAGE_ALONE if offered else ev.BUILD_CLAIMS
        assert e.level == want, (op, e)
        assert f"aclnn{op}" in e.line and ("ggml-cann" in e.line or "page" in e.line), e.line
        levels[e.level] += 1
    assert levels[ev.DEVICE_PATH] >= 10 and levels[ev.BUILD_CLAIMS] >= 20 and levels[ev.PAGE_AND_SOURCE] == 3


def _macro_operators(text: str) -> set[str]:
    calls = re.findall(r"GGML_CANN_CALL_ACLNN_OP\(\s*\w+\s*,\s*(\w+)", text)
    calls += re.findall(r"GGML_CANN_CALL_OP_UNARY(?:_GATED)?\((\w+)\)", text)
    return set(calls) - {"OP_NAME"}


def _bodies(text: str) -> dict[str, str]:
    """function name -> its body, for the functions defined at the top level of a C++ file."""
    out = {}
    for m in re.finditer(r"^(?:static )?[\w:<>]+[ *&]+(\w+)\([^;{]*\)\s*\{\n(.*?)^\}", text, re.M | re.S):
        out[m.group(1)] = m.group(2)
    return out


def _blocks_310p(text: str) -> list[tuple[int, str]]:
    """(line, text) of each `#ifdef ASCEND_310P` block up to its #else / #endif."""
    out, lines = [], text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "#ifdef ASCEND_310P":
            depth, j = 0, i + 1
            while not (depth == 0 and lines[j].strip().startswith(("#else", "#endif"))):
                depth += lines[j].strip().startswith("#if") - lines[j].strip().startswith("#endif")
                j += 1
            out.append((i + 1, "\n".join(lines[i + 1:j])))
    return out


# make ggml-cann-check (in CI, after the build unpacked the sdist) sets OPS_REQUIRE_GGML_SOURCES:
# there the check runs or fails, never skips
@pytest.mark.skipif(not GGML_CANN.is_dir() and not os.environ.get("OPS_REQUIRE_GGML_SOURCES"),
                    reason="ggml-cann 0.25.3's sources are not unpacked under build/sdist "
                           "(make ggml-cann, or python -m cannops.native.ggml_sources)")
def test_ggml_cann_facts_match_its_0_25_3_sources():
    ops_cpp = (GGML_CANN / "aclnn_ops.cpp").read_text()
    text = ops_cpp + (GGML_CANN / "ggml-cann.cpp").read_text() + (GGML_CANN / "aclnn_ops.h").read_text()
    assert _macro_operators(text) == ev.GGML_CANN_CALLS
    # the 310P's own code: the functions it sits in, and the operators it calls (directly, or
    # through a helper of aclnn_ops.cpp)
    bodies = _bodies(ops_cpp)

    def operators(code: str, depth: int = 2) -> set[str]:
        found = _macro_operators(code)
        for name in re.findall(r"\b(aclnn_\w+)\(", code) if depth else ():
            found |= operators(bodies.get(name, ""), depth - 1)
        return found
    starts = sorted((ops_cpp[:m.start()].count("\n") + 1, name) for name in bodies
                    for m in re.finditer(rf"^(?:static )?[\w:<>]+[ *&]+{name}\(", ops_cpp, re.M))
    called, within = set(), set()
    for line, block in _blocks_310p(ops_cpp):
        fn = max((s for s in starts if s[0] < line), default=(0, "?"))[1]
        within.add(fn)
        # a block of assignments only (cube_math_type = 1) sets an argument of its function's call
        called |= operators(block) if "(" in block else operators(bodies[fn], 0)
    assert set(ev.DEVICE_PATHS_310P) <= called, set(ev.DEVICE_PATHS_310P) - called
    named = {fn for line in ev.DEVICE_PATHS_310P.values() for fn in re.findall(r"ggml_cann_\w+", line)}
    assert named <= within and {"ggml_cann_rope", "ggml_cann_avg_pool2d"} <= named, (named, within)


def _report_table(text: str) -> dict[str, str]:
    summary = text.split("### Backend Operator Support Summary", 1)[1].split("Tips:", 1)[0]
    return dict(re.findall(r"^\| ([A-Z0-9_]+) \| (\S+) \|$", summary, re.M))


def test_ci_facts_are_report_b_and_its_replay(reference_dir):
    """CI_SUPPORTED are report b's ✅ ops; its 🟡 ops split into those with cases ggml-cann
    supports (the replay at the same ggml counts their OK cases: they ran on the device and
    passed) and those with none."""
    table = _report_table((reference_dir / "ci-summary-example-b.md").read_text(encoding="utf-8"))
    assert {op for op, s in table.items() if s == "\u2705"} == ev.CI_SUPPORTED
    assert {op for op, s in table.items() if s == "\U0001f7e1"} == ev.CI_PARTIAL_RAN | ev.CI_PARTIAL_NONE
    assert set(table) == ev.CI_RAN
    replay = (ROOT / "docs" / "ascend-ci-replay.md").read_text(encoding="utf-8").split("## Report b", 1)[1]
    rows = re.findall(r"^\| ([A-Z0-9_]+) \| \U0001f7e1 \| [^|]+\| [^|]+\| (\d+) / \d+ / \d+", replay, re.M)
    assert {op for op, n_ok in rows if int(n_ok) > 0} == ev.CI_PARTIAL_RAN
    assert {op for op, n_ok in rows if int(n_ok) == 0} == ev.CI_PARTIAL_NONE


# --- the levels through ops ------------------------------------------------------------------

def _by_device(stdout: str) -> dict[str, list[dict]]:
    out = collections.defaultdict(list)
    for r in json.loads(stdout)["results"]:
        out[r["device"]].append(r)
    return out


def test_support_records_and_counts_each_verdicts_level():
    args = ["support", "-b", "CANN-SIM", "--soc", "910B,310P", "-o", "ROPE,CONV_2D,FLASH_ATTN_EXT,ADD",
            "--sample", "6"]
    p = ops(*args, "--output", "json")
    assert p.returncode == 0, p.stderr
    got = _by_device(p.stdout)
    level = {(d, r["op"], r["status"]): set() for d, rs in got.items() for r in rs}
    for d, rs in got.items():
        for r in rs:
            level[d, r["op"], r["status"]].add(r["evidence"])
    assert level["CANN-SIM:910B", "ROPE", "OK"] == {"device run"}          # the CI's ✅
    assert level["CANN-SIM:910B", "CONV_2D", "OK"] == {"page alone"}       # beyond ggml-cann
    assert level["CANN-SIM:310P", "FLASH_ATTN_EXT", "not supported"] == {"device path"}   # "FA not support on 310p"
    assert level["CANN-SIM:310P", "ADD", "OK"] == {"device path"}          # aclnnAdd in the 310P ROPE
    assert level.get(("CANN-SIM:310P", "ROPE", "OK"), {"device path"}) == {"device path"}
    # the console's count per level is the results'
    p = ops(*args)
    for d, rs in got.items():
        counts = collections.Counter(r["evidence"] for r in rs)
        line = next(ln for ln in p.stdout.splitlines() if ln.startswith(f"{d} verdicts by evidence: "))
        assert dict((lv, int(n)) for n, lv in re.findall(r"(\d+) ([a-z ]+?)(?:,|$)", line.split(": ", 1)[1])) \
            == dict(counts), line


def test_test_results_carry_the_level_of_the_verdict():
    p = ops("test", "-b", "CANN-SIM", "--soc", "310P", "-o", "ADD,GELU", "--sample", "2", "--no-ref-cache",
            "--output", "json")
    assert p.returncode == 0, p.stderr
    got = {(r["op"], r["status"], r["evidence"]) for r in json.loads(p.stdout)["results"]}
    assert got == {("ADD", "OK", "device path"), ("GELU", "OK", "page alone")}


def test_explain_gives_each_verdicts_level_and_its_source():
    p = ops("support", "-b", "CANN-SIM", "--soc", "310P", "--explain", "-o", "ROPE,FLASH_ATTN_EXT",
            "-p", "type=f32,ne_a=\\[128,32,2,1\\],n_dims=128,mode=0,|hsk=64,hsv=64,nh=4,nr23=\\[1,1\\],kv=512,nb=1,",
            "--sample", "1")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    rope = lines.index(next(ln for ln in lines if ln.startswith("ROPE(")))
    assert lines[rope + 1].startswith("  ROPE: accepted") and lines[rope + 2].startswith("    evidence: device path: ")
    assert "ggml_cann_rope" in lines[rope + 2] and "ASCEND_310P" in lines[rope + 2]
    fa = lines.index(next(ln for ln in lines if ln.startswith("FLASH_ATTN_EXT(")))
    assert "refused" in lines[fa + 1] and "device path" in lines[fa + 2] and "supports_op" in lines[fa + 2]
    summary = lines[lines.index(next(ln for ln in lines if ln.startswith("Evidence per op"))) + 1:]
    assert sorted(summary) == ["  FLASH_ATTN_EXT: 1 refused (1 device path)", "  ROPE: 1 accepted (1 device path)"]


def test_pages_evidence_refuses_what_the_310p_pages_do_not_offer(dev, monkeypatch):
    """--soc-evidence pages: the rules refuse ADD on the 310P (aclnnAdd's page says 不支持),
    which the default (source) accepts, and CANN-SIM answers aclnnAdd with 561003 naming
    it and its page; only the 310P, so without it the option is bad input."""
    base = ["support", "-b", "CANN-SIM", "--soc", "310P", "-o", "ADD", "--sample", "3", "--output", "json"]
    p = ops(*base)
    assert {r["status"] for r in json.loads(p.stdout)["results"]} == {"OK"}, p.stderr
    p = ops(*base, "--soc-evidence", "pages")
    results = json.loads(p.stdout)["results"]
    assert p.returncode == 0 and {(r["status"], r["evidence"]) for r in results} == {("not supported", "page alone")}
    assert all("aclnnAdd" in r["reason"] and "math/add/docs/aclnnAdd" in r["reason"] for r in results)
    assert "the pages decide" in json.loads(p.stdout)["devices"][0]["description"]
    p = ops("support", "-b", "CANN-SIM", "-o", "ADD", "--soc-evidence", "pages")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--soc 310P" in p.stderr, p.stderr
    # the simulator: aclnnAdd on the 310P is a missing kernel with the page, only under pages
    from test_cann_sim_tables import _prepare_on
    from cannops.native._aclnn import lib
    code, msg = _prepare_on(monkeypatch, "Ascend310P3", "Add")
    assert code != lib.ACLNN_ERR_INNER_FIND_KERNEL_ERROR, msg
    monkeypatch.setenv(ENV, "pages")
    code, msg = _prepare_on(monkeypatch, "Ascend310P3", "Add")
    assert code == lib.ACLNN_ERR_INNER_FIND_KERNEL_ERROR and "aclnnAddGetWorkspaceSize" in msg, msg
    assert PAGES_WITHOUT_310P["Add"] in msg
    code, msg = _prepare_on(monkeypatch, "Ascend910B3", "Add")
    assert "not offered" not in msg
