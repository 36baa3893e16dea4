"""Reading test-backend-ops' console, of every ggml from 0.9 to 0.25: its case lines (with
their check fragments, in both printers' orders), its backend lines, the stories of its
deaths, the simulated toolkit's framed records, and the listing of its support mode.

Output lines, of ggml 0.9 to 0.25 (tests/test-backend-ops.cpp, console_printer):
`  OP(params): OK`, `  OP(params): not supported [DEV] `, and a FAIL led by its checks on
the same line: `[OP] ERR = 0.1 > 0.0000001 `, `[OP] NaN at index 3 (CANN0=nan CPU=1.0) `,
`[OP] inf mismatch: ...`, `sentinel mismatch: NAME `, `compare failed `, then
`  OP(params): FAIL`. A failed allocation prints `failed to allocate tensors [DEV] ` and
no case line at all. Its stdout and stderr are read as one stream, so that what a case
printed on stderr (an assert, `CANN error`, the simulator's `CANN-SIM refused:`) comes
before the case's own line, or before the death. Driving the processes is tbo.py's.
"""
from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass, field
from typing import Callable

from .results import FAIL, NOT_SUPPORTED, OK, SKIPPED, CaseResult, DeviceInfo

# Every pattern here runs in time linear in its line: no two unbounded repeats that can
# cover the same characters (a line of many `  A(` or `[` once took seconds a line), and a
# number read with int() has a bounded count of digits.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")   # what else would drive a terminal: shown escaped
MAX_LINE = 64 << 10   # characters of one line kept (a case line is a few hundred; the rest is cut)
MAX_SIDE = 256        # lines kept between two case lines (the last ones: a death's story ends there)
MAX_CALLS = 10_000    # a case's simulator records kept (and as many that failed); the rest counted
# a case line: optional check fragments, the two-space indent, the name, `): `, the status
# (_case_line: the name is the first `  OP(` and the status follows the last `): `)
NAME = re.compile(r"\s{2}(?P<op>[A-Z][A-Z0-9_]*)\(")
STATUS = re.compile(r"(?:OK|FAIL|SUPPORTED|NOT SUPPORTED)\s*|(?:not supported|skipping).*", re.S)
BACKEND = re.compile(r"^Backend (?P<i>\d+)/(?P<n>\d+): (?P<name>\S+)\s*$")
BACKEND_STATUS = re.compile(r"^\s*Backend (?P<name>\S+): (?P<status>OK|FAIL)\s*$")
DESCRIPTION = re.compile(r"^  Device description: (?P<d>.*)$")
MEMORY = re.compile(r"^  Device memory: (?P<total>\d{1,12}) MB \((?P<free>\d{1,12}) MB free\)")
SKIPPING = re.compile(r"^  Skipping\b")
FINISHED = re.compile(r"^(?P<ok>\d{1,9})/(?P<n>\d{1,9}) backends passed")
# check fragments, as test-backend-ops prints them before a FAIL
ERR = re.compile(r"\[(?P<node>[^\[\]]+)\] ERR = (?P<err>\S+) > (?P<thr>\S+)")
NAN = re.compile(r"\[(?P<node>[^\[\]]+)\] NaN at index (?P<i>\d{1,18}) "
                 r"\(\S+?=(?P<got>\S+) \S+?=(?P<exp>[^\s()]+)\)")
FRAGMENTS = re.compile(r"\[[^\[\]]+\] (?:ERR = \S+ > \S+|NaN at index \d+ \([^()]*\)"
                       r"|inf (?:sign )?mismatch: \S+ \S+|MAA = \S+ > \S+"
                       r"|nonfinite gradient at index \d+ \([^()]*\))"
                       r"|sentinel mismatch: \S+|compare failed"
                       r"|failed to allocate (?:weight )?tensors(?: \[[^\[\]]*\])?")
ALLOC = re.compile(r"failed to allocate (?:weight )?tensors(?: \[[^\[\]]*\])?")
# the story of a death, on stderr
ASSERT = re.compile(r"(?P<where>[^\s:]+:\d+): (?P<what>GGML_ASSERT\(.*\) failed|.*)$")
CANN_ERROR = re.compile(r"^(CANN error: .*|  current device: .*|CANN-SIM refused: .*)$")
FRAME_GDB = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(?P<fn>[^\s(]+)")
FRAME_GLIBC = re.compile(r"\((?P<fn>[A-Za-z_][^+()]*)\+0x[0-9a-f]+\)\[0x")
NOT_BLAMED = ("ggml_print_backtrace", "ggml_abort", "ggml_log_internal", "__GI___wait4", "__GI_raise", "raise",
              "abort", "__pthread_kill", "waitpid", "__libc_waitpid", "__GI___waitpid", "ggml_cann_error")

LOG_MARK = "$ "     # an --log-dir log: each process's console follows a line `$ COMMAND`
DEATHS = ("aborted (", "died (", "timeout:")   # how death_story begins: a FAIL that is a death


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


RANK = {OK: 0, NOT_SUPPORTED: 1, SKIPPED: 2, FAIL: 3}   # a status's badness


def worst(a: str, b: str) -> str:
    """Of two statuses of one case name (test-backend-ops prints some names twice), the worse."""
    return a if RANK.get(a, 0) >= RANK.get(b, 0) else b


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _case_line(line: str) -> tuple[str, str, str, str] | None:
    """(pre, op, params, status) of a case line `PRE  OP(PARAMS): STATUS`: the name is the
    first `  OP(`, the status what follows the last `): ` that reads as one (params may
    hold `): `; a status `not supported [...]` anything)."""
    k = line.rfind("): ")
    for _ in range(4):   # (a status past the last `): ` that is none: a line no case prints)
        if k < 0:
            return None
        if STATUS.fullmatch(line, k + 3):
            m = NAME.search(line, 0, k)
            if m is None:
                return None
            status = line[k + 3:]
            return line[:m.start()], m["op"], line[m.end():k], (
                status if status.startswith(("not supported", "skipping")) else status.rstrip())
        k = line.rfind("): ", 0, k)
    return None


def _case_head(line: str) -> tuple[str, str, str] | None:
    """(op, params, the rest) of an old ggml's case named before it runs: `  OP(PARAMS): `."""
    m = NAME.search(line)
    if m is None:
        return None
    k = line.find("): ", m.end())
    return None if k < 0 else (m["op"], line[m.end():k], line[k + 3:])


def _status_only(line: str) -> tuple[str, str] | None:
    """(pre, status) of an old ggml's status line, printed after its case's name: the
    first `not supported...`, or an OK / FAIL that ends the line, whichever comes first."""
    found = []
    i = line.find("not supported")
    if i >= 0:
        found.append((i, line[i:]))
    end = line.rstrip()
    for word in ("OK", "FAIL"):
        if end.endswith(word):
            found.append((len(end) - len(word), word))
    if not found:
        return None
    i, status = min(found)
    return line[:i], status


class Reader:
    """test-backend-ops' console, fed a line at a time: the devices it names and the case
    lines, each with the lines printed since the one before (`on_case`); whether the
    binary's own summary said FAIL (`said_fail`)."""

    def __init__(self, on_case: Callable[[Line], None] | None = None):
        self.on_case = on_case or (lambda line: None)
        self.devices: dict[str, DeviceInfo] = {}
        self.skipped: set[str] = set()
        self.device: str | None = None
        self.side: list[str] = []       # printed since the last case line (the last MAX_SIDE)
        self.head: Line | None = None   # an old ggml's case named, its status not yet printed
        self.finished = False           # the "N/N backends passed" line came
        self.said_fail: list[str] = []  # the binary's own summary lines that say FAIL
        self.allocs: list[str] = []     # allocation failures: cases that printed no line
        self.last = time.monotonic()    # when the last case line (or the process) came
        self.calls: list[dict] = []     # the simulator's records since the last case line
        self.calls_left = 0             # and those past MAX_CALLS, not kept
        self.simulator: dict | None = None   # its first record: the binary runs on the simulated toolkit

    def record(self, rec: dict) -> None:
        """A record the simulated toolkit framed into the output (CANN_SIM_TRACE=1): a call
        made since the last case line, so the next case's (test-backend-ops prints a case's
        line after its calls; an older one its name before them and its status after). A
        frame that is no valid record stays in the trace as a note that says why."""
        from cannops.backend.trace import BAD_RECORD
        if BAD_RECORD in rec:
            rec = {"call": "(bad record)", "note": str(rec[BAD_RECORD])}
        elif self.simulator is None and "simulator" in rec:
            self.simulator = rec
            return
        elif "replay" in rec:   # CANN_SIM_BLAME: a call's own error, once it ran (tbo_replay.py)
            from cannops.backend.trace import replayed
            replayed(self.calls, rec)
            return
        elif "call" not in rec:
            return
        if len(self.calls) < MAX_CALLS or rec.get("rc") and len(self.calls) < 2 * MAX_CALLS:
            self.calls.append(rec)
        else:
            self.calls_left += 1

    def calls_now(self) -> list[dict]:
        """The records since the last case line, and a note of those left out."""
        if not self.calls_left:
            return self.calls
        return self.calls + [{"call": "(calls left out)",
                              "note": f"{self.calls_left} more, past the {MAX_CALLS} a case keeps"}]

    def _new_calls(self) -> None:
        self.calls, self.calls_left = [], 0

    def feed(self, raw: str) -> None:
        line = ANSI.sub("", raw[:MAX_LINE + 64].rstrip("\r\n"))   # (+64: a Console's note of a cut)
        line = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", line)
        if len(raw) > MAX_LINE + 64:
            line += f" [... {len(raw) - MAX_LINE - 64} characters cut]"
        m = _case_line(line)
        if m:
            self._case(*m)
            return
        if self.head is not None:
            s = _status_only(line)
            if s:   # an old ggml: the status of the case named before
                h, self.head = self.head, None
                self._case(s[0], h.op, h.params, s[1])
                return
        named = _case_head(line)
        if named and not named[2].startswith(("OK", "FAIL", "not supported")):
            self.head = Line(named[0], named[1], "")
            if named[2].strip():
                self._side(named[2].strip())
            return
        if not self._device_line(line) and line.strip():
            self._side(line.strip())

    def _side(self, text: str) -> None:
        self.side.append(text)
        if len(self.side) > 2 * MAX_SIDE:
            del self.side[:-MAX_SIDE]

    def _device_line(self, line: str) -> bool:
        """A line about the devices or the run's end, read; whether it was one."""
        f = FINISHED.match(line)
        if f:
            self.finished = True
        backend = BACKEND_STATUS.match(line)
        if (f and int(f["ok"]) < int(f["n"]) or backend and backend["status"] == "FAIL"
                or self.finished and line.strip() == "FAIL") and len(self.said_fail) < 8:
            self.said_fail.append(line.strip()[:200])
        b = BACKEND.match(line)
        if b:
            self.device = b["name"]
            self.devices[self.device] = DeviceInfo(name=self.device)
            self.side = []   # (the backends' set-up: aclInit again, refused)
            self._new_calls()
            return True
        d = DESCRIPTION.match(line)
        if d and self.device:
            info = self.devices[self.device]
            info.description = d["d"].strip()
            if self.device.startswith("CANN"):
                info.soc = info.description   # ggml-cann describes a device by its SoC (aclrtGetSocName)
            return True
        mem = MEMORY.match(line)
        if mem and self.device:
            self.devices[self.device].memory_total = int(mem["total"]) << 20
            self.devices[self.device].memory_free = int(mem["free"]) << 20
            self.side = []
            self._new_calls()
            return True
        if SKIPPING.match(line) and self.device:
            self.skipped.add(self.device)
            return True
        return False

    def _case(self, pre: str, op: str, params: str, text: str) -> None:
        # an allocation failure ends its case with no line: it leads the next one's
        self.allocs += ALLOC.findall(pre)[:10_000 - len(self.allocs)]
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
        calls, self.side, self.head = self.calls_now(), [], None
        self._new_calls()
        self.on_case(Line(op, params, status, checks, side, seconds, calls))

    def orphans(self) -> list[str]:
        """Allocation failures, each a case that printed no line of its own, in order."""
        return self.allocs + [m.group(0) for s in self.side for m in [ALLOC.search(s)] if m]


def case_statuses(text: str, op: str) -> dict[str, str]:
    """params -> status (OK / not supported / FAIL / skipped) of `op`'s case lines in a
    test-backend-ops console, support or test mode, as `Reader` reads them; a case printed
    twice keeps its worst status."""
    out: dict[str, str] = {}

    def on_case(line: Line) -> None:
        if line.op == op:
            out[line.params] = worst(out.get(line.params, line.status), line.status)

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
    m = re.match(r"_Z(?:N\d{0,6})?(\d{1,6})", sym)
    if m:
        n = int(m.group(1))
        return sym[m.end():m.end() + n]
    return sym.split("(")[0]


class Console:
    """A process's output as it comes, to its Reader: the simulator's records taken out
    (backend/trace.py's frames: to `reader.record`, in their place among the lines), the
    lines fed one by one, each cut at MAX_LINE characters as it comes (the time and
    memory a line takes are bounded whatever its length); the console without the records
    to `log`."""

    def __init__(self, reader: Reader, log=None):
        from cannops.backend.trace import Unframer
        self.reader, self.log, self.frames = reader, log, Unframer()
        self.buf = bytearray()   # the line begun, up to MAX_LINE bytes
        self.cut = 0             # its bytes past those, left out

    def feed(self, chunk: bytes) -> None:
        self._parts(self.frames.feed(chunk))

    def close(self) -> None:
        self._parts(self.frames.close())
        if self.buf or self.cut:
            self._line()
            if self.log is not None:   # the next process's `$ COMMAND` starts a line of its own
                self.log.write(b"\n")

    def _parts(self, parts: list) -> None:
        for part in parts:
            if isinstance(part, dict):
                self.reader.record(part)
                continue
            if self.log is not None:
                self.log.write(part)
            start = 0
            while True:
                end = part.find(b"\n", start)
                self._add(part, start, len(part) if end < 0 else end)
                if end < 0:
                    break
                self._line()
                start = end + 1

    def _add(self, part: bytes, start: int, end: int) -> None:
        take = min(end - start, MAX_LINE - len(self.buf))
        if take > 0:
            self.buf += part[start:start + take]
        self.cut += end - start - max(take, 0)

    def _line(self) -> None:
        text = self.buf.decode(errors="replace")
        if self.cut:
            text += f" [... {self.cut} bytes cut]"
        self.buf, self.cut = bytearray(), 0
        self.reader.feed(text)


# --- support mode's listing ---------------------------------------------------------------

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


class ListingReader:
    """Support mode's console, fed to `reader`: every case it lists, per op in enumeration
    order, and how many the device supports. Whole-graph cases (fused ones, RMS_NORM_MUL_ADD,
    and some under a listed op's name, ADD with nf=2) are not in that listing; they run,
    unlisted, with their op."""

    def __init__(self):
        self.listed: dict[str, list[str]] = {}
        self.supported: dict[str, int] = {}
        self.reader = Reader(self._case)

    def _case(self, ln: Line) -> None:
        self.listed.setdefault(ln.op, []).append(ln.params)
        self.supported[ln.op] = self.supported.get(ln.op, 0) + (ln.status == OK)

    def listing(self) -> Listing | None:
        """What it listed; None where it named no device (not a test-backend-ops)."""
        reader = self.reader
        if not reader.devices:
            return None
        # every listed case once (a case listed twice is one case), in order
        cases = {op: list(dict.fromkeys(ps)) for op, ps in self.listed.items()}
        tested = [d for d in reader.devices if d not in reader.skipped]
        return Listing(reader.devices, tested, cases, self.supported, reader.simulator)
