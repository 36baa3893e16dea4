"""`make ggml-cann`'s sources (native/ggml_sources.py) and its build's error lines
(native/ggml_cann_build.py), without downloads or compilers: fake trees and archives."""
from __future__ import annotations

import hashlib
import io
import json
import subprocess
import sys
import tarfile

import pytest

from cannops.native import ggml_cann_build, ggml_sources
from cannops.native.ggml_sources import SourceError

CMAKE = "set(GGML_VERSION_MAJOR 0)\nset(GGML_VERSION_MINOR 9)\nset(GGML_VERSION_PATCH 5)\n"


def _tree(root, layout):
    ggml = root / "ggml" if layout == "llama.cpp" else root
    (ggml / "src" / "ggml-cann").mkdir(parents=True)
    (ggml / "CMakeLists.txt").write_text(CMAKE)
    (root / "tests").mkdir(exist_ok=True)
    (root / "tests" / "test-backend-ops.cpp").write_text("int main() {}\n")
    return root


@pytest.mark.parametrize("layout", ["llama.cpp", "ggml"])
def test_a_tree_of_either_layout_is_used_in_place(tmp_path, layout):
    src = ggml_sources.local_tree(_tree(tmp_path / "src", layout))
    assert (src.kind, src.layout) == ("tree", layout)
    assert src.ggml == (tmp_path / "src" / "ggml" if layout == "llama.cpp" else tmp_path / "src")
    assert src.tests == tmp_path / "src" / "tests"
    record = src.record()
    assert record["ggml_version"] == "0.9.5" and record["git"] is None


@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no such directory"),
    (lambda p: p.mkdir(), "neither a llama.cpp tree"),
    (lambda p: (_tree(p, "ggml"), (p / "tests" / "test-backend-ops.cpp").unlink()),
     "no tests/test-backend-ops.cpp"),
])
def test_a_bad_tree_is_one_line(tmp_path, make, message):
    make(tmp_path / "src")
    with pytest.raises(SourceError, match=message) as e:
        ggml_sources.local_tree(tmp_path / "src")
    assert "\n" not in str(e.value)


def test_an_unverified_release_needs_its_sha256_before_any_download(tmp_path, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("downloaded"))
    with pytest.raises(SourceError, match=r"LLAMA_CPP_PYTHON=0\.3\.99 is not a verified .*SHA256="):
        ggml_sources.from_env({"LLAMA_CPP_PYTHON": "0.3.99"}, tmp_path)
    with pytest.raises(SourceError, match="not a sha256"):
        ggml_sources.from_env({"LLAMA_CPP_PYTHON": "0.3.99", "LLAMA_CPP_PYTHON_SHA256": "abc"}, tmp_path)
    with pytest.raises(SourceError, match="not both"):
        ggml_sources.from_env({"LLAMA_CPP_PYTHON": "0.3.17", "GGML_SRC": str(tmp_path)}, tmp_path)
    assert not (tmp_path / "sdist").exists()


def _sdist(where, version):
    """A tiny archive laid out as llama-cpp-python's sdist; returns its sha256."""
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"llama_cpp_python-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in ((f"llama_cpp_python-{version}/vendor/llama.cpp/ggml/CMakeLists.txt", CMAKE),
                           (f"llama_cpp_python-{version}/vendor/llama.cpp/tests/test-backend-ops.cpp", "")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_sha256_mismatch_unpacks_nothing(tmp_path):
    _sdist(tmp_path / "sdist", "0.3.99")
    with pytest.raises(SourceError, match=r"sha256 [0-9a-f]{64}, expected 0{64} \(removed, nothing unpacked\)"):
        ggml_sources.release("0.3.99", "0" * 64, tmp_path)
    assert list((tmp_path / "sdist").iterdir()) == []


def test_a_release_with_its_sha256_is_unpacked_once(tmp_path, monkeypatch):
    digest = _sdist(tmp_path / "sdist", "0.3.99")
    src = ggml_sources.release("0.3.99", digest.upper(), tmp_path)
    assert src.name == "llama-cpp-python==0.3.99" and src.layout == "llama.cpp"
    assert src.record()["ggml_version"] == "0.9.5" and src.record()["sha256"] == digest
    (tmp_path / "sdist" / "llama_cpp_python-0.3.99.tar.gz").unlink()
    assert ggml_sources.release("0.3.99", digest, tmp_path) == src     # no archive needed again


def test_verified_releases_are_pinned():
    assert ggml_sources.VERSION in ggml_sources.VERIFIED
    assert all(len(s) == 64 for s in ggml_sources.VERIFIED.values())
    assert {"0.3.17", "0.3.23", "0.3.30", "0.3.36"} <= set(ggml_sources.VERIFIED)


def test_the_build_refuses_a_bad_source_with_exit_2(tmp_path, capsys):
    rc = ggml_cann_build.main(["910B"], {"GGML_SRC": str(tmp_path / "none")})
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "GGML_SRC=" in err and "no such directory" in err


@pytest.mark.parametrize("layout, variant, message", [
    ("llama.cpp", "cpu", "has no tests/test-export-graph-ops.cpp"),
    ("ggml", "cpu", "has no tests/test-export-graph-ops.cpp"),
    ("llama.cpp", "910B", "builds the cpu variant of a llama.cpp tree"),
])
def test_an_export_build_needs_the_tool_in_a_llama_cpp_tree(tmp_path, capsys, layout, variant, message):
    """EXPORT_GRAPH_OPS=1 (make ggml-cpu-export): refused in one line, exit 2, before cmake
    runs, where the tree has no test-export-graph-ops or the variant is not the cpu one."""
    root = _tree(tmp_path / "src", layout)
    if variant != "cpu":
        (root / "tests" / "test-export-graph-ops.cpp").write_text("int main() {}\n")
    rc = ggml_cann_build.main([variant], {"GGML_SRC": str(root), "EXPORT_GRAPH_OPS": "1"})
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err, err


def test_the_cli_is_one_line_and_exit_2():
    proc = subprocess.run([sys.executable, "-m", "cannops.native.ggml_sources"], capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "LLAMA_CPP_PYTHON": "0.0.1"})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("ggml-sources: error: LLAMA_CPP_PYTHON=0.0.1 is not a verified release")


def test_a_tree_is_described(tmp_path):
    root = _tree(tmp_path / "src", "llama.cpp")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    if subprocess.run(git + ["init", "-q"]).returncode:
        pytest.skip("no git")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "x"], check=True)
    (root / "ggml" / "src" / "ggml-cann" / "aclnn_ops.cpp").write_text("// changed\n")
    subprocess.run(git + ["add", "."], check=True)
    record = ggml_sources.local_tree(root).record()
    assert record["git"].endswith("-dirty")
    json.dumps(record)


def test_a_missing_toolkit_entry_point_is_named():
    log = "\n".join([
        "[12/40] Building CXX object ggml/src/ggml-cann/CMakeFiles/ggml-cann.dir/aclnn_ops.cpp.o",
        "/src/ggml/src/ggml-cann/aclnn_ops.cpp:40:10: fatal error: aclnnop/aclnn_foo_bar.h: No such file or directory",
        "/src/ggml/src/ggml-cann/aclnn_ops.cpp:900:5: error: ‘aclnnFooBar’ was not declared in this scope",
        "/src/ggml/src/ggml-cann/aclnn_ops.h:902:19: error: ‘aclnnFooBarGetWorkspaceSize’ was not declared in this scope",
        "/usr/bin/ld: aclnn_ops.cpp:(.text+0x1c): undefined reference to `aclnnBaz'",
    ])
    gaps = ggml_cann_build.missing_from_toolkit(log)
    assert [g[:2] for g in gaps] == [("header", "aclnnop/aclnn_foo_bar.h"),
                                     ("entry point", "aclnnFooBar"), ("entry point", "aclnnBaz")]
    assert gaps[0][2] == "/src/ggml/src/ggml-cann/aclnn_ops.cpp:40:10"
    assert ggml_cann_build.missing_from_toolkit("error: something else") == []
