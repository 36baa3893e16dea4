"""cffi (API mode) build of the native aclnn layer: `cannops.native._aclnn`.

The C sources live in native/aclnn/ (see its README.md). They build without the CANN
toolkit: the ACL runtime and aclnn entry points they use are declared in
native/aclnn/api/<family>.def (signatures exactly as CANN's headers write them) and are
called through a function table that is filled at run time, either from the real
libraries (dlopen of libascendcl / libnnopbase / libopapi) or from the CANN simulator.

The simulator is Python (cannops.backend.cann.sim): every entry point of every .def also
becomes a cffi `extern "Python"` function `sim_<name>`, whose C address the table takes.
The cdef is not written by hand: acl_types.h, ops_cann_api.h and the .def files are run
through the C preprocessor with OPS_CDEF defined.

Every api/*.def and ops_*.c is picked up by globbing; the two lists the C code includes
(ops_api_list.h, ops_family_list.h) are generated into native/_build/aclnn_gen/.

`check_cann_headers()` (make check-cann-headers) compiles the same declarations against
the real CANN headers of the toolkit that the device backend would use (native/toolkit.py)
and fails on any difference.
"""
from __future__ import annotations

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from .toolkit import HOME_VARIABLES, INSTALL_PATHS, find_toolkit

HERE = pathlib.Path(__file__).resolve().parent
SRC = HERE / "aclnn"
GEN = HERE / "_build" / "aclnn_gen"
MODULE = "cannops.native._aclnn"



def ggml_include() -> pathlib.Path:
    """ggml.h of the libggml-python wheel: the struct layout and enum values that
    cases/graph.py mirrors (v0.20.2), whatever GGML_HOME the ggml bridge uses."""
    spec = importlib.util.find_spec("libggml")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package `libggml` (libggml-python wheel) is not installed")
    inc = pathlib.Path(list(spec.submodule_search_locations)[0]) / "include"
    if not (inc / "ggml.h").exists():
        raise RuntimeError(f"{inc}: no ggml.h")
    return inc


def api_defs() -> list[pathlib.Path]:
    """The .def files, runtime first (its entries are the ones every family needs)."""
    defs = sorted((SRC / "api").glob("*.def"))
    if not defs:    # an install without its package data: every call's arguments would go unnamed
        raise RuntimeError(f"{SRC / 'api'}: no .def files (the aclnn entry points): this install of ops is incomplete")
    return sorted(defs, key=lambda p: p.stem != "runtime")


def families() -> list[str]:
    return [p.stem[len("ops_"):] for p in sorted(SRC.glob("ops_*.c"))]


@dataclass(frozen=True)
class Handler:
    """One entry of a family's dispatch table (OPS_FAMILY in ops_<family>.c), which
    dispatch.c searches: the node it takes and the function that realises it."""
    op: str          # ggml op without its prefix ("SOLVE_TRI")
    subop: str       # "" (OPS_ANY), or the sub-op of UNARY / GLU ("SILU")
    fn: str          # the handler function
    source: str      # ops_<family>.c
    line: int        # the table entry's line
    fn_line: int     # the line that defines fn (0: not found)

    @property
    def op_key(self) -> str:
        """The case model's Tensor.op_key of the nodes it takes ("UNARY:SILU")."""
        return f"{self.op}:{self.subop}" if self.subop else self.op


_TABLE = re.compile(r"OPS_FAMILY\(\s*(\w+)\s*\)\s*=\s*\{(?P<body>.*?)\bOPS_END\b", re.S)
_ENTRY = re.compile(r"\{\s*GGML_OP_(?P<op>\w+)\s*,\s*(?P<subop>\w+)\s*,\s*(?P<fn>\w+)\s*\}")
_SUBOP = re.compile(r"(?:GGML|OPS)_(?:UNARY|GLU)_OP_(\w+)")


def _blank_comments(text: str) -> str:
    """C comments replaced by spaces, newlines kept: offsets and line numbers stay."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group()), text, flags=re.S)


def handlers() -> list[Handler]:
    """Every entry of every family's dispatch table, read from the sources the build
    compiles (families(): the list ops_family_list.h is generated from)."""
    out = []
    for family in families():
        path = SRC / f"ops_{family}.c"
        text = _blank_comments(path.read_text())
        table = next((m for m in _TABLE.finditer(text) if m[1] == family), None)
        if table is None:
            raise RuntimeError(f"{path.name}: no OPS_FAMILY({family}) table")
        for e in _ENTRY.finditer(text, table.start("body"), table.end("body")):
            sub = "" if e["subop"] == "OPS_ANY" else _SUBOP.fullmatch(e["subop"])
            if sub is None:
                raise RuntimeError(f"{path.name}: sub-op {e['subop']} of {e['fn']} is not a unary or glu op")
            defined = re.search(rf"^(?:static\s+)?int\s+{e['fn']}\s*\(|^\w+\(\s*{e['fn']}\s*,", text, re.M)
            out.append(Handler(e["op"], sub and sub[1], e["fn"], path.name, text.count("\n", 0, e.start()) + 1,
                               text.count("\n", 0, defined.start()) + 1 if defined else 0))
    return out


def entry_points() -> list[str]:
    """Every C symbol declared by the .def files (aclnn ops count twice)."""
    return [e.name for e in def_entries()]


_INCLUDE = re.compile(r'^\s*ACL_INCLUDE\("(?P<header>[^"]+)"\)')
_FN = re.compile(r"^\s*ACL_FN\(\s*(?P<ret>[^,]+?)\s*,\s*(?P<name>\w+)\s*,\s*\((?P<params>.*)\)\s*\)\s*$")
_OP = re.compile(r"^\s*ACLNN_OP\(\s*(?P<name>\w+)\s*,\s*(?P<params>.*)\)\s*$")
_PARAM_NAME = re.compile(r"(\w+)\s*(\[[^\]]*\])?\s*$")


@dataclass(frozen=True)
class EntryPoint:
    header: str
    ret: str
    name: str
    params: str
    source: str = ""        # the .def file that declares it
    operator: bool = False  # one of an ACLNN_OP's two entries (not an ACL_FN)
    line: int = 0           # its line in that file

    def declaration(self, prefix: str = "") -> str:
        return f"{self.ret} {prefix}{self.name}({self.params})"

    def arguments(self) -> str:
        if self.params.strip() in ("", "void"):
            return ""
        return ", ".join(_PARAM_NAME.search(p).group(1) for p in self.params.split(","))


def def_entries() -> list[EntryPoint]:
    """Every entry point of the .def files, under the header its ACL_INCLUDE names (an
    aclnn operator is two: its GetWorkspaceSize and its launch)."""
    out, headers = [], []
    for d in api_defs():
        header = None
        for number, line in enumerate(d.read_text().splitlines(), 1):
            if m := _INCLUDE.match(line):
                header = m["header"]
                headers.append(header)
            elif m := _FN.match(line):
                out.append(EntryPoint(header, m["ret"], m["name"], m["params"], d.name, line=number))
            elif m := _OP.match(line):
                op = m["name"]
                out.append(EntryPoint(header, "aclnnStatus", f"aclnn{op}GetWorkspaceSize",
                                      f"{m['params']}, uint64_t *workspaceSize, aclOpExecutor **executor",
                                      d.name, True, number))
                out.append(EntryPoint(header, "aclnnStatus", f"aclnn{op}",
                                      "void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, "
                                      "aclrtStream stream", d.name, True, number))
            else:
                continue
            if header is None:
                raise RuntimeError(f"{d.name}: an entry point before any ACL_INCLUDE")
    return out


def declared_headers() -> list[str]:
    """Every header an ACL_INCLUDE names, entry points or not (a header a client includes
    for operators the simulator does not serve is still there, and empty)."""
    return list(dict.fromkeys(m["header"] for d in api_defs()
                              for m in map(_INCLUDE.match, d.read_text().splitlines()) if m))



def generate() -> None:
    """Write the include lists and refuse an entry point declared twice."""
    seen: dict[str, str] = {}
    for e in def_entries():
        if e.name in seen:
            raise RuntimeError(f"{e.name} is declared in both {seen[e.name]} and {e.source}: "
                               "declare each entry point once and share it")
        seen[e.name] = e.source
    GEN.mkdir(parents=True, exist_ok=True)
    _write(GEN / "ops_api_list.h", "".join(f'#include "api/{d.name}"\n' for d in api_defs()))
    _write(GEN / "ops_family_list.h", "".join(f"OPS_FAMILY_ENTRY({f})\n" for f in families()))
    _write(GEN / "ops_acl_optional.h",
           "/* ACL entries only the simulated toolkit's clients call (ggml-cann): an older CANN\n"
           " * may lack them without failing the layer's binding */\n"
           f'#define OPS_ACL_OPTIONAL " {" ".join(client_only_entries())} "\n')
    _write(GEN / "ops_trace_shims.h", trace_shims())


# How trace.c records an aclnn parameter, by its type (const and spacing dropped)
_TRACE_KINDS = {"aclTensor *": "tensor", "aclScalar *": "scalar", "aclIntArray *": "int_array",
                "aclTensorList *": "tensor_list", "int64_t": "int", "int": "int", "int32_t": "int",
                "int8_t": "int", "uint64_t": "int", "bool": "bool", "double": "double", "float": "double",
                "aclDataType": "dtype", "char *": "str"}


def trace_shims() -> str:
    """trace.c's shims: per ACLNN_OP, a GetWorkspaceSize that records the call's arguments
    and a launch that records its stream and code, each calling the real entry; and
    ops_trace_swap(), which puts them in the ACL table where it has the real entry."""
    out, swaps = [], []
    for e in def_entries():
        if not e.operator:
            continue
        real = f"ops_trace_real.{e.name}"
        if e.name.endswith("GetWorkspaceSize"):
            op = e.name[: -len("GetWorkspaceSize")]
            body = [f'    struct ops_trace_call *c_ = ops_trace_begin("{op}");']
            for param in e.params.split(",")[:-2]:
                name = _PARAM_NAME.search(param).group(1)
                ctype = " ".join(param[: param.rfind(name)].replace("const", "").split()).replace(" *", " *")
                kind = _TRACE_KINDS.get(ctype, "ptr" if "*" in ctype else None)
                if kind is None:
                    raise RuntimeError(f"{e.source}: {e.name}: no trace for a parameter of type {ctype!r}")
                cast = "(long long) " if kind == "int" else ""
                body.append(f'    ops_trace_{kind}(c_, "{name}", {cast}{name});')
            body += [f"    aclnnStatus rc_ = {real}({e.arguments()});",
                     "    ops_trace_prepared(c_, rc_, workspaceSize, executor);",
                     "    return rc_;"]
        else:
            body = [f"    aclnnStatus rc_ = {real}({e.arguments()});",
                    f'    ops_trace_launched("{e.name}", executor, stream, rc_);',
                    "    return rc_;"]
        out.append(f"static {e.declaration('shim_')} {{\n" + "\n".join(body) + "\n}\n")
        swaps.append(f"    if (t->{e.name}) t->{e.name} = shim_{e.name};")
    return ("".join(out) + "\nstatic void ops_trace_swap(struct ops_acl_api *t) {\n"
            + "\n".join(swaps) + "\n}\n")


def client_only_entries() -> list[str]:
    """The ACL_FN entries the layer itself never calls (`ACL.<name>` in no source of it):
    declared for the simulated toolkit's clients only."""
    called = set(re.findall(r"\bACL\.(\w+)", "".join(p.read_text() for p in SRC.glob("*.c"))))
    return [e.name for e in def_entries() if not e.operator and e.name not in called]


def _write(path: pathlib.Path, text: str) -> None:
    header = "/* generated by native/build_aclnn.py: do not edit */\n"
    if not path.exists() or path.read_text() != header + text:
        path.write_text(header + text)


def _preprocess(text: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "cdef.h"
        src.write_text(text)
        cmd = [os.environ.get("CC", "cc"), "-E", "-P", "-DOPS_CDEF=1",
               "-I", str(SRC), "-I", str(GEN), str(src)]
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


# The fields of ggml's tensor that Python fills; `...` lets the compiler lay it out.
GGML_CDEF = """
enum ggml_type { GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_COUNT, ... };
enum ggml_op { GGML_OP_NONE, GGML_OP_UNARY, GGML_OP_GLU, GGML_OP_COUNT, ... };
enum ggml_unary_op { GGML_UNARY_OP_COUNT, ... };
enum ggml_glu_op { GGML_GLU_OP_COUNT, ... };
struct ggml_tensor {
    enum ggml_type type;
    int64_t ne[4];
    size_t nb[4];
    enum ggml_op op;
    int32_t op_params[16];
    int32_t flags;
    struct ggml_tensor *src[10];
    struct ggml_tensor *view_src;
    size_t view_offs;
    void *data;
    char name[64];
    ...;
};
"""

# What each .def entry becomes in the cdef: a Python-implemented twin for the simulator.
CDEF_MACROS = """
#define ACL_INCLUDE(header)
#define ACL_FN(ret, name, params) extern "Python" ret sim_##name params;
#define ACLNN_OP(name, ...) \\
    extern "Python" aclnnStatus sim_aclnn##name##GetWorkspaceSize(__VA_ARGS__, uint64_t *workspaceSize, aclOpExecutor **executor); \\
    extern "Python" aclnnStatus sim_aclnn##name(void *workspace, uint64_t workspaceSize, aclOpExecutor *executor, aclrtStream stream);
"""

# The entries the simulator has to implement, listed for Python: the native layer and the
# simulated toolkit's embedded module (native/cann_sim_toolkit.py) both carry it.
ENTRY_TABLE = """
#define ACL_INCLUDE(header)
/* The entries the simulator has to implement: ACL functions (kind 0) and aclnn
 * operators (kind 1, by operator name: "Add" stands for aclnnAdd and its
 * GetWorkspaceSize). */
static const struct { const char *name; int kind; } ops_api_entries[] = {
#define ACL_FN(ret, name, params) { #name, 0 },
#define ACLNN_OP(name, ...) { #name, 1 },
#include "ops_api_list.h"
#undef ACL_FN
#undef ACLNN_OP
};

int ops_api_count(void) { return (int) (sizeof ops_api_entries / sizeof ops_api_entries[0]); }

const char *ops_api_entry(int i, int *kind) {
    *kind = ops_api_entries[i].kind;
    return ops_api_entries[i].name;
}
#undef ACL_INCLUDE
"""

# C preamble of the module: the simulator functions cffi defines below it are static,
# so the table can only be bound to them from here.
PREAMBLE = """
#include "ops_cann.h"

#define ACL_INCLUDE(header)
#define ACL_FN(ret, name, params) static ret sim_##name params;
#define ACLNN_OP(name, ...)                                                              \\
    static aclnnStatus sim_aclnn##name##GetWorkspaceSize(__VA_ARGS__, uint64_t *workspaceSize, \\
                                                         aclOpExecutor **executor);      \\
    static aclnnStatus sim_aclnn##name(void *workspace, uint64_t workspaceSize,          \\
                                       aclOpExecutor *executor, aclrtStream stream);
#include "ops_api_list.h"
#undef ACL_FN
#undef ACLNN_OP

void ops_bind_simulator(struct ops_acl_api *t) {
#define ACL_FN(ret, name, params) t->name = sim_##name;
#define ACLNN_OP(name, ...)                                               \\
    t->aclnn##name##GetWorkspaceSize = sim_aclnn##name##GetWorkspaceSize; \\
    t->aclnn##name = sim_aclnn##name;
#include "ops_api_list.h"
#undef ACL_FN
#undef ACLNN_OP
}

#undef ACL_INCLUDE
""" + ENTRY_TABLE


# Declared in ENTRY_TABLE, listed for Python.
PREAMBLE_CDEF = """
int ops_api_count(void);
const char *ops_api_entry(int i, int *kind);
"""


def sim_cdef() -> str:
    """One `extern "Python"` declaration per simulated entry point (sim_<name>)."""
    sims = _preprocess(CDEF_MACROS + '#include "acl_types.h"\n#include "ops_api_list.h"\n')
    # acl_types.h is only there for the types: keep the extern "Python" lines
    return "\n".join(line for line in sims.splitlines() if line.startswith('extern "Python"'))


def cdef_text() -> str:
    decls = _preprocess('#include "acl_types.h"\n#include "ops_cann_api.h"\n')
    return GGML_CDEF + decls + PREAMBLE_CDEF + sim_cdef()


def make_ffi(sources_relative_to: pathlib.Path | None = None):
    """sources_relative_to: the folder of setup.py, to which setuptools wants the C
    sources' paths relative (`pip install .`)."""
    import cffi

    generate()
    ffi = cffi.FFI()
    ffi.cdef(cdef_text())
    sources = sorted(SRC.glob("*.c"))
    if sources_relative_to is not None:
        sources = [p.relative_to(sources_relative_to) for p in sources]
    ffi.set_source(
        MODULE, PREAMBLE,
        sources=[str(p) for p in sources],
        include_dirs=[str(SRC), str(GEN), str(ggml_include())],
        libraries=["dl", "pthread"],
        extra_compile_args=["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                            "-Werror=implicit-function-declaration",
                            "-Werror=incompatible-pointer-types"],
    )
    return ffi


# ---------------------------------------------------------------------------------
# make check-cann-headers

CHECK_MACROS = """
#define ACL_INCLUDE(header)
#define ACL_FN(ret, name, params) static ret (*const ops_check_##name) params = &::name;
#define ACLNN_OP(name, ...)                                                              \\
    static aclnnStatus (*const ops_check_##name##_ws)(__VA_ARGS__, uint64_t *workspaceSize, \\
        aclOpExecutor **executor) = &::aclnn##name##GetWorkspaceSize;                    \\
    static aclnnStatus (*const ops_check_##name)(void *workspace, uint64_t workspaceSize,  \\
        aclOpExecutor *executor, aclrtStream stream) = &::aclnn##name;
"""

# The aclnn return codes (ACLNN_ERR_*): opbase installs them in include/aclnn/opdev.
OP_ERRNO = "aclnn/opdev/op_errno.h"


def _error(message: str) -> int:
    print(f"check-cann-headers: error: {message}", file=sys.stderr)
    return 2


def check_cann_headers(allow_no_toolkit: bool = False) -> int:
    """Compile our declarations against the real CANN headers: every typedef, enum
    value, return code and entry-point signature must match exactly (C++, so that a
    function pointer initialised from a declared function must have its exact type).
    0: they match; 1: they differ; 2: no toolkit, or one without the headers to compare
    with (with allow_no_toolkit, no toolkit at all is 0: a machine without CANN)."""
    toolkit = find_toolkit()
    if toolkit is None:
        looked = ", ".join([f"${v}" for v in HOME_VARIABLES] + list(INSTALL_PATHS))
        if allow_no_toolkit:
            print(f"check-cann-headers: no CANN toolkit ({looked}); skipped as asked")
            return 0
        return _error(f"no CANN toolkit found (looked at {looked})")
    inc = toolkit.include
    print(f"check-cann-headers: toolkit {toolkit.describe()}")
    for header in ("acl/acl.h", OP_ERRNO):
        if not (inc / header).exists():
            return _error(f"{inc / header} not found: the toolkit at {toolkit.describe()} "
                          "lacks the headers to compare with")
    generate()
    headers = declared_headers()
    unit = "\n".join(["#include <type_traits>", *(f"#include <{h}>" for h in headers + [OP_ERRNO]),
                      "#define OPS_CHECK_HEADERS 1", '#include "acl_types.h"', CHECK_MACROS,
                      '#include "ops_api_list.h"', ""])
    with tempfile.TemporaryDirectory() as tmp:
        src = pathlib.Path(tmp) / "check_cann_headers.cpp"
        src.write_text(unit)
        cmd = [os.environ.get("CXX", "c++"), "-std=c++17", "-fsyntax-only",
               "-I", str(inc), "-I", str(SRC), "-I", str(GEN), str(src)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        print(f"check-cann-headers: the declarations in native/aclnn differ from {inc}",
              file=sys.stderr)
        return 1
    misplaced = _check_placement(inc)
    if misplaced:
        sys.stderr.write("".join(misplaced))
        print(f"check-cann-headers: {len(misplaced)} header(s) of {inc} lack entry points "
              "that our .def files (and the simulated toolkit's headers) place there",
              file=sys.stderr)
        return 1
    print(f"check-cann-headers: {len(entry_points())} entry points, their types, headers and "
          f"constants match {inc}")
    return 0


def _check_placement(inc: pathlib.Path) -> list[str]:
    """Each header, included alone, declares the entry points the .def files place under
    its ACL_INCLUDE, with their exact types: a client of the simulated toolkit includes
    just that header (make cann-sim-toolkit generates one per ACL_INCLUDE)."""
    from concurrent.futures import ThreadPoolExecutor

    by_header: dict[str, list] = {}
    for e in def_entries():
        by_header.setdefault(e.header, []).append(e)

    def check(item) -> str:
        header, eps = item
        unit = f"#include <{header}>\n" + "".join(
            f"static {e.ret} (*const ops_check_{e.name})({e.params}) = &::{e.name};\n" for e in eps)
        proc = subprocess.run([os.environ.get("CXX", "c++"), "-std=c++17", "-fsyntax-only",
                               "-I", str(inc), "-x", "c++", "-"], input=unit,
                              capture_output=True, text=True)
        return "" if proc.returncode == 0 else f"{header}:\n{proc.stderr}"
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        return [r for r in pool.map(check, by_header.items()) if r]
