"""`ops fuzz` and the case names it prints: a planted bug found and shrunk, case names parsed
back into params (in the grid or off it), and Hypothesis' seed and database."""
import collections
import os
import re
import subprocess
import sys
import tempfile
import zlib

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from cannops.cases.catalog import Case
from cannops.cases.names import MAX_NAMED_BYTES, MAX_NAMED_TENSORS, case_from_name, parse_name
from cannops.cli.fuzz import INPUT_SEED, domain, fuzz
from cannops.cli.engine.selection import BadInput, select_cases
from cannops.cli.engine import RunSpec, WorkerPool

from _sample import _catalog

# this module's own @given tests keep Hypothesis' caches out of the working tree too
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="ops-test-hypothesis-"))

OPS = [sys.executable, "-m", "cannops.cli.main"]


def ops(*args, env):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **env))


def test_fuzz_finds_the_planted_bug_and_shrinks_it_to_the_smallest_shape(tmp_path):
    # FAULTY's mod7: wrong wherever the output's ne[0] % 7 == 3; the smallest such case
    # has ne0 = 3 and every other dim 1, its flags and types the grid's first values
    env = {"OPS_FAULTY": "mod7=ABS", "XDG_CACHE_HOME": str(tmp_path / "cache")}
    p = ops("fuzz", "-o", "ABS", "-b", "FAULTY", "--seed", "1", "--examples", "100", env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("  ABS(") and ln.endswith("FAIL"))
    name = line.strip().split(": ")[0]
    assert name == "ABS(type=f16,ne_a=[3,1,1,1],v=0)", p.stdout
    assert "NMSE = " in line
    assert f"reproduce: OPS_FAULTY=mod7=ABS ops test -b FAULTY -o '{name}'" in p.stdout
    # the examples database lives in the user's cache directory, not in the working tree
    assert any((tmp_path / "cache" / "ops" / "hypothesis").iterdir())
    assert not os.path.exists(".hypothesis")
    # the printed name is a case `ops test -o` runs, off the grid as it is
    rerun = ops("test", "-b", "FAULTY", "-o", name, env=env)
    assert rerun.returncode == 1 and f"  {line.strip()}" in rerun.stdout


def test_the_same_seed_draws_the_same_cases(tmp_path, monkeypatch):
    def drawn(seed, db):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / db))
        with WorkerPool("NUMPY", RunSpec(seed=INPUT_SEED, timeout=60)) as pool:
            out = fuzz("SSM_CONV", pool, 8, seed)
        assert out.minimal is None and out.counts["OK"] == 8, out
        return out.names
    first = drawn(5, "a")
    assert drawn(5, "b") == first
    assert drawn(6, "c") != first


def test_catalog_names_parse_back_into_their_params():
    by_family = collections.defaultdict(list)
    for c in _catalog("test"):
        by_family[c.family.name].append(c)
    for cases in by_family.values():
        for c in sorted(cases, key=lambda c: zlib.crc32(c.name.encode()))[:2]:
            back = case_from_name(c.name)
            assert (back.family, back.params) == (c.family, c.params), c.name


@pytest.mark.parametrize("op", ["ABS", "ADD", "SSM_CONV", "UPSCALE", "ROPE"])
def test_drawn_cases_are_named_and_built_back_from_their_names(op):
    strategy, _ = domain(st, op)
    built = []

    @settings(max_examples=20, phases=[Phase.generate], database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def check(drawn):
        fam, params = drawn
        try:
            case = Case(fam, params)
            case.build(MAX_NAMED_BYTES, MAX_NAMED_TENSORS)
        except (AssertionError, ValueError):
            return  # outside the family's domain, or more than a case by name may take
        back = case_from_name(case.name)
        assert back.name == case.name
        # every printed param comes back (a param no name prints, as in-place in ADD's fused
        # chains, cannot: test-backend-ops gives both cases one name)
        printed = set(parse_name(case.name)[1]) & set(params)
        assert {k: back.params[k] for k in printed} == {k: params[k] for k in printed}
        built.append(case.name)
    check()
    assert built
    assert all(parse_name(n)[0] == op for n in built)


def test_ops_test_runs_a_named_case_off_the_grid_and_refuses_a_bad_one():
    name = "SSM_CONV(type=f32,ne_a=[10,5,2,1],ne_b=[4,5,1,1])"
    [(_, case)] = select_cases("test", name)
    assert case.name == name and case.params["ne_a"] == [10, 5, 2, 1]
    for bad, why in (("SSM_CONV(type=f32,ne_a=[1,5,1,1],ne_b=[4,5,1,1])", "not a valid SSM_CONV case"),
                     ("SSM_CONV(type=f32,ne_a=[10,5,2,1])", "do not fit"),
                     ("SSM_CONV(type=f32,ne_a=[x,5,2,1],ne_b=[4,5,1,1])", "bad value")):
        with pytest.raises(BadInput, match=re.escape(why)):
            select_cases("test", bad)



def test_a_stop_swallowed_as_unraisable_is_not_reported_and_others_still_are(monkeypatch):
    # a signal that lands in a gc callback or a finalizer (Hypothesis installs one) comes
    # back to Python as unraisable: the Stop is recorded and the next draw raises it, so
    # its report is noise; any other unraisable exception is still reported
    from cannops.cli.fuzz import Stop, stop_on_signals
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda info: reported.append(info.exc_value))

    class Raises:
        def __init__(self, exc):
            self.exc = exc

        def __del__(self):
            raise self.exc
    with stop_on_signals():
        Raises(Stop(15))
        Raises(ValueError("kept"))
    Raises(Stop(2))
    assert [type(e).__name__ for e in reported] == ["ValueError", "Stop"], reported
