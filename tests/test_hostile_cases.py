"""Case names and case files from outside (`-o NAME`, `--cases FILE`, test-export-graph-ops
lines): absurd counts, huge files and lines, values out of range each end in one short line,
exit 2, before any work, in bounded memory and time (issue 43, items 12 and 15)."""
import os
import subprocess
import sys

import pytest

OPS = [sys.executable, "-m", "cannops.cli.main"]


def _ops(*args, timeout=120):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=timeout)


def _one_line(r, says):
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and says in r.stderr, (r.returncode, r.stderr[-3000:])
    assert "Backend" not in r.stdout


# a child that builds every family's first case with each of its integers made absurd, under a
# memory limit: before the bound, nf=10^23 made tensors until the machine ran out
FUZZ = r"""
import re, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from cannops.cases.names import case_from_name, cases_by_op, parse_name
seen, names, escaped = set(), 0, []
for op, cases in sorted(cases_by_op("test").items()):
    for c in cases:
        if c.family.name in seen:
            continue
        seen.add(c.family.name)
        for k, text in parse_name(c.name)[1].items():
            if re.fullmatch(r"-?\d+", text):
                values = ["99999999999999999999999"]
            elif re.fullmatch(r"\[[\d,-]+\]", text):
                items = text[1:-1].split(",")
                values = ["[" + ",".join(items[:i] + ["99999999999999999999999"] + items[i + 1:]) + "]"
                          for i in range(len(items))]
            else:
                continue
            for v in values:
                names += 1
                try:
                    case_from_name(c.name.replace(f"{k}={text}", f"{k}={v}", 1))
                except ValueError:
                    pass
                except Exception as e:
                    escaped.append(f"{c.name} {k}={v}: {type(e).__name__}")
print(names, len(seen))
print("\n".join(escaped))
"""


def test_no_count_in_a_name_builds_without_bound():
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", FUZZ], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    counts, *escaped = r.stdout.splitlines()
    names, families = map(int, counts.split())
    assert names > 500 and families > 100 and not [e for e in escaped if e], escaped


@pytest.mark.parametrize("name,says", [
    ("ADD(type=f32,ne=[10,5,4,3],nr=[1,1,1,1],nf=99999999999999999999999,perm1=0,src_overlap=0)",
     "more than the 4,096 tensors a case named from outside may make"),
    ("ABS(type=f32,ne_a=[99999999999999999999999,1,1,1],v=0)", "GiB, more than the 16 GiB"),
    # outside ggml's domain: its CPU kernels GGML_ASSERT(eps >= 0), the worker aborted, a FAIL
    ("RMS_NORM(type=f32,ne=[256,8,1,1],v=0,eps=nan,inplace=0)", "RMS_NORM: eps = nan: ggml asserts eps >= 0"),
    ("NORM(type=f32,ne=[64,5,4,3],v=0,eps=-1.000000,noncontig_rows=0)", "NORM: eps = -1.0: ggml asserts"),
    # a value that is no number names its field (it said only: invalid literal for int())
    ("ADD(type=f32,ne=[x,5,4,3],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)", "bad value: ne='[x,5,4,3]': invalid"),
])
def test_an_absurd_count_is_refused_before_the_graph_is_whole(name, says):
    _one_line(_ops("test", "-b", "NUMPY", "-o", name), says)


def test_a_long_name_is_quoted_by_a_short_prefix():
    name = "ABS(type=f32,ne_a=[" + "1," * 20000 + "1],v=0)"
    r = _ops("test", "-b", "NUMPY", "-o", name)
    _one_line(r, "no test case named 'ABS(type=f32,ne_a=[1,1,1,")
    assert len(r.stderr) < 1000


def test_a_huge_cases_file_is_refused_by_its_size(tmp_path):
    path = tmp_path / "big.cases"
    with open(path, "wb") as f:   # sparse: its size is what is checked, before any read
        f.truncate(100 << 20)
    _one_line(_ops("test", "-b", "NUMPY", "--cases", str(path)), "104,857,600 bytes, more than the")


def test_a_file_of_too_many_lines_is_refused(tmp_path):
    path = tmp_path / "empty-lines.cases"
    path.write_bytes(b"\n" * (2 << 20))
    _one_line(_ops("test", "-b", "NUMPY", "--cases", str(path)), "more than the 1,048,576 lines")


def test_a_long_line_is_refused_and_quoted_by_a_short_prefix(tmp_path):
    path = tmp_path / "long.cases"
    path.write_text("ADD(" + "x" * (1 << 20) + ")\n")
    r = _ops("test", "-b", "NUMPY", "--cases", str(path))
    _one_line(r, "line 1 is longer than 16,384 bytes: 'ADD(xxx")
    assert len(r.stderr) < 400


# --- test-export-graph-ops lines --------------------------------------------------------------

GOOD_MUL = "7 0 128 2 8 1 16" + " 0" * 16 + " 2 0 128 2 8 1 4 512 1024 8192 0 128 1 1 1 4 512 512 512 mul-0"


def _line(**edit):
    """GOOD_MUL with words replaced: {index: text}, or `cut` words from the end."""
    words = GOOD_MUL.split()
    for i, text in edit.get("at", {}).items():
        words[i] = text
    return " ".join(words[:len(words) - edit.get("cut", 0)])


# word positions: op 0, type 1, ne 2-5, n_params 6, op_params 7-22, n_src 23, src0 24-32, src1 33-41
BAD_LINES = [
    ("a negative ne", _line(at={3: "-2"}), "ne: -2 is out of range"),
    ("a negative source ne", _line(at={26: "-2"}), "src0's ne: -2 is out of range"),
    ("a negative stride", _line(at={30: "-512"}), "src0's nb: -512 is out of range"),
    ("no sources", GOOD_MUL.split(" 2 0 128 2 8 1 4")[0] + " 0 nosrc", "the source count: 0 is out of range [1, 10]"),
    ("11 sources", _line(at={23: "11"}), "the source count: 11 is out of range [1, 10]"),
    ("17 op_params", _line(at={6: "17"}), "the op_params count: 17 is out of range [0, 16]"),
    ("an op_param past int32", _line(at={7: str(1 << 40)}), "op_params: 1099511627776 is out of range"),
    ("a word that is no number", _line(at={2: "12x"}), "ne: '12x' is not an integer"),
    ("an unknown type", _line(at={24: "4242"}), "src0's type: unknown ggml type 4242"),
    ("a line cut short", _line(cut=4), "the line ends early, at src1's nb"),
    ("a MUL that does not broadcast", _line(at={34: "100", 35: "3"}), "MUL: src1 [100, 3, 1, 1] does not repeat"),
    ("a MUL of the wrong shape", _line(at={2: "64"}), "MUL: ne [64, 2, 8, 1] is not src0's"),
    ("a NaN eps", "25 0 128 2 8 1 16 2143289344" + " 0" * 15 + " 1 0 128 2 8 1 4 512 1024 8192 norm-0",
     "RMS_NORM: eps (op_params[0]) = nan: ggml asserts eps >= 0"),
    ("a node past the bound", f"25 0 {1 << 40} 1 1 1 16" + " 0" * 16 + f" 1 0 {1 << 40} 1 1 1 0 0 0 0 big",
     "RMS_NORM node cannot be built: TooLarge: its tensors take 4,096 GiB, more than the 16 GiB"),
]


@pytest.mark.parametrize("what,line,says", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_a_bad_export_line_is_named_by_line_and_field(what, line, says):
    from cannops.cases.graph_ops_file import read_graph_ops
    with pytest.raises(ValueError) as e:
        read_graph_ops([GOOD_MUL, line], "0.25.3")
    assert str(e.value).startswith("line 2: ") and says in str(e.value), str(e.value)


def test_a_bad_export_line_exits_2_naming_the_file_before_any_work(tmp_path):
    path = tmp_path / "graph.txt"
    path.write_text(GOOD_MUL + "\n" + _line(at={30: "-512"}) + "\n")
    _one_line(_ops("test", "-b", "NUMPY", "--cases", str(path)), f"--cases {path}: line 2: not a test-export-graph-ops")


# --- --soc ------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,says", [
    (["--soc", "", "-b", "NUMPY"], "--soc '' names no SoC"),   # it meant 910B
    (["--soc", "310P", "-b", "NUMPY"], "--soc 310P: only CANN-SIM simulates a SoC, and the devices selected are NUMPY"),
    (["--soc", "910B", "-b", "NUMPY"], "only CANN-SIM simulates a SoC"),
])
def test_a_soc_that_nothing_would_simulate_is_refused(args, says):
    _one_line(_ops("test", "-o", "ADD", "--sample", "1", *args), says)


# --- --resume: a results file from outside (found by bench/probe43.py) ---------------------------

@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("command", [["test", "-b", "NUMPY", "-o", "ABS"], ["tbo", "BINARY", "-o", "ADD"]])
def test_a_resume_file_that_is_not_regular_is_refused_without_waiting(tmp_path, kind, command):
    """A FIFO waited forever, /dev/zero was read until MemoryError."""
    from test_tbo_untrusted import make_binary
    binary = make_binary(tmp_path / "b", [["ADD", "n=1", "ok", True]])
    command = [binary if c == "BINARY" else c for c in command]
    path = tmp_path / "r.json"
    os.mkfifo(path) if kind == "fifo" else path.symlink_to(kind)
    r = _ops(*command, "--resume", str(path), timeout=60)
    expected = "is a FIFO, not a regular file" if kind == "fifo" else "is a device, not a regular file"
    _one_line(r, expected)


def test_a_dangling_symlink_given_as_an_output_stays_and_nothing_is_made_through_it(tmp_path):
    """The early write check opened `x` (a link to nowhere) for appending, which made its
    target, then removed `x`: the user's link gone, a file left where it pointed (found by
    bench/probe43.py)."""
    link, target = tmp_path / "x", tmp_path / "elsewhere" / "t.json"
    target.parent.mkdir()
    link.symlink_to(target)
    r = _ops("test", "-b", "NUMPY", "-o", "ABS", "--resume", str(link))
    _one_line(r, "no such results file")
    assert link.is_symlink() and os.readlink(link) == str(target) and not target.exists()
