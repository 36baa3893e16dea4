"""`make bench`: the speed figures of `ops`, printed (benchmarks, never timed tests).

* `ops list cases` and `ops support` (the probe, every device): wall seconds, cold (an empty
  cache: every graph built, every device asked) and warm (answered from the cache);
* the whole catalog in test mode on GGML-CPU at -j 2 (and the other --jobs): wall seconds,
  cases per second and the OK / not supported / FAIL counts, so a slowdown or a change in
  coverage shows; and the -j 1 / -j 2 scaling on big cases (--scaling-ops, --scaling-params);
* with TBO=<path to a test-backend-ops binary> (environment or --tbo): the same cases run
  by test-backend-ops too, `test -b CPU -j 2` and `perf -b CPU` (perf on --perf-ops), and the
  ratios ops / test-backend-ops side by side (below 1.0: ops is faster);
* with build/ggml-cann/910B (make ggml-cann): bench/ggml_cann.py, the simulated toolkit's
  per-call overhead and the time per case of test-backend-ops on the simulated CANN0 next
  to ops -b CANN-SIM.
Each figure is the best of --repeat runs: on a shared machine, the least disturbed one.
Usage: python bench/run.py [--jobs 2,1] [-o OPS] [--tbo PATH] [--perf-ops OPS] [--repeat N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

OPS = [sys.executable, "-m", "cannops.cli.main"]


def timed(cmd: list[str], repeat: int = 1, env: dict | None = None) -> tuple[float, str]:
    """Best wall seconds of `repeat` runs, and the last run's stdout."""
    best, out = float("inf"), ""
    for _ in range(repeat):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           env=None if env is None else {**os.environ, **env})
        best = min(best, time.perf_counter() - t0)
        out = p.stdout
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="2", help="comma list of -j values for the test run (default 2)")
    ap.add_argument("-o", dest="ops", help="only these ops (default: the whole catalog)")
    ap.add_argument("--tbo", default=os.environ.get("TBO"), help="a test-backend-ops binary to compare with")
    ap.add_argument("--perf-ops", default="ADD,MUL_MAT,CPY,SOFT_MAX,RMS_NORM",
                    help="ops of the perf comparison with test-backend-ops")
    ap.add_argument("--repeat", type=int, default=2, help="runs per probe / list figure (the best is kept)")
    # big cases (tenths of a second and more each), where the workers' compute dominates
    ap.add_argument("--scaling-ops", default="FLASH_ATTN_EXT", help="ops of the -j 1 / -j 2 scaling figure")
    ap.add_argument("--scaling-params", default=r"hsk=(256|576).*kv=(512|1024),nb=(32|35|512)",
                    help="-p of the scaling figure (big cases)")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")

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

    test_s = {}
    for j in (int(x) for x in args.jobs.split(",")):
        s, doc = ops_run("test", "GGML-CPU", j, args.ops, 1)
        c = doc["summary"].get("GGML-CPU", {})
        test_s[j] = s
        print(f"{f'ops test -b GGML-CPU -j {j}':<40} {c.get('total', 0):>7} {s:>8.1f} "
              f"{c.get('total', 0) / s:>8.1f}   {counts_line(c)}", flush=True)

    scaling = {}
    for j in (1, 2):
        s, doc = ops_run("test", "GGML-CPU", j, args.scaling_ops, 1, args.scaling_params)
        scaling[j] = s
        c = doc["summary"].get("GGML-CPU", {})
        print(f"{f'ops test -j {j} -o {args.scaling_ops} -p {args.scaling_params}':<40} {c.get('total', 0):>7} "
              f"{s:>8.1f} {c.get('total', 0) / s:>8.1f}   {counts_line(c)}", flush=True)
    print(f"-j 2 speed-up on big cases: {scaling[1] / scaling[2]:.2f}x (2 cores: 2.0 at best)", flush=True)

    if args.tbo:
        compare(args, test_s)
    print()
    import ggml_cann   # ggml-cann on the simulator, when make ggml-cann built it
    sys.argv = sys.argv[:1]
    ggml_cann.main()
    return 0


def compare(args, test_s: dict) -> None:
    """The same cases on test-backend-ops (its -b CPU), side by side with ops' figures."""
    print()
    sel = ["-o", args.ops] if args.ops else []
    tbo_s, _ = timed([args.tbo, "test", "-b", "CPU", "-j", "2", *sel])
    ops_s = test_s.get(2) or min(test_s.values())
    print(f"test mode: ops {ops_s:.1f} s, test-backend-ops {tbo_s:.1f} s, ratio ops/tbo {ops_s / tbo_s:.2f}",
          flush=True)
    # perf: us/run per case, ops' against test-backend-ops' (csv of both)
    ops_perf = subprocess.run([*OPS, "perf", "-b", "GGML-CPU", "-o", args.perf_ops, "--output", "csv"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    # test-backend-ops' csv has no timing column (v0.20.2): its console lines are read,
    # "  OP(params):   N runs -   T us/run - ..."
    tbo_perf = subprocess.run([args.tbo, "perf", "-b", "CPU", "-o", args.perf_ops],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    import csv
    import io
    import re
    ours = {f"{r['op']}({r['params']})": float(r["time_us"]) for r in csv.DictReader(io.StringIO(ops_perf))
            if r.get("status") == "OK"}
    theirs = {m.group(1): float(m.group(2))
              for m in re.finditer(r"^  (\w+\(.*\)):\s+\d+ runs -\s+([\d.]+) us/run", tbo_perf, re.M)}
    both = sorted(set(ours) & set(theirs))
    ratios = sorted(ours[k] / theirs[k] for k in both if theirs[k] > 0)
    print(f"perf mode ({args.perf_ops}): {len(both)} cases in both; us/run ratio ops/tbo median "
          f"{ratios[len(ratios) // 2]:.2f}" if ratios else "perf mode: no case in both outputs")
    for k in both[:40]:
        print(f"  {k[:90]:<90} {ours[k]:>10.2f} {theirs[k]:>10.2f} {ours[k] / theirs[k]:>6.2f}")


if __name__ == "__main__":
    sys.exit(main())
