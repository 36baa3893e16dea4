"""Where a client of the simulated toolkit made each recorded call: a record's `site` (the
return addresses outside the toolkit, each as its object's path and the offset in it, taken
by the toolkit's C entry points: native/cann_sim_toolkit.py) resolved against the object's
debug information by binutils' addr2line into `at`, the function, source file and line of
each frame (inlined ones expanded), innermost first; and their short form on a trace line
or a blame (`in ggml_cann_rope, aclnn_ops.cpp:3120`).

Resolved lazily: only the records a result keeps (a FAIL's, or every case's under --trace),
one addr2line per object and batch, each address once per process (cached by the object's
path, size and mtime: a rebuilt object is read again)."""
from __future__ import annotations

import os
import shutil
import subprocess

ADDR2LINE = "addr2line"
TIMEOUT = 60          # seconds for one batch (a large object's DWARF is read once per batch)
MAX_FRAMES = 8        # entries of `at` kept per record (inlined frames count)
MAX_SHOWN = 3         # frames on a trace line: up to the op's handler (ggml_cann_*)
HANDLER = "ggml_cann_"

# (object, size, mtime_ns, offset) -> [[function, file, line], ...] (innermost first; [] unknown)
_cache: dict[tuple, list] = {}


def _identity(obj: str) -> tuple | None:
    """The object as the cache keys it; None where it is not a readable regular file (a
    path from another process's memory: the object may be gone, or not a file at all)."""
    if not isinstance(obj, str) or not os.path.isabs(obj):
        return None
    try:
        st = os.stat(obj)
    except OSError:
        return None
    if not os.path.isfile(obj) or not os.access(obj, os.R_OK):
        return None
    return obj, st.st_size, st.st_mtime_ns


def _offset(text) -> int | None:
    try:
        value = int(text, 16)
    except (TypeError, ValueError):
        return None
    return value if 0 < value < 1 << 48 else None


def resolve(calls: list[dict]) -> None:
    """Adds `at` to each record that has a `site` and none yet (the record keeps `site`
    where nothing in it resolved: no debug information, the object gone, no addr2line)."""
    wanted: dict[tuple, set[int]] = {}
    known: dict[str, tuple | None] = {}   # each object stat'ed once per batch
    for c in calls:
        for key in _keys(c, known):
            if key is not None and key not in _cache:
                wanted.setdefault(key[:3], set()).add(key[3])
    for ident, offsets in wanted.items():
        _lookup(ident, sorted(offsets))
    for c in calls:
        if "at" in c or not c.get("site"):
            continue
        at: list = []
        for key in _keys(c, known):   # the frames that resolve from the innermost on: past a frame
            frames = _cache.get(key) if key is not None else None   # without debug information
            if not frames:                                          # (the client's own code),
                break                                               # a libc frame misleads
            at += frames
        if at:
            c["at"] = at[:MAX_FRAMES]
            del c["site"]


def _keys(c: dict, known: dict) -> list:
    """The cache keys of a record's frames (None: a frame that cannot be resolved)."""
    site = c.get("site")
    if "at" in c or not isinstance(site, list):
        return []
    out: list = []
    for frame in site[:MAX_FRAMES]:
        if not (isinstance(frame, list) and len(frame) == 2 and isinstance(frame[0], str)):
            out.append(None)
            continue
        if frame[0] not in known:
            known[frame[0]] = _identity(frame[0])
        ident, off = known[frame[0]], _offset(frame[1])
        out.append(ident + (off,) if ident and off else None)
    return out


def _lookup(ident: tuple, offsets: list[int]) -> None:
    """One addr2line over `offsets` of one object; each gets its frames (or [])."""
    obj = ident[0]
    for off in offsets:
        _cache[ident + (off,)] = []
    tool = shutil.which(ADDR2LINE)
    if tool is None:
        return
    # a return address is the instruction after the call: one byte back is in the call
    cmd = [tool, "-a", "-f", "-C", "-i", "-e", obj, *(hex(off - 1) for off in offsets)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return
    for addr, frames in parse(p.stdout).items():
        if ident + (addr + 1,) in _cache:
            _cache[ident + (addr + 1,)] = frames
    return


def parse(text: str) -> dict[int, list]:
    """addr2line -a -f -i output: address -> [[function, file, line], ...] innermost first,
    without the frames it could not place (`??`)."""
    out: dict[int, list] = {}
    lines = text.splitlines()
    i, addr = 0, None
    while i < len(lines):
        line = lines[i].strip()
        if line.startswith("0x") and _hex(line) is not None:
            addr = _hex(line)
            out[addr] = []
            i += 1
            continue
        if addr is None or i + 1 >= len(lines):
            break
        fn, where = line, lines[i + 1].strip()
        i += 2
        file, _, num = where.rpartition(":")
        num = num.split(" ")[0]   # "123 (discriminator 2)"
        if file and file != "??" and num.isdigit() and int(num) > 0:
            out[addr].append([fn, file, int(num)])
    return out


def _hex(text: str) -> int | None:
    try:
        return int(text, 16)
    except ValueError:
        return None


def _name(fn: str) -> str:
    """A demangled function without its parameters: ggml_cann_rope(ctx&, ...) -> ggml_cann_rope."""
    depth = 0
    for k, ch in enumerate(fn):
        if ch == "(" and depth == 0 and k and not fn[:k].endswith("operator"):
            return fn[:k]
        depth += ch == "<"
        depth -= ch == ">"
    return fn


def shown(c: dict) -> list[tuple[str, str, int]]:
    """The frames a trace line or blame names: the innermost, then the callers up to the
    op's handler (a ggml_cann_* function) where one is within MAX_SHOWN."""
    at = [f for f in c.get("at") or [] if isinstance(f, list) and len(f) == 3]
    frames = [(_name(str(fn)), os.path.basename(str(file)), int(line)) for fn, file, line in at]
    if not frames:
        return []
    for k, (fn, _, _) in enumerate(frames[:MAX_SHOWN]):
        if fn.startswith(HANDLER):
            # addr2line names an inlined clone (aclnn_muls.constprop) by the function it is
            # inlined into: the handler's frames that follow hold the line that called it
            while k + 1 < len(frames) and frames[k + 1][0] == fn:
                k += 1
            return frames[:k + 1]
    return frames[:1]


def text(c: dict) -> str:
    """`in aclnn_muls, aclnn_ops.cpp:1520 < ggml_cann_softmax, aclnn_ops.cpp:1955`; ""
    where the record has no resolved site."""
    frames = shown(c)
    return "in " + " < ".join(f"{fn}, {file}:{line}" for fn, file, line in frames) if frames else ""
