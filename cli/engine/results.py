"""Result records: one per (device, case), and the run they belong to.

The JSON form of a `Run` is the results file (`--results FILE`, `--output json`), the
input of `ops support --results` and `ops merge`.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

from cannops.cases.versions import OLDEST

OK, NOT_SUPPORTED, FAIL, SKIPPED, DEVIATION = "OK", "not supported", "FAIL", "skipped", "known deviation"
STATUSES = (OK, NOT_SUPPORTED, FAIL, SKIPPED, DEVIATION)
SCHEMA = "ops-results/1"
MODES = ("test", "perf", "support", "grad")

# the results file's fields and their JSON types (bool is not a number here)
_STR, _INT, _NUM = (str,), (int,), (int, float)
_OPT = type(None)
RESULT_FIELDS = {
    "device": _STR, "op": _STR, "params": _STR, "status": _STR, "reason": _STR,
    "error": (*_NUM, _OPT), "threshold": (*_NUM, _OPT), "metric": _STR, "note": _STR,
    "seconds": _NUM, "device_seconds": (*_NUM, _OPT), "n_runs": _INT, "time_us": _NUM, "flops": _NUM, "bandwidth_gb_s": _NUM,
    "memory_kb": _INT, "batches": _INT, "spread": (*_NUM, _OPT), "load": (*_NUM, _OPT),
    "contention": (*_NUM, _OPT), "steal": (*_NUM, _OPT), "doubts": _STR, "clock": _STR, "index": _INT, "ran_on": _STR, "by": _STR, "worst": (list,),
    "strict": (bool,), "max_abs": (*_NUM, _OPT), "max_rel": (*_NUM, _OPT), "worst_index": (int, _OPT),
    "trace": (list,), "blame": _STR, "evidence": _STR, "cost": (dict, _OPT),
}
REQUIRED_RESULT_FIELDS = ("device", "op", "params", "status")
DEVICE_FIELDS = {"name": _STR, "description": _STR, "memory_total": (int, _OPT), "memory_free": (int, _OPT),
                 "soc": _STR, "threads": (int, _OPT)}
RUN_FIELDS = {"mode": _STR, "seed": _INT, "ops_filter": (str, _OPT), "params_filter": (str, _OPT),
              "shard": (str, _OPT), "sample": (int, _OPT), "interrupted": (bool,), "version": _STR,
              "strict": (str, _OPT), "hygiene": (str, _OPT), "catalog": _STR, "missing_shards": (dict,), "source": (dict, _OPT),
              "devices": (list,), "results": (list,)}


def _check_fields(d, types: dict, required, where: str) -> dict:
    """`d` as a dict of known fields of the right JSON types; a ValueError names the first wrong one."""
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected an object, got {type(d).__name__}")
    for k in required:
        if k not in d:
            raise ValueError(f"{where}: missing {k!r}")
    out = {}
    for k, v in d.items():
        if k not in types:
            continue
        if not isinstance(v, types[k]) or (isinstance(v, bool) and bool not in types[k]):
            raise ValueError(f"{where}: {k} is {json.dumps(v)[:40]}, expected "
                             + " or ".join("null" if t is _OPT else {"str": "a string", "int": "an integer",
                                            "float": "a number", "bool": "true/false", "list": "a list",
                                            "dict": "an object"}[t.__name__]
                                            for t in types[k]))
        out[k] = v
    return out


def result_from_dict(d, where: str = "result") -> "CaseResult":
    fields = _check_fields(d, RESULT_FIELDS, REQUIRED_RESULT_FIELDS, where)
    if fields["status"] not in STATUSES:
        raise ValueError(f"{where}: unknown status {fields['status']!r} (expected one of {', '.join(STATUSES)})")
    return CaseResult(**fields)


@dataclass
class CaseResult:
    device: str
    op: str
    params: str
    status: str
    reason: str = ""            # FAIL / not supported / deviation: why
    by: str = ""                # not supported: the device that cannot do it when it is not
                                # `device` (NUMPY: the reference cannot compute the case)
    evidence: str = ""          # how sure the device's support verdict is (a CANN device's
                                # level: backend/cann/evidence.py); "": not said
    error: float | None = None  # the metric's value on the first checked node that failed, or the worst
    threshold: float | None = None
    metric: str = ""
    note: str = ""              # a family's recorded note on this device
    seconds: float = 0.0        # wall time of the case in its worker
    # test: seconds of the device's compute call alone (backend/base.py RunResult.compute_seconds),
    # without building, inputs, reference, upload, read-back and comparison; None: not run
    device_seconds: float | None = None
    # perf
    n_runs: int = 0
    time_us: float = 0.0
    flops: float = 0.0          # FLOP/s
    bandwidth_gb_s: float = 0.0
    memory_kb: int = 0
    # perf: how far to trust the figure (cli/engine/perf_measure.py): the batches timed, their
    # relative MAD, the 1-minute load average and the cores' worth of CPU other processes
    # took while measuring, the share stolen by a hypervisor; `doubts` says why the figure
    # is not to be trusted ("": nothing known against it); `clock` what measured it
    batches: int = 0
    spread: float | None = None
    load: float | None = None
    contention: float | None = None
    steal: float | None = None
    doubts: str = ""
    clock: str = ""
    index: int = -1             # position in the selected case list (stable across -j and shards)
    ran_on: str = ""            # with -b KIND: the device of that kind the case ran on
    worst: list = field(default_factory=list)  # FAIL: the elements furthest from the
                                # reference, [flat index, got, expected], of the first failing node
    # test --strict (cli/engine/strict.py): whether the per-element check ran, and its figures on
    # the checked node that failed it (else the one with the largest error)
    strict: bool = False
    max_abs: float | None = None
    max_rel: float | None = None
    worst_index: int | None = None  # flat element index, ggml order
    # test on a device that traces (CANN-SIM): its ACL / aclnn calls (backend/trace.py's
    # records), with --trace for every case and for every FAIL; a FAIL's call to blame
    # ("aclnnMuls (call 1 of 3) out of tolerance (own NMSE 2e-06)", or why none is)
    trace: list = field(default_factory=list)
    blame: str = ""
    # the device work the case asked for, counted on the simulator (backend/cost.py: calls,
    # kernels, bytes, FLOPs by unit, copies, syncs, ...); None: not counted
    cost: dict | None = None
    # test: whether the reference came from the cache (engine/refcache.py; None: no cache),
    # for the run's hit rate; kept in memory, not written to the results file
    ref_cached: bool | None = field(default=None, metadata={"file": False})
    # test: an entry was in the cache for it but failed its checks (computed again)
    ref_rejected: bool = field(default=False, metadata={"file": False})
    # the host ran out of memory in it (a skipped case, no verdict): the run's exit status is 2
    host_error: bool = field(default=False, metadata={"file": False})

    @property
    def name(self) -> str:
        return f"{self.op}({self.params})"

    @property
    def blamed(self) -> str:
        """The device a `not supported` is due to: the tested one, or the reference."""
        return self.by or self.device

    def to_dict(self) -> dict[str, Any]:
        # every field is a plain value: a shallow copy is asdict's result, without its
        # recursive deep copy (thousands of results per run)
        d = {k: getattr(self, k) for k, f in self.__dataclass_fields__.items() if f.metadata.get("file", True)}
        d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CaseResult":
        return result_from_dict(d)


@dataclass
class DeviceInfo:
    name: str
    description: str = ""
    memory_total: int | None = None
    memory_free: int | None = None
    soc: str = ""                       # the SoC a CANN device reports (aclrtGetSocName)
    threads: int | None = None          # the CPU threads a ggml CPU device computes with


@dataclass
class Run:
    mode: str                           # test / perf / support / grad
    seed: int = 0
    ops_filter: str | None = None
    params_filter: str | None = None
    shard: str | None = None
    sample: int | None = None           # --sample: at most this many cases per op
    devices: list[DeviceInfo] = field(default_factory=list)
    results: list[CaseResult] = field(default_factory=list)
    interrupted: bool = False
    version: str = ""
    strict: str | None = None           # test --strict: the standard applied (cli/engine/strict.py)
    # test --repeat / --poison / --check-inputs, as "repeat=2,poison,check-inputs" (None: none)
    hygiene: str | None = None
    catalog: str = OLDEST               # the catalog version (cases/versions.py) the cases are of
    # a merge with --allow-partial: device -> the shards it lacks ("2/3"); saved
    missing_shards: dict[str, list[str]] = field(default_factory=dict)
    # ops tbo: the test-backend-ops binary whose cases these are and its ggml (binary,
    # ggml_version, kind, name, git, variant, soc: engine/tbo.py binary_source); None: ops' own
    source: dict | None = None
    exit_status: int = 0                # of the command that made it; not saved
    # test: the cases whose reference came from the reference cache (cli/engine/refcache.py) and
    # those computed; None where no reference was needed (saved, never read back)
    reference_cache: dict | None = None

    def by_device(self, device: str) -> list[CaseResult]:
        return [r for r in self.results if r.device == device]

    def summary(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for d in self.devices:
            rs = self.by_device(d.name)
            counts = {s: sum(r.status == s for r in rs) for s in STATUSES}
            counts["total"] = len(rs)
            out[d.name] = counts
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "tool": "ops", "version": self.version, "mode": self.mode,
            "seed": self.seed, "ops_filter": self.ops_filter, "params_filter": self.params_filter,
            "shard": self.shard, "sample": self.sample, "interrupted": self.interrupted, "strict": self.strict,
            **({} if self.hygiene is None else {"hygiene": self.hygiene}),
            "catalog": self.catalog,
            "devices": [asdict(d) for d in self.devices],
            "summary": self.summary(),
            **({} if self.reference_cache is None else {"reference_cache": self.reference_cache}),
            **({"missing_shards": self.missing_shards} if self.missing_shards else {}),
            **({} if self.source is None else {"source": self.source}),
            "results": [r.to_dict() for r in sorted(self.results, key=lambda r: (r.index, r.device))],
        }

    def to_json(self) -> str:
        """The results file's text: its fields one per line, then one result per line.
        (json's `indent` sends every value through the pure-Python encoder, seconds for a
        whole catalog; each line here goes through the C one.)"""
        d = self.to_dict()
        results = d.pop("results")
        head = "".join(f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in d.items())
        body = ",\n".join(f"  {json.dumps(r)}" for r in results)
        return "{\n" + head + ' "results": [\n' + body + ("\n" if body else "") + " ]\n}\n"

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Run":
        """A results file's content, its schema checked: a ValueError names the first wrong field."""
        if not isinstance(d, dict) or d.get("schema") != SCHEMA:
            got = d.get("schema") if isinstance(d, dict) else None
            raise ValueError(f"not an ops results file (schema {got!r}, expected {SCHEMA!r})")
        f = _check_fields(d, RUN_FIELDS, ("mode",), "results file")
        if f["mode"] not in MODES:
            raise ValueError(f"unknown mode {f['mode']!r} (expected one of {', '.join(MODES)})")
        devices = [DeviceInfo(**_check_fields(x, DEVICE_FIELDS, ("name",), f"devices[{i}]"))
                   for i, x in enumerate(f.get("devices", []))]
        results = [result_from_dict(r, f"results[{i}]") for i, r in enumerate(f.get("results", []))]
        return cls(mode=f["mode"], seed=f.get("seed", 0), ops_filter=f.get("ops_filter"),
                   params_filter=f.get("params_filter"), shard=f.get("shard"), sample=f.get("sample"), devices=devices,
                   results=results, interrupted=f.get("interrupted", False), version=f.get("version", ""),
                   strict=f.get("strict"), hygiene=f.get("hygiene"), catalog=f.get("catalog", OLDEST),
                   missing_shards=_missing_shards(f.get("missing_shards", {})), source=f.get("source"))

    def write_json(self, path: str) -> None:
        write_file(path, self.to_json())


def _missing_shards(d: dict) -> dict[str, list[str]]:
    if not all(isinstance(v, list) and all(isinstance(k, str) for k in v) for v in d.values()):
        raise ValueError("missing_shards: expected an object of lists of shards")
    return d


def write_file(path: str, text: str) -> None:
    """Write `text` to `path`. A regular file (or a new one) is replaced atomically: a temp
    file beside it, then a rename, so an interrupted write never leaves a half file; a
    symbolic link is followed (its target is replaced, the link stays); a FIFO, a device
    (/dev/null, /dev/stdout) or any other special file is written in place. On an error
    (a full disk) the temp file is removed and the OSError raised."""
    import os
    import stat
    import tempfile
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return
    target = os.path.realpath(path)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=".ops-results-")
    try:
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # mkstemp's 0600 is not what a results file should have
        os.chmod(tmp, stat.S_IMODE(mode))
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            fd = -1
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def load_run(path: str) -> Run:
    """Read a results file; raises ValueError with a one-line reason when it is not one."""
    from cannops.cases.untrusted import NotRegular, open_regular
    try:   # a FIFO would wait forever, a device be read without end
        with open_regular(path) as f:
            data = json.loads(f.read().decode("utf-8"))
    except NotRegular as e:
        raise ValueError(str(e)) from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e.msg}: line {e.lineno} column {e.colno})") from None
    except RecursionError:
        raise ValueError(f"{path} is not valid JSON (nested too deeply)") from None
    try:
        return Run.from_dict(data)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path} is not a valid ops results file ({e})") from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def _run_devices(r: Run) -> set[str]:
    """The devices a run holds results of, or opened."""
    return {d.name for d in r.devices} | {x.device for x in r.results}


def _check_shards(runs: list[Run], paths: list[str], allow_partial: bool) -> dict[str, list[str]]:
    """Completeness is per device: each device is in one unsharded run, or in each of the N
    shards of one split once (a device x shard CI matrix merges; GGML-CPU 1/2 with
    CANN-SIM 2/2 does not). Returns, per device, its missing shards (allowed with
    allow_partial; else a ValueError names them)."""
    from .selection import parse_shard
    per_device: dict[str, list[tuple[str | None, str]]] = {}
    for r, p in zip(runs, paths):
        for d in sorted(_run_devices(r)):
            per_device.setdefault(d, []).append((r.shard, p))
    missing: dict[str, list[str]] = {}
    for d, given in per_device.items():
        whole = [p for shard, p in given if not shard]
        if len(whole) > 1:
            raise ValueError(f"device {d} is in two unsharded runs: {whole[0]} and {whole[1]}")
        if whole and len(given) > 1:
            sharded = next(p for shard, p in given if shard)
            raise ValueError(f"cannot merge shards with an unsharded run: device {d} is in {whole[0]} "
                             f"and in the shard {sharded}")
        if whole:
            continue
        split: dict[int, dict[int, str]] = {}
        for shard, p in given:
            assert shard is not None   # every run of d is a shard here (whole is empty)
            k, n = parse_shard(shard)
            if k in split.setdefault(n, {}):
                raise ValueError(f"{d}: shard {k}/{n} is given twice: {split[n][k]} and {p}")
            split[n][k] = p
        if len(split) > 1:
            raise ValueError(f"cannot merge shards of different splits for {d}: "
                             + ", ".join(f"{next(iter(ks))}/{n} ({next(iter(ks.values()))})"
                                         for n, ks in sorted(split.items())))
        (n, ks), = split.items()
        gone = [f"{k}/{n}" for k in range(1, n + 1) if k not in ks]
        if gone:
            missing[d] = gone
    if missing and not allow_partial:
        raise ValueError("; ".join(f"missing shard{'s' if len(ks) > 1 else ''} {', '.join(ks)} of {d}"
                                   for d, ks in missing.items()) + " (or merge with --allow-partial)")
    return missing


# what a merge's runs must share, as the user names it
SAME_RUN = (("mode", "mode"), ("seed", "--seed"), ("ops_filter", "-o"), ("params_filter", "-p"),
            ("strict", "--strict"), ("hygiene", "--repeat / --poison / --check-inputs"),
            ("source", "test-backend-ops binary"))


def merge_runs(runs: list[Run], paths: list[str] | None = None, allow_partial: bool = False) -> Run:
    """One run from shards: same mode and seed; results keyed by (case index, device). A
    merge of some shards only (allow_partial) is marked as interrupted (partial results),
    and its missing_shards say which, per device."""
    if not runs:
        raise ValueError("nothing to merge")
    first = runs[0]
    paths = paths or [f"run {i + 1}" for i in range(len(runs))]
    for path, r in zip(paths, runs):
        if r.catalog != first.catalog:
            raise ValueError(f"cannot merge results of different catalog versions: {path} is of "
                             f"{r.catalog}, the first of {first.catalog}")
        diff = [f"{what} {getattr(r, k)!r} ({paths[0]}: {getattr(first, k)!r})"
                for k, what in SAME_RUN if getattr(r, k) != getattr(first, k)]
        if diff:
            raise ValueError(f"cannot merge results of different runs: {path} has " + ", ".join(diff))
    missing = _check_shards(runs, paths, allow_partial)
    merged = Run(mode=first.mode, seed=first.seed, ops_filter=first.ops_filter, strict=first.strict,
                 hygiene=first.hygiene,
                 params_filter=first.params_filter, version=first.version, catalog=first.catalog,
                 interrupted=bool(missing) or any(r.interrupted for r in runs), missing_shards=missing,
                 source=first.source)
    seen: dict[tuple[int, str], CaseResult] = {}
    for r in runs:
        for d in r.devices:
            if all(d.name != m.name for m in merged.devices):
                merged.devices.append(d)
        for c in r.results:
            key = (c.index, c.device)
            if key in seen and seen[key].name != c.name:
                raise ValueError(f"case index {c.index} names two cases: {seen[key].name} and {c.name}")
            seen[key] = c
    merged.results = sorted(seen.values(), key=lambda c: (c.index, c.device))
    return merged


# --- journal and resume -------------------------------------------------------------------

def journal_path(results_path: str) -> str:
    return results_path + ".partial.jsonl"


class JournalBusy(ValueError):
    """Another run holds the journal (it writes the same results file)."""


class Journal:
    """The results as they come, one JSON object a line, beside the results file: what a
    run killed outright (kill -9, a lost machine) leaves for `--resume`. The results file
    replaces it at the end. A write error (a full disk) only stops the journal.

    One run per results file: the journal is locked (flock, released by the kernel however
    the run ends) from `lock()`, before a resumed run reads it, to `close()`; `begin()`
    then empties it and writes the run's header, with the pid a second run names."""

    def __init__(self, path: str, run: Run | None = None):
        self.path = path
        self.f: TextIO | None = None   # open from lock() on
        self.lock()
        if run is not None:
            self.begin(run)

    def lock(self) -> None:
        import fcntl
        self.created = not os.path.exists(self.path)
        self.begun = False
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)   # not truncated: not ours yet
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            pid = _journal_pid(self.path)
            results = self.path[:-len(".partial.jsonl")] if self.path.endswith(".partial.jsonl") else self.path
            raise JournalBusy(f"{results} is being written by another run"
                              + (f" (pid {pid})" if pid else "")
                              + ": wait for it to end, or give another --results") from None
        self.f = os.fdopen(fd, "r+", encoding="utf-8")

    def begin(self, run: Run) -> None:
        self.begun = True
        assert self.f is not None, "begin() before lock()"
        self.f.seek(0)
        self.f.truncate()
        self._write({"journal": SCHEMA, "pid": os.getpid(), **{k: getattr(run, k) for k in RUN_KEYS}})

    def _write(self, obj) -> None:
        if self.f is None:
            return
        try:
            self.f.write(json.dumps(obj) + "\n")
            self.f.flush()
        except OSError:
            self.close()

    def device(self, info: DeviceInfo) -> None:
        self._write({"device": asdict(info)})

    def result(self, r: CaseResult) -> None:
        self._write({"result": r.to_dict()})

    def close(self) -> None:
        if self.f is not None and self.created and not self.begun:
            self.remove()   # locked for a run that never began (bad input): no trace left
            return
        if self.f is not None:
            try:
                self.f.close()
            except OSError:
                pass
            self.f = None

    def remove(self) -> None:
        """Removed while still locked: no other run can take it in between."""
        try:
            os.remove(self.path)
        except OSError:
            pass
        self.begun = True
        self.close()


RUN_KEYS = ("mode", "seed", "ops_filter", "params_filter", "shard", "sample", "strict", "hygiene", "catalog",
            "source")


def _journal_pid(path: str) -> int | None:
    """The pid in a journal's header (None: not written yet, or not a journal)."""
    try:
        with open(path, encoding="utf-8") as f:
            pid = json.loads(f.readline()).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if type(pid) is int else None


@dataclass
class Resumed:
    """What an earlier run of the same selection left: its results by (index, device)
    and the devices it opened."""
    results: dict[tuple[int, str], CaseResult] = field(default_factory=dict)
    devices: dict[str, DeviceInfo] = field(default_factory=dict)
    # every device the file and its journal name (skipped results included): a resume on
    # fewer devices would drop the others' results
    named: set[str] = field(default_factory=set)


def load_resume(path: str, run: Run) -> Resumed:
    """The results file `path` of an interrupted or killed run and its journal, checked to
    be of the same selection as `run`; skipped cases are not kept (they run again).
    Raises ValueError with a one-line reason."""
    out = Resumed()
    found = False
    want = {k: getattr(run, k) for k in RUN_KEYS}

    def check(header: dict, source: str) -> None:
        got = {k: header.get(k) for k in RUN_KEYS}
        got["catalog"] = got["catalog"] or OLDEST   # written before catalog versions
        if got["catalog"] != want["catalog"]:
            raise ValueError(f"--resume {source}: its cases are of catalog {got['catalog']}, this run's of "
                             f"{want['catalog']} (--catalog {got['catalog']} resumes it)")
        if got != want:
            diff = ", ".join(f"{k} {got[k]!r} (now {want[k]!r})" for k in RUN_KEYS if got[k] != want[k])
            raise ValueError(f"--resume {source}: another selection: {diff}")

    def keep(r: CaseResult) -> None:
        out.named.add(r.device)
        if r.status != SKIPPED:
            out.results[(r.index, r.device)] = r

    def corrupt(why: str) -> ValueError:
        return ValueError(f"{why}; to start over, give --results {path} instead of --resume "
                          f"(the run then replaces the file and its journal)")

    if os.path.exists(path):
        try:
            prev = load_run(path)
        except ValueError as e:
            raise corrupt(str(e)) from None
        check({k: getattr(prev, k) for k in RUN_KEYS}, path)
        found = True
        for d in prev.devices:
            out.devices[d.name] = d
            out.named.add(d.name)
        for r in prev.results:
            keep(r)
    jpath = journal_path(path)
    if os.path.exists(jpath) and os.path.getsize(jpath):   # empty: just locked by this run
        found = True
        try:
            with open(jpath, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise corrupt(f"cannot read {jpath}: {getattr(e, 'strerror', None) or e}") from None
        for n, line in enumerate(lines, 1):
            try:
                obj = json.loads(line)
                if n == 1:
                    if not isinstance(obj, dict) or obj.get("journal") != SCHEMA:
                        raise ValueError("not an ops journal")
                elif "device" in obj:
                    d = DeviceInfo(**obj["device"])
                    out.devices[d.name] = d
                    out.named.add(d.name)
                else:
                    keep(result_from_dict(obj["result"], f"line {n}"))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                if n == len(lines) and n > 1:
                    break  # the line being written when the run was killed
                raise corrupt(f"{jpath}: line {n}: not a journal line ({e})") from None
            if n == 1:
                check(obj, jpath)
    if not found:
        raise ValueError(f"--resume {path}: no such results file, nor its journal {jpath}")
    return out
