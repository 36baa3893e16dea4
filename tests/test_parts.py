"""One view per op (`ops list ops --parts`, cli/parts.py): every op of every catalog version has
each of its parts, or a declared reason it has none; a part taken out of a planted copy of
the registries is named; the places printed are the registered things' own lines."""
import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cannops.cases.cache import case_names
from cannops.cases.versions import VERSIONS
from cannops.cli import parts

ROOT = Path(parts.__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def reg():
    return parts.registries()


@pytest.fixture(scope="module")
def every_op(reg):
    return parts.all_parts(reg)


@pytest.fixture(scope="module")
def solve_tri(reg):
    return parts.gather(["SOLVE_TRI"])


def test_every_op_of_every_catalog_has_each_part_or_a_declared_reason(every_op, reg):
    assert {o.op for o in every_op} == set(parts.known_ops())
    assert len(every_op) > 140
    assert parts.problems(every_op) == []
    assert parts.stale(every_op, reg) == []


def test_the_test_grids_hold_every_op_node_of_perf_and_grad(every_op):
    """gather() reads the test-mode grids only: those of perf and grad build no other node."""
    from cannops.cases.catalog import all_cases
    listed = {o.op: {n.op_key for n in o.nodes} for o in every_op}
    beyond = {(c.op, n.op_key) for mode in ("perf", "grad") for v in VERSIONS for c in all_cases(mode, v)
              for n in c.build().nodes()
              if not n.is_view() and not n.is_leaf() and n.op_key not in listed.get(c.op, ())}
    assert beyond == set()


def test_ops_of_one_catalog_and_fused_ops_are_listed_with_their_nodes(every_op):
    by_op = {o.op: o for o in every_op}
    printed = {v: {n.op for n in case_names("test", v)} for v in VERSIONS}
    newer = printed[VERSIONS[-1]] - printed[VERSIONS[0]]
    assert newer and all(by_op[op].versions == (VERSIONS[-1],) for op in newer)
    assert all(by_op[op].versions == VERSIONS for op in printed[VERSIONS[0]] & printed[VERSIONS[-1]])
    fused = parts.gather(["RMS_NORM_MUL_ADD"])["RMS_NORM_MUL_ADD"]
    graph = next(iter(fused.nodes.values()))()
    keys = {n.op_key for n in graph.nodes() if not n.is_view() and not n.is_leaf()}
    assert by_op["RMS_NORM_MUL_ADD"].fused and {"RMS_NORM", "MUL", "ADD"} <= keys
    assert keys <= {n.op_key for n in by_op["RMS_NORM_MUL_ADD"].nodes}


def test_every_place_is_a_line_of_its_file(every_op):
    lengths = {}
    for o in every_op:
        for p in o.parts + [p for n in o.nodes for p in n.parts]:
            for at in (p.place, p.declared):
                if at is not None:
                    if at.file not in lengths:
                        lengths[at.file] = len((ROOT / at.file).read_text().splitlines())
                    assert 1 <= at.line <= lengths[at.file], (o.op, p)


def _places(op_parts):
    out = {}
    for p in op_parts.parts + [p for n in op_parts.nodes for p in n.parts]:
        out.setdefault(p.name, []).append(p.place)
    return out


def _line(at) -> str:
    return (ROOT / at.file).read_text().splitlines()[at.line - 1]


def test_solve_tri_s_parts_are_where_each_registry_declares_it(reg, solve_tri):
    got = _places(parts.op_parts("SOLVE_TRI", solve_tri["SOLVE_TRI"], reg))
    expect = {"family": r"register\(Family\(", "builder": r"def build_solve_tri\(",
              "enum": r"\bSOLVE_TRI\b", "constructor": r"def solve_tri\(",
              "reference": r'@reference\("SOLVE_TRI"\)', "replay": r'@replay\("SOLVE_TRI"\)',
              "rule": r'"SOLVE_TRI": Rule\(', "handler": r"static int op_solve_tri\(",
              "api": r"ACLNN_OP\(TriangularSolve,", "simulator": r'@operator\("TriangularSolve"\)',
              "evidence": r'"TriangularSolve"'}
    assert set(got) == set(parts.PARTS)
    for name, pattern in expect.items():
        assert any(re.search(pattern, _line(at)) for at in got[name]), (name, got[name])
    assert any(at.file == "backend/cann/soc.py" and '"TriangularSolve"' in _line(at) for at in got["soc"])


def test_the_c_tables_read_are_those_dispatch_searches(every_op, reg):
    """The parsed OPS_FAMILY entries answer as the compiled dispatch.c does, for every node."""
    aclnn = pytest.importorskip("cannops.native._aclnn")
    from cannops.cases.graph import GLU_OPS, OP_VALUE, UNARY_OPS
    for key in {n.op_key for o in every_op for n in o.nodes}:
        op, _, sub = key.partition(":")
        subop = (GLU_OPS if op == "GLU" else UNARY_OPS).index(sub) if sub else -1
        assert bool(aclnn.lib.ops_cann_has_handler(OP_VALUE[op], subop)) == (key in reg.handlers), key


def _without(mapping, key):
    return {k: v for k, v in mapping.items() if k != key}


# one part of SOLVE_TRI taken out of a copy of the registries, and what the check must say
PLANTED = {
    "family": lambda r: dict(family_places=_without(r.family_places, "solve_tri")),
    "builder": lambda r: dict(families={**r.families, "solve_tri": dataclasses.replace(r.families["solve_tri"],
                                                                                       build=None)}),
    "enum": lambda r: dict(enum=_without(r.enum, "SOLVE_TRI")),
    "reference": lambda r: dict(references=_without(r.references, "SOLVE_TRI")),
    "replay": lambda r: dict(replays=_without(r.replays, "SOLVE_TRI")),
    "rule": lambda r: dict(rules=_without(r.rules, "SOLVE_TRI")),
    "handler": lambda r: dict(handlers=_without(r.handlers, "SOLVE_TRI")),
    "api": lambda r: dict(api=_without(r.api, "TriangularSolve")),
    "simulator": lambda r: dict(operators=_without(r.operators, "TriangularSolve")),
    "soc": lambda r: dict(soc=_without(r.soc, "TriangularSolve")),
    "evidence": lambda r: dict(evidence=_without(r.evidence, ("operator", "TriangularSolve"))),
}


def test_the_whole_op_passes_before_anything_is_planted(reg, solve_tri):
    assert parts.problems([parts.op_parts("SOLVE_TRI", solve_tri["SOLVE_TRI"], reg)]) == []


@pytest.mark.parametrize("part", sorted(PLANTED))
def test_the_check_fails_when_one_part_of_one_op_is_removed(reg, solve_tri, part):
    planted = dataclasses.replace(reg, **PLANTED[part](reg))
    found = parts.problems([parts.op_parts("SOLVE_TRI", solve_tri["SOLVE_TRI"], planted)])
    assert found and all(f": no {part}" in line for line in found), found
    assert all(line.startswith("SOLVE_TRI:") for line in found)


def test_a_node_made_without_a_constructor_fails_the_check(reg, solve_tri):
    """SOLVE_TRI's node made by hand (no new_op, no view_of): the check names its constructor."""
    from cannops.cases.graph import Graph, Tensor

    def by_hand():
        g = Graph()
        t = Tensor(g, g.new_tensor("f32", [4]).type, [4])
        t.op = "SOLVE_TRI"
        g.out = t
        return g
    assert parts.constructors(by_hand) == {}
    planted = dataclasses.replace(solve_tri["SOLVE_TRI"], nodes={"SOLVE_TRI": by_hand})
    assert parts.problems([parts.op_parts("SOLVE_TRI", planted, reg)]) == [
        "SOLVE_TRI: node SOLVE_TRI: no constructor (new_op's caller)"]


def test_a_declared_reason_stands_for_a_missing_rule_and_goes_stale_with_one(reg, solve_tri):
    seen = solve_tri["SOLVE_TRI"]
    reason = ("refused for this test", parts.Place("backend/cann/unmapped.py", 1))
    declared = dataclasses.replace(reg, rules=_without(reg.rules, "SOLVE_TRI"),
                                   unmapped={**reg.unmapped, "SOLVE_TRI": reason})
    o = parts.op_parts("SOLVE_TRI", seen, declared)
    assert parts.problems([o]) == []
    assert any(p.name == "rule" and p.why_none == reason[0] for n in o.nodes for p in n.parts)
    stale = parts.stale([o], dataclasses.replace(reg, unmapped={**reg.unmapped, "SOLVE_TRI": reason}))
    assert any(line.startswith("SOLVE_TRI: declared without a rule") for line in stale)


def test_the_command_prints_each_part_with_its_file_and_line(reg, solve_tri):
    p = subprocess.run([sys.executable, "-m", "cannops.cli.main", "list", "ops", "--parts", "SOLVE_TRI"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    printed = {ln.split()[0] for ln in p.stdout.splitlines()[1:] if not ln.startswith("  node ")}
    assert printed == set(parts.PARTS)
    assert "  rule         backend/cann/rules_recurrent.py:" in p.stdout
    assert "MISSING" not in p.stdout and "missing:" not in p.stdout


@pytest.mark.parametrize("args, error", [
    (("ops", "--parts", "SOLVE_TRI,NOPE"), "--parts: unknown op 'NOPE' (`ops list ops` lists them)"),
    (("ops", "--parts", ","), "--parts ',' names no op"),
    (("cases", "--parts", "SOLVE_TRI"), "--parts lists the parts of ops (`ops list ops --parts OP`), not of cases")])
def test_bad_parts_input_is_one_line_and_status_2(args, error):
    p = subprocess.run([sys.executable, "-m", "cannops.cli.main", "list", *args],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [f"ops: error: {error}"]


def test_the_listing_says_what_is_missing_and_exits_1(reg, monkeypatch):
    monkeypatch.setattr(parts, "registries", lambda: dataclasses.replace(
        reg, references=_without(reg.references, "SOLVE_TRI")))
    printed = []
    assert parts.print_parts("ops", "SOLVE_TRI", printed.append) == 1
    text = "\n".join(printed)
    assert "    reference    MISSING" in text
    assert printed[-1] == "missing: SOLVE_TRI: node SOLVE_TRI: no reference (SOLVE_TRI)"
    monkeypatch.setattr(parts, "registries", lambda: reg)
    assert parts.print_parts("ops", "SOLVE_TRI", printed.append) == 0
