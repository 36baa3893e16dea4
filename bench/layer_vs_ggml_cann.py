"""ops' own aclnn layer against ggml-cann (issue 42, part 6): the same cases through both on
the simulator, counted (`ops test -b CANN-SIM --catalog 0.25.3 --cost` and `ops tbo
build/ggml-cann/910B/bin/test-backend-ops --cost`), and per op the calls and bytes of the
cases both ran: where one issues more work than the other, with the calls that differ
on one case of each kind. Prints markdown.
Usage: python bench/layer_vs_ggml_cann.py [--binary PATH] [--out DIR]"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile

OPS = [sys.executable, "-m", "cannops.cli.main"]
# the sample: everyday ops, each thinned by a params regex (the same in both tools)
SAMPLE = {
    "ADD": r"type=f32,ne=\[10,5,4,3\]",
    "MUL": r"type=f32,ne=\[10,5,4,3\]",
    "SCALE": r"type=f32",
    "RMS_NORM": r"type=f32,ne=\[64,5,4,3\]",
    "SOFT_MAX": r"type=f32,ne=\[16,16,1,1\]",
    "ROPE": r"type=f32,ne_a=\[128,32,2,1\],n_dims=128,mode=0,.*ef=0\.0",
    "MUL_MAT": r"type_a=(f16|q4_0|q8_0),type_b=f32,m=16,n=(1|8),k=256,bs=\[1,1\],nr=\[1,1\],per=\[0,1,2,3\]",
    "GET_ROWS": r"type=(f32|f16|q4_0),n=256,m=5,r=4,be1=1,be2=1,v=0",
    "CPY": r"type_src=f32,type_dst=(f16|q4_0),ne_src=\[256,4,4,4\]",
    "FLASH_ATTN_EXT": r"hsk=64,hsv=64,nh=4,nr23=\[1,1\],kv=(113|512),nb=1,mask=1,.*type_K=f16,type_V=f16,"
                      r"permute=\[0,1,2,3\]",
}


def _run(args: list[str]) -> bool:
    """Whether the run went (exit 0 or 1: FAILs are results too); what went wrong on stderr."""
    p = subprocess.run([*OPS, *args], capture_output=True, text=True)
    if p.returncode not in (0, 1):
        print(f"ops {' '.join(args[:6])}: exit {p.returncode}: {p.stderr.strip()[-300:]}", file=sys.stderr)
    return p.returncode in (0, 1)


def _results(path: str) -> dict[str, dict]:
    return {f"{r['op']}({r['params']})": r for r in json.load(open(path))["results"]
            if r["status"] == "OK" and r.get("cost")}


def _seq(r: dict) -> list[str]:
    return [c["op"].removeprefix("aclnn") for c in r["cost"]["per_call"]]


def compare(own: dict[str, dict], theirs: dict[str, dict]) -> list[str]:
    both = sorted(own.keys() & theirs.keys())
    per_op: dict[str, list] = collections.defaultdict(list)
    for name in both:
        per_op[own[name]["op"]].append(name)
    out = [f"{len(both)} cases ran on both ({len(own)} through ops' layer, {len(theirs)} through ggml-cann).", "",
           "| op | cases | calls: ops' layer | ggml-cann | bytes: ops' layer | ggml-cann | cases that differ |",
           "|---|---|---|---|---|---|---|"]
    examples = []
    for op, names in sorted(per_op.items()):
        calls = [sum(d[n]["cost"]["calls"] for n in names) for d in (own, theirs)]
        nbytes = [sum(d[n]["cost"]["bytes_read"] + d[n]["cost"]["bytes_written"] for n in names) for d in (own, theirs)]
        differ = [n for n in names if _seq(own[n]) != _seq(theirs[n])]
        out.append(f"| {op} | {len(names)} | {calls[0]} | {calls[1]} | {nbytes[0]} | {nbytes[1]} | {len(differ)} |")
        seen = set()
        for n in differ:
            key = (tuple(_seq(own[n])), tuple(_seq(theirs[n])))
            if key not in seen and len(seen) < 2:
                seen.add(key)
                examples.append(f"* `{n}`: ops' layer {' → '.join(key[0])}; ggml-cann {' → '.join(key[1])}")
    return out + ["", "Where the calls differ (one case of each kind):", ""] + examples


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default="build/ggml-cann/910B/bin/test-backend-ops")
    ap.add_argument("--out", default=None, help="keep the two results files here")
    a = ap.parse_args(argv)
    if not os.path.exists(a.binary):
        print(f"layer vs ggml-cann: {a.binary} not built (make ggml-cann VARIANTS=910B)")
        return
    out = a.out or tempfile.mkdtemp(prefix="layer-vs-")
    os.makedirs(out, exist_ok=True)
    ops = ",".join(SAMPLE)
    regexes = [x for op, rx in SAMPLE.items() for x in ("-p", f"{op}={rx}")]
    own: dict[str, dict] = {}
    for op, rx in SAMPLE.items():   # ops test's -p is one regex for every op: one run per op
        if _run(["test", "-b", "CANN-SIM", "--catalog", "0.25.3", "-o", op, "-p", rx, "--cost", "-j", "2",
                 "--results", f"{out}/own-{op}.json"]):
            own.update(_results(f"{out}/own-{op}.json"))
    _run(["tbo", a.binary, "-o", ops, *regexes, "--cost", "-j", "2", "--results", f"{out}/ggml-cann.json"])
    print("\n".join(compare(own, _results(f"{out}/ggml-cann.json"))))


if __name__ == "__main__":
    main()
