"""Workers hold several cases at a time (cli/engine/pool.py PIPELINE): a crash or a timeout is
still the fault of the one case that was running, and the cases queued behind it run."""
import pytest

from cannops.cli.engine import pool as workers
from cannops.cli.engine import RunSpec, WorkerPool
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
    pool = WorkerPool("FAULTY", RunSpec(timeout=3, jobs=2))
    pool.start()
    try:
        got = {reply.seq: reply.result for reply in pool.run(enumerate(order))}
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


class _Case:
    def __init__(self, vars):
        self.vars = vars


class _W:
    def __init__(self, slot):
        self.slot = slot


def test_cases_of_a_costly_quantizer_table_go_to_the_slot_that_built_it():
    kinds = ["type=f32", "type_a=iq1_s", "type=f16", "type_a=iq2_xs", "type_a=iq1_m", "type=q4_0",
             "type_a=iq2_xs", "type_a=iq1_s"]
    queue = workers._Queue(enumerate(_Case(v) for v in kinds), dropped=set())
    a, b = _W(0), _W(1)
    assert [s for s, _ in queue.take(a, 2)] == [0, 1]          # a builds the iq1 table
    assert [s for s, _ in queue.take(b, 3)] == [2, 3, 5]       # b the iq2_xs one; iq1_m is a's
    assert [s for s, _ in queue.take(a, 1)] == [4]             # iq1_m shares iq1_s' table
    queue.put_back([(4, _Case("type_a=iq1_m"))])               # a crashed before running it
    assert not [s for s, _ in queue.take(b, 4) if s in (4, 7)]
    assert [s for s, _ in queue.take(a, 4)] == [4, 7]
    assert len(queue) == 0


def test_a_dropped_slots_tables_go_to_the_others():
    dropped = set()
    queue = workers._Queue(enumerate(_Case(v) for v in ["type_a=iq1_s"] * 3), dropped)
    a, b = _W(0), _W(1)
    queue.take(a, 1)
    assert not queue.has_work_for(b)
    dropped.add(0)                      # no worker could take slot 0 again
    assert [s for s, _ in queue.take(b, 5)] == [1, 2]


def test_building_a_quantizer_table_is_not_the_cases_time():
    """iq1_s' table takes seconds of CPU to build (8.8 s on the wheel's libggml): its first
    case is not a timeout for it, however short the timeout."""
    case = [c for c in cases_of("MUL_MAT") if "type_a=iq1_s" in c.vars][0]
    pool = WorkerPool("GGML-CPU", RunSpec(timeout=2))
    pool.start()
    try:
        (reply,) = pool.run([(0, case)])
        r = reply.result
    finally:
        pool.close()
    assert r.status == "OK", r.reason
