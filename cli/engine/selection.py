"""Choosing cases and devices from the command line: -o, -p, --sample, --shard, -b."""
from __future__ import annotations

import difflib
import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cannops.cases.catalog import Case



class BadInput(Exception):
    """Bad command-line input: printed as one line, exit status 2."""


def split_ops_filter(text: str) -> list[str]:
    """Comma list of op names or full case names; commas inside (...) belong to the name."""
    items: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
            continue
        depth += (ch == "(") - (ch == ")")
        cur.append(ch)
    items.append("".join(cur).strip())
    return [i for i in items if i]


def suggest(word: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(word.upper(), choices, n=3, cutoff=0.6)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def hash_sample(cases: list, n: int) -> list:
    """At most n of the cases, those whose names hash lowest (crc32): the same ones in every
    run, and a grid growing elsewhere does not shift them; in their order."""
    if len(cases) <= n:
        return list(cases)
    keep = set(sorted(range(len(cases)), key=lambda i: zlib.crc32(cases[i].name.encode()))[:n])
    return [c for i, c in enumerate(cases) if i in keep]


def sample_per_op(picked: list, n: int) -> list:
    """--sample N: of (position, case) pairs, at most n of each op (hash_sample), in order."""
    by_op: dict[str, list] = {}
    for _, c in picked:
        by_op.setdefault(c.op, []).append(c)
    keep = {id(c) for group in by_op.values() for c in hash_sample(group, n)}
    return [(pos, c) for pos, c in picked if id(c) in keep]


def select_cases(mode: str, ops: str | None = None, params: str | None = None,
                 shard: str | None = None, names_only: bool = False,
                 sample: int | None = None, refs: bool = False) -> list[tuple[int, Any]]:
    """The selected cases with their position in the unsharded selection (stable across
    -j, shards and merges). names_only: cache.CaseName's (op and vars, from the names
    cache) instead of catalog Cases, in the same order and with the same positions; refs:
    cache.CaseRef's, which a worker resolves (neither imports NumPy nor the catalog): each
    has the op, vars and name a Case has.
    sample: at most that many cases per op, after -o and -p (sample_per_op)."""
    from cannops.cases.cache import case_names
    cases = case_names(mode)
    extra = []
    if ops:
        from cannops.cases.cache import op_names
        known = op_names()
        wanted_ops: set[str] = set()
        wanted_names: dict[str, None] = {}
        for item in split_ops_filter(ops):
            if "(" in item:
                op = item.split("(", 1)[0]
                if op not in known:
                    raise BadInput(f"unknown op {op!r}{suggest(op, known)}")
                wanted_names[item] = None
            elif item in known:
                wanted_ops.add(item)
            else:
                raise BadInput(f"unknown op {item!r}{suggest(item, known)}")
        if wanted_names:
            ops_named = {name.split("(", 1)[0] for name in wanted_names}
            by_name = {c.name for c in cases if c.op in ops_named}
            # a name off the grid (e.g. found by `ops fuzz`) is built from its params
            extra = [_case_off_grid(n, mode, runs=not names_only) for n in wanted_names if n not in by_name]
    # positions in the catalog of the grid cases picked, then the cases off the grid
    picked: list[tuple[int | None, Any]] = [(pos, c) for pos, c in enumerate(cases)
              if not ops or c.op in wanted_ops or wanted_names and c.name in wanted_names]
    picked += [(None, c) for c in extra]
    if params:
        try:
            rx = re.compile(params)
        except re.error as e:
            raise BadInput(f"bad -p regex {params!r}: {e}") from None
        picked = [(pos, c) for pos, c in picked if rx.search(c.vars)]
    if sample is not None:
        picked = sample_per_op(picked, sample)
    indexed = list(enumerate(picked))
    if shard:
        k, n = parse_shard(shard)
        indexed = [(i, pc) for i, pc in indexed if i % n == k - 1]
    if names_only:
        return [(i, c) for i, (_, c) in indexed]
    from cannops.cases.cache import case_refs
    found = iter(case_refs(mode, [pos for _, (pos, _) in indexed if pos is not None]))
    out = [(i, c if pos is None else next(found)) for i, (pos, c) in indexed]
    if refs:
        return out
    # only the families of the cases picked are enumerated, not the whole catalog
    return [(i, c.resolve()) for i, c in out]


def peak_bytes(graph) -> int:
    """An upper estimate of the memory a case's test takes at its peak, host and device on one
    machine: per tensor (views aside) its data twice, in its type or float32 where that is
    larger (the inputs and outputs on the host, the device's copy; half and quantized types
    are compared as float32), and its elements twice in float64 (the reference's values, and
    a temporary of a reference op or of the comparison). Measured (whole run, maxrss, this
    estimate): ABS f32 [1024,1024,192,1] 7.7 GB (issue 32), 9.7 GB; ABS f32 [1024,1024,64,1]
    on GGML-CPU 2.5 GB, 3.0 GiB; ABS f16 likewise 2.6 GB, 3.0 GiB; ABS f32 [1024,1024,32,1]
    on CANN-SIM 1.4 GB, 1.5 GiB; ADD f32 [1024,1024,32,1] 1.4 GB, 2.3 GiB."""
    return sum(2 * max(t.nbytes(), 4 * t.nelements()) + 16 * t.nelements()
               for t in graph.tensors if not t.is_view())


def memory_available() -> int | None:
    """Bytes of memory this machine can still give (MemAvailable, within a cgroup's limit
    where there is one); None where unknown."""
    free = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read())
        if limit != "max":
            free = min(free if free is not None else 1 << 62, int(limit) - used)
    except (OSError, ValueError):
        pass
    return free


def _case_off_grid(name: str, mode: str, runs: bool = True) -> Case:
    """The case of that name off the grid; refused where it cannot be (run: `runs`) here."""
    from cannops.cases.names import case_from_name
    from cannops.cases.untrusted import quoted
    try:
        case = case_from_name(name, mode)
    except ValueError as e:
        raise BadInput(f"no {mode} case named {quoted(name, 200)}: {e}") from None
    # (a case whose tensors take more than cases/names.py's MAX_NAMED_BYTES is refused there,
    # as its graph is built: a typo or a probe, not a case to allocate)
    g = case.build()
    size = sum(t.nbytes() for t in g.tensors if not t.is_view())
    # what the tensors take is not what a run takes: refused before any work, rather than
    # taking the machine down (or failing the device on the host's MemoryError)
    peak, free = peak_bytes(g), memory_available()
    if runs and mode != "support" and free is not None and peak > free:
        shown = name if len(name) <= 200 and name.isprintable() else quoted(name, 200)
        raise BadInput(f"{shown}: a run of it would take about {peak / 2**30:,.1f} GiB at its peak (its tensors "
                       f"{size / 2**30:,.1f} GiB, the reference's float64 copies, the device's), more than "
                       f"the {free / 2**30:,.1f} GiB of memory available")
    return case


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m or not (1 <= int(m.group(1)) <= int(m.group(2))):
        raise BadInput(f"bad --shard {text!r}: expected K/N with 1 <= K <= N, e.g. 1/4")
    return int(m.group(1)), int(m.group(2))


@dataclass(frozen=True)
class Target:
    """What one backend of a run is: a device, or a kind of device (`-b CANN`) whose
    members (CANN0, CANN1, ...) share the run's workers round-robin."""
    label: str
    members: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()   # environment of its workers (--soc)


def kind_members(kind: str, names: list[str]) -> tuple[str, ...]:
    """The devices of a kind: its name followed by a device number (CANN -> CANN0, CANN1)."""
    return tuple(n for n in names if re.fullmatch(re.escape(kind) + r"\d+", n))


def per_soc(targets: list[Target], socs: list[str], simulated: dict[str, str]) -> list[Target]:
    """--soc: CANN-SIM once per SoC family, as CANN-SIM:<family>, its workers simulating
    that SoC (CANN_SIM_SOC); the other devices as they are."""
    out = []
    for t in targets:
        if t.label != "CANN-SIM":
            out.append(t)
            continue
        out.extend(Target(f"{t.label}:{s}", t.members, (("CANN_SIM_SOC", simulated[s]),)) for s in socs)
    return out


def device_names(wanted: tuple[str, ...]) -> list[str]:
    """The names in -b's values (repeatable, each a comma list)."""
    return [name for item in wanted for name in (x.strip() for x in item.split(",")) if name]


def select_devices(wanted: tuple[str, ...], available: list[tuple[str, str]],
                   include_reference: bool = False) -> list[Target]:
    """-b names (repeatable or comma lists) of devices or of kinds; default: every device
    but the reference, each on its own."""
    names = [n for n, _ in available]
    if not wanted:
        return [Target(n, (n,)) for n in names if include_reference or n != "NUMPY"]
    chosen: list[Target] = []
    for name in device_names(wanted):
        if any(t.label == name for t in chosen):
            continue
        members = (name,) if name in names else kind_members(name, names)
        if not members:
            raise BadInput(f"unknown device {name!r}; available: {', '.join(names) or 'none'}")
        chosen.append(Target(name, members))
    return chosen
