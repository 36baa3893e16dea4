"""Probe of issue 43: every hostile input of its 16 groups (and neighbours a new user would
try) run through the real `ops` command, each in a child with a time and a memory limit, and
each outcome classed: refused (one line, exit 2), ran (the exit status expected), or a
defect: TRACEBACK, HANG, MEMORY, WRONG-EXIT, NOT-ONE-LINE, RAW-CONTROL (escape codes reach
the terminal), FOREIGN (a file ops did not create changed, or a canary command ran).

Run it from the checkout (its .venv), about 5-10 minutes on two cores:

    .venv/bin/python bench/probe43.py                 # every probe, the table by class
    .venv/bin/python bench/probe43.py -k tbo -v       # those whose group or text holds `tbo`

Exit status 1 when any probe is a defect. Its scratch folder is a fresh temporary one
(--keep leaves it, to look at a defect's files)."""
from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
OPS = [sys.executable, "-m", "cannops.cli.main"]
ADD = "ADD(type=f32,ne=[1,1,8,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"
ABS = "ABS(type=f32,ne_a=[5,7,11,13],v=0)"
CANARY = "K"          # what a hostile input's `touch K` would make
TOUCH = '\\\n");system((char[]){116,111,117,99,104,32,75,0});//'   # the C string's line splice
DEFECTS = ("TRACEBACK", "HANG", "MEMORY", "WRONG-EXIT", "NOT-ONE-LINE", "RAW-CONTROL", "FOREIGN")


@dataclass
class Probe:
    group: str                     # the item (1-16)
    what: str
    argv: list[str]                # after `ops`; {d} is the probe's folder
    expect: str = "refuse"         # refuse | ok (0) | fail (1) | clean (0, 1 or 2, no defect)
    env: dict = field(default_factory=dict)
    setup: Callable | None = None  # setup(folder) -> paths ops may change (relative), or None
    then: list[list[str]] = field(default_factory=list)   # run in {d}/r after exit 0 (make, make run)
    timeout: float = 60
    mem_mb: int = 3072
    signal_after: tuple[int, float] | None = None   # (signal, seconds): sent to ops, then it must end
    raw: bool = False              # escape codes in the input: none may reach the output raw


# ------------------------------------------------------------------ running one probe ----

def _limits(mem_mb):
    def pre():
        os.setsid()
        resource.setrlimit(resource.RLIMIT_AS, (mem_mb << 20, mem_mb << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return pre


def _snapshot(root: Path, skip: set[str]) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if any(rel == s or rel.startswith(s + "/") for s in skip):
            continue
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_fifo():
            out[rel] = ("fifo",)
        elif p.is_file():
            out[rel] = ("file", p.read_bytes())
    return out


def _wait(proc, timeout, signal_after):
    """(rc or None on a hang, peak RSS MB): the child waited for with wait4."""
    start, sent = time.monotonic(), False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return proc.returncode, usage.ru_maxrss // 1024
        elapsed = time.monotonic() - start
        if signal_after and not sent and elapsed > signal_after[1]:
            os.kill(proc.pid, signal_after[0])
            sent, start, timeout = True, time.monotonic(), 20
        elif elapsed > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            return None, 0


def _sub(argv, d):
    return [a.replace("{d}", str(d)) for a in argv]


def run_probe(p: Probe, d: Path) -> tuple[str, str]:
    d.mkdir(parents=True)
    got = p.setup(d) if p.setup else None
    ours = [o for o in (got if isinstance(got, list) else []) if isinstance(o, str)]
    before = _snapshot(d, set(ours))
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
           **{k: v.replace("{d}", str(d)) for k, v in p.env.items()}}
    with open(d / ".out", "wb") as out, open(d / ".err", "wb") as err:
        proc = subprocess.Popen(OPS + _sub(p.argv, d), cwd=d, env=env, stdout=out, stderr=err,
                                stdin=subprocess.DEVNULL, preexec_fn=_limits(p.mem_mb))
        rc, peak = _wait(proc, p.timeout, p.signal_after)
    stdout = (d / ".out").read_bytes().decode(errors="replace")
    stderr = (d / ".err").read_bytes().decode(errors="replace")
    tail = stderr.strip().splitlines()[-1:] or stdout.strip().splitlines()[-1:] or [""]
    note = f"rc={rc} {peak}MB: {tail[0][:160]!r}"
    cls = _classify(p, rc, peak, stdout, stderr)
    if cls in ("OK-RUN",) and p.then:
        for cmd in p.then:
            r = subprocess.run(_sub(cmd, d), cwd=d / "r", capture_output=True, text=True, timeout=300,
                               env={"PATH": "/usr/bin:/bin", **{k: v for k, v in p.env.items()}})
            if r.returncode != 0 or (cmd[-1] == "run" and "reproduced" not in r.stdout):
                cls, note = "WRONG-EXIT", f"{' '.join(cmd)}: rc={r.returncode} {(r.stdout + r.stderr)[-300:]!r}"
                break
    changed = [k for k, v in before.items() if _snapshot(d, set(ours)).get(k) != v]
    canary = [str(c.relative_to(d)) for c in d.rglob(CANARY)] + [str(n) for n in d.rglob("nowhere")]
    canary += ["/tmp/K"] if Path("/tmp/K").exists() else []
    if changed or canary:
        cls, note = "FOREIGN", f"changed {changed[:4]} canary {canary} ({note})"
    return cls, note


def _classify(p, rc, peak, stdout, stderr):
    if rc is None:
        return "HANG"
    both = stdout + stderr
    if "MemoryError" in both or peak > p.mem_mb * 0.9 or "Cannot allocate memory" in both:
        return "MEMORY"
    if "Traceback (most recent call last)" in both:
        return "TRACEBACK"
    if p.raw and any(c in both for c in "\x1b\x07\x9b"):
        return "RAW-CONTROL"
    if p.signal_after:
        return "OK-RUN" if rc in (128 + p.signal_after[0], -p.signal_after[0], 130, 2) else "WRONG-EXIT"
    want = {"refuse": (2,), "ok": (0,), "fail": (1,), "clean": (0, 1, 2)}[p.expect]
    if rc not in want:
        return "WRONG-EXIT"
    if rc == 2:
        lines = stderr.strip().splitlines()
        return "REFUSED" if len(lines) == 1 and len(stderr) < 2000 else "NOT-ONE-LINE"
    return "OK-RUN"


# ------------------------------------------------------------------ the probes ----

def _write(rel, data):
    def setup(d):
        path = d / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return setup


def _chain(*setups):
    def setup(d):
        ours = []
        for s in filter(None, setups):
            got = s(d)
            ours += got if isinstance(got, list) else []
        return ours
    return setup


TEMPLATE: dict[str, Path] = {}


def _reproducer(d, name="r"):
    """A copy of a real reproducer folder as d/name (its files ops' own)."""
    shutil.copytree(TEMPLATE["repro"], d / name, symlinks=True)
    return [name]


def _edited(d):
    """A reproducer whose README the user has since edited: that file is no longer ops'."""
    _reproducer(d)
    (d / "r/README.md").write_text("my notes\n")
    return [f"r/{f}" for f in os.listdir(d / "r") if f != "README.md"]


def repro_probes():
    P = []
    then = [["make", "-s"], ["make", "-s", "run"]]
    names = {"line splice": "x" + TOUCH, "newline": "a\nb", "trailing backslash": "a\\",
             "quote": 'a"b', "trigraph": "a??/b??=", "shell": "$(touch K)`touch K`", "percent": "%s%n%x",
             "escape codes": "a\x1b[31mred\x07", "carriage return": "a\rb", "tab": "a\tb",
             "unicode": "é€😀", "64 bytes": "n" * 64, "10k bytes": "n" * 10000, "empty": "",
             "comment end": "*/ int x; /*", "slash": "a/b", "dot-dot": "../../x"}
    for what, n in names.items():
        for leaf in ("a", "out") if what in ("line splice", "newline", "escape codes", "slash") else ("a",):
            P.append(Probe("1", f"repro --name {leaf}= {what}", ["repro", "-b", "GGML-CPU", f"--name={leaf}={n}", ADD,
                                                                  "{d}/r"], "clean", then=then, raw="\x1b" in n))
    for arg in ["zz=x", "abc", "=x", "a\x1b[2J=x"]:
        P.append(Probe("1", f"repro --name {arg!r}", ["repro", "-b", "GGML-CPU", f"--name={arg}", ADD, "{d}/r"],
                       "clean", then=then, raw=True))
    values = {"CANN_SIM_PROBE": "$(shell touch K)", "CANN_SIM_B": "a#b $$(shell touch K) `touch K` \\",
              "CANN_SIM_C": "x\n\ttouch K\nall:", "CANN_SIM_D": "';touch K;'", "CANN_SIM_E": '"$(touch K)"',
              "CANN_SIM_F;touch K": "x", "CANN_SIM_$(shell touch K)": "x", "CANN_SIM_G": "\x1b[31m"}
    for k, v in values.items():
        P.append(Probe("2", f"env {k!r}={v!r}", ["repro", "-b", "GGML-CPU", ADD, "{d}/r"], "clean",
                       env={k: v}, then=then))
    markers = {"not JSON": "not json", "a list": "[]", "an object": "{}", "files only": '{"files": []}',
               "a tool name": '{"tool": "ops repro", "files": ["README.md"]}', "binary": "\x00\xff" * 10}
    for what, text in markers.items():
        def setup(d, text=text):
            for f, t in {"repro.json": text, "README.md": "mine\n", "Makefile": "all:\n\techo mine\n",
                         "repro.c": "int main(){}\n"}.items():
                _write(f"r/{f}", t)(d)
        P.append(Probe("3", f"OUTDIR with a repro.json: {what}", ["repro", "-b", "GGML-CPU", ADD, "{d}/r"],
                       "refuse", setup=setup))
    for target in ["../victim.txt", "/tmp/p43-victim-abs", "victim.txt", "case1/../../victim.txt", "."]:
        def setup(d, target=target):
            ours = _reproducer(d)
            doc = json.loads((d / "r/repro.json").read_text())
            doc.setdefault("files", []).append(target) if isinstance(doc.get("files"), list) else None
            (d / "r/repro.json").write_text(json.dumps(doc))
            _write("victim.txt", "keep\n")(d)
            _write("r/victim.txt", "keep\n")(d)
            return [o for o in ours if o != "r"] + [f"r/{f}" for f in os.listdir(d / "r") if f != "victim.txt"]
        P.append(Probe("4", f"repro.json lists {target}", ["repro", "-b", "GGML-CPU", ADD, "{d}/r"], "clean",
                       setup=setup))
    for f in ["README.md", "Makefile", "repro.c", "case1", "repro.json", "trace.json"]:
        def setup(d, f=f):
            _reproducer(d)
            _write("outside/victim", "keep\n")(d)
            p = d / "r" / f
            shutil.rmtree(p) if p.is_dir() else p.unlink()
            p.symlink_to(d / "outside" / ("" if f == "case1" else "victim"))
            return [f"r/{x}" for x in os.listdir(d / "r") if x != f]
        P.append(Probe("5", f"earlier reproducer, {f} a symlink out", ["repro", "-b", "GGML-CPU", ADD, "{d}/r"],
                       "clean", setup=setup))
    P.append(Probe("5", "earlier reproducer rewritten", ["repro", "-b", "GGML-CPU", ADD, "{d}/r"], "ok",
                   setup=lambda d: _reproducer(d), then=then))
    P.append(Probe("5", "earlier reproducer, README edited by the user", ["repro", "-b", "GGML-CPU", ADD, "{d}/r"],
                   "clean", setup=_edited))
    outdirs = {"under a file": ("{d}/f/sub", _write("f", "a file\n")), "an existing file": ("{d}/f", _write("f", "x")),
               "under /proc": ("/proc/self/nope", None), "in /proc": ("/proc/1", None),
               "a dangling symlink": ("{d}/dl", lambda d: (d / "dl").symlink_to(d / "nowhere")),
               "a symlink to a file": ("{d}/sl", lambda d: (_write("f", "x")(d), (d / "sl").symlink_to(d / "f"))),
               "/dev/null": ("/dev/null", None), "empty": ("", None),
               "newline in its name": ("{d}/a\nb", None), "escape in its name": ("{d}/a\x1b[31m", None),
               "repro.json a directory": ("{d}/r", lambda d: (d / "r/repro.json").mkdir(parents=True)),
               "repro.json a FIFO": ("{d}/r", lambda d: ((d / "r").mkdir(), os.mkfifo(d / "r/repro.json"))),
               "repro.json -> /dev/zero": ("{d}/r", lambda d: ((d / "r").mkdir(),
                                                              (d / "r/repro.json").symlink_to("/dev/zero"))),
               "repro.json of 100 MB": ("{d}/r", lambda d: ((d / "r").mkdir(),
                                                           os.truncate(_touch(d / "r/repro.json"), 100 << 20)))}
    for what, (out, setup) in outdirs.items():
        expect = "clean" if what in ("newline in its name", "escape in its name") else "refuse"
        P.append(Probe("13", f"OUTDIR {what}", ["repro", "-b", "GGML-CPU", ADD, out], expect, setup=setup,
                       raw="\x1b" in out))
    P.append(Probe("13", "repro -b CANN-SIM --name with /", ["repro", "-b", "CANN-SIM", "--name", "a=x/y", ADD,
                                                             "{d}/r"], "clean"))
    P.append(Probe("13", "repro, case absurd", ["repro", "-b", "GGML-CPU", ADD.replace("nf=1", "nf=" + "9" * 23),
                                                "{d}/r"], "refuse"))
    P.append(Probe("13", "repro, --seed huge", ["repro", "-b", "GGML-CPU", "--seed", str(1 << 70), ADD, "{d}/r"],
                   "clean"))
    P.append(Probe("13", "repro, --after absurd", ["repro", "-b", "GGML-CPU", "--after", "X(\x1b[2J)", ADD, "{d}/r"],
                   "refuse", raw=True))
    return P


def _touch(p):
    p.write_bytes(b"")
    return p


# --- tbo ---------------------------------------------------------------------------------------

def _binary(cases, **spec):
    from test_tbo_untrusted import FAKE

    def setup(d):
        b = d / "b"
        b.mkdir()
        (b / "test-backend-ops").write_text(f"#!{sys.executable}\n" + FAKE)
        (b / "test-backend-ops").chmod(0o755)
        (b / "spec.json").write_text(json.dumps({"cases": cases, **spec}))
        return ["b"]
    return setup


def _pids_dead(d):
    path = d / "b/pids.txt"
    return True if not path.exists() else all(not Path(f"/proc/{ln.split()[1]}").exists()
                                             for ln in path.read_text().splitlines())


def _untraced(d):
    subprocess.run([*OPS, "tbo", str(d / "b/test-backend-ops"), "-o", "ADD", "--results", str(d / "res.json")],
                   capture_output=True, timeout=120)
    return ["res.json", "res.json.partial.jsonl"]


def tbo_probes():
    P, B = [], "{d}/b/test-backend-ops"
    ok = ["ADD", "n=1", "ok", True]
    runs = {"name twice, OK then FAIL": ([ok, ["ADD", "n=2", "ok", True], ["ADD", "n=1", "fail", False]], {}, "fail"),
            "name twice, FAIL then OK": ([["ADD", "n=1", "fail", True], ok], {}, "fail"),
            "summary FAIL only": ([ok], {"summary": "FAIL"}, "fail"),
            "exit 1 only": ([ok], {"exit": 1}, "fail"), "exit 3 only": ([ok], {"exit": 3}, "fail"),
            "exit 0 after a FAIL": ([["ADD", "n=1", "fail", True]], {"exit": 0}, "fail"),
            "abort after its line": ([["ADD", "n=1", "ok_then_abort", True]], {}, "clean"),
            "every case silent": ([["ADD", "n=1", "silent", True], ["ADD", "n=2", "silent", True]], {}, "fail"),
            "abort in the only case": ([["ADD", "n=1", "abort", True]], {}, "fail"),
            "an unlisted name FAILs": ([ok, ["ADD", "zz", "fail", False]], {}, "fail"),
            "a clean run": ([ok, ["MUL", "n=1", "ok", True]], {}, "ok")}
    for what, (cases, spec, expect) in runs.items():
        P.append(Probe("6", f"tbo {what}", ["tbo", B, "--results", "{d}/res.json"], expect,
                       setup=_binary(cases, **spec)))
    for what, name in {"escape codes": "n=\x1b[31m\x07", "a newline's neighbour": "n=\r\x0b",
                       "a NUL": "n=\x00x", "invalid UTF-8 stand-in": "n=\udcff"}.items():
        raw = "raw:" + f"  ADD({name}): FAIL\n".encode("utf-8", "surrogateescape").decode("latin-1")
        P.append(Probe("6", f"tbo console name with {what}", ["tbo", B, "-o", "ADD"], "fail",
                       setup=_binary([["ADD", "n=1", raw, True]]), raw=True))
    hostile_ops = {"op with a slash": "../evil", "op with escapes": "A\x1b[31m", "op with a newline": "A\nB",
                   "op absolute path": "/tmp/p43-evil"}
    for what, op in hostile_ops.items():
        P.append(Probe("7", f"tbo --log-dir, binary lists {what}", ["tbo", B, "--log-dir", "{d}/logs"], "clean",
                       setup=_binary([[op, "n=1", "ok", True]]), raw=True))
    logdirs = {"existing ADD.log": lambda d: _write("logs/ADD.log", "notes\n")(d),
               "ADD.log a symlink out": lambda d: (_write("victim", "keep\n")(d), (d / "logs").mkdir(),
                                                   (d / "logs/ADD.log").symlink_to(d / "victim")),
               "ADD.log and ADD.2.log symlinks": lambda d: (_write("victim", "keep\n")(d), (d / "logs").mkdir(),
                                                            (d / "logs/ADD.log").symlink_to(d / "victim"),
                                                            (d / "logs/ADD.2.log").symlink_to(d / "victim")),
               "ADD.log a FIFO": lambda d: ((d / "logs").mkdir(), os.mkfifo(d / "logs/ADD.log")),
               "ADD.log a directory": lambda d: (d / "logs/ADD.log").mkdir(parents=True),
               "ADD.log dangling": lambda d: ((d / "logs").mkdir(), (d / "logs/ADD.log").symlink_to(d / "gone"))}
    for what, s in logdirs.items():
        P.append(Probe("7", f"tbo --log-dir {what}", ["tbo", B, "-o", "ADD", "--log-dir", "{d}/logs"], "ok",
                       setup=_chain(_binary([ok]), s)))
    for what, (path, s) in {"a file": ("{d}/f", _write("f", "x")), "under /proc": ("/proc/self/x/y", None),
                            "with escapes": ("{d}/l\x1b[31m", None), "under a file": ("{d}/f/l", _write("f", "x"))
                            }.items():
        P.append(Probe("7", f"tbo --log-dir {what}", ["tbo", B, "-o", "ADD", "--log-dir", path],
                       "ok" if "escapes" in what else "refuse", setup=_chain(_binary([ok]), s), raw=True))
    big = 1 << 18
    consoles = {"quadratic `  A(`": "  A(" * (big // 4) + ": x\n",
                "many `): `": "  A(" + "): " * (big // 3) + "\n",
                "a frame 100k deep": "\x1ecann-sim " + "[" * 100_000 + "]" * 100_000 + "\n",
                "a non-string call": '\x1ecann-sim {"call": 5, "rc": 1}\n',
                "a call not an object": '\x1ecann-sim [1, 2]\n',
                "a frame of a huge number": '\x1ecann-sim {"call": "aclnnAdd", "rc": 1' + "0" * 5000 + '}\n',
                "a frame with NaN": '\x1ecann-sim {"call": "aclnnAdd", "rc": NaN, "args": {"x": {"ne": [1e400]}}}\n',
                "a 50 MB line": "x" * (50 << 20) + "\n",
                "backtrace frames unclosed": "(a" * (big // 2) + "+0x1)[0x\n",
                "device memory lie": "  Device memory: 99999999999999999999999 MB (-5 MB free)\n"}
    for what, text in consoles.items():
        P.append(Probe("14", f"tbo console: {what}", ["tbo", B, "-o", "ADD", "--timeout", "30", "--results",
                                                       "{d}/res.json"], "clean",
                       setup=_binary([["ADD", "n=1", "raw:" + text, True], ["ADD", "n=1", "fail", False]],
                                     simulated=True), timeout=90))
    P.append(Probe("14", "tbo support listing sleeps, --timeout 2", ["tbo", B, "--timeout", "2"], "refuse",
                   setup=_binary([ok], support_sleep=60), timeout=40))
    for sig in (signal.SIGINT, signal.SIGTERM):
        P.append(Probe("14", f"tbo {sig.name} while a case sleeps", ["tbo", B, "-o", "ADD"], "clean",
                       setup=_binary([["ADD", "n=1", "sleep", True]]), signal_after=(sig, 4)))
        P.append(Probe("14", f"tbo {sig.name} on a quadratic line", ["tbo", B, "-o", "ADD"], "clean",
                       setup=_binary([["ADD", "n=1", "raw:" + "  A(" * (1 << 20) + "\n", True],
                                      ["ADD", "n=1", "sleep", False]]), signal_after=(sig, 4)))
    P.append(Probe("14", "tbo case sleeps past --timeout 2", ["tbo", B, "-o", "ADD", "--timeout", "2"], "fail",
                   setup=_binary([["ADD", "n=1", "sleep", True]]), timeout=60))
    # 16: --trace --resume
    traced = ["tbo", B, "-o", "ADD", "--results", "{d}/t.json", "--trace"]
    P.append(Probe("16", "tbo --trace --resume of a run without --trace",
                   ["tbo", B, "-o", "ADD", "--resume", "{d}/res.json", "--trace"], "refuse",
                   setup=_chain(_binary([ok], simulated=True), _untraced)))
    for what, text in {"empty": "", "not JSON": "nope", "a list": "[]", "results a string": '{"results": "x"}',
                       "a result without name": '{"results": [{"status": "OK"}]}',
                       "a journal line broken": None}.items():
        def setup(d, text=text):
            _binary([ok], simulated=True)(d)
            if text is None:
                _write("res.json.partial.jsonl", '{"name": 5}\n{not json\n')(d)
                _write("res.json", '{"results": [], "interrupted": true}')(d)
            else:
                _write("res.json", text)(d)
            return ["b", "res.json", "res.json.partial.jsonl"]
        P.append(Probe("16", f"tbo --resume a file {what}", ["tbo", B, "-o", "ADD", "--resume", "{d}/res.json"],
                       "clean", setup=setup))
    P.append(Probe("16", "tbo --trace --resume (trace files)", traced, "ok", setup=_binary([ok], simulated=True)))
    paths = {"--results in /proc": ["--results", "/proc/self/x"], "--results a directory": ["--results", "{d}"],
             "--summary-file under a file": ["--summary-file", "{d}/b/spec.json/x"],
             "--summary-file /proc": ["--summary-file", "/proc/self/nope/s.md"],
             "--baseline a FIFO": ["--baseline", "{d}/fifo"], "--baseline not a report": ["--baseline", "{d}/b/spec.json"],
             "--cases a FIFO": ["--cases", "{d}/fifo"], "--resume a FIFO": ["--resume", "{d}/fifo"],
             "-p unbalanced": ["-p", "("], "-p OP=": ["-p", "ADD="], "-o escapes": ["-o", "A\x1b[2J"],
             "--shard 0/0": ["--shard", "0/0"], "--shard 5/2": ["--shard", "5/2"], "-j 0": ["-j", "0"],
             "-j huge": ["-j", str(1 << 40)], "--timeout -1": ["--timeout", "-1"], "--timeout nan": ["--timeout", "nan"],
             "--timeout inf": ["--timeout", "inf"], "--max-aborts -1": ["--max-aborts", "-1"],
             "-b escapes": ["-b", "CANN\x1b[31m"], "--ggml-version junk": ["--ggml-version", "x\x1b"]}
    for what, args in paths.items():
        expect = "clean" if what in ("--timeout inf", "-p OP=", "--max-aborts -1", "-j huge",
                                     "--ggml-version junk") else "refuse"
        P.append(Probe("14", f"tbo {what}", ["tbo", B, *(["-o", "ADD"] if "-o" not in args else []), *args], expect,
                       setup=_chain(_binary([ok]), lambda d: os.mkfifo(d / "fifo")), raw=True, timeout=60))
    P.append(Probe("14", "tbo a binary that is a directory", ["tbo", "{d}"], "refuse"))
    P.append(Probe("14", "tbo a binary that does not exist", ["tbo", "{d}/nope"], "refuse"))
    P.append(Probe("14", "tbo a binary not executable", ["tbo", "{d}/f"], "refuse", setup=_write("f", "x")))
    P.append(Probe("14", "tbo a binary that prints nothing and exits", ["tbo", "/bin/true"], "clean"))
    P.append(Probe("14", "tbo a binary that prints /dev/urandom", ["tbo", "{d}/u", "--timeout", "5"], "clean",
                   setup=lambda d: ((d / "u").write_text("#!/bin/sh\nhead -c 20000000 /dev/urandom\n"),
                                    (d / "u").chmod(0o755)), timeout=90, raw=False))
    return P


# --- model files -----------------------------------------------------------------------------

def _gguf(keys=None, drop=(), arch="llama", typed=(), **tensors):
    """A setup writing d/m.gguf: the hostile-models test's one-layer llama, keys edited,
    `typed` (name, GGUFValueType, value) written as they are."""
    def setup(d):
        from test_hostile_models import KEYS, _tensors
        from _gguf_models import write_model
        k = {n: v for n, v in {**KEYS, **(keys or {})}.items() if v is not None}
        t = {**_tensors(), **{n.replace("__", "."): v for n, v in tensors.items()}}
        for name in drop:
            t.pop(name, None)
        write_model(d / "m.gguf", arch, k, t, [(n.replace("ARCH", arch), vt, v) for n, vt, v in typed])
    return setup


def model_probes():
    import gguf
    from test_hostile_models import BAD_VALUES, DAMAGED, _header, _key, _vocab_file
    V = gguf.GGUFValueType
    P = []
    for what, keys, tensors, _ in BAD_VALUES:
        P.append(Probe("8", f"gguf {what}", ["cases", "--from-gguf", "{d}/m.gguf"], "refuse",
                       setup=_gguf(keys, **tensors)))
    for what, keys, tensors, _ in BAD_VALUES[:6]:
        P.append(Probe("8", f"support --from-gguf {what}", ["support", "-b", "NUMPY", "--from-gguf", "{d}/m.gguf"],
                       "refuse", setup=_gguf(keys, **tensors)))
    kinds = {"u64 2^62": (V.UINT64, 1 << 62), "i32 -1": (V.INT32, -1), "i64 -2^63": (V.INT64, -(1 << 63)),
             "f32 nan": (V.FLOAT32, math.nan), "f64 1.5": (V.FLOAT64, 1.5), "string": (V.STRING, "12"),
             "bool": (V.BOOL, True), "array of strings": (V.ARRAY, ["a", "b"])}
    for key in ["embedding_length", "block_count", "feed_forward_length", "attention.head_count_kv",
                "rope.dimension_count", "expert_count"]:
        for what, (vt, v) in kinds.items():
            P.append(Probe("8", f"gguf {key} {what}", ["cases", "--from-gguf", "{d}/m.gguf"], "clean",
                           setup=_gguf({key: None}, typed=[(f"ARCH.{key}", vt, v)])))
    for key, (vt, v) in {"rope.freq_base": (V.FLOAT32, -1.0), "rope.freq_base ": (V.STRING, "x"),
                         "rope.scaling.factor": (V.FLOAT32, 0.0), "attention.layer_norm_rms_epsilon": (V.FLOAT32, math.inf),
                         "feed_forward_length": (V.ARRAY, [128, 0]),
                         "expert_used_count": (V.UINT32, 0), "rope.scaling.type": (V.UINT32, 3)}.items():
        key = key.strip()
        extra = {"rope.scaling.type": "yarn"} if key == "rope.scaling.factor" else {}
        P.append(Probe("15", f"gguf {key} {v!r}", ["cases", "--from-gguf", "{d}/m.gguf"], "clean",
                       setup=_gguf({key: None, **extra}, typed=[(f"ARCH.{key}", vt, v)])))
    for what, setup in {"architecture as an int": _gguf(typed=[("general.architecture", V.UINT32, 7)]),
                        "unknown architecture": _gguf(arch="nosuch"),
                        "empty architecture": _gguf(arch=""),
                        "architecture with escapes": _gguf(arch="llama\n\x1b[31mred\x07"),
                        "tensor name with escapes": _gguf(**{"blk__0__ffn_up__weight\x1b[31m": ((64,), "f32")}),
                        "no token_embd": _gguf(drop=("token_embd.weight",)),
                        "tensor type unknown": None}.items():
        if setup is None:
            continue
        P.append(Probe("15", f"gguf {what}", ["cases", "--from-gguf", "{d}/m.gguf"], "clean", setup=setup, raw=True))
    for what, (data, _) in DAMAGED.items():
        P.append(Probe("9", f"gguf header: {what}", ["cases", "--from-gguf", "{d}/bad.gguf"], "refuse",
                       setup=_write("bad.gguf", data), mem_mb=1024))
    damaged = {"version 2": b"GGUF" + struct.pack("<IQQ", 2, 0, 0),
               "version 4": b"GGUF" + struct.pack("<IQQ", 4, 0, 0),
               "empty file": b"", "magic cut": b"GG",
               "a key type 13": _header(0, 1, _key(b"k", 13) + bytes(8)),
               "a key type 2^31": _header(0, 1, _key(b"k", 1 << 31) + bytes(8)),
               "a tensor name of 2^62": _header(1, 0, struct.pack("<Q", 1 << 62) + bytes(32)),
               "a tensor of 0 dims": _header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<I", 0) + bytes(12)),
               "a tensor type 9999": _header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 4, 9999, 0)),
               "a tensor dim 0": _header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 0, 0, 0)),
               "a tensor offset 2^63": _header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<IQIQ", 1, 4, 0, 1 << 63)),
               "general.alignment 0": _header(0, 1, _key(b"general.alignment", 4) + struct.pack("<I", 0)),
               "general.alignment 3": _header(0, 1, _key(b"general.alignment", 4) + struct.pack("<I", 3)),
               "key name invalid UTF-8": _header(0, 1, struct.pack("<Q", 2) + b"\xff\xfe" + struct.pack("<I", 4) + bytes(4)),
               "string value invalid UTF-8": _header(0, 1, _key(b"general.architecture", 8) + struct.pack("<Q", 2)
                                                     + b"\xff\xfe"),
               "a bool of 7": _header(0, 1, _key(b"llama.block_count", 7) + b"\x07"),
               "truncated mid-key": _header(0, 2, _key(b"general.architecture", 8) + struct.pack("<Q", 5) + b"ll"),
               "big-endian counts": b"GGUF" + struct.pack(">IQQ", 3, 1, 1)}
    for what, data in damaged.items():
        P.append(Probe("9", f"gguf header: {what}", ["cases", "--from-gguf", "{d}/bad.gguf"], "refuse",
                       setup=_write("bad.gguf", data), mem_mb=1024))
    def cut(n):
        def setup(d):
            _gguf()(d)
            data = (d / "m.gguf").read_bytes()
            (d / "bad.gguf").write_bytes(data[:n])
            (d / "m.gguf").unlink()
        return setup
    for n in [8, 20, 24, 100, 500, 1500, 3000]:
        P.append(Probe("9", f"a valid model cut at {n} bytes", ["cases", "--from-gguf", "{d}/bad.gguf"], "clean",
                       setup=cut(n), mem_mb=1024))
    # 10: memory
    P.append(Probe("10", "300k strings", ["cases", "--from-gguf", "{d}/v.gguf"], "clean",
                   setup=lambda d: _vocab_file(d / "v.gguf", 300_000) and None, mem_mb=800))
    P.append(Probe("10", "3M strings (42 MB)", ["cases", "--from-gguf", "{d}/v.gguf"], "clean",
                   setup=lambda d: _vocab_file(d / "v.gguf", 3_000_000) and None, mem_mb=800, timeout=120))
    many_keys = _header(0, 1 << 20, b"".join(_key(b"k%07d" % i, 4) + b"\0\0\0\0" for i in range(1 << 20)))
    P.append(Probe("10", "a million keys", ["cases", "--from-gguf", "{d}/bad.gguf"], "clean",
                   setup=_write("bad.gguf", many_keys), mem_mb=800, timeout=120))
    infos = _header(1 << 19, 1, _key(b"general.architecture", 8) + struct.pack("<Q", 5) + b"llama" + b"".join(
        struct.pack("<Q", 8) + b"t%07d" % i + struct.pack("<IQIQ", 1, 4, 0, 0) for i in range(1 << 19)))
    P.append(Probe("10", "half a million tensor infos", ["cases", "--from-gguf", "{d}/bad.gguf"], "clean",
                   setup=_write("bad.gguf", infos), mem_mb=800, timeout=120))
    # 11: files that are not regular files
    for what, mk in {"a FIFO": lambda p: os.mkfifo(p), "a directory": lambda p: p.mkdir(),
                     "/dev/zero": lambda p: p.symlink_to("/dev/zero"),
                     "/dev/urandom": lambda p: p.symlink_to("/dev/urandom"),
                     "a dangling symlink": lambda p: p.symlink_to(p.parent / "nowhere")}.items():
        for cmd in (["cases", "--from-gguf"], ["support", "-b", "NUMPY", "--from-gguf"],
                    ["test", "-b", "NUMPY", "--cases"], ["perf", "-b", "NUMPY", "--cases"],
                    ["test", "-b", "NUMPY", "-o", "ABS", "--resume"], ["test", "-b", "NUMPY", "-o", "ABS", "--baseline"]):
            P.append(Probe("11", f"{' '.join(cmd)} {what}", [*cmd, "{d}/x"], "refuse",
                           setup=lambda d, mk=mk: mk(d / "x") and None, timeout=60))
    return P


# --- case names and case files ----------------------------------------------------------------

def case_probes():
    from test_hostile_cases import BAD_LINES, GOOD_MUL
    P = []
    big = "9" * 23
    names = {"nf 10^23": ADD.replace("nf=1", f"nf={big}"), "ne 10^23": f"ABS(type=f32,ne_a=[{big},1,1,1],v=0)",
             "ne 2^62": f"ABS(type=f32,ne_a=[{1 << 62},1,1,1],v=0)", "ne -1": "ABS(type=f32,ne_a=[-1,7,11,13],v=0)",
             "ne 0": "ABS(type=f32,ne_a=[0,7,11,13],v=0)", "nr 2^40": ADD.replace("nr=[1,1,1,1]", f"nr=[{1 << 40},1,1,1]"),
             "MUL_MAT m 2^40": f"MUL_MAT(type_a=f32,type_b=f32,m={1 << 40},n=1,k=32,bs=[1,1],nr=[1,1],per=[0,1,2,3],"
                               "k_v=0,o=1)",
             "type bogus": "ABS(type=bogus,ne_a=[5,7,11,13],v=0)", "eps nan": "RMS_NORM(type=f32,ne=[256,8,1,1],v=0,"
                                                                          "eps=nan,inplace=0)",
             "eps inf": "NORM(type=f32,ne=[64,5,4,3],v=0,eps=inf,noncontig_rows=0)",
             "escapes": "ABS\x1b[31m(type=f32)", "unbalanced": "ABS(type=f32,ne_a=[5,7", "empty": "",
             "100 kB name": "ABS(type=f32,ne_a=[" + "1," * 50_000 + "1],v=0)", "only commas": ",,,,",
             "a value with escapes": "ABS(type=f32\x1b[2J,ne_a=[5,7,11,13],v=0)",
             "ne 1.5": "ABS(type=f32,ne_a=[1.5,7,11,13],v=0)", "ne 1e30": "ABS(type=f32,ne_a=[1e30,7,11,13],v=0)"}
    for what, n in names.items():   # a 0 ne is an empty tensor, eps inf >= 0: both ggml's domain
        P.append(Probe("12", f"test -o {what}", ["test", "-b", "NUMPY", "-o", n],
                       "clean" if what in ("ne 0", "eps inf") else "refuse", raw=True, mem_mb=4096))
    for cmd in (["perf", "-b", "NUMPY"], ["support", "-b", "NUMPY"], ["grad", "-b", "NUMPY"], ["test", "-b", "GGML-CPU"]):
        for what in ("nf 10^23", "ne 2^62", "escapes"):
            P.append(Probe("12", f"{cmd[0]} -b {cmd[2]} -o {what}", [*cmd, "-o", names[what]], "refuse", raw=True,
                           mem_mb=4096))
    files = {"100 MB sparse": lambda d: os.truncate(_touch(d / "c"), 100 << 20),
             "2M empty lines": _write("c", b"\n" * (2 << 20)), "a 1 MB line": _write("c", "ADD(" + "x" * (1 << 20) + ")\n"),
             "NUL bytes": _write("c", b"ABS\x00(type=f32)\n"), "invalid UTF-8": _write("c", b"\xff\xfe\xfd\n"),
             "escapes": _write("c", "ABS\x1b[31m(type=f32)\n"), "absurd counts": _write("c", names["nf 10^23"] + "\n"),
             "comments only": _write("c", "# nothing\n\n"), "a UTF-16 file": _write("c", ABS.encode("utf-16")),
             "CRLF lines": _write("c", ABS + "\r\n")}
    for what, s in files.items():
        expect = "clean" if what in ("comments only", "CRLF lines") else "refuse"
        for cmd in (["test", "-b", "NUMPY"], ["tbo", "/bin/true"]):
            P.append(Probe("12", f"{cmd[0]} --cases {what}", [*cmd, "--cases", "{d}/c"], expect, setup=s, raw=True,
                           mem_mb=2048))
    for what, line, _ in BAD_LINES:
        P.append(Probe("15", f"export line: {what}", ["test", "-b", "NUMPY", "--cases", "{d}/g"], "refuse",
                       setup=_write("g", GOOD_MUL + "\n" + line + "\n")))
    P.append(Probe("15", "export line via tbo: negative stride", ["tbo", "/bin/true", "--cases", "{d}/g"], "refuse",
                   setup=_write("g", GOOD_MUL + "\n" + BAD_LINES[2][1] + "\n")))
    soc = {"--soc ''": ["--soc", "", "-b", "NUMPY"], "--soc 310P -b GGML-CPU": ["--soc", "310P", "-b", "GGML-CPU"],
           "--soc escapes": ["--soc", "910B\x1b[31m", "-b", "CANN-SIM"], "--soc newline": ["--soc", "910B\n310P",
                                                                                         "-b", "CANN-SIM"],
           "--soc lower": ["--soc", "910b", "-b", "CANN-SIM"]}
    for what, args in soc.items():
        P.append(Probe("16", f"test {what}", ["test", "-o", ABS, *args], "clean" if "lower" in what else "refuse",
                       raw=True))
    envs = {"CANN_SIM_SOC": ["bogus", "910B\x1b[31m", ""], "CANN_SIM_SEED": ["abc", str(1 << 80), "-1"],
            "CANN_SIM_MALLOC_ALIGN": ["0", "-1", "3", str(1 << 62), "x"], "CANN_SIM_TRACE": ["\x1b[2J"],
            "CANN_SIM_POISON": ["maybe"], "OPS_REF_CACHE_MAX_MB": ["-5", "abc", "nan"],
            "OPS_CACHE_DIR": ["/proc/self/nope", "{d}/f"], "OPS_CATALOG": ["9.9.9", "\x1b[31m"],
            "OPS_MEMORY_LOG": ["/proc/self/nope/x"], "OPS_REF_CACHE": ["\x1b"]}
    for k, vs in envs.items():
        for v in vs:
            P.append(Probe("env", f"{k}={v!r}", ["test", "-b", "CANN-SIM", "-o", ABS], "clean", env={k: v},
                           setup=_write("f", "a file\n"), raw=True))
    results = {"--results /proc": ["--results", "/proc/self/nope/r.json"], "--results a dir": ["--results", "{d}"],
               "--log-dir a file": ["--log-dir", "{d}/f"], "--summary-file under a file": ["--summary-file", "{d}/f/s"],
               "--resume not JSON": ["--resume", "{d}/f"], "--baseline not a report": ["--baseline", "{d}/f"],
               "--shard 3/2": ["--shard", "3/2"], "-p bad regex": ["-p", "(["], "--sample -1": ["--sample", "-1"],
               "-j 0": ["-j", "0"], "--timeout nan": ["--timeout", "nan"], "--repeat 10^9": ["--repeat", str(10 ** 9)],
               "--seed 2^70": ["--seed", str(1 << 70)]}
    for what, args in results.items():
        expect = "clean" if what in ("--seed 2^70", "--baseline not a report") else "refuse"
        P.append(Probe("paths", f"test {what}", ["test", "-b", "NUMPY", "-o", ABS, *args], expect,
                       setup=_write("f", "a file\n")))
    return P


def all_probes():
    return repro_probes() + tbo_probes() + model_probes() + case_probes()


def _template(root: Path):
    r = subprocess.run([*OPS, "repro", "-b", "GGML-CPU", ADD, str(root / "template")], capture_output=True,
                       text=True, timeout=300)
    if r.returncode != 0:
        sys.exit(f"probe43: the template reproducer failed: {r.stderr}")
    TEMPLATE["repro"] = root / "template"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="only probes whose group or text holds this")
    ap.add_argument("-j", type=int, default=2, help="probes run side by side")
    ap.add_argument("-v", action="store_true", help="every probe's line, not only the defects'")
    ap.add_argument("--keep", action="store_true", help="leave the scratch folder")
    args = ap.parse_args()
    os.chdir(ROOT)
    root = Path(tempfile.mkdtemp(prefix="probe43-"))
    probes = [p for p in all_probes() if args.k in f"{p.group} {p.what}"]
    _template(root)
    t0 = time.monotonic()

    def one(ip):
        i, p = ip
        try:
            cls, note = run_probe(p, root / f"{i:03d}")
        except Exception as e:   # the probe's own fault, shown as such
            cls, note = "PROBE-ERROR", f"{type(e).__name__}: {e}"
        line = f"{cls:12} [{p.group:>5}] {p.what!r}: {note}"
        if args.v or cls in DEFECTS or cls == "PROBE-ERROR":
            print(line, flush=True)
        return p, cls
    with ThreadPoolExecutor(args.j) as pool:
        done = list(pool.map(one, enumerate(probes)))
    counts = Counter(c for _, c in done)
    by_group = Counter(p.group for p, _ in done)
    print(f"\n{len(done)} probes in {time.monotonic() - t0:.0f} s; by group: "
          + ", ".join(f"{g} {n}" for g, n in sorted(by_group.items())))
    for cls, n in counts.most_common():
        print(f"  {cls:12} {n}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"scratch: {root}")
    return 1 if any(c in DEFECTS or c == "PROBE-ERROR" for c in counts) else 0


if __name__ == "__main__":
    sys.exit(main())
