"""Case-name parity of each later catalog version with its own test-backend-ops: the names
`ops` enumerates at 0.25.3 equal, per op, those the 0.25.3 binary prints (lists written by
`make tbo-names` into build/tbo-names/0.25.3, from the test-backend-ops built under build/).

Slow and needing that build: runs when OPS_PARITY_VERSIONS is set (`make parity-0.25.3`).
The v0.20.2 parity is tests/test_parity.py's, against the committed reference lists."""
import os
import pathlib

import pytest

from cannops.cases.tbo_names import compare

LISTS = pathlib.Path(__file__).resolve().parents[1] / "build" / "tbo-names" / "0.25.3"

pytestmark = pytest.mark.skipif(not os.environ.get("OPS_PARITY_VERSIONS"),
                                reason="slow: set OPS_PARITY_VERSIONS=1 (make parity-0.25.3)")


@pytest.mark.parametrize("mode", ["support", "test"])
def test_case_names_match_test_backend_ops_0_25_3(mode):
    if not (LISTS / f"{mode}.tsv").exists():
        pytest.skip(f"no {LISTS}/{mode}.tsv: make tbo-names")
    diff = [f"{op} ({fams}): {miss} missing, {extra} extra, e.g. {eg}"
            for op, fams, eq, miss, extra, eg in compare("0.25.3", LISTS, mode) if miss or extra]
    assert not diff, f"{len(diff)} ops differ:\n" + "\n".join(diff)


GGML_CANN = pathlib.Path(__file__).resolve().parents[1] / "build" / "ggml-cann" / "910B" / "bin" / "test-backend-ops"


def test_cann_rules_claim_what_ggml_cann_0_25_3_claims(monkeypatch):
    """`ops support -b CANN-SIM --catalog 0.25.3` against ggml-cann 0.25.3's own supports_op
    (its test-backend-ops support -b CANN0, built by `make ggml-cann` on the simulated
    toolkit), case by case: where ggml-cann claims more, one of the rule's `narrower` checks
    refuses (ggml-cann's output is wrong there), and where ops claims more a rule says why
    (its `beyond`; both in docs/rules-vs-ggml-cann.md)."""
    import csv
    import io
    import subprocess
    import sys

    from cannops.backend.cann.refusal import Failed
    from cannops.backend.cann.rules import RULES
    from cannops.cases.names import case_from_name
    from cannops.cases.tbo_names import run

    if not GGML_CANN.exists():
        pytest.skip(f"no {GGML_CANN}: make ggml-cann VARIANTS=910B")
    theirs = {f"{op}({p})": s == "SUPPORTED" for op, p, s in run(str(GGML_CANN), "support", "-b", "CANN0")}
    p = subprocess.run([sys.executable, "-m", "cannops.cli.main", "support", "-b", "CANN-SIM", "--catalog",
                        "0.25.3", "--output", "csv"], capture_output=True, text=True, timeout=1800,
                       env=dict(os.environ, OPS_CATALOG="0.25.3"))
    assert p.returncode == 0, p.stderr[-2000:]
    ours = {f"{r['op']}({r['params']})": r["status"] == "OK" for r in csv.DictReader(io.StringIO(p.stdout))}
    assert set(ours) == set(theirs)
    monkeypatch.setenv("OPS_CATALOG", "0.25.3")
    more_there = []
    for n in (n for n in ours if theirs[n] and not ours[n]):
        whys = [RULES[t.op_key].check(t) for t in case_from_name(n).build().nodes() if t.op_key in RULES]
        if not all(why.check is Failed.NARROWER for why in whys if why):
            more_there.append(n)
    assert not more_there, f"{len(more_there)} cases ggml-cann 0.25.3 claims, ops refuses: {more_there[:5]}"
    unexplained = []
    for n in (n for n in ours if ours[n] and not theirs[n]):
        g = case_from_name(n).build()
        if not any(RULES[t.op_key].beyond for t in g.nodes() if t.op_key in RULES):
            unexplained.append(n)
    assert not unexplained, f"{len(unexplained)} cases beyond ggml-cann without a reason: {unexplained[:5]}"
