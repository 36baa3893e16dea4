"""The sources of a newer ggml, from the Python package index (CI and fresh machines reach
no git host): the sdist of llama-cpp-python vendors llama.cpp, with ggml, its CANN backend
(ggml/src/ggml-cann) and tests/test-backend-ops.cpp.

`python -m cannops.native.ggml_sources` downloads it with pip (pinned, sha256 checked),
unpacks it under build/sdist/ once, and prints the llama.cpp folder. Nothing of it is
committed.
"""
from __future__ import annotations

import hashlib
import pathlib
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"                 # vendors llama.cpp with ggml 0.25.3
GGML_VERSION = "0.25.3"
SHA256 = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SDIST = f"llama_cpp_python-{VERSION}"


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def llama_cpp(build: pathlib.Path = ROOT / "build") -> pathlib.Path:
    """The unpacked llama.cpp folder, downloading and unpacking it if needed."""
    where = build / "sdist"
    tree = where / SDIST / "vendor" / "llama.cpp"
    if (tree / ".unpacked").exists():
        return tree
    where.mkdir(parents=True, exist_ok=True)
    archive = where / f"{SDIST}.tar.gz"
    if not archive.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", f"{PACKAGE}=={VERSION}", "-d", str(where)],
                       check=True)
    digest = _sha256(archive)
    if digest != SHA256:
        archive.unlink()
        raise RuntimeError(f"{archive.name}: sha256 {digest}, expected {SHA256} (removed)")
    with tarfile.open(archive) as tar:
        tar.extractall(where, filter="data")
    (tree / ".unpacked").write_text(f"{PACKAGE}=={VERSION} sha256 {SHA256}\n")
    return tree


if __name__ == "__main__":
    try:
        print(llama_cpp())
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"ggml-sources: error: {e}", file=sys.stderr)
        sys.exit(2)
