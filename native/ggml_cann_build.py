"""`make ggml-cann`: ggml (CPU + CANN) and test-backend-ops from the llama-cpp-python
sdist (native/ggml_sources.py), built against the simulated CANN toolkit
(native/cann_sim_toolkit.py) as the variants the Ascend CI runs:

  build/ggml-cann/<variant>/cmake/   the CMake build (native/ggml_cann/CMakeLists.txt)
  build/ggml-cann/<variant>/prefix/  its install prefix (include/, lib/, bin/): what
                                     `make native GGML_HOME=...` points the bridge at
  build/ggml-cann/<variant>/bin/test-backend-ops
                                     the unchanged binary, started with the variant's
                                     environment (the simulated SoC, ACL graph mode)

Variant `cpu` is the same project without CANN (no toolkit needed), in build/ggml-cpu/:
ggml 0.25.3's CPU backend and its test-backend-ops (prefix/bin/test-backend-ops), which
`make tbo-names` lists the 0.25.3 case names from and `make native GGML_HOME=...` tests.

A variant already configured is only rebuilt (ninja skips what is up to date).
`python -m cannops.native.ggml_cann_build [VARIANT ...]`; prints the time of each.
"""
from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys
import time

from . import cann_sim_toolkit, ggml_sources

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
TOOLKIT = BUILD / "cann-sim-toolkit"
PROJECT = pathlib.Path(__file__).resolve().parent / "ggml_cann"

# What ggml-cann relies on beyond the docs, each let pass by name (every use still
# printed as `CANN-SIM tolerated [rule]`) so that one finding does not hide every case
# behind it (docs/ggml-cann-on-cann-sim.md; runtime.RELAXATIONS says why each is safe):
# its buffer type declares 128-byte alignment where aclrtMalloc promises 64; its views
# declare a storage without their offset and hand over their own, unaligned address as
# tensorData (the page asks for 32-byte alignment); FLASH_ATTN_EXT hands FIAS strided
# K / V / mask; an NCL-tagged dst is zeroed; a [1] out takes a 0-d sum; D2D async copies
# start at 32-byte offsets. The 910B CI passes every op involved.
RUN_ENV = {"CANN_SIM_MALLOC_ALIGN": "128", "CANN_SIM_ALLOW": ",".join((
    "storage-shape", "tensor-data-align", "fias-strided-inputs", "origin-format",
    "scalar-out-shape", "async-copy-align"))}
# variant -> (CMake options, run-time environment)
VARIANTS = {
    "910B": ({"SOC_TYPE": "Ascend910B3"}, {**RUN_ENV, "CANN_SIM_SOC": "Ascend910B3"}),
    # ggml-cann's ASCEND_310P build calls operators whose pages do not offer the 310P
    # (aclnnAdd, aclnnExp, aclnnIndexCopy, ...): let through by name, each call printed
    "310P": ({"SOC_TYPE": "Ascend310P3"},
             {**RUN_ENV, "CANN_SIM_SOC": "Ascend310P3",
              "CANN_SIM_ALLOW": RUN_ENV["CANN_SIM_ALLOW"] + ",unoffered-operator"}),
    "910B-graph": ({"SOC_TYPE": "Ascend910B3", "USE_ACL_GRAPH": "ON"},
                   {**RUN_ENV, "CANN_SIM_SOC": "Ascend910B3", "GGML_CANN_ACL_GRAPH": "1"}),
    "cpu": ({"GGML_CANN": "OFF"}, None),   # None: no simulator, no launcher
}


def _uses_cann(variant: str) -> bool:
    return VARIANTS[variant][1] is not None


def variant_dir(variant: str) -> pathlib.Path:
    return BUILD / "ggml-cann" / variant if _uses_cann(variant) else BUILD / f"ggml-{variant}"


def binary(variant: str) -> pathlib.Path:
    """What runs the variant's test-backend-ops: the launcher, or the installed binary."""
    where = variant_dir(variant)
    return where / "bin" / "test-backend-ops" if _uses_cann(variant) else \
        where / "prefix" / "bin" / "test-backend-ops"


def _run(cmd: list[str], **kw) -> None:
    subprocess.run(cmd, check=True, **kw)


def build(variant: str, jobs: int) -> float:
    options, env = VARIANTS[variant]
    where = variant_dir(variant)
    cmake_dir, prefix = where / "cmake", where / "prefix"
    t0 = time.monotonic()
    if not (cmake_dir / "CMakeCache.txt").exists():
        llama = ggml_sources.llama_cpp(BUILD)
        # the installed libraries find each other (and the toolkit) without LD_LIBRARY_PATH
        rpath = "$ORIGIN;$ORIGIN/../lib"
        cann = {"GGML_CANN": "ON", "CANN_INSTALL_DIR": TOOLKIT} if env is not None else {}
        if cann:
            rpath += f";{TOOLKIT / 'lib64'}"
        defs = {"LLAMA_CPP": llama, "CMAKE_BUILD_TYPE": "Release", "BUILD_SHARED_LIBS": "ON",
                **cann, "CMAKE_INSTALL_PREFIX": prefix, "CMAKE_INSTALL_RPATH": rpath,
                "LLAMA_CURL": "OFF", **options}
        generator = ["-G", "Ninja"] if _have("ninja") else []
        _run(["cmake", "-S", str(PROJECT), "-B", str(cmake_dir), *generator,
              *(f"-D{k}={v}" for k, v in defs.items())], stdout=subprocess.DEVNULL)
    _run(["cmake", "--build", str(cmake_dir), "-j", str(jobs)])
    _run(["cmake", "--install", str(cmake_dir)], stdout=subprocess.DEVNULL)
    if env is None:
        return time.monotonic() - t0
    # env.sh: the variant's run-time environment, for any client of this prefix (ops'
    # bridge: make native GGML_HOME=.../prefix, then `. env.sh; ops test -b GGML-CANN0`)
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    (where / "env.sh").write_text(f"# generated by make ggml-cann: ggml-cann ({variant}) on the "
                                  f"CANN simulator\n{exports}")
    launcher = where / "bin" / "test-backend-ops"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text("#!/bin/sh\n# generated by make ggml-cann: test-backend-ops of ggml-cann "
                        f"({variant}) on the CANN simulator\n. {shlex.quote(str(where / 'env.sh'))}\n"
                        f'exec {shlex.quote(str(prefix / "bin" / "test-backend-ops"))} "$@"\n')
    launcher.chmod(0o755)
    return time.monotonic() - t0


def _have(tool: str) -> bool:
    return any((pathlib.Path(p) / tool).exists() for p in os.environ.get("PATH", "").split(":"))


def main(argv: list[str]) -> int:
    variants = argv or [v for v in VARIANTS if _uses_cann(v)]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"ggml-cann: unknown variant {unknown[0]} (known: {', '.join(VARIANTS)})",
              file=sys.stderr)
        return 2
    if any(map(_uses_cann, variants)) and not cann_sim_toolkit.is_simulated(TOOLKIT):
        print(f"ggml-cann: no simulated toolkit at {TOOLKIT}: make cann-sim-toolkit first",
              file=sys.stderr)
        return 2
    jobs = os.cpu_count() or 2
    for v in variants:
        seconds = build(v, jobs)
        print(f"ggml-cann: {v}: {binary(v)} ({seconds:.0f} s)",
              flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (subprocess.CalledProcessError, RuntimeError) as e:
        print(f"ggml-cann: error: {e}", file=sys.stderr)
        sys.exit(1)
