"""The CANN backend: devices CANN0, CANN1, … on a host with CANN and an Ascend NPU, or
the CANN simulator, CANN-SIM, wherever no real device is present.

Both run the same native aclnn layer (cannops.native._aclnn, sources in native/aclnn/);
only the ACL function table it calls through differs. The real libraries are those of
the toolkit cannops.native.toolkit finds (ASCEND_TOOLKIT_HOME, ASCEND_HOME_PATH, the
usual install paths); aclnn symbols are looked up in each of its libopapi*.so in turn.
OPS_CANN=sim forces the simulator even where a device exists. A toolkit that is the
simulator's own (make cann-sim-toolkit) is loaded as a real one, so that the layer's
real-hardware path runs, and its device is still CANN-SIM, never CANN0.

The ACL runtime is initialised once per process (on the first listing) and finalised
at exit, after every opened device has been released.
"""
from __future__ import annotations

import atexit
import os
import sys
from dataclasses import dataclass, field

from cannops.native._aclnn import ffi, lib   # ImportError: the native layer is not built
from cannops.native.cann_sim_toolkit import is_simulated
from cannops.native.toolkit import find_toolkit

from cannops.backend.base import DeviceError

from .errors import CANNError, err_buffer, err_text  # noqa: F401  (CANNError: the package's API)
from .soc import DEFAULT, family, mode

SIM_NAME = "CANN-SIM"


def find_cann_libraries() -> list[str] | None:
    """The toolkit's libascendcl, libnnopbase and libopapi*.so, in lookup order."""
    toolkit = find_toolkit()
    return (toolkit.libraries() or None) if toolkit else None


@dataclass
class Runtime:
    simulated: bool
    devices: list[tuple[str, str, int]]        # (name, description, device id)
    why_simulated: str = ""
    open: list = field(default_factory=list)    # devices not closed yet


_runtime: Runtime | None = None


def runtime() -> Runtime:
    """Bind the native layer to real CANN or the simulator, once per process."""
    global _runtime
    if _runtime is None:
        _runtime = _start()
        atexit.register(_shutdown)
    return _runtime


def _start() -> Runtime:
    err = err_buffer()
    why = "OPS_CANN=sim"
    if os.environ.get("OPS_CANN", "auto") != "sim":
        libs = find_cann_libraries()
        why = "no CANN toolkit found"
        if libs and lib.ops_cann_load(":".join(libs).encode(), 0, err, len(err)) == 0:
            count = ffi.new("uint32_t *")
            if lib.ops_cann_device_count(count, err, len(err)) == 0 and count[0] > 0:
                soc = ffi.string(lib.ops_cann_soc_name()).decode() or "Ascend NPU"
                toolkit = find_toolkit()
                assert toolkit is not None   # the libraries came from it (find_cann_libraries)
                home = toolkit.home
                if is_simulated(home):
                    # the simulator behind CANN's own libraries (make cann-sim-toolkit): the
                    # layer's real-hardware path runs, but this is no NPU
                    desc = f"CANN simulator through its toolkit {home} (aclnn rules of {soc})"
                    return Runtime(True, [(SIM_NAME, desc, 0)], f"the toolkit at {home} is the simulator's")
                return Runtime(False, [(f"CANN{i}", soc, i) for i in range(count[0])])
            why = "CANN found, but no device"
            lib.ops_cann_finalize(err, len(err))
        elif libs:
            why = f"CANN libraries did not load: {err_text(err)}"
    if "_cannsim" in sys.modules:
        # ggml-cann in this process already runs on the simulated toolkit (a GGML device):
        # one simulator per process, and it serves that client
        raise DeviceError("the CANN simulator serves ggml-cann's CANN backend in this process "
                          "(a GGML-CANN device): test CANN-SIM in a run of its own")
    from .sim import install
    install()
    rc = lib.ops_cann_load(ffi.NULL, 1, err, len(err))
    if rc:
        raise DeviceError(f"CANN simulator did not start: {err_text(err)}")
    soc = ffi.string(lib.ops_cann_soc_name()).decode()
    desc = f"CANN simulator (CPU, NumPy; aclnn rules of {soc})"
    if family(soc) != DEFAULT and mode() == "pages":
        desc += "; the pages decide the operators offered (--soc-evidence pages)"
    return Runtime(True, [(SIM_NAME, desc, 0)], why)


def _shutdown() -> None:
    if _runtime is None:
        return
    for dev in list(_runtime.open):
        dev.close()
    lib.ops_cann_finalize(err_buffer(), 2048)


def list_devices() -> list[tuple[str, str]]:
    return [(name, desc) for name, desc, _ in runtime().devices]


def probe_key(name: str) -> str | None:
    """The simulator's answers depend on the sources and the native layer only; a real
    device's are not cached (its runtime may change under the same name)."""
    if not runtime().simulated:
        return None
    from cannops.backend.base import file_identity
    from cannops.native import _aclnn
    return "|".join([name, dict(list_devices()).get(name, ""), file_identity(_aclnn.__file__), mode()])


def open_prober(name: str):
    """The device's support decisions without the device (device.CANNRules): a probe
    needs no context, and its workers may be forked."""
    from .device import CANNRules
    for dev_name, desc, _ in runtime().devices:
        if dev_name == name:
            return CANNRules(dev_name, desc, ffi.string(lib.ops_cann_soc_name()).decode())
    raise KeyError(name)


def open_device(name: str):
    from .device import CANNDevice
    rt = runtime()
    for dev_name, desc, index in rt.devices:
        if dev_name == name:
            dev = CANNDevice(dev_name, desc, index, rt.simulated, rt.open)
            rt.open.append(dev)
            return dev
    raise KeyError(name)
