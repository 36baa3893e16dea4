"""`ops fuzz`: property-based exploration of an op's domain with Hypothesis.

The fixed grids of test-backend-ops miss shapes (odd sizes, other broadcast patterns); the
fuzzer draws cases around them. A family's domain is, by default, derived from its grid
points: a drawn grid point whose shape ints are replaced (each distinct value > 1 by a drawn
one, so that dims equal in the grid point stay equal), whose permutations are permuted and
whose other params (types, flags, modes) take any value the grid holds for them. A family
may declare a tighter domain (Family.fuzz_domain). A draw the family's build() refuses is
outside the domain (rejected, not a failure). Each case runs as `ops test` runs it, in a
worker process (a crash is a FAIL, the fuzzer goes on); a FAIL is shrunk by Hypothesis to a
minimal case, printed as a case line that `ops test -o 'NAME'` reproduces.
"""
from __future__ import annotations

import collections
import contextlib
import os
import signal
from dataclasses import dataclass, field

from cannops.cases.catalog import Case, Params
from cannops.cases.names import case_from_name, cases_by_op, printed_values

from .results import FAIL, CaseResult
from .workers import WorkerPool

MAX_BYTES = 64 << 20   # a drawn case's tensors: at most this, or 4x its grid point's
INPUT_SEED = 0         # the inputs of `ops test`'s default --seed: the case line reproduces as printed


class Failure(AssertionError):
    """A drawn case failed on the device (for Hypothesis to shrink)."""


class Stop(KeyboardInterrupt):
    """SIGINT or SIGTERM: a KeyboardInterrupt, which Hypothesis passes on (any Exception
    would be a failure to shrink)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals():
    """Ctrl-C and SIGTERM stop the exploration wherever it is: the first raises Stop, and
    so does every case drawn after it (should Hypothesis swallow one while shrinking).
    Yields a list that holds the signal number once one came."""
    got: list[int] = []

    def handler(signum, frame):
        got.append(signum)
        raise Stop(got[0])
    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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
    return isinstance(v, (list, tuple)) and _is_shape(v) and sorted(v) == list(range(len(v)))


def _remap(v, new: dict[int, int]):
    if isinstance(v, (list, tuple)):
        return type(v)(_remap(x, new) for x in v)
    return new.get(v, v)


def generic_domain(st, grid: list[Params]):
    """Params drawn around the grid points (see the module's docstring)."""
    seen = printed_values(grid)
    perms = {k for k in seen if all(_is_perm(p[k]) for p in grid if k in p)}
    shapes = {k for k in seen if k not in perms and all(_is_shape(p[k]) for p in grid if k in p)}

    @st.composite
    def draw(draw_):
        template = draw_(st.sampled_from(grid))
        dims = sorted({i for k in shapes if k in template for i in _ints(template[k]) if i > 1})
        # a drawn value for each distinct dim: 1 upward, so that a case shrinks to small shapes
        new = {i: draw_(st.integers(1, max(2 * i, 16)), label=f"dim {i}") for i in dims}
        params = {}
        for k, v in template.items():
            if k in perms:
                params[k] = type(v)(draw_(st.permutations(list(v))))
            elif k in shapes:
                params[k] = _remap(v, new)
            else:
                params[k] = draw_(st.sampled_from(list(seen[k].values())))
        return params
    return draw()


def reproduce_env(device: str) -> str:
    """The environment a case line needs to fail again as it did: the settings of a
    test device (FAULTY's planted faults), as `NAME=value ` prefixes."""
    import shlex
    if not device.startswith("FAULTY"):
        return ""
    return "".join(f"{k}={shlex.quote(v)} " for k, v in sorted(os.environ.items()) if k.startswith("OPS_FAULTY"))


def graph_bytes(g) -> int:
    return sum(t.nbytes() for t in g.tensors if not t.is_view())


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
    strategies = [st.tuples(st.just(fam), fam.fuzz_domain(st) if fam.fuzz_domain else generic_domain(st, points))
                  for fam, points in grids.values()]
    sizes = {name: max(graph_bytes(Case(fam, p).build()) for p in points) for name, (fam, points) in grids.items()}
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
        if graph_bytes(g) > max(MAX_BYTES, 4 * grid_bytes[fam.name]):
            outside("too large")
        try:
            named = case_from_name(case.name)
        except ValueError:
            named = None
        if named is None or named.params != case.params:
            outside("its name does not give it back")
        out.names.append(case.name)
        _, result = next(pool.run([(0, case)], "test", INPUT_SEED))
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
