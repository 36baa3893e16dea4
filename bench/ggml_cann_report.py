"""The per-op table of docs/ggml-cann-on-cann-sim.md, from measured runs:

* test-backend-ops of ggml-cann (0.25.3) on the simulator, per variant: the results files
  of `ops tbo BINARY --results build/reports/tbo-<variant>.json`: OK / not supported /
  FAIL, and how often ggml-cann aborted (died) in the op;
* ops' own aclnn layer on CANN-SIM (catalog v0.20.2): the per-op status of a results file
  (`ops test -b CANN-SIM --results FILE`) or, without one, of `ops support -b CANN-SIM`;
* the 910B statuses of a real Ascend CI report (shared/reference/ci-summary-example-b.md).

  python bench/ggml_cann_report.py [--ops-results FILE] > table.md
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
REPORTS = ROOT / "build" / "reports"
CI = ROOT.parent / "shared" / "reference" / "ci-summary-example-b.md"
VARIANTS = ("910B", "310P", "910B-graph")
SYMBOL = {"supported": "✅", "partial": "🟡", "fail": "❌", "unsupported": "❓", "unknown": "🔍"}


def tbo(variant: str, path: pathlib.Path | None = None) -> dict[str, dict]:
    """op -> counts, deaths and seconds, from an `ops tbo` results file."""
    path = path or REPORTS / f"tbo-{variant}.json"
    if not path.exists():
        return {}
    out: dict[str, dict] = {}
    from cannops.cli.engine import is_death, load_run
    for r in load_run(str(path)).results:
        o = out.setdefault(r.op, {"counts": {"OK": 0, "not supported": 0, "FAIL": 0, "skipped": 0},
                                  "deaths": 0, "seconds": 0.0})
        o["counts"][r.status] = o["counts"].get(r.status, 0) + 1
        o["deaths"] += is_death(r)
        o["seconds"] += r.seconds
    return out


def ci_statuses() -> dict[str, str]:
    if not CI.exists():
        return {}
    return dict(re.findall(r"^\| (\w+) \| (\S+) \|$", CI.read_text(), re.M))


def ops_statuses(results: str | None) -> dict[str, str]:
    cmd = [sys.executable, "-m", "cannops.cli.main", "support", "--output", "json"]
    cmd += ["--results", results] if results else ["-b", "CANN-SIM"]
    doc = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    out = {}
    for r in doc["results"]:
        if r["device"] != "CANN-SIM":
            continue
        s = out.setdefault(r["op"], {"OK": 0, "not supported": 0, "FAIL": 0})
        key = "OK" if r["status"] in ("OK", "known deviation") else r["status"]
        if key in s:
            s[key] += 1
    return out


def cell(r: dict | None) -> str:
    if r is None:
        return "–"
    c = r["counts"]
    died = f" †{r['deaths']}" if r["deaths"] else ""
    return f"{c['OK']} / {c['not supported']} / {c['FAIL']}{died}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops-results", help="a results file of ops test -b CANN-SIM (else a probe)")
    ap.add_argument("--tbo", action="append", default=[], metavar="VARIANT=FILE",
                    help="a variant's `ops tbo` results file other than build/reports/tbo-VARIANT.json")
    args = ap.parse_args()
    files = {v: pathlib.Path(f) for v, f in (x.split("=", 1) for x in args.tbo)}
    runs = {v: tbo(v, files.get(v)) for v in VARIANTS}
    ci = ci_statuses()
    mine = ops_statuses(args.ops_results)
    ops = sorted(set().union(*runs.values(), mine, ci))
    head = (["op"] + [f"tbo {v}" for v in VARIANTS] + [f"s ({VARIANTS[0]})"]
            + ["ops CANN-SIM probe (v0.20.2)", "910B CI"])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    totals = {v: [0, 0, 0, 0] for v in VARIANTS}
    for op in ops:
        row = [op] + [cell(runs[v].get(op)) for v in VARIANTS]
        first = runs[VARIANTS[0]].get(op)
        row.append(f"{first['seconds']:.1f}" if first else "–")
        for v in VARIANTS:
            r = runs[v].get(op)
            if r:
                c = r["counts"]
                for i, k in enumerate(("OK", "not supported", "FAIL")):
                    totals[v][i] += c[k]
                totals[v][3] += bool(r["deaths"])
        m = mine.get(op)
        row.append(f"{m['OK']} / {m['not supported']} / {m['FAIL']}" if m else "–")
        row.append(ci.get(op, "–"))
        print("| " + " | ".join(row) + " |")
    print()
    for v in VARIANTS:
        if runs[v]:
            ok, ns, fail, died = totals[v]
            minutes = sum(r["seconds"] for r in runs[v].values()) / 60
            print(f"* tbo {v}: {len(runs[v])} ops, {ok} OK / {ns} not supported / {fail} FAIL; "
                  f"ggml-cann aborted in {died} op(s); {minutes:.0f} min of runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
