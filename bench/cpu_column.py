"""Compare an `ops test` results file with test-backend-ops' CPU column (v0.20.2).

    ops test -b GGML-CPU -o ROPE --results r.json; python bench/cpu_column.py r.json

Per op: cases, OK / not supported / FAIL / known deviation on each device of the file, and
the cases that disagree with the reference list: supported by ggml-CPU there but not OK
here, or OK here but not supported there (ggml device only), and names that the reference
does not have. Exit status 1 when anything disagrees.
"""
from __future__ import annotations

import argparse
import collections
import csv
import json
import pathlib
import sys

REF = pathlib.Path(__file__).resolve().parents[2] / "shared" / "reference" / "test-backend-ops-v0.20.2-test-cases.tsv"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--reference", default=str(REF))
    ap.add_argument("--show", type=int, default=5, help="disagreeing cases printed per op")
    args = ap.parse_args()
    cpu = {}
    with open(args.reference, newline="") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            cpu[f"{row['op']}({row['params']})"] = row["cpu_status"]
    doc = json.load(open(args.results))
    counts = collections.defaultdict(collections.Counter)
    problems = collections.defaultdict(list)
    for r in doc["results"]:
        key = (r["op"], r["device"])
        counts[key][r["status"]] += 1
        name = r["name"]
        if name not in cpu:
            problems[key].append(f"not in the reference list: {name}")
        elif r["status"] == "FAIL":
            problems[key].append(f"FAIL: {name}: {r['reason']}")
        elif r["device"].startswith("GGML-CPU"):
            if cpu[name] == "OK" and r["status"] not in ("OK", "known deviation"):
                problems[key].append(f"CPU column OK, here {r['status']}: {name}: {r['reason']}")
            elif cpu[name] != "OK" and r["status"] == "OK":
                problems[key].append(f"CPU column not supported, here OK: {name}")
    print(f"{'op':<24} {'device':<10} {'cases':>6} {'OK':>6} {'n/s':>6} {'FAIL':>5} {'dev.':>5}  disagree")
    for (op, dev), c in sorted(counts.items()):
        print(f"{op:<24} {dev:<10} {sum(c.values()):>6} {c['OK']:>6} {c['not supported']:>6} "
              f"{c['FAIL']:>5} {c['known deviation']:>5}  {len(problems[(op, dev)])}")
        for line in problems[(op, dev)][:args.show]:
            print(f"    {line}")
    return 1 if any(problems.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
