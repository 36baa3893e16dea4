"""Build every native (cffi, API mode) module in place: `python -m cannops.native.build`.

Each `build_<name>.py` beside this file defines `make_ffi() -> cffi.FFI`; the module is
compiled into this folder so that `cannops.native._<name>` imports it.
Environment: GGML_HOME=<prefix> points the ggml bridge at another ggml build.
"""
from __future__ import annotations

import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    builders = sorted(p.stem for p in HERE.glob("build_*.py"))
    if "--check-cann-headers" in argv:
        mod = importlib.import_module(f"{__package__}.build_aclnn")
        return mod.check_cann_headers(allow_no_toolkit="--allow-no-toolkit" in argv)
    for stem in builders:
        mod = importlib.import_module(f"{__package__}.{stem}")
        try:
            ffi = mod.make_ffi()
        except RuntimeError as e:   # a prefix without a header or a library: one line
            print(f"error: {e}", file=sys.stderr)
            return 2
        out = ffi.compile(tmpdir=str(HERE / "_build"), target=None, verbose=False)
        # ffi.compile writes into tmpdir; move the extension next to this file
        out = pathlib.Path(out)
        dest = HERE / out.name
        out.replace(dest)
        print(f"built {dest.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
