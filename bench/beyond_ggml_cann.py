"""The paths of ops' CANN layer beyond ggml-cann, and the evidence each stands on
(docs/beyond-ggml-cann.md): which cases of a catalog the layer's rules accept on the 910B
that ggml-cann refuses, grouped by the rule that takes them, and per path the aclnn calls
with the page row and the source line allowing each argument (bench/beyond_evidence.py).

  python bench/beyond_ggml_cann.py claims ops            build/beyond/ops.json
  python bench/beyond_ggml_cann.py claims GGML-CANN0     build/beyond/GGML-CANN0.json
  python bench/beyond_ggml_cann.py table                 the counts table (stdout)
  python bench/beyond_ggml_cann.py evidence              the evidence sections (stdout)
  python bench/beyond_ggml_cann.py doc                   both into docs/beyond-ggml-cann.md

`claims` asks each device's supports() for every test-mode case of the catalog (fused
cases too), computing nothing. GGML-CANN0 is ggml-cann's own supports_op, per op node as
test-backend-ops asks it: run it with the bridge rebuilt against a ggml-cann prefix and
that variant's env.sh sourced (docs/ggml-cann.md), in a process of its own.
"""
from __future__ import annotations

import collections
import json
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "build" / "beyond"
DOC = ROOT / "docs" / "beyond-ggml-cann.md"
CATALOG = os.environ.get("OPS_CATALOG", "0.25.3")
BEGIN, END = "<!-- beyond table: bench/beyond_ggml_cann.py doc -->", "<!-- end of beyond table -->"
EVIDENCE_BEGIN, EVIDENCE_END = "<!-- evidence: bench/beyond_ggml_cann.py doc -->", "<!-- end of evidence -->"

sys.path.insert(0, str(ROOT / "bench"))
from beyond_evidence import EVIDENCE, path_of  # noqa: E402


def claims(device: str) -> None:
    """device's supports() of every test-mode case: {name: "" (supported) or the reason}."""
    os.environ["OPS_CATALOG"] = CATALOG
    from cannops.backend.base import open_device
    from cannops.cases.catalog import all_cases
    dev = open_device("CANN-SIM" if device == "ops" else device)
    out = {}
    for case in all_cases("test", CATALOG):
        s = dev.supports(case, case.build())
        out[case.name] = "" if s else (s.reason or "refused")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{device}.json").write_text(json.dumps({"catalog": CATALOG, "device": device, "claims": out},
                                                   indent=0) + "\n")
    print(f"{device}: {sum(1 for v in out.values() if not v)} of {len(out)} cases supported")


def beyond() -> dict[str, list[str]]:
    """path -> the cases ops' rules take and ggml-cann refuses (a path: bench/beyond_evidence)."""
    os.environ["OPS_CATALOG"] = CATALOG
    from cannops.cases.names import case_from_name
    ours = json.loads((OUT / "ops.json").read_text())["claims"]
    theirs = json.loads((OUT / "GGML-CANN0.json").read_text())["claims"]
    paths = collections.defaultdict(list)
    for name, why in ours.items():
        if not why and theirs.get(name):
            paths[path_of(case_from_name(name).build(), theirs[name])].append(name)
    return dict(paths)


def table() -> str:
    paths = beyond()
    lines = ["| path | cases | ops | operators (evidence below) |", "|---|---|---|---|"]
    for path in sorted(paths, key=lambda p: -len(paths[p])):
        names = paths[path]
        ops = collections.Counter(n.split("(")[0] for n in names)
        ev = EVIDENCE.get(path)
        lines.append(f"| [{path}](#{anchor(path)}) | {len(names):,} | "
                     + ", ".join(f"{op} {n:,}" for op, n in ops.most_common()) + " | "
                     + (", ".join(f"aclnn{c.operator}" for c in ev.calls) if ev else "**no evidence**") + " |")
    lines.append(f"| total | {sum(len(v) for v in paths.values()):,} | | |")
    return "\n".join(lines)


def anchor(path: str) -> str:
    """GitHub's anchor of a heading (tests/test_docs.py's _slug)."""
    return re.sub(r"[^\w\- ]", "", path.lower()).replace(" ", "-")


def evidence() -> str:
    """One section per path: its calls, each argument's page row and source line, the
    device run and the decision."""
    parts = []
    for path, ev in EVIDENCE.items():
        rows = ["| call | argument | the layer passes | page | source |", "|---|---|---|---|---|"]
        for call in ev.calls:
            for i, a in enumerate(call.args):
                head = f"aclnn{call.operator} ({call.page}; {call.source})" if i == 0 else ""
                rows.append(f"| {head} | {a.name} | {a.passes} | {a.page} | {a.source} |")
        parts.append(f"### {path}\n\n{ev.title}.\n\n" + "\n".join(rows)
                     + f"\n\nDevice: {ev.device}. Decision: {ev.decision}.\n")
    return "\n".join(parts)


def replace_between(text: str, begin: str, end: str, body: str) -> str:
    start, stop = text.index(begin) + len(begin), text.index(end)
    return text[:start] + "\n" + body + "\n" + text[stop:]


def doc() -> None:
    text = replace_between(DOC.read_text(), BEGIN, END, table())
    DOC.write_text(replace_between(text, EVIDENCE_BEGIN, EVIDENCE_END, evidence()))


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "claims" and len(sys.argv) == 3:
        claims(sys.argv[2])
    elif cmd == "table":
        print(table())
    elif cmd == "evidence":
        print(evidence())
    elif cmd == "doc":
        doc()
    else:
        sys.exit(__doc__)
