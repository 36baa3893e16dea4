"""`ops fuzz`, the command: its options, the run over each device's worker pool, and what
it prints of each op's exploration (the exploration itself is cli/fuzz.py's)."""
from __future__ import annotations

import sys

import click

from . import plural
from .engine import BadInput, split_ops_filter
from .options import catalog_option, check_common, ops_text, selected_devices


@click.command()
@click.option("-o", "ops", metavar="OPS", multiple=True, required=True,
              help="Op names to explore (repeat or comma list), e.g. SSM_CONV.")
@click.option("-b", "backends", metavar="DEVICE", multiple=True,
              help="Device(s) to use (repeat or comma list); default: every device but NUMPY.")
@click.option("--examples", type=int, default=100, show_default=True,
              help="Cases to draw per op and device (before shrinking a failure).")
@click.option("--seed", type=int, default=None,
              help="Hypothesis' seed: the same seed draws the same cases; default: a random one, printed.")
@catalog_option
@click.option("--timeout", type=float, default=60.0, show_default=True,
              help="Seconds a case may take before it is a FAIL.")
def fuzz(ops, backends, examples, seed, timeout):
    """Draw cases around each op's grid (Hypothesis), run them as `ops test` does, and
    shrink a failure to a minimal case that `ops test -o 'NAME'` reproduces."""
    import random

    from cannops.cases.cache import op_names

    from .engine import RunSpec, WorkerPool, WorkerStartError, suggest
    from .fuzz import INPUT_SEED, Stop, cache_dir, fuzz as explore, stop_on_signals
    if examples < 1:
        raise BadInput(f"--examples must be at least 1 (got {examples})")
    check_common(1, timeout, 0 if seed is None else seed)
    known = op_names()
    names = split_ops_filter(ops_text(ops))
    for op in names:
        if op not in known:
            raise BadInput(f"unknown op {op!r}{suggest(op, known)}" +
                           (": ops fuzz takes op names; ops test -o runs a case" if "(" in op else ""))
    targets = selected_devices(backends)
    if not targets:
        raise BadInput("no device available (see `ops list devices`)")
    seed = random.randrange(2**31) if seed is None else seed
    say = click.echo
    failed = False
    say(f"Fuzzing {', '.join(names)} on {', '.join(t.label for t in targets)}: {plural(examples, 'example')} each, "
        f"--seed {seed} (examples database: {cache_dir()})")
    with stop_on_signals() as stopped:
        try:
            for target in targets:
                pool = WorkerPool(target, RunSpec(seed=INPUT_SEED, timeout=timeout, timeout_given=True))
                try:
                    try:
                        pool.start()
                    except WorkerStartError as e:
                        say(f"  {target.label}: skipped: {e}")
                        failed = True
                        continue
                    for op in names:
                        say("")
                        say(f"{op} on {target.label}:")
                        found = explore(op, pool, examples, seed, stopped=stopped,
                                        on_first=lambda r: say(f"  failing: {r.name}; shrinking it"))
                        failed |= _print_fuzz(found, say)
                        if found.interrupted:
                            raise Stop(found.interrupted)
                finally:
                    pool.close()
        except Stop as e:
            say("interrupted: the exploration stopped before its end; what it found is above")
            sys.exit(128 + e.signum)
    sys.exit(1 if failed else 0)


def _print_fuzz(found, say) -> bool:
    """The outcome of one op on one device; True when it failed."""
    counts = ", ".join(f"{n} {k}" for k, n in sorted(found.counts.items(), key=lambda kv: -kv[1]))
    if found.error:
        say(f"  {found.error}")
        return True
    if found.minimal is None:
        say(f"  no failure{' before the interrupt' if found.interrupted else ''} ({counts})")
        return False
    from .engine import worst_lines
    from .printers import ConsolePrinter
    ConsolePrinter("test").case(found.minimal)
    for line in worst_lines(found.minimal.worst):
        say(f"    {line}")
    from .fuzz import reproduce_env
    say(f"  reproduce: {reproduce_env(found.device)}ops test -b {found.device} -o '{found.minimal.name}'")
    say(f"  cases run while exploring and shrinking: {counts}")
    return True
