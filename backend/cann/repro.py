"""The standalone C program of `ops repro` on ops' CANN layer: the run's ACL runtime and
aclnn calls, as the simulator recorded them for a reproducer (sim/trace.py, `repro`), made
again in C against a CANN toolkit: the same allocations, the same uploads (the bytes each
host-to-device copy took), one block per aclnn call (descriptors, GetWorkspaceSize, the
workspace, the launch on the stream), the same waits; each download of the last case
compared byte for byte with the bytes the run downloaded."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from cannops.backend.repro import Step, c_string, comment, make_path, makefile
from cannops.backend.ggml.recorder import c_float

D2H, H2D, D2D = 2, 1, 3          # aclrtMemcpyKind
C_KEYWORDS = {"auto", "case", "char", "const", "default", "do", "double", "else", "enum", "float", "for", "if",
              "int", "long", "out_", "register", "return", "short", "signed", "sizeof", "static", "struct",
              "switch", "union", "unsigned", "void", "while", "stream"}
# a scalar's C type, by aclDataType name (the half types as their bits)
SCALAR_TYPES = {"FLOAT": "float", "DOUBLE": "double", "FLOAT16": "uint16_t", "BFLOAT16": "uint16_t",
                "INT8": "int8_t", "UINT8": "uint8_t", "INT16": "int16_t", "UINT16": "uint16_t", "INT32": "int32_t",
                "UINT32": "uint32_t", "INT64": "int64_t", "UINT64": "uint64_t", "BOOL": "bool"}
VALUE_TYPES = {"f32": 0, "f16": 1, "bf16": 2, "i32": 3}   # check_output's `type`
SIM_RECORDER = "the simulator (backend/cann/sim/trace.py)"
NATIVE_RECORDER = "ops' CANN layer itself (native/aclnn/trace.c)"


@dataclass
class CallProgram:
    """A case run recorded on the simulator: its calls, the bytes its copies moved, and its
    outputs (values, and the bytes the run downloaded of each checked node's base)."""
    calls: list[dict]
    blobs: list[bytes]
    outputs: dict[int, np.ndarray]
    raw: dict[int, np.ndarray]
    checked: dict[int, str]        # node index -> its base's device address (hex)
    leaves: dict                   # (the uploads come from the blobs)
    error: str = ""                # the run raised (a refused call): no outputs
    recorder: str = SIM_RECORDER   # who recorded the calls

    @classmethod
    def of(cls, rec, outputs: dict, bases: dict[int, int], check: list[int], error: str = "") -> "CallProgram":
        downloads = {int(c["args"]["src"], 16): rec.blobs[c["data"]] for c in rec.calls
                     if c["call"] == "aclrtMemcpy" and c["args"].get("kind") == D2H and "data" in c}
        raw = {i: np.frombuffer(downloads[bases[i]], np.uint8).copy() for i in bases}
        return cls(rec.calls, rec.blobs, outputs, raw, {i: hex(a) for i, a in bases.items()}, {}, error,
                   getattr(rec, "recorder", SIM_RECORDER))


class NativeRecorder:
    """The layer's own recording for a reproducer (native/aclnn/trace.c), used as the
    simulator's (sim/trace.py) is: start, then stop gives the calls and the bytes each copy
    moved (`data`: an index into `blobs`), in the simulator's record form."""
    ON = False

    def start(self, repro: bool = True) -> None:
        from cannops.native._aclnn import lib
        lib.ops_cann_trace_start_repro() if repro else lib.ops_cann_trace_start()
        self.ON = True

    def stop(self) -> SimpleNamespace:
        import json
        from cannops.backend.base import DeviceError
        from cannops.native._aclnn import ffi, lib
        text = ffi.string(lib.ops_cann_trace_stop()).decode(errors="replace")
        self.ON = False
        try:
            calls = json.loads(text)
        except ValueError:
            raise DeviceError("the layer's recording of the run was cut short (out of memory): "
                              "no reproducer can be written from it") from None
        return SimpleNamespace(calls=calls, recorder=NATIVE_RECORDER, blobs=[_blob(i) for i in range(
            1 + max((c["data"] for c in calls if "data" in c), default=-1))])


def _blob(i: int) -> bytes:
    from cannops.native._aclnn import ffi, lib
    data = ffi.new("const unsigned char **")
    size = lib.ops_cann_trace_blob(i, data)
    return bytes(ffi.buffer(data[0], size)) if size else b""


PRELUDE = r"""#include "acl/acl.h"
#include "aclnn/acl_meta.h"
%(headers)s
#include "repro.h"

#include <stdbool.h>

static aclrtStream stream;
static void *pending[1 << 14];   /* workspaces, given back at the next wait */
static int n_pending;

/* A return code other than the recorded one: the device does not behave as it did. */
static void check_rc(const char *what, int rc, int recorded) {
    const char *msg = rc ? aclGetRecentErrMsg() : NULL;
    if (rc == recorded) {
        if (rc) printf("  %s returned %d, as in the run: %s\n", what, rc, msg ? msg : "");
        return;
    }
    printf("NOT reproduced: %s returned %d, recorded %d%s%s\n", what, rc, recorded, msg ? ": " : "", msg ? msg : "");
    exit(1);
}

static aclTensor *tensor(aclDataType dtype, uint64_t n, const int64_t *ne, const int64_t *strides, int64_t offset,
                         aclFormat format, uint64_t n_storage, const int64_t *storage, void *data) {
    aclTensor *t = aclCreateTensor(ne, n, dtype, strides, offset, format, storage, n_storage, data);
    if (!t) check_rc("aclCreateTensor", -1, 0);
    return t;
}

static void *workspace(uint64_t size) {
    void *p = NULL;
    if (!size) return NULL;
    check_rc("aclrtMalloc (workspace)", aclrtMalloc(&p, size, ACL_MEM_MALLOC_HUGE_FIRST), 0);
    pending[n_pending++] = p;
    return p;
}

static void synchronize(void) {
    check_rc("aclrtSynchronizeStream", aclrtSynchronizeStream(stream), 0);
    while (n_pending) aclrtFree(pending[--n_pending]);
}

static void upload(void *dst, size_t dest_max, const char *path, size_t count) {
    void *host = repro_read_exact(path, count);
    check_rc("aclrtMemcpy (host to device)", aclrtMemcpy(dst, dest_max, host, count, ACL_MEMCPY_HOST_TO_DEVICE), 0);
    free(host);
}

static unsigned char *download(const void *src, size_t count) {
    unsigned char *host = malloc(count ? count : 1);
    check_rc("aclrtMemcpy (device to host)",
             aclrtMemcpy(host, count, src, count, ACL_MEMCPY_DEVICE_TO_HOST), 0);
    return host;
}

/* A download the last case makes (a guard region, a tensor read back): its bytes must be
 * the run's; said only when they are not. */
static inline int same_download(const char *what, const void *src, size_t count, const char *stored) {
    unsigned char *got = download(src, count);
    int same = repro_same_bytes(what, got, count, stored, 1);
    free(got);
    return same;
}

/* A checked output's download: its bytes against the stored device output, its values
 * (type 0 f32, 1 f16, 2 bf16, 3 i32; ggml's ne and nb from `offset`) against the reference. */
static inline int check_output(const char *what, const void *src, size_t count, const char *stored, const char *reference,
                        double threshold, int type, size_t offset, const int64_t *ne, const size_t *nb) {
    unsigned char *got = download(src, count);
    int same = repro_same_bytes(what, got, count, stored, 0);
    size_t n = (size_t) (ne[0] * ne[1] * ne[2] * ne[3]), k = 0;
    float *v = malloc((n ? n : 1) * sizeof(float));
    for (int64_t i3 = 0; i3 < ne[3]; i3++)
    for (int64_t i2 = 0; i2 < ne[2]; i2++)
    for (int64_t i1 = 0; i1 < ne[1]; i1++)
    for (int64_t i0 = 0; i0 < ne[0]; i0++, k++) {
        const unsigned char *p = got + offset + i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
        uint16_t h;
        int32_t i;
        switch (type) {
            case 0: memcpy(&v[k], p, 4); break;
            case 1: memcpy(&h, p, 2); v[k] = repro_f16(h); break;
            case 2: memcpy(&h, p, 2); v[k] = repro_bf16(h); break;
            default: memcpy(&i, p, 4); v[k] = (float) i; break;
        }
    }
    if (type >= 0) repro_vs_reference(what, v, n, reference, threshold);
    free(v);
    free(got);
    return same;
}
"""

MAIN = r"""
int main(void) {
    check_rc("aclInit", aclInit(NULL), 0);
    check_rc("aclrtSetDevice", aclrtSetDevice(DEVICE_ID), 0);
    check_rc("aclrtCreateStream", aclrtCreateStream(&stream), 0);
    printf("device %d: %s\n", DEVICE_ID, aclrtGetSocName());
    int same = 1;
%(calls)s    aclrtDestroyStream(stream);
    aclrtResetDevice(DEVICE_ID);
    aclFinalize();
    printf(same ? "reproduced: every call returned what it returned in the run, and the outputs downloaded are "
                  "the stored ones, byte for byte\n"
                : "NOT reproduced: the device's outputs differ from the stored ones\n");
    return same ? 0 : 1;
}
"""


@functools.cache
def _operators() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """aclnnX -> (its header, its GetWorkspaceSize parameters (type, name) without the
    last two), from the .def files."""
    from cannops.native.build_aclnn import def_entries
    out = {}
    for e in def_entries():
        if e.operator and e.name.endswith("GetWorkspaceSize"):
            params = [p.strip() for p in e.params.split(",")][:-2]
            out[e.name[:-len("GetWorkspaceSize")]] = (e.header, [_split(p) for p in params])
    return out


def _split(param: str) -> tuple[str, str]:
    head, _, name = param.rpartition(" ")
    while name.startswith("*"):
        head, name = head + " *", name[1:]
    return head.strip(), name


class _Writer:
    """Turns the records of the cases, in order, into C: device blocks as variables m<k>,
    host data as files, one C block per aclnn call."""

    def __init__(self):
        self.blocks: list[tuple[int, int, str]] = []     # live (start, end, variable)
        self.n_blocks = 0
        self.headers: set[str] = set()
        self.files: dict[str, bytes] = {}

    def addr(self, text) -> str:
        if text is None:
            return "NULL"
        a = int(text, 16)
        for start, end, var in self.blocks:
            if start <= a < end or a == start:
                return var if a == start else f"(char *) {var} + {a - start}"
        if a == 0:
            return "NULL"
        raise ValueError(f"address {text} is in no allocation the run made while recorded")

    def case(self, k: int, step: Step, prog: CallProgram, compared: bool) -> str:
        self.where = {c.where: c for c in step.checked}
        lines = [f"/* case {k}: {'compared' if compared else 'run before the last'} */", comment(step.name),
                 f"static int case_{k}(void) {{", "    int same = 1;"]
        for n, call in enumerate(prog.calls, 1):
            lines += ["    " + x for x in self.call(n, call, step, prog, compared)]
        lines += ["    return same;", "}", ""]
        return "\n".join(lines)

    def call(self, n: int, call: dict, step: Step, prog: CallProgram, compared: bool) -> list[str]:
        name = call["call"]
        head = [comment(f"#{n} {_summary(call)}")]
        if "tolerated" in call:
            head.append(comment("the simulator let it off: " + ", ".join(call["tolerated"])))
        if name.startswith("aclnn") and call.get("phase") != "launch":
            return head + self.operator(name, call)
        self.n = n
        emit = getattr(self, "_" + name, None)
        if emit is None or call.get("error"):
            return head[:1] + [comment(f"{name}: not made again ({call.get('error') or 'nothing to reproduce'})")]
        return head + emit(call["args"], call, step, prog, compared)

    # --- runtime calls ---
    def _aclrtMalloc(self, a, call, *_):
        var = f"m{self.n_blocks}"
        self.n_blocks += 1
        start = int(call["ptr"], 16)
        self.blocks.append((start, start + max(int(a["size"]), 1), var))
        return [f"check_rc(\"aclrtMalloc\", aclrtMalloc(&{var}, {a['size']}, (aclrtMemMallocPolicy) {a['policy']}), "
                f"{call['rc']});"]

    def _aclrtFree(self, a, call, *_):
        var = self.addr(a["devPtr"])
        self.blocks = [b for b in self.blocks if b[2] != var]
        return [f"check_rc(\"aclrtFree\", aclrtFree({var}), {call['rc']});"]

    def _aclrtMemset(self, a, call, *_):
        return [f"check_rc(\"aclrtMemset\", aclrtMemset({self.addr(a['devPtr'])}, {a['maxCount']}, {a['value']}, "
                f"{a['count']}), {call['rc']});"]

    def _aclrtMemsetAsync(self, a, call, *_):
        return [f"check_rc(\"aclrtMemsetAsync\", aclrtMemsetAsync({self.addr(a['devPtr'])}, {a['maxCount']}, "
                f"{a['value']}, {a['count']}, stream), {call['rc']});"]

    def _aclrtSynchronizeStream(self, a, call, *_):
        return ["synchronize();"]

    def _aclrtSynchronizeDevice(self, a, call, *_):
        return ["check_rc(\"aclrtSynchronizeDevice\", aclrtSynchronizeDevice(), 0);", "synchronize();"]

    def _aclrtMemcpy(self, a, call, step, prog, compared):
        kind, count = int(a["kind"]), int(a["count"])
        if kind == D2D or not count:
            return [f"check_rc(\"aclrtMemcpy\", aclrtMemcpy({self.addr(a['dst'])}, {a['destMax']}, "
                    f"{self.addr(a['src'])}, {count}, (aclrtMemcpyKind) {kind}), {call['rc']});"]
        if kind == H2D:
            return [f"upload({self.addr(a['dst'])}, {a['destMax']}, {c_string(self.blob(step, prog, call))}, {count});"]
        src = self.addr(a["src"])
        if not compared:
            return [f"free(download({src}, {count}));"]
        c = self.where.get(a["src"])
        if c is None:
            return [f"same = same_download({c_string(f'the download of call #{self.n}')}, {src}, {count}, "
                    f"{c_string(self.blob(step, prog, call))}) && same;"]
        return [f"same = check_output({c_string(c.label)}, {src}, {count}, {c_string(c.device)}, "
                f"{c_string(c.reference)}, {c.threshold!r}, {VALUE_TYPES.get(c.type, -1)}, {c.offset},",
                f"                    (int64_t[]){{{', '.join(map(str, c.ne))}}}, "
                f"(size_t[]){{{', '.join(map(str, c.nb))}}}) && same;"]

    def _aclrtMemcpyAsync(self, a, call, step, prog, compared):
        if int(a["kind"]) != D2D:
            raise ValueError("ops repro: an aclrtMemcpyAsync to or from the host is not made again yet")
        return [f"check_rc(\"aclrtMemcpyAsync\", aclrtMemcpyAsync({self.addr(a['dst'])}, {a['destMax']}, "
                f"{self.addr(a['src'])}, {a['count']}, ACL_MEMCPY_DEVICE_TO_DEVICE, stream), {call['rc']});"]

    def blob(self, step: Step, prog: CallProgram, call: dict) -> str:
        path = f"{step.folder}/copy_{call['data']}.bin"
        self.files[path] = prog.blobs[call["data"]]
        return path

    # --- aclnn calls ---
    def operator(self, name: str, call: dict) -> list[str]:
        header, params = _operators()[name]
        self.headers.add(header)
        body: list[str] = []
        made: list[tuple[str, str]] = []   # (destroy function, variable)
        args = []
        for ctype, pname in params:
            expr = self.argument(ctype, _c_name(pname), call["args"].get(pname), body, made)
            args.append(expr)
        rc = call.get("rc", 0)
        body += ["uint64_t ws = 0;", "aclOpExecutor *executor = NULL;",
                 f"check_rc(\"{name}GetWorkspaceSize\", {name}GetWorkspaceSize({', '.join(args + ['&ws', '&executor'])}), "
                 f"{rc});"]
        if rc == 0:
            body.append(f"check_rc(\"{name}\", {name}(workspace(ws), ws, executor, stream), 0);")
        body += [f"{destroy}({var});" for destroy, var in made]
        return ["{"] + ["    " + x for x in body] + ["}"]

    def argument(self, ctype: str, var: str, desc, body: list[str], made: list) -> str:
        base = ctype.replace("const", "").replace("*", "").strip()
        if desc is None and "*" in ctype:
            return "NULL"
        if base == "aclTensor":
            body.append(f"aclTensor *{var} = {self.tensor(desc)};")
            made.append(("aclDestroyTensor", var))
        elif base == "aclTensorList":
            items = [self.tensor(t) for t in desc["list"]]
            body.append(f"aclTensorList *{var} = aclCreateTensorList((const aclTensor *[]){{{', '.join(items)}}}, "
                        f"{len(items)});   /* the list owns its tensors */")
            made.append(("aclDestroyTensorList", var))
        elif base == "aclScalar":
            body.append(f"aclScalar *{var} = aclCreateScalar({_scalar(desc)}, ACL_{_dtype(desc['dtype'])});")
            made.append(("aclDestroyScalar", var))
        elif base == "aclIntArray":
            ints = desc["ints"]
            body.append(f"aclIntArray *{var} = aclCreateIntArray((int64_t[]){{{', '.join(map(str, ints or [0]))}}}, "
                        f"{len(ints)});")
            made.append(("aclDestroyIntArray", var))
        elif base == "char":
            return c_string(desc)
        elif base == "aclDataType":
            return "ACL_" + _dtype(desc)
        elif base == "bool":
            return "true" if desc else "false"
        elif base in ("double", "float"):
            return c_float(float(desc), base == "float")
        elif base in ("int64_t", "int32_t", "int8_t", "uint64_t", "uint32_t", "int"):
            return str(int(desc))
        else:
            raise ValueError(f"ops repro: an argument of type {ctype} is not written yet")
        return var

    def tensor(self, t: dict) -> str:
        if "dead" in t:
            raise ValueError(f"ops repro: a tensor destroyed before its call ({t['dead']})")
        ne, strides, storage = t["ne"], t["strides"], t.get("storage", [])
        fmt = "ACL_FORMAT_" + t.get("format", "ND")
        return (f"tensor(ACL_{_dtype(t['dtype'])}, {len(ne)}, {_ints(ne)}, {_ints(strides)}, {t.get('offset', 0)}, "
                f"{fmt}, {len(storage)}, {_ints(storage)}, {self.addr(t['addr'])})")


def _ints(values) -> str:
    return f"(int64_t[]){{{', '.join(map(str, values))}}}" if values else "NULL"


def _dtype(name: str) -> str:
    return {"BFLOAT16": "BF16", "UNDEFINED": "DT_UNDEFINED"}.get(name, name)


def _c_name(name: str) -> str:
    return name + "_" if name in C_KEYWORDS else name


def _scalar(desc: dict) -> str:
    ctype, value = SCALAR_TYPES[desc["dtype"]], desc["scalar"]
    if desc["dtype"] in ("FLOAT16", "BFLOAT16"):
        import ml_dtypes
        half = np.float16 if desc["dtype"] == "FLOAT16" else ml_dtypes.bfloat16
        value = hex(int(np.array(value, half).view(np.uint16)))
    elif ctype in ("float", "double"):
        value = c_float(float(value), ctype == "float")
    elif ctype == "bool":
        value = "true" if value else "false"
    else:
        value = str(int(value))
    return f"&({ctype}){{{value}}}"


def _summary(call: dict) -> str:
    from cannops.backend.trace import call_text
    return call_text(call, site=False)   # the same program whoever recorded the calls


def program(steps: list[Step], programs: list[CallProgram], title: str, device_id: int = 0) -> tuple[str, dict]:
    """repro.c and the host data files it reads: one function a case, run in order."""
    w = _Writer()
    cases = [w.case(k, step, prog, k == len(steps)) for k, (step, prog) in enumerate(zip(steps, programs), 1)]
    headers = "\n".join(f'#include "{h}"' for h in sorted(w.headers))
    blocks = f"static void {', '.join('*m%d' % i for i in range(w.n_blocks))};" if w.n_blocks else ""
    calls = "".join(f"    same = case_{k}() && same;\n" for k in range(1, len(steps) + 1))
    calls += "    synchronize();\n" + "".join(f"    aclrtFree({var});   /* still held by the layer's pool */\n"
                                         for _, _, var in w.blocks)
    text = "\n".join([comment(title), "", PRELUDE.replace("%(headers)s", headers), f"#define DEVICE_ID {device_id}",
                      "/* the device blocks the run allocated, in order */", blocks, "", *cases,
                      MAIN.replace("%(calls)s", calls)])
    return text, w.files


def build_files(title: str, env: dict[str, str]) -> str:
    """The Makefile: ASCEND_TOOLKIT_HOME (include/, lib64/), as CANN's set_env.sh sets it."""
    from cannops.native.toolkit import OPAPI_LIBRARIES
    split = " ".join(name[len("lib"):-len(".so")] for name in OPAPI_LIBRARIES)
    home = _toolkit_home()
    variables = ["# the CANN toolkit (a real one, or the simulated one: `make cann-sim-toolkit` in ops' checkout,",
                 "# `python -m cannops.backend.cann.sim.toolkit DIR` where ops is installed)",
                 f"ASCEND_TOOLKIT_HOME ?= {make_path(home, 'ASCEND_TOOLKIT_HOME') if home else ''}",
                 "# the aclnn operators: one library per operator repository in newer CANN, else libopapi",
                 f"OPAPI_SPLIT := $(wildcard $(patsubst %,$(ASCEND_TOOLKIT_HOME)/lib64/lib%.so,{split}))",
                 "OPAPI_LIBS ?= $(if $(OPAPI_SPLIT),$(patsubst $(ASCEND_TOOLKIT_HOME)/lib64/lib%.so,-l%,$(OPAPI_SPLIT)),"
                 "-lopapi)"]
    build = ("@test -f $(ASCEND_TOOLKIT_HOME)/include/acl/acl.h || { echo 'repro: no CANN toolkit at "
             "ASCEND_TOOLKIT_HOME=$(ASCEND_TOOLKIT_HOME): source its set_env.sh, or give make "
             "ASCEND_TOOLKIT_HOME=DIR (python -m cannops.backend.cann.sim.toolkit DIR writes the simulated one)' >&2; "
             "exit 2; }\n"
             "\t$(CC) $(CFLAGS) -I$(ASCEND_TOOLKIT_HOME)/include -o $@ repro.c -L$(ASCEND_TOOLKIT_HOME)/lib64 "
             "-Wl,-rpath,$(ASCEND_TOOLKIT_HOME)/lib64 -lascendcl -lnnopbase $(OPAPI_LIBS) -lm")
    return makefile(title, variables, build, env)


def _toolkit_home() -> str:
    """The toolkit the Makefile builds against by default: ASCEND_TOOLKIT_HOME as ops ran,
    else the simulated one of ops' checkout (`make cann-sim-toolkit`) where there is one,
    else none (an installed ops: the Makefile asks for one)."""
    import os
    import pathlib
    home = os.environ.get("ASCEND_TOOLKIT_HOME")
    if home:
        return home
    checkout = pathlib.Path(__file__).resolve().parents[2] / "build" / "cann-sim-toolkit"
    return str(checkout) if checkout.is_dir() else ""


def versions(simulated: bool, soc: str) -> dict:
    """The CANN the outputs came from: the simulator (ops' own, at this version) or a toolkit."""
    import os
    v = {"soc": soc}
    if simulated:
        v["cann"] = "CANN-SIM, ops' CANN simulator (backend/cann/sim), at ops' version above"
    else:
        home = os.environ.get("ASCEND_TOOLKIT_HOME", "")
        v["cann"] = f"CANN toolkit at {home or 'unknown'}"
    return v
