"""Case names back into cases: `OP(k=v,...)` parsed into a family's params.

A case is named by its op and its `vars` string; the params printed there are read back
with the types of the family's grid points (ints, bools as 0/1, floats as %f, type names,
nested [a,b] lists), and the params a name does not print (the unary op of ABS, a flag
that only shows in the op name) come from the grid point the name resembles most. A
name is accepted only when the case built from it carries exactly that name, so that
`ops test -o 'OP(params)'` runs any point of a family's domain, in the grid or not
(e.g. a case `ops fuzz` found).
"""
from __future__ import annotations

import functools
from typing import Any

from .catalog import Case, Params, all_cases, fmt_value
from .graph import TooLarge
from .types import GGMLType, ggml_type
from .untrusted import quoted
from .versions import current

# what a case named from outside (-o, --cases, a model's derivation) may ask for, checked as its
# graph is built: its own tensors' bytes (a few dims of 10^5 make terabytes; the catalog's
# largest cases take a few GiB) and its tensors (the catalog's largest make 52; a count of
# 10^23 in a name would make that many)
MAX_NAMED_BYTES = 16 << 30
MAX_NAMED_TENSORS = 4096


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at the separators outside brackets."""
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == sep and depth == 0:
            items.append("".join(cur))
            cur = []
            continue
        depth += (ch in "([") - (ch in ")]")
        cur.append(ch)
    items.append("".join(cur))
    return items


def parse_name(name: str) -> tuple[str, dict[str, str]]:
    """'OP(a=1,ne=[2,3])' -> ('OP', {'a': '1', 'ne': '[2,3]'}); a field without '=' keeps
    its text as its key."""
    op, paren, rest = name.strip().partition("(")
    if not paren or not rest.endswith(")"):
        raise ValueError(f"{name!r} is not a case name OP(params)")
    fields = {}
    for item in split_top(rest[:-1]):
        key, eq, text = item.partition("=")
        fields[key] = text if eq else key
    return op, fields


def parse_like(text: str, like: Any) -> Any:
    """`text` (as fmt_value prints it) read back as a value of like's type."""
    if isinstance(like, bool):
        if text not in ("0", "1"):
            raise ValueError(f"expected 0 or 1, got {text!r}")
        return text == "1"
    if isinstance(like, int):
        return int(text)
    if isinstance(like, float):
        return float(text)
    if isinstance(like, GGMLType):
        return ggml_type(text)
    if isinstance(like, (list, tuple)):
        if not (text.startswith("[") and text.endswith("]")):
            raise ValueError(f"expected a list [a,b,...], got {text!r}")
        inner = text[1:-1]
        items = split_top(inner) if inner else []
        if like and len(items) != len(like):   # every family's lists have one length (ne: 4)
            raise ValueError(f"expected a list of {len(like)} items, got {len(items)}")
        elem = like[0] if like else 0
        return type(like)(parse_like(t, elem) for t in items)
    return text


def _params_from(fields: dict[str, str], template: Params, seen: dict[str, dict[str, Any]]) -> dict:
    """The template's params with every printed field read from the name: a value the grid
    prints that way is taken as is (floats printed as %f lose digits), any other is parsed."""
    params = dict(template)
    for key, text in fields.items():
        if key not in template:
            continue
        known = seen.get(key, {})
        try:
            params[key] = known[text] if text in known else parse_like(text, template[key])
        except ValueError as e:   # int('x') says neither the field nor the value in full
            raise ValueError(f"{key}={quoted(text, 40)}: {e}") from None
    return params


def printed_values(points) -> dict[str, dict[str, Any]]:
    """Per param of the grid points (params dicts), each value they hold, by how a case
    name prints it."""
    seen: dict[str, dict[str, Any]] = {}
    for p in points:
        for k, v in p.items():
            seen.setdefault(k, {}).setdefault(fmt_value(v), v)
    return seen


def cases_by_op(mode: str) -> dict[str, list[Case]]:
    """The catalog's cases of a mode, per op name (enumerated once per process and catalog
    version)."""
    return _cases_by_op(mode, current())


@functools.lru_cache(maxsize=None)
def _cases_by_op(mode: str, version: str) -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {}
    for c in all_cases(mode, version):
        out.setdefault(c.op, []).append(c)
    return out


def _templates(op: str, mode: str):
    return _templates_at(op, mode, current())


@functools.lru_cache(maxsize=64)
def _templates_at(op: str, mode: str, version: str) -> tuple[list[Case], dict[str, dict[str, Any]]]:
    """The grid points of `op` (perf: its eval grid too, for the family's other shapes), and
    per param how each value the grid holds is printed."""
    templates = list(cases_by_op(mode).get(op, ()))
    if mode == "perf":
        templates += cases_by_op("test").get(op, [])
    return templates, printed_values(c.params for c in templates)


def case_from_name(name: str, mode: str = "test") -> Case:
    """The case named `name`, in the grid or not; ValueError says why there is none."""
    op, fields = parse_name(name)
    grid_mode = "perf" if mode == "perf" else "eval"
    templates, seen = _templates(op, mode)
    if not templates:
        raise ValueError(f"unknown op {quoted(op)}")

    def likeness(c: Case) -> int:
        return sum(k in c.params and fmt_value(c.params[k]) == t for k, t in fields.items())

    why = f"its params do not fit any {op} family (see `ops list cases -o {op}`)"
    tried = set()
    for c in sorted(templates, key=likeness, reverse=True):
        hidden = repr(sorted((k, v) for k, v in c.params.items() if k not in fields))
        if set(fields) - set(c.params) - set(parse_name(c.name)[1]) or (c.family.name, hidden) in tried:
            continue  # a printed field the family does not have; these hidden params tried already
        tried.add((c.family.name, hidden))
        try:
            case = Case(c.family, _params_from(fields, c.params, seen), grid_mode)
        except (ValueError, TypeError, KeyError, IndexError) as e:
            why = f"bad value: {e}"
            continue
        if case.name != name.strip():
            continue
        try:
            case.build(MAX_NAMED_BYTES, MAX_NAMED_TENSORS)
        except TooLarge as e:
            raise ValueError(f"too large: {e}") from None
        except Exception as e:  # the family's own validation (an assert, a ValueError)
            raise ValueError(f"not a valid {op} case: {type(e).__name__}: {e}") from None
        return case
    raise ValueError(why)
