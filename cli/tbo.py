"""`ops tbo BINARY`: a test-backend-ops binary run op by op as the Ascend CI runs it, its
crashes isolated, its lines read into ops' results (engine/tbo.py), so that the results
file, JUnit, --resume, --shard, `ops merge` and `ops support --markdown --baseline` serve
it as they serve `ops test`."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import click

from . import plural
from .engine import BadInput, Interrupted, parse_shard, split_ops_filter
from .options import OUTPUTS, check_regex, check_seconds, check_writable, graph_file_cases, open_journal, \
    read_case_names

OP_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
PER_OP = re.compile(r"(?P<op>[A-Z][A-Z0-9_]*)=(?P<rx>.*)", re.S)


def _params(values) -> tuple[tuple[str, str], ...]:
    """-p REGEX (every op) and -p OP=REGEX (that op), each checked."""
    out = []
    for v in values:
        m = PER_OP.fullmatch(v)
        op, rx = (m["op"], m["rx"]) if m else ("", v)
        check_regex(rx)
        out.append((op, rx))
    return tuple(out)


def _ops(values) -> list[str]:
    names = [n for v in values for n in split_ops_filter(v)]
    if values and not names:
        raise BadInput(f"-o {','.join(values)!r} names no op")
    for n in names:
        if not OP_NAME.fullmatch(n):
            raise BadInput(f"-o {n!r}: ops tbo takes op names (ADD, MUL_MAT); "
                           f"select cases with -p REGEX or -p OP=REGEX")
    return list(dict.fromkeys(names))


TBO_OPTIONS = [
    click.argument("binary", metavar="BINARY"),
    click.option("-o", "ops", metavar="OPS", multiple=True,
                 help="Op names (repeat or comma list); default: every op the binary has."),
    click.option("--cases", "cases_file", metavar="FILE",
                 help="Run the cases FILE names (one per line, as `ops cases --from-gguf` writes them), or the "
                      "graph nodes of a test-export-graph-ops FILE (the binary's --test-file); instead of -o."),
    click.option("-p", "params", metavar="[OP=]REGEX", multiple=True,
                 help="Only the cases whose params match REGEX (test-backend-ops' -p); OP=REGEX: for "
                      "that op only (repeatable)."),
    click.option("-b", "backends", metavar="DEVICE", multiple=True,
                 help="The binary's device(s), e.g. CANN0 (repeat or comma list); default: every one "
                      "but the CPU."),
    click.option("-j", "jobs", type=int, default=1, show_default=True, help="Ops run side by side (processes)."),
    click.option("--timeout", type=float, default=600.0, show_default=True,
                 help="Seconds one test-backend-ops process may take; a case that alone outlasts it FAILs."),
    click.option("--max-aborts", type=int, default=200, show_default=True,
                 help="Deaths of an op's processes after which its other cases are not run (skipped)."),
    click.option("--shard", metavar="K/N",
                 help="Run the K-th of N slices of the ops (dealt by their supported cases)."),
    click.option("--output", type=click.Choice(OUTPUTS), default="console", show_default=True,
                 help="console, or machine-readable on stdout: csv, json (the results file), junit."),
    click.option("--results", "results_path", metavar="FILE",
                 help="Also write the results as JSON to FILE (and each result as it comes to "
                      "FILE.partial.jsonl, for --resume)."),
    click.option("--resume", "resume_path", metavar="FILE",
                 help="Go on with the run that wrote FILE and was interrupted or killed: its finished "
                      "cases are taken, not run again. --results defaults to FILE."),
    click.option("--log-dir", metavar="DIR",
                 help="Write each op's raw console (stdout and stderr of every process, each after a "
                      "line `$ COMMAND`) to DIR/OP.log, as the CI keeps them; a file already there (an "
                      "earlier run's, a resumed one's, a symlink) is left as it is: the log goes to "
                      "DIR/OP.2.log (OP.3.log, ...)."),
    click.option("--allow-not-run", is_flag=True,
                 help="Exit status 0 even when cases were not run (after --max-aborts, names the binary "
                      "lacks, listed cases that printed no line), where none FAILed."),
    click.option("--require-clean", is_flag=True,
                 help="Exit status 1 also when an op has no OK case or a case was not run."),
    click.option("--trace", is_flag=True,
                 help="On the simulated toolkit: every case's ACL / aclnn calls in the results (a FAIL's "
                      "are kept anyway; docs/trace-and-blame.md)."),
    click.option("--mode", type=click.Choice(["test", "perf"]), default="test", show_default=True,
                 help="test-backend-ops' mode: test (each case against the CPU), or perf (each case timed: "
                      "runs, us/run, GB/s or FLOPS; on the simulated toolkit with its work counted and the host's "
                      "figure marked as the simulator's; docs/device-work.md)."),
    click.option("--cost", is_flag=True,
                 help="On the simulated toolkit: each case's device work counted (aclnn calls, kernels, "
                      "bytes, FLOPs by unit, copies, syncs, graph captures and replays) into the results, "
                      "and printed per case and per op (docs/device-work.md)."),
    click.option("--poison", is_flag=True,
                 help="On the simulated toolkit: fresh device memory is 0xFF bytes, a NaN in every float "
                      "type, so an element never written fails (CANN_SIM_POISON; docs/hygiene.md)."),
    click.option("--check-inputs", is_flag=True,
                 help="On the simulated toolkit: an aclnn call whose output overlaps an input it does not "
                      "take in place is refused (CANN_SIM_CHECK_INPUTS; docs/hygiene.md)."),
    click.option("--ggml-version", metavar="VERSION",
                 help="The binary's ggml version, where no source.json of `make ggml-cann` is beside it."),
    click.option("--source", "source_name", metavar="TEXT", help="Where the binary's ggml comes from (recorded)."),
]


def _named_cases(path, names, regexes):
    """A --cases file of names as the run's selection: its ops, a params regex per op that
    selects exactly its cases (those -p keeps), and the names kept."""
    from .engine import exact_params, op_regex
    picked: dict[str, list[str]] = {}
    for name in names:
        op = name.split("(", 1)[0]
        if not OP_NAME.fullmatch(op):
            raise BadInput(f"--cases {path}: {name[:60]!r} is not a case name OP(params)")
        rx = op_regex(regexes, op)
        params = name[len(op) + 1:-1]
        if rx is None or re.search(rx, params):
            picked.setdefault(op, []).append(params)
    if not picked:
        raise BadInput(f"no case selected from --cases {path}")
    kept = tuple(f"{op}({p})" for op, ps in picked.items() for p in dict.fromkeys(ps))
    return list(picked), tuple((op, exact_params(list(dict.fromkeys(ps)))) for op, ps in picked.items()), kept


def _case_file(path, binary, ops, regexes, timeout):
    """--cases FILE: (test file, run ops, regexes, case names). A test-export-graph-ops file
    goes to the binary as its --test-file (its lines checked first); a file of names selects
    them by exact params regexes, which any ggml's test-backend-ops reads."""
    from .engine import takes_test_file
    if ops:
        raise BadInput("--cases names the cases: it cannot go with -o")
    names = read_case_names(path)
    if names is not None:
        return (None, *_named_cases(path, names, regexes))
    graph_file_cases(path)   # a line that is not a graph node: one line, exit 2
    if not takes_test_file(binary, timeout):
        raise BadInput(f"--cases {path} is a test-export-graph-ops file, and {os.path.basename(binary)} does "
                       f"not take --test-file (its usage does not list it): run the file with `ops test --cases`")
    return os.path.abspath(path), [], regexes, ()


def tbo_options(f):
    """ops tbo's arguments and options (the command itself is in main.py)."""
    for opt in reversed(TBO_OPTIONS):
        f = opt(f)
    return f


@dataclass(frozen=True)
class TboOptions:
    """ops tbo's arguments and options, as click gives them (TBO_OPTIONS)."""
    binary: str
    ops: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    jobs: int = 1
    timeout: float = 600.0
    max_aborts: int = 200
    shard: str | None = None
    output: str = "console"
    results_path: str | None = None
    resume_path: str | None = None
    log_dir: str | None = None
    require_clean: bool = False
    ggml_version: str | None = None
    source_name: str | None = None
    cases_file: str | None = None
    trace: bool = False
    poison: bool = False
    check_inputs: bool = False
    allow_not_run: bool = False
    cost: bool = False
    mode: str = "test"


def run_binary(o: TboOptions):
    """The run: its results (the results file written) and the exit status; a bad input
    is a BadInput before anything runs; an interrupt before the run (while the binary
    prints its usage or lists its cases) ends ops with the signal's status."""
    try:
        return _run_binary(o)
    except Interrupted as e:
        name = os.path.basename(o.binary)
        click.echo(f"ops: interrupted before the run, while {name} listed its cases", err=True)
        raise SystemExit(e.exit_status) from None


def _run_binary(o: TboOptions):
    from .engine import TboSpec, binary_source, check_binary, device_names, list_cases, simulator_environment
    binary = check_binary(o.binary)
    _check_numbers(o)
    wanted_ops, regexes = _ops(o.ops), _params(o.params)
    test_file, names = None, ()
    if o.cases_file:
        test_file, wanted_ops, regexes, names = _case_file(o.cases_file, binary, o.ops, regexes, o.timeout)
    results_path = o.results_path or o.resume_path
    check_writable(results_path)
    if o.log_dir:
        _check_log_dir(o.log_dir)
    if o.resume_path:
        _check_resumed_trace(o.resume_path, o.trace)
    devices = device_names(o.backends)
    listing = list_cases(binary, devices[0] if devices else None, timeout=o.timeout, test_file=test_file,
                         env=simulator_environment(o.poison, o.check_inputs))
    _check_simulated(binary, listing, trace=o.trace, poison=o.poison, check_inputs=o.check_inputs, cost=o.cost)
    devices = _devices(binary, devices, listing)
    run_ops = _run_ops(binary, wanted_ops, test_file, listing, o.cases_file)
    source = binary_source(binary, o.ggml_version, o.source_name)
    if test_file:
        source["test_file"] = test_file   # the cases' definitions: a resume checks it is the same
    if o.trace:
        source["trace"] = True   # every case's calls: a resume with --trace checks the run had them
    simulator = listing.simulator or {}
    spec = TboSpec(binary=binary, devices=tuple(devices), ops=tuple(run_ops), params=regexes, timeout=o.timeout,
                   jobs=o.jobs, max_aborts=o.max_aborts, shard=o.shard, test_file=test_file, cases=names,
                   simulated=listing.simulator is not None, trace=o.trace, mode=o.mode,
                   # perf on the simulated toolkit: the work counted is its figure
                   cost=o.cost or (o.mode == "perf" and listing.simulator is not None),
                   # a switch already on in the environment counts as asked (the simulator said so)
                   poison=o.poison or bool(simulator.get("poison")),
                   check_inputs=o.check_inputs or bool(simulator.get("check_inputs")))
    return _run(spec, listing, o, source, bool(wanted_ops))


def _check_log_dir(log_dir: str) -> None:
    try:
        os.makedirs(log_dir, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create --log-dir {log_dir}: {e.strerror}") from None
    if not os.access(log_dir, os.W_OK | os.X_OK):
        raise BadInput(f"--log-dir {log_dir}: cannot write there")


def _check_resumed_trace(path: str, trace: bool) -> None:
    """--trace --resume FILE of a run made without --trace: refused, since its finished
    cases (not run again) have no calls recorded and a trace of only some cases would say
    nothing of the others; and the other way round. (A run that cannot be read is left to
    load_resume to refuse.)"""
    import json

    from .engine import journal_path, load_run
    header = None
    try:
        header = load_run(path).source if os.path.exists(path) else None
        if header is None and os.path.exists(journal_path(path)):
            with open(journal_path(path), encoding="utf-8") as f:
                header = json.loads(f.readline()).get("source")
    except (OSError, ValueError, AttributeError):
        return
    if not isinstance(header, dict) or bool(header.get("trace")) == trace:
        return
    if trace:
        raise BadInput(f"--trace: {path} is of a run made without --trace, whose finished cases (not run again) "
                       f"have no calls recorded; resume it without --trace, or start a new run with --results")
    raise BadInput(f"--resume {path}: its run was made with --trace; resume it with --trace")


def _check_numbers(o: TboOptions) -> None:
    if o.jobs < 1:
        raise BadInput(f"-j must be at least 1 (got {o.jobs})")
    if o.max_aborts < 1:
        raise BadInput(f"--max-aborts must be at least 1 (got {o.max_aborts})")
    check_seconds("--timeout", o.timeout)
    if o.shard:
        parse_shard(o.shard)


def _devices(binary: str, devices: list[str], listing) -> list[str]:
    """-b's devices, each one the binary has; by default every one it tests."""
    unknown = [d for d in devices if d not in listing.devices]
    if unknown:
        raise BadInput(f"{os.path.basename(binary)} has no device {', '.join(unknown)} "
                       f"(it has {', '.join(listing.devices)})")
    if not devices:
        devices = listing.tested
        if not devices:
            raise BadInput(f"{os.path.basename(binary)} has no device but the CPU "
                           f"({', '.join(listing.devices)}): give -b CPU to test that")
    return devices


def _run_ops(binary: str, wanted_ops: list[str], test_file: str | None, listing, cases_file: str | None
             ) -> list[str]:
    """The ops to run: -o's (each one the binary lists or ops knows), a test file's, or all."""
    from cannops.cases.cache import op_names
    catalog_ops = op_names()
    if wanted_ops:
        known = set(listing.cases) | set(catalog_ops)
        bad = [op for op in wanted_ops if op not in known]
        if bad:
            from .engine import suggest
            raise BadInput(f"unknown op {bad[0]!r}{suggest(bad[0], sorted(known))}: neither the binary "
                           f"lists it nor is it a fused case ops knows")
        return wanted_ops
    if test_file:
        if not listing.cases:
            raise BadInput(f"{os.path.basename(binary)} lists no case of --cases {cases_file}")
        return sorted(listing.cases)   # the file's nodes, as the binary names them
    # the listing has no fused cases (support mode leaves them out): ops' catalog names
    # those it knows; one the binary lacks runs no case and is left out
    return sorted(set(listing.cases) | set(catalog_ops))


def _check_simulated(binary, listing, **flags):
    """--trace, --poison, --check-inputs, --cost are the simulated toolkit's: refused for a binary
    whose support mode showed no simulator (a real CANN, or a toolkit not found)."""
    asked = [f"--{k.replace('_', '-')}" for k, on in flags.items() if on]
    if asked and listing.simulator is None:
        raise BadInput(f"{' '.join(asked)}: {os.path.basename(binary)} does not run on the simulated toolkit "
                       f"(its support mode showed no CANN simulator; a build of another toolkit can be run on "
                       f"it with build/cann-sim-toolkit/lib64 first in LD_LIBRARY_PATH)")


def _run(spec, listing, o: TboOptions, source: dict, named: bool):
    """The run of `spec`, from the printer's first line to the results file; the run and
    its exit status."""
    from .printers import ConsolePrinter, QuietPrinter
    devices = list(spec.devices)
    results_path = o.results_path or o.resume_path
    run = _new_run(spec, listing, source, named)
    journal = open_journal(results_path)
    try:
        known = _resumed(o.resume_path, run, spec)
        if journal:
            journal.begin(run)
        run.devices = [listing.devices[d] for d in devices]
        run.results.extend(known.values())
        if journal:
            for info in run.devices:
                journal.device(info)
            for r in known.values():
                journal.result(r)
        printer = ConsolePrinter(spec.mode) if o.output == "console" else QuietPrinter(spec.mode)
        sink = _Sink(printer, journal, devices, run, stream=spec.jobs == 1)
        printer.start(len(devices))
        _run_keeping_results(spec, listing, run, known, sink, o.log_dir, results_path)
        if run.interrupted:
            printer.interrupted(run)
        else:
            printer.end(sink.n_ok, len(devices))
        if results_path:
            try:
                run.write_json(results_path)
            except OSError as e:
                raise BadInput(f"cannot write {results_path}: {e.strerror or e}") from None
            if journal:
                journal.remove()
    finally:
        if journal:
            journal.close()
    return run, _exit_status(run, sink, o)


def _run_keeping_results(spec, listing, run, known, sink, log_dir, results_path) -> None:
    """run_tbo; where it raises (a fault of ops itself, whatever the binary printed), what
    finished is written first, as after an interrupt (the journal kept: --resume goes on)."""
    from .engine import run_tbo
    try:
        run_tbo(spec, listing, run, known, sink, log_dir)
    except Exception:
        run.interrupted = True
        if results_path:
            try:
                run.write_json(results_path)
            except OSError:
                pass
        raise


def _new_run(spec, listing, source: dict, named: bool):
    from cannops.cases.versions import for_ggml

    from .engine import Run, __version__, hygiene_modes
    return Run(mode=spec.mode, ops_filter=",".join(spec.ops) if named else None,
               params_filter="; ".join(f"{o}={rx}" if o else rx for o, rx in spec.params) or None,
               shard=spec.shard, version=__version__, catalog=for_ggml(source.get("ggml_version")), source=source,
               hygiene=hygiene_modes(listing.simulator))


def _resumed(resume_path: str | None, run, spec) -> dict:
    """(device, case name) -> result of the run --resume goes on with, of this run's
    devices and ops."""
    from .engine import load_resume
    if not resume_path:
        return {}
    try:
        resumed = load_resume(resume_path, run)
    except ValueError as e:
        raise BadInput(str(e)) from None
    return {(r.device, r.name): r for r in resumed.results.values()
            if r.device in spec.devices and r.op in spec.ops}


def _exit_status(run, sink, o: TboOptions) -> int:
    """1 where a case FAILed, cases were not run (but with --allow-not-run) or, with
    --require-clean, an op printed no OK case; the interrupt's status where interrupted."""
    from .engine import FAIL, SKIPPED
    if run.interrupted:
        return run.exit_status
    failed = any(r.status == FAIL for r in run.results)
    not_run = sum(r.status == SKIPPED for r in run.results)
    unclean = o.require_clean and (sink.no_ok or not_run)
    if unclean and not failed:
        click.echo(f"ops: --require-clean: {', '.join(sink.no_ok) or 'cases not run'}"
                   + (" printed no OK case" if sink.no_ok else ""), err=True)
    elif not_run and not failed and not o.allow_not_run:
        click.echo(f"ops: {plural(not_run, 'case')} not run (--allow-not-run takes that as a pass)", err=True)
    return 1 if failed or unclean or (not_run and not o.allow_not_run) else 0


class _Sink:
    """Where the engine's results go: the journal as they come; the console a device and
    an op at a time, in op order, each op closed by a line of its counts (stream: one op
    runs at a time, and its cases are printed as they come)."""

    def __init__(self, printer, journal, devices, run, stream=False):
        self.printer, self.journal, self.devices, self.run = printer, journal, devices, run
        self.stream = stream
        self.printed: set[int] = set()
        self.n_ok = 0
        self.no_ok: list[str] = []
        self.device_results: list = []

    def result(self, r) -> None:
        if self.journal:
            self.journal.result(r)
        if self.stream:
            self.printer.case(r)
            self.printed.add(id(r))

    def device_start(self, device: str, n_cases: int) -> None:
        i = self.devices.index(device)
        info = next(d for d in self.run.devices if d.name == device)
        self.device_results = []
        self.printer.device_start(i, len(self.devices), info, n_cases)

    def op_done(self, device: str, op: str, results: list, seconds: float) -> None:
        from .engine import FAIL, NOT_SUPPORTED, OK, SKIPPED, is_death
        results = sorted(results, key=lambda r: r.index)
        for r in results:
            if id(r) not in self.printed:   # (resumed ones, and all of them with -j 2 or more)
                self.printer.case(r)
        self.device_results += results
        if not results:
            return
        n = {s: sum(r.status == s for r in results) for s in (OK, NOT_SUPPORTED, FAIL, SKIPPED)}
        deaths = sum(map(is_death, results))
        if not n[OK]:
            self.no_ok.append(op)
        self.printer.line(f"  {op}: {n[OK]} OK, {n[NOT_SUPPORTED]} not supported, {n[FAIL]} FAIL"
                          + (f" ({plural(deaths, 'death')})" if deaths else "")
                          + (f", {n[SKIPPED]} not run" if n[SKIPPED] else "") + f"; {seconds:.1f} s")

    def device_end(self, device: str) -> None:
        from .engine import device_passed
        ok = device_passed(self.device_results)
        self.n_ok += ok
        self.printer.device_end(device, self.device_results, ok)
