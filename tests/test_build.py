"""The build paths: which libggml a device says it runs on, and the bridge built against a
plain install prefix (`make native GGML_HOME=<prefix>`), loaded with no LD_LIBRARY_PATH.

Building the bridge takes minutes on a loaded machine: that test runs when OPS_BUILD_TESTS
is set (`make check-install`, which .ci/run calls)."""
import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ggml = pytest.importorskip("cannops.backend.ggml")
OPS = [sys.executable, "-m", "cannops.cli.main"]


def test_list_devices_names_the_library_version_and_features():
    out = subprocess.run([*OPS, "list", "devices"], capture_output=True, text=True, timeout=120).stdout
    lines = out.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith("GGML-CPU\t"))
    library, features = lines[i + 1].strip(), lines[i + 2].strip()
    path = library.split()[1]
    libdir = ggml.ffi.string(ggml.lib.cannops_ggml_libdir()).decode()
    assert library.startswith("library: ") and os.path.isfile(path)
    assert os.path.samefile(os.path.dirname(path), libdir) and "libggml-cpu" in path
    assert f"(ggml {ggml.ffi.string(ggml.lib.ggml_version()).decode()}," in library
    assert features.startswith("features: ") and len(features.split()) > 1


def _wheel_prefix(tmp: pathlib.Path) -> pathlib.Path:
    """The libggml-python wheel laid out as a `cmake --install` prefix: include/, lib/."""
    wheel = pathlib.Path(importlib.util.find_spec("libggml").submodule_search_locations[0])
    prefix = tmp / "prefix"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "include").symlink_to(wheel / "include")
    for f in (wheel / "lib64").glob("libggml*.so*"):
        shutil.copy(f, prefix / "lib" / f.name, follow_symlinks=False)
    return prefix


LOAD = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cannops.native._ggml", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
lib, ffi = mod.lib, mod.ffi
print(ffi.string(lib.cannops_ggml_libdir()).decode())
print(lib.ggml_backend_dev_count() > 0)
"""


@pytest.mark.skipif(not os.environ.get("OPS_BUILD_TESTS"), reason="slow: set OPS_BUILD_TESTS=1 (make check-install)")
def test_bridge_built_against_an_install_prefix_loads_without_ld_library_path(tmp_path):
    prefix = os.environ.get("OPS_TEST_GGML_PREFIX") or str(_wheel_prefix(tmp_path))
    build = f"""
import os, pathlib, sys
os.environ["GGML_HOME"] = {prefix!r}
from cannops.native import build_ggml
out = build_ggml.make_ffi().compile(tmpdir={str(tmp_path / 'build')!r}, target=None)
print(out)
"""
    p = subprocess.run([sys.executable, "-c", build], capture_output=True, text=True, timeout=1800)
    assert p.returncode == 0, p.stderr[-2000:]
    module = p.stdout.strip().splitlines()[-1]
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    p = subprocess.run([sys.executable, "-c", LOAD, module], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    libdir, has_devices = p.stdout.split()
    assert os.path.samefile(libdir, pathlib.Path(prefix) / "lib") and has_devices == "True"


def test_a_prefix_without_headers_names_what_is_missing(tmp_path):
    (tmp_path / "lib").mkdir()
    env = dict(os.environ, GGML_HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", "from cannops.native import build_ggml; build_ggml.ggml_prefix()"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode != 0 and "is not a ggml install prefix: missing include/ggml.h" in p.stderr
