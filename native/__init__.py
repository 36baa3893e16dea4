"""The native (cffi) modules and their builders: the ggml bridge, the aclnn layer, the
simulated CANN toolkit and the ggml-cann build."""
import os

# `make` installs the project editable in setuptools' strict mode (a tree of links under
# build/, which static tools can follow): the modules it builds in place afterwards
# (native/*.so) are in this folder only, where the package looks for them too
_HERE = os.path.dirname(os.path.realpath(__file__))
if _HERE not in __path__:
    __path__.append(_HERE)
