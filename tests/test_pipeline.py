"""Workers hold several cases at a time (cli/workers.py PIPELINE): a crash or a timeout is
still the fault of the one case that was running, and the cases queued behind it run."""
import pytest

from cannops.cli import workers
from cannops.cli.workers import WorkerPool
from tests._sample import cases_of


@pytest.fixture
def faulty(monkeypatch):
    monkeypatch.setenv("OPS_FAULTY", "abort=ABS,segv=NEG,hang=EXP")
    monkeypatch.setitem(workers.PIPELINE, "test", 8)   # deeper than any fault's neighbours


def test_a_crash_or_timeout_blames_the_running_case_and_reruns_the_queued_ones(faulty):
    sgn = [c for c in cases_of("SGN") if "type=f32" in c.vars]
    tasks = [c for c in cases_of("ABS", "NEG", "EXP") if "type=f32" in c.vars][::4]
    # each fault with healthy cases behind it in the same worker's queue
    order = []
    for i, bad in enumerate(tasks):
        order += [bad] + sgn[2 * i:2 * i + 2]
    pool = WorkerPool("FAULTY", jobs=2, timeout=3)
    pool.start()
    try:
        got = dict(pool.run(enumerate(order), "test", 0))
    finally:
        pool.close()
    assert sorted(got) == list(range(len(order)))         # each case answered once
    for seq, case in enumerate(order):
        r = got[seq]
        assert (r.op, r.params) == (case.op, case.vars)
        want = {"ABS": "SIGABRT", "NEG": "SIGSEGV", "EXP": "timeout"}.get(case.op)
        if want:
            assert r.status == "FAIL" and want in r.reason, r.reason
        else:
            assert r.status == "OK", r.reason
