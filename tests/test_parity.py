"""Case-name parity with test-backend-ops v0.20.2: the catalog of v0.20.2 has every op of
the reference lists, and for each op the set of case names equals the reference's exactly
(support mode and test mode), whichever ggml the bridge runs."""
import collections
import csv

import pytest

from cannops.cases import all_cases


def _reference(path):
    names = collections.defaultdict(set)
    with open(path, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            names[row["op"]].add(f'{row["op"]}({row["params"]})')
    return names


@pytest.mark.parametrize("mode,filename", [
    ("support", "test-backend-ops-v0.20.2-cases.tsv"),
    ("test", "test-backend-ops-v0.20.2-test-cases.tsv"),
])
def test_case_names_match_reference(reference_dir, mode, filename):
    ref = _reference(reference_dir / filename)
    ours = collections.defaultdict(list)
    for c in all_cases(mode, "0.20.2"):
        ours[c.op].append(c.name)
    assert ours, "the catalog is empty"
    problems = []
    absent = sorted(set(ref) - set(ours))
    if absent:
        problems.append(f"ops of test-backend-ops missing from the catalog: {absent}")
    for op, names in sorted(ours.items()):
        dupes = [n for n, k in collections.Counter(names).items() if k > 1]
        missing = ref[op] - set(names)
        extra = set(names) - ref[op]
        if dupes or missing or extra:
            problems.append(f"{op}: {len(missing)} missing (e.g. {sorted(missing)[:2]}), "
                            f"{len(extra)} extra (e.g. {sorted(extra)[:2]}), {len(dupes)} duplicated")
    assert not problems, "\n".join(problems)
