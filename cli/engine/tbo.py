"""A test-backend-ops binary as a device: run op by op (as the Ascend CI runs it), its
crashes isolated, its console read line by line into CaseResults of a `Run`.

How a binary is driven, whatever its ggml version or runtime (CANN on an Ascend host, the
CANN simulator, any other ggml backend):

* `BINARY support -b DEV` lists every case once, in enumeration order (test mode runs
  them in that order): the case names, the devices, their descriptions. Whole-graph cases
  (fused ones, RMS_NORM_MUL_ADD, and some under a listed op's name, ADD with nf=2) are not
  in that listing; they run, unlisted, with their op.
* `BINARY test -b DEV -o OP [-p REGEX]` runs one op.
* With a test-export-graph-ops file (`--test-file FILE`, in ggml 0.9.8 already: `takes_test_file`),
  both modes list and run that file's graph nodes (test_generic_op) instead of the grid. Its stdout and stderr are read as one
  stream, so that what a case printed on stderr (an assert, `CANN error`, the simulator's
  `CANN-SIM refused:`) comes before the case's own line, or before the death.
* A process that dies prints no line for the case that killed it: that case is the first
  listed one without a line. It FAILs with the death's story, and the op goes on from the
  case after it (the rest named in a params regex, CHUNK names a process), then one last
  process runs what no listing names and no process reached (an exclusion regex). A
  process out of time goes on the same way; a case that alone outlasts the limit FAILs.

Output lines, of ggml 0.9 to 0.25 (tests/test-backend-ops.cpp, console_printer):
`  OP(params): OK`, `  OP(params): not supported [DEV] `, and a FAIL led by its checks on
the same line: `[OP] ERR = 0.1 > 0.0000001 `, `[OP] NaN at index 3 (CANN0=nan CPU=1.0) `,
`[OP] inf mismatch: ...`, `sentinel mismatch: NAME `, `compare failed `, then
`  OP(params): FAIL`. A failed allocation prints `failed to allocate tensors [DEV] ` and
no case line at all.
"""
from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from cannops.backend.cost import COST_SWITCH, summarise

from .results import FAIL, NOT_SUPPORTED, OK, SKIPPED, CaseResult, DeviceInfo, Run
from .runner import STOP_SIGNALS, leave_hung_up_terminal
from .selection import BadInput, parse_shard

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# a case line: optional check fragments, the two-space indent, the name, the status
CASE = re.compile(r"^(?P<pre>.*?)\s{2}(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*)\): "
                  r"(?P<status>OK|FAIL|not supported.*|SUPPORTED|NOT SUPPORTED|skipping.*)\s*$")
# ggml before its printer (2025): the name printed and flushed before the case ran
CASE_HEAD = re.compile(r"^(?P<pre>.*?)\s{2}(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*?)\): (?P<rest>.*)$")
STATUS_ONLY = re.compile(r"^(?P<pre>.*?)(?P<status>OK|FAIL|not supported.*)\s*$")
BACKEND = re.compile(r"^Backend (?P<i>\d+)/(?P<n>\d+): (?P<name>\S+)\s*$")
DESCRIPTION = re.compile(r"^  Device description: (?P<d>.*?)\s*$")
MEMORY = re.compile(r"^  Device memory: (?P<total>\d+) MB \((?P<free>\d+) MB free\)")
SKIPPING = re.compile(r"^  Skipping\b")
FINISHED = re.compile(r"^\d+/\d+ backends passed")
# check fragments, as test-backend-ops prints them before a FAIL
ERR = re.compile(r"\[(?P<node>[^\]]+)\] ERR = (?P<err>\S+) > (?P<thr>\S+)")
NAN = re.compile(r"\[(?P<node>[^\]]+)\] NaN at index (?P<i>\d+) \(\S+?=(?P<got>\S+) \S+?=(?P<exp>[^\s)]+)\)")
FRAGMENTS = re.compile(r"\[[^\]]+\] (?:ERR = \S+ > \S+|NaN at index \d+ \([^)]*\)|inf (?:sign )?mismatch: \S+ \S+"
                       r"|MAA = \S+ > \S+|nonfinite gradient at index \d+ \([^)]*\))"
                       r"|sentinel mismatch: \S+|compare failed|failed to allocate (?:weight )?tensors(?: \[[^\]]*\])?")
ALLOC = re.compile(r"failed to allocate (?:weight )?tensors(?: \[[^\]]*\])?")
# the story of a death, on stderr
ASSERT = re.compile(r"(?P<where>[^\s:]+:\d+): (?P<what>GGML_ASSERT\(.*\) failed|.*)$")
CANN_ERROR = re.compile(r"^(CANN error: .*|  current device: .*|CANN-SIM refused: .*)$")
FRAME_GDB = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(?P<fn>[^\s(]+)")
FRAME_GLIBC = re.compile(r"\((?P<fn>[A-Za-z_][^+)]*)\+0x[0-9a-f]+\)\[0x")
NOT_BLAMED = ("ggml_print_backtrace", "ggml_abort", "ggml_log_internal", "__GI___wait4", "__GI_raise", "raise",
              "abort", "__pthread_kill", "waitpid", "__libc_waitpid", "ggml_cann_error")

CHUNK = 200        # cases named in one params regex when an op goes on (one argument: 128 KiB at most)
INDEX_STRIDE = 1_000_000   # a case's index: its op's position * INDEX_STRIDE + its position in the op
SOURCE_KEYS = ("kind", "name", "layout", "ggml_version", "git", "sha256", "variant", "soc", "built")
LOG_MARK = "$ "     # an --log-dir log: each process's console follows a line `$ COMMAND`
DEATHS = ("aborted (", "died (", "timeout:")   # how death_story begins: a FAIL that is a death


# --- reading the console ----------------------------------------------------------------

@dataclass
class Line:
    """One case as the console gave it."""
    op: str
    params: str
    status: str                 # OK / not supported / FAIL / skipped
    checks: list[str] = field(default_factory=list)   # the FAIL's check fragments
    side: list[str] = field(default_factory=list)     # stderr-ish lines printed while it ran
    seconds: float = 0.0        # since the line before (the first: since the process started)
    calls: list[dict] = field(default_factory=list)   # on the simulated toolkit: its ACL / aclnn calls

    def result(self, device: str) -> CaseResult:
        r = CaseResult(device=device, op=self.op, params=self.params, status=self.status,
                       seconds=round(self.seconds, 6), trace=self.calls)
        story = self.checks + [s for s in self.side if CANN_ERROR.match(s)]
        if self.status == FAIL:
            r.reason = "; ".join(self.checks) or "FAIL"
            extra = [s for s in story if s not in self.checks]
            if extra:
                r.reason += "\n" + "\n".join(extra)
            m = next((m for m in map(ERR.search, self.checks) if m), None)
            if m:
                r.error, r.threshold, r.metric = _num(m["err"]), _num(m["thr"]), "ERR"
            n = next((n for n in map(NAN.search, self.checks) if n), None)
            if n:
                r.metric = r.metric or "NaN"
                r.worst = [[int(n["i"]), _num(n["got"]), _num(n["exp"])]]
        elif self.status == NOT_SUPPORTED and self.checks:
            # "[CANN0]", or "[CANN0, CPU]" / "[CPU]" where the reference cannot compute it
            names = [n.strip() for n in self.checks[0].strip("[]").split(",")]
            if device not in names:
                r.by = names[0]
            elif len(names) > 1:
                r.reason = f"not supported by {', '.join(names)}"
        return r


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


class Reader:
    """test-backend-ops' console, fed a line at a time: the devices it names and the case
    lines, each with the lines printed since the one before (`on_case`)."""

    def __init__(self, on_case: Callable[[Line], None] | None = None):
        self.on_case = on_case or (lambda line: None)
        self.devices: dict[str, DeviceInfo] = {}
        self.skipped: set[str] = set()
        self.device: str | None = None
        self.side: list[str] = []       # printed since the last case line
        self.head: Line | None = None   # an old ggml's case named, its status not yet printed
        self.finished = False           # the "N/N backends passed" line came
        self.allocs: list[str] = []     # allocation failures: cases that printed no line
        self.last = time.monotonic()    # when the last case line (or the process) came
        self.calls: list[dict] = []     # the simulator's records since the last case line
        self.simulator: dict | None = None   # its first record: the binary runs on the simulated toolkit

    def record(self, rec: dict) -> None:
        """A record the simulated toolkit framed into the output (CANN_SIM_TRACE=1): a call
        made since the last case line, so the next case's (test-backend-ops prints a case's
        line after its calls; an older one its name before them and its status after)."""
        if self.simulator is None and "simulator" in rec:
            self.simulator = rec
        elif "call" in rec:
            self.calls.append(rec)

    def feed(self, raw: str) -> None:
        line = ANSI.sub("", raw.rstrip("\r\n"))
        m = CASE.match(line)
        if m:
            self._case(m["pre"], m["op"], m["params"], m["status"])
            return
        if self.head is not None:
            s = STATUS_ONLY.match(line)
            if s:   # an old ggml: the status of the case named before
                h, self.head = self.head, None
                self._case(s["pre"], h.op, h.params, s["status"])
                return
        h = CASE_HEAD.match(line)
        if h and not h["rest"].startswith(("OK", "FAIL", "not supported")):
            self.head = Line(h["op"], h["params"], "")
            if h["rest"].strip():
                self.side.append(h["rest"].strip())
            return
        if FINISHED.match(line):
            self.finished = True
        b = BACKEND.match(line)
        if b:
            self.device = b["name"]
            self.devices[self.device] = DeviceInfo(name=self.device)
            self.side, self.calls = [], []   # (the backends' set-up: aclInit again, refused)
            return
        d = DESCRIPTION.match(line)
        if d and self.device:
            info = self.devices[self.device]
            info.description = d["d"]
            if self.device.startswith("CANN"):
                info.soc = d["d"]   # ggml-cann describes a device by its SoC (aclrtGetSocName)
            return
        mem = MEMORY.match(line)
        if mem and self.device:
            self.devices[self.device].memory_total = int(mem["total"]) << 20
            self.devices[self.device].memory_free = int(mem["free"]) << 20
            self.side, self.calls = [], []
            return
        if SKIPPING.match(line) and self.device:
            self.skipped.add(self.device)
            return
        if line.strip():
            self.side.append(line.strip())

    def _case(self, pre: str, op: str, params: str, text: str) -> None:
        # an allocation failure ends its case with no line: it leads the next one's
        self.allocs += ALLOC.findall(pre)
        pre = ALLOC.sub("", pre)
        checks = FRAGMENTS.findall(pre)
        rest = FRAGMENTS.sub("", pre).strip()
        side = self.side + ([rest] if rest else [])
        if text in ("OK", "SUPPORTED"):
            status = OK
        elif text.startswith("not supported") or text == "NOT SUPPORTED":
            status = NOT_SUPPORTED
            inside = re.match(r"not supported \[(.*)\]", text)
            checks = [f"[{inside[1]}]"] if inside else []
        elif text.startswith("skipping"):
            status = SKIPPED
        else:
            status = FAIL
        now = time.monotonic()
        seconds, self.last = now - self.last, now
        calls, self.side, self.head, self.calls = self.calls, [], None, []
        self.on_case(Line(op, params, status, checks, side, seconds, calls))

    def orphans(self) -> list[str]:
        """Allocation failures, each a case that printed no line of its own, in order."""
        return self.allocs + [m.group(0) for s in self.side for m in [ALLOC.search(s)] if m]


def case_statuses(text: str, op: str) -> dict[str, str]:
    """params -> status (OK / not supported / FAIL / skipped) of `op`'s case lines in a
    test-backend-ops console, support or test mode, as `Reader` reads them; a case printed
    twice keeps its first status."""
    out: dict[str, str] = {}

    def on_case(line: Line) -> None:
        if line.op == op:
            out.setdefault(line.params, line.status)

    reader = Reader(on_case)
    for raw in text.splitlines():
        reader.feed(raw)
    return out


def log_processes(text: str) -> list[tuple[str, str]]:
    """An --log-dir log taken apart: (command, console) of each process, in order."""
    out = []
    for block in re.split(rf"^{re.escape(LOG_MARK)}", text, flags=re.M)[1:]:
        command, _, console = block.partition("\n")
        out.append((command, console))
    return out


def is_death(r: CaseResult) -> bool:
    """A FAIL that is its process's death (an abort, a signal, the time limit), not a check."""
    return r.status == FAIL and r.reason.startswith(DEATHS)


def death_story(rc: int | None, side: list[str], timeout: float | None = None) -> str:
    """One line on how a process ended (the assert, its place, the first frames of the
    backtrace), then the lines that tell why (CANN error, the simulator's refusal)."""
    if timeout is not None:
        how = f"timeout: still running after {timeout:g} s, killed"
    elif rc is not None and rc < 0:
        try:
            how = f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            how = f"killed by signal {-rc}"
    else:
        how = f"exit status {rc}" + (" (abort)" if rc == 134 else "")
    where = ""
    for s in side:
        m = ASSERT.match(s)
        if m and m["where"].rsplit(":", 1)[0].endswith((".cpp", ".c", ".h", ".cu", ".m")):
            where = f"{os.path.basename(m['where'])}: {m['what']}"
            break
    frames = []
    for s in side:
        f = FRAME_GDB.match(s) or FRAME_GLIBC.search(s)
        if not f:
            continue
        fn = _demangle(f["fn"])
        if fn in NOT_BLAMED or fn.startswith("0x"):
            continue
        frames.append(fn)
        if len(frames) == 3:
            break
    head = "aborted" if rc == 134 or (rc is not None and rc == -signal.SIGABRT) else "died"
    first = (f"{head} ({how})" if timeout is None else how) + (f": {where}" if where else "") + (
        f" in {' < '.join(frames)}" if frames else "")
    why = [s for s in side if CANN_ERROR.match(s)]
    return "\n".join([first] + why)


def _demangle(sym: str) -> str:
    """A C++ symbol's function name (`_Z18ggml_cann_ssm_convR25...` -> ggml_cann_ssm_conv);
    a plain name as it is."""
    m = re.match(r"_Z(?:N\d*)?(\d+)", sym)
    if m:
        n = int(m.group(1))
        return sym[m.end():m.end() + n]
    return sym.split("(")[0]


# --- the binary ---------------------------------------------------------------------------

@dataclass
class Listing:
    """What `BINARY support` told: the devices (those not skipped: tested) and, per op,
    its listed cases in enumeration order."""
    devices: dict[str, DeviceInfo]
    tested: list[str]
    cases: dict[str, list[str]]
    supported: dict[str, int] = field(default_factory=dict)   # per op: the cases the device supports
    simulator: dict | None = None   # the simulated toolkit's settings, where the binary runs on it

    def cost(self, op: str) -> int:
        """What running an op takes, roughly: its supported cases (a case not supported
        costs nothing); an op it does not list (fused) counts as one."""
        return max(self.supported.get(op, 0), 1)


def check_binary(binary: str) -> str:
    if not os.path.exists(binary):
        raise BadInput(f"{binary}: no such file")
    if os.path.isdir(binary):
        raise BadInput(f"{binary} is a directory, not a test-backend-ops binary")
    if not os.access(binary, os.X_OK):
        raise BadInput(f"{binary} is not executable")
    return os.path.abspath(binary)


def takes_test_file(binary: str, timeout: float = 60) -> bool:
    """Whether the binary reads --test-file: its usage, which an unknown argument prints, lists it."""
    try:
        proc = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout, errors="replace", text=True)
    except subprocess.TimeoutExpired:
        raise BadInput(f"{binary} --help did not end in {timeout:g} s") from None
    except OSError as e:
        raise BadInput(f"cannot run {binary}: {e.strerror or e}") from None
    return "--test-file" in proc.stdout


def list_cases(binary: str, device: str | None = None, timeout: float = 600,
               test_file: str | None = None, env: dict | None = None) -> Listing:
    """Every case the binary has (those of `test_file` where given), from its support mode
    (one process: ~1 s for 19,000 cases); run with `env` added (TboSpec.environment), which
    tells whether it runs on the simulated toolkit (Listing.simulator)."""
    cmd = [binary, "support"] + (["-b", device] if device else []) + _test_file_args(test_file)
    listed: dict[str, list[str]] = {}
    supported: dict[str, int] = {}

    def on_case(ln: Line) -> None:
        listed.setdefault(ln.op, []).append(ln.params)
        supported[ln.op] = supported.get(ln.op, 0) + (ln.status == OK)

    from cannops.backend.trace import unframe
    reader = Reader(on_case)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                              env=_environment(env))
    except subprocess.TimeoutExpired:
        raise BadInput(f"{binary} support did not end in {timeout:g} s") from None
    except OSError as e:
        raise BadInput(f"cannot run {binary}: {e.strerror or e}") from None
    console = Console(reader)
    console.feed(proc.stdout)
    console.close()
    if not reader.devices:
        tail = " | ".join(unframe(proc.stdout)[0].decode(errors="replace").strip().splitlines()[-3:])
        raise BadInput(f"{binary} is not a test-backend-ops (its support mode named no device"
                       + (f"; it printed: {tail[:200]}" if tail else "") + ")")
    # every listed case once (a case listed twice is one case), in order
    cases = {op: list(dict.fromkeys(ps)) for op, ps in listed.items()}
    tested = [d for d in reader.devices if d not in reader.skipped]
    return Listing(reader.devices, tested, cases, supported, reader.simulator)


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


# --- one op -------------------------------------------------------------------------------

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
    return ",".join(["poison"] * bool(sim.get("poison")) + ["check-inputs"] * bool(sim.get("check_inputs"))) or None


def op_regex(params: tuple[tuple[str, str], ...], op: str) -> str | None:
    """The params regex that applies to `op`: its own -p OP=REGEX, else a plain -p REGEX."""
    per_op = [rx for o, rx in params if o == op]
    common = [rx for o, rx in params if not o]
    return (per_op or common or [None])[-1]


def exact_params(params: list[str]) -> str:
    """A params regex (ECMAScript, as test-backend-ops reads -p) selecting exactly these."""
    return "^" + _alternatives(params) + "$"


@dataclass
class Proc:
    rc: int | None
    timed_out: bool
    interrupted: bool
    reader: Reader


class Processes:
    """The test-backend-ops processes running now, so that an interrupt ends them all."""

    def __init__(self):
        self.lock = threading.Lock()
        self.live: set[subprocess.Popen] = set()
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()
        with self.lock:
            for p in self.live:
                _kill(p)

    def run(self, cmd: list[str], timeout: float, reader: Reader, log=None, env: dict | None = None) -> Proc:
        if self.stopped.is_set():
            return Proc(None, False, True, reader)
        try:
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=_environment(env),
                                 start_new_session=True)   # its own group: a launcher's children die with it
        except OSError as e:   # the binary went away mid-run: its case dies, as a crash would
            reader.feed(f"cannot run {cmd[0]}: {e.strerror or e}")
            return Proc(127, False, False, reader)
        if log is not None:   # where each process's console begins (log_processes)
            log.write(f"{LOG_MARK}{' '.join(cmd)}\n".encode(errors="replace"))
        reader.last = time.monotonic()
        with self.lock:
            self.live.add(p)
        if self.stopped.is_set():   # stopped between the check and now
            _kill(p)
        deadline = time.monotonic() + timeout
        timed_out = False
        console = Console(reader, log)
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(p.stdout, selectors.EVENT_READ)
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        timed_out = True
                        _kill(p)
                        break
                    if not sel.select(min(left, 0.5)):
                        if self.stopped.is_set():
                            break
                        continue
                    chunk = os.read(p.stdout.fileno(), 65536)
                    if not chunk:
                        break
                    console.feed(chunk)
            console.close()
            rc = p.wait()
        finally:
            with self.lock:
                self.live.discard(p)
            p.stdout.close()
        return Proc(rc, timed_out, self.stopped.is_set() and not timed_out, reader)


class Console:
    """A process's output as it comes, to its Reader: the simulator's records taken out
    (backend/trace.py's frames: to `reader.record`, in their place among the lines), the
    lines fed one by one; the console without the records to `log`."""

    def __init__(self, reader: Reader, log=None):
        from cannops.backend.trace import Unframer
        self.reader, self.log, self.frames, self.buf = reader, log, Unframer(), b""

    def feed(self, chunk: bytes) -> None:
        self._parts(self.frames.feed(chunk))

    def close(self) -> None:
        self._parts(self.frames.close())
        if self.buf:
            self.reader.feed(self.buf.decode(errors="replace"))
            if self.log is not None:   # the next process's `$ COMMAND` starts a line of its own
                self.log.write(b"\n")
            self.buf = b""

    def _parts(self, parts: list) -> None:
        for part in parts:
            if isinstance(part, dict):
                self.reader.record(part)
                continue
            if self.log is not None:
                self.log.write(part)
            self.buf += part
            *lines, self.buf = self.buf.split(b"\n")
            for ln in lines:
                self.reader.feed(ln.decode(errors="replace"))


def _environment(extra: dict | None) -> dict | None:
    return None if not extra else {**os.environ, **extra}


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _test_file_args(test_file: str | None) -> list[str]:
    return ["--test-file", test_file] if test_file else []


def _alternatives(names: list[str]) -> str:
    return "(" + "|".join(re.escape(n) for n in names) + ")"


def _op_command(spec: TboSpec, device: str, op: str, mode: str, pending: list[str], seen: list[str],
                regex: str | None) -> tuple[list[str] | None, list[str]]:
    """One process's command line for run_op's `mode`, and the cases it names (in "chunk"
    mode); None where the cases to exclude are too many for one argument. Modes: "all", the
    op's whole selection in one process (the first, unless resumed); "chunk", listed cases
    not seen yet, by name; "rest", every case not seen yet, by exclusion, for the unlisted
    ones (whole-graph cases under the op's own name: ADD with nf=2) that a process ended
    early never reached."""
    cmd = [spec.binary, "test", "-b", device, "-o", op] + _test_file_args(spec.test_file)
    if mode == "all":
        return cmd + (["-p", regex] if regex else []), []
    if mode == "chunk":
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


def run_op(spec: TboSpec, procs: Processes, device: str, op: str, op_no: int, listed: list[str],
           known: dict[str, CaseResult], emit: Callable[[CaseResult], None], log=None) -> list[CaseResult]:
    """Every case of one op on one device, from as many processes as its deaths take.
    `listed`: its cases in enumeration order (after -p); `known`: params -> result of a
    resumed run (not run again). Each new result goes to `emit` as it comes."""
    got: dict[str, CaseResult] = dict(known)
    order = {p: k for k, p in enumerate(listed)}
    regex = spec.regex(op)
    rx = re.compile(regex) if regex else None
    out: list[CaseResult] = []
    extra = sum(p not in order for p in got)   # unlisted cases known already

    def keep(r: CaseResult) -> None:
        nonlocal extra
        k = order.get(r.params, len(listed) + extra)
        extra += r.params not in order
        r.index = op_no * INDEX_STRIDE + k
        got[r.params] = r
        out.append(r)
        emit(r)

    def on_case(line: Line) -> None:
        if line.op != op or line.params in got or (line.params not in order and rx and not rx.search(line.params)):
            return
        keep(_traced(line.result(device), spec))

    unnamed = any(r.params.startswith("#") and r.status == FAIL for r in known.values())
    if unnamed and all(p in got for p in listed):
        return out   # an unnamed death ended it before: nothing after it can be reached
    mode, aborts, suspect = ("chunk" if got else "all"), 0, None
    while True:
        pending = [p for p in listed if p not in got]
        if mode == "chunk" and not pending:
            mode = "rest"
        cmd, chunk = _op_command(spec, device, op, mode, pending, list(got), regex)
        if cmd is None:
            return out   # too many names for one argument: the unlisted rest is not reached
        before = len(got)
        reader = Reader(on_case)
        proc = procs.run(cmd, spec.timeout, reader, log, spec.environment())
        if proc.interrupted:
            return out
        progressed = len(got) > before
        if suspect is not None and suspect.params in got:
            keep(_unlisted_death(suspect, len(got) + 1))   # alone, the suspect printed its line
            unnamed, suspect = True, None
        if proc.reader.finished and not proc.timed_out and proc.rc in (0, 1):
            # a listed case of this process without a line: an allocation failure prints none
            for r in _unprinted(device, op, chunk if mode == "chunk" else pending if mode == "all" else [],
                                got, reader.orphans()):
                keep(r)
            if mode != "chunk":
                return out
            continue
        if proc.timed_out and progressed:
            mode = "rest" if mode == "rest" else "chunk"
            continue   # cases were still finishing: none to blame, the rest goes on
        pending = [p for p in listed if p not in got]
        victim = reader.head.params if reader.head is not None and reader.head.op == op else (
            pending[0] if pending and mode != "rest" else None)
        death = _death(spec, proc, device, op, victim or f"#{len(got) + 1}")
        aborts, was, mode = aborts + 1, mode, "chunk"
        if victim is None:
            if not unnamed:   # an unlisted case that died before dies again in "rest" mode
                keep(death)
            return out
        if reader.head is None and suspect is None and was == "all" and not proc.timed_out:
            # test mode prints a case's line after its calls, and runs the op's unlisted
            # whole-graph cases among its listed ones: the next listed case is only a suspect
            # until it dies alone (or prints its line, and the death was an unlisted case's)
            suspect = death
            continue
        suspect = None
        keep(death)
        if aborts >= spec.max_aborts:
            why = f"not run: the op died {aborts} times (--max-aborts {spec.max_aborts})"
            for r in _unprinted(device, op, listed, got, [], why):
                keep(r)
            return out


def _death(spec: TboSpec, proc: Proc, device: str, op: str, params: str) -> CaseResult:
    """The FAIL of the case a process died in, with the calls since the last case line: its
    own, up to the one that killed it. `#N`: after every listed case had its line, an
    unlisted one died (it prints nothing before), or the exit."""
    reader = proc.reader
    story = death_story(proc.rc, reader.side, spec.timeout if proc.timed_out else None)
    if params.startswith("#"):
        story += ("\n(after the op's listed cases: an unlisted whole-graph case, which has no name until it "
                  "prints, or the process's exit; the op stops here)")
    return _traced(CaseResult(device=device, op=op, params=params, status=FAIL, reason=story, trace=reader.calls,
                              seconds=round(time.monotonic() - reader.last, 6)), spec)


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
    if r.status != FAIL:
        if not spec.trace:
            r.trace = []
    elif r.trace:
        from cannops.backend.trace import blame
        i, why = blame(r.trace, None, None)
        if i is not None:
            r.blame = why
    return r


MAX_ARG = 100_000   # characters of one -p argument (Linux takes 128 KiB)


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
    from concurrent.futures import ThreadPoolExecutor
    procs = Processes()
    lock = threading.Lock()
    # an op's number (its cases' indexes) is its place among every op, whatever the shard
    op_no = {op: i for i, op in enumerate(sorted(set(spec.ops) | set(listing.cases)))}
    ops = shard_ops(list(spec.ops), listing.cost, spec.shard)
    interrupted = []

    def handler(signum, frame):
        leave_hung_up_terminal(signum)
        interrupted.append(signum)
        procs.stop()

    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        for device in spec.devices:
            if procs.stopped.is_set():
                break

            def emit(r: CaseResult) -> None:
                with lock:
                    run.results.append(r)
                    sink.result(r)

            def one(op: str) -> tuple[list[CaseResult], float]:
                t0 = time.monotonic()
                listed = selected[op]
                mine = {r.params: r for (d, _), r in known.items() if d == device and r.op == op}
                log = None
                if log_dir:
                    log = open(os.path.join(log_dir, _log_name(op, device, len(spec.devices))), "ab")
                try:
                    new = run_op(spec, procs, device, op, op_no[op], listed, mine, emit, log)
                finally:
                    if log is not None:
                        log.close()
                if not procs.stopped.is_set():
                    new += _not_among_its_cases(spec, device, op, op_no[op], {**mine, **{r.params: r for r in new}},
                                                emit)
                return list(mine.values()) + new, time.monotonic() - t0

            selected = {op: _selected(listing.cases.get(op, []), spec.regex(op)) for op in ops}
            sink.device_start(device, sum(map(len, selected.values())))
            with ThreadPoolExecutor(max_workers=spec.jobs) as pool:
                futures = [(op, pool.submit(one, op)) for op in ops]
                for op, fut in futures:
                    while not fut.done():   # the main thread stays free for the signal handler
                        time.sleep(0.05)
                    results, seconds = fut.result()
                    if procs.stopped.is_set():
                        continue   # (each result went to sink.result as it came)
                    with lock:
                        sink.op_done(device, op, results, seconds)
            if not procs.stopped.is_set():
                sink.device_end(device)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if interrupted:
        run.interrupted = True
        run.exit_status = 128 + interrupted[0]


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
    name = op if n_devices == 1 else f"{op}.{device}"
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".log"

