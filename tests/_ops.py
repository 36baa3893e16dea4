"""`ops` as the tests run it: this Python's `-m cannops.cli.main`, its output captured."""
import json
import os
import subprocess
import sys

OPS = [sys.executable, "-m", "cannops.cli.main"]


def ops(*args, env=None, timeout=300, **kw):
    """`ops ARGS`, `env` added to this process's environment: its CompletedProcess (text)."""
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, **kw)


def load(path):
    """A JSON file (a results file)."""
    with open(path) as f:
        return json.load(f)
