"""`make bench`: throughput of `ops` over the whole catalog, printed as figures.

For each measured command: the number of cases and the cases per second (wall clock),
plus the OK / not supported / FAIL counts, so a slowdown or a change in coverage shows.
Usage: python bench/run.py [--devices GGML-CPU,CANN-SIM] [--jobs 1,2] [-o OPS]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

OPS = [sys.executable, "-m", "cannops.cli.main"]


def measure(mode: str, device: str, jobs: int, ops: str | None) -> dict:
    cmd = [*OPS, mode, "-b", device, "-j", str(jobs), "--output", "json"]
    if ops:
        cmd += ["-o", ops]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seconds = time.perf_counter() - t0
    doc = json.loads(p.stdout)
    counts = doc["summary"].get(device, {})
    return {"mode": mode, "device": device, "jobs": jobs, "cases": counts.get("total", 0),
            "seconds": seconds, "counts": counts}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default="GGML-CPU")
    ap.add_argument("--jobs", default="1,2")
    ap.add_argument("-o", dest="ops")
    args = ap.parse_args()
    print(f"{'command':<34} {'cases':>7} {'seconds':>8} {'cases/s':>8}   OK / not supported / FAIL")
    for device in args.devices.split(","):
        runs = [("test", device, int(j)) for j in args.jobs.split(",")] + [("support", device, 2)]
        for mode, dev, jobs in runs:
            m = measure(mode, dev, jobs, args.ops)
            c = m["counts"]
            label = f"ops {mode} -b {dev} -j {jobs}"
            print(f"{label:<34} {m['cases']:>7} {m['seconds']:>8.1f} {m['cases'] / m['seconds']:>8.1f}"
                  f"   {c.get('OK', 0)} / {c.get('not supported', 0)} / {c.get('FAIL', 0)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
