"""docs/beyond-ggml-cann.md: every path of the CANN layer beyond ggml-cann (a rule with a
`beyond` note) has its evidence there, naming only operators its rule runs, and the page
holds what bench/beyond_ggml_cann.py writes from bench/beyond_evidence.py."""
import importlib.util
import pathlib
import re
import sys

import pytest

from cannops.backend.cann.rules import RULES

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "beyond-ggml-cann.md"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        spec = importlib.util.spec_from_file_location("beyond_ggml_cann", ROOT / "bench" / "beyond_ggml_cann.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(str(ROOT / "bench"))


def test_every_path_beyond_ggml_cann_has_its_evidence(bench):
    paths = {key for key, rule in RULES.items() if rule.beyond}
    assert paths, "no rule goes beyond ggml-cann: the page has nothing to hold"
    assert paths == set(bench.EVIDENCE), "bench/beyond_evidence.py and the rules' `beyond` notes disagree"
    for key, ev in bench.EVIDENCE.items():
        ops = [c.operator for c in ev.calls]
        assert ops and set(ops) <= set(RULES[key].aclnn), f"{key}: {ops} are not all run by its rule"
        assert all(c.args and all(a.passes and a.page and a.source for a in c.args) for c in ev.calls), key
        assert ev.device and ev.decision, key


def test_the_page_holds_the_evidence_and_every_counted_path(bench):
    text = PAGE.read_text()
    body = text[text.index(bench.EVIDENCE_BEGIN) + len(bench.EVIDENCE_BEGIN):text.index(bench.EVIDENCE_END)]
    assert body.strip() == bench.evidence().strip(), "rerun python bench/beyond_ggml_cann.py doc"
    table = text[text.index(bench.BEGIN):text.index(bench.END)]
    counted = re.findall(r"^\| \[([^\]]+)\]", table, re.M)
    assert counted and set(counted) <= set(bench.EVIDENCE)
    assert "**no evidence**" not in table
