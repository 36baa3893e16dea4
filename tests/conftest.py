import pathlib

import pytest

SHARED = pathlib.Path(__file__).resolve().parents[2] / "shared"
REFERENCE_DIR = SHARED / "reference"


@pytest.fixture(scope="session")
def reference_dir():
    if not REFERENCE_DIR.is_dir():
        pytest.skip("../shared/reference is not beside this checkout")
    return REFERENCE_DIR
