"""The run engine: what a case is on a device and how it is judged, the worker processes
that run cases, and the results they give; no click, no printing of its own.

Its API is the names below, imported from this package (never from its modules): run a
selection of cases on devices (`select_cases`, `select_devices`, `RunSpec`, `run_cases`),
stream results one case at a time (`WorkerPool`), keep and read results (`Run`,
`CaseResult`, `Journal`, `load_run`, `load_resume`, `merge_runs`). Each name is imported
on first use, so that `ops --help` or a bad option imports none of the engine's modules.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"   # ops' version, recorded in every results file

# public name -> the module that holds it
_API = {
    **dict.fromkeys(("OK", "NOT_SUPPORTED", "FAIL", "SKIPPED", "DEVIATION", "STATUSES", "MODES", "CaseResult",
                     "DeviceInfo", "Run", "Resumed", "Journal", "JournalBusy", "journal_path", "load_run",
                     "load_resume", "merge_runs"), "results"),
    **dict.fromkeys(("RunSpec", "worker_threads", "JOBS_PER_CORE"), "spec"),
    **dict.fromkeys(("run_cases", "new_run", "device_passed", "Interrupted"), "runner"),
    **dict.fromkeys(("WorkerPool", "WorkerStartError", "Reply"), "pool"),
    **dict.fromkeys(("FORKABLE", "set_up_forking", "fork_ahead", "reap_children"), "forking"),
    **dict.fromkeys(("device_info",), "worker"),
    **dict.fromkeys(("BadInput", "Target", "select_cases", "select_devices", "device_names", "per_soc",
                     "split_ops_filter", "suggest", "sample_per_op", "parse_shard"), "selection"),
    **dict.fromkeys(("worst_lines", "trace_lines"), "compare"),
    **dict.fromkeys(("reference_dir",), "refcache"),
    **dict.fromkeys(("ReproSpec", "check_repro", "write_repro"), "repro"),
    **dict.fromkeys(("TboSpec", "check_binary", "takes_test_file", "list_cases", "op_regex",
                     "exact_params", "binary_source", "run_tbo", "simulator_environment",
                     "hygiene_modes"), "tbo"),
    **dict.fromkeys(("Reader", "death_story", "case_statuses", "log_processes", "is_death"), "tbo_console"),
}
__all__ = sorted(_API)


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    globals()[name] = value
    return value
