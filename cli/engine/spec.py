"""A run's spec: what a run is, built once from the command's options and handed whole to
the runner, each device's worker pool and every worker (a new option reaches a worker as
one more field here)."""
from __future__ import annotations

import os
from dataclasses import dataclass

# a simulated device (CANN-SIM) runs every aclnn call in Python, moving each operator's whole
# output through NumPy: its big cases (e.g. MoE matmuls over 128 experts) take minutes, so
# its default per-case timeout is this many times the mode's
SIMULATOR_TIME = 10
MAX_CASE_SECONDS = 1e6   # --timeout's own bound (cli/options.py): a longer wait overflows the platform's
JOBS_PER_CORE = 2   # -j above this many workers a core only adds memory (each holds a device)


@dataclass(frozen=True)
class RunSpec:
    mode: str = "test"                 # test, perf, support or grad (results.MODES)
    # the selection, as the results file records it
    ops_filter: str | None = None
    params_filter: str | None = None
    shard: str | None = None
    sample: int | None = None          # --sample: at most this many cases per op
    catalog: str = ""                  # the catalog version (cases/versions.py); "": the one in use
    # how each case runs
    seed: int = 0
    jobs: int = 1                      # workers per device (fewer where fewer cases are left)
    timeout: float = 60.0              # seconds a case's device run may take
    timeout_given: bool = False        # --timeout: exact; else a simulator gets SIMULATOR_TIME times it
    min_seconds: float = 1.0           # perf: measure each case at least this long
    threads: int | None = None         # ggml CPU threads per worker (None: worker_threads' share)
    strict: bool = False               # test: the per-element check too (engine/strict.py)
    ref_cache: bool = True             # test: keep the reference's outputs on disk (engine/refcache.py)
    trace: bool = False                # test: every case's call trace in its result (a FAIL's always)
    cost: bool = False                 # test: each counted case's per-call cost records kept too
    # test, the hygiene modes (docs/hygiene.md): each case run this many times, its outputs
    # required bit-identical; op outputs filled with NaN before the run; inputs compared after it
    repeat: int = 1
    poison: bool = False
    check_inputs: bool = False
    # test: the directory references are kept in for this run (the cache's, or a scratch
    # directory of the run's own where the cache is off and several devices share them);
    # set by the runner (runner.run_cases), None: none kept
    ref_dir: str | None = None
    # the big cases' memory turn (engine/worker.py): the lock file every pool of the run shares,
    # so that pools open at once (several devices, the pytest plugin's) take turns too; set by
    # the runner (runner.run_cases), None: each pool's own, beside its workers' logs
    turn_lock: str | None = None

    def case_timeout(self, device: str) -> float:
        """The per-case limit on `device` (a label: CANN-SIM, CANN-SIM:310P); without
        --timeout, --repeat N gives a case N times the limit (N runs on the device)."""
        if self.timeout_given:
            return self.timeout
        simulated = device.split(":")[0].endswith("-SIM")   # CANN-SIM:310P too
        return min(self.timeout * (SIMULATOR_TIME if simulated else 1) * self.repeat, MAX_CASE_SECONDS)

    def hygiene(self) -> str | None:
        """The hygiene modes as the results file records them, None where none is on."""
        on = [f"repeat={self.repeat}"] * (self.repeat > 1) + ["poison"] * self.poison + \
            ["check-inputs"] * self.check_inputs
        return ",".join(on) or None

    def worker_threads(self) -> int:
        return worker_threads(self.mode, self.jobs, self.threads)


def worker_threads(mode: str, jobs: int, threads: int | None = None) -> int:
    """ggml's CPU threads in each worker: --threads, else an equal share of the cores; for
    perf, of half the cores, as test-backend-ops has its CPU backend (N_THREADS / 2), so
    that the two tools' us/run compare."""
    if threads:
        return threads
    cores = os.cpu_count() or 1
    share = max(1, cores // 2) if mode == "perf" else cores
    return max(1, share // min(max(jobs, 1), JOBS_PER_CORE * cores))
