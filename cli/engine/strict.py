"""`ops test --strict`: a per-element check on top of the case's NMSE.

test-backend-ops judges a case by one number (NMSE over the whole output); a wrong formula
whose error is small next to the output's energy passes it (tanh-GELU for erf-GELU). The
strict check bounds every element instead: |out - ref| <= atol + rtol * |ref|, the form of
PyTorch's assert_close and of Ascend's operator precision standard, with PyTorch's
per-dtype defaults (integer outputs exact). A family may declare a looser bound for some
of its cases (catalog.Tolerance), always with its reason; the checker holds no per-op
knowledge. See docs/strict.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cannops.cases.catalog import Case

STANDARD = "ops-strict/1: |out-ref| <= atol + rtol*|ref| per element; torch.testing.assert_close defaults"

# (rtol, atol) per output type: torch.testing.assert_close's defaults for the float types
# (shared/PRECISION.md, in the shared folder beside the checkout); integers are exact;
# quantized outputs (values decoded from their blocks) are judged like the f16 they are a
# coarser form of, families loosen them
DEFAULT = {"f32": (1.3e-6, 1e-5), "f16": (1e-3, 1e-5), "bf16": (1.6e-2, 1e-5), "f64": (1e-7, 1e-7)}
EXACT = (0.0, 0.0)
QUANTIZED = DEFAULT["f16"]


@dataclass(frozen=True)
class Bound:
    rtol: float
    atol: float
    why: str               # the default's name, or the family's reasons for loosening it
    atol_rms: float = 0.0  # an absolute part in units of the reference's root mean square

    def text(self) -> str:
        rms = f" (or {self.atol_rms:.3g}*rms(ref))" if self.atol_rms else ""
        return f"atol {self.atol:.3g}{rms} + rtol {self.rtol:.3g}*|ref| ({self.why})"


def default_bound(type_name: str, is_quantized: bool) -> Bound:
    if type_name in DEFAULT:
        return Bound(*DEFAULT[type_name], f"{type_name} default")
    if is_quantized:
        return Bound(*QUANTIZED, f"{type_name} default")
    return Bound(*EXACT, f"{type_name}: exact")


def bound(case: Case, implements: tuple[str, ...], node) -> Bound:
    """The output type's default, loosened by each of the family's tolerances that
    concern this case on a device running `implements` (cases/implementations.py; a
    tolerance never tightens it)."""
    b = default_bound(node.type.name, node.type.is_quantized)
    for t in case.family.strict:
        if (not t.impl or t.impl in implements) and t.when(case.params):
            why = t.reason if b.why.endswith("default") else f"{b.why}; {t.reason}"
            b = Bound(max(b.rtol, t.rtol), max(b.atol, t.atol), why, max(b.atol_rms, t.atol_rms))
    return b


@dataclass
class Strict:
    ok: bool
    max_abs: float
    max_rel: float
    worst: int           # flat element index (ggml order) most over its bound
    reason: str = ""


def check(label: str, ref: np.ndarray, out: np.ndarray, b: Bound, dev_name: str) -> Strict:
    """Every finite element within the bound (NaN and infinities are the NMSE check's)."""
    r = np.asarray(ref, np.float64).reshape(-1)
    o = np.asarray(out, np.float64).reshape(-1)
    keep = np.isfinite(r) & np.isfinite(o)
    if not keep.any():
        return Strict(True, 0.0, 0.0, -1)
    idx = np.flatnonzero(keep)
    r, o = r[keep], o[keep]
    err = np.abs(o - r)
    # the rms of the values formed: exact zeros (padding, masked or empty windows) formed
    # no sum, and would shrink the scale of the rounding of those that did
    n = np.count_nonzero(r)
    atol = max(b.atol, b.atol_rms * float(np.sqrt(np.dot(r, r) / n)) if n else 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(r != 0, err / np.abs(r), np.where(err == 0, 0.0, np.inf))
        over = err / (atol + b.rtol * np.abs(r))         # > 1: outside the bound
    over = np.where(err == 0, 0.0, over)
    i = int(np.argmax(over))
    s = Strict(bool(over[i] <= 1.0), float(err.max()), float(rel.max()), int(idx[i]))
    if not s.ok:
        n_bad = int(np.count_nonzero(over > 1.0))
        s.reason = (f"{label} strict: {n_bad}/{r.size} elements over {b.text()}; worst element "
                    f"{s.worst}: NUMPY={r[i]:.9g} {dev_name}={o[i]:.9g} |err|={err[i]:.3g} "
                    f"(max abs err {s.max_abs:.3g}, max rel err {s.max_rel:.3g})")
    return s
