"""`make ggml-cann`: ggml (CPU + CANN) and test-backend-ops from a ggml source
(native/ggml_sources.py: the pinned llama-cpp-python sdist, LLAMA_CPP_PYTHON=VERSION, or
a local tree, GGML_SRC=DIR), built against the simulated CANN toolkit
(native/cann_sim_toolkit.py) as the variants the Ascend CI runs, under GGML_CANN_OUT
(default build/ggml-cann, so several sources sit side by side):

  <out>/<variant>/cmake/   the CMake build (native/ggml_cann/CMakeLists.txt)
  <out>/<variant>/prefix/  its install prefix (include/, lib/, bin/): what
                           `make native GGML_HOME=...` points the bridge at
  <out>/<variant>/bin/test-backend-ops
                           the unchanged binary, started with the variant's environment
                           (the simulated SoC, ACL graph mode)
  <out>/<variant>/source.json
                           what was built: the source (release and sha256, or the tree's
                           path and `git describe`), ggml's version read from the tree,
                           the variant and the build's time, for the tools that report on it
  <out>/<variant>/build.log
                           the compiler's output of the last build

Variant `cpu` is the same project without CANN (no toolkit needed), in build/ggml-cpu/
for the pinned release (<out>/cpu otherwise): ggml's CPU backend and its
test-backend-ops (prefix/bin/test-backend-ops), which `make tbo-names` lists the case
names from and `make native GGML_HOME=...` tests. With EXPORT_GRAPH_OPS=1 (`make
ggml-cpu-export`), the same build adds test-export-graph-ops (prefix/bin/) of a llama.cpp
tree, with the libllama and llama-common it links: it writes a model's graph nodes as a
--test-file for `ops test --cases` and `ops tbo --cases`.

Every build configures again (a second or two) and ninja recompiles only what changed,
so a GGML_SRC tree edited since is rebuilt in the files touched. A toolkit entry point
that the source calls and the simulator lacks fails the build with one line naming it.
`python -m cannops.native.ggml_cann_build [VARIANT ...]`; prints the time of each.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import time

from .ggml_sources import Source, SourceError

from . import cann_sim_toolkit, ggml_sources

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
TOOLKIT = BUILD / "cann-sim-toolkit"
PROJECT = pathlib.Path(__file__).resolve().parent / "ggml_cann"

# What ggml-cann relies on beyond the docs, each let pass by name (every use still
# printed as `CANN-SIM tolerated [rule]`) so that one finding does not hide every case
# behind it (docs/ggml-cann-on-cann-sim.md; refusals.RELAXATIONS says why each is safe):
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
    "310P": ({"SOC_TYPE": "Ascend310P3"}, {**RUN_ENV, "CANN_SIM_SOC": "Ascend310P3"}),
    "910B-graph": ({"SOC_TYPE": "Ascend910B3", "USE_ACL_GRAPH": "ON"},
                   {**RUN_ENV, "CANN_SIM_SOC": "Ascend910B3", "GGML_CANN_ACL_GRAPH": "1"}),
    "cpu": ({"GGML_CANN": "OFF"}, None),   # None: no simulator, no launcher
}


def _uses_cann(variant: str) -> bool:
    return VARIANTS[variant][1] is not None


DEFAULT_OUT = BUILD / "ggml-cann"
EXPORT_SOURCE = "test-export-graph-ops.cpp"   # llama.cpp's tests/ (0.3.17 has export-graph-ops.cpp)


def variant_dir(variant: str, out: pathlib.Path = DEFAULT_OUT) -> pathlib.Path:
    if _uses_cann(variant):
        return out / variant
    return BUILD / f"ggml-{variant}" if out == DEFAULT_OUT else out / variant


def binary(variant: str, out: pathlib.Path = DEFAULT_OUT) -> pathlib.Path:
    """What runs the variant's test-backend-ops: the launcher, or the installed binary."""
    where = variant_dir(variant, out)
    return where / "bin" / "test-backend-ops" if _uses_cann(variant) else \
        where / "prefix" / "bin" / "test-backend-ops"


def _run(cmd: list[str], **kw) -> None:
    subprocess.run(cmd, check=True, **kw)


# what a compiler or linker says when the source calls what the simulated toolkit lacks
MISSING = (
    (re.compile(r"fatal error: (acl(?:nn|nnop)?/[\w./]+\.h): No such file"), "header"),
    (re.compile(r"error: ['‘`]?(acl\w+)['’`]? (?:was not declared|undeclared)"), "entry point"),
    (re.compile(r"error: use of undeclared identifier ['‘`]?(acl\w+)"), "entry point"),
    (re.compile(r"undefined reference to [`'‘](acl\w+)"), "entry point"),
    (re.compile(r"undefined symbol: (acl\w+)"), "entry point"),
)


def missing_from_toolkit(log: str) -> list[tuple[str, str, str]]:
    """(what, name, where) of each ACL/aclnn header or entry point a failed build names as
    missing, in the order first met (where: the compiler's file:line, if it gave one)."""
    seen: dict[str, tuple[str, str, str]] = {}
    for line in log.splitlines():
        for pattern, what in MISSING:
            m = pattern.search(line)
            # an operator's two phases are one gap: aclnnFoo(GetWorkspaceSize)
            name = m[1].removesuffix("GetWorkspaceSize") if m else None
            if m and name not in seen:
                where = line[:m.start()].split(": ")[0].strip()
                seen[name] = (what, name, where)
    return list(seen.values())


class ToolkitGap(Exception):
    """The source calls an ACL / aclnn entry point (or includes a header) that the
    simulated toolkit does not have."""


def _build_logged(cmd: list[str], log: pathlib.Path) -> None:
    """cmake --build, its output shown and kept in `log`; a failure that names a missing
    toolkit header or entry point becomes ToolkitGap."""
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            f.write(line)
        rc = proc.wait()
    if rc == 0:
        return
    gaps = missing_from_toolkit(log.read_text(errors="replace"))
    if gaps:
        what, name, where = gaps[0]
        more = f" (and {len(gaps) - 1} more: {', '.join(g[1] for g in gaps[1:6])})" if len(gaps) > 1 else ""
        raise ToolkitGap(f"the simulated CANN toolkit lacks the {what} {name}"
                         f"{f', used at {where}' if where else ''}{more}: add it to "
                         f"native/aclnn/api/*.def and the simulator (backend/cann/sim/ops_*.py); "
                         f"log: {log}")
    raise subprocess.CalledProcessError(rc, cmd)


def build(variant: str, jobs: int, source: Source, out: pathlib.Path = DEFAULT_OUT, export: bool = False) -> float:
    """One variant built and installed; `export`: the cpu variant with test-export-graph-ops."""
    options, env = VARIANTS[variant]
    where = variant_dir(variant, out)
    cmake_dir, prefix = where / "cmake", where / "prefix"
    where.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # configured every time (a second or two): the source may have changed since
    rpath = "$ORIGIN;$ORIGIN/../lib"   # the installed libraries find each other (and the
    cann = {"GGML_CANN": "ON", "CANN_INSTALL_DIR": TOOLKIT} if env is not None else {}
    if cann:                           # toolkit) without LD_LIBRARY_PATH
        rpath += f";{TOOLKIT / 'lib64'}"
    # Release's -O3 with debug information (-g changes no code): the simulated toolkit
    # names the line of ggml-cann that made each call (backend/callsite.py)
    defs = {"GGML_DIR": source.ggml, "GGML_TESTS": source.tests, "CMAKE_BUILD_TYPE": "Release",
            "CMAKE_C_FLAGS": "-g", "CMAKE_CXX_FLAGS": "-g",
            "BUILD_SHARED_LIBS": "ON", **cann, "CMAKE_INSTALL_PREFIX": prefix,
            "CMAKE_INSTALL_RPATH": rpath, "LLAMA_CURL": "OFF", **options}
    if not cann:   # given, or emptied: the llama part is configured only when asked for
        defs["LLAMA_DIR"] = source.tests.parent if export else ""
    generator = [] if (cmake_dir / "CMakeCache.txt").exists() or not _have("ninja") else ["-G", "Ninja"]
    _run(["cmake", "-S", str(PROJECT), "-B", str(cmake_dir), *generator,
          *(f"-D{k}={v}" for k, v in defs.items())], stdout=subprocess.DEVNULL)
    _build_logged(["cmake", "--build", str(cmake_dir), "-j", str(jobs)], where / "build.log")
    _run(["cmake", "--install", str(cmake_dir)], stdout=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    record = {**source.record(), "variant": variant, "soc": (env or {}).get("CANN_SIM_SOC"),
              "cmake": {k: str(v) for k, v in options.items()},
              "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "build_seconds": round(seconds, 1)}
    (where / "source.json").write_text(json.dumps(record, indent=1) + "\n")
    if env is None:
        return seconds
    # env.sh: the variant's run-time environment, for any client of this prefix (ops'
    # bridge: make native GGML_HOME=.../prefix, then `. env.sh; ops test -b GGML-CANN0`)
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items())
    (where / "env.sh").write_text(f"# generated by make ggml-cann: ggml-cann ({variant}) of "
                                  f"{source.name} on the CANN simulator\n{exports}")
    launcher = where / "bin" / "test-backend-ops"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text("#!/bin/sh\n# generated by make ggml-cann: test-backend-ops of ggml-cann "
                        f"({variant}, {source.name}) on the CANN simulator\n"
                        f". {shlex.quote(str(where / 'env.sh'))}\n"
                        f'exec {shlex.quote(str(prefix / "bin" / "test-backend-ops"))} "$@"\n')
    launcher.chmod(0o755)
    return seconds


def _have(tool: str) -> bool:
    return any((pathlib.Path(p) / tool).exists() for p in os.environ.get("PATH", "").split(":"))


def main(argv: list[str], env: dict | None = None) -> int:
    env = os.environ if env is None else env
    variants = argv or [v for v in VARIANTS if _uses_cann(v)]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        print(f"ggml-cann: unknown variant {unknown[0]} (known: {', '.join(VARIANTS)})",
              file=sys.stderr)
        return 2
    out = pathlib.Path(env.get("GGML_CANN_OUT") or DEFAULT_OUT).resolve()
    try:
        source = ggml_sources.from_env(env, BUILD)
    except SourceError as e:
        print(f"ggml-cann: error: {e}", file=sys.stderr)
        return 2
    export = bool(env.get("EXPORT_GRAPH_OPS"))
    if export and not (source.tests / EXPORT_SOURCE).exists():
        print(f"ggml-cann: {source.name} has no tests/{EXPORT_SOURCE} (llama.cpp's tool that writes a model's "
              f"graph nodes for --test-file)", file=sys.stderr)
        return 2
    if export and (source.layout != "llama.cpp" or any(map(_uses_cann, variants))):
        print("ggml-cann: EXPORT_GRAPH_OPS=1 builds the cpu variant of a llama.cpp tree", file=sys.stderr)
        return 2
    if any(map(_uses_cann, variants)) and not cann_sim_toolkit.is_simulated(TOOLKIT):
        print(f"ggml-cann: no simulated toolkit at {TOOLKIT}: make cann-sim-toolkit first",
              file=sys.stderr)
        return 2
    print(f"ggml-cann: source {source.name} (ggml {ggml_sources.ggml_version(source.ggml) or '?'}"
          f"{f', {source.git}' if source.git else ''}) -> {out}", flush=True)
    jobs = int(env.get("JOBS") or os.cpu_count() or 2)
    for v in variants:
        seconds = build(v, jobs, source, out, export)
        print(f"ggml-cann: {v}: {binary(v, out)} ({seconds:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except ToolkitGap as e:
        print(f"ggml-cann: error: {e}", file=sys.stderr)
        sys.exit(2)
    except (subprocess.CalledProcessError, RuntimeError) as e:
        print(f"ggml-cann: error: {e}", file=sys.stderr)
        sys.exit(1)
