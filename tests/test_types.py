"""The type check `make test` runs: mypy over the engine, the CANN backend and the catalog
([tool.mypy] in pyproject.toml: its strictness and why, in docs/development.md), through
the installed cannops.* package (the strict editable install `make setup` makes)."""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINK_TREE = re.compile(r"build/__editable__[^/\s]*/cannops/")   # its paths, read as the sources'


def test_the_engine_backend_and_catalog_type_check():
    import importlib.util
    assert importlib.util.find_spec("mypy"), "mypy is not installed: it is in the test extra (make setup)"
    p = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = LINK_TREE.sub("", p.stdout + p.stderr)
    hint = ("" if "cannops" not in out or "Can't find package" not in out else
            "\n(cannops is not resolvable: `make setup` installs it in setuptools' strict editable mode)")
    assert p.returncode == 0, f"mypy found errors:\n{out}{hint}"
