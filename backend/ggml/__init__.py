"""ggml devices (GGML-CPU and whatever else the loaded libggml registers), through the
cffi bridge `cannops.native._ggml` (native/build_ggml.py).

Provider API for backend/base.py: list_devices() and open_device(name). A device is
named `GGML-<ggml device name>`, e.g. GGML-CPU, GGML-CUDA0, GGML-CANN0.
"""
from __future__ import annotations

import os

from .library import PREFIX, ffi, lib
from .library import libdir as _libdir

_devices: dict[str, object] | None = None


def _registry() -> dict[str, object]:
    """ggml device name -> ggml_backend_dev_t, after loading any dynamic backends."""
    global _devices
    if _devices is None:
        lib.cannops_guard_install()
        # backends built as loadable modules (GGML_BACKEND_DL) live beside libggml;
        # those linked in are registered already and are not loaded twice
        libdir = _libdir()
        for d in (libdir, os.path.join(os.path.dirname(libdir), "bin")):  # llama.cpp: bin/
            if os.path.isdir(d):
                lib.ggml_backend_load_all_from_path(d.encode())
        _devices = {}
        for i in range(lib.ggml_backend_dev_count()):
            dev = lib.ggml_backend_dev_get(i)
            _devices.setdefault(ffi.string(lib.ggml_backend_dev_name(dev)).decode(), dev)
    return _devices


def list_devices() -> list[tuple[str, str]]:
    return [(PREFIX + name, ffi.string(lib.ggml_backend_dev_description(dev)).decode())
            for name, dev in _registry().items()]


def open_device(name: str):
    from .device import GGMLDevice
    if not name.startswith(PREFIX) or name[len(PREFIX):] not in _registry():
        raise KeyError(name)
    return GGMLDevice(_registry()[name[len(PREFIX):]])



def device_details(name: str) -> list[str]:
    """Which libggml a device runs on: the library, ggml's version, and the features its
    backend reports (for the CPU: the instruction sets it was built for). A wheel's
    generic CPU library can be many times slower than a build for this CPU."""
    dev = _registry()[name[len(PREFIX):]]
    reg = lib.ggml_backend_dev_backend_reg(dev)
    reg_name = ffi.string(lib.ggml_backend_reg_name(reg)).decode()
    libdir = _libdir()
    own = os.path.join(libdir, f"libggml-{reg_name.lower()}.so")
    path = own if os.path.exists(own) else os.path.join(libdir, "libggml.so")
    version = ffi.string(lib.ggml_version()).decode() if hasattr(lib, "ggml_version") else "unknown"
    commit = ffi.string(lib.ggml_commit()).decode() if hasattr(lib, "ggml_commit") else "unknown"
    lines = [f"library: {os.path.realpath(path)} (ggml {version}, commit {commit})"]
    fn = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features")
    if fn:
        feats = ffi.cast("ggml_backend_get_features_t", fn)(reg)
        names = []
        i = 0
        while feats[i].name != ffi.NULL:
            key, value = ffi.string(feats[i].name).decode(), ffi.string(feats[i].value).decode()
            names.append(key if value == "1" else f"{key}={value}")
            i += 1
        lines.append(f"features: {' '.join(names) or 'none'}")
    return lines


def library_files() -> list[str]:
    """The libggml files of the bridge's library folder (the ggml build in use)."""
    libdir = _libdir()
    try:
        return sorted(os.path.join(libdir, f) for f in os.listdir(libdir) if f.startswith("libggml"))
    except OSError:
        return []


def probe_key(name: str) -> str:
    """A ggml device's supports_op answers depend on the ggml build and the bridge."""
    from cannops.backend.base import file_identity
    from cannops.native import _ggml
    desc = dict(list_devices()).get(name, "")
    return "|".join([name, desc, file_identity(_ggml.__file__)] + [file_identity(f) for f in library_files()])
