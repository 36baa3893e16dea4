"""What the writers of standalone reproducers (ops repro) share, whatever the device: a
checked output as the program compares it, and the pieces of a repro.c and its Makefile
that do not depend on the API it calls (backend/ggml/repro.py, backend/cann/repro.py)."""
from __future__ import annotations

import os
import pathlib
import re
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
    offset: int = 0          # its view's offset in what the program reads (bytes)


@dataclass
class Step:
    """One case of the sequence the program runs, in order; only the last is compared."""
    name: str
    folder: str
    inputs: dict = field(default_factory=dict)      # how the program reaches it -> .npy file
    checked: list[Checked] = field(default_factory=list)


def c_string(text: str | bytes) -> str:
    """A C string literal of any text (a tensor name, a path, a message), byte for byte:
    printable ASCII as itself, every other byte (a newline, a backslash, UTF-8) as a
    three-digit octal escape, which no following character can extend, and `?` escaped so
    that no trigraph (`??/` is a backslash under -std=c11) forms. No byte of it can end the
    literal or splice a line."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    return '"' + "".join(_C_CHARS[b] for b in data) + '"'


_C_CHARS = [chr(b) if 0x20 <= b < 0x7F and chr(b) not in '\\"?' else "\\?" if b == 0x3F else f"\\{b:03o}"
            for b in range(256)]


def comment(text: str) -> str:
    """A C comment holding any text (a case name, a trace record) on one line: nothing in
    it can end the comment (`*/`), open another, or splice the next line into it."""
    flat = "".join(ch if ch.isprintable() and ch.isascii() else f"\\x{ord(ch):02x}" for ch in text)
    return "/* " + flat.replace("*/", "* /").replace("/*", "/ *") + " */"


def sim_environment() -> dict[str, str]:
    """The CANN simulator's settings of this run (CANN_SIM_*): the program runs under the
    same; a real CANN ignores them. A name or value a Makefile cannot hold is ValueError."""
    env = {k: v for k, v in sorted(os.environ.items()) if k.startswith("CANN_SIM_")}
    for k, v in env.items():
        if not MAKE_NAME.fullmatch(k):
            raise ValueError(f"the environment variable {k!r} is not a name a Makefile can export")
        make_value(v, k)
    return env


MAKE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def make_value(text: str, what: str) -> str:
    """`text` as the value of a make assignment that gives back exactly `text`: `$` doubled
    (make expands nothing of it), `#` escaped (with the backslashes before it doubled, as
    make reads them), a leading or trailing blank or a trailing backslash guarded by the
    empty `$()`.
    A line break cannot be held: ValueError naming `what`."""
    if any(c in text for c in "\n\r\0"):
        raise ValueError(f"{what}={text!r}: a line break cannot go into the reproducer's Makefile")
    if not text.isascii() and not _is_utf8(text):
        raise ValueError(f"{what}={text!r}: not UTF-8 text, which the reproducer's Makefile is")
    out = re.sub(r"(\\*)#", lambda m: m[1] * 2 + "\\#", text.replace("$", "$$"))
    if out[:1].isspace():         # make strips a value's leading blanks (form feeds too)
        out = "$()" + out
    return out + "$()" if out.endswith("\\") or out[-1:].isspace() else out


def _is_utf8(text: str) -> bool:
    """Not a string os.environ or argv decoded from bytes that are not UTF-8 (surrogates)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def make_path(path: str, what: str) -> str:
    """A folder the Makefile's recipe puts on the compiler's command line unquoted (and
    into $(wildcard), $(patsubst)): only characters no shell or make function reads
    otherwise; any other is ValueError naming `what`."""
    if not re.fullmatch(r"[A-Za-z0-9_./+@~-]+", path):
        raise ValueError(f"{what}={path!r}: a folder with characters other than letters, digits and "
                         "`_./+@~-` cannot go into the reproducer's Makefile")
    return path


def make_comment(text: str) -> str:
    """A Makefile comment line holding any text: no line break, no backslash at its end
    (which would carry the comment onto the next line)."""
    flat = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    return "# " + (flat[:-1] + "\\x5c" if flat.endswith("\\") else flat)


def makefile(title: str, variables: list[str], build: str, env: dict[str, str]) -> str:
    """A reproducer's Makefile: `make` builds ./repro, `make run` runs it."""
    lines = [make_comment(title), "# `make` builds ./repro; `make run` runs it: exit 0 when the stored device outputs",
             "# reproduce byte for byte, 1 when they do not, 2 on an error.", ""]
    lines += variables + ["CFLAGS ?= -O1 -g -Wall -std=gnu11", ""]
    if env:
        lines += ["# the CANN simulator's settings of the recorded run (a real CANN ignores them)"]
        lines += [f"export {k} = {make_value(v, k)}" for k, v in env.items()] + [""]
    lines += ["repro: repro.c repro.h", "\t" + build, "", "run: repro", "\t./repro", "",
              "clean:", "\trm -f repro", "", ".PHONY: run clean", ""]
    return "\n".join(lines)
