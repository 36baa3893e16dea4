"""Faults planted in a copy of ggml-cann's sources, for the call-site and numeric-blame
checks (`make callsite-check`, tests/test_callsite_ggml.py): each replaces one exact line
of ggml 0.25.3's aclnn_ops.cpp, so that a source it does not match fails loudly.

  cumsum-dim   aclnnCumsum given dim 4 of a 4-d tensor: the simulator refuses it, and
               the FAIL's blame names the call and this line;
  scale-twice  SCALE's aclnnMuls given twice its scale: every call computes what it was
               asked, the case FAILs, and the numeric blame says so.

`python tests/plant_ggml_cann.py SRC DEST` copies SRC's ggml/ and tests/ to DEST with the
faults planted and prints, per fault, its file and line.
"""
from __future__ import annotations

import json
import pathlib
import shutil
import sys

FILE = "ggml/src/ggml-cann/aclnn_ops.cpp"
PLANTS = {
    "cumsum-dim": ("    GGML_CANN_CALL_ACLNN_OP(ctx, Cumsum, acl_src.get(), (int64_t)3,",
                   "    GGML_CANN_CALL_ACLNN_OP(ctx, Cumsum, acl_src.get(), (int64_t)4,  /* planted */"),
    "scale-twice": ("    GGML_CANN_CALL_ACLNN_OP(ctx, Muls, acl_src.get(), scale.get(), acl_dst.get());",
                    "    v *= 2; acl_scalar_ptr twice = ggml_cann_create_scalar(&v, aclDataType::ACL_FLOAT);"
                    " GGML_CANN_CALL_ACLNN_OP(ctx, Muls, acl_src.get(), twice.get(), acl_dst.get());  /* planted */"),
}


def plant(src: pathlib.Path, dest: pathlib.Path) -> dict[str, int]:
    """DEST made from SRC's ggml/ and tests/, the faults planted: fault -> its line. The
    copies keep their times, and the planted file is written only where it changed, so
    that a build of DEST done before recompiles nothing."""
    lines = (src / FILE).read_text().split("\n")
    where = {}
    for name, (old, new) in PLANTS.items():
        hits = [i for i, s in enumerate(lines) if s == old]
        if len(hits) != 1:
            raise SystemExit(f"plant {name}: {len(hits)} lines of {src / FILE} match, not 1")
        lines[hits[0]] = new
        where[name] = hits[0] + 1
    planted = dest / FILE
    for part in ("ggml", "tests"):
        shutil.copytree(src / part, dest / part, symlinks=True, dirs_exist_ok=True,
                        ignore=lambda d, names: [n for n in names if pathlib.Path(d, n) == src / FILE])
    text = "\n".join(lines)
    if not planted.exists() or planted.read_text() != text:
        planted.write_text(text)
    return where


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python tests/plant_ggml_cann.py SRC DEST")
    print(json.dumps(plant(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))))
