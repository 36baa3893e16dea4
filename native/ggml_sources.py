"""Where the ggml that `make ggml-cann` builds comes from: a llama-cpp-python release's
sdist (the pinned default, or any release: LLAMA_CPP_PYTHON=VERSION), or a local tree
used in place, uncommitted changes included (GGML_SRC=DIR: a llama.cpp checkout, with
ggml/ and tests/, or a ggml checkout, with src/ggml-cann/ and tests/ at its root).

A release is downloaded with pip (CI and fresh machines reach no git host), its sha256
checked against VERIFIED (or LLAMA_CPP_PYTHON_SHA256 for a release not in it) before
anything is unpacked, and unpacked under build/sdist/ once. Nothing of it is committed.

`python -m cannops.native.ggml_sources [--describe]` prints the folder of ggml's
CMakeLists (or, with --describe, the source record as JSON) of the source the
environment names; a bad source is one line on stderr and exit 2.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "llama-cpp-python"
VERSION = "0.3.36"                 # the pinned default: vendors llama.cpp with ggml 0.25.3
# the releases built and run here (make ggml-cann LLAMA_CPP_PYTHON=...): version -> sha256
# of its sdist as the package index served it (pip checked the index's hash on download);
# the ggml each vendors is in the comment
VERIFIED = {
    "0.3.17": "39c31948d234ff351bf638f1e468d893dd29282dd4d47716a39c6a0a1e63b123",  # ggml 0.9.8
    "0.3.23": "85493cd887b543588941e8704640fef6a54c057443292e527559c30728375ffd",  # ggml 0.11.1
    "0.3.30": "798c9b42652d2e0bff5fe81e7e762089f425a99e67f66ffe5ae156957876e0d1",  # ggml 0.15.1
    "0.3.36": "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e",  # ggml 0.25.3
}
SHA256 = VERIFIED[VERSION]
GGML_VERSION = "0.25.3"


class SourceError(Exception):
    """A source that cannot be used: one line for the user, exit 2."""


@dataclasses.dataclass(frozen=True)
class Source:
    """A ggml tree to build: `ggml` holds ggml's CMakeLists.txt, `tests` test-backend-ops.cpp."""
    kind: str                  # "release" (an sdist) or "tree" (GGML_SRC)
    name: str                  # llama-cpp-python==0.3.17, or the tree's path
    ggml: pathlib.Path
    tests: pathlib.Path
    layout: str                # "llama.cpp" or "ggml"
    sha256: str | None = None
    git: str | None = None     # `git describe --always --dirty` of a tree in a git checkout

    def record(self) -> dict:
        """What a build dir keeps of its source (source.json), for the tools that report on it."""
        return {"kind": self.kind, "name": self.name, "layout": self.layout,
                "ggml_dir": str(self.ggml), "tests_dir": str(self.tests),
                "ggml_version": ggml_version(self.ggml), "sha256": self.sha256,
                "git": self.git}


def ggml_version(ggml: pathlib.Path) -> str | None:
    """ggml's version as its CMakeLists.txt sets it (GGML_VERSION_MAJOR/MINOR/PATCH)."""
    try:
        text = (ggml / "CMakeLists.txt").read_text(errors="replace")
    except OSError:
        return None
    parts = [re.search(rf"set\(GGML_VERSION_{p}\s+(\d+)\)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m[1] for m in parts) if all(parts) else None


def _sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def expected_sha256(version: str, given: str | None) -> str:
    """The sha256 a release's sdist must have: the one given, else the verified one."""
    if given:
        if not re.fullmatch(r"[0-9a-f]{64}", given.strip().lower()):
            raise SourceError(f"LLAMA_CPP_PYTHON_SHA256={given}: not a sha256 (64 hex digits)")
        return given.strip().lower()
    if VERIFIED.get(version):
        return VERIFIED[version]
    known = ", ".join(v for v, s in VERIFIED.items() if s)
    raise SourceError(f"LLAMA_CPP_PYTHON={version} is not a verified release (verified: {known}); "
                      f"give its sdist's sha256 as LLAMA_CPP_PYTHON_SHA256=")


def check_archive(archive: pathlib.Path, sha256: str) -> None:
    """Raise SourceError (and remove the archive) unless it has that sha256."""
    digest = _sha256(archive)
    if digest != sha256:
        archive.unlink()
        raise SourceError(f"{archive.name}: sha256 {digest}, expected {sha256} (removed, nothing unpacked)")


def release(version: str = VERSION, sha256: str | None = None,
            build: pathlib.Path = ROOT / "build") -> Source:
    """A llama-cpp-python release's vendored llama.cpp, downloaded and unpacked if needed."""
    if not re.fullmatch(r"\d+(\.\d+)+([a-z0-9.]*)?", version):
        raise SourceError(f"LLAMA_CPP_PYTHON={version}: not a release version")
    expected = expected_sha256(version, sha256)
    sdist = f"llama_cpp_python-{version}"
    where = build / "sdist"
    tree = where / sdist / "vendor" / "llama.cpp"
    stamp = tree / ".unpacked"
    if not (stamp.exists() and expected in stamp.read_text()):
        where.mkdir(parents=True, exist_ok=True)
        archive = where / f"{sdist}.tar.gz"
        if not archive.exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                            "--no-binary", ":all:", f"{PACKAGE}=={version}", "-d", str(where)],
                           check=True)
        check_archive(archive, expected)
        with tarfile.open(archive) as tar:
            tar.extractall(where, filter="data")
        stamp.write_text(f"{PACKAGE}=={version} sha256 {expected}\n")
    return Source("release", f"{PACKAGE}=={version}", tree / "ggml", tree / "tests",
                  "llama.cpp", sha256=expected)


def local_tree(path: str | os.PathLike) -> Source:
    """A llama.cpp or ggml checkout, used in place."""
    root = pathlib.Path(path).expanduser().resolve()
    if not root.is_dir():
        raise SourceError(f"GGML_SRC={path}: no such directory")
    tbo = root / "tests" / "test-backend-ops.cpp"
    if (root / "ggml" / "src" / "ggml-cann").is_dir() and (root / "ggml" / "CMakeLists.txt").exists():
        ggml, layout = root / "ggml", "llama.cpp"
    elif (root / "src" / "ggml-cann").is_dir() and (root / "CMakeLists.txt").exists():
        ggml, layout = root, "ggml"
    else:
        raise SourceError(f"GGML_SRC={path}: neither a llama.cpp tree (ggml/src/ggml-cann/) "
                          f"nor a ggml tree (src/ggml-cann/ at its root)")
    if not tbo.exists():
        raise SourceError(f"GGML_SRC={path}: no tests/test-backend-ops.cpp")
    return Source("tree", str(root), ggml, root / "tests", layout, git=_describe(root))


def _describe(root: pathlib.Path) -> str | None:
    """`git describe` of a tree that is the top of a git checkout (not a folder inside
    another repository, e.g. a tree unpacked under this project's build/)."""
    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return out.stdout.strip() or None if out.returncode == 0 else None
    top = git("rev-parse", "--show-toplevel")
    if top is None or pathlib.Path(top).resolve() != root:
        return None
    return git("describe", "--tags", "--always", "--dirty")


def from_env(env: dict | None = None, build: pathlib.Path = ROOT / "build") -> Source:
    """The source that GGML_SRC / LLAMA_CPP_PYTHON (/ LLAMA_CPP_PYTHON_SHA256) name; the
    pinned release when neither is set."""
    env = os.environ if env is None else env
    tree, version = env.get("GGML_SRC") or None, env.get("LLAMA_CPP_PYTHON") or None
    if tree and version:
        raise SourceError("give GGML_SRC or LLAMA_CPP_PYTHON, not both")
    if tree:
        return local_tree(tree)
    return release(version or VERSION, env.get("LLAMA_CPP_PYTHON_SHA256") or None, build)


def llama_cpp(build: pathlib.Path = ROOT / "build") -> pathlib.Path:
    """The pinned release's unpacked llama.cpp folder (downloaded and unpacked if needed)."""
    return release(VERSION, None, build).ggml.parent


if __name__ == "__main__":
    try:
        src = from_env()
        print(json.dumps(src.record(), indent=1) if "--describe" in sys.argv[1:] else src.ggml)
    except SourceError as e:
        print(f"ggml-sources: error: {e}", file=sys.stderr)
        sys.exit(2)
    except subprocess.CalledProcessError as e:
        print(f"ggml-sources: error: {e}", file=sys.stderr)
        sys.exit(2)
