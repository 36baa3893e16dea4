"""What the writers of standalone reproducers (ops repro) share, whatever the device: a
checked output as the program compares it, and the pieces of a repro.c and its Makefile
that do not depend on the API it calls (backend/ggml/repro.py, backend/cann/repro.py)."""
from __future__ import annotations

import os
import pathlib
import shlex
from dataclasses import dataclass, field

HEADER = pathlib.Path(__file__).resolve().parents[1] / "native" / "repro" / "repro.h"


@dataclass
class Checked:
    """One output the program compares: its stored device bytes (`device`, a .npy of
    uint8), its reference (`reference`, float64 values in ggml's element order), the
    case's threshold, and what the program needs to read it (type name, ne, nb, where)."""
    label: str
    device: str
    reference: str
    threshold: float
    type: str
    ne: tuple[int, ...]
    nb: tuple[int, ...]
    where: str = ""          # how the program reaches it (a ggml tensor variable, a download)


@dataclass
class Step:
    """One case of the sequence the program runs, in order; only the last is compared."""
    name: str
    folder: str
    inputs: dict = field(default_factory=dict)      # how the program reaches it -> .npy file
    checked: list[Checked] = field(default_factory=list)


def c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def comment(text: str) -> str:
    """A C comment holding any text (a case name, a trace record)."""
    return "/* " + text.replace("*/", "* /") + " */"


def sim_environment() -> dict[str, str]:
    """The CANN simulator's settings of this run (CANN_SIM_*): the program runs under the
    same; a real CANN ignores them."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("CANN_SIM_")}


def makefile(title: str, variables: list[str], build: str, env: dict[str, str]) -> str:
    """A reproducer's Makefile: `make` builds ./repro, `make run` runs it."""
    lines = [f"# {title}", "# `make` builds ./repro; `make run` runs it: exit 0 when the stored device outputs",
             "# reproduce byte for byte, 1 when they do not, 2 on an error.", ""]
    lines += variables + ["CFLAGS ?= -O1 -g -Wall -std=gnu11", ""]
    if env:
        lines += ["# the CANN simulator's settings of the recorded run (a real CANN ignores them)"]
        lines += [f"export {k} = {v}" for k, v in env.items()] + [""]
    lines += ["repro: repro.c repro.h", "\t" + build, "", "run: repro", "\t./repro", "",
              "clean:", "\trm -f repro", "", ".PHONY: run clean", ""]
    return "\n".join(lines)


def quoted(path: str) -> str:
    return shlex.quote(path)
