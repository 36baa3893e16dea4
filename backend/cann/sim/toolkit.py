"""The simulator's side of the simulated CANN toolkit (native/cann_sim_toolkit.py lays it
out): the entry point that the toolkit library's embedded interpreter calls in a C
client's process, named to the build from here, so that the native layer names no module
above its own.

    python -m cannops.backend.cann.sim.toolkit PREFIX      (make cann-sim-toolkit)
"""
from __future__ import annotations

import pathlib
import sys

# this module by its import name (run with -m, its __name__ is "__main__")
ENTRY = f"{__spec__.name}:serve"


def serve() -> None:
    """Attach the simulator to the toolkit's embedded module `_cannsim` (binding.py), run by
    the library's first call in its client's process."""
    binding = sys.modules.get(f"{__package__}.binding")
    if binding is not None and binding.lib is not sys.modules["_cannsim"].lib:
        raise RuntimeError("the CANN simulator already serves this process's own native layer "
                           "(device CANN-SIM): the simulated toolkit cannot run beside it")
    from . import install
    install()


def build(prefix: pathlib.Path) -> None:
    """Write the simulated toolkit into `prefix`, its library serving through `serve`."""
    from cannops.native import cann_sim_toolkit
    cann_sim_toolkit.build(prefix, serve=ENTRY)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m cannops.backend.cann.sim.toolkit PREFIX", file=sys.stderr)
        sys.exit(2)
    build(pathlib.Path(sys.argv[1]))
