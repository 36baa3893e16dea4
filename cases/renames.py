"""A case's name in another catalog version: how results of one test-backend-ops version
line up with those of another (baselines across a ggml upgrade).

A later version renames a case by printing new params after the old ones (`new_params`,
`Since.defaults`) or by printing other vars (`Since.fields`); the case is the same while
each new param holds its default. So a case of version A is, in version B:

  * older B: the name B's family prints for its params, if every param added after B
    holds its default (else it has no name there: it is new);
  * newer B: the name B's family prints for its params completed with the defaults of
    the params added after A.

The family must be in both versions (`since`, `until`). Whether B's grid lists that very
case is not asked: a name absent from B's results simply finds nothing there.
"""
from __future__ import annotations

from .catalog import Case, at_version, in_version
from .versions import key


def name_in(case: Case, version: str) -> str | None:
    """The case's name in catalog `version`, None where it has none (see the module)."""
    here = case.family.version
    if not here or version == here:
        return case.name
    other = at_version(case.family.name, version)
    if not in_version(other, version):
        return None
    lo, hi = sorted((here, version), key=key)
    between = [d for d in case.family.changes if key(lo) < key(d.version) <= key(hi)]
    params = dict(case.params)
    if key(version) < key(here):
        for d in between:
            if any(k in params and params[k] != v for k, v in d.defaults.items()):
                return None
    else:
        for d in between:
            params = {**d.defaults, **params}
    try:
        return f"{other.op_name(params)}({other.vars_str(params)})"
    except KeyError:   # a var the other version prints that these params lack
        return None


def mapping(cases, version: str) -> dict[str, str]:
    """name -> its name in `version`, for the cases that have one."""
    out = {}
    for c in cases:
        n = name_in(c, version)
        if n is not None:
            out[c.name] = n
    return out


def aliases(names, mode: str, version: str, others) -> dict[str, list[str]]:
    """For each of `names` (cases of catalog `version`, in `mode`: test, support, grad or
    perf), its names in the catalog versions `others` that differ from it."""
    from .catalog import all_cases
    others = [v for v in others if v != version]
    wanted = set(names)
    out: dict[str, list[str]] = {}
    if not others or not wanted:
        return out
    for c in all_cases("perf" if mode == "perf" else "test", version):
        if c.name in wanted:
            alt = [n for n in (name_in(c, v) for v in others) if n is not None and n != c.name]
            if alt:
                out[c.name] = alt
    return out
