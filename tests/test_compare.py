"""The comparison of a device's output with the reference (cli/engine/compare.py): NMSE in
float64, NaN, and infinities (FLT_MAX counting as one), on values worked out by hand."""
import numpy as np
import pytest

from cannops.cli.engine.compare import FLT_MAX, compare, nmse


def test_nmse_is_worked_in_float64():
    ref = np.array([1.0, 2.0, -2.0], np.float32)
    out = np.array([1.0, 2.5, -2.0], np.float32)
    assert nmse(ref, out) == 0.25 / 9.0
    # float32 sums of these squares would lose the 1e-8 differences altogether
    ref = np.full(1000, 1.0, np.float32)
    out = ref + np.float32(1e-7)
    d = float(out[0]) - 1.0
    assert nmse(ref, out) == pytest.approx(d * d, rel=1e-12)
    assert nmse(np.zeros(2, np.float32), np.zeros(2, np.float32)) == 0.0
    assert nmse(np.zeros(2, np.float32), np.ones(2, np.float32)) == float("inf")


def test_infinities_and_flt_max_must_match_in_place_and_sign():
    ref = np.array([1.0, np.inf, -FLT_MAX, 3.0], np.float32)
    ok, _, e = compare("[X]", ref, np.array([1.0, FLT_MAX, -np.inf, 3.0], np.float32), 1e-7)
    assert ok and e == 0.0   # FLT_MAX counts as infinite; the finite part alone is compared
    ok, why, _ = compare("[X]", ref, np.array([1.0, -np.inf, -np.inf, 3.0], np.float32), 1e-7)
    assert not ok and "inf sign mismatch" in why
    ok, why, _ = compare("[X]", ref, np.array([1.0, np.inf, 5.0, 3.0], np.float32), 1e-7)
    assert not ok and "inf mismatch" in why and "NUMPY=-340282346638528859811704183484516925440.000000" in why
    ok, why, _ = compare("[X]", ref, np.array([1.0, np.inf, -np.inf, np.nan], np.float32), 1e-7)
    assert not ok and why.startswith("[X] NaN at index 3")


def test_the_quick_check_of_plain_values_changes_no_verdict(monkeypatch):
    """compare() skips its NaN and infinity checks where the minima and maxima show there is
    nothing for them (compare._plain): every verdict, reason and error is the full checks'."""
    from cannops.cli.engine import compare as cmp
    rng = np.random.default_rng(2)
    ref = rng.uniform(-3, 3, 1000).astype(np.float32)
    outs = [ref + np.float32(1e-2), ref.copy()]
    for i, bad in ((7, np.nan), (9, FLT_MAX), (11, -np.inf), (0, np.inf)):
        o = ref.copy()
        o[i] = bad
        outs.append(o)
    pairs = [(ref, o) for o in outs] + [(o, ref) for o in outs[2:]]
    quick = [compare("[X]", r, o, 1e-7) for r, o in pairs]
    monkeypatch.setattr(cmp, "_plain", lambda a: False)
    assert quick == [compare("[X]", r, o, 1e-7) for r, o in pairs]
    assert [q[0] for q in quick[:2]] == [False, True] and all(not q[0] for q in quick[2:])
    assert "NaN at index 7" in quick[2][1] and "inf mismatch" in quick[3][1]


@pytest.mark.parametrize("bad,why", [(np.nan, "NaN at index 2"), (FLT_MAX, "inf mismatch"),
                                     (-np.inf, "inf mismatch")])
def test_one_special_value_among_finite_ones_is_found_in_either_array(bad, why):
    """The finite-only shortcut (four reductions) must not hide a lone NaN, inf or FLT_MAX."""
    ref = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    out = ref.copy()
    out[2] = bad
    for r, o in ((ref, out), (out, ref)):
        ok, reason, _ = compare("[X]", r, o, 1e-7)
        assert not ok and why in reason
    assert compare("[X]", ref, ref.copy(), 1e-7) == (True, "", 0.0)
