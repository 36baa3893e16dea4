"""Whether two results files (ops test --results) hold the same outcomes: the same cases on
the same devices, with the same statuses, reasons, error figures, notes and worst elements
(timings aside). A speed change must leave a fixed-seed run's outcomes as they were:

    ops test -b GGML-CPU -o ... --seed 1 --results before.json     # on the old tree
    ops test -b GGML-CPU -o ... --seed 1 --results after.json      # on the new one
    python tests/same_results.py before.json after.json            # exit status 1: they differ
"""
import json
import sys

FIELDS = ("status", "reason", "by", "error", "threshold", "metric", "note", "worst",
          "max_abs", "max_rel", "worst_index")


def outcomes(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return {(r["device"], r["name"]): r for r in json.load(f)["results"]}


def differences(a: dict, b: dict) -> list[str]:
    out = [f"only in one file: {k}" for k in sorted(a.keys() ^ b.keys())]
    for k in sorted(a.keys() & b.keys()):
        out += [f"{k[0]} {k[1]}: {f} {a[k].get(f)!r} -> {b[k].get(f)!r}"
                for f in FIELDS if a[k].get(f) != b[k].get(f)]
    return out


if __name__ == "__main__":
    a, b = outcomes(sys.argv[1]), outcomes(sys.argv[2])
    diff = differences(a, b)
    print("\n".join(diff + [f"{len(a)} / {len(b)} results, {len(diff)} differences"]))
    sys.exit(1 if diff else 0)
