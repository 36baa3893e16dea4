"""Issue 35 on the whole catalog: test-backend-ops and `ops test -b GGML-CPU` (its reference
cache cold) at -j 2, one after the other, as process trees (bench/tree.py: wall, CPU of
the workers too, the largest process' peak and the tree's, with the load), and where ops'
peak and cold CPU go: every case's memory and CPU by phase (OPS_MEMORY_LOG,
cli/engine/memlog.py), the processes at the tree's peak and the case each ran.

    python bench/catalog35.py run DIR [--tbo BINARY] [-o OPS]   # measure, save in DIR, report
    python bench/catalog35.py report DIR                         # the report of a saved run
    python bench/catalog35.py compare BEFORE AFTER               # the before / after table

Long (the whole catalog twice: about an hour on 2 busy cores): run it with nice, its output
in a file. docs/memory.md has the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree  # noqa: E402

OPS = [sys.executable, "-m", "cannops.cli.main"]
PHASES = ("inputs", "reference", "run", "judge", "rest")   # cli/engine/memlog.py's, and what follows
NEAR_PEAK = 0.9      # samples of the tree within this share of its peak are kept
MIB = 2**20


class _Samples:
    """The tree's samples near its peak so far: (t, {pid: rss bytes}), and the root's pid."""

    def __init__(self):
        self.peak, self.kept, self.root = 0, [], 0

    def __call__(self, t: float, root: int, procs: dict) -> None:
        total = sum(r for r, _ in procs.values())
        self.root = root
        if total >= NEAR_PEAK * self.peak:
            self.peak = max(self.peak, total)
            self.kept = [s for s in self.kept if s[1] >= NEAR_PEAK * self.peak]
            self.kept.append((t, total, {pid: r for pid, (r, _) in procs.items()}))


def _figures(f: tree.Figures) -> dict:
    return {k: round(getattr(f, k), 2) for k in ("wall", "cpu", "largest_mib", "peak_mib", "load", "others")} | \
        {"rc": f.rc}


def measure(out: str, tbo: str | None, ops_filter: str | None) -> None:
    os.makedirs(out, exist_ok=True)
    o = ["-o", ops_filter] if ops_filter else []
    figs = {"machine": f"{os.cpu_count()} cores"}
    if tbo:
        figs["tbo"] = _figures(tree.run([tbo, "test", "-b", "CPU", "-j", "2", *o]))
        print(f"test-backend-ops: {figs['tbo']}", flush=True)
    log = os.path.join(out, "memory.jsonl")
    if os.path.exists(log):
        os.remove(log)
    samples = _Samples()
    with tempfile.TemporaryDirectory(prefix="ops-bench-refs-") as refs:
        f = tree.run([*OPS, "test", "-b", "GGML-CPU", "-j", "2", "--output", "json", *o],
                     {"OPS_REF_CACHE": refs, "OPS_MEMORY_LOG": log}, watch=samples)
    figs["ops"] = _figures(f)
    try:
        figs["ops_summary"] = json.loads(f.stdout)["summary"]
    except (ValueError, KeyError):
        figs["ops_summary"] = {}
    figs["root"] = samples.root
    figs["near_peak"] = [{"t": t, "total_mib": round(total / MIB), "procs": {str(p): round(r / MIB) for p, r in procs.items()}}
                         for t, total, procs in samples.kept]
    with open(os.path.join(out, "figures.json"), "w") as fh:
        json.dump(figs, fh, indent=1)
    print(f"ops: {figs['ops']}", flush=True)


def _load(out: str) -> tuple[dict, list[dict]]:
    with open(os.path.join(out, "figures.json")) as fh:
        figs = json.load(fh)
    with open(os.path.join(out, "memory.jsonl")) as fh:
        cases = [json.loads(ln) for ln in fh if ln.strip()]
    return figs, cases


def _running(cases: list[dict], pid: int, t: float) -> dict | None:
    return next((c for c in cases if c["pid"] == pid and c["t0"] <= t <= c["t1"]), None)


def _held(c: dict) -> str:
    """What a case held: the worker's baseline, its arrays by phase, its peak phase."""
    ph = c["phases"]
    top = max(ph, key=lambda k: ph[k]["peak_mib"])
    arrays = ", ".join(f"{k} {ph[k]['mib']:.0f}" for k in ("inputs", "reference", "run") if k in ph)
    return f"peak {c['peak_mib']:.0f} MiB in {top}; worker before it {c['base_mib']:.0f}; arrays MiB: {arrays or '-'}"


def report(out: str) -> None:
    figs, cases = _load(out)
    print(f"whole catalog, -j 2 ({figs['machine']}); MiB; CPU: user + system of the whole tree")
    print(f"{'tool':<18} {'wall s':>8} {'CPU s':>8} {'largest':>8} {'tree':>7}  load  others  rc")
    for k in ("tbo", "ops"):
        if k in figs:
            f = figs[k]
            print(f"{k:<18} {f['wall']:>8.0f} {f['cpu']:>8.0f} {f['largest_mib']:>8.0f} {f['peak_mib']:>7.0f}  "
                  f"{f['load']:>4.1f}  {f['others']:>6.2f}  {f['rc']}")
    if "tbo" in figs:
        t, o = figs["tbo"], figs["ops"]
        print("ratio ops/tbo      " + "  ".join(f"{k} {o[k] / max(t[k], 1e-9):.2f}"
                                                 for k in ("wall", "cpu", "largest_mib", "peak_mib")))
    print(f"ops: {figs.get('ops_summary')}")
    _tree_peak(figs, cases)
    print("\ncases by their worker's peak (the largest process is one of these):")
    for c in sorted(cases, key=lambda c: -c["peak_mib"])[:12]:
        print(f"  {c['case'][:90]:<90} {_held(c)}")
    _cpu_by_family(figs, cases)


def _tree_peak(figs: dict, cases: list[dict]) -> None:
    near = figs["near_peak"]
    if not near:
        return
    top = max(near, key=lambda s: s["total_mib"])
    print(f"\nthe tree's peak, {top['total_mib']} MiB: the processes then")
    for pid, mib in sorted(top["procs"].items(), key=lambda kv: -kv[1]):
        c = _running(cases, int(pid), top["t"])
        role = "ops (main)" if int(pid) == figs["root"] else ("worker" if any(x["pid"] == int(pid) for x in cases) else "other")
        print(f"  {role:<11} {mib:>6} MiB  " + (f"{c['case'][:80]}: {_held(c)}" if c else "(between cases)"))
    drivers = defaultdict(int)
    for s in near:
        for pid in s["procs"]:
            c = _running(cases, int(pid), s["t"])
            if c:
                drivers[c["case"]] += 1
    print(f"cases running in the {len(near)} samples within {NEAR_PEAK:.0%} of it (samples):")
    for name, n in sorted(drivers.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {n:>5}  {name[:100]}")


def _cpu_by_family(figs: dict, cases: list[dict]) -> None:
    by_op = _family_cpu(cases)
    total = sum(sum(v for k, v in p.items() if k != "n") for p in by_op.values())
    print(f"\ncold CPU in the workers' cases, by family (s): {total:.0f} of the tree's {figs['ops']['cpu']:.0f} "
          f"(the rest: the main process, worker start-up, pickling between them)")
    print(f"  {'op':<24} {'total':>7} " + " ".join(f"{k:>9}" for k in PHASES) + "  cases")
    for op, v in sorted(by_op.items(), key=lambda kv: -(sum(kv[1].values()) - kv[1]["n"]))[:20]:
        print(f"  {op:<24} {sum(v.values()) - v['n']:>7.1f} " + " ".join(f"{v.get(k, 0):>9.1f}" for k in PHASES)
              + f"  {v['n']:.0f}")


def compare(before: str, after: str) -> None:
    """The before / after table (markdown) of two saved runs, each against the
    test-backend-ops figures of the first of them that has some."""
    runs = [(label, *_load(out)) for label, out in (("before", before), ("after", after))]
    tbo = next((figs["tbo"] for _, figs, _ in runs if "tbo" in figs), None)
    print("| | wall s | CPU s | largest MiB | tree MiB | load | largest case | x tbo (wall / CPU / largest / tree) |")
    print("|---|---|---|---|---|---|---|---|")
    if tbo:
        print(f"| test-backend-ops | {tbo['wall']:.0f} | {tbo['cpu']:.0f} | {tbo['largest_mib']:.0f} | "
              f"{tbo['peak_mib']:.0f} | {tbo['load']:.1f} | | |")
    for label, figs, cases in runs:
        f, top = figs["ops"], max(cases, key=lambda c: c["peak_mib"])
        ratios = " / ".join(f"{f[k] / tbo[k]:.2f}" for k in ("wall", "cpu", "largest_mib", "peak_mib")) if tbo else ""
        print(f"| ops cold, {label} | {f['wall']:.0f} | {f['cpu']:.0f} | {f['largest_mib']:.0f} | {f['peak_mib']:.0f} | "
              f"{f['load']:.1f} | {re.sub(r'[(].*', '', top['case'])} {top['peak_mib']:.0f} MiB | {ratios} |")
    print("\n| family | cases | CPU before: inputs / reference / run / judge | after |")
    print("|---|---|---|---|")
    fam = [_family_cpu(cases) for _, _, cases in runs]
    for op in sorted(fam[0], key=lambda op: fam[0][op]["n"] - sum(fam[0][op].values()))[:12]:
        cells = [" / ".join(f"{f.get(op, {}).get(k, 0):.0f}" for k in PHASES[:4]) for f in fam]
        print(f"| {op} | {fam[0][op]['n']:.0f} | {cells[0]} | {cells[1]} |")
    totals = [" / ".join(f"{sum(f[op].get(k, 0) for op in f):.0f}" for k in PHASES[:4]) for f in fam]
    print(f"| all | {sum(f['n'] for f in fam[0].values()):.0f} | {totals[0]} | {totals[1]} |")


def _family_cpu(cases: list[dict]) -> dict[str, dict[str, float]]:
    """op -> CPU seconds by phase of its cases, and their count ('n')."""
    by_op: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for c in cases:
        by_op[c["op"]]["n"] += 1
        for k, p in c["phases"].items():
            by_op[c["op"]][k] += p["cpu"]
    return by_op


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--tbo", default=os.environ.get("TBO"))
    r.add_argument("-o", dest="ops")
    sub.add_parser("report").add_argument("out")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args()
    if args.cmd == "run":
        measure(args.out, args.tbo, args.ops)
        report(args.out)
    elif args.cmd == "report":
        report(args.out)
    else:
        compare(args.before, args.after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
