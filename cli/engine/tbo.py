"""A test-backend-ops binary as a device: its processes (tbo_process.py) driven op by op
(as the Ascend CI runs it), its crashes isolated, its cases' lines (read by tbo_console.py)
gathered into CaseResults of a `Run`.

How a binary is driven, whatever its ggml version or runtime (CANN on an Ascend host, the
CANN simulator, any other ggml backend):

* `BINARY support -b DEV` lists every case once, in enumeration order (test mode runs
  them in that order): the case names, the devices, their descriptions; whole-graph cases
  run, unlisted, with their op.
* `BINARY test -b DEV -o OP [-p REGEX]` runs one op (`MODES`: a mode's word and the reader
  of its console).
* With a test-export-graph-ops file (`--test-file FILE`, in ggml 0.9.8 already: `takes_test_file`),
  both modes list and run that file's graph nodes (test_generic_op) instead of the grid.
* A process that dies prints no line for the case that killed it: that case is the first
  listed one without a line. It FAILs with the death's story, and the op goes on from the
  case after it (the rest named in a params regex, CHUNK names a process), then one last
  process runs what no listing names and no process reached (an exclusion regex). A
  process out of time goes on the same way; a case that alone outlasts the limit FAILs.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import dataclass, fields
from enum import Enum
from typing import BinaryIO, Callable

from cannops.backend.cost import COST_SWITCH, summarise

from .results import FAIL, SKIPPED, CaseResult, Run
from .selection import BadInput, parse_shard
from . import tbo_replay
from .perf_measure import Watch
from .tbo_perf import PerfReader, with_machine
from .tbo_console import Line, Listing, ListingReader, Reader, death_story, is_death, worst
from .tbo_process import Proc, Processes, Stop, one_process, open_log

CHUNK = 200        # cases named in one params regex when an op goes on (one argument: 128 KiB at most)
INDEX_STRIDE = 1_000_000   # a case's index: its op's position * INDEX_STRIDE + its position in the op
SOURCE_KEYS = ("kind", "name", "layout", "ggml_version", "git", "sha256", "variant", "soc", "built")
MAX_ARG = 100_000   # characters of one -p argument (Linux takes 128 KiB)


@dataclass(frozen=True)
class TboMode:
    """A mode of test-backend-ops as ops tbo runs it: the word that asks for it on the
    command line, and the reader of its console (each case's line to `on_case`)."""
    word: str
    reader: Callable[[Callable[[Line], None]], Reader]


MODES = {"test": TboMode("test", Reader), "perf": TboMode("perf", PerfReader)}


# --- the binary ---------------------------------------------------------------------------

def check_binary(binary: str) -> str:
    """The binary's absolute path, checked: a file that can be run."""
    if not os.path.exists(binary):
        raise BadInput(f"{binary}: no such file")
    if os.path.isdir(binary):
        raise BadInput(f"{binary} is a directory, not a test-backend-ops binary")
    if not os.access(binary, os.X_OK):
        raise BadInput(f"{binary} is not executable")
    return os.path.abspath(binary)


def takes_test_file(binary: str, timeout: float = 60) -> bool:
    """Whether the binary reads --test-file: its usage, which an unknown argument prints, lists it."""
    reader = Reader()
    one_process([binary, "--help"], timeout, reader, None)
    return any("--test-file" in s for s in reader.side)


def list_cases(binary: str, device: str | None = None, timeout: float = 600,
               test_file: str | None = None, env: dict | None = None) -> Listing:
    """Every case the binary has (those of `test_file` where given), from its support mode
    (one process: ~1 s for 19,000 cases); run with `env` added (TboSpec.environment), which
    tells whether it runs on the simulated toolkit (Listing.simulator)."""
    cmd = [binary, "support"] + (["-b", device] if device else []) + _test_file_args(test_file)
    listing = ListingReader()
    one_process(cmd, timeout, listing.reader, env)
    found = listing.listing()
    if found is None:
        tail = " | ".join(listing.reader.side[-3:])
        raise BadInput(f"{binary} is not a test-backend-ops (its support mode named no device"
                       + (f"; it printed: {tail[:200]}" if tail else "") + ")")
    return found


def binary_source(binary: str, ggml_version: str | None = None, source: str | None = None) -> dict:
    """Where the binary's ggml comes from: `source.json` of `make ggml-cann` beside its
    bin/ (or in it), else only the binary; --ggml-version / --source given win."""
    out: dict = {"binary": binary}
    here = os.path.dirname(binary)
    for path in (os.path.join(os.path.dirname(here), "source.json"), os.path.join(here, "source.json")):
        try:
            with open(path, encoding="utf-8") as f:
                found = json.load(f)
        except (OSError, ValueError):
            continue
        if isinstance(found, dict):
            out.update({k: found[k] for k in SOURCE_KEYS if found.get(k) is not None})
            break
    if ggml_version:
        out["ggml_version"] = ggml_version
    if source:
        out["name"] = source
    return out


# --- a run's settings ---------------------------------------------------------------------

@dataclass(frozen=True)
class TboSpec:
    """An `ops tbo` run, as the results file records it and every op's runner sees it."""
    binary: str
    devices: tuple[str, ...]
    ops: tuple[str, ...]                  # every op of the selection, in run order (before --shard)
    params: tuple[tuple[str, str], ...] = ()   # (op or "", regex): -p REGEX and -p OP=REGEX
    timeout: float = 600.0                # seconds a test-backend-ops process may take
    jobs: int = 1                         # ops run side by side
    max_aborts: int = 200                 # per op: deaths after which its other cases are not run
    shard: str | None = None
    test_file: str | None = None          # a test-export-graph-ops file: its cases, not the grid
    cases: tuple[str, ...] = ()           # the full names a --cases file selects (each gets a result)
    # on the simulated toolkit (its support mode said so): every case's calls recorded, a
    # FAIL's kept (every case's with trace); its hygiene switches (docs/hygiene.md)
    simulated: bool = False
    trace: bool = False
    poison: bool = False
    check_inputs: bool = False
    mode: str = "test"                    # the binary's mode each op's processes run (MODES)
    cost: bool = False                    # each case's device work counted (CANN_SIM_COST)

    def regex(self, op: str) -> str | None:
        return op_regex(self.params, op)

    def environment(self) -> dict[str, str]:
        """What the binary's test processes get in their environment."""
        if not self.simulated:
            return {}
        return {**simulator_environment(self.poison, self.check_inputs), **({COST_SWITCH: "1"} if self.cost else {})}


def simulator_environment(poison: bool = False, check_inputs: bool = False) -> dict[str, str]:
    """The simulated toolkit's switches for a test-backend-ops process (a real CANN ignores
    them): its calls framed into its stdout (CANN_SIM_TRACE), and the hygiene modes asked
    for. A mode not asked for is left as the environment has it: the first record says
    which were on (Listing.simulator)."""
    env = {"CANN_SIM_TRACE": "1"}
    if poison:
        env["CANN_SIM_POISON"] = "1"
    if check_inputs:
        env["CANN_SIM_CHECK_INPUTS"] = "1"
    return env


def hygiene_modes(simulator: dict | None) -> str | None:
    """The simulator's hygiene switches that were on, as a results file records them."""
    sim = simulator or {}
    on = ["poison"] * bool(sim.get("poison")) + ["check-inputs"] * bool(sim.get("check_inputs"))
    return ",".join(on) or None


def op_regex(params: tuple[tuple[str, str], ...], op: str) -> str | None:
    """The params regex that applies to `op`: its own -p OP=REGEX, else a plain -p REGEX."""
    per_op = [rx for o, rx in params if o == op]
    common = [rx for o, rx in params if not o]
    chosen = per_op or common
    return chosen[-1] if chosen else None


def exact_params(params: list[str]) -> str:
    """A params regex (ECMAScript, as test-backend-ops reads -p) selecting exactly these."""
    return "^" + _alternatives(params) + "$"


def _test_file_args(test_file: str | None) -> list[str]:
    return ["--test-file", test_file] if test_file else []


def _alternatives(names: list[str]) -> str:
    return "(" + "|".join(re.escape(n) for n in names) + ")"


# --- one op -------------------------------------------------------------------------------

class Step(Enum):
    """What the next process of an op runs."""
    ALL = "all"       # the op's whole selection in one process (the first, unless resumed)
    CHUNK = "chunk"   # listed cases not seen yet, by name (CHUNK of them)
    REST = "rest"     # every case not seen yet, by exclusion: the unlisted ones (whole-graph
    #                   cases under the op's own name: ADD with nf=2) that a process ended
    #                   early never reached


@dataclass
class OpJob:
    """One op on one device, as run_tbo hands it to run_op: `listed`, its cases in
    enumeration order (after -p); `known`, params -> result of a resumed run (not run
    again); each new result goes to `emit` as it comes; the console to `log`."""
    device: str
    op: str
    number: int                  # its place among every op (its cases' indexes)
    listed: list[str]
    known: dict[str, CaseResult]
    emit: Callable[[CaseResult], None]
    log: BinaryIO | None = None


@dataclass
class OpProgress:
    """Where an op stands between two of its processes."""
    step: Step
    aborts: int = 0                     # its processes' deaths so far
    suspect: CaseResult | None = None   # a death laid on the next listed case until it runs alone
    unnamed: bool = False               # an unlisted case's death (`#N`) has its result already


def _op_command(spec: TboSpec, job: OpJob, step: Step, pending: list[str], seen: list[str]
                ) -> tuple[list[str] | None, list[str]]:
    """One process's command line for `step`, and the cases it names (Step.CHUNK); None
    where the cases to exclude are too many for one argument."""
    regex = spec.regex(job.op)
    cmd = [spec.binary, MODES[spec.mode].word, "-b", job.device, "-o", job.op] + _test_file_args(spec.test_file)
    if step is Step.ALL:
        return cmd + (["-p", regex] if regex else []), []
    if step is Step.CHUNK:
        chunk = pending[:CHUNK]
        return cmd + ["-p", exact_params(chunk)], chunk
    rest = _excluding(seen, regex)
    return (None if rest is None else cmd + ["-p", rest]), []


def _unprinted(device: str, op: str, expected: list[str], got: dict, orphans: list[str],
               why: str = "not run: test mode printed no line for this listed case") -> list[CaseResult]:
    """The expected cases that have no result: where a process ended well, an allocation
    failure prints no line (`orphans`: a FAIL each, in order); the others were not run."""
    return [CaseResult(device=device, op=op, params=p, status=FAIL, reason=orphans.pop(0)) if orphans else
            CaseResult(device=device, op=op, params=p, status=SKIPPED, reason=why)
            for p in expected if p not in got]


def run_op(spec: TboSpec, procs: Processes, job: OpJob) -> list[CaseResult]:
    """Every case of one op on one device, from as many processes as its deaths take; the
    new results, each also sent to `job.emit` as it came."""
    return _OpRun(spec, procs, job).run()


class _OpRun:
    """run_op's work: one process after another, each step chosen by how the last ended."""

    def __init__(self, spec: TboSpec, procs: Processes, job: OpJob):
        self.spec, self.procs, self.job = spec, procs, job
        self.got: dict[str, CaseResult] = dict(job.known)
        self.order = {p: k for k, p in enumerate(job.listed)}
        regex = spec.regex(job.op)
        self.rx = re.compile(regex) if regex else None
        self.out: list[CaseResult] = []
        self.extra = sum(p not in self.order for p in self.got)   # unlisted cases known already
        self.fails_read = 0   # FAIL lines the current process printed for the op
        self.replayer = tbo_replay.Replayer(spec.simulated and spec.mode == "test")   # a FAIL's numeric blame
        self.state = OpProgress(Step.CHUNK if self.got else Step.ALL,
                                unnamed=any(r.params.startswith("#") and is_death(r) for r in job.known.values()))

    def pending(self) -> list[str]:
        return [p for p in self.job.listed if p not in self.got]

    def keep(self, r: CaseResult) -> None:
        k = self.order.get(r.params, len(self.job.listed) + self.extra)
        self.extra += r.params not in self.order
        r.index = self.job.number * INDEX_STRIDE + k
        self.got[r.params] = r
        self.out.append(r)
        self.job.emit(r)

    def on_case(self, line: Line) -> None:
        if line.op != self.job.op:
            return
        if line.params not in self.order and line.params not in self.got and self.rx \
                and not self.rx.search(line.params):
            return   # an unlisted case the -p regex leaves out
        self.fails_read += line.status == FAIL
        r = _traced(line.result(self.job.device), self.spec)
        r = self.replayer(r, is_death(r), lambda env: _rerun(self.spec, self.procs, self.job.device, r, env))
        kept = self.got.get(line.params)
        if kept is None:
            self.keep(r)
        else:   # a name printed again (test-backend-ops prints some twice)
            _merge(kept, r)
            self.job.emit(kept)   # again: the journal and the console get what it is now

    def run(self) -> list[CaseResult]:
        if self.state.unnamed and not self.pending():
            return self.out   # an unnamed death ended it before: nothing after it can be reached
        while self.next_process():
            pass
        return self.out

    def next_process(self) -> bool:
        """Run the op's next process and read how it ended; whether another one follows."""
        st, spec, job = self.state, self.spec, self.job
        pending = self.pending()
        if st.suspect is not None:
            pending = [st.suspect.params]   # the suspect runs alone
        if st.step is Step.CHUNK and not pending:
            st.step = Step.REST
        cmd, chunk = _op_command(spec, job, st.step, pending, list(self.got))
        if cmd is None:
            return False   # too many names for one argument: the unlisted rest is not reached
        before, self.fails_read, first = len(self.got), 0, len(self.out)
        watch = Watch(children=True) if spec.mode == "perf" else None   # the machine around the measurements
        proc = self.procs.run(cmd, spec.timeout, MODES[spec.mode].reader(self.on_case), job.log,
                              spec.environment())
        if watch is not None:
            with_machine(self.out[first:], watch.stop())
        if proc.interrupted:
            return False
        self.settle_suspect()
        if proc.reader.finished and not proc.timed_out and proc.rc in (0, 1):
            return self.ended_well(proc, chunk, pending)
        if proc.timed_out and len(self.got) > before:
            if st.step is Step.ALL:
                st.step = Step.CHUNK
            return True   # cases were still finishing: none to blame, the rest goes on
        return self.died(proc, chunk)

    def settle_suspect(self) -> None:
        """A suspect that printed its line alone: the death was an unlisted case's before it."""
        st = self.state
        if st.suspect is not None and st.suspect.params in self.got:
            self.keep(_unlisted_death(st.suspect, len(self.got) + 1))
            st.unnamed, st.suspect = True, None

    def ended_well(self, proc: Proc, chunk: list[str], pending: list[str]) -> bool:
        """A listed case of this process without a line: an allocation failure prints none.
        A process whose own summary (or exit status) says FAIL where no FAIL line was read:
        a FAIL of the run, never an OK."""
        step, reader = self.state.step, proc.reader
        expected = chunk if step is Step.CHUNK else pending if step is Step.ALL else []
        for r in _unprinted(self.job.device, self.job.op, expected, self.got, reader.orphans()):
            self.keep(r)
            self.fails_read += r.status == FAIL
        said = reader.said_fail + ([f"exit status {proc.rc}"] if proc.rc else [])
        if said and not self.fails_read:
            self.keep(CaseResult(
                device=self.job.device, op=self.job.op, params=f"#{len(self.got) + 1}", status=FAIL,
                reason=f"the binary said FAIL ({'; '.join(said)}) but printed no FAIL line ops could read: "
                       "a FAIL of the process, not of a named case"))
        return step is Step.CHUNK

    def died(self, proc: Proc, chunk: list[str]) -> bool:
        """A process that died (or ran out of time with no case done): its case FAILs."""
        st, reader = self.state, proc.reader
        victim = self.victim(reader, chunk)
        after = "" if victim else ON_THE_WAY_OUT if st.step is Step.CHUNK else UNNAMED
        death = _death(self.spec, proc, self.job.device, self.job.op, victim or f"#{len(self.got) + 1}", after)
        st.aborts += 1
        was, st.step = st.step, Step.CHUNK
        if victim is None:
            if was is Step.CHUNK:   # every case it named printed its line: it died on its way out
                self.keep(death)
                return self.below_max_aborts()
            if not st.unnamed:   # an unlisted case that died before dies again in Step.REST
                self.keep(death)
            return False
        if reader.head is None and st.suspect is None and was is Step.ALL and not proc.timed_out:
            # test mode prints a case's line after its calls, and runs the op's unlisted
            # whole-graph cases among its listed ones: the next listed case is only a suspect
            # until it dies alone (or prints its line, and the death was an unlisted case's)
            st.suspect = death
            return True
        st.suspect = None
        self.keep(death)
        return self.below_max_aborts()

    def below_max_aborts(self) -> bool:
        """Whether the op goes on after a death; at --max-aborts, its other cases not run."""
        st = self.state
        if st.aborts < self.spec.max_aborts:
            return True
        why = f"not run: the op died {st.aborts} times (--max-aborts {self.spec.max_aborts})"
        for r in _unprinted(self.job.device, self.job.op, self.job.listed, self.got, [], why):
            self.keep(r)
        return False

    def victim(self, reader: Reader, chunk: list[str]) -> str | None:
        """The case a process died in: the one an old ggml named before running it, else the
        first case it was to run without a line: of those it named (Step.CHUNK), of the
        listed ones (Step.ALL); none in Step.REST (an unlisted one, unnamed)."""
        if reader.head is not None and reader.head.op == self.job.op:
            return reader.head.params
        step = self.state.step
        if step is Step.REST:
            return None
        return next((p for p in (chunk if step is Step.CHUNK else self.job.listed) if p not in self.got), None)


def _merge(kept: CaseResult, again: CaseResult) -> None:
    """A case name printed twice, as one result: the worse line's status and reason, the
    other line's status (and reason) said after it."""
    worse, other = (again, kept) if worst(kept.status, again.status) != kept.status else (kept, again)
    note = f"(its name printed twice: the other line {other.status}" + (
        f": {other.reason.splitlines()[0]}" if other.reason else "") + ")"
    for f in fields(CaseResult):
        if f.name != "index":
            setattr(kept, f.name, getattr(worse, f.name))
    kept.reason = (kept.reason + "\n" if kept.reason else "") + note


def _rerun(spec: TboSpec, procs: Processes, device: str, r: CaseResult, env: dict) -> tuple | None:
    """One case run again alone, `env` added: (its Line or None, the exit status); None
    where the run was interrupted."""
    lines: list[Line] = []
    reader = MODES[spec.mode].reader(lambda line: lines.append(line) if (line.op, line.params) == (r.op, r.params)
                                     else None)
    cmd = [spec.binary, MODES[spec.mode].word, "-b", device, "-o", r.op, "-p", exact_params([r.params])] + \
        _test_file_args(spec.test_file)
    proc = procs.run(cmd, spec.timeout, reader, None, {**spec.environment(), **env})
    return None if proc.interrupted else (lines[0] if lines else None, proc.rc)


def _death(spec: TboSpec, proc: Proc, device: str, op: str, params: str, after: str = "") -> CaseResult:
    """The FAIL of the case a process died in, with the calls since the last case line: its
    own, up to the one that killed it. `#N`: no case to blame (`after` says why)."""
    reader = proc.reader
    story = death_story(proc.rc, reader.side, spec.timeout if proc.timed_out else None)
    return _traced(CaseResult(device=device, op=op, params=params, status=FAIL, reason=story + after,
                              trace=reader.calls_now(), seconds=round(time.monotonic() - reader.last, 6)),
                   spec)


UNNAMED = ("\n(after the op's listed cases: an unlisted whole-graph case, which has no name until it prints, "
           "or the process's exit; the op stops here)")
ON_THE_WAY_OUT = ("\n(after every case this process named had printed its line: on its way out; the op goes on "
                  "with the cases after them)")


def _unlisted_death(death: CaseResult, n: int) -> CaseResult:
    """A death first laid on the listed case after it, which then passed alone: it was an
    unlisted whole-graph case's, between the two."""
    death.reason += (f"\n(laid first on {death.params}, which printed its line when run alone: the process died "
                     "in an unlisted whole-graph case before it, which has no name until it prints)")
    death.params = f"#{n}"
    return death


def _traced(r: CaseResult, spec: TboSpec) -> CaseResult:
    """A result's calls (on the simulated toolkit) kept where it FAILed, or every case's
    with --trace; a FAIL whose trace has a refused call names the first as its blame, as
    ops test does. With --cost, its device work summed from them (backend/cost.py), and
    the records that only count taken out of its trace."""
    if spec.cost:
        r.cost = summarise(r.trace)
        r.trace = [c for c in r.trace if "args" in c or "cost" not in c]
        if r.n_runs:   # perf: the runs it timed (the count holds its warm-up compute too)
            r.cost["runs"] = r.n_runs
    if r.status != FAIL:
        if not spec.trace:
            r.trace = []
    from cannops.backend import callsite
    callsite.resolve(r.trace)   # the kept calls' sites: function, file, line
    if r.status == FAIL and r.trace:
        from cannops.backend.trace import blame
        i, why = blame(r.trace, None, None)
        if i is not None:
            r.blame = why
    return r


def _excluding(names: list[str], regex: str | None) -> str | None:
    """A params regex (ECMAScript, as test-backend-ops' std::regex reads it) for the cases
    not in `names` that `regex` selects; None where it would not fit one argument."""
    rx = "^(?!" + _alternatives(names) + "$)" if names else ""
    if regex:
        rx += "(?=[\\s\\S]*?(?:" + regex + "))" if rx else regex
    return rx if len(rx) <= MAX_ARG else None


# --- a run --------------------------------------------------------------------------------

def shard_ops(ops: list[str], cost: Callable[[str], int], shard: str | None) -> list[str]:
    """The ops of shard K/N: the ops dealt, costliest first, to the shard with the least
    cost so far (the same deal in every shard: it depends only on the listing)."""
    if not shard:
        return ops
    k, n = parse_shard(shard)
    load = [0] * n
    mine = set()
    for op in sorted(ops, key=lambda o: (-cost(o), o)):
        s = min(range(n), key=lambda i: (load[i], i))
        load[s] += cost(op)
        if s == k - 1:
            mine.add(op)
    return [op for op in ops if op in mine]


def run_tbo(spec: TboSpec, listing: Listing, run: Run, known: dict[tuple[str, str], CaseResult], sink,
            log_dir: str | None = None) -> None:
    """Each device's ops, spec.jobs of them side by side. The new results go to `run` and
    to `sink.result` as they come (any order); `sink.device_start(device, n_cases)`,
    `sink.op_done(device, op, results, seconds)` in op order (resumed results included)
    and `sink.device_end(device)` frame them; a lock serialises the calls. On SIGINT /
    SIGTERM every process is killed and the run is marked interrupted: what finished is in
    `run`. `known`: (device, case name) -> result of a resumed run, not run again."""
    procs = Processes()
    # an op's number (its cases' indexes) is its place among every op, whatever the shard
    op_no = {op: i for i, op in enumerate(sorted(set(spec.ops) | set(listing.cases)))}
    ops = shard_ops(list(spec.ops), listing.cost, spec.shard)
    device_run = _DeviceRun(spec, procs, run, known, sink, log_dir)
    with Stop(procs) as stop:
        for device in spec.devices:
            if procs.stopped.is_set():
                break
            device_run.run(device, ops, op_no, listing)
    if stop.signals:
        run.interrupted = True
        run.exit_status = 128 + stop.signals[0]


class _DeviceRun:
    """run_tbo's ops on one device after another."""

    def __init__(self, spec: TboSpec, procs: Processes, run: Run, known: dict, sink, log_dir: str | None):
        self.spec, self.procs, self.log_dir = spec, procs, log_dir
        self.run_, self.known, self.sink = run, known, sink
        self.lock = threading.Lock()
        self.emitted: set[int] = {id(r) for r in run.results}   # (the results live as long as the run)

    def emit(self, r: CaseResult) -> None:
        """A new result, or one changed (a name printed twice): in the run once, to the sink each time."""
        with self.lock:
            if id(r) not in self.emitted:
                self.emitted.add(id(r))
                self.run_.results.append(r)
            self.sink.result(r)

    def run(self, device: str, ops: list[str], op_no: dict[str, int], listing: Listing) -> None:
        """Its ops, spec.jobs at a time; each op's results to the sink in op order."""
        from concurrent.futures import ThreadPoolExecutor
        # support mode lists the test grid; perf mode runs another (test-backend-ops' perf
        # cases): its cases are those it prints, none listed beforehand
        selected = {op: [] if self.spec.mode == "perf" else _selected(listing.cases.get(op, []), self.spec.regex(op))
                    for op in ops}
        self.sink.device_start(device, sum(map(len, selected.values())))
        with ThreadPoolExecutor(max_workers=self.spec.jobs) as pool:
            futures = [(op, pool.submit(self.one, device, op, op_no[op], selected[op])) for op in ops]
            for op, fut in futures:
                while not fut.done():   # the main thread stays free for the signal handler
                    time.sleep(0.05)
                results, seconds = fut.result()
                if self.procs.stopped.is_set():
                    continue   # (each result went to sink.result as it came)
                with self.lock:
                    self.sink.op_done(device, op, results, seconds)
        if not self.procs.stopped.is_set():
            self.sink.device_end(device)

    def one(self, device: str, op: str, number: int, listed: list[str]) -> tuple[list[CaseResult], float]:
        """One op's results (resumed ones first) and the seconds it took."""
        t0 = time.monotonic()
        mine = {r.params: r for (d, _), r in self.known.items() if d == device and r.op == op}
        log = None
        if self.log_dir:
            log = open_log(self.log_dir, _log_name(op, device, len(self.spec.devices)))
        try:
            new = run_op(self.spec, self.procs, OpJob(device, op, number, listed, mine, self.emit, log))
        finally:
            if log is not None:
                log.close()
        if not self.procs.stopped.is_set():
            new += _not_among_its_cases(self.spec, device, op, number, {**mine, **{r.params: r for r in new}},
                                        self.emit)
        return list(mine.values()) + new, time.monotonic() - t0


def _not_among_its_cases(spec: TboSpec, device: str, op: str, op_no: int, got: dict[str, CaseResult],
                         emit: Callable[[CaseResult], None]) -> list[CaseResult]:
    """A result for each case of spec.cases of this op that the binary neither lists nor
    printed a line for: a name off its grid (a model's own shapes), not run."""
    prefix = f"{op}("
    wanted = [n[len(prefix):-1] for n in spec.cases if n.startswith(prefix)]
    why = (f"not run: {os.path.basename(spec.binary)} has no such case (its support mode does not list it "
           f"and its test mode printed no line for it)")
    out = _unprinted(device, op, wanted, got, [], why)
    after = max((r.index % INDEX_STRIDE for r in got.values()), default=-1) + 1
    for k, r in enumerate(out):
        r.index = op_no * INDEX_STRIDE + after + k
        emit(r)
    return out


def _selected(listed: list[str], regex: str | None) -> list[str]:
    if not regex:
        return listed
    rx = re.compile(regex)
    return [p for p in listed if rx.search(p)]


def _log_name(op: str, device: str, n_devices: int) -> str:
    """OP (one device) or OP.DEVICE, its characters those of a plain file name."""
    name = op if n_devices == 1 else f"{op}.{device}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)
