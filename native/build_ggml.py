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
CANN). The module carries an rpath to that library folder (and, for the wheel, to the
wheel beside an installed module); `cannops_ggml_libdir()` asks the loader which folder
libggml came from, so that dynamically loaded backends are searched there.
"""
from __future__ import annotations

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
    if not prefix.is_dir():
        raise RuntimeError(f"GGML_HOME={prefix}: no such directory")
    missing = [f"include/{h}" for h in HEADERS if not (inc / h).exists()]
    if not libs:
        missing.append("lib/libggml.so (or lib64/)")
    else:
        missing += [f"{libs[0].name}/lib{n}.so" for n in ("ggml-base",) if not _has_lib(libs[0], n)]
    if missing:
        raise RuntimeError(f"{prefix} is not a ggml install prefix: missing {', '.join(missing)}")
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


# the libraries in load order: each one's dependencies before it, so that a plain install
# prefix (no rpath in the libraries, no LD_LIBRARY_PATH) loads from full paths alone
LOAD_ORDER = {"ggml-base": 0, "ggml": 2}


def _lib_path(libdir: pathlib.Path, name: str) -> pathlib.Path:
    return sorted(libdir.glob(f"lib{name}.so*"))[0]


def _functions(decls: str, libdir: pathlib.Path, libs: list[str]) -> dict:
    """name -> cffi function type of every function the declarations name that one of the
    libraries exports: cffi's ABI mode (dlopen) over the declarations, public API only."""
    probe = cffi.FFI()
    # C11 repeats typedefs across headers; the ABI probe never lays out a struct, so the
    # array sizes left to the compiler ([...]) may be any size here
    probe.cdef(decls.replace("[...]", "[1]"), override=True)
    handles = []
    for name in sorted(libs, key=lambda n: LOAD_ORDER.get(n, 1)):
        try:
            handles.append(probe.dlopen(str(_lib_path(libdir, name)), probe.RTLD_NOW | probe.RTLD_GLOBAL))
        except OSError as e:
            raise RuntimeError(f"cannot load lib{name} from {libdir}: {e}") from None
    found = {}
    for sym in dir(handles[0]):
        for h in handles:
            try:
                value = getattr(h, sym)
            except AttributeError:   # declared, not exported by this library
                continue
            except NotImplementedError:   # a constant cffi leaves to the compiler (sizeof)
                break
            if isinstance(value, probe.CData) and probe.typeof(value).kind == "function":
                found[sym] = probe.typeof(value)
            break
    return found


def _declared(decls: str) -> set[str]:
    """Every name that the declarations declare (functions, variables, enum constants)."""
    probe = cffi.FFI()
    probe.cdef(decls, override=True)
    return set(dir(probe.dlopen(None)))


def _drop_function(text: str, name: str) -> str:
    """Remove one function declaration (up to its ';') from preprocessed text."""
    pat = re.compile(r"[^;{}]*?\b" + re.escape(name) + r"\s*\([^;{}]*\)\s*;")
    out, n = pat.subn("", text, count=1)
    assert n == 1, f"could not drop {name}"
    return out


GUARD_C = r"""
#include <dlfcn.h>
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

/* The folder of the libggml this module loaded (where its dynamically loaded backends
   are searched): asked of the loader, as an installed module may find its ggml elsewhere
   than where it was built (pip's build environment is gone by then). */
static const char * cannops_ggml_libdir(void) {
    static char dir[4096];
    Dl_info info;
    if (!dir[0] && dladdr((void *) ggml_backend_dev_count, &info) && info.dli_fname) {
        char * real = realpath(info.dli_fname, NULL);
        snprintf(dir, sizeof dir, "%s", real ? real : info.dli_fname);
        free(real);
        char * slash = strrchr(dir, '/');
        if (slash) *slash = 0;
    }
    return dir[0] ? dir : CANNOPS_GGML_LIBDIR;
}

#define CANNOPS_GUARD_BEGIN(fail) \
    jmp_buf cannops_jb; jmp_buf * cannops_prev = cannops_jmp; \
    cannops_msg[0] = 0; \
    if (setjmp(cannops_jb)) { cannops_jmp = cannops_prev; return fail; } \
    cannops_jmp = &cannops_jb;
#define CANNOPS_GUARD_END cannops_jmp = cannops_prev;
"""

GUARD_CDEF = """
void cannops_guard_install(void);
const char * cannops_guard_message(void);
const char * cannops_ggml_libdir(void);
"""


def _split_params(text: str) -> list[str]:
    """A parameter list's top-level items (commas inside parentheses belong to an item)."""
    items, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            items.append(cur.strip())
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    items.append(cur.strip())
    return [i for i in items if i and i != "void"]


def _param_name(param: str) -> str | None:
    """The name a parameter declaration gives (ggml's headers name every parameter)."""
    m = re.search(r"\(\s*\*\s*(\w+)\s*\)", param)   # a function pointer: (*name)(...)
    if m:
        return m.group(1)
    m = re.search(r"(\w+)\s*(\[[^\]]*\])?$", param)
    return m.group(1) if m and m.group(1) not in ("const", "int", "char", "void") else None


def _declaration(decls: str, name: str) -> tuple[str, str] | None:
    """(result type, parameter list) of a function, as the header writes them."""
    m = re.search(r"\b" + re.escape(name) + r"\s*\(", decls)
    if m is None:
        return None
    start = max(decls.rfind(c, 0, m.start()) for c in ";{}") + 1   # after the previous declaration
    depth, i = 1, m.end()
    while depth:
        depth += (decls[i] == "(") - (decls[i] == ")")
        i += 1
    return " ".join(decls[start:m.start()].split()), " ".join(decls[m.end():i - 1].split())


def _guards(funcs: dict, ggml_h_names: set[str], decls: str) -> tuple[str, str]:
    """C bodies and cdef lines of the guarded twins of ggml.h's context/graph functions.
    Which functions: from cffi's types (funcs); their declarations: the header's own text,
    so that every qualifier is kept."""
    src, cdef = [], []
    for name, tp in sorted(funcs.items()):
        if name not in ggml_h_names or tp.ellipsis:
            continue
        found = _declaration(decls, name)
        if found is None:
            continue
        res, plist = found
        params = _split_params(plist)
        names = [_param_name(p) for p in params]
        if len(params) != len(tp.args) or None in names:
            continue
        if not any(p.startswith(("struct ggml_context *", "struct ggml_cgraph *")) for p in params):
            continue
        if res != "void" and not res.endswith("*"):  # 0 would be ambiguous as a failure mark
            continue
        call = f"{name}({', '.join(names)})"
        plist = ", ".join(params) or "void"
        if res == "void":  # the twin returns 1 when ggml aborted, else 0
            decl = f"int {GUARD_PREFIX}{name}({plist})"
            body = f"CANNOPS_GUARD_BEGIN(1) {call}; CANNOPS_GUARD_END return 0;"
        else:
            decl = f"{res} {GUARD_PREFIX}{name}({plist})"
            # the header's parameter names are kept: the locals are prefixed not to clash
            body = (f"CANNOPS_GUARD_BEGIN(NULL) {res} cannops_r = {call}; CANNOPS_GUARD_END "
                    f"return cannops_r;")
        src.append(f"static {decl} {{ {body} }}")
        cdef.append(f"{decl};")
    return "\n".join(src), "\n".join(cdef)


def _rpath(libdir: pathlib.Path) -> list[str]:
    """Where the module finds libggml at run time: the folder it was built against, and for
    the libggml-python wheel also that wheel beside the installed module (site-packages/
    cannops/native/ -> site-packages/libggml/), which `pip install .` needs: it builds
    against a copy of the wheel in a build environment it deletes afterwards."""
    if os.environ.get("GGML_HOME"):
        return [str(libdir)]
    return [str(libdir), f"$ORIGIN/../../libggml/{libdir.name}"]


def make_ffi() -> cffi.FFI:
    inc, libdir = ggml_prefix()
    libs = ["ggml", "ggml-base"]
    headers = list(HEADERS)
    if _has_lib(libdir, "ggml-cpu"):  # a backend linked in (not a GGML_BACKEND_DL build)
        headers.append("ggml-cpu.h")
        libs.append("ggml-cpu")
    decls = _preprocess(inc, headers)
    funcs = _functions(decls, libdir, libs)
    for name in sorted(_declared(decls) - set(funcs)):
        if re.search(r"\b" + re.escape(name) + r"\s*\(", decls):   # a function not exported
            decls = _drop_function(decls, name)
    ggml_h_names = _declared(_preprocess(inc, ["ggml.h"])) & set(funcs)
    guard_src, guard_cdef = _guards(funcs, ggml_h_names, decls)

    ffi = cffi.FFI()
    ffi.cdef(decls + "\n" + "\n".join(_int_defines(inc, headers)) + GUARD_CDEF + guard_cdef,
             override=True)
    includes = "".join(f'#include "{h}"\n' for h in headers)
    libdir_c = '"' + str(libdir).replace("\\", "\\\\").replace('"', '\\"') + '"'
    ffi.set_source(
        "cannops.native._ggml",
        "#define _GNU_SOURCE\n" + includes + f"#define CANNOPS_GGML_LIBDIR {libdir_c}\n"
        + GUARD_C + guard_src,
        include_dirs=[str(inc)],
        library_dirs=[str(libdir)],
        libraries=libs + ["dl"],
        extra_compile_args=["-O1", "-w"],
        # DT_RPATH (not RUNPATH): it also serves the libraries' own dependencies
        # (libggml -> libggml-base, libggml-cpu) on a prefix installed without an rpath
        extra_link_args=["-Wl,--disable-new-dtags", f"-Wl,-rpath,{':'.join(_rpath(libdir))}"],
    )
    return ffi
