"""Child processes that never outlive ops: each started in a process group of its own (an
interrupt kills the group) and asked of the kernel to get SIGKILL when ops dies
(prctl PR_SET_PDEATHSIG, through cffi), so that not even `kill -9` of ops leaves one running.

The signal comes when the thread that started the child ends: a child is started by the
thread that then waits for it (Processes.run), so that thread outlives it."""
from __future__ import annotations

import os
import signal
import threading

PR_SET_PDEATHSIG = 1   # <linux/prctl.h>
_lock = threading.Lock()
_prctl: list = []      # once loaded: [the call that sets the signal] or [None] where there is none


def _load():
    with _lock:
        if not _prctl:
            try:
                from cffi import FFI
                ffi = FFI()
                # prctl is variadic; its integer arguments travel as named ones do on Linux
                # (x86-64, AArch64), and a fixed signature needs nothing built at the call
                ffi.cdef("int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, "
                         "unsigned long a5);")
                fn = ffi.dlopen(None).prctl
                _prctl.append(lambda: fn(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0))
            except (OSError, AttributeError, ImportError):   # not Linux: the process group alone
                _prctl.append(None)
        return _prctl[0]


def die_with_parent():
    """A Popen preexec_fn: the child gets SIGKILL when its parent dies; a parent that died
    before the child asked (the race between fork and prctl) kills it at once. It calls
    nothing that takes a lock (a child forked from a threaded parent must not)."""
    set_signal = _load()
    parent = os.getpid()

    def preexec() -> None:
        if set_signal is not None:
            set_signal()
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec
