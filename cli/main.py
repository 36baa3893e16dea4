"""`ops`: test, benchmark and chart ggml operator cases on CANN, ggml devices and NumPy."""
from __future__ import annotations

import math
import os
import shlex
import signal
import sys
from typing import TYPE_CHECKING

import click

from . import __version__, plural
from .options import (DEFAULT_TIMEOUT, at_least_one, repeat_count, check_common, check_seed, check_distinct_outputs, check_report_options,
                      check_seconds, check_writable, catalog_option, checked_selection, common_options,
                      graph_file_cases, open_journal, ops_text, output_option, parts_option, report_options, sample_option, selected_devices,
                      selection_ops, selection_options, worker_count)
from .engine import BadInput
from .bisect_command import bisect_command
from .fuzz_command import fuzz
from .tbo import tbo_options

if TYPE_CHECKING:
    from .engine import Run

# Each command imports the modules it runs with inside it: `ops --help` and a bad option
# stay free of NumPy and the backends (75 ms, against 300 ms with them all imported here).


def write_or_fail(path, write, *args) -> None:
    """Write an output file; an error (a full disk) is one line and exit status 2."""
    try:
        write(*args)
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror or e}") from None


def set_up_workers(mode: str, jobs: int, threads: int | None = None) -> None:
    """Before anything imports NumPy here (the CANN simulator does as devices are found):
    this process's BLAS gets a worker's threads, so that workers may be forked."""
    from .engine import set_up_forking, worker_threads
    set_up_forking(worker_threads(mode, jobs, threads))   # as the run spec's


def run_mode(mode, ops, params, backends, jobs, timeout, seed, shard, output, results_path,
             resume_path=None, printer=None, soc=None, sample=None, resumed=None, cases=None,
             cases_file=None, **spec_fields) -> Run:
    """Run the cases; write the results file. The caller emits the machine-readable output.
    resumed: results known already (results.Resumed), taken instead of running their cases;
    cases: the selection, where the caller made it already (refs=True); spec_fields: the
    command's options that go to the run spec as they are (engine/spec.py: min_seconds,
    strict, ref_cache, threads, ...), which the workers see."""
    check_common(jobs, timeout, seed)
    set_up_workers(mode, jobs, spec_fields.get("threads"))
    from .engine import FORKABLE, device_names, fork_ahead
    if all(name in FORKABLE for name in device_names(backends)[:1]):
        fork_ahead()   # the first device's first worker, importing while the cases are chosen
    from .engine import RunSpec, load_resume, new_run, run_cases
    from .printers import ConsolePrinter, QuietPrinter
    timeout_given = timeout is not None
    timeout = timeout or DEFAULT_TIMEOUT[mode]
    ops = selection_ops(ops, cases_file)
    results_path = results_path or resume_path
    check_writable(results_path)
    if mode == "test":   # a cache folder of other things is refused before anything is written
        from .engine import reference_dir
        reference_dir(spec_fields.get("ref_cache", True))
    if cases is None:
        cases = graph_file_cases(cases_file, params, shard, sample)
    if cases is None:
        cases = checked_selection(mode, ops, params, shard, sample=sample, refs=True)
    jobs = worker_count(jobs, len(cases))
    devices = selected_devices(backends, soc=soc)
    if not devices:
        raise BadInput("no device available (see `ops list devices`)")
    spec = RunSpec(mode=mode, jobs=jobs, timeout=timeout, timeout_given=timeout_given, seed=seed, ops_filter=ops,
                   params_filter=params, shard=shard, sample=sample, **spec_fields)
    journal = open_journal(results_path)
    try:
        if resume_path:
            try:
                resumed = load_resume(resume_path, new_run(spec))
            except ValueError as e:
                raise BadInput(str(e)) from None
            _same_devices(resume_path, resumed, [t.label for t in devices])
        if printer is None:
            printer = ConsolePrinter(mode) if output == "console" else QuietPrinter(mode)
        run = run_cases(cases, devices, spec, printer, journal, resumed)
        short = [r.name for r in run.results if r.host_error]
        if short:
            click.echo(f"ops: error: the host ran out of memory in {plural(len(short), 'case')} ({short[0]}"
                       f"{', ...' if len(short) > 1 else ''}): skipped, not a device's verdict; run "
                       f"{'it' if len(short) == 1 else 'them'} with fewer workers (-j) or on a larger host",
                       err=True)
        if results_path:
            write_or_fail(results_path, run.write_json, results_path)
            if journal:
                journal.remove()
    finally:
        if journal:
            journal.close()
    return run


def _same_devices(path, resumed, labels) -> None:
    """A resume goes on with the devices of the run it resumes: one that leaves some out
    would write a results file without their results (exit status 2, naming them)."""
    left_out = sorted(resumed.named - set(labels))
    if left_out:
        every = labels + [d for d in left_out if d not in labels]
        raise BadInput(f"--resume {path}: it holds results of {', '.join(left_out)}, which this run's devices "
                       f"({', '.join(labels)}) leave out: resume with -b {','.join(every)}, or give --results "
                       f"to start over")


class _Stdout:
    """stdout for the final outputs. One rule for every command: a reader that went away
    (`ops ... | head -1`) stops the writing quietly, the files are still written, and a
    status of 0 becomes 141 (128 + SIGPIPE, what a shell reports for a writer killed by
    SIGPIPE, so that `set -o pipefail` sees the output was cut); a status that says more
    (1: failures, 2: bad input, 128 + n: a signal) stays."""
    broken = False

    @classmethod
    def write(cls, fn, *args) -> None:
        if cls.broken:
            return
        try:
            fn(*args)
            sys.stdout.flush()
        except BrokenPipeError:
            cls.gone()

    @classmethod
    def gone(cls) -> None:
        """The reader went away: what is left to write goes nowhere."""
        cls.broken = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())

    @classmethod
    def status(cls, status: int) -> int:
        return 128 + signal.SIGPIPE if cls.broken and status == 0 else status


def emit(run: Run, output: str, slower=None) -> None:
    """The machine-readable forms on stdout (nothing for the console: it printed as it ran)."""
    _Stdout.write(_emit, run, output, slower)


def _emit(run: Run, output: str, slower=None) -> None:
    from .printers import write_csv, write_json
    if output == "csv":
        from .support import run_devices
        if run.mode == "perf" and len(run_devices(run)) > 1:
            from .perf_report import write_side_by_side_csv
            write_side_by_side_csv(run, sys.stdout)
        else:
            write_csv(run, sys.stdout)
    elif output == "json":
        write_json(run, sys.stdout)
    elif output == "junit":
        from .junit import write_junit
        write_junit(run, sys.stdout, slower)


def write_reports(run: Run, log_dir, summary_file, base, markdown=False) -> None:
    if log_dir:
        from .report import write_logs
        write_or_fail(log_dir, write_logs, run, log_dir)
    if summary_file or markdown:
        from .report import markdown_report, write_if_changed
        text = markdown_report(run, base)
        if summary_file:
            write_or_fail(summary_file, write_if_changed, summary_file, text)
        if markdown:
            _Stdout.write(sys.stdout.write, text)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ops")
def cli():
    """Check, benchmark and chart ggml operator cases on CANN (aclnn), ggml devices and NumPy."""


cli.add_command(fuzz)


@cli.command()
@common_options
@click.option("--strict", is_flag=True,
              help="Also bound every element: |out-ref| <= atol + rtol*|ref| (per-dtype defaults, "
                   "looser where a family says why); test-backend-ops has no such check.")
@click.option("--no-ref-cache", "ref_cache", is_flag=True, flag_value=False, default=True,
              help="Compute every reference anew, keeping none on disk (default: kept in the user's "
                   "cache, ~/.cache/cannops-ops/reference; OPS_REF_CACHE=off|DIR).")
@click.option("--trace", is_flag=True,
              help="Record every case's ACL / aclnn calls on CANN-SIM into the results (a FAIL "
                   "records them anyway, replays them in float64 and names the call to blame; "
                   "docs/trace-and-blame.md).")
@click.option("--cost", is_flag=True,
              help="Print each case's device work as CANN-SIM counts it (aclnn calls, kernels, bytes, "
                   "FLOPs by unit, copies, syncs; per case and per op) and keep its per-call records "
                   "in the results (the counts are there anyway; docs/device-work.md).")
@click.option("--repeat", type=int, default=1, metavar="N", callback=repeat_count,
              help="Run each case N times on the device, on the same inputs: a FAIL unless the "
                   "outputs are bit-identical (docs/hygiene.md).")
@click.option("--poison", is_flag=True,
              help="Fill every op output with NaN (0xFF bytes) before the run: an element the device "
                   "never writes is a FAIL that counts them (CANN and ggml devices; docs/hygiene.md).")
@click.option("--check-inputs", is_flag=True,
              help="Compare every input after the run with what it held: a device that wrote into one "
                   "its op does not write by definition is a FAIL (CANN and ggml devices; docs/hygiene.md).")
@click.option("--timings", is_flag=True,
              help="After each device, print per op the device's time (its compute call alone) "
                   "and the tool's overhead around it (docs/perf.md#warm-runs).")
@report_options
def test(log_dir, summary_file, baseline, timings, **kw):
    """Compare every case with the NumPy reference: OK / not supported / FAIL."""
    _run_and_report("test", log_dir, summary_file, baseline, timings=timings, **kw)


@cli.command()
@common_options
@report_options
def grad(log_dir, summary_file, baseline, **kw):
    """Check each case's gradients: backprop (libggml's backward graph) against finite
    differences on the device, as test-backend-ops' grad mode: OK / not supported / FAIL."""
    _run_and_report("grad", log_dir, summary_file, baseline, **kw)


def _run_and_report(mode, log_dir, summary_file, baseline, timings=False, **kw):
    """test and grad: the report options checked first, then the run, its outputs and
    reports (with `timings`, each device's time against the tool's: on stderr unless the
    output is the console); the exit status is the run's."""
    check_distinct_outputs({"--results": kw["results_path"] or kw["resume_path"], "--summary-file": summary_file},
                           log_dir)
    base = check_report_options(log_dir, summary_file, baseline)
    run = run_mode(mode, **kw)
    if timings:
        from .timings import timing_lines
        for d in run.devices:
            for ln in timing_lines(d.name, run.by_device(d.name)):
                click.echo(ln, err=kw["output"] != "console")
    if kw.get("cost"):
        from .cost_report import echo_cost_tables
        echo_cost_tables(run, err=kw["output"] != "console")
    emit(run, kw["output"])
    write_reports(run, log_dir, summary_file, base)
    sys.exit(_Stdout.status(run.exit_status))


@cli.command()
@common_options
@click.option("--min-time", "min_seconds", type=float, default=1.0, show_default=True,
              help="Measure each case for at least this many seconds.")
@click.option("--threads", type=int, metavar="N", callback=at_least_one,
              help="ggml CPU threads in each worker; default: half the cores divided by -j, as "
                   "test-backend-ops runs its CPU backend (its us/run then compare).")
@click.option("--baseline", metavar="FILE",
              help="A previous perf run (its results JSON, or its per-result CSV): flag the cases "
                   "now slower by more than --threshold (exit status 1).")
@click.option("--threshold", "threshold_pct", type=float, default=10.0, show_default=True,
              help="Percent slower than the baseline that flags a case.")
@click.option("--markdown", is_flag=True,
              help="Print markdown tables to paste, per op: with --baseline, before / after / speed-up; "
                   "else the devices side by side.")
@click.option("--plot", "plot_path", metavar="FILE",
              help="Draw GB/s or GFLOPS per case, the devices side by side, to FILE (.svg, .png or .pdf).")
def perf(baseline, threshold_pct, markdown, plot_path, **kw):
    """Benchmark each case: runs, us/run, GFLOPS or GB/s; several devices side by side."""
    from .perf_report import (PLOT_FORMATS, PerfBaselineError, load_perf_baseline, markdown_side_by_side,
                              markdown_vs_baseline, plot_perf, side_by_side_lines, slower_lines,
                              slower_note, slower_than_baseline)
    if not (math.isfinite(threshold_pct) and threshold_pct >= 0):
        raise BadInput(f"--threshold must be at least 0 (got {threshold_pct:g})")
    check_seconds("--min-time", kw["min_seconds"])
    if markdown and kw["output"] != "console":
        raise BadInput(f"--markdown prints the tables: it cannot go with --output {kw['output']}")
    check_distinct_outputs({"--results": kw["results_path"] or kw["resume_path"], "--plot": plot_path})
    if plot_path is not None:
        if os.path.splitext(plot_path)[1].lower().lstrip(".") not in PLOT_FORMATS:
            raise BadInput(f"--plot {plot_path}: the file name must end in " + ", ".join(f".{f}" for f in PLOT_FORMATS))
        check_writable(plot_path)
    base = None
    if baseline is not None:
        try:
            base = load_perf_baseline(baseline)
        except PerfBaselineError as e:
            raise BadInput(str(e)) from None
    from .printers import QuietPrinter
    run = run_mode("perf", printer=QuietPrinter("perf") if markdown else None, **kw)
    slower = slower_than_baseline(run, base, threshold_pct) if base is not None else None
    if plot_path is not None:
        write_or_fail(plot_path, plot_perf, run, plot_path)
    if markdown:
        lines = markdown_vs_baseline(run, base) if base is not None else markdown_side_by_side(run)
        _Stdout.write(click.echo, "\n".join(lines).lstrip("\n"))
    elif kw["output"] == "console":
        lines = side_by_side_lines(run) + (slower_lines(slower, threshold_pct) if slower is not None else [])
        if lines:
            _Stdout.write(click.echo, "\n".join(lines))
    emit(run, kw["output"], slower)
    status = run.exit_status
    if status == 0 and slower:
        status = 1
        if markdown or kw["output"] != "console":   # the table of slower cases is not on stdout
            from click.core import ParameterSource
            default = click.get_current_context().get_parameter_source("threshold_pct") == ParameterSource.DEFAULT
            click.echo("\n".join(slower_note(slower, threshold_pct, default)), err=True)
    sys.exit(_Stdout.status(status))


@cli.command()
@selection_options
@output_option
@click.option("--results", "results_in", metavar="FILE",
              help="Classify this saved results file (of ops test, perf or support) instead of running.")
@click.option("--run", "compute", is_flag=True,
              help="Compute every case, as `ops test` does, so that failures count (exit status 1 "
                   "on a failing case); default: only ask each device whether it supports it.")
@click.option("--markdown", is_flag=True, help="Print the CI's markdown status report instead of the table.")
@click.option("--explain", is_flag=True,
              help="Print, per case, the CANN rule that accepts or refuses each op node: the aclnn "
                   "operators it runs, why it goes beyond ggml-cann, or why it is refused.")
@click.option("--from-gguf", "model", metavar="MODEL.gguf",
              help="Report on a model: per op of its forward pass (ops cases --from-gguf), the status, "
                   "its share of the FLOPs, the evidence, and whether the model runs on the device.")
@click.option("--batch", default="1,512", show_default=True, metavar="N,...",
              help="With --from-gguf: tokens per forward pass, a comma list.")
@click.option("--ctx", type=int, default=4096, show_default=True, callback=at_least_one,
              help="With --from-gguf: cells of the KV cache.")
@click.option("--no-flash-attn", "flash_attn", is_flag=True, flag_value=False, default=True,
              help="With --from-gguf: attention as llama.cpp builds it without flash attention (KQ, SOFT_MAX, KQV).")
@report_options
def support(output, results_in, compute, markdown, explain, log_dir, summary_file, baseline, model, batch, ctx,
            flash_attn, **kw):
    """Per-op status on each device: supported, partial, fail, unsupported, unknown."""
    from .printers import make_console
    from .support import print_support_table
    if markdown and output != "console":
        raise BadInput(f"--markdown prints the report: it cannot go with --output {output}")
    model_cases = None
    if model is not None:
        if kw["ops"] or kw["cases_file"] or results_in is not None or explain or markdown:
            raise BadInput("--from-gguf selects the model's cases: it cannot go with -o, --cases, --results, "
                           "--explain or --markdown")
        model_cases = _model_cases(model, batch, ctx, flash_attn)
        kw["ops"] = (",".join(mc.case.name for mc in model_cases),)
    if explain:
        _explain(results_in, compute, markdown, output, **kw)
        return
    if results_in is not None:
        given = [flag for flag, key in (("-o", "ops"), ("--cases", "cases_file"), ("-p", "params"),
                                        ("--sample", "sample"), ("-b", "backends"), ("--shard", "shard"))
                 if kw[key]] + (["--run"] if compute else [])
        if given:
            raise BadInput(f"--results classifies a saved file: {', '.join(given)} cannot go with it")
    # the results classified are read, not written: the report must not replace them either
    check_distinct_outputs({"--results": results_in, "--summary-file": summary_file}, log_dir)
    base = check_report_options(log_dir, summary_file, baseline, markdown, can_print=True)
    if results_in is not None:
        from .engine import load_run
        try:
            run = load_run(results_in)
        except ValueError as e:
            raise BadInput(str(e)) from None
    else:
        from .printers import QuietPrinter
        from .probe import cached_probe, remember
        if click.get_current_context().get_parameter_source("jobs") is click.core.ParameterSource.DEFAULT:
            kw["jobs"] = os.cpu_count() or 1   # a probe is short work per case: every core
        set_up_workers("support", kw["jobs"])
        run, known, cases = (None, None, None) if compute else cached_probe(**kw)
        if run is None:   # the cases not in the cache are probed (all of them with --run)
            mode = "test" if compute else "support"
            run = run_mode(mode, printer=QuietPrinter(mode), output="none", results_path=None, resumed=known,
                           cases=cases, **kw)
            if not compute:
                remember(run, known)
    if model_cases is not None and output == "console":
        from .model_report import report_lines
        _Stdout.write(click.echo, "\n".join(report_lines(run, model_cases, os.path.basename(model), compute)))
    elif output == "console" and not markdown:
        _Stdout.write(print_support_table, run, make_console())
    emit(run, output)
    write_reports(run, log_dir, summary_file, base, markdown)
    if results_in is None and run.interrupted:
        sys.exit(run.exit_status or 130)
    # probing finds no failures; computing does, and a failing case fails the command
    sys.exit(_Stdout.status(run.exit_status if compute else 0))


def _explain(results_in, compute, markdown, output, ops, params, backends, shard, soc=None, sample=None,
             cases_file=None, **_):
    """ops support --explain: the CANN rules' decision per case and op node (no probing:
    the rules are declarative, backend/cann/rules*.py)."""
    from cannops.backend.cann import rules
    if results_in is not None or compute or markdown or output != "console":
        raise BadInput("--explain prints the CANN rules per case: it goes with -o, -p, -b and --shard only")
    from cannops.backend.cann.soc import family
    from .options import use_socs
    socs = use_socs(soc) or [family(os.environ.get("CANN_SIM_SOC", ""))]
    targets = [t.label for t in selected_devices(backends) if t.label.startswith("CANN")]
    if not targets:
        raise BadInput("--explain: the rules are the CANN devices'; no CANN device selected "
                       "(see `ops list devices`)")
    click.echo(f"CANN rules ({', '.join(targets)}), as ggml-cann v0.20.2's supports_op unless said")
    tally: dict[tuple[str, str], dict[str, dict[str, int]]] = {}   # (soc, op) -> verdict -> level -> cases
    for _, case in checked_selection("support", selection_ops(ops, cases_file), params, shard, sample=sample):
        click.echo(case.name)
        graph = case.build()
        for s in socs:
            for line in rules.explain(graph, soc=s, op=case.op):
                click.echo(f"  {f'[{s}] ' if len(socs) > 1 else ''}{line}")
            verdict = rules.supports(graph, soc=s, op=case.op)
            levels = tally.setdefault((s, case.op), {}).setdefault("accepted" if verdict else "refused", {})
            levels[verdict.evidence] = levels.get(verdict.evidence, 0) + 1
    click.echo("")
    click.echo("Evidence per op (the level each verdict rests on: docs/socs.md#evidence):")
    for (s, op), verdicts in tally.items():
        click.echo(f"  {f'[{s}] ' if len(socs) > 1 else ''}{op}: " + "; ".join(
            f"{sum(levels.values())} {verdict} ("
            + ", ".join(f"{n} {level}" for level, n in levels.items()) + ")" for verdict, levels in verdicts.items()))


def _model_cases(model, batch, ctx, flash_attn=True):
    """The ModelCases of a GGUF (cases/from_model.py) at --batch and --ctx; bad input exits 2."""
    try:
        batches = [int(b) for b in batch.split(",") if b.strip()]
    except ValueError:
        batches = []
    if not batches or min(batches) < 1:
        raise BadInput(f"--batch {batch!r}: expected a comma list of token counts, e.g. 1,32,512")
    from cannops.cases.from_model import derive, read_gguf
    try:
        return derive(read_gguf(model), batches, ctx, flash_attn=flash_attn)
    except ValueError as e:
        raise BadInput(str(e)) from None


@cli.command()
@click.option("--from-gguf", "model", metavar="MODEL.gguf", required=True,
              help="The model: its metadata and tensor infos are read, not its weights.")
@click.option("--batch", default="1,512", show_default=True, metavar="N,...",
              help="Tokens per forward pass (ubatch), a comma list: 1 decodes, 512 is a prefill.")
@click.option("--ctx", type=int, default=4096, show_default=True, callback=at_least_one,
              help="Cells of the KV cache the attention reads.")
@click.option("--why", is_flag=True, help="After each name, how often a forward pass runs it and what for.")
@click.option("--no-flash-attn", "flash_attn", is_flag=True, flag_value=False, default=True,
              help="Attention as llama.cpp builds it without flash attention (KQ, SOFT_MAX, KQV).")
@catalog_option
def cases(model, batch, ctx, why, flash_attn):
    """The op cases a GGUF model's forward pass makes, as case names (one per line), for
    `ops test --cases FILE` (and perf, support)."""
    found = _model_cases(model, batch, ctx, flash_attn)
    lines = [f"{mc.case.name}\t# x{mc.count} at {mc.n_tokens} tokens: {', '.join(mc.roles)}" if why
             else mc.case.name for mc in found]
    _Stdout.write(click.echo, "\n".join(lines))
    sys.exit(_Stdout.status(0))


@cli.command()
@click.argument("args", nargs=-1, required=True, metavar="CASE... OUTDIR")
@click.option("-b", "device", metavar="DEVICE", required=True,
              help="The device: a CANN device (CANN-SIM, CANN0) or a ggml device (GGML-CPU, GGML-CANN0).")
@click.option("--after", metavar="CASE", multiple=True,
              help="A case to run before the others, on the same device (repeatable, in order): for a "
                   "fault that depends on what ran before.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the input data.")
@click.option("--name", "tensor_names", metavar="LEAF=NAME", multiple=True,
              help="Give the compared case's tensor LEAF the ggml name NAME (repeatable), e.g. "
                   "a=blk.0.attn_q.weight: a backend may treat tensors named like model weights otherwise.")
@catalog_option
def repro(args, device, after, seed, tensor_names):
    """Write a standalone reproducer of CASE on DEVICE into OUTDIR: inputs, reference and device
    outputs, the call trace, a README in the form of an upstream issue, and a C program with its
    Makefile (`make run`: exit 0 when the stored device outputs reproduce). Several cases run in
    order, the last compared."""
    from cannops.cases.untrusted import quoted

    from .engine import ReproSpec, write_repro
    if len(args) < 2:
        raise BadInput("ops repro: give CASE... and OUTDIR")
    check_seed("--seed", seed)
    renames = []
    for item in tensor_names:
        leaf, _, name = item.partition("=")
        if not leaf or not name or len(name.encode(errors="surrogateescape")) > 63:
            raise BadInput(f"--name takes LEAF=NAME, NAME at most 63 bytes (GGML_MAX_NAME), not {quoted(item, 80)}")
        try:
            item.encode()
        except UnicodeEncodeError:   # argv's bytes that are not UTF-8, decoded as surrogates
            raise BadInput(f"--name {quoted(item, 80)}: not UTF-8 text (a ggml name here is text)") from None
        renames.append((leaf, name))
    spec = ReproSpec(names=(*after, *args[:-1]), device=device, outdir=args[-1], seed=seed,
                     argv=tuple(sys.argv[1:]), tensor_names=tuple(renames))
    manifest = write_repro(spec, say=lambda line: click.echo(line, err=True))
    click.echo(f"{args[-1]}: {manifest['compared']} on {manifest['device']}: {manifest['status']}"
               + (f" ({manifest['reason']})" if manifest["reason"] else ""))
    click.echo(f"  cd {shlex.quote(args[-1])} && make && make run")


@cli.command("list")
@click.argument("what", type=click.Choice(["ops", "cases", "devices"]))
@click.option("-o", "ops", metavar="OPS", help="With `cases`: only these ops.")
@click.option("-p", "params", metavar="REGEX", help="With `cases`: only params matching REGEX.")
@sample_option
@click.option("--mode", type=click.Choice(["test", "support", "perf"]), default="test", show_default=True)
@catalog_option
@parts_option
def list_(what, ops, params, sample, mode, parts):
    """List the ops (or their parts), the cases or the devices."""
    if parts is not None:
        from .parts import print_parts
        return print_parts(what, parts, click.echo)
    elif what == "ops":
        from cannops.cases.cache import op_names
        click.echo("\n".join(op_names()))
    elif what == "cases":
        ops = ops_text((ops,)) if ops is not None else None
        picked = checked_selection(mode, ops, params, None, names_only=True, sample=sample)
        click.echo("\n".join(c.name for _, c in picked))
    else:
        from cannops.backend.base import device_details, list_devices, unavailable_reasons
        for name, desc in list_devices():
            click.echo(f"{name}\t{desc}")
            for line in device_details(name):
                click.echo(f"  {line}")
        from cannops.cases.versions import describe
        click.echo(f"catalog: {describe()}")
        for why in unavailable_reasons():
            click.echo(f"(unavailable) {why}", err=True)


@cli.command()
@click.argument("results", nargs=-1, required=True, metavar="RESULTS...")
@click.option("--out", "out_path", metavar="FILE", help="Write the merged results here (default: stdout).")
@click.option("--allow-partial", is_flag=True,
              help="Merge even when shards are missing; the merged run is then marked partial.")
def merge(results, out_path, allow_partial):
    """Combine the JSON results of shards (or of several devices) into one results file."""
    from .engine import load_run, merge_runs
    runs = []
    for path in results:
        try:
            runs.append(load_run(path))
        except ValueError as e:
            raise BadInput(str(e)) from None
    try:
        merged = merge_runs(runs, results, allow_partial)
    except ValueError as e:
        raise BadInput(str(e)) from None
    for path, run in zip(results, runs):
        if run.interrupted:
            click.echo(f"ops: warning: {path} is of an interrupted run: the cases it did not reach "
                       f"are missing, and the merged results are marked interrupted", err=True)
    if out_path:
        check_writable(out_path)
        write_or_fail(out_path, merged.write_json, out_path)
        for dev, c in merged.summary().items():
            _Stdout.write(click.echo, f"{dev}: {plural(c['total'], 'case')}, {c['OK']} OK, "
                                      f"{c['not supported']} not supported, {c['FAIL']} FAIL")
    else:
        from .printers import write_json
        _Stdout.write(write_json, merged, sys.stdout)
    sys.exit(_Stdout.status(0))


cli.add_command(bisect_command)


@cli.command()
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.option("-b", "devices", metavar="DEVICE[,DEVICE]",
              help="The device of each run to compare (one name for both, or OLD's,NEW's); default: "
                   "each run's first.")
@click.option("--all", "every", is_flag=True, help="List every case, not only those that changed.")
@click.option("--markdown", is_flag=True, help="Print markdown tables (a CI's step summary).")
@click.option("--output", type=click.Choice(["console", "csv"]), default="console", show_default=True,
              help="console, or csv on stdout: each op and case with both runs' figures.")
def diff(old, new, devices, every, markdown, output):
    """What a change did: two results files (ops test / perf / tbo) compared per op and per
    case: status, aclnn calls, kernels, bytes, syncs (counted on the simulator), est. µs, and
    us/run, GB/s, GFLOPS where both measured (docs/device-work.md)."""
    from .diff import run_diff
    lines = run_diff(old, new, devices, every, markdown, output, sys.stdout)
    if lines:
        _Stdout.write(click.echo, "\n".join(lines))
    sys.exit(_Stdout.status(0))


@cli.command()
@tbo_options
@click.option("--summary-file", metavar="FILE", help="Write the markdown status report to FILE.")
@click.option("--baseline", metavar="FILE",
              help="A previous report (markdown, ops' or the CI's) or results file: the report lists the "
                   "ops whose status changed.")
def tbo(summary_file, baseline, **kw):
    """Run a test-backend-ops BINARY op by op, as the Ascend CI does: an abort costs its
    case (FAIL, with the assert and the backtrace's head) and the op goes on after it."""
    from .tbo import TboOptions, run_binary
    check_distinct_outputs({"--results": kw["results_path"] or kw["resume_path"], "--summary-file": summary_file},
                           kw["log_dir"])
    base = check_report_options(None, summary_file, baseline)
    run, status = run_binary(TboOptions(**kw))
    if kw.get("cost"):
        from .cost_report import echo_cost_tables
        echo_cost_tables(run, err=kw["output"] != "console")
    emit(run, kw["output"])
    write_reports(run, None, summary_file, base)
    sys.exit(_Stdout.status(status))


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    if not argv:
        argv = ["--help"]  # `ops` alone: its help, as `ops --help`
    # a console that cannot show a character (✅ under LANG=C) gets a '?', not a traceback
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
    from cannops.cases.cache import ForeignFolder
    try:
        status = _command(argv, ForeignFolder)
    finally:
        _reap()
    try:
        sys.stdout.flush()   # here, not at exit: a reader gone after the last write is seen
    except BrokenPipeError:
        _Stdout.gone()
    sys.exit(_Stdout.status(status))


def _command(argv, ForeignFolder) -> int:
    """The command's exit status (its errors one line on stderr)."""
    try:
        rv = cli.main(args=argv, prog_name="ops", standalone_mode=False)
    except SystemExit as e:
        wrapped = getattr(sys.stdout, "wrapped", None)
        if wrapped is not None:
            # click met EPIPE in a command's plain writes (ops list, --help): it wraps the
            # streams and exits 1; the rule here is the one of every output
            sys.stdout, sys.stderr = wrapped, getattr(sys.stderr, "wrapped", sys.stderr)
            _Stdout.gone()
            return 0
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BrokenPipeError:
        _Stdout.gone()
        return 0
    except (BadInput, ForeignFolder) as e:
        click.echo(f"ops: error: {e}", err=True)
        return 2
    except click.exceptions.Exit as e:
        return e.exit_code
    except (click.Abort, KeyboardInterrupt):
        return 130
    except click.ClickException as e:
        click.echo(f"ops: error: {e.format_message()}", err=True)
        return 2
    return rv or 0


def _reap() -> None:
    """Whatever path `ops` leaves by, the processes it started are gone first (a command
    that started no worker never imported the module)."""
    workers = sys.modules.get(f"{__package__}.engine.forking")
    if workers is not None:
        # a second Ctrl-C while reaping must not leave the reaping half done
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            workers.reap_children()
        finally:
            signal.signal(signal.SIGINT, old)


if __name__ == "__main__":
    main()
