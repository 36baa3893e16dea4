"""`make bench`: the speed figures of `ops`, printed (benchmarks, never timed tests).

Every command is measured as a process tree (bench/tree.py): wall seconds, CPU seconds of
the command and all its workers, the peak of the tree's summed resident memory, and the
machine around it (load average, the cores' worth of CPU other processes took: on a busy
machine wall figures mean little, CPU figures hold up better). Printed:

* `ops list cases` and `ops support` (the probe, every device): cold (an empty cache) and
  cached;
* issue 23's own targets, medians of --runs runs with the load around them: the start-up
  of a small run (`ops test -o ABS -b GGML-CPU`, the names cache warm; < 0.3 s wall) and
  the probe of every case on every device with its decisions' cache removed (`ops
  support`, both catalog versions; < 2 s wall), and warm;
* with TBO=<a test-backend-ops binary> (environment or --tbo), issue 23's figures as ratios
  ops / test-backend-ops measured in the same run, in paired runs (--pairs, interleaved,
  the order alternating; medians), both tools on the same selections at -j 2:
  `-o ABS` (start-up), the 404-case sample of 15 everyday ops, the 4,422-case selection
  (the whole catalog is issue 35's, below); then `perf` per case of --perf-ops (us/run of
  both, how many agree within 10 %, and how many of ops' figures say they are not to be
  trusted; MUL_MAT is issue 35's, below);
* with TBO, issue 35's ratios (--issue35 alone): on its selection (every 9th case of the
  14 everyday ops) paired and interleaved runs of test-backend-ops, ops with an empty
  reference cache (cold) and ops again on that cache (warm): wall, CPU, the largest
  process' peak and the tree's; the start-up (`-o ABS`); then the last warm run's
  `--timings` table (per op, the device's compute seconds against the tool's overhead) and
  the start-up's CPU by part; with --whole the whole catalog (bench/catalog35.py: both tools
  once, and where ops' peak and cold CPU go, case by case; saved in build/bench-catalog35);
  then the whole `ops perf -o MUL_MAT` (--perf35-ops, --perf35-params) against
  test-backend-ops' perf mode on the same cases, paired: each tool's wall and CPU, whether
  ops' run is under 15 minutes, and us/run per case;
* CANN-SIM: a shard of the catalog at -j 2 (--sim-shard, 1/20), its CPU seconds and the
  whole catalog extrapolated (CPU x shards / 2 cores: the wall time on an idle machine);
* with --whole: the whole catalog on GGML-CPU (--jobs) and the -j 1 / -j 2 scaling on big
  cases (--scaling-ops, --scaling-params);
* bench/cost.py: what counting each case's device work costs on CANN-SIM (issue 42);
* with build/ggml-cann/910B (make ggml-cann): bench/ggml_cann.py, the simulated toolkit's
  per-call overhead and test-backend-ops on the simulated CANN0 next to ops -b CANN-SIM.
The selections are taken from the catalog in use: for the same cases and the same ggml on
both sides, build the bridge against test-backend-ops' ggml (make native GGML_HOME=...);
the first lines say which ggml each side runs.
Usage: python bench/run.py [--tbo PATH] [--pairs N] [--whole] [--sim-shard K/N] [--targets] [--issue35] [--perf35] [...]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree  # noqa: E402

OPS = [sys.executable, "-m", "cannops.cli.main"]
# issue 23's selections: 14 everyday ops (and FLASH_ATTN_EXT, thinned)
EVERYDAY = ["MUL_MAT", "CPY", "SOFT_MAX", "CONCAT", "GET_ROWS", "ADD", "MUL", "RMS_NORM", "SSM_CONV",
            "ARGSORT", "CONT", "SUM_ROWS", "ROPE", "SET_ROWS"]
CASE_LINE = re.compile(r"^  [A-Z0-9_]+\(.*\): ", re.M)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CATALOG35_DIR = "build/bench-catalog35"   # issue 35's whole-catalog run, its per-case log


def timed(cmd: list[str], repeat: int = 1, env: dict | None = None) -> tuple[float, str]:
    """Best wall seconds of `repeat` runs, and the last run's stdout."""
    best, out = float("inf"), ""
    for _ in range(repeat):
        f = tree.run(cmd, env)
        best, out = min(best, f.wall), f.stdout
    return best, out


def ops_run(mode: str, device: str | None, jobs: int, ops: str | None, repeat: int,
            params: str | None = None, env: dict | None = None) -> tuple[float, dict]:
    cmd = [*OPS, mode, "-j", str(jobs), "--output", "json"] + (["-b", device] if device else [])
    if ops:
        cmd += ["-o", ops]
    if params:
        cmd += ["-p", params]
    seconds, out = timed(cmd, repeat, env)
    return seconds, json.loads(out)


def counts_line(c: dict) -> str:
    return f"{c.get('OK', 0)} / {c.get('not supported', 0)} / {c.get('FAIL', 0)}"


def list_cases(ops: list[str]) -> list[str]:
    f = tree.run([*OPS, "list", "cases", "-o", ",".join(ops)])
    return f.stdout.split()


def selections() -> list[tuple[str, str]]:
    """(label, -o argument) of issue 23's selections, from the catalog in use."""
    every = list_cases(EVERYDAY)
    fa = list_cases(["FLASH_ATTN_EXT"])
    by_op: dict[str, list[str]] = {}
    for name in every:
        by_op.setdefault(name.partition("(")[0], []).append(name)
    sample = [n for op in EVERYDAY for n in by_op.get(op, [])[::12]] + fa[::100]
    big = fa[::20]
    out = [("-o ABS (start-up)", "ABS"),
           (f"{len(sample)}-case sample", ",".join(sample)),
           (f"{len(every) + len(big)}-case selection", ",".join(EVERYDAY + big))]
    return out   # the whole catalog through both tools: issue35() (bench/catalog35.py)


def n_cases(stdout: str) -> int:
    return len(CASE_LINE.findall(ANSI.sub("", stdout)))


def paired(ops_cmd: list[str], tbo_cmd: list[str], pairs: int) -> tuple[list, list]:
    """`pairs` runs of each, interleaved, the order alternating."""
    ours, theirs = [], []
    for i in range(pairs):
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            (ours if which == 0 else theirs).append(tree.run(ops_cmd if which == 0 else tbo_cmd))
    return ours, theirs


def med(runs: list, attr: str) -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def which_ggml() -> str:
    out = tree.run([*OPS, "list", "devices"]).stdout
    m = re.search(r"^GGML-CPU.*\n\s+library: (.*)$", out, re.M)
    return m.group(1) if m else "no GGML-CPU device"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="2", help="with --whole: comma list of -j values for the catalog run ('' for none: the paired runs have it)")
    ap.add_argument("-o", dest="ops", help="list / probe / --whole: only these ops (default: the whole catalog)")
    ap.add_argument("--tbo", default=os.environ.get("TBO"), help="a test-backend-ops binary to compare with")
    ap.add_argument("--pairs", type=int, default=int(os.environ.get("PAIRS", 1)),
                    help="paired runs per selection (issue 23's figures: 3); the medians are printed")
    ap.add_argument("--whole", action="store_true", default=bool(os.environ.get("WHOLE")),
                    help="also the whole catalog (long): against test-backend-ops, -j scaling")
    ap.add_argument("--perf-ops", default="ADD,CPY,SOFT_MAX,RMS_NORM",
                    help="ops of the perf comparison with test-backend-ops (MUL_MAT's whole perf "
                         "grid is issue 35's, --perf35-ops)")
    ap.add_argument("--perf-min-time", default="0.5", help="ops perf --min-time of that comparison")
    ap.add_argument("--perf-params", help="-p of that comparison (both tools)")
    ap.add_argument("--perf-runs", type=int, default=3, help="runs per tool of that comparison (medians)")
    ap.add_argument("--perf-show", type=int, default=40, help="cases printed, the farthest from 1 first")
    ap.add_argument("--perf35-ops", default="MUL_MAT", help="issue 35's whole perf run: ops of it (default cases)")
    ap.add_argument("--perf35-params", help="-p of that run, both tools (default: every case)")
    ap.add_argument("--sim-shard", default="1/20", help="CANN-SIM shard to extrapolate from ('' skips it)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per probe / list figure (the best is kept)")
    ap.add_argument("--runs", type=int, default=7, help="runs per issue 23 target figure (medians)")
    # big cases (tenths of a second and more each), where the workers' compute dominates
    ap.add_argument("--scaling-ops", default="FLASH_ATTN_EXT", help="ops of the -j 1 / -j 2 scaling figure ('' skips it)")
    ap.add_argument("--scaling-params", default=r"hsk=(256|576).*kv=(512|1024),nb=(32|35|512)",
                    help="-p of the scaling figure (big cases)")
    ap.add_argument("--targets", action="store_true", help="only issue 23's target figures (start-up, cold probe)")
    ap.add_argument("--perf-only", action="store_true", help="only the perf comparison (needs --tbo)")
    ap.add_argument("--issue35", action="store_true", help="only issue 35's ratios (needs --tbo)")
    ap.add_argument("--perf35", action="store_true", help="only issue 35's whole perf run (needs --tbo)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.targets:
        targets(args.runs)
        return 0
    if (args.perf_only or args.issue35 or args.perf35) and not args.tbo:
        ap.error("--perf-only / --issue35 / --perf35 compare with test-backend-ops: give --tbo")
    if args.perf_only:
        perf_compare(args)
        return 0
    if args.issue35:
        issue35(args)
        return 0
    if args.perf35:
        perf35(args)
        return 0
    print(f"ops' GGML-CPU runs {which_ggml()}")
    if args.tbo:
        print(f"test-backend-ops: {args.tbo}")

    print(f"{'command':<40} {'cases':>7} {'seconds':>8} {'cases/s':>8}   OK / not supported / FAIL")
    with tempfile.TemporaryDirectory(prefix="ops-bench-cache-") as cache:
        cold = {"OPS_CACHE_DIR": cache}   # an empty cache: names and decisions computed
        list_cmd = [*OPS, "list", "cases"] + (["-o", args.ops] if args.ops else [])
        s, out = timed(list_cmd, 1, cold)
        n = len(out.splitlines())
        print(f"{'ops list cases (cold cache)':<40} {n:>7} {s:>8.2f} {n / s:>8.0f}", flush=True)
        s, out = timed(list_cmd, args.repeat, cold)
        print(f"{'ops list cases':<40} {n:>7} {s:>8.2f} {n / s:>8.0f}", flush=True)
        for what, repeat in (("cold cache", 1), ("cached", args.repeat)):
            s, doc = ops_run("support", None, 1, args.ops, repeat, env=cold)
            for dev, c in doc["summary"].items():
                print(f"{f'ops support ({what}) {dev}':<40} {c['total']:>7} {s:>8.2f} "
                      f"{c['total'] / s:>8.0f}   {counts_line(c)}", flush=True)
    if args.tbo:
        s, out = timed([args.tbo, "support", "-b", "CPU"] + (["-o", args.ops] if args.ops else []), args.repeat)
        print(f"{'test-backend-ops support -b CPU':<40} {n_cases(out):>7} {s:>8.2f}", flush=True)
    targets(args.runs)

    if args.tbo:
        compare(args)
        issue35(args)
    if args.sim_shard:
        sim_catalog(args.sim_shard)
    if args.whole:
        whole_catalog(args)
    print()
    import cost   # what counting the device work costs on CANN-SIM (issue 42)
    cost.main([])
    print()
    import ggml_cann   # ggml-cann on the simulator, when make ggml-cann built it
    sys.argv = sys.argv[:1]
    ggml_cann.main()
    return 0


def targets(runs: int) -> None:
    """Issue 23's start-up and cold-probe figures: medians of `runs` runs, with the load."""
    print()
    print(f"issue 23 targets, medians of {runs} runs (wall and CPU of the process tree, seconds; the "
          f"1-min load average and other processes' cores during the runs)")
    with tempfile.TemporaryDirectory(prefix="ops-bench-cache-") as cache:
        env = {"OPS_CACHE_DIR": cache}
        for mode in ("test", "support"):   # the names cache is warm in every figure below
            tree.run([*OPS, "list", "cases", "--mode", mode], env)
        abs_cmd = [*OPS, "test", "-o", "ABS", "-b", "GGML-CPU"]
        tree.run(abs_cmd, env)
        _target("ops test -o ABS -b GGML-CPU", 0.3, [tree.run(abs_cmd, env) for _ in range(runs)])
        for version in ("0.20.2", "0.25.3"):
            cmd = [*OPS, "support", "--catalog", version]
            tree.run([*OPS, "list", "cases", "--mode", "support", "--catalog", version], env)
            cold = []
            for _ in range(runs):
                for entry in os.listdir(cache):
                    if entry.startswith("probe-"):   # cli/probe.py: the decisions' cache
                        os.remove(os.path.join(cache, entry))
                cold.append(tree.run(cmd, env))
            _target(f"ops support --catalog {version}, cold", 2.0, cold)
            _target(f"ops support --catalog {version}, warm", None, [tree.run(cmd, env) for _ in range(runs)])


def _target(label: str, limit: float | None, runs: list) -> None:
    wall, cpu = med(runs, "wall"), med(runs, "cpu")
    verdict = "" if limit is None else f"  target < {limit:g} s: {'met' if wall < limit else 'NOT met'}"
    loads = [r.load for r in runs]
    print(f"{label:<40} wall {wall:6.2f}  CPU {cpu:6.2f}  load {min(loads):.1f}-{max(loads):.1f}  "
          f"others {max(r.others for r in runs):.2f}{verdict}" + ("" if all(r.rc == 0 for r in runs) else "  (failed)"),
          flush=True)


def compare(args) -> None:
    """Issue 23's selections through both tools, and perf per case."""
    print()
    print(f"ops test -b GGML-CPU -j 2 / test-backend-ops test -b CPU -j 2, same -o, "
          f"medians of {args.pairs} paired run(s); ratio < 1: ops is faster")
    print(f"{'selection':<26} {'cases':>11} {'ops wall/cpu/MiB':>20} {'tbo wall/cpu/MiB':>20} "
          f"{'ratio wall/cpu/MiB':>19}  load  others")
    for label, sel in selections():
        o = ["-o", sel] if sel else []
        ours, theirs = paired([*OPS, "test", "-b", "GGML-CPU", "-j", "2", *o],
                              [args.tbo, "test", "-b", "CPU", "-j", "2", *o], args.pairs)
        fig = {k: (med(ours, k), med(theirs, k)) for k in ("wall", "cpu", "peak_mib")}
        loads = [r.load for r in ours + theirs]
        others = [r.others for r in ours + theirs]
        print(f"{label:<26} {n_cases(ours[-1].stdout):>5}/{n_cases(theirs[-1].stdout):<5} "
              f"{fig['wall'][0]:>7.2f}/{fig['cpu'][0]:>6.2f}/{fig['peak_mib'][0]:>5.0f} "
              f"{fig['wall'][1]:>7.2f}/{fig['cpu'][1]:>6.2f}/{fig['peak_mib'][1]:>5.0f} "
              f"{fig['wall'][0] / fig['wall'][1]:>6.2f}/{fig['cpu'][0] / fig['cpu'][1]:>5.2f}/"
              f"{fig['peak_mib'][0] / fig['peak_mib'][1]:>5.2f}  {max(loads):>4.1f}  {max(others):>5.2f}",
              flush=True)
    perf_compare(args)


def issue35(args) -> None:
    """Issue 35's ratios, ops / test-backend-ops, in paired runs interleaved (the order
    turning each pair): ops cold (an empty reference cache of its own) and warm (that cache
    again), on its selection, -j 2; the start-up; with --whole the whole catalog, cold, and
    where its peak and CPU go (bench/catalog35.py)."""
    every = list_cases(EVERYDAY)
    by_op: dict[str, list[str]] = {}
    for name in every:
        by_op.setdefault(name.partition("(")[0], []).append(name)
    names = [n for op in EVERYDAY for n in by_op.get(op, [])[::9]]
    sel = ",".join(names)
    print()
    print(f"issue 35: ops / test-backend-ops, -j 2, medians of {args.pairs} interleaved pair(s); MiB: the "
          f"largest process' peak and the process tree's; cold: an empty reference cache, warm: that cache again")
    print(f"{'selection':<28} {'cases':>9} {'tool':<8} {'wall':>7} {'CPU':>7} {'largest':>8} {'tree':>7}  load  others")
    rows = [("-o ABS (start-up)", ["-o", "ABS"], False), (f"every 9th case ({len(names)})", ["-o", sel], True)]
    overheads: list = []   # the last warm run of the selection: its --timings table
    for label, o, warm in rows:
        figs: dict[str, list] = {"tbo": [], "cold": [], "warm": []}
        for i in range(args.pairs):
            with tempfile.TemporaryDirectory(prefix="ops-bench-refs-") as refs:
                ops_cmd = [*OPS, "test", "-b", "GGML-CPU", "-j", "2", *o]
                runs = [("tbo", [args.tbo, "test", "-b", "CPU", "-j", "2", *o], None),
                        ("cold", ops_cmd, {"OPS_REF_CACHE": refs})]
                for which, cmd, env in (runs if i % 2 == 0 else runs[::-1]):
                    figs[which].append(tree.run(cmd, env))
                if warm:
                    figs["warm"].append(tree.run([*ops_cmd, "--timings"], {"OPS_REF_CACHE": refs}))
        for which in ("tbo", "cold", "warm"):
            if figs[which]:
                _figures_line(label if which == "tbo" else "", which, figs[which])
        if warm:
            overheads.append(figs["warm"][-1])
        t, c = figs["tbo"], figs["cold"]
        ratio = lambda runs, k: med(runs, k) / max(med(t, k), 1e-9)  # noqa: E731
        line = (f"{'':<28} {'':>9} {'ratio':<8} cold: wall {ratio(c, 'wall'):.2f}, CPU {ratio(c, 'cpu'):.2f} "
                f"(target <= 1), largest {ratio(c, 'largest_mib'):.2f}, tree {ratio(c, 'peak_mib'):.2f} (<= 1)")
        if figs["warm"]:
            line += f"; warm: wall {ratio(figs['warm'], 'wall'):.2f} (<= 0.35)"
        print(line, flush=True)
    for f in overheads:
        warm_overhead(f)
    startup_parts(args.runs)
    if args.whole:
        import catalog35
        print()
        catalog35.measure(CATALOG35_DIR, args.tbo, None)
        catalog35.report(CATALOG35_DIR)
    perf35(args)


def warm_overhead(f) -> None:
    """The warm run's own --timings table: per op, the device's compute time against the
    tool's overhead per case (the target: under 10 % where the device time is not tiny)."""
    at = f.stdout.find("Timings on ")
    if at < 0:
        print("warm run: no timings table" + ("" if f.rc == 0 else " (failed)"))
        return
    print(f"issue 35, warm (load {f.load:.1f}, others {f.others:.2f} cores): " + f.stdout[at:].rstrip(), flush=True)


# what an `ops test -o ABS -b GGML-CPU` spends its CPU on, one part at a time (each a fresh
# process: the first figure is Python's own start-up, each later one includes those above)
STARTUP_PARTS = [
    ("python -c pass", "pass"),
    ("import cannops.cli.main (ops itself)", "import cannops.cli.main"),
    ("+ the worker's imports (preload)", "import cannops.cli.main\nfrom cannops.cli.engine.worker import preload\npreload()"),
    ("+ GGML-CPU opened", "import cannops.cli.main\nfrom cannops.cli.engine.worker import preload\npreload()\n"
                          "from cannops.backend.base import open_device\nopen_device('GGML-CPU')"),
]


def startup_parts(runs: int) -> None:
    """Issue 35, 2: the start-up's CPU by part (medians of `runs` processes each), against
    the whole `ops test -o ABS -b GGML-CPU` (main process and its worker)."""
    parts = [(label, statistics.median(tree.run([sys.executable, "-c", code]).cpu for _ in range(runs)))
             for label, code in STARTUP_PARTS]
    whole = statistics.median(tree.run([*OPS, "test", "-o", "ABS", "-b", "GGML-CPU"]).cpu for _ in range(runs))
    print(f"start-up CPU by part, medians of {runs}: " + "; ".join(f"{label} {s * 1e3:.0f} ms" for label, s in parts)
          + f"; the whole ops test -o ABS -b GGML-CPU {whole * 1e3:.0f} ms (its cases, the pipe, the "
          f"printing and the exit: the rest)", flush=True)


def _figures_line(label: str, which: str, runs: list) -> None:
    loads = [r.load for r in runs]
    print(f"{label[:28]:<28} {n_cases(runs[-1].stdout):>9} {which:<8} "
          f"{med(runs, 'wall'):>7.2f} {med(runs, 'cpu'):>7.2f} {med(runs, 'largest_mib'):>8.0f} "
          f"{med(runs, 'peak_mib'):>7.0f}  {min(loads):.1f}-{max(loads):.1f}  {max(r.others for r in runs):.2f}"
          + ("" if all(r.rc == 0 for r in runs) else "  (failed)"), flush=True)


def ops_perf_rows(stdout: str) -> dict[str, tuple[float, float | None, bool]]:
    """`ops perf --output csv`: case -> (us/run, spread, whether ops doubts the figure)."""
    import csv
    import io
    return {f"{r['op']}({r['params']})": (float(r["time_us"]), float(r["spread"]) if r["spread"] else None,
                                          bool(r["doubts"]))
            for r in csv.DictReader(io.StringIO(stdout)) if r.get("status") == "OK"}


def tbo_perf_rows(stdout: str) -> dict[str, float]:
    """test-backend-ops' console lines: "  OP(params):   N runs -   T us/run - ..." -> us/run."""
    return {m.group(1): float(m.group(2)) for m in
            re.finditer(r"^  (\w+\(.*\)):\s+\d+ runs -\s+([\d.]+) us/run", ANSI.sub("", stdout), re.M)}


class PerfSeries:
    """Each tool's us/run per case over several runs, and what ops said of its figures."""

    def __init__(self):
        self.ours: dict[str, list[float]] = {}
        self.theirs: dict[str, list[float]] = {}
        self.spreads: dict[str, list[float]] = {}
        self.marked: dict[str, int] = {}

    def add(self, ops_stdout: str, tbo_stdout: str) -> None:
        for k, (us, spread, doubted) in ops_perf_rows(ops_stdout).items():
            self.ours.setdefault(k, []).append(us)
            self.spreads.setdefault(k, []).extend([] if spread is None else [spread])
            self.marked[k] = self.marked.get(k, 0) + doubted
        for k, us in tbo_perf_rows(tbo_stdout).items():
            self.theirs.setdefault(k, []).append(us)

    def ratios(self) -> dict[str, float]:
        """ops / test-backend-ops, medians over the runs, per case in both outputs."""
        return {k: statistics.median(self.ours[k]) / statistics.median(self.theirs[k])
                for k in sorted(set(self.ours) & set(self.theirs)) if statistics.median(self.theirs[k]) > 0}

    def print(self, title: str, show: int) -> None:
        ratio = self.ratios()
        if not ratio:
            print(f"{title}: no case in both outputs (the same ggml on both sides? make native GGML_HOME=...)")
            return
        trusted = [k for k in ratio if not self.marked[k]]
        within = [k for k in trusted if abs(ratio[k] - 1) <= 0.10]
        runs = len(next(iter(self.theirs.values())))
        print(f"{title}, medians of {runs} run(s) per tool: {len(ratio)} cases in both "
              f"({len(self.ours)} ops, {len(self.theirs)} test-backend-ops), us/run ops/tbo median "
              f"{statistics.median(ratio.values()):.2f}; {len(trusted)} never marked by ops, "
              f"{len(within)} of those within 10 %")
        print(f"  {'case':<80} {'ops us':>10} {'spread':>7} {'ops range':>17} {'tbo us':>10} {'tbo range':>17} {'ratio':>6}")
        for k in sorted(ratio, key=lambda k: -abs(ratio[k] - 1))[:show]:
            ours, theirs = self.ours[k], self.theirs[k]
            spread = f"±{statistics.median(self.spreads[k]):.1%}" if self.spreads[k] else "±?"
            print(f"  {k[:80]:<80} {statistics.median(ours):>10.2f} {spread:>7} "
                  f"{min(ours):>8.1f}-{max(ours):<8.1f} {statistics.median(theirs):>10.2f} "
                  f"{min(theirs):>8.1f}-{max(theirs):<8.1f} {ratio[k]:>6.2f}"
                  + (f"  [marked {self.marked[k]}x]" if self.marked[k] else ""))


def perf_compare(args) -> None:
    """us/run per case, ops' against test-backend-ops', and how many agree within 10 %: each
    tool's median over --perf-runs runs, interleaved (a figure moves between runs of either
    tool by more than its own spread: SOFT_MAX 64x64x20 read 81-110 us in both)."""
    series, loads, others = PerfSeries(), [], []
    p = ["-p", args.perf_params] if args.perf_params else []
    for _ in range(max(1, args.perf_runs)):
        ops_f = tree.run([*OPS, "perf", "-b", "GGML-CPU", "-o", args.perf_ops, *p, "--min-time", args.perf_min_time,
                          "--output", "csv"])
        tbo_f = tree.run([args.tbo, "perf", "-b", "CPU", "-o", args.perf_ops, *p])
        series.add(ops_f.stdout, tbo_f.stdout)
        loads += [ops_f.load, tbo_f.load]
        others += [ops_f.others, tbo_f.others]
    series.print(f"perf ({args.perf_ops}{' -p ' + args.perf_params if args.perf_params else ''}; load "
                 f"{min(loads):.1f}-{max(loads):.1f}, others {max(others):.2f} cores)", args.perf_show)


def perf35(args) -> None:
    """Issue 35's perf figures: `ops perf -o MUL_MAT` (its default cases and options) and
    test-backend-ops' perf mode on the same cases, in --pairs paired runs interleaved (the
    order turning each pair): each tool's wall and CPU (medians, the ratio, the load) and
    us/run per case (medians)."""
    o = ["-o", args.perf35_ops] + (["-p", args.perf35_params] if args.perf35_params else [])
    ours, theirs = paired([*OPS, "perf", "-b", "GGML-CPU", *o, "--output", "csv"],
                          [args.tbo, "perf", "-b", "CPU", *o], args.pairs)
    label = f"perf {' '.join(o)}"
    print()
    print(f"ops' GGML-CPU runs {which_ggml()}; test-backend-ops: {args.tbo}")
    print(f"issue 35: {label}, ops -b GGML-CPU / test-backend-ops -b CPU, medians of {args.pairs} "
          f"interleaved pair(s); target: ops' whole run under 15 min on 2 cores")
    print(f"{'':<28} {'cases':>9} {'tool':<8} {'wall':>7} {'CPU':>7} {'largest':>8} {'tree':>7}  load  others")
    for which, runs in (("tbo", theirs), ("ops", ours)):
        n = len(tbo_perf_rows(runs[-1].stdout) if which == "tbo" else ops_perf_rows(runs[-1].stdout))
        loads = [r.load for r in runs]
        print(f"{label[:28] if which == 'tbo' else '':<28} {n:>9} {which:<8} {med(runs, 'wall'):>7.1f} "
              f"{med(runs, 'cpu'):>7.1f} {med(runs, 'largest_mib'):>8.0f} {med(runs, 'peak_mib'):>7.0f}  "
              f"{min(loads):.1f}-{max(loads):.1f}  {max(r.others for r in runs):.2f}"
              + ("" if all(r.rc == 0 for r in runs) else "  (failed)"), flush=True)
    wall = med(ours, "wall")
    print(f"{'':<28} {'':>9} {'ratio':<8} wall {wall / max(med(theirs, 'wall'), 1e-9):.2f}, CPU "
          f"{med(ours, 'cpu') / max(med(theirs, 'cpu'), 1e-9):.2f}; ops' wall {wall / 60:.1f} min "
          f"(< 15: {'met' if wall < 900 else 'NOT met'})", flush=True)
    series = PerfSeries()
    for a, b in zip(ours, theirs):
        series.add(a.stdout, b.stdout)
    series.print(f"  per case ({label})", args.perf_show)


def sim_catalog(shard: str) -> None:
    """A CANN-SIM shard at -j 2: its figures, and the whole catalog extrapolated."""
    k, n = (int(x) for x in shard.split("/"))
    f = tree.run([*OPS, "test", "-b", "CANN-SIM", "-j", "2", "--shard", shard, "--output", "json"])
    c = json.loads(f.stdout)["summary"].get("CANN-SIM", {}) if f.stdout.strip() else {}
    print()
    print(f"ops test -b CANN-SIM -j 2 --shard {shard}: {c.get('total', 0)} cases ({counts_line(c)}), "
          f"wall {f.wall:.1f} s, CPU {f.cpu:.1f} s, peak {f.peak_mib:.0f} MiB (load {f.load:.1f}, "
          f"others {f.others:.2f} cores)")
    print(f"  whole catalog extrapolated: CPU {f.cpu * n / 60:.1f} min; at -j 2 on 2 idle cores "
          f"{f.cpu * n / 2 / 60:.1f} min; at this load {f.wall * n / 60:.1f} min")


def whole_catalog(args) -> None:
    test_s = {}
    for j in (int(x) for x in args.jobs.split(",") if x):
        s, doc = ops_run("test", "GGML-CPU", j, args.ops, 1)
        c = doc["summary"].get("GGML-CPU", {})
        test_s[j] = s
        print(f"{f'ops test -b GGML-CPU -j {j}':<40} {c.get('total', 0):>7} {s:>8.1f} "
              f"{c.get('total', 0) / s:>8.1f}   {counts_line(c)}", flush=True)
    if not args.scaling_ops:
        return
    scaling = {}
    for j in (1, 2):
        s, doc = ops_run("test", "GGML-CPU", j, args.scaling_ops, 1, args.scaling_params)
        scaling[j] = s
        c = doc["summary"].get("GGML-CPU", {})
        print(f"{f'ops test -j {j} -o {args.scaling_ops} -p {args.scaling_params}':<40} {c.get('total', 0):>7} "
              f"{s:>8.1f} {c.get('total', 0) / s:>8.1f}   {counts_line(c)}", flush=True)
    print(f"-j 2 speed-up on big cases: {scaling[1] / scaling[2]:.2f}x (2 cores: 2.0 at best)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
