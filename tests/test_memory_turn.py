"""A pool's memory turn (cli/engine/worker.py): a case whose tensors take a big share of the
host's memory waits, timed apart from the case, until no other worker of its pool runs such
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
