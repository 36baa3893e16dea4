"""How far a perf figure can be trusted (cli/engine/perf_measure.py): batches until the spread
is known, the machine's contention, and the doubts a figure carries."""
import itertools
import os

import pytest

from cannops.cli.engine import perf_measure as pm


def test_relative_mad_is_robust_to_one_disturbed_batch():
    assert pm.relative_mad([10.0, 10.0, 10.0, 10.0, 300.0]) == 0.0
    assert pm.relative_mad([9.0, 10.0, 11.0]) == pytest.approx(0.1)
    assert pm.relative_mad([1.0, 2.0]) is None          # two batches say nothing of a spread


def test_steady_batches_stop_once_the_spread_is_known():
    m = pm.measure(lambda n: n * 1e-4, n_runs=10, min_seconds=0.02)
    assert len(m.per_run) == 20                        # --min-time, then stable at once
    assert m.runs == 10 * 20
    assert m.seconds_per_run == pytest.approx(1e-4) and m.spread == 0.0
    assert not any("spread" in d for d in m.doubts)
    m = pm.measure(lambda n: n * 1e-4, n_runs=1, min_seconds=1e-4, max_seconds=1.0)
    assert len(m.per_run) == pm.MIN_BATCHES            # never fewer batches than that


def test_noisy_batches_run_to_the_cap_and_are_marked_wide():
    times = itertools.cycle([0.01, 0.02, 0.01, 0.03, 0.015])
    m = pm.measure(lambda n: next(times), n_runs=1, min_seconds=0.05)
    assert sum(x for x in m.per_run) >= 0.05
    assert m.spread > pm.WIDE_SPREAD
    assert any(d.startswith("wide spread: ±") for d in m.doubts)


def test_a_long_graph_is_cut_to_batches_of_their_share():
    # 1000 runs of 1 ms would take 1 s: one run is timed, then batches of their share of 0.5 s
    sizes = []
    m = pm.measure(lambda n: (sizes.append(n), n * 1e-3)[1], n_runs=1000, min_seconds=0.5)
    assert sizes[0] == 1 and set(sizes[1:]) == {100}
    assert m.runs == sum(sizes[1:]) and m.seconds_per_run == pytest.approx(1e-3) and m.spread == 0.0
    # 10 runs of 0.3 s: batches of one run, the first of them the timed one
    sizes.clear()
    m = pm.measure(lambda n: (sizes.append(n), n * 0.3)[1], n_runs=10, min_seconds=0.5)
    assert set(sizes) == {1} and m.runs == len(sizes) == len(m.per_run) >= 3 and m.spread == 0.0
    # a graph that fits min_seconds keeps test-backend-ops' n_runs
    sizes.clear()
    pm.measure(lambda n: (sizes.append(n), n * 1e-5)[1], n_runs=1000, min_seconds=0.5)
    assert sizes[0] == 1 and set(sizes[1:]) == {1000}


def test_batches_shrink_when_the_machine_slows_down_mid_case():
    # the probe run says 100 runs fit a batch share; then every run takes 50 times longer:
    # the next batch is cut to the share at the new speed, and never grows back
    sizes = []
    slow = iter([False] + [True] * 1000)
    m = pm.measure(lambda n: (sizes.append(n), n * (5e-3 if next(slow) else 1e-4))[1],
                   n_runs=100, min_seconds=0.5)
    assert sizes[:3] == [1, 100, 20]                  # 0.1 s share / 5 ms a run
    assert set(sizes[2:]) == {20} and m.seconds_per_run == pytest.approx(5e-3)
    assert pm.batch_runs(100, 1e-4, 0.5) == 100       # 10 ms a graph: test-backend-ops' graph
    assert pm.batch_runs(100, 0.01, 0.5) == 10        # 1 s a graph: a tenth of it
    assert pm.batch_runs(100, 5.0, 0.5) == 1


def test_a_batch_longer_than_the_cap_leaves_the_spread_unknown():
    m = pm.measure(lambda n: 2.0, n_runs=1, min_seconds=0.1)
    assert len(m.per_run) == 1 and m.spread is None
    assert "spread unknown (1 batch)" in m.doubts


def test_other_processes_cpu_marks_the_machine_busy(monkeypatch):
    # the machine's busy time less this process' own, per second of wall time
    stats = iter([(100.0, 0.0, 400.0), (103.0, 0.0, 404.0)])
    clock = iter([10.0, 12.0])
    own = iter([5.0, 6.0])
    monkeypatch.setattr(pm, "_proc_stat", lambda: next(stats))
    monkeypatch.setattr(pm.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(pm.time, "process_time", lambda: next(own))
    m = pm.Watch().stop()
    assert m.contention == pytest.approx(1.0)          # (3 s busy - 1 s ours) / 2 s
    assert m.busy == "other processes used 1.00 cores"
    assert pm.Machine(0.1, 0.05, 0.0).busy == ""
    assert "stolen" in pm.Machine(0.1, 0.0, 0.2).busy


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux' /proc/stat")
def test_proc_stat_reads_the_machine_counters():
    busy, steal, total = pm._proc_stat()
    assert 0 < busy <= total and 0 <= steal <= total
    later = pm._proc_stat()
    assert later[2] >= total
