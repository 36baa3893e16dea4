"""`make check-cann-headers`: it finds the toolkit as the CANN device does; without one
it fails with one line (exit 2) unless told a machine without CANN is fine; with one it
names it, compiles our declarations against its headers (aclnn return codes included)
and fails on any difference.

No CANN headers can be shipped here, so the toolkit is a stand-in generated from our
own declarations (which must then match), and mutated once per kind of difference."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from cannops.native import build_aclnn, cann_sim_toolkit, toolkit

needs_cxx = pytest.mark.skipif(not shutil.which(os.environ.get("CXX", "c++")) or not shutil.which("cc"),
                               reason="no C / C++ compiler")


@pytest.fixture(autouse=True)
def only_our_toolkits(monkeypatch):
    for v in toolkit.HOME_VARIABLES:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setattr(toolkit, "INSTALL_PATHS", ())


def test_without_toolkit(capsys):
    assert build_aclnn.check_cann_headers() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("check-cann-headers: error: no CANN toolkit found")
    assert "$ASCEND_TOOLKIT_HOME" in err[0] and "$ASCEND_HOME_PATH" in err[0]
    assert build_aclnn.check_cann_headers(allow_no_toolkit=True) == 0
    assert "skipped as asked" in capsys.readouterr().out


def test_make_target_fails_without_toolkit():
    """`make check-cann-headers` itself: exit 2 and one line, or 0 with ALLOW_NO_CANN=1."""
    root = pathlib.Path(build_aclnn.HERE).parent
    env = {k: v for k, v in os.environ.items() if k not in toolkit.HOME_VARIABLES}
    if any(pathlib.Path(p).is_dir() for p in toolkit.INSTALL_PATHS + ("/usr/local/Ascend",)):
        pytest.skip("this machine has a CANN install path")
    proc = subprocess.run([sys.executable, "-m", "cannops.native.build", "--check-cann-headers"],
                          cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "cannops.native.build", "--check-cann-headers",
                           "--allow-no-toolkit"], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_toolkit_without_headers(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("ASCEND_HOME_PATH", str(tmp_path))   # found as the device finds it
    assert build_aclnn.check_cann_headers() == 2
    captured = capsys.readouterr()
    assert f"toolkit {tmp_path} (ASCEND_HOME_PATH)" in captured.out
    assert "acl/acl.h not found" in captured.err


def _fake_toolkit(root: pathlib.Path) -> pathlib.Path:
    """The simulated toolkit's headers (make cann-sim-toolkit), generated from our own
    declarations, and the header of the aclnn return codes, which includes them."""
    inc = root / "include"
    cann_sim_toolkit.write_headers(inc)
    (inc / build_aclnn.OP_ERRNO).parent.mkdir(parents=True, exist_ok=True)
    (inc / build_aclnn.OP_ERRNO).write_text("#pragma once\n#include <acl/acl_base.h>\n")
    return inc


def _replace(inc: pathlib.Path, old: str, new: str) -> None:
    """Change the one generated header that holds `old`."""
    holding = [h for h in inc.rglob("*.h") if old in h.read_text()]
    assert len(holding) == 1, (old, holding)
    holding[0].write_text(holding[0].read_text().replace(old, new))


@needs_cxx
def test_toolkit_without_op_errno(monkeypatch, tmp_path, capsys):
    """The aclnn return codes are compared, not skipped: a toolkit without their header
    is reported."""
    _fake_toolkit(tmp_path)
    (tmp_path / "include" / build_aclnn.OP_ERRNO).unlink()
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    assert build_aclnn.check_cann_headers() == 2
    assert "op_errno.h not found" in capsys.readouterr().err


@needs_cxx
@pytest.mark.parametrize("change", [
    None,
    ("ACL_FLOAT16 = 1,", "ACL_FLOAT16 = 2,"),                       # an enum value
    ("ACL_ERROR_RT_PARAM_INVALID = 107000", "ACL_ERROR_RT_PARAM_INVALID = 107001"),
    ("typedef int aclError;", "typedef long aclError;"),             # a typedef
    ("ACLNN_ERR_PARAM_INVALID = 161002", "ACLNN_ERR_PARAM_INVALID = 161003"),  # an aclnn code
    ("(void **devPtr, size_t size, aclrtMemMallocPolicy", "(void **devPtr, uint32_t size, aclrtMemMallocPolicy"),
    ("aclnnReluGetWorkspaceSize(const aclTensor *self, const aclTensor *out",
     "aclnnReluGetWorkspaceSize(const aclTensor *self, aclTensor *out"),  # const-ness
])
def test_differences_fail(monkeypatch, tmp_path, change):
    inc = _fake_toolkit(tmp_path)
    if change:
        _replace(inc, *change)
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    assert build_aclnn.check_cann_headers() == (1 if change else 0)


@needs_cxx
def test_an_entry_point_in_another_header_fails(monkeypatch, tmp_path, capsys):
    """A client includes the one header CANN declares an operator in: the simulated
    toolkit's placement is checked header by header."""
    inc = _fake_toolkit(tmp_path)
    add, mul = inc / "aclnnop" / "aclnn_add.h", inc / "aclnnop" / "aclnn_mul.h"
    moved = [line for line in add.read_text().splitlines() if "aclnnInplaceAdds" in line]
    add.write_text("\n".join(line for line in add.read_text().splitlines() if line not in moved))
    mul.write_text(mul.read_text().replace('extern "C" {', 'extern "C" {\n' + "\n".join(moved)))
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    assert build_aclnn.check_cann_headers() == 1
    err = capsys.readouterr().err
    assert "aclnnop/aclnn_add.h:" in err and "aclnnInplaceAdds" in err
