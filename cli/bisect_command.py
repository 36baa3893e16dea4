"""`ops bisect`'s options; the work is in cli/bisect.py, imported when the command runs
(`ops --help` and the other commands stay free of it)."""
from __future__ import annotations

import sys

import click


@click.command("bisect")
@click.argument("src", metavar="SRC")
@click.argument("old", metavar="OLD")
@click.argument("new", metavar="NEW")
@click.argument("cases", nargs=-1, metavar="[CASE]...")
@click.option("-o", "op", metavar="OP", help="Instead of CASEs: every case of OP (test-backend-ops' -o).")
@click.option("-p", "pattern", metavar="REGEX", help="With -o: only the cases whose params match REGEX.")
@click.option("--fixed", is_flag=True, help="Find the commit that fixed the cases: they fail at OLD and pass at NEW.")
@click.option("--variant", default="910B", show_default=True, help="The simulated toolkit's variant built each step.")
@click.option("-b", "device", default="CANN0", show_default=True, help="The device test-backend-ops runs the cases on.")
@click.option("--timeout", type=float, default=600.0, show_default=True,
              help="Seconds one test-backend-ops run may take (then the step is bad: it hung).")
@click.option("--work-bound", "work_bound", metavar="FIELD>N",
              help="Judge by counted device work instead of OK/FAIL: a step is bad where a case's FIELD "
                   "(calls, kernels, bytes, syncs, ...: docs/bisect.md) is above N, e.g. calls>3.")
@click.option("--path", "paths", metavar="PATH", multiple=True,
              help="Only commits that touch PATH are steps (repeatable), e.g. src/ggml-cann or ggml/src/ggml-cann.")
@click.option("--work", "work_root", metavar="DIR", default=None,
              help="Where the private clone, the build and the state live (default: build/bisect of this checkout).")
def bisect_command(src, old, new, cases, **options):
    """Find the commit of a ggml or llama.cpp checkout SRC, between OLD (the cases pass) and
    NEW (one fails), that broke the cases on ggml-cann, each step built on the simulated
    CANN toolkit; with --fixed, the commit that fixed them. Your checkout is never touched."""
    from .bisect import run_bisect
    sys.exit(run_bisect(src, old, new, cases, options))
