"""The cffi module whose entry points the simulator serves, and whose constants it reads.

In `ops`' own processes that is the native layer, cannops.native._aclnn, whose
`extern "Python"` twins `sim_<name>` the layer's function table takes. Inside a C/C++
client of the simulated CANN toolkit (make cann-sim-toolkit), it is the toolkit's
embedded module `_cannsim`: its `sim_<name>` functions are exported from libcannsim.so
and called by libascendcl / libnnopbase / libopapi. Both modules are built from the same
declarations, so the simulator's code is the same in either.
"""
import sys

if "_cannsim" in sys.modules:          # imported by the toolkit's embedding init code
    from _cannsim import ffi, lib      # noqa: F401
else:
    from cannops.native._aclnn import ffi, lib  # noqa: F401
