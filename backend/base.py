"""The device interface every backend implements, and device discovery.

A device is a thin adapter: it says whether it supports a case, runs a case on given
inputs, and times a case. Everything else (reference, comparison, workers, printing)
lives in the runner.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:   # listing devices (and a cached probe) needs neither NumPy nor the catalog
    import numpy as np

    from cannops.cases.catalog import Case
    from cannops.cases.graph import Graph


class DeviceError(Exception):
    """A device could not run a case (the message becomes the FAIL reason)."""


@dataclass
class Support:
    ok: bool
    reason: str = ""   # why not: the node and the rule that rejected it
    evidence: str = ""  # how sure the answer is (a CANN device: backend/cann/evidence.py's level)

    def __bool__(self) -> bool:
        return self.ok


@dataclass
class RunResult:
    """Outputs of one case: logical values per checked tensor index, plus findings
    of the device's own checks (e.g. a guard region that was overwritten)."""
    outputs: dict[int, np.ndarray]
    problems: list[str] = field(default_factory=list)
    # run_traced: the device's calls (backend/trace.py's records), None: not traced
    calls: list[dict] | None = None
    # --poison: checked node index -> its elements left holding the poison (backend/hygiene.py)
    unwritten: dict[int, np.ndarray] = field(default_factory=dict)
    # seconds of the device's compute call alone (ggml_backend_graph_compute; the queued aclnn
    # calls and the stream's synchronisation), without building, uploading and reading back;
    # None: the device does not time it apart (the whole `run` is then its time)
    compute_seconds: float | None = None
    # the device work the run asked for, counted (backend/cost.py; the simulator), None: not counted
    cost: dict | None = None


@dataclass
class ParamGrad:
    """One parameter's gradient of the summed output: by backpropagation on the device
    (`analytic`) and by finite differences of the device's forward pass (`numeric`)."""
    name: str
    analytic: np.ndarray
    numeric: np.ndarray


class TracedError(DeviceError):
    """A traced run's DeviceError, with the calls made up to it (the refused one last)."""

    def __init__(self, message: str, calls: list[dict]):
        super().__init__(message)
        self.calls = calls


class GradUnsupported(Exception):
    """The device cannot take this case's gradients (the message says why)."""


def numeric_gradient(x0: np.ndarray, set_element: Callable[[int, float], None],
                     loss: Callable[[], float], eps: float, precise: bool) -> np.ndarray:
    """test-backend-ops' finite differences of a scalar loss by each element of a parameter:
    (f(x+e) - f(x-e)) / 2e, or with `precise` the 4-point (8f(x+e/2) + f(x-e) - 8f(x-e/2)
    - f(x+e)) / 6e. set_element(i, v) writes element i on the device; loss() recomputes the
    forward graph. Steps are taken in f32, as the C++ does."""
    import numpy as np
    x0 = np.asarray(x0, np.float32).reshape(-1)
    out = np.empty(x0.size, np.float32)
    e32 = np.float32(eps)
    for i, x in enumerate(x0):
        def at(step):
            set_element(i, float(np.float32(x + np.float32(step) * e32)))
            return loss()
        fu, fd = at(1.0), at(-1.0)
        if precise:
            fuh, fdh = at(0.5), at(-0.5)
            out[i] = (8.0 * fuh + fd - (8.0 * fdh + fu)) / (6.0 * eps)
        else:
            out[i] = np.float32(np.float32(fu) - np.float32(fd)) / np.float32(2.0 * e32)
        set_element(i, float(x))
    return out


# perf: what a simulated device's `time` measures (its results and output say so)
SIMULATOR_COST = "the simulator's cost on this host's CPU, not the NPU's"   # how every such clock begins
SIMULATOR_CLOCK = SIMULATOR_COST + " (simulated device events)"


class Device:
    name: str = "?"            # CANN0, CANN-SIM, GGML-CPU, NUMPY
    description: str = ""
    is_reference: bool = False  # the NumPy reference is not tested by default
    is_cpu: bool = True         # perf: CPU devices get test-backend-ops' smaller work targets
    clock: str = "host wall clock"   # perf: what `time` measures, as results and output say it

    # the implementations it runs (cases/implementations.py), by which a family's notes
    # and tolerances concern it: none, unless the device says so
    implements: tuple[str, ...] = ()

    def memory(self) -> tuple[int, int] | None:
        """(total, free) bytes, when the device knows them."""
        return None

    def supports(self, case: Case, graph: Graph) -> Support:
        raise NotImplementedError

    def run(self, case: Case, graph: Graph, inputs: dict[int, np.ndarray],
            check: list[int]) -> RunResult:
        """Compute the graph from `inputs` (leaf index -> data as stored) and return the
        logical values (shape ne[::-1]) of the tensors whose indices are in `check`. A
        `hygienic` device takes a keyword `hygiene` too (backend/hygiene.py's Hygiene):
        its outputs poisoned before the run, its inputs compared after it, each finding
        one of RunResult.problems."""
        raise NotImplementedError

    hygienic: bool = False

    # whether run_traced records the device's calls (CANN devices: backend/trace.py)
    can_trace: bool = False

    def run_traced(self, case: Case, graph: Graph, inputs: dict[int, np.ndarray],
                   check: list[int], data: bool = False) -> RunResult:
        """`run`, with RunResult.calls: each call the device made. With `data`, each call's
        inputs and outputs are kept and it is evaluated again in float64 (own_nmse), for
        the blame. A DeviceError is raised as TracedError, which carries the calls."""
        raise NotImplementedError

    def time(self, case: Case, graph: Graph, inputs: dict[int, np.ndarray], n_runs: int) -> float:
        """Seconds for `n_runs` back-to-back runs of the graph's output node (after a warm-up)."""
        raise NotImplementedError

    def grad(self, case: Case, graph: Graph, inputs: dict[int, np.ndarray]) -> list[ParamGrad]:
        """Gradients of sum(output) by each parameter leaf of the graph (graph.params()),
        backpropagated with the backward graph of libggml's ggml_build_backward_expand and
        estimated by finite differences on this device. Raises GradUnsupported."""
        raise GradUnsupported(f"{self.name} has no gradient mode")

    def close(self) -> None:
        pass


# Device providers: each returns the names of the devices it can open here, and opens one.
# Providers register themselves in `PROVIDERS` from their modules (imported lazily, so
# that listing devices never loads a native module that is not needed).
PROVIDER_MODULES = [
    "cannops.backend.numpy_device",
    "cannops.backend.ggml",
    "cannops.backend.cann",
    "cannops.backend.faulty",   # test-only, listed when OPS_FAULTY is set
]


_PROVIDERS: list = []   # the providers reached so far, in PROVIDER_MODULES' order


def _providers():
    """The providers in turn, each imported and asked for its devices when first reached
    (a run of `-b GGML-CPU` never imports the CANN provider nor starts its runtime); a
    broken one (e.g. a native module not built) is kept as _Unavailable with its reason,
    and the others carry on."""
    import importlib
    for i, m in enumerate(PROVIDER_MODULES):
        if i == len(_PROVIDERS):
            try:
                mod = importlib.import_module(m)
                mod.list_devices()
            except Exception as e:
                mod = _Unavailable(m, f"{type(e).__name__}: {e}")
            _PROVIDERS.append(mod)
        yield _PROVIDERS[i]


class _Unavailable:
    def __init__(self, module, why):
        self.module, self.why = module, why

    def list_devices(self):
        return []


def list_devices(names=()) -> list[tuple[str, str]]:
    """(name, description) of every device available here, reference last. Given device
    names, the providers after the one that lists the last of them are not asked (nor
    imported): the list then holds those devices and maybe some others; every device when
    one of the names is not found."""
    found, missing = [], set(names)
    for p in _providers():
        devices = p.list_devices()
        found.extend(devices)
        missing.difference_update(n for n, _ in devices)
        if names and not missing:
            break
    found.sort(key=lambda d: d[0] == "NUMPY")
    return found


def _provider_of(name: str):
    for p in _providers():
        if any(n == name for n, _ in p.list_devices()):
            return p
    raise KeyError(name)


def open_device(name: str) -> Device:
    return _provider_of(name).open_device(name)


def open_prober(name: str) -> Device | None:
    """What decides a device's support without opening it, where its provider has that
    (a Device whose `supports` needs no runtime, which any process may ask: a probe's
    forked workers); None where the device itself must be asked."""
    opener = getattr(_provider_of(name), "open_prober", None)
    return opener(name) if opener else None


def device_details(name: str) -> list[str]:
    """Lines on what a device runs on (its library, version, features), where its
    provider says."""
    details = getattr(_provider_of(name), "device_details", None)
    return details(name) if details else []


def probe_key(name: str) -> str | None:
    """What a device's support decisions depend on besides the sources (its library, its
    model), as a string; None when they are not known to be pure (never cached)."""
    key = getattr(_provider_of(name), "probe_key", None)
    return key(name) if key else None


def file_identity(path: str) -> str:
    """A file named by its path, size and modification time (a rebuilt library differs)."""
    import os
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def unavailable_reasons() -> list[str]:
    return [f"{p.module}: {p.why}" for p in list(_providers()) if isinstance(p, _Unavailable)]
