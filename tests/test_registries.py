"""Every op the catalog builds has its NumPy reference and its ggml replay, so that a
family added without one fails here at once instead of as `not supported` in a run
(the CANN rules, handlers and simulator operators are checked against each other in
test_cann_backend.py; every part of every op, with where it lives, in test_parts.py)."""
import pytest

from cannops.backend import reference
from cannops.backend.ggml.ops import find_replay, load_all
from cannops.cases import all_cases
from cannops.cases.versions import VERSIONS


@pytest.fixture(scope="module")
def catalog_nodes():
    """op_key -> one case name that builds such a node, over every mode's grid of every
    catalog version."""
    nodes = {}
    for mode, version in ((m, v) for m in ("test", "perf", "grad") for v in VERSIONS):
        for case in all_cases(mode, version):
            for node in case.build().nodes():
                if not node.is_view() and not node.is_leaf():
                    nodes.setdefault(node.op_key, (case.name, node))
    assert len(nodes) > 100, "the catalog builds too few ops"
    return nodes


def test_every_catalog_op_has_a_reference(catalog_nodes):
    missing = [f"{key} (e.g. {name})" for key, (name, node) in catalog_nodes.items()
               if not reference.has_reference(node)]
    assert not missing, f"no NumPy reference: {missing}"


def test_every_catalog_op_has_a_ggml_replay(catalog_nodes):
    load_all()
    missing = [f"{key} (e.g. {name})" for key, (name, node) in catalog_nodes.items()
               if find_replay(node) is None]
    assert not missing, f"no ggml replay: {missing}"
