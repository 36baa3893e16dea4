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
from dataclasses import dataclass, field
from typing import Callable

from cannops.backend.base import SIMULATOR_COST

from .perf_measure import Machine
from .results import OK, CaseResult
from .tbo_console import ANSI, MAX_LINE, NAME, Line, Reader

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


# --- the perf console ---------------------------------------------------------------------

# what times a perf line's figures: test-backend-ops itself, on the device it runs on
TBO_CLOCK = "test-backend-ops' own (ggml_time_us around each graph compute of the op repeated)"
# ... and on the simulated toolkit, where that device is the simulator on this host
TBO_SIM_CLOCK = SIMULATOR_COST + " (test-backend-ops' own timing of the simulated device)"


@dataclass
class PerfLine(Line):
    """A perf case as the console gave it: its figures (none where it printed none: not
    supported, a death)."""
    figures: dict = field(default_factory=dict)
    simulated: bool = False     # the binary runs on the simulated toolkit: its timing is the host's

    def result(self, device: str) -> CaseResult:
        r = super().result(device)
        for k in ("n_runs", "time_us", "flops", "bandwidth_gb_s", "memory_kb"):
            if k in self.figures:
                setattr(r, k, self.figures[k])
        if self.figures:
            r.clock = TBO_SIM_CLOCK if self.simulated else TBO_CLOCK
        return r


def _perf_case(line: str) -> tuple[str, str, str, dict] | None:
    """(pre, op, params, figures) of a perf case line `PRE  OP(PARAMS):<pad>FIGURES`: the
    figures follow the last `): ` after which they read as such."""
    k = line.rfind("): ")
    while k >= 0:
        figures = perf_figures(line[k + 3:])
        if figures is not None:
            m = NAME.search(line, 0, k)
            return None if m is None else (line[:m.start()], m["op"], line[m.end():k], figures)
        k = line.rfind("): ", 0, k)
    return None


class PerfReader(Reader):
    """test-backend-ops' perf console: a case line whose status is its figures is an OK
    with them (PerfLine); everything else as test mode's Reader reads it (not supported,
    the devices, a death's story)."""

    def __init__(self, on_case: Callable[[Line], None] | None = None):
        outer = on_case or (lambda line: None)
        self._figures: dict | None = None
        super().__init__(lambda line: outer(self._with_figures(line)))

    def feed(self, raw: str) -> None:
        found = _perf_case(ANSI.sub("", raw[:MAX_LINE].rstrip("\r\n")))
        if found is None:
            super().feed(raw)
            return
        pre, op, params, self._figures = found
        self._case(pre, op, params, "OK")

    def _with_figures(self, line: Line) -> PerfLine:
        figures, self._figures = self._figures, None
        return PerfLine(**vars(line), figures=figures or {}, simulated=self.simulator is not None)


def with_machine(results: list[CaseResult], machine: Machine) -> None:
    """The machine around the process that measured them, on each measured result (the
    load and contention `ops perf` records, and its doubt where the machine was busy)."""
    for r in results:
        if r.status != OK or not r.time_us:
            continue
        r.load, r.contention, r.steal = machine.load, machine.contention, machine.steal
        if machine.busy:
            r.doubts = "; ".join(filter(None, [r.doubts, f"busy machine: {machine.busy}"]))
