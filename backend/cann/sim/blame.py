"""Each traced operator call evaluated again in float64 on the inputs it really had: its
own error, the figure the blame (backend/trace.py) names a call by.

A call's plan (the simulator's model of the operator, aclnn.py) is computed once more with
dtypes.exact() on: floating arithmetic in float64, nothing rounded to the deduced type or
through the cube's math mode. Its own error is the NMSE of what the device wrote against
that: a call that computes as its page says has the error of its output type's rounding
(`floor`, kept beside it); a wrong dtype, a lossy math mode or a narrowing cast has more.
A call that is wrong by its arguments (a scale, a view) computes them faithfully: its own
error is small, and the blame cannot see it."""
from __future__ import annotations

import numpy as np

from . import dtypes
from .trace import Ran, Recording


def nmse(got: np.ndarray, exact: np.ndarray) -> float:
    """NMSE of `got` against `exact` in float64; inf where they differ in being finite."""
    g = np.asarray(got, np.float64).reshape(-1)
    e = np.asarray(exact, np.float64).reshape(-1)
    fg, fe = np.isfinite(g), np.isfinite(e)
    if (fg != fe).any():
        return float("inf")
    gn, en = g[~fg], e[~fe]
    if not ((gn == en) | (np.isnan(gn) & np.isnan(en))).all():   # inf of the other sign, NaN for inf
        return float("inf")
    g, e = g[fe], e[fe]
    num, den = float(np.sum((g - e) ** 2)), float(np.sum(e * e))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def evaluate(rec: Recording) -> None:
    """Add `own_nmse` (and `floor_nmse`, the output type's own rounding) to every call
    whose run was kept; `exact_error` where the float64 evaluation itself failed."""
    for i, ran in rec.ran.items():
        evaluate_one(ran, rec.calls[i])


def evaluate_one(ran: Ran, call: dict) -> None:
    """One call's `own_nmse` and `floor_nmse` (or `exact_error`) from its kept run."""
    try:
        with dtypes.exact(), np.errstate(all="ignore"):
            results = ran.plan.compute(*ran.inputs)
    except Exception as e:  # noqa: BLE001 - a model that cannot run in f64 blames nothing
        call["exact_error"] = f"{type(e).__name__}: {e}"
        return
    if not isinstance(results, tuple):
        results = (results,)
    own = floor = 0.0
    for t, got, r in zip(ran.plan.outputs, ran.outputs, results):
        r = np.asarray(r)
        if r.dtype.kind == "c" or got.dtype.kind == "c":
            continue
        with np.errstate(all="ignore"):
            exact = np.broadcast_to(r.astype(np.float64), got.shape)
            own = max(own, nmse(got, exact))
            floor = max(floor, nmse(dtypes.convert(exact, t.dtype), exact))
    call["own_nmse"], call["floor_nmse"] = own, floor
