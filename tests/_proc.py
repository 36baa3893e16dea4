"""The processes of this machine as /proc lists them (Linux): for the tests that check
what a run leaves behind."""
import os


def proc_stats():
    """(pid, the /proc/<pid>/stat fields after the command name) of every process alive
    now; fields[0] is the state, fields[1] the parent, fields[2] the process group."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    yield int(d), f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue


def cmdline(pid: int) -> str:
    """The command line of process `pid`, its arguments joined by spaces ("" once gone)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")   # (anyone's: any bytes)
    except OSError:
        return ""
