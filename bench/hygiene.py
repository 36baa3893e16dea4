"""What `ops test --poison` and `--check-inputs` cost a run (docs/hygiene.md): the device
runs of one case per op (`--sample 1`'s pick), in this process, each mode in turn and the
order rotating from round to round, so that a busy machine's drift falls on every mode
alike. Printed per device: the CPU seconds of a pass per mode (the process's, every thread:
on a busy machine wall time says little), the best and the median of the rounds, and their
ratios to the plain run's. `--repeat N` costs N runs by its definition, and is not measured.
Usage: python bench/hygiene.py [--rounds 5] [--devices CANN-SIM,GGML-CPU] [--per-op 1]
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from cannops.backend.base import DeviceError, open_device
from cannops.backend.hygiene import Hygiene
from cannops.cases import all_cases
from cannops.cli.engine.execute import check_indices
from cannops.cli.engine.selection import sample_per_op

MODES = {"plain": Hygiene(), "poison": Hygiene(poison=True), "check-inputs": Hygiene(inputs=True),
         "both": Hygiene(poison=True, inputs=True)}


def prepared(device, per_op: int) -> list[tuple]:
    """(case, graph, inputs, check) of the sampled cases the device supports."""
    out = []
    for _, c in sample_per_op(list(enumerate(all_cases())), per_op):
        g = c.build()
        if device.supports(c, g):
            out.append((c, g, c.init_inputs(g, 0), check_indices(g)))
    return out


def one_pass(device, cases, hygiene) -> float:
    t0 = time.process_time()
    for c, g, inputs, check in cases:
        try:
            device.run(c, g, inputs, check, hygiene=hygiene)
        except DeviceError:
            pass
    return time.process_time() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--devices", default="CANN-SIM,GGML-CPU")
    ap.add_argument("--per-op", type=int, default=1)
    args = ap.parse_args()
    for name in args.devices.split(","):
        device = open_device(name)
        cases = prepared(device, args.per_op)
        one_pass(device, cases, MODES["plain"])   # warm-up
        seconds = {m: [] for m in MODES}
        order = list(MODES)
        for k in range(args.rounds):
            for m in order[k % len(order):] + order[:k % len(order)]:
                seconds[m].append(one_pass(device, cases, MODES[m]))
        best, med = min(seconds["plain"]), statistics.median(seconds["plain"])
        load = os.getloadavg()[0]
        print(f"{name}: {len(cases)} cases, {args.rounds} rounds, load {load:.1f} on {os.cpu_count()} cores")
        for m, s in seconds.items():
            print(f"  {m:13s} best {min(s):7.2f} s x{min(s) / best:.3f}   median {statistics.median(s):7.2f} s "
                  f"x{statistics.median(s) / med:.3f}")
        device.close()


if __name__ == "__main__":
    main()
