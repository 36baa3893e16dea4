"""Result records: one per (device, case), and the run they belong to.

The JSON form of a `Run` is the results file (`--results FILE`, `--output json`), the
input of `ops support --results` and `ops merge`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

OK, NOT_SUPPORTED, FAIL, SKIPPED, DEVIATION = "OK", "not supported", "FAIL", "skipped", "known deviation"
STATUSES = (OK, NOT_SUPPORTED, FAIL, SKIPPED, DEVIATION)
SCHEMA = "ops-results/1"


@dataclass
class CaseResult:
    device: str
    op: str
    params: str
    status: str
    reason: str = ""            # FAIL / not supported / deviation: why
    error: float | None = None  # the metric's value on the first checked node that failed, or the worst
    threshold: float | None = None
    metric: str = ""
    note: str = ""              # a family's recorded note on this device
    seconds: float = 0.0        # wall time of the case in its worker
    # perf
    n_runs: int = 0
    time_us: float = 0.0
    flops: float = 0.0          # FLOP/s
    bandwidth_gb_s: float = 0.0
    memory_kb: int = 0
    index: int = -1             # position in the selected case list (stable across -j and shards)
    ran_on: str = ""            # with -b KIND: the device of that kind the case ran on

    @property
    def name(self) -> str:
        return f"{self.op}({self.params})"

    def to_dict(self) -> dict[str, Any]:
        # every field is a plain value: a shallow copy is asdict's result, without its
        # recursive deep copy (thousands of results per run)
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CaseResult":
        fields = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in fields})


@dataclass
class DeviceInfo:
    name: str
    description: str = ""
    memory_total: int | None = None
    memory_free: int | None = None


@dataclass
class Run:
    mode: str                           # test / perf / support / grad
    seed: int = 0
    ops_filter: str | None = None
    params_filter: str | None = None
    shard: str | None = None
    devices: list[DeviceInfo] = field(default_factory=list)
    results: list[CaseResult] = field(default_factory=list)
    interrupted: bool = False
    version: str = ""
    exit_status: int = 0                # of the command that made it; not saved

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
            "shard": self.shard, "interrupted": self.interrupted,
            "devices": [asdict(d) for d in self.devices],
            "summary": self.summary(),
            "results": [r.to_dict() for r in sorted(self.results, key=lambda r: (r.index, r.device))],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Run":
        if d.get("schema") != SCHEMA:
            raise ValueError(f"not an ops results file (schema {d.get('schema')!r}, expected {SCHEMA!r})")
        return cls(mode=d["mode"], seed=d.get("seed", 0), ops_filter=d.get("ops_filter"),
                   params_filter=d.get("params_filter"), shard=d.get("shard"),
                   devices=[DeviceInfo(**x) for x in d.get("devices", [])],
                   results=[CaseResult.from_dict(r) for r in d.get("results", [])],
                   interrupted=d.get("interrupted", False), version=d.get("version", ""))

    def write_json(self, path: str) -> None:
        import os
        import tempfile
        # write-then-rename: an interrupted write never leaves a half file behind
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".ops-results-")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 is not what a results file should have
        with os.fdopen(fd, "w") as f:
            json.dump(self.to_dict(), f, indent=1)
        os.replace(tmp, path)


def load_run(path: str) -> Run:
    """Read a results file; raises ValueError with a one-line reason when it is not one."""
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{path} is not valid JSON ({e.msg} at line {e.lineno})") from None
    try:
        return Run.from_dict(data)
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path} is not a valid ops results file ({e})") from None
    except ValueError as e:
        raise ValueError(f"{path}: {e}") from None


def merge_runs(runs: list[Run]) -> Run:
    """One run from shards: same mode and seed; results keyed by (case index, device)."""
    if not runs:
        raise ValueError("nothing to merge")
    first = runs[0]
    for r in runs[1:]:
        if (r.mode, r.seed, r.ops_filter, r.params_filter) != (first.mode, first.seed, first.ops_filter, first.params_filter):
            raise ValueError("cannot merge results of different runs (mode, seed or filters differ)")
    merged = Run(mode=first.mode, seed=first.seed, ops_filter=first.ops_filter,
                 params_filter=first.params_filter, version=first.version,
                 interrupted=any(r.interrupted for r in runs))
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
