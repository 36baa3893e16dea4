"""pytest plugin: `pytest --ops-op SSM_CONV --ops-device GGML-CPU` collects each case as a
test item named by its case name, so that -k, -x, --lf, --junitxml and pytest-xdist work
on cases as on tests.

Each item runs as `ops test` runs the case (cli/engine/execute.py), in a worker process of the
device (cli/engine/pool.py: a crash or a hang is that item's failure); a FAIL shows the error
figures and the elements furthest from the reference. Without --ops-op the plugin only
adds its options: nothing is imported, nothing collected.
"""
from __future__ import annotations

import os
import signal
import threading

import pytest

# the signal (SIGINT, SIGTERM, SIGHUP) that stopped the session, once one came
STOPPED: list[int] = []
# pytest-xdist's workers, in its controller: a signal to the controller alone is theirs too
XDIST_WORKERS: list[int] = []
XDIST_WORKER = False   # this process is one of them


def _stop(signum, frame):
    if STOPPED and XDIST_WORKER:
        return   # the controller passes on the group's signal: one stop is enough
    STOPPED.append(signum)
    for pid in XDIST_WORKERS:
        try:
            os.kill(pid, signum)   # at once, not after xdist's 10 s wait for their queues
        except OSError:
            pass
    raise KeyboardInterrupt


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_newgateway(gateway):
    if signal.getsignal(signal.SIGINT) is _stop:   # with --ops-op
        XDIST_WORKERS.append(gateway._rinfo().pid)   # as xdist's own reporter reads it


def pytest_configure(config):
    """With --ops-op, Ctrl-C, SIGTERM and SIGHUP stop the session wherever it is, as `ops test`:
    in a pytest-xdist worker too (which went on through its whole queue, a hung case at a
    time, and reported a pass). Installed in the main thread only, as signal() requires."""
    global XDIST_WORKER
    XDIST_WORKER = hasattr(config, "workerinput")
    if config.option.ops_op:
        check_options(config.option)
    if config.option.ops_op and threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, _stop)


def check_options(opts) -> None:
    """Every plugin option through the validators of the option of `ops test` it stands for
    (cli/options.py): a bad value is a usage error before anything runs, never a run of
    device failures (a timeout of inf overflowed the worker's wait)."""
    from .engine import BadInput
    from .options import check_seconds, check_seed, ops_text
    try:
        ops_text(tuple(opts.ops_op))
        check_seconds("--ops-timeout", opts.ops_timeout)
        check_seed("--ops-seed", opts.ops_seed)
    except BadInput as e:
        raise pytest.UsageError(f"ops: {e}") from None


def pytest_sessionfinish(session, exitstatus):
    """A session stopped by a signal never ends as a pass: its status is ops test's, and
    its summary line counts the items it did not reach ("170 passed, 1355 not run
    (interrupted)", not "170 passed"), under pytest-xdist too (in the controller)."""
    if not STOPPED:
        return
    session.exitstatus = 128 + STOPPED[0]
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        done = {r.nodeid for key in ("passed", "failed", "skipped", "error", "xfailed", "xpassed")
                for r in reporter.stats.get(key, ()) if hasattr(r, "nodeid")}
        left = session.testscollected - len(done)
        if left > 0:
            reporter.stats["not run (interrupted)"] = [NotRun()] * left
            # the reporter caches the kinds its summary line counts (pytest 7-9): recounted
            if hasattr(reporter, "_known_types"):
                reporter._known_types = None


class NotRun:
    """An item an interrupt kept from running, as the summary line counts it."""
    count_towards_summary = True


def pytest_addoption(parser):
    group = parser.getgroup("ops", "ggml op cases (ops test) as test items")
    group.addoption("--ops-op", action="append", metavar="OPS", default=[],
                    help="Op names or full case names (repeat or comma list): one test item per case.")
    group.addoption("--ops-device", action="append", metavar="DEVICE", default=[],
                    help="Device(s) to test (repeat or comma list); default: every device but NUMPY.")
    group.addoption("--ops-seed", type=int, default=0, help="Seed of the input data (as ops test --seed).")
    group.addoption("--ops-timeout", type=float, default=60.0,
                    help="Seconds a case may take before it fails (its worker is replaced).")


class OpsError(Exception):
    """A case that is not OK: its result, for the failure report."""

    def __init__(self, result):
        super().__init__(result.reason)
        self.result = result


class DeviceCases(pytest.Collector):
    """The cases of one device; its workers start with its first case and stop at the end."""

    def __init__(self, *, target, cases, **kw):
        super().__init__(**kw)
        self.target, self.cases, self.pool = target, cases, None

    def collect(self):
        return [CaseItem.from_parent(self, name=item_name(case), nodeid=f"{self.nodeid}::{item_name(case)}",
                                     case=case) for case in self.cases]

    def run(self, case):
        from cannops.cli.engine import RunSpec, WorkerPool
        opts = self.config.option
        try:
            if STOPPED:
                raise KeyboardInterrupt
            if self.pool is None:
                spec = RunSpec(seed=opts.ops_seed, timeout=opts.ops_timeout, timeout_given=True)
                self.pool = WorkerPool(self.target, spec)
                self.pool.start()
            result = next(self.pool.run([(0, case)])).result
        except KeyboardInterrupt:
            self.close()   # its busy worker killed now, not at the session's end
            pytest.exit(f"interrupted ({signal.Signals(STOPPED[0] if STOPPED else signal.SIGINT).name})",
                        returncode=128 + (STOPPED[0] if STOPPED else signal.SIGINT))
        return result

    def close(self):
        if self.pool is not None:
            self.pool.close()
            self.pool = None
            from cannops.cli.engine import reap_children
            reap_children()


def item_name(case) -> str:
    """OP[params]: the case name with its params in pytest's parametrisation brackets. pytest
    reads a node id's first '[' as the start of params that run to its last character: a
    name ending in ')' would come back from its caches and reports with a ']' more."""
    return f"{case.op}[{case.vars}]"


class CaseItem(pytest.Item):
    def __init__(self, *, case, **kw):
        super().__init__(**kw)
        self.case = case
        self.extra_keyword_matches.add(case.name)   # -k matches the case name itself too

    def runtest(self):
        from cannops.cli.engine import DEVIATION, FAIL, NOT_SUPPORTED, OK, SKIPPED
        r = self.parent.run(self.case)
        if r.status == NOT_SUPPORTED or r.status == SKIPPED:
            pytest.skip(f"{r.status} [{r.blamed}]" + (f" {r.reason}" if r.reason else ""))
        if r.status == FAIL:
            raise OpsError(r)
        assert r.status in (OK, DEVIATION), r.status

    def repr_failure(self, excinfo):
        if not isinstance(excinfo.value, OpsError):
            return super().repr_failure(excinfo)
        return failure_text(excinfo.value.result)

    def reportinfo(self):
        return self.path, None, f"{self.case.name} on {self.parent.target.label}"


def failure_text(r) -> str:
    """A FAIL as `ops test` prints it, with its error figures and worst elements."""
    from cannops.cli.engine import trace_lines, worst_lines
    lines = [f"{r.name} on {r.device}: FAIL", *r.reason.splitlines()]
    if r.error is not None:
        lines.append(f"{r.metric or 'error'} = {r.error:.9g} (threshold {r.threshold:.9g})")
    if r.blame:
        lines.append(f"blame: {r.blame}")
    return "\n".join(lines + worst_lines(r.worst) + trace_lines(r))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    """The session's collection gets one collector per device, next to the test files."""
    report = yield
    if isinstance(collector, pytest.Session) and collector.config.option.ops_op and report.passed:
        report.result.extend(device_collectors(collector))
    return report


def device_collectors(session) -> list[DeviceCases]:
    from cannops.backend.base import list_devices
    from cannops.cases.cache import ForeignFolder
    from cannops.cli.engine import BadInput, select_cases, select_devices
    opts = session.config.option
    try:
        cases = [c for _, c in select_cases("test", ",".join(opts.ops_op))]
        targets = select_devices(tuple(opts.ops_device), list_devices())
    except (BadInput, ForeignFolder) as e:
        raise pytest.UsageError(f"ops: {e}") from None
    if not targets:
        raise pytest.UsageError("ops: no device available (see `ops list devices`)")
    groups = [DeviceCases.from_parent(session, name=t.label, nodeid=f"ops::{t.label}", target=t, cases=cases)
              for t in targets]
    for group in groups:
        session.config.add_cleanup(group.close)
    return groups
