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


def test_the_family_modules_are_those_that_register_a_family():
    """cases/ mixes the case model with the family modules: the loader takes a module as a
    family module by its module-level register(...) call (cases/plugins.py), and those are
    exactly the modules the registered families come from (no list of exceptions to keep)."""
    import pathlib

    from cannops.cases import catalog
    from cannops.cases.plugins import plugin_modules
    catalog.load_all()
    folder = pathlib.Path(catalog.__file__).parent
    loaded = {f"cannops.cases.{n}" for n in plugin_modules(folder, registers="register")}
    assert loaded == {module for module, _ in catalog._ORDER.values()}
    assert {"cannops.cases.graph", "cannops.cases.names", "cannops.cases.tolerances"}.isdisjoint(loaded)


def test_a_plugin_module_is_known_by_its_name_or_its_register_call(tmp_path):
    from cannops.cases.plugins import plugin_modules
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "fam.py").write_text("from .model import register\n\nregister(object())\n")
    (tmp_path / "model.py").write_text('"""A model: def register(f)."""\ndef register(f):\n    register(f)\n')
    (tmp_path / "rules_x.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "__init__.py").write_text("register(1)\n")
    assert plugin_modules(tmp_path, registers="register") == ["fam", "sub"]
    assert plugin_modules(tmp_path, prefix="rules_") == ["rules_x"]
    assert plugin_modules(tmp_path) == ["fam", "model", "rules_x", "sub"]
