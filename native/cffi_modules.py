"""The cffi modules of `pip install .` (setup.py's cffi_modules). cffi runs this file as a
script, not as part of a package, so it first loads this folder as the package
cannops.native, whose builders (build_ggml, build_aclnn) import each other relatively."""
import importlib.util
import pathlib
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent

if "cannops.native" not in sys.modules:
    sys.modules.setdefault("cannops", types.ModuleType("cannops")).__path__ = []
    spec = importlib.util.spec_from_file_location("cannops.native", HERE / "__init__.py",
                                                  submodule_search_locations=[str(HERE)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["cannops.native"] = package
    spec.loader.exec_module(package)

from cannops.native import build_aclnn, build_ggml  # noqa: E402

ggml = build_ggml.make_ffi


def aclnn():
    return build_aclnn.make_ffi(sources_relative_to=HERE.parent)
