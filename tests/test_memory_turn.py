"""The memory turn (cli/engine/worker.py): a case whose tensors take a big share of the
host's memory waits, timed apart from the case, until no other worker of its run runs such
a case; a small case never waits."""
import threading
import time

from cannops.cli.engine.worker import MEMORY_TURN_BYTES, _InWorker


class Pipe:
    def __init__(self):
        self.sent = []

    def send(self, msg):
        self.sent.append(msg[0])


def test_one_big_case_at_a_time_and_the_wait_is_the_workers_own(tmp_path):
    lock = str(tmp_path / "memory-turn.lock")
    a, b = _InWorker(Pipe(), lock, jobs=2), _InWorker(Pipe(), lock, jobs=2)
    big = max(a.turn_bytes, 1)
    assert 0 < a.turn_bytes <= MEMORY_TURN_BYTES
    events = []

    def other():
        with b.memory_turn(big):
            events.append("b in")

    with a.memory_turn(big):
        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.3)
        events.append("a out")
    t.join(10)
    assert events == ["a out", "b in"]
    assert b.conn.sent == ["apart", "back"] and a.conn.sent == ["apart", "back"]
    # a small case neither waits nor tells the pool anything
    with a.memory_turn(big):
        with b.memory_turn(big - 1):
            events.append("small in")
    assert events[-1] == "small in" and b.conn.sent == ["apart", "back"]


def test_every_pool_of_a_run_shares_one_turn_and_the_run_removes_it(monkeypatch):
    """Pools open at once (several devices of a run) take turns with each other too: the
    runner gives every pool of the run one lock file, in a folder of its own it removes."""
    import os

    from cannops.cli.engine import RunSpec, select_cases
    from cannops.cli.engine import runner
    from cannops.cli.printers import QuietPrinter
    seen = []

    class Recording(runner.WorkerPool):
        def __init__(self, target, spec, **kw):
            seen.append(spec.turn_lock)
            super().__init__(target, spec, **kw)
    monkeypatch.setattr(runner, "WorkerPool", Recording)
    cases = select_cases("test", "ABS", params=r"type=f32,ne_a=\[128,2,2,2\],v=0", refs=True)
    run = runner.run_cases(cases, ["NUMPY", "GGML-CPU"], RunSpec(ref_cache=False), QuietPrinter("test"))
    assert [r.status for r in run.results] == ["OK", "OK"]
    assert len(seen) == 2 and seen[0] == seen[1] and seen[0].endswith("memory-turn.lock")
    assert not os.path.exists(os.path.dirname(seen[0]))
