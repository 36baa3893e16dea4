"""The case catalog: one declarative `Family` entry per test-backend-ops test struct.

A family knows its case grids (eval and perf), how to build a case's graph, how its
`vars` string is written, how inputs are initialised, how results are compared and what
a run costs in flops / bytes. A `Case` is one point of a grid: (family, params).
"""
from __future__ import annotations

import dataclasses
import functools
import sys
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from .graph import Graph, Tensor
from .inputs import init_leaf
from .plugins import load_plugins
from .types import GGMLType
from .versions import at_or_after, current, key as version_key

Params = Mapping[str, Any]


def _fmt_slow(v: Any) -> str:
    """test-backend-ops' var_to_str: bools and ints as integers, floats as %f, arrays as [a,b]."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return "%f" % v
    if isinstance(v, GGMLType):
        return v.name
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(fmt_value(x) for x in v) + "]"
    return str(v)


# the exact types seen most (every case name of the catalog is built from these): one
# dict lookup instead of a chain of isinstance checks
_FAST: dict[type, Callable[[Any], str]] = {
    bool: lambda v: "1" if v else "0",
    int: str,
    float: lambda v: "%f" % v,
    str: str,
    GGMLType: lambda v: v.name,
}


def fmt_value(v: Any) -> str:
    """test-backend-ops' var_to_str: bools and ints as integers, floats as %f, arrays as [a,b]."""
    tp = type(v)
    f = _FAST.get(tp)
    if f is not None:
        return f(v)
    if tp is tuple or tp is list:
        return "[" + ",".join([fmt_value(x) for x in v]) + "]"
    return _fmt_slow(v)


def fmt_vars(params: Params, names: Iterable[str]) -> str:
    return ",".join([f"{n}={fmt_value(params[n])}" for n in names])


def unique_params(cases) -> list:
    """A grid without repeats, first occurrence kept: test-backend-ops lists some cases twice
    (a loop and an explicit line); `ops` lists each name once."""
    seen, out = set(), []
    for p in cases:
        key = repr(sorted(p.items()))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


@dataclass(frozen=True)
class Deviation:
    """A known, explained difference: `when` names the cases it concerns; it explains an
    error up to `max_error` only (None: any size), so that a worse one is still a FAIL.
    `holds(out, params, *srcs)`: a ceiling in another measure than the metric (test mode),
    None where the device's output meets it, else why not (then the case is a FAIL)."""
    reason: str
    when: Callable[[Params], bool] = lambda params: True   # the cases it concerns
    max_error: float | None = None
    nonfinite: bool = False   # grad mode: it also explains a non-finite gradient
    holds: Callable[..., str | None] | None = None


# a Deviation keyed by this prefix concerns every device (a limit of the check itself)
EVERY_DEVICE = ""


def fd_limit(why: str, when: Callable[[Params], bool] = lambda params: True,
             max_error: float | None = None, nonfinite: bool = False) -> Deviation:
    """A grad_notes entry (key EVERY_DEVICE) for cases whose backprop gradient is right
    but whose finite-difference estimate is not precise enough to show it."""
    return Deviation(f"finite differences cannot check this gradient (test-backend-ops "
                     f"reports FAIL too): {why}", when, max_error, nonfinite)


def find_deviation(notes: Mapping[str, "Deviation | tuple[Deviation, ...]"], implements: tuple[str, ...],
                   params: Params, error: float | None = None) -> "Deviation | None":
    """The recorded deviation that explains an error on these params of a device running
    `implements` (cases/implementations.py), if any."""
    for impl, devs in notes.items():
        if impl != EVERY_DEVICE and impl not in implements:
            continue
        for d in devs if isinstance(devs, tuple) else (devs,):
            if d.when(params) and (d.max_error is None or error is None or error <= d.max_error):
                return d
    return None


@dataclass(frozen=True)
class Tolerance:
    """A looser per-element bound for `ops test --strict` (cli/engine/strict.py) than the output
    type's default, |out - ref| <= atol + rtol * |ref|: for the cases `when` picks, on the
    devices that run the implementation `impl` (cases/implementations.py; "" for every
    device), and why the op (or that implementation of it) is less precise than its output type. `atol_rms` is an
    absolute part in units of the reference's root mean square: for sums and dot products,
    whose rounding error scales with the terms, not with a result that cancels to ~0."""
    reason: str
    rtol: float = 0.0
    atol: float = 0.0
    atol_rms: float = 0.0
    when: Callable[[Params], bool] = lambda params: True
    impl: str = ""


@dataclass(frozen=True)
class Since:
    """What a family became at a catalog version, as a delta on the version before (a
    later test-backend-ops): grid points added (`add`) or removed (`drop`), params the
    older points get with their default (`defaults`: a param that new cases vary and old
    names do not print), and Family fields replaced from then on (`fields`: vars, op,
    fused, ...). build() takes each new param with that default, so the older versions'
    cases build as before."""
    version: str
    add: Callable[[], Iterable[Params]] | None = None
    drop: Callable[[Params], bool] | None = None
    defaults: Mapping[str, Any] = field(default_factory=dict)
    fields: Mapping[str, Any] = field(default_factory=dict)
    perf_add: Callable[[], Iterable[Params]] | None = None


def new_params(version: str, vars: tuple[str, ...], add=None, perf_add=None, **defaults) -> Since:
    """A version whose struct prints new params after the old ones (`vars` + their names,
    in order): every older name comes back with them at their defaults; `add` / `perf_add`:
    the new grid points of the eval / perf grid."""
    return Since(version, add=add, perf_add=perf_add, defaults=defaults,
                 fields=dict(vars=tuple(vars) + tuple(defaults)))


def _accepting(build: Callable[..., Tensor], defaults: Mapping[str, Any]) -> Callable[..., Tensor]:
    """build() for params of a later version that it does not model yet: each is dropped
    while it holds its default (the older case), and refused otherwise."""
    import inspect
    sig = inspect.signature(build)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return build
    unknown = {k: v for k, v in defaults.items() if k not in sig.parameters}
    if not unknown:
        return build

    def wrapped(g, **params):
        for k, default in unknown.items():
            value = params.pop(k, default)
            if value != default:
                raise NotImplementedError(f"{k}={fmt_value(value)}: not modelled yet (a later catalog "
                                          f"version's param, named only)")
        return build(g, **params)
    return wrapped


@dataclass(eq=False)
class Family:
    """One test-backend-ops test struct (e.g. test_unary), declared as data.

    build(g, **params) -> output tensor          the graph, like test_case::build_graph
    eval_grid() / perf_grid() -> params dicts   the cases of make_test_cases_eval / _perf
    vars: names printed in the case name, in order (or a callable params -> str)
    op: the printed op name: a constant, or a callable params -> name
    init(tensor, rng, params) -> array | None    custom leaf data (None: uniform [-1, 1])
    max_nmse: threshold of the default NMSE metric (a number or params -> number)
    err: custom metric (ref, out, params) -> float, compared to max_nmse
    err_srcs: err (and a Deviation's holds) also receives the checked node's source values,
              (ref, out, params, *srcs)
              (test_top_k's check of tied values reads its input)
    fused: a test-mode fused case, checked on graph.check_nodes / its output only,
           and absent from support mode (as in test-backend-ops)
    flops(out, params) -> int; 0 means memory-bound (GB/s is reported)
    op_size(out, params) -> bytes moved, for GB/s; None: ggml_nbytes of out and its srcs
    fuzz_domain(strategies) -> strategy of params: the domain `ops fuzz` draws cases from
    strict: looser per-element bounds of `ops test --strict` (Tolerance), each with its reason
    grad_*: `ops grad` (test-backend-ops' gradient mode; the leaves build() marks with
    set_param are differentiated): finite-difference step, 4-point estimate, the most
    gradients checked, the values at which a non-smooth gradient is trusted, and the
    threshold of the mean absolute asymmetry (each a value or params -> value)
    """

    name: str
    build: Callable[..., Tensor]
    vars: tuple[str, ...] | Callable[[Params], str]
    op: str | Callable[[Params], str]
    eval_grid: Callable[[], Iterable[Params]] = lambda: ()
    perf_grid: Callable[[], Iterable[Params]] = lambda: ()
    init: Callable[[Tensor, np.random.Generator, Params], Any] | None = None
    max_nmse: float | Callable[[Params], float] = 1e-7
    err: Callable[[np.ndarray, np.ndarray, Params], float] | None = None
    err_name: str = "NMSE"
    err_srcs: bool = False
    fused: bool = False
    flops: Callable[[Tensor | None, Params], int] | None = None   # None: the node not built (from_model)
    op_size: Callable[[Tensor, Params], int] | None = None
    # Known deviations of an implementation from the reference, keyed by implementation
    # (cases/implementations.py, e.g. GGML_CPU): a Deviation names the cases it concerns and
    # why. Such a case that misses its metric on a device running it is reported as "known deviation" with the reason (never
    # hidden as OK); NaN, inf or overruns stay FAILs, and so does any other case.
    notes: Mapping[str, "Deviation | tuple[Deviation, ...]"] = field(default_factory=dict)
    # the same for `ops grad`, where the key EVERY_DEVICE names a limit of the
    # finite-difference check itself (test-backend-ops fails those cases too)
    grad_notes: Mapping[str, "Deviation | tuple[Deviation, ...]"] = field(default_factory=dict)
    strict: tuple[Tolerance, ...] = ()
    grad_eps: float | Callable[[Params], float] = 1e-1
    grad_precise: bool | Callable[[Params], bool] = False
    grad_nmax: int = 10000
    grad_expect: tuple[float, ...] | Callable[[Params], tuple[float, ...]] = ()
    max_maa: float | Callable[[Params], float] = 1e-4
    in_grad: bool = True       # listed by `ops grad` (test-backend-ops skips OPT_STEP_ADAMW there)
    # `ops fuzz`: the family's domain as a Hypothesis strategy of params dicts, made from the
    # hypothesis.strategies module it is given (this module does not import hypothesis);
    # None: varied generically from the grid points (cli/fuzz.py)
    fuzz_domain: Callable[[Any], Any] | None = None
    # catalog versions (versions.py): the version whose test-backend-ops first has the
    # struct, the one that no longer has it, and the deltas of the versions between
    since: str = "0.20.2"
    until: str | None = None
    changes: tuple[Since, ...] = ()
    version: str = ""   # the catalog version this family was resolved at ("" when not)

    def op_name(self, params: Params) -> str:
        return self.op(params) if callable(self.op) else self.op

    def vars_str(self, params: Params) -> str:
        return self.vars(params) if callable(self.vars) else fmt_vars(params, self.vars)

    def threshold(self, params: Params) -> float:
        return self.max_nmse(params) if callable(self.max_nmse) else self.max_nmse

    def grad_setting(self, name: str, params: Params):
        """One grad_* / max_maa setting for these params (a value or params -> value)."""
        v = getattr(self, name)
        return v(params) if callable(v) else v


class _Registry(dict):
    """name -> Family; looking one up imports every family module first, so that
    FAMILIES["sum"] works whichever module was imported before."""

    def __getitem__(self, name: str) -> Family:
        load_all()
        return super().__getitem__(name)


FAMILIES: dict[str, Family] = _Registry()


def _grid(points: Iterable[Params], deltas: list[Since], perf: bool = False) -> list:
    for d in deltas:
        extra = d.perf_add if perf else d.add
        points = [p for p in points if not (d.drop and d.drop(p))] + (list(extra()) if extra else [])
        points = [{**d.defaults, **p} for p in points]
    return unique_params(points)


def in_version(fam: Family, version: str) -> bool:
    return at_or_after(version, fam.since) and not (fam.until and at_or_after(version, fam.until))


@functools.lru_cache(maxsize=None)
def at_version(name: str, version: str) -> Family:
    """The family as the catalog of `version` has it: its deltas up to that version applied
    to the grids and fields (the registered family is the oldest catalog's)."""
    load_all()
    fam = dict.__getitem__(FAMILIES, name)
    deltas = [d for d in fam.changes if at_or_after(version, d.version)]
    deltas.sort(key=lambda d: version_key(d.version))
    fields = {k: v for d in deltas for k, v in d.fields.items()}
    fields.setdefault("build", _accepting(fam.build, {k: v for d in deltas for k, v in d.defaults.items()}))
    eval_grid, perf_grid = fam.eval_grid, fam.perf_grid
    return dataclasses.replace(fam, version=version, **fields,
                               eval_grid=lambda: _grid(eval_grid(), deltas),
                               perf_grid=lambda: _grid(perf_grid(), deltas, perf=True))


# (defining module, registration count) of each family: the catalog's order, the same in
# every process whichever family module was imported first (a test, a tool)
_ORDER: dict[str, tuple[str, int]] = {}
# family name -> (source file, line) of the statement of its module that registered it: the
# register() call, or the module-level call of the helper that made it (`ops list ops --parts`)
PLACES: dict[str, tuple[str, int]] = {}


def register(family: Family) -> Family:
    assert family.name not in FAMILIES, f"duplicate family {family.name}"
    caller = frame = sys._getframe(1)
    module = caller.f_globals.get("__name__", "")
    while frame.f_back is not None and frame.f_back.f_globals.get("__name__") == module:
        frame = frame.f_back
    PLACES[family.name] = (frame.f_code.co_filename, frame.f_lineno)
    _ORDER[family.name] = (module, len(_ORDER))
    FAMILIES[family.name] = family
    return family


class Case:
    """One parameterised case: a family and one point of its grid."""

    __slots__ = ("family", "params", "op", "vars", "mode")

    def __init__(self, family: Family, params: Params, mode: str = "eval"):
        self.family = family
        self.params = dict(params)
        self.op = family.op_name(self.params)
        self.vars = family.vars_str(self.params)
        self.mode = mode  # "eval" or "perf": which grid it came from

    @property
    def name(self) -> str:
        return f"{self.op}({self.vars})"

    def build(self, max_bytes: int | None = None, max_tensors: int | None = None) -> Graph:
        """The case's graph; with bounds (a name from outside), TooLarge at the first tensor past them."""
        g = Graph(self.family.version, max_bytes, max_tensors)
        out = self.family.build(g, **self.params)
        g.out = out
        if self.family.fused and g.check_nodes is None:
            g.check_nodes = [out]
        return g

    def resolve(self) -> "Case":
        """The case itself (a cache.CaseRef, a case by name, resolves to its Case)."""
        return self

    def seed(self, seed: int) -> list[int]:
        """Per-case seed material: the same inputs on every worker and every run."""
        return [seed, zlib.crc32(self.name.encode())]

    def init_inputs(self, g: Graph, seed: int, distinct_rows: int | None = None) -> dict[int, np.ndarray]:
        """Leaf data, keyed by tensor index, as arrays of shape ne[::-1] in the leaf's type
        (`distinct_rows`: inputs.init_leaf)."""
        rng = np.random.default_rng(self.seed(seed))
        out = {}
        for t in g.leaves:
            data = self.family.init(t, rng, self.params) if self.family.init else None
            out[t.index] = init_leaf(t, rng, data, distinct_rows)
        return out

    def __reduce__(self):
        # op and vars travel along: a worker need not format the name again
        return (_case_from_family, (self.family.name, self.params, self.mode, self.op, self.vars,
                                    self.family.version))

    def __repr__(self) -> str:
        return f"Case({self.name})"


def _case_from_family(name: str, params: Params, mode: str, op: str | None = None,
                      vars: str | None = None, version: str = "") -> Case:
    fam = at_version(name, version or current())
    if op is None or vars is None:
        return Case(fam, params, mode)
    case = Case.__new__(Case)
    case.family, case.params, case.mode, case.op, case.vars = fam, dict(params), mode, op, vars
    return case


def load_all() -> None:
    """Import every family module of this package: each calls `register(Family(...))` at
    module level, which is how the loader tells it from the case model's modules."""
    load_plugins(__package__, registers="register")


def family(name: str, version: str | None = None) -> Family:
    """A family by name, as the catalog of `version` (default: the one in use) has it."""
    return at_version(name, version or current())


def families(version: str | None = None) -> list[Family]:
    """The families of a catalog version (default: the one in use), in catalog order."""
    load_all()
    version = version or current()
    return [at_version(f.name, version) for f in sorted(dict.values(FAMILIES), key=lambda f: _ORDER[f.name])
            if in_version(f, version)]


def all_cases(mode: str = "test", version: str | None = None) -> list[Case]:
    """Every case of a catalog version (default: the one in use) in catalog order. mode:
    "test" (eval grid, fused cases included), "support" and "grad" (eval grid without
    fused cases: test-backend-ops drops the cases that run their whole graph from both)
    or "perf" (perf grid)."""
    cases = []
    for fam in families(version):
        cases.extend(family_cases(fam, mode))
    return cases


def family_cases(fam: Family, mode: str = "test") -> list[Case]:
    """The cases of one family (as at_version resolved it) in a mode, in catalog order;
    enumerated once per process (the names cache and a selection both ask)."""
    if fam.version and fam is at_version(fam.name, fam.version):
        return list(_family_cases(fam.name, fam.version, mode))
    return _enumerate_family(fam, mode)


class StaleName(LookupError):
    """A case name that the names cache places where the catalog has another case."""


def family_case(name: str, version: str, mode: str, k: int, op: str, vars: str) -> Case:
    """The k-th case of a family in a mode at a catalog version, which the names cache says
    is `op(vars)` (cache.CaseRef.resolve); its name formatted again and checked: a case is
    never run under another's name (StaleName where the names cache was wrong)."""
    points = _family_points(name, version, mode)
    case = Case(at_version(name, version), points[k], _case_mode(mode)) if k < len(points) else None
    if case is None or case.op != op or case.vars != vars:
        raise StaleName(f"{op}({vars})")
    return case


def case_named(mode: str, version: str, op: str, vars: str) -> Case:
    """The case of that name in the catalog (the slow way: every family's grid); StaleName
    where there is none."""
    for fam in families(version):
        for case in family_cases(fam, mode):
            if case.op == op and case.vars == vars:
                return case
    raise StaleName(f"{op}({vars}) is not a case of catalog {version}")


@functools.lru_cache(maxsize=None)
def _family_cases(name: str, version: str, mode: str) -> tuple[Case, ...]:
    fam = at_version(name, version)
    return tuple(Case(fam, p, _case_mode(mode)) for p in _family_points(name, version, mode))


@functools.lru_cache(maxsize=None)
def _family_points(name: str, version: str, mode: str) -> tuple[Params, ...]:
    return tuple(_points(at_version(name, version), mode))


def _case_mode(mode: str) -> str:
    return "perf" if mode == "perf" else "eval"


def _points(fam: Family, mode: str) -> Iterable[Params]:
    """The family's grid points in a mode (see all_cases)."""
    if mode == "perf":
        return fam.perf_grid()
    if mode in ("support", "grad") and fam.fused or mode == "grad" and not fam.in_grad:
        return ()
    return fam.eval_grid()


def _enumerate_family(fam: Family, mode: str) -> list[Case]:
    return [Case(fam, p, _case_mode(mode)) for p in _points(fam, mode)]

