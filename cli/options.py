"""The options that `ops` commands share: their click declarations, the checks of their
values (a bad value is exit status 2 before anything runs) and the device selection."""
from __future__ import annotations

import math
import os
import re

import click

from . import plural
from .engine import BadInput, device_names, per_soc, select_cases, select_devices, split_ops_filter

OUTPUTS = ("console", "csv", "json", "junit")


def selected_devices(wanted, include_reference=False, soc=None):
    """The devices -b names, among those discovered (by default every one but NUMPY); with
    --soc, CANN-SIM simulates that SoC, or each of those SoCs as a device of its own; a SoC
    other than the default 910B is always named (CANN-SIM:310P), so that results, baselines
    and the notes of known deviations never mistake it for the 910B."""
    from cannops.backend.base import list_devices
    socs = use_socs(soc)
    targets = select_devices(wanted, list_devices(device_names(wanted)), include_reference)
    if not socs:
        return targets
    if not any(t.label == "CANN-SIM" for t in targets):   # else it would be silently ignored
        raise BadInput(f"--soc {soc}: only CANN-SIM simulates a SoC, and the devices selected are "
                       f"{', '.join(t.label for t in targets) or 'none'}")
    from cannops.backend.cann.soc import DEFAULT, SIMULATED
    if socs == [DEFAULT]:
        return targets
    return per_soc(targets, socs, SIMULATED)


def use_socs(soc):
    """--soc's families; one of them is CANN-SIM's SoC in this process and its workers (set
    before the devices are discovered: the simulator reads CANN_SIM_SOC when it starts)."""
    if soc is not None and not soc.strip():
        raise BadInput("--soc '' names no SoC: give 910B or 310P, or a comma list of them")
    if not soc and os.environ.get("CANN_SIM_SOC_EVIDENCE") != "pages":
        return []   # (and the CANN package is not imported for nothing)
    from cannops.backend.cann.soc import DEFAULT, SIMULATED, family, mode, parse
    try:
        socs = parse(soc) if soc else []
    except ValueError as e:
        raise BadInput(f"--soc: {e}") from None
    if mode() == "pages" and (socs or [family(os.environ.get("CANN_SIM_SOC", ""))]) == [DEFAULT]:
        raise BadInput("--soc-evidence pages: the pages decide only on the 310P: give --soc 310P")
    if not socs:
        return []
    if len(socs) == 1:
        os.environ["CANN_SIM_SOC"] = SIMULATED[socs[0]]
    return socs


def _apply(f, *options):
    """Decorate with `options` so that --help lists them in the order given."""
    for opt in reversed(options):
        f = opt(f)
    return f


def _use_catalog(ctx, param, value):
    from cannops.cases import versions
    try:
        versions.use(value)   # the workers inherit it (OPS_CATALOG)
    except ValueError as e:
        raise BadInput(f"--catalog: {e}") from None


def catalog_option(f):
    """--catalog VERSION: the catalog version in use (cases/versions.py), for this process
    and its workers; not passed to the command."""
    return click.option("--catalog", metavar="VERSION", expose_value=False, callback=_use_catalog,
                        help="The test-backend-ops version whose cases to use (0.20.2, 0.25.3); "
                             "default: that of the ggml the GGML devices run, the newest without one.")(f)


def _use_soc_evidence(ctx, param, value):
    if value is not None:
        from cannops.backend.cann.soc import use
        use(value)   # the workers and CANN-SIM inherit it (CANN_SIM_SOC_EVIDENCE)


soc_evidence_option = click.option(
    "--soc-evidence", type=click.Choice(("source", "pages")), expose_value=False, callback=_use_soc_evidence,
    help="How the 310P reads an aclnn page that does not offer it: source (default: the operator's "
         "source decides, as ggml-cann's 310P build assumes), or pages (the page decides: every such "
         "operator is refused, 561003, as a device without its kernel answers).")


def at_least_one(ctx, param, value):
    """A click callback: an int option, when given, is at least 1."""
    if value is not None and value < 1:
        raise BadInput(f"{param.opts[0]} must be at least 1 (got {value})")
    return value


MAX_REPEAT = 1000   # runs of one case: a determinism check wants a handful; 10^9 never ends


def repeat_count(ctx, param, value):
    """A click callback: --repeat N, 1 <= N <= MAX_REPEAT."""
    value = at_least_one(ctx, param, value)
    if value is not None and value > MAX_REPEAT:
        raise BadInput(f"{param.opts[0]} must be at most {MAX_REPEAT:,} (got {value:,})")
    return value


parts_option = click.option(
    "--parts", is_flag=False, flag_value="", default=None, metavar="[OPS]",
    help="With `ops`: where each part of these ops (a comma list; alone: every op) lives, by "
         "file and line: family, builder, reference, replay, rule, C handler, ... (cli/parts.py); "
         "exit status 1 where a part is missing.")

sample_option = click.option(
    "--sample", type=int, metavar="N", callback=at_least_one,
    help="At most N cases per op (after -o and -p), picked by a hash of the case name: the "
         "same ones in every run, and a grid growing elsewhere does not shift them.")


def selection_options(f):
    """What to run where: -o, -p, --sample, -b, -j, --timeout, --seed, --shard, --catalog."""
    return _apply(
        f, catalog_option,
        click.option("-o", "ops", metavar="OPS", multiple=True,
                     help="Op names or full case names (repeat or comma list), e.g. ADD,SSM_CONV."),
        click.option("--cases", "cases_file", metavar="FILE",
                     help="Run the cases named in FILE, one per line ('#' starts a comment), as "
                          "`ops cases --from-gguf MODEL` writes them; instead of -o."),
        click.option("-p", "params", metavar="REGEX", help="Keep cases whose params string matches REGEX."),
        sample_option,
        click.option("-b", "backends", metavar="DEVICE", multiple=True,
                     help="Device(s) to use (repeat or comma list); default: every device but NUMPY."),
        click.option("-j", "jobs", type=int, default=1, show_default=True, help="Worker processes."),
        click.option("--timeout", type=float, default=None,
                     help="Seconds a case may take before it is a FAIL (its worker is replaced); "
                          "default 60 (perf: 600, as one measurement repeats the op for 1 s or more; "
                          "grad: 900, as finite differences run the forward graph twice per "
                          "gradient element); ten times that on a simulated device (CANN-SIM)."),
        click.option("--seed", type=int, default=0, show_default=True, help="Seed of the input data."),
        click.option("--shard", metavar="K/N", help="Run the K-th of N deterministic slices of the cases."),
        click.option("--soc", metavar="SOC", help="The SoC CANN-SIM simulates: 910B (default) or 310P, "
                                                  "whose rules and aclnn tables follow; a comma list "
                                                  "(910B,310P) tests each as CANN-SIM:<SOC>."),
        soc_evidence_option)


def output_option(f):
    return click.option("--output", type=click.Choice(OUTPUTS), default="console", show_default=True,
                        help="console, or machine-readable on stdout: csv, json (the results file), "
                             "junit (JUnit XML, one testcase per case).")(f)


def common_options(f):
    return _apply(
        f, selection_options, output_option,
        click.option("--results", "results_path", metavar="FILE",
                     help="Also write the results as JSON to FILE (and, while running, each result "
                          "as it comes to FILE.partial.jsonl, for --resume)."),
        click.option("--resume", "resume_path", metavar="FILE",
                     help="Go on with the run that wrote FILE (its --results) and was interrupted or "
                          "killed: its finished cases are taken, not run again. --results defaults to FILE."))


def report_options(f):
    """The CI's instruments: per-op logs and the markdown status report."""
    return _apply(
        f,
        click.option("--log-dir", metavar="DIR", help="Write one log per op (its case lines and summary) to DIR/OP.log."),
        click.option("--summary-file", metavar="FILE",
                     help="Write the markdown status report to FILE (e.g. the CI's step summary); "
                          "its content is replaced only when it changed."),
        click.option("--baseline", metavar="FILE",
                     help="A previous report (markdown) or results file (JSON): the report then lists "
                          "the ops whose status changed, with the tail of each one's log."))


DEFAULT_TIMEOUT = {"test": 60.0, "support": 60.0, "perf": 600.0, "grad": 900.0}


MAX_SECONDS = 1e6  # a longer wait overflows the platform's timeouts


def check_seconds(flag, value):
    if not (math.isfinite(value) and 0 < value <= MAX_SECONDS):
        raise BadInput(f"{flag} must be a positive number of seconds, at most {MAX_SECONDS:g} (got {value:g})")


def check_seed(flag, value):
    if value < 0:
        raise BadInput(f"{flag} must be at least 0 (got {value})")


def check_common(jobs, timeout, seed):
    if jobs < 1:
        raise BadInput(f"-j must be at least 1 (got {jobs})")
    if timeout is not None:
        check_seconds("--timeout", timeout)
    check_seed("--seed", seed)


def worker_count(jobs: int, n_cases: int) -> int:
    """The workers -j asks for, no more than there are cases to run nor JOBS_PER_CORE per
    core (a note on stderr says so: -j 1000 spawned 1000 workers, heading for ~50 GB)."""
    from .engine import JOBS_PER_CORE
    cores = os.cpu_count() or 1
    cap = JOBS_PER_CORE * cores
    if jobs > cap:
        click.echo(f"ops: note: -j {jobs} capped at {cap} workers ({JOBS_PER_CORE} per core, "
                   f"{plural(cores, 'core')})", err=True)
    return max(1, min(jobs, cap, n_cases))


def ops_text(ops):
    """The -o values (repeatable, each a comma list) as one comma list; None when -o is not given."""
    if not ops:
        return None
    text = ",".join(ops)
    if not split_ops_filter(text):
        raise BadInput(f"-o {text!r} names no op: no case selected")
    return text


def _cases_file_lines(path):
    """The lines of a --cases file: a regular file, its size and lines bounded (cases/untrusted.py)."""
    from cannops.cases.untrusted import NotRegular, read_lines
    try:
        return read_lines(path)
    except OSError as e:
        raise BadInput(f"cannot read --cases {path}: {e.strerror or e}") from None
    except NotRegular as e:
        raise BadInput(f"--cases {e}") from None
    except ValueError as e:   # too large, a line too long, not UTF-8
        raise BadInput(f"--cases {path}: {e}") from None


def graph_file_cases(path, params=None, shard=None, sample=None):
    """The selection (position, Case) of a --cases file that test-export-graph-ops wrote
    (test-backend-ops' --test-file: a generic_op case per line, cases/graph_ops_file.py),
    after -p, --sample and --shard; None for a file of case names."""
    if path is None:
        return None
    lines = _cases_file_lines(path)
    from cannops.cases.graph_ops_file import is_graph_ops_file, read_graph_ops
    if not is_graph_ops_file(lines):
        return None
    from cannops.cases.versions import current
    from .engine import parse_shard, sample_per_op
    try:
        picked = [(None, c) for c in read_graph_ops(lines, current())]
    except ValueError as e:
        raise BadInput(f"--cases {path}: {e}") from None
    if params:
        check_regex(params)
        rx = re.compile(params)
        picked = [(pos, c) for pos, c in picked if rx.search(c.vars)]
    if sample is not None:
        picked = sample_per_op(picked, sample)
    selection = list(enumerate(c for _, c in picked))
    if shard:
        k, n = parse_shard(shard)
        selection = [(i, c) for i, c in selection if i % n == k - 1]
    if not selection and not shard:
        raise BadInput(f"no case selected from --cases {path}")
    return selection


def read_case_names(path):
    """The case names of a --cases file, one per line (blank lines and '#' comments
    skipped); None for a file test-export-graph-ops wrote (graph_file_cases reads it)."""
    lines = _cases_file_lines(path)
    from cannops.cases.graph_ops_file import is_graph_ops_file
    if is_graph_ops_file(lines):
        return None
    names = [line.split("#", 1)[0].strip() for line in lines]
    names = [n for n in names if n]
    bad = next((n for n in names if "(" not in n or not n.endswith(")")), None)
    if bad is not None:
        raise BadInput(f"--cases {path}: {bad[:60]!r} is not a case name OP(params) "
                       f"(nor is the file one test-export-graph-ops writes)")
    if not names:
        raise BadInput(f"--cases {path} names no case")
    return names


def selection_ops(ops, cases_file=None):
    """-o's values, or the names of a --cases file, as one comma list (None: every op)."""
    if cases_file is None:
        return ops_text(ops)
    if ops:
        raise BadInput("--cases names the cases: it cannot go with -o")
    names = read_case_names(cases_file)
    return None if names is None else ",".join(dict.fromkeys(names))   # None: graph_file_cases selects


def check_regex(params):
    if params is None:
        return
    try:
        re.compile(params)
    except (re.error, RecursionError, OverflowError) as e:
        why = e if isinstance(e, re.error) else "nested too deeply"
        raise BadInput(f"bad -p regex {params[:40]!r}{'...' if len(params) > 40 else ''}: {why}") from None


def checked_selection(mode, ops, params, shard, names_only=False, sample=None, refs=False):
    """The selected cases (names_only: their names; refs: references that workers build,
    see select_cases); an empty selection is an error (exit 2) that says why."""
    check_regex(params)
    cases = select_cases(mode, ops, params, shard, names_only, sample, refs)
    if cases:
        return cases
    if shard and select_cases(mode, ops, params, names_only=names_only, sample=sample):
        return cases  # a shard of a selection smaller than N may be empty
    if ops:
        from cannops.cases.cache import case_names
        has = {c.op for c in case_names(mode)}
        none = [op for op in split_ops_filter(ops) if "(" not in op and op not in has]
        if none:
            raise BadInput(f"no case selected: {', '.join(none)} {'has' if len(none) == 1 else 'have'} "
                           f"no {mode} cases")
    raise BadInput("no case selected" + (f": -p {params!r} matches none of the cases" if params else ""))


def open_journal(results_path):
    """The journal of a results file (engine/results.py Journal; None for no file, a FIFO or
    a device: /dev/null has no "beside"), locked from here to the results file's writing:
    one run per results file. Bad input where it is taken or cannot be written."""
    from .engine import Journal, JournalBusy, journal_path
    if not results_path or not (os.path.isfile(results_path) or not os.path.exists(results_path)):
        return None
    jpath = journal_path(results_path)
    try:
        return Journal(jpath)
    except JournalBusy as e:
        raise BadInput(str(e)) from None
    except OSError as e:
        raise BadInput(f"cannot write {jpath}: {e.strerror or e}") from None


def check_writable(path):
    """Fail early (exit 2) on an output path that cannot be written; leave no file behind."""
    if path is None:
        return
    existed = os.path.exists(path)
    if os.path.isdir(path):
        raise BadInput(f"cannot write {path}: it is a directory")
    if existed and not os.path.isfile(path):
        # a FIFO or a device: opening it here could block, or be its only reader's EOF
        if not os.access(path, os.W_OK):
            raise BadInput(f"cannot write {path}: permission denied")
        return
    try:
        with open(path, "a"):
            pass
    except OSError as e:
        raise BadInput(f"cannot write {path}: {e.strerror}") from None
    if not existed:   # (a dangling link's new target, not the link: the user's)
        os.remove(os.path.realpath(path))


def check_distinct_outputs(outputs: dict, log_dir=None) -> None:
    """Refuse, before anything runs, two options that would write one file (`outputs`:
    flag -> path or None; --results' journal, FILE.partial.jsonl, and --log-dir's DIR/OP.log
    files count): the second write replaced the first (--results X --summary-file X left
    the markdown report where the results were)."""
    from .engine import journal_path
    seen: dict = {}
    given = [(flag, path) for flag, path in outputs.items() if path is not None]
    if outputs.get("--results") is not None:
        given.append(("--results' journal", journal_path(outputs["--results"])))
    for flag, path in given:
        if log_dir is not None and path.endswith(".log") and _same_place(os.path.dirname(path) or ".", log_dir):
            raise BadInput(f"{flag} {path} is in --log-dir {log_dir}, where the logs are written: give it another name")
        key = _file_key(path)
        if key is None:
            continue
        if key in seen:
            raise BadInput(f"{seen[key]} and {flag} name one file ({path}): give each its own")
        seen[key] = flag


def _file_key(path):
    """What identifies the file a path writes: its inode where it exists (links, hard links),
    else its resolved path; None for a special file (a FIFO, /dev/null), which may take both."""
    try:
        st = os.stat(path)
    except OSError:
        return ("path", os.path.realpath(path))
    import stat
    return ("inode", st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _same_place(a, b) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def load_status_baseline(path):
    if path is None:
        return None
    from .report import BaselineError, load_baseline
    try:
        return load_baseline(path)
    except BaselineError as e:
        raise BadInput(str(e)) from None


def check_log_dir(path):
    if path is None:
        return
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
    base = load_status_baseline(baseline)
    check_writable(summary_file)
    check_log_dir(log_dir)
    return base
