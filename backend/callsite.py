"""Where a client of the simulated toolkit made each recorded call: a record's `site` (the
return addresses outside the toolkit, each as its object's path and the offset in it, taken
by the toolkit's C entry points: native/cann_sim_toolkit.py) resolved against the object's
debug information by llvm-symbolizer or binutils' addr2line into `at`, the function, source
file and line of each frame (inlined ones expanded), innermost first; and their short form
on a trace line or a blame (`in ggml_cann_rope, aclnn_ops.cpp:3120`).

Resolved lazily: only the records a result keeps (a FAIL's, or every case's under --trace),
one resolver run per object and batch, each address once per process (cached by the object's
path, size and mtime: a rebuilt object is read again). llvm-symbolizer, where installed,
is kept running per object and asked batch by batch."""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import threading

# the resolvers, the first installed one used: LLVM's names a function inlined from a GCC
# .constprop clone (binutils 2.40's addr2line gives it the name of the function it is
# inlined into); both print the same lines in this form
RESOLVERS = (("llvm-symbolizer", ("--output-style=GNU", "-a", "-f", "-C", "-i", "-e")),
             ("addr2line", ("-a", "-f", "-C", "-i", "-e")))
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


_lock = threading.Lock()   # ops tbo -j N resolves from N threads: one cache, one server each


def resolve(calls: list[dict]) -> None:
    """Adds `at` to each record that has a `site` and none yet (the record keeps `site`
    where nothing in it resolved: no debug information, the object gone, no resolver)."""
    with _lock:
        _resolve(calls)


def _resolve(calls: list[dict]) -> None:
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
    """`offsets` of one object resolved; each gets its frames (or [])."""
    for off in offsets:
        _cache[ident + (off,)] = []
    found = next(((name, path, flags) for name, flags in RESOLVERS for path in [shutil.which(name)] if path), None)
    if found is None:
        return
    # a return address is the instruction after the call: one byte back is in the call
    addresses = [hex(off - 1) for off in offsets]
    name, tool, flags = found
    text = None
    if name == "llvm-symbolizer":
        text = _served(ident, tool, flags, addresses)
    if text is None:
        try:
            text = subprocess.run([tool, *flags, ident[0], *addresses], capture_output=True, text=True,
                                  timeout=TIMEOUT, errors="replace").stdout
        except (OSError, subprocess.TimeoutExpired):
            return
    for addr, frames in parse(text).items():
        if ident + (addr + 1,) in _cache:
            _cache[ident + (addr + 1,)] = frames


# llvm-symbolizer kept running per object (its start and the object's DWARF cost more than
# a lookup): addresses on its stdin, each batch closed by a line it echoes as it is
_servers: dict[tuple, subprocess.Popen] = {}
END = "CANNSIM_END"
BATCH = 256           # addresses written before their answers are read (the pipes stay unfilled)


def _stop(p: subprocess.Popen) -> None:
    """A server ended: its stdin closed (it exits), waited for."""
    try:
        if p.stdin is not None:
            p.stdin.close()
        p.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        p.kill()
        p.wait()


def _served(ident: tuple, tool: str, flags: tuple, addresses: list[str]) -> str | None:
    """The resolver's answer for `addresses` from its running process on the object; None
    where it cannot be had so (the caller runs it once instead)."""
    p = _servers.get(ident)
    if p is None or p.poll() is not None:
        for old in [k for k in _servers if k[0] == ident[0]]:   # the object rebuilt since
            _stop(_servers.pop(old))
        try:
            p = subprocess.Popen([tool, *flags, ident[0]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, errors="replace", bufsize=1)
        except OSError:
            return None
        _servers[ident] = p
        atexit.register(_stop, p)
    assert p.stdin is not None and p.stdout is not None
    out: list[str] = []
    try:
        for k in range(0, len(addresses), BATCH):
            p.stdin.write("\n".join(addresses[k:k + BATCH]) + f"\n{END}\n")
            p.stdin.flush()
            for line in iter(p.stdout.readline, ""):
                if line.rstrip("\n") == END:
                    break
                out.append(line)
            else:   # it ended mid-answer
                _servers.pop(ident, None)
                return None
    except OSError:
        _servers.pop(ident, None)
        return None
    return "".join(out)


def parse(text: str) -> dict[int, list]:
    """addr2line -a -f -i output (llvm-symbolizer's in GNU style too): address ->
    [[function, file, line], ...] innermost first, without the frames it could not place."""
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
            # addr2line (no llvm-symbolizer here) names a function inlined from a .constprop
            # clone by its caller: the handler's frames that follow hold the line that called it
            while k + 1 < len(frames) and frames[k + 1][0] == fn:
                k += 1
            return frames[:k + 1]
    return frames[:1]


def text(c: dict) -> str:
    """`in aclnn_muls, aclnn_ops.cpp:1520 < ggml_cann_softmax, aclnn_ops.cpp:1955`; ""
    where the record has no resolved site."""
    frames = shown(c)
    return "in " + " < ".join(f"{fn}, {file}:{line}" for fn, file, line in frames) if frames else ""
