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


def test_a_long_line_is_refused_and_quoted_by_a_short_prefix(tmp_path):
    path = tmp_path / "long.cases"
    path.write_text("ADD(" + "x" * (1 << 20) + ")\n")
    r = _ops("test", "-b", "NUMPY", "--cases", str(path))
    _one_line(r, "line 1 is longer than 16,384 bytes: 'ADD(xxx")
    assert len(r.stderr) < 400
