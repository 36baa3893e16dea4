"""Where the CANN toolkit is, for everything that needs it: the CANN device backend
(its libraries) and `make check-cann-headers` (its headers) find it the same way.

A toolkit is the first of these folders that exists: $ASCEND_TOOLKIT_HOME,
$ASCEND_HOME_PATH (both set by CANN's set_env.sh), then the standard install paths.
"""
from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

HOME_VARIABLES = ("ASCEND_TOOLKIT_HOME", "ASCEND_HOME_PATH")
INSTALL_PATHS = ("/usr/local/Ascend/ascend-toolkit/latest", "/usr/local/Ascend/cann",
                 "/usr/local/Ascend/latest", "/opt/Ascend/ascend-toolkit/latest")
LIBRARY_DIRS = ("lib64", "lib", "aarch64-linux/lib64", "x86_64-linux/lib64")

# The ACL runtime, then aclTensor & co. (acl_meta.h).
RUNTIME_LIBRARIES = ("libascendcl.so", "libnnopbase.so")
# The aclnn operators: one library per operator repository (ops-math, ops-nn, ops-cv,
# ops-transformer, …) in newer CANN, searched in this order (nnopbase's own order,
# libopapi_legacy last); the all-in-one libopapi.so of older CANN is deprecated and
# "not supported together with" them, so it is used only where none of them exists.
OPAPI_LIBRARIES = ("libopapi_math.so", "libopapi_nn.so", "libopapi_cv.so",
                   "libopapi_transformer.so", "libopapi_oam.so", "libopapi_ras.so",
                   "libopapi_legacy.so")
OPAPI_ALL_IN_ONE = "libopapi.so"


@dataclass(frozen=True)
class Toolkit:
    home: pathlib.Path
    found_by: str           # the variable that named it, or "install path"

    @property
    def include(self) -> pathlib.Path:
        return self.home / "include"

    def library_dir(self) -> pathlib.Path | None:
        """The folder holding the runtime libraries, None if none does."""
        for sub in LIBRARY_DIRS:
            d = self.home / sub
            if all((d / name).exists() for name in RUNTIME_LIBRARIES):
                return d
        return None

    def opapi_libraries(self, libdir: pathlib.Path) -> list[pathlib.Path]:
        split = [libdir / name for name in OPAPI_LIBRARIES if (libdir / name).exists()]
        if split:
            return split
        return [libdir / OPAPI_ALL_IN_ONE] if (libdir / OPAPI_ALL_IN_ONE).exists() else []

    def libraries(self) -> list[str]:
        """Paths to dlopen, in symbol lookup order; [] if the toolkit lacks any kind."""
        libdir = self.library_dir()
        opapi = self.opapi_libraries(libdir) if libdir else []
        if not opapi:
            return []
        return [str(libdir / name) for name in RUNTIME_LIBRARIES] + [str(p) for p in opapi]

    def describe(self) -> str:
        return f"{self.home} ({self.found_by})"


def find_toolkit() -> Toolkit | None:
    candidates = [(os.environ.get(v), v) for v in HOME_VARIABLES]
    candidates += [(p, "install path") for p in INSTALL_PATHS]
    for home, found_by in candidates:
        if home and pathlib.Path(home).is_dir():
            return Toolkit(pathlib.Path(home), found_by)
    return None
