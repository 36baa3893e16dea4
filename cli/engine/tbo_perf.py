"""test-backend-ops' perf mode as `ops tbo --mode perf` reads it: a case line's figures
(runs, us/run, then kB/run and GB/s, or FLOP/run and FLOPS), and what goes into the case's
result beside them (the machine's load, on the simulated toolkit the counted work).

The line forms, in ggml 0.9.8 and 0.25.3 alike (tests/test-backend-ops.cpp: the figures
printed by eval_perf, later by the console printer's print_perf_console): the case's name,
padding to a multiple of 8, then `%8d runs - %8.2f us/run - ` and either
`%8zu kB/run - %7.2f GB/s` (ops without a FLOP count) or `%6.2f <k|M|G|T>FLOP/run -
%6.2f <k|M|G|T>FLOPS`; older ggml printed `%5d runs` and the GB/s form alone. The colour
codes around the rate are taken off before."""
from __future__ import annotations

import re

FIGURES = re.compile(r"^\s*(?P<runs>\d+) runs - \s*(?P<us>[0-9.]+(?:e[+-]?\d+)?|inf|nan) us/run - \s*"
                     r"(?:(?P<kb>\d+) kB/run - \s*(?P<gbs>[0-9.]+|inf|nan) GB/s"
                     r"|(?P<fpr>[0-9.]+) (?P<fpr_unit>[kMGT]?)FLOP/run - \s*(?P<fps>[0-9.]+) (?P<fps_unit>[kMGT]?)FLOPS)"
                     r"\s*$")
SCALE = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def perf_figures(text: str) -> dict | None:
    """The figures of a perf line's status part: n_runs, time_us, and memory_kb with
    bandwidth_gb_s, or flops (FLOP/s, as ops perf records it) with flop_per_run; None where
    `text` is not a perf line's figures."""
    m = FIGURES.match(text)
    if m is None:
        return None
    out = {"n_runs": int(m["runs"]), "time_us": float(m["us"])}
    if m["kb"] is not None:
        out.update(memory_kb=int(m["kb"]), bandwidth_gb_s=float(m["gbs"]), flops=0.0)
    else:
        out.update(flops=float(m["fps"]) * SCALE[m["fps_unit"]],
                   flop_per_run=float(m["fpr"]) * SCALE[m["fpr_unit"]], bandwidth_gb_s=0.0)
    return out
