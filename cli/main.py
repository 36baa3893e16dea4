"""`ops`: test, benchmark and chart ggml operator cases on CANN, ggml devices and NumPy."""
from __future__ import annotations

import sys

import click

from . import __version__
from .printers import ConsolePrinter, QuietPrinter, write_csv, write_json
from .results import Run
from .runner import Options, execute
from .selection import BadInput, select_cases, select_devices

OUTPUTS = ("console", "csv", "json", "junit")


def _devices(wanted, include_reference=False):
    from cannops.backend.base import list_devices
    return select_devices(wanted, list_devices(), include_reference)


def selection_options(f):
    """What to run where: -o, -p, -b, -j, --timeout, --seed, --shard."""
    f = click.option("-o", "ops", metavar="OPS", help="Comma list of op names or full case names, e.g. ADD,SSM_CONV.")(f)
    f = click.option("-p", "params", metavar="REGEX", help="Keep cases whose params string matches REGEX.")(f)
    f = click.option("-b", "backends", metavar="DEVICE", multiple=True,
                     help="Device(s) to use (repeat or comma list); default: every device but NUMPY.")(f)
    f = click.option("-j", "jobs", type=int, default=1, show_default=True, help="Worker processes.")(f)
    f = click.option("--timeout", type=float, default=None,
                     help="Seconds a case may take before it is a FAIL (its worker is replaced); "
                          "default 60 (perf: 600, as one measurement repeats the op for 1 s or more).")(f)
    f = click.option("--seed", type=int, default=0, show_default=True, help="Seed of the input data.")(f)
    f = click.option("--shard", metavar="K/N", help="Run the K-th of N deterministic slices of the cases.")(f)
    return f


def output_option(f):
    return click.option("--output", type=click.Choice(OUTPUTS), default="console", show_default=True,
                        help="console, or machine-readable on stdout: csv, json (the results file), "
                             "junit (JUnit XML, one testcase per case).")(f)


def common_options(f):
    f = selection_options(f)
    f = output_option(f)
    f = click.option("--results", "results_path", metavar="FILE", help="Also write the results as JSON to FILE.")(f)
    return f


def report_options(f):
    """The CI's instruments: per-op logs and the markdown status report."""
    f = click.option("--log-dir", metavar="DIR", help="Write one log per op (its case lines and summary) to DIR/OP.log.")(f)
    f = click.option("--summary-file", metavar="FILE",
                     help="Write the markdown status report to FILE (e.g. the CI's step summary); "
                          "its content is replaced only when it changed.")(f)
    f = click.option("--baseline", metavar="FILE",
                     help="A previous report (markdown) or results file (JSON): the report then lists "
                          "the ops whose status changed, with the tail of each one's log.")(f)
    return f


DEFAULT_TIMEOUT = {"test": 60.0, "support": 60.0, "perf": 600.0, "grad": 300.0}


def _check_common(jobs, timeout):
    if jobs < 1:
        raise BadInput(f"-j must be at least 1 (got {jobs})")
    if timeout is not None and timeout <= 0:
        raise BadInput(f"--timeout must be positive (got {timeout:g})")


def _check_writable(path):
    """Fail early (exit 2) on an output path that cannot be written; leave no file behind."""
    if path is None:
        return
    import os
    existed = os.path.exists(path)
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror}") from None
    if not existed:
        os.remove(path)


def run_mode(mode, ops, params, backends, jobs, timeout, seed, shard, output, results_path,
             min_seconds=1.0, printer=None) -> Run:
    """Run the cases; write the results file. The caller emits the machine-readable output."""
    _check_common(jobs, timeout)
    timeout = timeout or DEFAULT_TIMEOUT[mode]
    _check_writable(results_path)
    cases = select_cases("support" if mode == "support" else mode, ops, params, shard)
    devices = _devices(backends)
    if not devices:
        raise BadInput("no device available (see `ops list devices`)")
    opts = Options(mode=mode, jobs=jobs, timeout=timeout, seed=seed, min_seconds=min_seconds,
                   ops_filter=ops, params_filter=params, shard=shard)
    if printer is None:
        printer = ConsolePrinter(mode) if output == "console" else QuietPrinter(mode)
    run = execute(cases, devices, opts, printer)
    if results_path:
        run.write_json(results_path)
    return run


def emit(run: Run, output: str, slower=None) -> None:
    """The machine-readable forms on stdout (nothing for the console: it printed as it ran)."""
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


def _load_status_baseline(path):
    if path is None:
        return None
    from .report import BaselineError, load_baseline
    try:
        return load_baseline(path)
    except BaselineError as e:
        raise BadInput(str(e)) from None


def _check_log_dir(path):
    if path is None:
        return
    import os
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create --log-dir {path}: {e.strerror}") from None
    if not os.access(path, os.W_OK):
        raise BadInput(f"cannot write to --log-dir {path}")


def check_report_options(log_dir, summary_file, baseline, markdown=False, can_print=False):
    """Validate before running anything: a bad baseline is found in a second, not after
    an hour of cases. Returns the loaded baseline (or None)."""
    if baseline is not None and summary_file is None and not markdown:
        raise BadInput("--baseline compares status reports: give --summary-file FILE"
                       + (" or --markdown" if can_print else "") + " too")
    base = _load_status_baseline(baseline)
    _check_writable(summary_file)
    _check_log_dir(log_dir)
    return base


def write_reports(run: Run, log_dir, summary_file, base, markdown=False) -> None:
    from .report import markdown_report, write_if_changed, write_logs
    if log_dir:
        write_logs(run, log_dir)
    if summary_file or markdown:
        text = markdown_report(run, base)
        if summary_file:
            write_if_changed(summary_file, text)
        if markdown:
            sys.stdout.write(text)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ops")
def cli():
    """Check, benchmark and chart ggml operator cases on CANN (aclnn), ggml devices and NumPy."""


@cli.command()
@common_options
@report_options
def test(log_dir, summary_file, baseline, **kw):
    """Compare every case with the NumPy reference: OK / not supported / FAIL."""
    base = check_report_options(log_dir, summary_file, baseline)
    run = run_mode("test", **kw)
    emit(run, kw["output"])
    write_reports(run, log_dir, summary_file, base)
    sys.exit(run.exit_status)


@cli.command()
@common_options
@report_options
def grad(log_dir, summary_file, baseline, **kw):
    """Check each case's gradients: backprop (libggml's backward graph) against finite
    differences on the device, as test-backend-ops' grad mode: OK / not supported / FAIL."""
    base = check_report_options(log_dir, summary_file, baseline)
    run = run_mode("grad", **kw)
    emit(run, kw["output"])
    write_reports(run, log_dir, summary_file, base)
    sys.exit(run.exit_status)


@cli.command()
@common_options
@click.option("--min-time", "min_seconds", type=float, default=1.0, show_default=True,
              help="Measure each case for at least this many seconds.")
@click.option("--baseline", metavar="FILE",
              help="A previous perf run (its results JSON, or its per-result CSV): flag the cases "
                   "now slower by more than --threshold (exit status 1).")
@click.option("--threshold", "threshold_pct", type=float, default=10.0, show_default=True,
              help="Percent slower than the baseline that flags a case.")
def perf(baseline, threshold_pct, **kw):
    """Benchmark each case: runs, us/run, GFLOPS or GB/s; several devices side by side."""
    from .perf_report import (PerfBaselineError, load_perf_baseline, side_by_side_lines, slower_lines,
                              slower_than_baseline)
    if threshold_pct < 0:
        raise BadInput(f"--threshold must be at least 0 (got {threshold_pct:g})")
    if kw["min_seconds"] <= 0:
        raise BadInput(f"--min-time must be positive (got {kw['min_seconds']:g})")
    base = None
    if baseline is not None:
        try:
            base = load_perf_baseline(baseline)
        except PerfBaselineError as e:
            raise BadInput(str(e)) from None
    run = run_mode("perf", **kw)
    slower = slower_than_baseline(run, base, threshold_pct) if base is not None else None
    if kw["output"] == "console":
        lines = side_by_side_lines(run) + (slower_lines(slower, threshold_pct) if slower is not None else [])
        if lines:
            click.echo("\n".join(lines))
    emit(run, kw["output"], slower)
    status = run.exit_status
    if status == 0 and slower:
        status = 1
    sys.exit(status)


@cli.command()
@selection_options
@output_option
@click.option("--results", "results_in", metavar="FILE",
              help="Classify this saved results file (of ops test, perf or support) instead of running.")
@click.option("--run", "compute", is_flag=True,
              help="Compute every case, as `ops test` does, so that failures count (exit status 1 "
                   "on a failing case); default: only ask each device whether it supports it.")
@click.option("--markdown", is_flag=True, help="Print the CI's markdown status report instead of the table.")
@report_options
def support(output, results_in, compute, markdown, log_dir, summary_file, baseline, **kw):
    """Per-op status on each device: supported, partial, fail, unsupported, unknown."""
    from .printers import make_console
    from .support import print_support_table
    if markdown and output != "console":
        raise BadInput(f"--markdown prints the report: it cannot go with --output {output}")
    if results_in is not None:
        given = [flag for flag, key in (("-o", "ops"), ("-p", "params"), ("-b", "backends"), ("--shard", "shard"))
                 if kw[key]] + (["--run"] if compute else [])
        if given:
            raise BadInput(f"--results classifies a saved file: {', '.join(given)} cannot go with it")
    base = check_report_options(log_dir, summary_file, baseline, markdown, can_print=True)
    if results_in is not None:
        from .results import load_run
        try:
            run = load_run(results_in)
        except ValueError as e:
            raise BadInput(str(e)) from None
    else:
        mode = "test" if compute else "support"
        run = run_mode(mode, printer=QuietPrinter(mode), output="none", results_path=None, **kw)
    if output == "console" and not markdown:
        print_support_table(run, make_console())
    emit(run, output)
    write_reports(run, log_dir, summary_file, base, markdown)
    if results_in is None and run.interrupted:
        sys.exit(run.exit_status or 130)
    # probing finds no failures; computing does, and a failing case fails the command
    sys.exit(run.exit_status if compute else 0)


@cli.command("list")
@click.argument("what", type=click.Choice(["ops", "cases", "devices"]))
@click.option("-o", "ops", metavar="OPS", help="With `cases`: only these ops.")
@click.option("-p", "params", metavar="REGEX", help="With `cases`: only params matching REGEX.")
@click.option("--mode", type=click.Choice(["test", "support", "perf"]), default="test", show_default=True)
def list_(what, ops, params, mode):
    """List the ops, the cases or the devices."""
    if what == "ops":
        from cannops.cases.catalog import all_op_names
        click.echo("\n".join(all_op_names()))
    elif what == "cases":
        click.echo("\n".join(c.name for _, c in select_cases(mode, ops, params)))
    else:
        from cannops.backend.base import list_devices, unavailable_reasons
        for name, desc in list_devices():
            click.echo(f"{name}\t{desc}")
        for why in unavailable_reasons():
            click.echo(f"(unavailable) {why}", err=True)


@cli.command()
@click.argument("results", nargs=-1, required=True, metavar="RESULTS...")
@click.option("--out", "out_path", metavar="FILE", help="Write the merged results here (default: stdout).")
def merge(results, out_path):
    """Combine the JSON results of shards (or of several devices) into one results file."""
    from .results import load_run, merge_runs
    runs = []
    for path in results:
        try:
            runs.append(load_run(path))
        except ValueError as e:
            raise BadInput(str(e)) from None
    try:
        merged = merge_runs(runs)
    except ValueError as e:
        raise BadInput(str(e)) from None
    if out_path:
        _check_writable(out_path)
        merged.write_json(out_path)
        for dev, c in merged.summary().items():
            click.echo(f"{dev}: {c['total']} cases, {c['OK']} OK, {c['not supported']} not supported, "
                       f"{c['FAIL']} FAIL")
    else:
        write_json(merged, sys.stdout)


def main(argv=None):
    try:
        rv = cli.main(args=argv, prog_name="ops", standalone_mode=False)
    except BadInput as e:
        click.echo(f"ops: error: {e}", err=True)
        sys.exit(2)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.Abort:
        sys.exit(130)
    except click.ClickException as e:
        click.echo(f"ops: error: {e.format_message()}", err=True)
        sys.exit(2)
    sys.exit(rv or 0)


if __name__ == "__main__":
    main()
