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


@pytest.fixture(scope="session")
def reference_dir():
    if not REFERENCE_DIR.is_dir():
        pytest.skip("../shared/reference is not beside this checkout")
    return REFERENCE_DIR


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
