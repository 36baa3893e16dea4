"""What counting the device work costs on CANN-SIM (issue 42, part 1: at most 5 % of a run's
CPU time, or off unless asked): a sample of everyday cases run through ops' layer on the
simulator counted (CANNDevice.run: the pool emptied first, every call's cost record and the
runtime's events, summed) and not counted (the same run without them), alternating case by
case, each way's CPU seconds summed over --rounds rounds after one round of warm-up. Only the device run is timed: the
reference, inputs and comparison around it are the same either way, so the share of a whole
`ops test` run is smaller still.
Usage: python bench/cost.py [--ops ADD,MUL_MAT,...] [--per-op N] [--rounds R]"""
from __future__ import annotations

import argparse
import time

EVERYDAY = "MUL_MAT,CPY,SOFT_MAX,CONCAT,GET_ROWS,ADD,MUL,RMS_NORM,SSM_CONV,ARGSORT,CONT,SUM_ROWS,ROPE,SET_ROWS"


def sample(dev, ops: list[str], per_op: int) -> list:
    """Up to per_op cases of each op that the device supports, spread over its grid."""
    from cannops.cases.catalog import all_cases
    picked = []
    for op in ops:
        cases = [c for c in all_cases() if c.op == op]
        step = max(1, len(cases) // (4 * per_op))
        mine = [c for c in cases[::step] if dev.supports(c, c.build())][:per_op]
        picked += mine
    return picked


def measure(dev, cases: list, rounds: int) -> tuple[float, float, int]:
    """(CPU s counted, CPU s not counted, aclnn calls counted per round)."""
    from cannops.cli.engine.execute import check_indices
    prepared = []
    for c in cases:
        g = c.build()
        prepared.append((c, g, c.init_inputs(g, 0), check_indices(g)))
    for c, g, inputs, check in prepared:   # warm-up: first runs pay the simulator's caches
        dev.run(c, g, inputs, check)
    on = off = 0.0
    calls = 0
    for r in range(rounds):
        for c, g, inputs, check in prepared:
            for counted in ((True, False) if r % 2 == 0 else (False, True)):
                t = time.process_time()
                if counted:
                    got = dev.run(c, g, inputs, check)
                else:
                    got = dev._run(g, inputs, check)[0]
                dt = time.process_time() - t
                if counted:
                    on += dt
                    calls += got.cost["calls"] if r == 0 else 0
                else:
                    off += dt
    return on, off, calls


def whole_test(dev, cases: list) -> float:
    """CPU seconds of `ops test`'s per-case work (inputs, reference, device run, comparison),
    counted as a plain run counts, once per case: what the counting's extra is a share of."""
    from cannops.cli.engine.execute import test
    t = time.process_time()
    for c in cases:
        test(dev, c)
    return time.process_time() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default=EVERYDAY)
    ap.add_argument("--per-op", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=4)
    a = ap.parse_args(argv)
    import os

    from cannops.backend import cann
    dev = cann.open_device(cann.runtime().devices[0][0])
    try:
        if not dev.simulated:
            print("counting overhead: the first CANN device is not the simulator; nothing to measure")
            return
        cases = sample(dev, a.ops.split(","), a.per_op)
        on, off, calls = measure(dev, cases, a.rounds)
        whole = whole_test(dev, cases)
    finally:
        dev.close()
    load = os.getloadavg()[0]
    print(f"counting on CANN-SIM, {len(cases)} cases of {len(a.ops.split(','))} ops ({calls} aclnn calls a round), "
          f"{a.rounds} rounds alternating, load {load:.1f}: counted {on:.2f} CPU s, not counted {off:.2f} CPU s: "
          f"{100 * (on - off) / off:+.1f} % of the device runs' CPU, "
          f"{1e6 * (on - off) / (a.rounds * len(cases)):.0f} µs a case; a whole `ops test` of them {whole:.2f} CPU s: "
          f"{100 * (on - off) / a.rounds / (whole - (on - off) / a.rounds):+.1f} % of it")


if __name__ == "__main__":
    main()
