"""cffi (API mode) bridge to libggml: `cannops.native._ggml`.

The declarations are not written by hand: ggml.h, ggml-alloc.h, ggml-backend.h (and
ggml-cpu.h when libggml-cpu is linkable) are run through the C preprocessor with the
attribute / export macros defined away, so the cdef holds the WHOLE public API of the
ggml we compile against (every tensor constructor, the device registry, allocation,
graphs), its structs and enums, and its integer #defines. Functions that the libraries
do not export (declared but not built) are left out so that the module always loads.

Every ggml.h function that takes a context or a graph also gets a guarded twin,
`cannops_guard_<name>`: ggml reports a failed GGML_ASSERT through its abort callback,
from which the twin long-jumps back and returns NULL/0 instead of letting abort() kill
the process; `cannops_guard_message()` then says what failed. Only constructors (plain
C in ggml.c, no locks, no C++ frames) are guarded, never compute.

Which ggml: the `libggml-python` wheel (package `libggml`: include/, lib64/), or
GGML_HOME=<prefix> with include/ and lib/ or lib64/ (e.g. a build with CUDA, Vulkan or
CANN). The module carries an rpath to that library folder, and remembers it
(`cannops_ggml_libdir()`) so that dynamically loaded backends are searched there.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import pathlib
import re
import subprocess
import tempfile

import cffi

HEADERS = ["ggml.h", "ggml-alloc.h", "ggml-backend.h"]
GUARD_PREFIX = "cannops_guard_"


def ggml_prefix() -> tuple[pathlib.Path, pathlib.Path]:
    """(include dir, library dir) of the ggml to build against."""
    home = os.environ.get("GGML_HOME")
    if home:
        prefix = pathlib.Path(home).expanduser().resolve()
    else:
        spec = importlib.util.find_spec("libggml")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("package `libggml` (libggml-python wheel) not installed; "
                               "install it or set GGML_HOME=<prefix of a ggml build>")
        prefix = pathlib.Path(list(spec.submodule_search_locations)[0])
    inc = prefix / "include"
    libs = [prefix / d for d in ("lib64", "lib") if (prefix / d / "libggml.so").exists()
            or any((prefix / d).glob("libggml.so*"))]
    if not (inc / "ggml.h").exists() or not libs:
        raise RuntimeError(f"{prefix}: no include/ggml.h or lib[64]/libggml.so")
    return inc, libs[0]


def _has_lib(libdir: pathlib.Path, name: str) -> bool:
    return any(libdir.glob(f"lib{name}.so*"))


def _preprocess(inc: pathlib.Path, headers: list[str]) -> str:
    """The headers as pure declarations: no system headers, no attributes."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for std in ("stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h", "string.h"):
            (tmp / std).write_text("")
        src = tmp / "all.h"
        src.write_text("".join(f'#include "{h}"\n' for h in headers))
        cmd = [os.environ.get("CC", "cc"), "-E", "-P", "-undef", "-nostdinc",
               "-I", str(tmp), "-I", str(inc),
               "-D__attribute__(x)=", "-D_Noreturn=", "-D__restrict__=", "-D__restrict=",
               "-Drestrict=", "-D__declspec(x)=", str(src)]
        text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    # cffi cannot evaluate sizeof: the few such constants are left for the compiler
    text = re.sub(r"static\s+const\s+(\w+)\s+(\w+)\s*=\s*sizeof\s*\([^;]*\)\s*;",
                  r"static const \1 \2;", text)
    text = re.sub(r"\[([^\]\[]*sizeof[^\]\[]*)\]", "[...]", text)
    text = re.sub(r"\bextern\s+(?!\")", "", text)
    return text


def _int_defines(inc: pathlib.Path, headers: list[str]) -> list[str]:
    """GGML_* integer #defines of the headers, as cffi `#define NAME ...` lines."""
    names = []
    for h in headers:
        for m in re.finditer(r"^\s*#\s*define\s+(GGML_\w+)\s+\(?-?(0x[0-9a-fA-F]+|\d+)\)?\s*(//.*)?$",
                             (inc / h).read_text(), re.M):
            if m.group(1) not in names:
                names.append(m.group(1))
    return [f"#define {n} ..." for n in names]


def _exported(libdir: pathlib.Path, libs: list[str]):
    """A predicate: does one of the libraries export this symbol?"""
    handles = []
    for name in libs:
        path = sorted(libdir.glob(f"lib{name}.so*"))[0]
        handles.append(ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL))

    def has(sym: str) -> bool:
        return any(hasattr(h, sym) for h in handles)
    return has


def _functions(decls: str) -> dict:
    """name -> cffi function type, from cffi's own parse of the declarations."""
    probe = cffi.FFI()
    probe.cdef(decls, override=True)  # C11 repeats typedefs across headers
    return {k.split(" ", 1)[1]: v[0] for k, v in probe._parser._declarations.items()
            if k.startswith("function ")}


def _drop_function(text: str, name: str) -> str:
    """Remove one function declaration (up to its ';') from preprocessed text."""
    pat = re.compile(r"[^;{}]*?\b" + re.escape(name) + r"\s*\([^;{}]*\)\s*;")
    out, n = pat.subn("", text, count=1)
    assert n == 1, f"could not drop {name}"
    return out


GUARD_C = r"""
#include <setjmp.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

static __thread jmp_buf * cannops_jmp = NULL;
static __thread char cannops_msg[2048];

/* ggml calls this on a failed GGML_ASSERT, then abort()s: inside a guarded call we
   jump back to it; anywhere else we keep ggml's behaviour (print, then abort). */
static void cannops_on_abort(const char * msg) {
    if (cannops_jmp) {
        snprintf(cannops_msg, sizeof cannops_msg, "%s", msg);
        longjmp(*cannops_jmp, 1);
    }
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

static void cannops_guard_install(void) {
    ggml_set_abort_callback(cannops_on_abort);
}

static const char * cannops_guard_message(void) { return cannops_msg; }

static const char * cannops_ggml_libdir(void) { return CANNOPS_GGML_LIBDIR; }

#define CANNOPS_GUARD_BEGIN(fail) \
    jmp_buf jb; jmp_buf * prev = cannops_jmp; \
    cannops_msg[0] = 0; \
    if (setjmp(jb)) { cannops_jmp = prev; return fail; } \
    cannops_jmp = &jb;
#define CANNOPS_GUARD_END cannops_jmp = prev;
"""

GUARD_CDEF = """
void cannops_guard_install(void);
const char * cannops_guard_message(void);
const char * cannops_ggml_libdir(void);
"""


def _guards(funcs: dict, ggml_h_names: set[str]) -> tuple[str, str]:
    """C bodies and cdef lines of the guarded twins of ggml.h's context/graph functions."""
    src, cdef = [], []
    for name, tp in sorted(funcs.items()):
        if name not in ggml_h_names or tp.ellipsis:
            continue
        argc = [a.get_c_name() for a in tp.args]
        res = tp.result.get_c_name()
        if not any(c.startswith(("struct ggml_context *", "struct ggml_cgraph *")) for c in argc):
            continue
        if res != "void" and not res.endswith("*"):  # 0 would be ambiguous as a failure mark
            continue
        params = ", ".join(a.get_c_name(f" a{i}") for i, a in enumerate(tp.args)) or "void"
        call = f"{name}({', '.join(f'a{i}' for i in range(len(tp.args)))})"
        decl = tp.result.get_c_name(f" {GUARD_PREFIX}{name}({params})")
        if res == "void":  # the twin returns 1 when ggml aborted, else 0
            decl = f"int {GUARD_PREFIX}{name}({params})"
            body = f"CANNOPS_GUARD_BEGIN(1) {call}; CANNOPS_GUARD_END return 0;"
        else:
            body = f"CANNOPS_GUARD_BEGIN(NULL) {res} r = {call}; CANNOPS_GUARD_END return r;"
        src.append(f"static {decl} {{ {body} }}")
        cdef.append(f"{decl};")
    return "\n".join(src), "\n".join(cdef)


def make_ffi() -> cffi.FFI:
    inc, libdir = ggml_prefix()
    libs = ["ggml", "ggml-base"]
    headers = list(HEADERS)
    if _has_lib(libdir, "ggml-cpu"):  # a backend linked in (not a GGML_BACKEND_DL build)
        headers.append("ggml-cpu.h")
        libs.append("ggml-cpu")
    decls = _preprocess(inc, headers)
    funcs = _functions(decls)
    has = _exported(libdir, libs)
    for name in [n for n in funcs if not has(n)]:
        decls = _drop_function(decls, name)
        del funcs[name]
    ggml_h_names = set(_functions(_preprocess(inc, ["ggml.h"])))
    guard_src, guard_cdef = _guards(funcs, ggml_h_names)

    ffi = cffi.FFI()
    ffi.cdef(decls + "\n" + "\n".join(_int_defines(inc, headers)) + GUARD_CDEF + guard_cdef,
             override=True)
    includes = "".join(f'#include "{h}"\n' for h in headers)
    libdir_c = '"' + str(libdir).replace("\\", "\\\\").replace('"', '\\"') + '"'
    ffi.set_source(
        "cannops.native._ggml",
        includes + f"#define CANNOPS_GGML_LIBDIR {libdir_c}\n" + GUARD_C + guard_src,
        include_dirs=[str(inc)],
        library_dirs=[str(libdir)],
        libraries=libs,
        extra_compile_args=["-O1", "-w"],
        extra_link_args=[f"-Wl,-rpath,{libdir}"],
    )
    return ffi
