"""One extra aclnn call planted in a copy of ggml-cann's tree shows as exactly that call
more, with its bytes, on the cases that reach it, and on no other (issue 42, part 1).

The copy of the pinned sdist's llama.cpp (hard links, the one edited file written anew)
gets, in ggml_cann_scale, an aclnnInplaceMuls of its output by 1 after its aclnnMuls; it
is built as the 910B variant (`make ggml-cann GGML_SRC=...`, a few minutes) and run beside
the release's build through `ops tbo --cost` on SCALE and neighbours. Slow: run by `make
ggml-cann-check` (OPS_COST_PLANTED=1), skipped otherwise."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPS = [sys.executable, "-m", "cannops.cli.main"]
RELEASE = ROOT / "build" / "ggml-cann" / "910B" / "bin" / "test-backend-ops"
TREE = ROOT / "build" / "sdist" / "llama_cpp_python-0.3.36" / "vendor" / "llama.cpp"
EDITED = pathlib.Path("ggml") / "src" / "ggml-cann" / "aclnn_ops.cpp"
ANCHOR = "    GGML_CANN_CALL_ACLNN_OP(ctx, Muls, acl_src.get(), scale.get(), acl_dst.get());\n}\n"
PLANTED = ("    GGML_CANN_CALL_ACLNN_OP(ctx, Muls, acl_src.get(), scale.get(), acl_dst.get());\n"
           "    float one_v = 1.0f;  // planted by tests/test_cost_planted.py\n"
           "    acl_scalar_ptr one = ggml_cann_create_scalar(&one_v, aclDataType::ACL_FLOAT);\n"
           "    GGML_CANN_CALL_ACLNN_OP(ctx, InplaceMuls, acl_dst.get(), one.get());\n}\n")
SAMPLE = ["-o", "SCALE,ADD,SOFT_MAX,RMS_NORM", "-p", r"ADD=type=f32,ne=\[10,5,4,3\]",
          "-p", r"SOFT_MAX=ne=\[16,16,1,1\]", "-p", r"RMS_NORM=type=f32,ne=\[64,5,4,3\]"]

pytestmark = pytest.mark.skipif(os.environ.get("OPS_COST_PLANTED") != "1",
                                reason="slow (a ggml-cann build): make ggml-cann-check runs it")


def _planted_tree(where: pathlib.Path) -> pathlib.Path:
    """The sdist's tree linked file by file, the edited file a new one (the original untouched)."""
    tree = where / "llama.cpp"
    shutil.copytree(TREE, tree, copy_function=os.link, symlinks=True)
    text = (TREE / EDITED).read_text()
    assert text.count(ANCHOR) == 1, "ggml_cann_scale is not as this test knows it"
    (tree / EDITED).unlink()
    (tree / EDITED).write_text(text.replace(ANCHOR, PLANTED))
    return tree


def _costs(binary: pathlib.Path, out: pathlib.Path) -> dict[str, dict]:
    p = subprocess.run([*OPS, "tbo", str(binary), *SAMPLE, "--cost", "--results", str(out)],
                       capture_output=True, text=True, timeout=1200, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return {f"{r['op']}({r['params']})": r["cost"] for r in json.loads(out.read_text())["results"]
            if r["status"] == "OK"}


def test_a_planted_call_is_exactly_one_call_more_where_it_is_reached(tmp_path):
    if not (RELEASE.exists() and TREE.exists()):
        pytest.skip("make ggml-cann VARIANTS=910B has not run")
    tree = _planted_tree(tmp_path)
    out = tmp_path / "out"
    env = dict(os.environ, GGML_SRC=str(tree), GGML_CANN_OUT=str(out))
    p = subprocess.run([sys.executable, "-m", "cannops.native.ggml_cann_build", "910B"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    before = _costs(RELEASE, tmp_path / "before.json")
    after = _costs(out / "910B" / "bin" / "test-backend-ops", tmp_path / "after.json")
    assert before.keys() == after.keys()
    scale = [n for n in before if n.startswith("SCALE(")]
    assert len(scale) == 2 and len(before) > 4
    for name in before:
        b, a = before[name], after[name]
        if name not in scale:
            assert a == b, name
            continue
        # SCALE(type=f32,ne=[10,10,10,10]): 10^4 f32 elements; bf16 ne=[100,10,10,10]: 10^5 of 2 bytes
        n, size = (10**4, 4) if "type=f32" in name else (10**5, 2)
        extra = {"op": "aclnnInplaceMuls", "unit": "vector", "flops": n, "bytes_read": n * size,
                 "bytes_written": n * size}
        assert [{k: c[k] for k in extra} for c in a["per_call"]] == \
            [{k: c[k] for k in extra} for c in b["per_call"]] + [extra]
        assert (a["calls"], a["kernels"]) == (b["calls"] + 1, b["kernels"] + 1)
        assert (a["bytes_read"], a["bytes_written"]) == (b["bytes_read"] + n * size, b["bytes_written"] + n * size)
        assert a["flops"]["vector"] == b["flops"]["vector"] + n
        assert {k: a[k] for k in ("syncs", "h2d", "d2h", "allocs")} == {k: b[k] for k in ("syncs", "h2d", "d2h", "allocs")}
