"""Console output in test-backend-ops' layout (colours and a progress bar on a terminal,
plain lines when piped), and the machine-readable forms (csv, json)."""
from __future__ import annotations

import csv
import os
import sys

from typing import TYPE_CHECKING

from cannops.backend.base import SIMULATOR_COST

from . import plural
from .engine import DEVIATION, FAIL, NOT_SUPPORTED, OK, SKIPPED, CaseResult, DeviceInfo, Run

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

STYLE = {OK: "bold green", FAIL: "bold red", DEVIATION: "bold yellow", NOT_SUPPORTED: "", "SUPPORTED": "bold green"}


def make_console(file=None) -> Console:
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit on the spot; the runner stops cleanly and keeps the results instead
            self.quiet = True
            raise BrokenPipeError

    return _Console(file=file or sys.stdout, highlight=False, soft_wrap=True)


def plain_stdout() -> bool:
    """Whether rich would print plain text on stdout (no terminal, no colour), told without
    importing rich (a tenth of a small run's start-up): stdout is no tty and neither
    variable by which rich would take it for one (FORCE_COLOR, TTY_COMPATIBLE) is set."""
    if "FORCE_COLOR" in os.environ or os.environ.get("TTY_COMPATIBLE") == "1":
        return False
    try:
        return not sys.stdout.isatty()
    except ValueError:   # closed: rich takes it for no terminal too
        return True


class ConsolePrinter:
    """Human output of `ops test` and `ops perf`; the default printer."""
    quiet = False   # prints nothing (QuietPrinter): no console, no progress bar

    def __init__(self, mode: str, console: Console | None = None, verbose: bool = False):
        self.mode = mode
        # piped stdout gets plain lines, written without rich (console None)
        self.console = console or (None if self.quiet or plain_stdout() else make_console())
        self.verbose = verbose
        self.progress: Progress | None = None
        self.task = None
        self.failed: list[str] = []
        self.timing_said = False   # perf: the line saying what the figures measure
        self.idle = 0   # backends on which nothing ran
        # plain text is exactly what rich prints without a terminal or colours
        self.plain = self.console is None or not self.console.is_terminal and self.console.color_system is None

    def line(self, *parts) -> None:
        if self.plain:
            # piped, no colour: the text itself (rich's rendering costs ~1 ms a line)
            out = sys.stdout if self.console is None else self.console.file
            out.write("".join(p[0] if isinstance(p, tuple) else p for p in parts) + "\n")
            return
        from rich.text import Text
        text = Text()
        for p in parts:
            text.append(*(p if isinstance(p, tuple) else (p,)))
        self.console.print(text)

    # --- run ---
    def start(self, n_devices: int) -> None:
        self.line(f"Testing {plural(n_devices, 'device')}")
        self.line("")

    def device_start(self, i: int, n: int, info: DeviceInfo, n_cases: int) -> None:
        self.line(f"Backend {i + 1}/{n}: {info.name}")
        if info.description:
            self.line(f"  Device description: {info.description}")
        if info.memory_total is not None:
            self.line(f"  Device memory: {info.memory_total // 2**20} MB ({info.memory_free // 2**20} MB free)")
        if info.threads is not None:
            self.line(f"  Threads: {info.threads}")
        self.line("")
        self.failed = []
        self.timing_said = False
        if self.console is not None and self.console.is_terminal:
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)
            # this device's cases: done, time taken, time left at the recent pace (a whole
            # catalog is 20,773 cases a device, most of an hour)
            self.progress = Progress(TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), TextColumn("elapsed,"), TimeRemainingColumn(),
                                     TextColumn("left"), console=self.console, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(info.name, total=n_cases)

    def device_skipped(self, i: int, n: int, name: str, why: str) -> None:
        self.line(f"Backend {i + 1}/{n}: {name}")
        self.line(f"  Skipping: {why}")
        self.line("")

    def case(self, r: CaseResult) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)
        head = f"  {r.name}: "
        if self.mode == "perf":
            return self._perf(r, head)
        if r.status == NOT_SUPPORTED:
            if self.mode == "grad" and r.reason and not r.reason.startswith(r.device):
                # grad mode names what is missing, as test-backend-ops does (the op, a type)
                self.line(head, f"not supported [{r.reason}]")
                return
            # the reference's own limits are always explained: the device is not at fault;
            # so are a device's in grad mode (the backward op it lacks: SILU_BACK)
            why = r.reason and (self.verbose or r.blamed != r.device or self.mode == "grad")
            reason = r.reason.removeprefix(f"{r.device}: ") if why else ""
            self.line(head, f"not supported [{r.blamed}]" + (f" {reason}" if reason else ""))
            return
        if r.status == SKIPPED:
            self.line(head, r.reason)
            return
        first, _, rest = r.reason.partition("\n")
        if r.status == FAIL:
            self.failed.append(r.name)
            blame = f" -> {r.blame}" if r.blame else ""
            self.line(head, first + blame + " " if first or blame else "", ("FAIL", STYLE[FAIL]))
            if r.trace:
                from .engine import trace_lines   # its module needs NumPy: only once a FAIL has a trace
                rest = "\n".join([*rest.splitlines(), *trace_lines(r)])
        elif r.status == DEVIATION:
            self.line(head, first + " ", ("KNOWN DEVIATION", STYLE[DEVIATION]), f" [{r.device}: {r.note}]")
        else:
            self.line(head, ("OK", STYLE[OK]))
        for ln in rest.splitlines():
            self.line(f"      {ln}")

    def _perf(self, r: CaseResult, head: str) -> None:
        if r.status == NOT_SUPPORTED:
            self.line(head, "not supported")
            return
        if r.status == FAIL:
            self.line(head, r.reason + " ", ("FAIL", STYLE[FAIL]))
            return
        # align the figures like test-backend-ops: next multiple of 8, at least 5 spaces
        n = len(head)
        last = (n + 7) // 8 * 8
        if last - n < 5:
            last += 8
        if not self.timing_said:   # what the figures are, once, before the first
            self.timing_said = True
            self.line(f"  Timing: {r.clock or 'host wall clock'}; us/run is the median over batches, "
                      "± their relative MAD")
        spread = f"±{r.spread:5.1%}" if r.spread is not None else "±  ?  "
        unit = "us/run (simulator's cost)" if r.clock.startswith(SIMULATOR_COST) else "us/run"
        figures = f"{' ' * (last - n)}    {r.n_runs:8d} runs - {r.time_us:8.2f} {unit} {spread} - "
        if r.cost:   # the simulator: what a device would be asked to do first, its host cost after
            from .cost_report import work_text
            head, figures = head + f" {work_text(r.cost)};", f" host{figures}"
        doubt = (f"  [{r.doubts}]", "bold yellow") if r.doubts else ""
        if r.flops > 0:
            per_run = r.flops * r.time_us / 1e6
            size, rate = f"{format_flops(per_run)}/run - ", f"{format_flops(r.flops)}S"
        else:
            size, rate = f"{r.memory_kb:8d} kB/run - ", f"{r.bandwidth_gb_s:7.2f} GB/s"
        self.line(head, figures, size, (rate, "bold blue"), doubt)

    def device_end(self, name: str, results: list[CaseResult], ok: bool) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        if self.mode in ("test", "grad"):
            ran = [r for r in results if r.status in (OK, FAIL, DEVIATION)]
            passed = sum(r.status in (OK, DEVIATION) for r in ran)
            dev = sum(r.status == DEVIATION for r in ran)
            extra = f" ({dev} known deviations)" if dev else ""
            self.line(f"  {passed}/{len(ran)} tests passed{extra}")
            if self.failed:
                self.line("")
                self.line("  Failing tests:")
                for case_name in self.failed:
                    self.line(f"    {case_name}")
        if self.mode == "perf":
            self._perf_trust(results)
        if ok and self.mode in ("test", "grad") and results and not any(
                r.status in (OK, FAIL, DEVIATION) for r in results):
            # nothing ran: not a pass (ops grad -b CANN-SIM said "0/0 tests passed", then OK)
            self.idle += 1
            self.line(f"  Backend {name}: ", ("NOTHING RAN", "bold yellow"), " (every case not supported)")
        else:
            self.line(f"  Backend {name}: ", ("OK", STYLE[OK]) if ok else ("FAIL", STYLE[FAIL]))
        self.line("")

    def _perf_trust(self, results: list[CaseResult]) -> None:
        """What the figures measured, and a warning when some are not to be trusted."""
        timed = [r for r in results if r.status == OK and r.time_us > 0]
        doubted = [r for r in timed if r.doubts]
        if doubted:
            busy = sum("busy machine" in r.doubts for r in doubted)
            spread = sum("spread" in r.doubts for r in doubted)
            loads = [r.load for r in timed if r.load is not None]
            self.line(("  Warning: ", "bold yellow"),
                      f"{len(doubted)}/{len(timed)} figures are not to be trusted ({busy} taken on a busy "
                      f"machine, {spread} with a wide or unknown spread"
                      + (f"; load average up to {max(loads):.1f} on {os.cpu_count()} cores" if loads else "")
                      + "): measure again on an idle machine")

    def interrupted(self, run: Run) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
        self.line("")
        self.line(("interrupted", "bold yellow"), f": {plural(len(run.results), 'case result')} kept")

    def end(self, n_ok: int, n_total: int) -> None:
        # a backend on which nothing ran did not fail, nor did it pass
        idle = f", {self.idle} on which nothing ran" if self.idle else ""
        self.line(f"{n_ok - self.idle}/{n_total} backends passed{idle}")
        if n_ok < n_total:
            self.line(("FAIL", STYLE[FAIL]))
        else:
            self.line(("NOTHING RAN", "bold yellow") if self.idle == n_total else ("OK", STYLE[OK]))


def format_flops(f: float) -> str:
    for scale, unit in ((1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP")):
        if f >= scale:
            return f"{f / scale:6.2f} {unit}"
    return f"{f / 1e3:6.2f} kFLOP"


class QuietPrinter(ConsolePrinter):
    """Prints nothing while running (machine-readable output follows at the end)."""

    quiet = True

    def line(self, *parts) -> None:
        pass

    def case(self, r: CaseResult) -> None:
        pass   # (a probe's 40,000 results: their lines would be made for nothing)


CSV_FIELDS = ["device", "op", "params", "status", "reason", "by", "error", "threshold", "metric",
              "strict", "max_abs", "max_rel", "worst_index",
              "n_runs", "time_us", "flops", "bandwidth_gb_s", "memory_kb", "seconds",
              "batches", "spread", "load", "contention", "steal", "doubts", "clock"]


def write_csv(run: Run, out) -> None:
    w = csv.DictWriter(out, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in sorted(run.results, key=lambda r: (r.index, r.device)):
        w.writerow(r.to_dict())


def write_json(run: Run, out) -> None:
    out.write(run.to_json())
