"""`ops fuzz`: property-based exploration of an op's domain with Hypothesis.

The fixed grids of test-backend-ops miss shapes (odd sizes, other broadcast patterns); the
fuzzer draws cases around them. A family's domain is, by default, derived from its grid
points: a drawn grid point whose dims are replaced (each distinct value > 1 by a drawn one,
so that dims equal in the grid point stay equal; a row in whole blocks of its types), whose
permutations are swapped and whose other params (types, flags, modes) take any value the
grid holds for them (generic_domain). A family may declare a tighter domain
(Family.fuzz_domain). The rules of the domain are those of `ops test -o NAME` off the grid:
the graph model's (graph.check_shape: ggml_new_tensor's) and the family's build() (its
test struct's asserts); a draw they refuse is outside the domain (rejected, not a failure).
Each case runs as `ops test` runs it, in a worker process (a crash is a FAIL, the fuzzer
goes on); a FAIL is shrunk by Hypothesis to a minimal case, printed as a case line that
`ops test -o 'NAME'` reproduces.
"""
from __future__ import annotations

import collections
import contextlib
import math
import os
import signal
import sys
from dataclasses import dataclass, field

from cannops.cases.catalog import Case, Params
from cannops.cases.names import case_from_name, cases_by_op, printed_values
from cannops.cases.types import TYPES, ggml_type

from .engine import FAIL, CaseResult, WorkerPool

# a drawn case's tensors, counted as f32 (what the reference and a quantizer cost grows with
# elements, not packed bytes): at most this, or the family's largest grid point (an iq3_xxs
# MUL_MAT of 2.5 times that took 160 s on a loaded machine: a timeout, not a fault)
MAX_BYTES = 64 << 20
INPUT_SEED = 0         # the inputs of `ops test`'s default --seed: the case line reproduces as printed


class Failure(AssertionError):
    """A drawn case failed on the device (for Hypothesis to shrink)."""


class Stop(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP: a KeyboardInterrupt, which Hypothesis passes on (any Exception
    would be a failure to shrink)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals():
    """Ctrl-C and SIGTERM stop the exploration wherever it is: the first raises Stop, and
    so does every case drawn after it (should Hypothesis swallow one while shrinking, or
    should it come while a gc callback runs, which Python reports as unraisable: that
    report is dropped). Yields a list that holds the signal number once one came."""
    got: list[int] = []

    def handler(signum, frame):
        got.append(signum)
        raise Stop(got[0])

    old_hook = sys.unraisablehook

    def unraisable(info):
        if not isinstance(info.exc_value, Stop):
            old_hook(info)
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    sys.unraisablehook = unraisable
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        sys.unraisablehook = old_hook


def cache_dir() -> str:
    """Hypothesis' directory (its examples database, its caches): the user's cache, never
    the working tree (Hypothesis' default is ./.hypothesis)."""
    import platformdirs
    return os.path.join(platformdirs.user_cache_dir("ops"), "hypothesis")


def _ints(v) -> list[int]:
    """The ints in a (nested) list param."""
    if isinstance(v, (list, tuple)):
        return [i for x in v for i in _ints(x)]
    return [v] if type(v) is int else []


def _is_shape(v) -> bool:
    """A (nested) list whose leaves are all ints: shapes, strides, repeats."""
    if isinstance(v, (list, tuple)):
        return bool(v) and all(_is_shape(x) for x in v)
    return type(v) is int


def _is_perm(v) -> bool:
    """A permutation of axes, or all zeros (CPY's 'no permutation')."""
    return (isinstance(v, (list, tuple)) and _is_shape(v)
            and (sorted(v) == list(range(len(v))) or not any(v)))


def _remap(v, new: dict[int, int]):
    if isinstance(v, (list, tuple)):
        return type(v)(_remap(x, new) for x in v)
    return new.get(v, v)


def _swaps(n: int, fixed: set[int]) -> list[list[int]]:
    """The permutations of n axes that swap two of them, none of `fixed`."""
    out = []
    for i in range(n):
        for j in range(i + 1, n):
            if i not in fixed and j not in fixed:
                p = list(range(n))
                p[i], p[j] = j, i
                out.append(p)
    return out


def generic_domain(st, family, grid: list[Params], graphs: list):
    """Params drawn around the grid points (see the module's docstring; `graphs`: the grid
    points built), inside what ggml's constructors take, so that few draws are wasted:
    - a row (ne[0] of a tensor allocated) is drawn in whole blocks of the block types
      drawn; a grid point with a row of 1, which no block type fills, keeps to types of
      blocks of 1 (graph.check_shape is the rule); a size an int param gives stays even
      where it is even (ROPE's n_dims rotates pairs);
    - an int param is a dim when most of its grid values are a dim of their grid point's
      tensors (ROPE's n_dims); any other (ROPE's mode, a conv's padding) takes the values
      the grid holds, as types and flags;
    - a permutation is one the grid holds or a swap of two axes, never of an axis every
      grid point keeps in place (test_mul_mat's dim 0), nor of axis 0 under a block type;
    - types, flags and modes drawn from the whole grid that the family's build() refuses
      together (SOFT_MAX's ALiBi without a mask) are the grid point's own; those the case
      name does not print are the ones its name gives back."""
    seen = printed_values(grid)
    perms = {k for k in seen if all(_is_perm(p[k]) for p in grid if k in p)}
    ne_of = [{n for t in g.tensors for n in t.ne} for g in graphs]
    shapes = {k for k in seen if k not in perms and all(_is_shape(p[k]) for p in grid if k in p)}
    for k in [k for k in shapes if all(type(p[k]) is int for p in grid if k in p)]:
        as_dim = [p[k] in ne for p, ne in zip(grid, ne_of) if k in p and p[k] > 1]
        if as_dim and sum(as_dim) * 2 <= len(as_dim):
            shapes.discard(k)
    types = {k for k, vals in seen.items() if all(isinstance(v, str) and v in TYPES for v in vals.values())}
    kept = {k: {i for i in range(max(len(p[k]) for p in grid if k in p))
                if all(not any(p[k]) or p[k][i] == i for p in grid if k in p)} for k in perms}
    rows = [{t.ne[0] for t in g.tensors if not t.is_view()} for g in graphs]
    # params the case name does not print (the op of a binary family, ADD's inplace): those
    # of the case the name gives back (names.case_from_name)
    hidden = set(seen) - set(family.vars) if isinstance(family.vars, tuple) else set()

    @st.composite
    def draw(draw_):
        at = draw_(st.integers(0, len(grid) - 1))
        template, row = grid[at], rows[at]
        dims = sorted({i for k in shapes if k in template for i in _ints(template[k]) if i > 1})
        scalars = {template[k] for k in shapes if type(template.get(k)) is int}
        # a drawn value for each distinct dim: 1 upward, so that a case shrinks to small shapes
        drawn = {i: draw_(st.integers(1, max(2 * i, 16)), label=f"dim {i}") for i in dims}
        params = {}
        for k, v in template.items():
            if k in perms or k in shapes:
                continue
            values = [v] if k in hidden else list(seen[k].values())
            if k in types and 1 in row:
                values = [t for t in values if ggml_type(t).blck_size == 1] or [v]
            params[k] = draw_(st.sampled_from(values))
        # rows hold whole blocks of each drawn type: rounded up to them
        block = math.lcm(1, *(ggml_type(params[k]).blck_size for k in types if k in params))
        # a size an int param gives (ROPE's n_dims, MUL_MAT's k) stays even where it is even
        step = {i: math.lcm(block if i in row else 1, 2 if i % 2 == 0 and i in scalars else 1) for i in drawn}
        new = {i: -(-n // step[i]) * step[i] for i, n in drawn.items()}
        for k, v in template.items():
            if k in perms:
                fixed = kept[k] | ({0} if block > 1 else set())
                choices = [p for p in map(list, seen[k].values()) if not any(p) or
                           all(p[i] == i for i in fixed)] + _swaps(len(v), fixed)
                params[k] = type(v)(draw_(st.sampled_from(sorted({tuple(p) for p in choices}))))
            elif k in shapes:
                params[k] = _remap(v, new)
        params = {k: params[k] for k in template}
        if not _builds(family, params):
            params.update({k: template[k] for k in template if k not in perms and k not in shapes
                           and k not in types})
            if not _builds(family, params):
                return params   # outside the domain: explore() rejects it
        if hidden:
            try:
                named = case_from_name(Case(family, params).name)
            except ValueError:
                return params
            if named.family is family:
                params.update({k: named.params[k] for k in hidden})
        return params
    return draw()


def _builds(family, params) -> bool:
    try:
        Case(family, params).build()
        return True
    except Exception:   # the family's own validation: an assert, a ValueError
        return False


def reproduce_env(device: str) -> str:
    """The environment a case line needs to fail again as it did: the settings of a
    test device (FAULTY's planted faults), as `NAME=value ` prefixes."""
    import shlex
    if not device.startswith("FAULTY"):
        return ""
    return "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(os.environ.items()) if k.startswith("OPS_FAULTY"))


def graph_bytes(g) -> int:
    return 4 * sum(t.nelements() for t in g.tensors if not t.is_view())


@dataclass
class FuzzOutcome:
    op: str
    device: str
    counts: collections.Counter = field(default_factory=collections.Counter)
    first: CaseResult | None = None     # the first failure found
    minimal: CaseResult | None = None   # the same failure, shrunk
    error: str = ""                     # why nothing could be explored
    interrupted: int = 0                # the signal that stopped the exploration
    names: list[str] = field(default_factory=list)   # the cases run, in order


def domain(st, op: str):
    """(a strategy of (family, params) over every family that makes `op` cases, family name
    -> bytes of its largest grid point)."""
    grids: dict[str, tuple] = {}
    for c in cases_by_op("test").get(op, []):
        grids.setdefault(c.family.name, (c.family, []))[1].append(c.params)
    if not grids:
        raise ValueError(f"{op} has no test cases")
    strategies, sizes = [], {}
    for name, (fam, points) in grids.items():
        graphs = [Case(fam, p).build() for p in points]
        sizes[name] = max(map(graph_bytes, graphs))
        strategies.append(st.tuples(st.just(fam), fam.fuzz_domain(st) if fam.fuzz_domain
                                    else generic_domain(st, fam, points, graphs)))
    return st.one_of(strategies), sizes


def fuzz(op: str, pool: WorkerPool, examples: int, seed: int, on_first=None, stopped=()) -> FuzzOutcome:
    """Explore `op` on the pool's device; shrink the first failure found. `stopped` (of
    stop_on_signals): once it holds a signal, no further case runs."""
    import hypothesis
    from hypothesis import HealthCheck, Verbosity, given, reject, settings
    from hypothesis import strategies as st
    from hypothesis.configuration import set_hypothesis_home_dir
    from hypothesis.database import DirectoryBasedExampleDatabase

    set_hypothesis_home_dir(cache_dir())
    out = FuzzOutcome(op, pool.device_name)
    try:
        strategy, grid_bytes = domain(st, op)
    except ValueError as e:
        out.error = str(e)
        return out
    failures: list[CaseResult] = []

    def outside(why: str):
        out.counts[f"outside the domain ({why})"] += 1
        reject()

    @settings(max_examples=examples, deadline=None, derandomize=False, verbosity=Verbosity.quiet,
              database=DirectoryBasedExampleDatabase(os.path.join(cache_dir(), "examples", f"{op}-{pool.device_name}")),
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False, print_blob=False)
    @hypothesis.seed(seed)
    @given(strategy)
    def explore(drawn):
        if stopped:
            raise Stop(stopped[0])
        fam, params = drawn
        try:
            case = Case(fam, params)
            g = case.build()
        except Exception:   # the family's own validation: an assert, a ValueError
            outside("build refused it")
        if case.op != op:
            outside("another op")
        if graph_bytes(g) > max(MAX_BYTES, grid_bytes[fam.name]):
            outside("too large")
        try:
            named = case_from_name(case.name)
        except ValueError:
            named = None
        if named is None or named.params != case.params:
            outside("its name does not give it back")
        out.names.append(case.name)
        result = next(pool.run([(0, case)])).result
        out.counts[result.status] += 1
        if result.status == FAIL:
            if not failures and on_first:
                on_first(result)
            failures.append(result)
            raise Failure(result.reason)

    try:
        explore()
    except Stop as e:
        out.interrupted = e.signum
        if failures:   # the smallest failure so far
            out.first, out.minimal = failures[0], failures[-1]
    except Failure:
        # Hypothesis replays the minimal failing example last, to raise its error
        out.first, out.minimal = failures[0], failures[-1]
    except hypothesis.errors.Unsatisfiable:
        out.error = f"no case of {op} drawn was inside its domain (" + ", ".join(
            f"{n} {k}" for k, n in out.counts.items()) + ")"
    if stopped and not out.interrupted:
        out.interrupted = stopped[0]   # a signal Hypothesis took as the end of its shrinking
    return out
