"""Where each part of an op lives (`ops list ops --parts`), read from the registries a run uses.

An op is joined across the tree by its name only: the catalog family that prints it and the
builder of its graph (cases/), and per op node of its cases (a fused case has several) the
ggml enum entry and the constructor that made the node (cases/graph.py, the family's
module), the NumPy reference and the ggml replay (backend/), the CANN rule, the C handler
that native/aclnn/dispatch.c finds in a family's OPS_FAMILY table, the ACLNN_OP
declarations of the rule's operators (native/aclnn/api/*.def), their simulator operators
(backend/cann/sim/), the SoC notes on them (soc.py, the simulator's SoC dtypes, their
pages' records) and the evidence the CANN verdicts rest on (evidence.py). Every place is
found from the registered thing itself (a callable's code, the statement that registered
an entry, a C table entry), never from a list kept here. `problems` says which op lacks a
part without a declared reason (backend/cann/unmapped.py declares why an op has no rule),
`stale` which declared reason no longer holds.
"""
from __future__ import annotations

import ast
import functools
import inspect
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

ROOT = Path(__file__).resolve().parent.parent   # the folder holding cases/, backend/, cli/, native/
TABLES = ROOT / "tests" / "data" / "ascend-tables.json"   # the aclnn pages' records

OP_PARTS = ("family", "builder")
NODE_PARTS = ("enum", "constructor", "reference", "replay")
CANN_PARTS = ("rule", "handler", "api", "simulator", "soc", "evidence")
PARTS = OP_PARTS + NODE_PARTS + CANN_PARTS


@dataclass(frozen=True)
class Place:
    file: str   # relative to the project's root where it lies under it
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


def place(file: str | Path, line: int) -> Place:
    path = Path(file).resolve()
    return Place(str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path), line)


def code_place(fn: Callable) -> Place:
    """Where a registered callable is defined (its first decorator's line)."""
    fn = inspect.unwrap(fn)
    while isinstance(fn, functools.partial):
        fn = fn.func
    _, line = inspect.getsourcelines(fn)
    return place(inspect.getsourcefile(fn), line)


@dataclass(frozen=True)
class Part:
    name: str                  # one of PARTS
    what: str                  # the registered thing, in a few words
    place: Place | None        # None: the op has no such part
    why_none: str = ""         # the declared reason it has none ("" and no place: missing)
    declared: Place | None = None   # where that reason is declared


@dataclass
class NodeParts:
    op_key: str                # Tensor.op_key: "SOLVE_TRI", "UNARY:SILU"
    parts: list[Part] = field(default_factory=list)


@dataclass
class OpParts:
    op: str                    # the printed op of its cases
    versions: tuple[str, ...]  # the catalog versions that have it
    fused: bool                # a case checked on its whole graph's output
    parts: list[Part] = field(default_factory=list)
    nodes: list[NodeParts] = field(default_factory=list)


# ------------------------------------------------------------- the registries ----

Notes = Mapping[Any, tuple[tuple[str, Place], ...]]


@dataclass(frozen=True)
class Registries:
    """The registries of every part, as the runs read them (a test plants altered copies)."""
    families: Mapping[str, Any]            # family name -> Family (as registered)
    family_places: Mapping[str, Place]     # family name -> the statement that registered it
    enum: Mapping[str, Place]              # op_key -> its name in cases/graph.py's lists
    references: Mapping[str, Callable]
    replays: Mapping[str, Callable] | str  # str: why there are none (no ggml bridge)
    rules: Mapping[str, Any]               # op_key -> backend/cann/rules.py Rule
    rule_places: Mapping[str, Place]
    unmapped: Mapping[str, tuple[str, Place]]   # op_key -> (why it has no rule, where said)
    handlers: Mapping[str, Any]            # op_key -> native/build_aclnn.py Handler
    api: Mapping[str, Place]               # aclnn operator -> its ACLNN_OP line
    operators: Mapping[str, Callable] | str     # simulated aclnn operators (str: why none)
    soc: Notes                             # aclnn operator -> SoC notes on it
    evidence: Notes                        # ("op", name) / ("node", op_key) / ("operator", name) -> entries


@functools.lru_cache(maxsize=None)
def _tree(path: str) -> ast.Module:
    return ast.parse(Path(path).read_text(), path)


@functools.lru_cache(maxsize=None)
def literal_keys(path: str, name: str | None = None, call: str | None = None) -> dict[str, int]:
    """String keys (of dicts, nested dicts included) and elements (of sets) -> line, in the
    literal assigned to `name`, or passed to `call` ("RULES.update"), in module `path`."""
    found: dict[str, int] = {}
    for node in ast.walk(_tree(path)):
        if name and isinstance(node, (ast.Assign, ast.AnnAssign)) and name in [
                t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(t, ast.Name)]:
            _collect(node.value, found)
        elif call and isinstance(node, ast.Call) and ast.unparse(node.func) == call:
            for arg in node.args:
                _collect(arg, found)
    return found


def _collect(value: ast.AST, found: dict[str, int]) -> None:
    """The string keys of a dict literal (and of the dicts that are its values) or the
    elements of a set literal (frozenset({...}) too), each at its line."""
    if isinstance(value, ast.Call) and len(value.args) == 1:
        value = value.args[0]
    if isinstance(value, ast.Dict):
        for k, v in zip(value.keys, value.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                found.setdefault(k.value, k.lineno)
            if isinstance(v, ast.Dict):
                _collect(v, found)
    elif isinstance(value, ast.Set):
        for e in value.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                found.setdefault(e.value, e.lineno)


def _enum_places() -> dict[str, Place]:
    """op_key -> its line in cases/graph.py's OPS, UNARY_OPS or GLU_OPS (ggml's enums)."""
    from cannops.cases import graph
    source = Path(graph.__file__).read_text()
    out = {}
    for node in _tree(graph.__file__).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            prefix = {"OPS": "", "UNARY_OPS": "UNARY:", "GLU_OPS": "GLU:"}.get(node.targets[0].id)
            text = ast.get_source_segment(source, node.value) if prefix is not None else ""
            for k, line in enumerate(text.splitlines()):
                for word in re.findall(r"\b[A-Z][A-Z0-9_]*\b", line):
                    out.setdefault(prefix + word, place(graph.__file__, node.value.lineno + k))
    return out


def _rule_places() -> dict[str, Place]:
    """op_key -> the line of its key in the RULES.update of its rules_<family>.py."""
    from cannops.backend.cann import rules
    folder = Path(rules.__file__).parent
    return {key: place(path, line) for path in sorted(folder.glob("rules_*.py"))
            for key, line in literal_keys(str(path), call="RULES.update").items()}


def _replays() -> Mapping[str, Callable] | str:
    try:
        from cannops.backend.ggml import ops
    except ImportError as e:
        return f"the ggml bridge is not loaded ({str(e).splitlines()[0]})"
    ops.load_all()
    return ops.REPLAYS


def _operators() -> Mapping[str, Callable] | str:
    try:
        from cannops.backend.cann.sim import aclnn
    except ImportError as e:
        return f"the simulator cannot load ({str(e).splitlines()[0]})"
    from cannops.cases.plugins import load_plugins
    load_plugins("cannops.backend.cann.sim", prefix="ops_")
    return aclnn.OPS


def _soc_notes() -> dict[str, tuple[tuple[str, Place], ...]]:
    """aclnn operator -> what the SoC tables say of it: soc.py's operators a SoC does not
    offer and pages without the 310P, the simulator's dtypes out per SoC, the page's record."""
    from cannops.backend.cann import soc
    notes: dict[str, list] = {}

    def note(module, table: str, op: str, text: str) -> None:
        notes.setdefault(op, []).append((text, place(module.__file__, literal_keys(module.__file__, table).get(op, 0))))
    for fam, table in soc.UNOFFERED.items():
        for op, page in table.items():
            note(soc, "UNOFFERED", op, f"{fam}: not offered ({page})")
    for op, page in soc.PAGES_WITHOUT_310P.items():
        note(soc, "PAGES_WITHOUT_310P", op, f"310P: its page does not offer it ({page})")
    try:
        from cannops.backend.cann.sim import aclnn
    except ImportError:   # no native layer: the listing says so at the simulator part
        aclnn = None
    for fam, table in (aclnn.SOC_DTYPES_OUT.items() if aclnn else ()):
        for op, out in table.items():
            if op != "*":
                note(aclnn, "SOC_DTYPES_OUT", op, f"{fam}: no {', '.join(sorted(out))} (its page)")
    for op, (support, line) in _page_records().items():
        notes.setdefault(op, []).append((f"its page: 310P {support}", place(TABLES, line)))
    return {op: tuple(n) for op, n in notes.items()}


def _page_records() -> dict[str, tuple[str, int]]:
    """operator -> (the 310P's state on its aclnn page, the record's line) in TABLES."""
    if not TABLES.exists():
        return {}
    text = TABLES.read_text()
    records = json.loads(text)["operators"]
    lines = {m[1]: text.count("\n", 0, m.start()) + 1 for m in re.finditer(r'^  "(\w+)": \{', text, re.M)}
    return {op: (r.get("support", {}).get("310P", "not documented"), lines.get(op, 0))
            for op, r in records.items() if op in lines}


def _evidence_entries() -> dict[tuple[str, str], tuple[tuple[str, Place], ...]]:
    from cannops.backend.cann import evidence as ev
    out: dict[tuple[str, str], list] = {}

    def add(kind, table_name, label):
        lines = literal_keys(ev.__file__, table_name)
        for key in getattr(ev, table_name):
            out.setdefault((kind, key), []).append((label(key), place(ev.__file__, lines.get(key, 0))))
    add("op", "CI_SUPPORTED", lambda op: f"910B: the Ascend CI's report passes {op}")
    add("op", "CI_PARTIAL_RAN", lambda op: f"910B: the Ascend CI's report passes the cases of {op} it runs")
    add("op", "CI_PARTIAL_NONE", lambda op: f"910B: the Ascend CI's report runs no case of {op}")
    add("node", "DEVICE_PATH_OPS_310P", lambda k: "310P: ggml-cann's handler has a 310P path")
    add("operator", "DEVICE_PATHS_310P", lambda o: f"310P: ggml-cann's 310P code calls aclnn{o}")
    add("operator", "GGML_CANN_CALLS", lambda o: f"ggml-cann calls aclnn{o}")
    return {k: tuple(v) for k, v in out.items()}


def _unmapped() -> dict[str, tuple[str, Place]]:
    from cannops.backend.cann import unmapped
    lines = literal_keys(unmapped.__file__, "UNMAPPED")
    return {k: (why, place(unmapped.__file__, lines.get(k, 0))) for k, why in unmapped.UNMAPPED.items()}


@functools.lru_cache(maxsize=None)
def registries() -> Registries:
    """The registries as this tree fills them."""
    from cannops.backend import reference
    from cannops.backend.cann import rules
    from cannops.cases import catalog
    from cannops.native import build_aclnn
    catalog.load_all()
    reference.load_all()
    return Registries(
        families=dict(dict.items(catalog.FAMILIES)),
        family_places={k: place(*v) for k, v in catalog.PLACES.items()},
        enum=_enum_places(), references=reference.REFERENCES, replays=_replays(),
        rules=rules.RULES, rule_places=_rule_places(), unmapped=_unmapped(),
        handlers={h.op_key: h for h in build_aclnn.handlers()},
        api={e.name[len("aclnn"):]: place(build_aclnn.SRC / "api" / e.source, e.line)
             for e in build_aclnn.def_entries() if e.operator and not e.name.endswith("GetWorkspaceSize")},
        operators=_operators(), soc=_soc_notes(), evidence=_evidence_entries())


# ------------------------------------------------------- an op's cases, nodes ----

@dataclass
class _Seen:
    """What the catalogs' cases of one printed op are made of."""
    versions: list[str] = field(default_factory=list)
    families: list[str] = field(default_factory=list)
    fused: bool = False
    # op_key -> how to build again the first graph with such a node (for its constructor)
    nodes: dict[str, Callable[[], Any]] = field(default_factory=dict)


def gather(ops: Iterable[str] | None = None) -> dict[str, _Seen]:
    """op -> its cases' families, versions and op nodes, over every catalog version (test
    mode: its grids hold every node that perf and grad build too); `ops` None: every op."""
    from cannops.cases.versions import VERSIONS
    seen: dict[str, _Seen] = {}
    for version in VERSIONS:
        for fam, params in _grid_points(version, ops):
            op = fam.op_name(params)
            s = seen.setdefault(op, _Seen())
            s.versions += [version] if version not in s.versions else []
            s.families += [fam.name] if fam.name not in s.families else []
            s.fused |= fam.fused
            build = functools.partial(_graph, fam, params)
            for node in build().nodes():
                if not node.is_view() and not node.is_leaf():
                    s.nodes.setdefault(node.op_key, build)
    return seen


def _grid_points(version: str, ops: Iterable[str] | None):
    """(family, params) of each test-mode case of a catalog version: of `ops` only, found by
    the names cache, or every one (without formatting 40,000 names)."""
    from cannops.cases.catalog import families
    from cannops.cases.cache import case_names, case_refs
    if ops is None:
        return ((fam, p) for fam in families(version) for p in fam.eval_grid())
    wanted = set(ops)
    refs = case_refs("test", [i for i, n in enumerate(case_names("test", version)) if n.op in wanted], version)
    return ((case.family, case.params) for case in (ref.resolve() for ref in refs))


def _graph(fam, params):
    """The graph of a case (catalog.Case.build's, without the case's name)."""
    from cannops.cases.graph import Graph
    g = Graph(fam.version)
    g.out = fam.build(g, **params)
    return g


def constructors(build: Callable[[], Any]) -> dict[str, tuple[str, Place]]:
    """op_key -> (the function that made such a node while build() made a graph, where
    it is defined): the caller of new_op or view_of (an in-place node is a view of its
    destination), or the caller's caller where that one is named after the op (`rms_norm`
    calling a helper shared by the norms): the constructor that mirrors ggml's."""
    from cannops.cases.graph import new_op, view_of
    makers = {new_op.__code__, view_of.__code__}
    made: dict[str, tuple[str, Place]] = {}
    callers: list = []

    def profile(frame, event, arg):
        if frame.f_code not in makers:
            return
        if event == "call":
            callers.append(frame.f_back)
        elif event == "return" and callers:
            caller = callers.pop()
            if arg is not None and not arg.is_view() and arg.op_key not in made:
                code = _named_after(arg.op_key, caller)
                made[arg.op_key] = (code.co_name, place(code.co_filename, code.co_firstlineno))
    sys.setprofile(profile)
    try:
        build()
    finally:
        sys.setprofile(None)
    return made


def _named_after(op_key: str, frame, depth: int = 3):
    """The code of `frame` or of one of its `depth` callers named after the op, else of `frame`."""
    word = op_key.rpartition(":")[2].lower()
    f = frame
    for _ in range(depth):
        if f is None:
            break
        if word in f.f_code.co_name.lower():
            return f.f_code
        f = f.f_back
    return frame.f_code


# ------------------------------------------------------------------- the parts ----

@functools.lru_cache(maxsize=None)
def _code_place(fn: Callable) -> Place:
    return code_place(fn)


def _callable_part(name: str, fn: Callable | None, what: str) -> Part:
    """The part a registered callable is (`what`: what is missing without one)."""
    if fn is None:
        return Part(name, what, None)
    return Part(name, f"{what}: {getattr(inspect.unwrap(fn), '__qualname__', '?')}", _code_place(fn))


def op_parts(op: str, seen: _Seen, reg: Registries) -> OpParts:
    out = OpParts(op, tuple(seen.versions), seen.fused)
    for name in seen.families:
        fam = reg.families.get(name)
        out.parts.append(Part("family", name, reg.family_places.get(name) if fam else None))
        out.parts.append(_callable_part("builder", fam and fam.build, f"{name}.build"))
    for key, build in seen.nodes.items():
        made = constructors(build).get(key)
        node = NodeParts(key, [Part("enum", key, reg.enum.get(key)),
                               Part("constructor", made[0] if made else "new_op's caller", made and made[1])])
        node.parts += node_parts(op, key, reg)
        out.nodes.append(node)
    return out


def node_parts(op: str, key: str, reg: Registries) -> list[Part]:
    """The parts of an op node of op_key `key` in the cases of `op`, but its constructor."""
    parts = [_callable_part("reference", reg.references.get(key), key)]
    if isinstance(reg.replays, str):
        parts.append(Part("replay", reg.replays, None))
    else:
        parts.append(_callable_part("replay", reg.replays.get(key) or reg.replays.get(key.partition(":")[0]), key))
    rule = reg.rules.get(key)
    if rule is not None:
        return parts + cann_parts(op, key, rule, reg)
    why, where = reg.unmapped.get(key, ("", None))
    # the other CANN parts follow from the rule: one reason (or one missing part) for all
    return parts + [Part("rule", "a RULES entry, or its reason in backend/cann/unmapped.py", None, why, where)] + [
        Part(name, "no rule", None, "no rule") for name in CANN_PARTS[1:]]


def cann_parts(op: str, key: str, rule, reg: Registries) -> list[Part]:
    """A rule's parts: itself, the C handler, and per aclnn operator it runs its ACLNN_OP,
    its simulator operator and the SoC notes on it; then the evidence of its verdicts."""
    rule_place = reg.rule_places.get(key)
    parts = [Part("rule", "runs " + ", ".join(f"aclnn{o}" for o in rule.aclnn), rule_place)]
    h = reg.handlers.get(key)
    from cannops.native.build_aclnn import SRC
    parts.append(Part("handler", f"{h.fn} (table entry {h.source}:{h.line})",
                      place(SRC / h.source, h.fn_line or h.line)) if h else Part("handler", "OPS_FAMILY entry", None))
    for o in rule.aclnn:
        parts.append(Part("api", f"aclnn{o}", reg.api.get(o)))
    for o in rule.aclnn:
        sim = reg.operators
        parts.append(Part("simulator", sim, None) if isinstance(sim, str) else
                     _callable_part("simulator", sim.get(o), f"aclnn{o}"))
    for o in rule.aclnn:
        notes = reg.soc.get(o, ())
        parts += [Part("soc", f"aclnn{o}: {text}", at) for text, at in notes] or [Part("soc", f"aclnn{o}", None)]
    parts += [Part("soc", reason if fam in reason else f"{fam}: {reason}", rule_place)
              for fam, checks in rule.soc.items() for _, reason in checks]
    entries = [e for k in [("op", op), ("node", key)] + [("operator", o) for o in rule.aclnn]
               for e in reg.evidence.get(k, ())]
    if rule.beyond:
        entries.append((f"beyond ggml-cann, on its pages alone: {rule.beyond}", rule_place))
    parts += [Part("evidence", text, at) for text, at in entries] or [Part("evidence", "no entry", None)]
    return parts


# ------------------------------------------------------------------ the check ----

def problems(ops: list[OpParts]) -> list[str]:
    """Each part an op lacks with no declared reason; [] when every op is whole."""
    out = []
    for o in ops:
        out += _lacking(o.parts, OP_PARTS, f"{o.op}: ")
        for n in o.nodes:
            out += _lacking(n.parts, NODE_PARTS + CANN_PARTS, f"{o.op}: node {n.op_key}: ")
    return list(dict.fromkeys(out))


def _lacking(parts: list[Part], names: tuple[str, ...], prefix: str) -> list[str]:
    listed = {p.name for p in parts}
    return ([f"{prefix}no {name}" for name in names if name not in listed]
            + [f"{prefix}no {p.name} ({p.what})" for p in parts if p.place is None and not p.why_none])


def stale(ops: list[OpParts], reg: Registries) -> list[str]:
    """The reasons declared for having no rule that no longer hold, over `ops` (every op of
    the catalogs): an op with a rule after all, or an op_key no catalog op has."""
    keys = {n.op_key for o in ops for n in o.nodes}
    return ([f"{k}: declared without a rule ({reg.unmapped[k][1]}) but has one" for k in reg.unmapped
             if k in reg.rules]
            + [f"{k}: declared without a rule ({reg.unmapped[k][1]}) but no catalog op has it"
               for k in reg.unmapped if k not in keys])


def all_parts(reg: Registries | None = None, ops: Iterable[str] | None = None) -> list[OpParts]:
    """The parts of `ops` (None: every op of every catalog version), in name order."""
    reg = reg or registries()
    return [op_parts(op, s, reg) for op, s in sorted(gather(ops).items())]


# --------------------------------------------------------------- the listing ----

def lines(o: OpParts) -> list[str]:
    """`ops list ops --parts`' lines for one op: part, file:line, what."""
    versions = ", ".join(o.versions)
    out = [f"{o.op}  (catalogs {versions}{'; fused: checked on its whole graph' if o.fused else ''})"]
    out += [_line(p, "  ") for p in o.parts]
    for n in o.nodes:
        out.append(f"  node {n.op_key}")
        out += [_line(p, "    ") for p in n.parts if not (p.why_none == "no rule" and p.place is None)]
    return out


def _line(p: Part, indent: str) -> str:
    if p.place is not None:
        where, what = str(p.place), p.what
    elif p.why_none:
        where, what = str(p.declared or "-"), f"none: {p.why_none}"
    else:
        where, what = "MISSING", p.what
    return f"{indent}{p.name:<{16 - len(indent)}} {where:<44} {what}"


def known_ops() -> list[str]:
    """Every printed op of every catalog version."""
    from cannops.cases.cache import case_names
    from cannops.cases.versions import VERSIONS
    return sorted({n.op for v in VERSIONS for n in case_names("test", v)})


def print_parts(what: str, text: str, echo: Callable[[str], None]) -> int:
    """`ops list ops --parts [OPS]`: each op's parts (OPS: a comma list; empty: every op),
    then a line per part missing without a declared reason (and, for every op, per reason
    that no longer holds); the exit status: 1 where there is such a line, else 0."""
    from .engine import BadInput
    if what != "ops":
        raise BadInput(f"--parts lists the parts of ops (`ops list ops --parts OP`), not of {what}")
    known = known_ops()
    wanted = [w.strip() for w in text.split(",") if w.strip()] if text else None
    if wanted == []:
        raise BadInput(f"--parts {text[:80]!r} names no op")
    for w in wanted or ():
        if w not in known:
            raise BadInput(f"--parts: unknown op {w[:80]!r} (`ops list ops` lists them)")
    reg = registries()
    found = all_parts(reg, wanted)
    for o in found:
        echo("\n".join(lines(o)))
    missing, loose = problems(found), stale(found, reg) if wanted is None else []
    for line in missing:
        echo(f"missing: {line}")
    for line in loose:
        echo(f"stale: {line}")
    return 1 if missing or loose else 0
