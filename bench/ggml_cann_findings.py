"""Which ggml versions built here have each finding of docs/ggml-cann-on-cann-sim.md:
one small test-backend-ops run per finding (an op and a params filter) on each build's
simulated 910B, read for what shows the finding (a refusal, an abort, FAIL lines, a
tolerated rule), plus a look at ggml-cann's source for the buffer alignment.

  python bench/ggml_cann_findings.py run BUILD_DIR ...   build/findings/<label>.json
  python bench/ggml_cann_findings.py table               the markdown table (stdout)
  python bench/ggml_cann_findings.py doc                 the table into docs/ggml-cann-on-cann-sim.md

BUILD_DIR is a `make ggml-cann` output (GGML_CANN_OUT, e.g. build/ggml-cann-0.3.17); its
910B/source.json names the source and ggml version. A probe whose filter matches no case
of a version says so ("no case"): that version's test-backend-ops does not test it.
"""
from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

from cannops.cli.engine import case_statuses   # ops tbo's reading of case lines

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "findings"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _aborted(r):  # ggml-cann aborts on any failed ACL call (or a GGML_ASSERT)
    return r["rc"] not in (0, 1) or "GGML_ASSERT" in r["text"] or "failed with error" in r["text"]


def _rule_table(r):  # the simulator's warning for a mixed BFLOAT16 product, and no abort
    return "CANN-SIM warning: matmul rule table" in r["text"] and not _aborted(r)


# finding -> (the row's name in docs/ggml-cann-on-cann-sim.md, op, params regex, detector)
PROBES = {
    "rope-cache-overrun": ("ROPE: a case after one with fewer rope dims (device-memory overrun)", "ROPE", None,
                           lambda r: "not inside one live device allocation" in r["text"]),
    "rope-yarn-stale": ("ROPE with YaRN after the same shape without it (stale cache)", "ROPE",
                        r"ne_a=\[128,32,2,1\]", lambda r: r["fail"] > 0),
    "concat-q4": ("CONCAT of q4_0 (aclnnCat INT4)", "CONCAT", "type=q4_0", _aborted),
    "concat-q8": ("CONCAT of q8_0 (values and scales mixed)", "CONCAT", "type=q8_0",
                  lambda r: r["fail"] > 0 or _aborted(r)),
    "swiglu-view": ("SWIGLU of a non-contiguous view (aclnnSwiGlu)", "SWIGLU", "v=1",
                    lambda r: _aborted(r) or r["fail"] > 0),
    # mixed bf16 operands: taken by ops-nn's A2 rule table (its warning printed), not by
    # aclnnMatmul's page; shows where the case runs to the end on it
    "mul-mat-bf16-f32": ("MUL_MAT bf16 weights × f32 activations (aclnnMm's rule table, f16 cube)", "MUL_MAT",
                         "type_a=bf16,type_b=f32", lambda r: _rule_table(r)),
    "mul-mat-f32-bf16": ("MUL_MAT f32 weights × bf16 activations (aclnnMm's rule table, f16 cube)", "MUL_MAT",
                         "type_a=f32,type_b=bf16", lambda r: _rule_table(r)),
    "set-rows-f16-f32": ("SET_ROWS f16 → f32 (rows read in dst's type)", "SET_ROWS",
                         "type_src=f16,type_dst=f32", lambda r: r["fail"] > 0),
    "get-rows-q8-view": ("GET_ROWS of a q8_0 view (vs0=1)", "GET_ROWS", r"type=q8_0.*vs0=1",
                         lambda r: r["fail"] > 0 or _aborted(r)),
    "l2-norm-eps": ("L2_NORM ignores eps (x / ‖x‖, not x / max(‖x‖, eps))", "L2_NORM", r"eps=10\.",
                    lambda r: r["fail"] > 0),
    "mul-mat-id-amax": ("MUL_MAT_ID q8_0 with activations past f16 (prec ignored)", "MUL_MAT_ID",
                        r"type_a=q8_0.*amax=100000", lambda r: r["fail"] > 0),
    # what ggml-cann relies on beyond the docs: every use is printed, `tolerated [rule]`
    **{f"relies-{rule}": (f"relies on `{rule}`", op, flt, lambda r, rule=rule: r["tolerated"].get(rule, 0) > 0)
       for rule, op, flt in (("storage-shape", "GET_ROWS", None), ("tensor-data-align", "GET_ROWS", None),
                             ("fias-strided-inputs", "FLASH_ATTN_EXT", r"hsk=64,hsv=64,nh=4,nr23=\[1,1\],kv=512,nb=1,"),
                             ("origin-format", "CONV_TRANSPOSE_1D", None),
                             ("scalar-out-shape", "CROSS_ENTROPY_LOSS", None), ("async-copy-align", "IM2COL", None))},
}


def probe(binary: pathlib.Path, op: str, params: str | None, timeout: float = 900) -> dict:
    """One test-backend-ops process over the op's cases the filter picks (counted first in
    support mode, which computes nothing: an abort on the first case still counts them)."""
    filt = ["-o", op] + (["-p", params] if params else [])
    listed = subprocess.run([str(binary), "support", "-b", "CANN0", *filt], capture_output=True,
                            text=True, timeout=300).stdout
    try:
        p = subprocess.run([str(binary), "test", "-b", "CANN0", *filt], capture_output=True, text=True,
                           timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = "timeout", (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
    text = ANSI.sub("", out + err)
    cases = case_statuses(out, op)
    tolerated: dict[str, int] = {}
    for rule in re.findall(r"CANN-SIM tolerated \[([\w-]+)\]", text):
        tolerated[rule] = tolerated.get(rule, 0) + 1
    return {"rc": rc, "cases": len(case_statuses(listed, op)),
            "fail": sum(1 for s in cases.values() if s == "FAIL"), "tolerated": tolerated,
            "refused": sorted(set(re.findall(r"CANN-SIM refused: ([^\n]{0,160})", text)))[:3], "text": text}


def alignment(src: dict) -> int | None:
    """The alignment ggml-cann's buffer type declares (the docs promise aclrtMalloc 64)."""
    text = (pathlib.Path(src["ggml_dir"]) / "src" / "ggml-cann" / "ggml-cann.cpp").read_text(errors="replace")
    m = re.search(r"ggml_backend_cann_buffer_type_get_alignment\([^)]*\)\s*\{[^}]*?return\s+(\d+)", text)
    return int(m[1]) if m else None


def run(build_dir: pathlib.Path) -> None:
    src = json.loads((build_dir / "910B" / "source.json").read_text())
    binary = build_dir / "910B" / "bin" / "test-backend-ops"
    label = build_dir.name.removeprefix("ggml-cann-")
    results = {"label": label, "source": src["name"], "ggml_version": src["ggml_version"],
               "alignment": alignment(src), "findings": {}}
    done = OUT / f"{label}.json"      # a rerun adds the probes a file does not have yet
    if done.exists():
        results["findings"] = json.loads(done.read_text())["findings"]
    runs: dict[tuple, dict] = {}
    for name, (_, op, flt, detect) in PROBES.items():
        if name in results["findings"]:
            continue
        key = (op, flt)
        if key not in runs:
            runs[key] = probe(binary, op, flt)
        r = runs[key]
        results["findings"][name] = {"cases": r["cases"], "fail": r["fail"], "rc": r["rc"],
                                     "present": bool(detect(r)) if r["cases"] else None, "refused": r["refused"]}
        print(f"{label:10s} {name:22s} cases {r['cases']:4d}  present {results['findings'][name]['present']}",
              flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{label}.json").write_text(json.dumps(results, indent=1) + "\n")


def table() -> str:
    runs = [json.loads(p.read_text()) for p in OUT.glob("*.json")]
    order = {"ci-a": 0, "ci-b": 1}
    runs.sort(key=lambda r: (tuple(int(x) for x in r["ggml_version"].split(".")), order.get(r["label"], 9)))
    names = [f"{ {'ci-a': 'report a', 'ci-b': 'report b'}.get(r['label'], r['label'])} ({r['ggml_version']})"
             for r in runs]
    lines = ["| finding | " + " | ".join(names) + " | first seen | last seen |",
             "|---|" + "---|" * (len(runs) + 2)]
    rows = [("buffer alignment 128 (`CANN_SIM_MALLOC_ALIGN=128`)", [r["alignment"] == 128 for r in runs])]
    rows += [(PROBES[n][0], [r["findings"].get(n, {}).get("present") for r in runs]) for n in PROBES]
    for title, present in rows:
        cells = ["✔" if p else "–" if p is None else "✘" for p in present]
        seen = [names[i] for i, p in enumerate(present) if p]
        lines.append(f"| {title} | " + " | ".join(cells) + f" | {seen[0] if seen else '–'} | {seen[-1] if seen else '–'} |")
    return "\n".join(lines)


DOC = ROOT / "docs" / "ggml-cann-on-cann-sim.md"
BEGIN, END = "<!-- findings table: bench/ggml_cann_findings.py doc -->", "<!-- end of findings table -->"


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"]:
        for d in sys.argv[2:]:
            run(pathlib.Path(d))
    elif sys.argv[1:2] == ["table"]:
        print(table())
    elif sys.argv[1:2] == ["doc"]:
        text = DOC.read_text()
        head, rest = text.split(BEGIN)
        DOC.write_text(f"{head}{BEGIN}\n{table()}\n{END}{rest.split(END, 1)[1]}")
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
