"""Comparison of a device's output with the reference, as test-backend-ops does it:
NaN anywhere fails, infinities (FLT_MAX counts as one) must match in sign, then an error
metric (NMSE by default) must stay under the case's threshold."""
from __future__ import annotations

import numpy as np

FLT_MAX = np.finfo(np.float32).max


def to_f32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).reshape(-1)


def nmse(ref: np.ndarray, out: np.ndarray) -> float:
    """mse(ref, out) / mse(ref, 0), in double precision: each element widened as the ufunc
    reads it, into one float64 buffer (the widened copies, difference and square were four:
    2 GiB more for GET_ROWS' 67M-element output); the same sums as over widened arrays."""
    acc = np.subtract(ref, out, dtype=np.float64)
    num = float(np.sum(np.square(acc, out=acc)))
    den = float(np.sum(np.multiply(ref, ref, out=acc, dtype=np.float64)))
    if den == 0.0:
        return 0.0 if num == 0.0 else float("inf")
    return num / den


def _inf(a: np.ndarray) -> np.ndarray:
    """Where a (NaN-free) is infinite or +-FLT_MAX, without a float temporary of |a|."""
    return (a >= FLT_MAX) | (a <= -FLT_MAX)


def compare(label: str, ref: np.ndarray, out: np.ndarray, threshold: float,
            err=None, err_name: str = "NMSE", dev_name: str = "DEV") -> tuple[bool, str, float | None]:
    """(ok, reason, error value). `label` names the node, e.g. "[ADD]"."""
    r, o = to_f32(ref), to_f32(out)
    if r.shape != o.shape:
        return False, f"{label} shape mismatch: NUMPY {r.size} values, {dev_name} {o.size}", None
    if _special(r, o):
        bad = _specials(label, r, o, dev_name)
        if isinstance(bad, str):
            return False, bad, None
        r, o = bad
    e = float(err(r, o)) if err is not None else nmse(r, o)
    if not e <= threshold:
        return False, f"{label} {err_name} = {e:.9f} > {threshold:.9f}", e
    return True, "", e


def _special(r: np.ndarray, o: np.ndarray) -> bool:
    """Whether r or o holds a NaN, an infinity or +-FLT_MAX: four reductions and no
    temporaries, where the masks of _specials were a dozen passes and four bool arrays
    (GET_ROWS' 67M-element output: 0.3 GiB)."""
    if r.size == 0:
        return False
    lo, hi = np.minimum(r.min(), o.min()), np.maximum(r.max(), o.max())   # NaN propagates
    return not (-FLT_MAX < lo and hi < FLT_MAX)   # a NaN fails both


def _specials(label: str, r: np.ndarray, o: np.ndarray, dev_name: str):
    """NaN anywhere fails; infinities must match in sign: why not, or the finite parts."""
    nan = np.isnan(r) | np.isnan(o)
    if nan.any():
        i = int(np.argmax(nan))
        return f"{label} NaN at index {i} (NUMPY={r[i]:f} {dev_name}={o[i]:f})"
    rinf, oinf = _inf(r), _inf(o)
    if rinf.any() or oinf.any():
        bad = rinf != oinf
        if bad.any():
            i = int(np.argmax(bad))
            return f"{label} inf mismatch: NUMPY={r[i]:f} {dev_name}={o[i]:f}"
        sign = rinf & (np.signbit(r) != np.signbit(o))
        if sign.any():
            i = int(np.argmax(sign))
            return f"{label} inf sign mismatch: NUMPY={r[i]:f} {dev_name}={o[i]:f}"
        # compare the finite part only, as infinities already matched
        keep = ~rinf
        r, o = r[keep], o[keep]
    return r, o


def bit_difference(a: np.ndarray, b: np.ndarray) -> str:
    """How two outputs of the same case differ bit for bit ("": they do not): the count of
    elements, the first one's flat index and both values (--repeat)."""
    from cannops.backend.hygiene import number
    a, b = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    if a.dtype != b.dtype or a.size != b.size:
        return f"{a.dtype}[{a.size}] against {b.dtype}[{b.size}]"
    differ = np.flatnonzero((a.view(np.uint8).reshape(a.size, -1) != b.view(np.uint8).reshape(b.size, -1)).any(axis=1))
    if not differ.size:
        return ""
    i = int(differ[0])
    return f"{differ.size} of {a.size} elements, first at index {i}: {number(a[i])} then {number(b[i])}"


def worst_elements(ref: np.ndarray, out: np.ndarray, n: int = 5) -> list[list]:
    """The n elements furthest from the reference, as [flat index, got, expected]; NaN and
    inf differences first."""
    r, o = to_f32(ref), to_f32(out)
    if r.shape != o.shape:
        return []
    with np.errstate(all="ignore"):
        diff = np.abs(r.astype(np.float64) - o.astype(np.float64))
    diff[~np.isfinite(diff)] = np.inf
    idx = np.argsort(-diff, kind="stable")[:n]
    return [[int(i), float(o[i]), float(r[i])] for i in idx if diff[i] > 0]


def worst_lines(worst: list[list]) -> list[str]:
    """worst_elements() for a reader, one line each."""
    if not worst:
        return []
    return ["worst elements (flat index: got, expected):",
            *(f"  [{i}]: {got:.9g}, {want:.9g}" for i, got, want in worst)]


def trace_lines(r) -> list[str]:
    """A result's call trace for a reader (backend/trace.py's compact form), the blamed
    call marked '>'; none when it has no trace."""
    if not r.trace:
        return []
    from cannops.backend import trace
    blamed, _ = trace.blame(r.trace, r.threshold, r.error)
    return [f"calls on {r.device}:", *trace.compact(r.trace, blamed)]
