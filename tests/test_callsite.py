"""Call sites (docs/trace-and-blame.md): the return addresses the simulated toolkit takes at
its entry points, resolved by addr2line against a program compiled here with -g; the
records of a toolkit client carrying them; their form on a trace line and in a blame."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import textwrap

import pytest

from cannops.backend import callsite
from cannops.backend.trace import blame, call_text
from tests.test_tbo_trace import CLIENT, ops

needs_cc = pytest.mark.skipif(not (shutil.which("cc") and shutil.which("addr2line")), reason="no cc / addr2line")

# where() prints its caller's return address as the toolkit does (dladdr: object, offset);
# helper() is inlined into main, so the address has two frames, the helper's innermost
WHERE = textwrap.dedent(r"""
    #define _GNU_SOURCE
    #include <dlfcn.h>
    #include <stdio.h>
    static void __attribute__((noinline)) where(void) {
        Dl_info i;
        void *ra = __builtin_return_address(0);
        dladdr(ra, &i);
        printf("%s\t%lx\n", i.dli_fname, (unsigned long)((char *)ra - (char *)i.dli_fbase));
    }
    static inline __attribute__((always_inline)) void ggml_cann_helper(int k) {
        if (k) where();   /* CALL */
    }
    int main(int argc, char **argv) {
        (void) argv;
        ggml_cann_helper(argc);   /* HELPER */
        return 0;
    }
""")


def _line(source: str, mark: str) -> int:
    return next(i for i, s in enumerate(source.splitlines(), 1) if mark in s)


@needs_cc
@pytest.mark.parametrize("resolver", ["llvm-symbolizer", "addr2line"])
def test_a_return_address_resolves_to_its_line_and_inlined_caller(tmp_path, monkeypatch, resolver):
    if not shutil.which(resolver):
        pytest.skip(f"no {resolver}")
    monkeypatch.setattr(callsite, "RESOLVERS", [r for r in callsite.RESOLVERS if r[0] == resolver])
    src = tmp_path / "where.c"
    src.write_text(WHERE)
    exe = tmp_path / "where"
    subprocess.run(["cc", "-g", "-O2", "-o", str(exe), str(src), "-ldl"], check=True)
    obj, off = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    record = {"call": "aclnnMuls", "site": [[obj, off]]}
    callsite.resolve([record])
    assert "site" not in record
    assert [(f[0], pathlib.Path(f[1]).name, f[2]) for f in record["at"][:2]] == [
        ("ggml_cann_helper", "where.c", _line(WHERE, "CALL")), ("main", "where.c", _line(WHERE, "HELPER"))]
    # the handler (ggml_cann_*) ends what a line shows
    assert callsite.text(record) == f"in ggml_cann_helper, where.c:{_line(WHERE, 'CALL')}"
    # without debug information nothing resolves: the raw site stays
    subprocess.run(["cc", "-O2", "-o", str(exe), str(src), "-ldl"], check=True)
    obj, off = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    bare = {"call": "aclnnMuls", "site": [[obj, off]]}
    callsite.resolve([bare])
    assert "at" not in bare and bare["site"] == [[obj, off]] and callsite.text(bare) == ""


def test_a_site_from_another_process_is_checked_before_use(tmp_path):
    """A path that is not a file, a relative one, a bad offset: no addr2line, no `at`."""
    calls = [{"call": "aclnnAdd", "site": [["relative/lib.so", "10"]]},
             {"call": "aclnnAdd", "site": [[str(tmp_path), "10"]]},
             {"call": "aclnnAdd", "site": [[str(tmp_path / "gone.so"), "10"]]},
             {"call": "aclnnAdd", "site": [["/bin/sh", "-5"], "junk", None]},
             {"call": "aclnnAdd", "site": "junk"}]
    callsite.resolve(calls)
    assert all("at" not in c for c in calls)


def test_addr2line_output_is_parsed_per_address():
    text = ("0x0000000000001149\nggml_cann_helper\n/src/a.c:12\nmain\n/src/a.c:20 (discriminator 1)\n"
            "0x0000000000002000\n??\n??:0\n")
    assert callsite.parse(text) == {0x1149: [["ggml_cann_helper", "/src/a.c", 12], ["main", "/src/a.c", 20]],
                                     0x2000: []}


def test_a_trace_line_and_the_blame_name_the_site():
    at = [["aclnn_muls(ggml_backend_cann_context&, aclTensor*, float, aclTensor*, bool)", "/s/aclnn_ops.cpp", 1520],
          ["ggml_cann_softmax(ggml_backend_cann_context&, ggml_tensor*)", "/s/aclnn_ops.cpp", 1955],
          ["ggml_cann_compute_forward(ggml_backend_cann_context&, ggml_tensor*)", "/s/ggml-cann.cpp", 1800]]
    calls = [{"call": "aclnnMuls", "args": {"other": {"scalar": 2.0, "dtype": "FLOAT"}}, "rc": 0, "at": at},
             {"call": "aclnnSoftmax", "args": {}, "rc": 161002, "error": "bad dim",
              "at": [["ggml_cann_softmax(ggml_backend_cann_context&, ggml_tensor*)", "/s/aclnn_ops.cpp", 1990]]}]
    assert call_text(calls[0]).endswith(
        "aclnnMuls(other=2) in aclnn_muls, aclnn_ops.cpp:1520 < ggml_cann_softmax, aclnn_ops.cpp:1955")
    # an inlined helper that addr2line names by its caller: the caller's line too
    twice = {"call": "aclnnMuls", "at": [["ggml_cann_softmax(a&)", "/s/aclnn_ops.cpp", 427],
                                         ["ggml_cann_softmax(a&)", "/s/aclnn_ops.cpp", 1955],
                                         ["ggml_backend_cann_graph_compute(b*)", "/s/ggml-cann.cpp", 1957]]}
    assert callsite.text(twice) == "in ggml_cann_softmax, aclnn_ops.cpp:427 < ggml_cann_softmax, aclnn_ops.cpp:1955"
    i, why = blame(calls, None, None)
    assert i == 1 and why == "aclnnSoftmax (call 2 of 2) in ggml_cann_softmax, aclnn_ops.cpp:1990 returned 161002"


# --- through the toolkit: a C client compiled with -g ---------------------------------------

def compile_client(request, tmp_path_factory, source: str, name: str) -> str:
    """A C client of the simulated toolkit (conftest's, built once) compiled with -g -O2."""
    if not (shutil.which("cc") and shutil.which("addr2line")):
        pytest.skip("no cc / addr2line")
    toolkit = request.getfixturevalue("toolkit")
    src = tmp_path_factory.mktemp(name) / "test-backend-ops.c"
    src.write_text(source)
    exe, lib64 = src.with_suffix(""), toolkit / "lib64"
    subprocess.run(["cc", "-g", "-O2", "-Wall", "-o", str(exe), str(src), "-I", str(toolkit / "include"),
                    "-L", str(lib64), "-lascendcl", "-lnnopbase", "-lopapi", "-lm", f"-Wl,-rpath,{lib64}"],
                   check=True)
    return str(exe)


@pytest.fixture(scope="module")
def debug_client(request, tmp_path_factory):
    return compile_client(request, tmp_path_factory, CLIENT, "callsite-client")


def test_a_client_calls_records_carry_their_lines(debug_client, tmp_path):
    p = ops("tbo", debug_client, "-o", "ADD", "-p", "n=[34]", "--trace", "--results", str(tmp_path / "r.json"))
    assert p.returncode == 1, p.stderr
    got = {r["name"]: r for r in json.loads((tmp_path / "r.json").read_text())["results"]}
    workspace = _line(CLIENT, "aclnnAddGetWorkspaceSize(")
    for r in got.values():   # every kept record: its site resolved, the innermost frame the call's line
        for c in r["trace"]:
            assert "site" not in c and pathlib.Path(c["at"][0][1]).name == "test-backend-ops.c", c
            assert c["call"] == "aclnnAdd" and c["at"][0][2] == workspace, c
    died = got["ADD(n=4)"]
    assert died["blame"] == f"aclnnAdd (call 2 of 2) in add, test-backend-ops.c:{workspace} returned 161002"
    assert "-> 161002" in p.stdout and f"in add, test-backend-ops.c:{workspace}" in p.stdout


def test_a_frame_brings_a_site_never_a_resolved_one():
    """`at` is ops' own (resolved here); a binary's frame that carries one, or a site of the
    wrong shape, is a bad record."""
    from cannops.backend.trace import record_problem
    good = {"call": "aclnnAdd", "site": [["/lib/libggml-cann.so", "1a2b"]]}
    assert record_problem(good) is None
    assert record_problem({**good, "at": [["main", "/etc/passwd", 1]]}) == "a call record with a resolved site (at)"
    for bad in ("x", [["/lib/a.so"]], [["/lib/a.so", 5]], [None]):
        assert "site" in record_problem({"call": "aclnnAdd", "site": bad})
