"""`make check-cann-headers`: without a toolkit it says so; with one it compiles our
declarations against the toolkit's headers and fails on any difference.

No CANN headers can be shipped here, so the toolkit is a stand-in generated from our
own declarations (which must then match), and mutated once per kind of difference."""
import os
import pathlib
import shutil
import subprocess

import pytest

from cannops.native import build_aclnn

needs_cxx = pytest.mark.skipif(not shutil.which(os.environ.get("CXX", "c++")) or not shutil.which("cc"),
                               reason="no C / C++ compiler")


def test_without_toolkit(monkeypatch, capsys):
    monkeypatch.delenv("ASCEND_TOOLKIT_HOME", raising=False)
    assert build_aclnn.check_cann_headers() == 0
    assert "no CANN toolkit found (ASCEND_TOOLKIT_HOME unset)" in capsys.readouterr().out


def test_toolkit_without_headers(monkeypatch, tmp_path):
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    assert build_aclnn.check_cann_headers() == 2


def _fake_toolkit(root: pathlib.Path) -> pathlib.Path:
    """acl/acl.h declaring every type and entry point as our files do; every other
    header the .def files name just includes it."""
    build_aclnn.generate()
    macros = ("#define ACL_INCLUDE(h)\n#define ACL_FN(ret, name, params) ret name params;\n"
              "#define ACLNN_OP(name, ...) aclnnStatus aclnn##name##GetWorkspaceSize(__VA_ARGS__, "
              "uint64_t *workspaceSize, aclOpExecutor **executor); aclnnStatus aclnn##name("
              "void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);\n")
    src = root / "gen.h"
    src.write_text(macros + '#include "acl_types.h"\n#include "ops_api_list.h"\n')
    body = subprocess.run(["cc", "-E", "-P", "-DOPS_CDEF", "-I", str(build_aclnn.SRC),
                           "-I", str(build_aclnn.GEN), str(src)],
                          check=True, capture_output=True, text=True).stdout
    inc = root / "include"
    (inc / "acl").mkdir(parents=True)
    (inc / "acl" / "acl.h").write_text(
        "#pragma once\n#include <stdint.h>\n#include <stddef.h>\n"
        'extern "C" {\n' + body + "}\n")
    for d in build_aclnn.api_defs():
        for h in build_aclnn._INCLUDE.findall(d.read_text()):
            if h != "acl/acl.h":
                (inc / h).parent.mkdir(parents=True, exist_ok=True)
                (inc / h).write_text("#pragma once\n#include <acl/acl.h>\n")
    return inc / "acl" / "acl.h"


@needs_cxx
@pytest.mark.parametrize("change", [
    None,
    ("ACL_FLOAT16 = 1,", "ACL_FLOAT16 = 2,"),                       # an enum value
    ("ACL_ERROR_RT_PARAM_INVALID = 107000", "ACL_ERROR_RT_PARAM_INVALID = 107001"),
    ("typedef int aclError;", "typedef long aclError;"),             # a typedef
    ("(void **devPtr, size_t size, aclrtMemMallocPolicy", "(void **devPtr, uint32_t size, aclrtMemMallocPolicy"),
    ("aclnnReluGetWorkspaceSize(const aclTensor *self, const aclTensor *out",
     "aclnnReluGetWorkspaceSize(const aclTensor *self, aclTensor *out"),  # const-ness
])
def test_differences_fail(monkeypatch, tmp_path, change):
    header = _fake_toolkit(tmp_path)
    if change:
        text = header.read_text()
        assert change[0] in text
        header.write_text(text.replace(change[0], change[1]))
    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", str(tmp_path))
    assert build_aclnn.check_cann_headers() == (1 if change else 0)
