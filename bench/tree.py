"""One command measured as a whole process tree: wall seconds, CPU seconds of the command
and every descendant (workers included), the peak of the tree's summed resident memory
and that of its largest process, and the machine around it (load average, the cores'
worth of CPU other processes took).

    python bench/tree.py -- ops test -o ABS -b GGML-CPU     # prints the figures as JSON
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass

SAMPLE_S = 0.05       # how often the tree's memory is read
_PAGE = os.sysconf("SC_PAGE_SIZE")
_TICK = os.sysconf("SC_CLK_TCK")


def _children() -> dict[int, list[int]]:
    """ppid -> pids, from /proc/*/stat (one pass)."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out




def tree_processes(root: int) -> dict[int, tuple[int, int]]:
    """pid -> (bytes resident now, its VmHWM) of `root` and all its descendants."""
    kids, out, todo = _children(), {}, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                status = f.read()
            out[pid] = (int(status.split(b"VmRSS:")[1].split()[0]) * 1024,
                        int(status.split(b"VmHWM:")[1].split()[0]) * 1024)
        except (OSError, ValueError, IndexError):
            pass
        todo += kids.get(pid, [])
    return out


def _busy_seconds() -> float:
    with open("/proc/stat", "rb") as f:
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f.readline().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICK


@dataclass
class Figures:
    wall: float           # seconds
    cpu: float            # user + system seconds of the whole tree
    peak_mib: float       # peak of the tree's summed RSS
    largest_mib: float    # peak of its largest process
    load: float           # 1-minute load average at the start
    others: float         # cores' worth of CPU other processes took meanwhile
    rc: int
    stdout: str = ""


def run(cmd: list[str], env: dict | None = None, cwd: str | None = None, watch=None) -> Figures:
    """`watch(t, root, {pid: (rss, hwm)})`, where given, sees every sample (t: time.time())."""
    load = os.getloadavg()[0]
    r0, busy0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), _busy_seconds(), time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=None if env is None else {**os.environ, **env}, cwd=cwd)
    peak = [0, 0]
    done = threading.Event()

    def sample():
        while not done.wait(SAMPLE_S):
            procs = tree_processes(p.pid)
            if watch is not None:
                watch(time.time(), p.pid, procs)
            total, largest = sum(r for r, _ in procs.values()), max((h for _, h in procs.values()), default=0)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], largest)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out = p.communicate()[0]
    done.set()
    th.join()
    wall = time.perf_counter() - t0
    r1, busy1 = resource.getrusage(resource.RUSAGE_CHILDREN), _busy_seconds()
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    # the largest single process' peak, should the sampler have missed a short-lived one
    largest = max(peak[1], r1.ru_maxrss * 1024 if r1.ru_maxrss > r0.ru_maxrss else 0)
    return Figures(wall, cpu, max(peak[0], largest) / 2**20, largest / 2**20, load,
                   max(0.0, busy1 - busy0 - cpu) / wall if wall > 0 else 0.0, p.returncode, out)


if __name__ == "__main__":
    f = run(sys.argv[sys.argv.index("--") + 1:] if "--" in sys.argv else sys.argv[1:])
    d = asdict(f)
    d.pop("stdout")
    print(json.dumps(d))
