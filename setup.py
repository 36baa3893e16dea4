"""Everything is declared in pyproject.toml but the native modules: cffi builds them at
install time (`pip install .`). `make` installs editable with CANNOPS_NATIVE=make and builds
them in place itself (python -m cannops.native.build, which GGML_HOME can redirect)."""
import os

from setuptools import setup

native = os.environ.get("CANNOPS_NATIVE") != "make"
setup(cffi_modules=["native/cffi_modules.py:ggml", "native/cffi_modules.py:aclnn"] if native else [])
