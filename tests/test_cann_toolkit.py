"""One toolkit discovery (native/toolkit.py) for the CANN device and check-cann-headers,
and aclnn symbols looked up in every libopapi*.so of the toolkit, in a defined order,
with the missing symbol named. The libraries are fakes compiled here with cc: stubs of
every ACL entry point the layer declares, and a few aclnn operators."""
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from cannops.native import build_aclnn, toolkit

needs_cc = pytest.mark.skipif(not shutil.which(os.environ.get("CC", "cc")), reason="no C compiler")
FIND_KERNEL_ERROR = 561003   # ACLNN_ERR_INNER_FIND_KERNEL_ERROR


@pytest.fixture
def no_toolkit(monkeypatch):
    for v in toolkit.HOME_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(toolkit, "INSTALL_PATHS", ())


def _touch(d, *names):
    d.mkdir(parents=True, exist_ok=True)
    for name in names:
        (d / name).write_bytes(b"")


def test_discovery_order(tmp_path, monkeypatch, no_toolkit):
    assert toolkit.find_toolkit() is None
    home, other = tmp_path / "home", tmp_path / "other"
    _touch(home / "lib64", "libascendcl.so", "libnnopbase.so", "libopapi.so",
           "libopapi_nn.so", "libopapi_math.so", "libopapi_legacy.so")
    other.mkdir()
    monkeypatch.setenv("ASCEND_HOME_PATH", str(home))
    found = toolkit.find_toolkit()
    assert (found.home, found.found_by) == (home, "ASCEND_HOME_PATH")
    # per-repository libraries in nnopbase's order; the deprecated all-in-one one is left out
    assert [os.path.basename(p) for p in found.libraries()] == [
        "libascendcl.so", "libnnopbase.so", "libopapi_math.so", "libopapi_nn.so",
        "libopapi_legacy.so"]
    for name in ("libopapi_nn.so", "libopapi_math.so", "libopapi_legacy.so"):
        (home / "lib64" / name).unlink()
    assert [os.path.basename(p) for p in found.libraries()][2:] == ["libopapi.so"]
    (home / "lib64" / "libopapi.so").unlink()
    assert found.libraries() == []                       # no aclnn operators at all
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(other))  # it comes first
    assert toolkit.find_toolkit().found_by == "ASCEND_TOOLKIT_HOME"


def _compile(lib64, name: str, source: str) -> None:
    lib64.mkdir(parents=True, exist_ok=True)
    src = lib64 / (name + ".c")
    src.write_text(source)
    subprocess.run([os.environ.get("CC", "cc"), "-shared", "-fPIC", "-w", "-o", str(lib64 / name),
                    "-I", str(build_aclnn.SRC), "-I", str(build_aclnn.GEN), str(src)], check=True)


def _acl_stubs(without: tuple[str, ...] = ()) -> str:
    """Every ACL_FN of the .def files as a function returning 0 (NULL)."""
    build_aclnn.generate()
    text = ('#include "acl_types.h"\n#define ACL_INCLUDE(h)\n'
            "#define ACL_FN(ret, name, params) ret name params { return (ret) 0; }\n"
            "#define ACLNN_OP(name, ...)\n#include \"ops_api_list.h\"\n")
    body = subprocess.run([os.environ.get("CC", "cc"), "-E", "-P", "-I", str(build_aclnn.SRC),
                           "-I", str(build_aclnn.GEN), "-"], input=text, check=True,
                          capture_output=True, text=True).stdout
    lines = [ln for ln in body.splitlines() if not any(f" {name} (" in ln for name in without)]
    return "\n".join(lines) + "\n"


def _aclnn(*ops: str) -> str:
    return "".join(f"int aclnn{op}GetWorkspaceSize(void) {{ return 0; }}\n"
                   f"int aclnn{op}(void) {{ return 0; }}\n" for op in ops)


def _fake_toolkit(home, without: tuple[str, ...] = ()):
    lib64 = home / "lib64"
    _compile(lib64, "libascendcl.so", _acl_stubs(without))
    _compile(lib64, "libnnopbase.so", "int nnopbase_stub(void) { return 0; }\n")
    _compile(lib64, "libopapi_math.so", _aclnn("Add"))
    _compile(lib64, "libopapi_nn.so", _aclnn("Add", "Mul"))   # Add: math comes first
    _compile(lib64, "libopapi.so", _aclnn("Silu"))            # all-in-one: not used beside them


def _load(home, body: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent(f"""
        import os
        from cannops.native import toolkit
        from cannops.native._aclnn import ffi, lib
        os.environ["ASCEND_HOME_PATH"] = {str(home)!r}
        libs = toolkit.find_toolkit().libraries()
        err = ffi.new("char[]", 2048)
        rc = lib.ops_cann_load(":".join(libs).encode(), 0, err, 2048)
        print("load", rc, ffi.string(err).decode())

        def where(name):
            rc = lib.ops_cann_find_symbol(name.encode(), err, 2048)
            return rc, ffi.string(err).decode()
    """) + textwrap.dedent(body)
    env = {k: v for k, v in os.environ.items() if k not in toolkit.HOME_VARIABLES}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)


@needs_cc
def test_symbols_resolve_across_opapi_libraries(tmp_path):
    home = tmp_path / "cann"
    _fake_toolkit(home)
    child = _load(home, """
        for name in ("aclnnAddGetWorkspaceSize", "aclnnMul", "aclnnSiluGetWorkspaceSize", "aclrtMalloc"):
            print(name, *where(name))
    """)
    assert child.returncode == 0, child.stderr
    lines = dict(line.split(" ", 1) for line in child.stdout.splitlines())
    assert lines["load"] == "0 "
    lib64 = home / "lib64"
    assert lines["aclnnAddGetWorkspaceSize"] == f"0 {lib64 / 'libopapi_math.so'}"
    assert lines["aclnnMul"] == f"0 {lib64 / 'libopapi_nn.so'}"
    assert lines["aclrtMalloc"] == f"0 {lib64 / 'libascendcl.so'}"
    assert lines["aclnnSiluGetWorkspaceSize"] == (
        f"{FIND_KERNEL_ERROR} aclnnSiluGetWorkspaceSize is in none of libascendcl.so, "
        "libnnopbase.so, libopapi_math.so, libopapi_nn.so")


@needs_cc
def test_missing_acl_entry_point_is_named(tmp_path):
    home = tmp_path / "cann"
    _fake_toolkit(home, without=("aclrtMallocHost",))
    child = _load(home, "")
    assert child.returncode == 0, child.stderr
    assert ("CANN libraries lack ACL entry points: aclrtMallocHost is in none of "
            "libascendcl.so, libnnopbase.so, libopapi_math.so, libopapi_nn.so") in child.stdout


@needs_cc
def test_an_older_cann_without_the_client_only_entries_still_binds(tmp_path):
    """The VMM pool, graph capture and peer access are declared for the simulated
    toolkit's clients (ggml-cann); the layer calls none of them, so a CANN that predates
    them binds, and one missing an entry the layer calls still does not."""
    client_only = build_aclnn.client_only_entries()
    assert {"aclmdlRICaptureBegin", "aclrtReserveMemAddress"} <= set(client_only)
    assert "aclrtMalloc" not in client_only          # the layer calls it
    home = tmp_path / "cann"
    _fake_toolkit(home, without=tuple(client_only))
    child = _load(home, "")
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines()[0] == "load 0 "
    _fake_toolkit(home, without=tuple(client_only) + ("aclrtMemcpy",))
    assert "lack ACL entry points: aclrtMemcpy is in none of" in _load(home, "").stdout
