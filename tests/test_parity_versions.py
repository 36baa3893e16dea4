"""Case-name parity of each later catalog version with its own test-backend-ops: the names
`ops` enumerates at 0.25.3 equal, per op, those the 0.25.3 binary prints (lists written by
`make tbo-names` into build/tbo-names/0.25.3, from the test-backend-ops built under build/).

Slow and needing that build: runs when OPS_PARITY_VERSIONS is set (`make parity-0.25.3`).
The v0.20.2 parity is tests/test_parity.py's, against the committed reference lists."""
import os
import pathlib

import pytest

from cannops.native.tbo_names import compare

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
