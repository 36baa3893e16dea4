"""The processes of a test-backend-ops binary (ops tbo, tbo.py): each started in a group of
its own and dead with ops (lifeline.py), its output read as it comes to a Reader
(tbo_console.py), killed at its time limit or on SIGINT / SIGTERM / SIGHUP; and the files
its console is logged to, each one this run created."""
from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from .lifeline import die_with_parent
from .runner import STOP_SIGNALS, Interrupted, leave_hung_up_terminal
from .selection import BadInput
from .tbo_console import LOG_MARK, Console, Reader


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
        """One process, its console read to `reader` (and written to `log`) until it ends,
        runs out of `timeout` seconds (killed) or the run is stopped."""
        if self.stopped.is_set():
            return Proc(None, False, True, reader)
        try:
            # its own group (an interrupt kills a launcher's children with it), and dead with ops
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env=_environment(env), start_new_session=True, preexec_fn=die_with_parent())
        except (OSError, subprocess.SubprocessError) as e:   # the binary went away: its case dies as in a crash
            reader.feed(f"cannot run {cmd[0]}: {getattr(e, 'strerror', None) or e}")
            return Proc(127, False, False, reader)
        if log is not None:   # where each process's console begins (log_processes)
            log.write(f"{LOG_MARK}{' '.join(cmd)}\n".encode(errors="replace"))
        reader.last = time.monotonic()
        with self.lock:
            self.live.add(p)
        if self.stopped.is_set():   # stopped between the check and now
            _kill(p)
        try:
            timed_out = self._pump(p, time.monotonic() + timeout, Console(reader, log))
            rc = p.wait()
        finally:
            if p.poll() is None:   # left by an exception (KeyboardInterrupt): not left running
                _kill(p)
                p.wait()
            with self.lock:
                self.live.discard(p)
            if p.stdout is not None:
                p.stdout.close()
        return Proc(rc, timed_out, self.stopped.is_set() and not timed_out, reader)

    def _pump(self, p: subprocess.Popen, deadline: float, console: Console) -> bool:
        """The process's output to `console` until its end, the deadline (the process
        killed: True) or a stop."""
        assert p.stdout is not None   # started with stdout=PIPE
        with selectors.DefaultSelector() as sel:
            sel.register(p.stdout, selectors.EVENT_READ)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    _kill(p)
                    console.close()
                    return True
                if not sel.select(min(left, 0.5)):
                    if self.stopped.is_set():
                        break
                    continue
                chunk = os.read(p.stdout.fileno(), 65536)
                if not chunk:
                    break
                console.feed(chunk)
        console.close()
        return False


def _environment(extra: dict | None) -> dict | None:
    return None if not extra else {**os.environ, **extra}


def _kill(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Stop:
    """SIGINT / SIGTERM while a run goes on: every process killed, the signal kept."""

    def __init__(self, procs: Processes):
        self.procs = procs
        self.signals: list[int] = []
        self.old: dict[int, Any] = {}

    def _handler(self, signum, frame) -> None:
        leave_hung_up_terminal(signum)
        self.signals.append(signum)
        self.procs.stop()

    def __enter__(self) -> Stop:
        self.old = {s: signal.signal(s, self._handler) for s in STOP_SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self.old.items():
            signal.signal(s, h)


def one_process(cmd: list[str], timeout: float, reader: Reader, env: dict | None) -> Proc:
    """A process of the binary before the run (its usage, its listing), read to `reader`:
    killed after `timeout` seconds (BadInput) or on SIGINT / SIGTERM / SIGHUP (Interrupted)."""
    procs = Processes()
    with Stop(procs) as stop:
        proc = procs.run(cmd, timeout, reader, None, env)
    if stop.signals:
        raise Interrupted(stop.signals[0])
    if proc.timed_out:
        raise BadInput(f"{' '.join(cmd[:2])} did not end in {timeout:g} s (--timeout)")
    said = reader.side
    if proc.rc == 127 and said and said[-1].startswith(f"cannot run {cmd[0]}: "):
        raise BadInput(said[-1])
    return proc


MAX_LOG_NAMES = 1000   # OP.log, OP.2.log, ... tried before a log is given up


def open_log(log_dir: str, name: str) -> BinaryIO | None:
    """A new file DIR/NAME.log for an op's console, created by this run: where that name
    is taken (an earlier run's log, anyone's file, a symlink) DIR/NAME.2.log, .3.log, ...;
    never an existing file appended to, nor a symlink followed. None (no log, the run goes
    on) where none can be made."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for k in range(1, MAX_LOG_NAMES + 1):
        path = os.path.join(log_dir, f"{name}.log" if k == 1 else f"{name}.{k}.log")
        try:
            return os.fdopen(os.open(path, flags, 0o644), "wb")
        except FileExistsError:
            continue
        except OSError:
            return None
    return None

