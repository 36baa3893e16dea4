import os
import pathlib
import tempfile

import pytest

# the suite's `ops` processes share a cache of their own, never the user's (cases/cache.py)
os.environ["OPS_CACHE_DIR"] = tempfile.mkdtemp(prefix="ops-test-cache-")
# the suite's expectations are of the v0.20.2 catalog, whichever ggml the bridge runs
# (a test of another version says so)
os.environ.setdefault("OPS_CATALOG", "0.20.2")

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
REFERENCE_DIR = SHARED / "reference"
ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("cli", "cases", "backend", "native")   # installed as cannops.<name>


def unlinked_modules() -> list[str]:
    """The package's modules that the strict editable install's link tree lacks (added
    since `make setup` made it: docs/setup.md); none where the install is not strict."""
    import importlib.util
    spec = importlib.util.find_spec("cannops.cli")
    tree = pathlib.Path(spec.submodule_search_locations[0]).parent if spec else None
    if tree is None or "__editable__" not in str(tree):
        return []
    return [str(f.relative_to(ROOT)) for pkg in PACKAGES for f in sorted((ROOT / pkg).rglob("*.py"))
            if "__pycache__" not in f.parts and not (tree / f.relative_to(ROOT)).exists()]


def pytest_sessionstart(session):
    missing = unlinked_modules()
    if missing:
        pytest.exit(f"{missing[0]} is not installed yet (the link tree predates it): make setup", returncode=2)


@pytest.fixture(scope="session")
def reference_dir():
    if not REFERENCE_DIR.is_dir():
        pytest.skip("../shared/reference is not beside this checkout")
    return REFERENCE_DIR


@pytest.fixture(scope="module")
def ggml_cpu():
    """GGML-CPU, shared by a test module (skipped where the ggml bridge is not built)."""
    ggml = pytest.importorskip("cannops.backend.ggml", reason="ggml bridge not built")
    dev = ggml.open_device("GGML-CPU")
    yield dev
    dev.close()


@pytest.fixture(scope="module")
def dev():
    """The first CANN device (CANN-SIM where no NPU is present), shared by a test module."""
    cann = pytest.importorskip("cannops.backend.cann")
    d = cann.open_device(cann.runtime().devices[0][0])
    yield d
    d.close()


@pytest.fixture(scope="session")
def toolkit(tmp_path_factory):
    """The simulated CANN toolkit (make cann-sim-toolkit), built once for the session's C clients."""
    from cannops.backend.cann.sim import toolkit as sim_toolkit
    prefix = tmp_path_factory.mktemp("toolkit")
    sim_toolkit.build(prefix)
    return prefix
