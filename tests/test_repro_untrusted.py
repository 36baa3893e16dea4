"""`ops repro` with input it does not control (issue 43): tensor names and environment
values reach repro.c and the Makefile as data, never as code (`make && make run` runs
nothing else, and still reproduces); a folder is rewritten only when its repro.json is one
ops repro wrote and its files still hold what it wrote, and never through a symbolic link;
an OUTDIR that cannot be written is one line and exit 2 before the device runs."""
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from cannops.backend.repro import c_string, make_value, makefile

OPS = [sys.executable, "-m", "cannops.cli.main"]
BARE = {"PATH": "/usr/bin:/bin"}
ADD = "ADD(type=f32,ne=[1,1,8,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"
ABS = "ABS(type=f16,ne_a=[5,7,11,13],v=0)"
SOFT_MAX = ("SOFT_MAX(type=f32,ne=[16,16,1,1],mask=1,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,"
            "max_bias=0.000000,inplace=0)")
CANARY = "K"     # the file the hostile inputs' shell commands would make (touch K)
# a name that ends the C string (a backslash, then a line break: the line splice), then
# calls system("touch K") without a quote of its own; it ran on `make run` before the fix
ESCAPE = '\\\n");system((char[]){116,111,117,99,104,32,75,0});//'
# (out: a node, which names no file; a leaf's name is in its input's file name too)
NAMES = [{"out": "x" + ESCAPE}, {"a": "y" + ESCAPE, "b0": 'w/??/\n*/ "q" \t`$(touch K)`\xe9'}]
# CANN_SIM_* values that make would have run at build time, unquoted
VALUES = {"CANN_SIM_PROBE": "$(shell touch K)", "CANN_SIM_PROBE2": "a#b $$(shell touch K) `touch K` \\"}

# Hypothesis' caches out of the working tree (test_fuzz checks there is no .hypothesis)
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="ops-test-hypothesis-"))

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                                reason="needs a C compiler and make")


def ops(*args, env=None, cwd=None):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env=None if env is None else {**os.environ, **env})


def make(folder, *targets, env=BARE):
    return subprocess.run(["make", "-s", *targets], cwd=folder, capture_output=True, text=True, env=env, timeout=600)


def snapshot(root: pathlib.Path) -> dict:
    """Every path under root (links not followed) with its bytes or link target."""
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = (os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file()
                                          else "dir")
    return out


def one_line_exit_2(p, message):
    """Refused as bad input: exit 2, one line (so before the device ran: it says `running`)."""
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


# ------------------------------------------------------- quoted for C and make ----

@pytest.mark.parametrize("names", NAMES)
def test_hostile_names_and_values_run_nothing_and_the_program_still_reproduces(tmp_path, names):
    out = tmp_path / "r"
    p = ops("repro", "-b", "GGML-CPU", *[f"--name={leaf}={n}" for leaf, n in names.items()], ADD, str(out),
            env=VALUES, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    text = (out / "repro.c").read_text()
    assert all(c_string(n) in text for n in names.values())
    built = make(out, env={**BARE, **VALUES})
    assert built.returncode == 0, built.stdout + built.stderr
    run = make(out, "run")
    assert run.returncode == 0 and "reproduced:" in run.stdout, run.stdout + run.stderr
    assert not (out / CANARY).exists() and not (tmp_path / CANARY).exists()
    assert "\\\\x0a" in (out / "README.md").read_text()        # the name's line break shown, not made


def test_a_hostile_name_and_values_on_cann_sim_run_nothing(tmp_path, toolkit_env):
    out = tmp_path / "r"
    p = ops("repro", "-b", "CANN-SIM", "--name", "a=x" + ESCAPE, ADD, str(out), env={**toolkit_env, **VALUES},
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    env = {**BARE, **toolkit_env}
    assert make(out, env=env).returncode == 0
    run = make(out, "run", env=env)
    assert run.returncode == 0 and "reproduced:" in run.stdout, run.stdout + run.stderr
    assert not (out / CANARY).exists() and not (tmp_path / CANARY).exists()


@pytest.fixture(scope="module")
def toolkit_env(toolkit):
    """conftest's simulated toolkit, as the environment a reproducer's make reads."""
    return {"ASCEND_TOOLKIT_HOME": str(toolkit)}


@pytest.mark.parametrize("std", ["c11", "gnu11"])   # -std=c11 reads trigraphs (??/ is a backslash)
@settings(max_examples=5, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=40) | st.text(alphabet='\\"?/\n*\' $#`', max_size=12), min_size=30, max_size=30))
def test_a_c_string_compiles_back_to_its_bytes(tmp_path, std, texts):
    src = tmp_path / "s.c"
    items = ",\n".join(f"{{{c_string(t)}, {len(t)}}}" for t in texts)
    src.write_text("#include <stdio.h>\nstatic const struct { const char *s; int n; } T[] = {\n" + items + "};\n"
                   "int main(void) { for (unsigned i = 0; i < sizeof T / sizeof T[0]; i++) "
                   "fwrite(T[i].s, 1, T[i].n, stdout); return 0; }\n")
    subprocess.run(["cc", f"-std={std}", "-o", str(tmp_path / "s"), str(src)], check=True, timeout=120)
    got = subprocess.run([str(tmp_path / "s")], capture_output=True, check=True, timeout=60).stdout
    assert got == b"".join(t.encode() if isinstance(t, str) else t for t in texts)


@settings(max_examples=5, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet=' \t\x0b\x0c\\#$()`\'";:=%*?&|<>~!{}[]x\xe9\u20ac\U0001f600', max_size=16),
                min_size=12, max_size=12))
def test_a_make_value_is_exported_exactly_and_expands_nothing(tmp_path, values):
    env = {f"CANN_SIM_V{i}": v for i, v in enumerate(values)}
    text = makefile("t", [], "true", env) + "show:\n\t@" + " && ".join(
        f"printenv {k} | od -An -tx1 | tr -d ' \\n'; echo" for k in env) + "\n"
    (tmp_path / "Makefile").write_text(text)
    p = subprocess.run(["make", "-s", "show"], cwd=tmp_path, capture_output=True, text=True, env=BARE, timeout=60)
    assert p.returncode == 0, p.stderr
    got = [bytes.fromhex(h).decode()[:-1] for h in p.stdout.splitlines()]    # printenv's line break
    assert got == values and not (tmp_path / CANARY).exists()


@pytest.mark.parametrize("env, message", [
    ({"CANN_SIM_PROBE": "x\n$(shell touch K)"}, "a line break cannot go into the reproducer's Makefile"),
    ({"CANN_SIM_A$(shell touch K)": "1"}, "not a name a Makefile can export"),
    ({"ASCEND_TOOLKIT_HOME": "/x;touch K"}, "cannot go into the reproducer's Makefile"),
    ({"CANN_SIM_PROBE": os.fsdecode(b"x\xff")}, "not UTF-8 text"),
])
def test_what_a_makefile_cannot_hold_is_refused_before_the_run(tmp_path, env, message):
    p = ops("repro", "-b", "CANN-SIM", ADD, str(tmp_path / "r"), env=env, cwd=tmp_path)
    one_line_exit_2(p, message)
    assert not (tmp_path / "r").exists() and not (tmp_path / CANARY).exists()


def test_a_name_for_no_tensor_is_refused_in_one_line(tmp_path):
    one_line_exit_2(ops("repro", "-b", "GGML-CPU", "--name", "z=" + ESCAPE, ADD, str(tmp_path / "r")),
                    "has no tensor named 'z'")


def test_a_long_name_is_refused_by_a_short_prefix(tmp_path):
    """A 10 kB --name was echoed whole in its error (found by bench/probe43.py)."""
    p = ops("repro", "-b", "GGML-CPU", "--name", "a=" + "n" * 10000, ADD, str(tmp_path / "r"))
    one_line_exit_2(p, "NAME at most 63 bytes (GGML_MAX_NAME), not 'a=nnn")
    assert len(p.stderr) < 300 and not (tmp_path / "r").exists()


def test_a_name_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    one_line_exit_2(ops("repro", "-b", "GGML-CPU", "--name", os.fsdecode(b"a=x\xff"), ADD, str(tmp_path / "r")),
                    "not UTF-8 text")
    assert not (tmp_path / "r").exists()


def test_a_make_value_with_a_line_break_is_refused():
    with pytest.raises(ValueError, match="CANN_SIM_X"):
        make_value("a\nb", "CANN_SIM_X")


# ------------------------------------------------------------- whose folder ----

def repro(out, *cases, check=True):
    p = ops("repro", "-b", "GGML-CPU", *cases, str(out))
    assert not check or p.returncode == 0, p.stderr
    return p


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("marker, message", [
    (b"not json {", "is not one ops repro wrote"),
    (b'["README.md", "Makefile"]', "is not one ops repro wrote"),
    (json.dumps({"tool": "ops repro", "files": ["README.md", "Makefile", "repro.c"]}).encode(),
     "is not one ops repro wrote"),      # no digests: an older ops repro's, or anyone's
    (b"[" * 100000, "is not one ops repro wrote"),     # deeper than json's recursion
])
def test_a_folder_with_a_repro_json_ops_did_not_write_is_not_touched(tmp_path, marker, message):
    out = tmp_path / "mine"
    out.mkdir()
    for name in ("README.md", "Makefile", "repro.c"):
        (out / name).write_text(f"the user's {name}\n")
    (out / "repro.json").write_bytes(marker)
    before = snapshot(tmp_path)
    one_line_exit_2(repro(out, ABS, check=False), message)
    assert snapshot(tmp_path) == before


def test_a_marker_naming_a_file_outside_the_folder_deletes_nothing(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "r"
    out.mkdir()
    digests = {"../victim.txt": _sha(victim.read_bytes()), str(victim): _sha(victim.read_bytes())}
    (out / "repro.json").write_text(json.dumps({"tool": "ops repro", "files": list(digests), "sha256": digests}))
    before = snapshot(tmp_path)
    one_line_exit_2(repro(out, ABS, check=False), "not a file ops repro writes")
    assert snapshot(tmp_path) == before


def test_a_file_changed_since_ops_wrote_it_stops_the_rewrite(tmp_path):
    out = tmp_path / "r"
    repro(out, ABS)
    (out / "repro.c").write_text((out / "repro.c").read_text() + "/* my fix */\n")
    before = snapshot(tmp_path)
    one_line_exit_2(repro(out, SOFT_MAX, check=False), "changed since ops repro wrote it")
    assert snapshot(tmp_path) == before


def test_a_link_inside_the_folder_is_never_followed(tmp_path):
    """The first run's case1/ moved elsewhere and a link left in its place (its files still
    what ops wrote): the rewrite neither deletes nor writes through it."""
    out, outside = tmp_path / "r", tmp_path / "outside"
    repro(out, ABS)
    shutil.move(out / "case1", outside)
    (out / "case1").symlink_to(outside)
    before = snapshot(tmp_path)
    one_line_exit_2(repro(out, SOFT_MAX, check=False), "link")
    assert snapshot(tmp_path) == before


def test_a_file_the_rewrite_would_write_that_ops_did_not_is_not_overwritten(tmp_path):
    """A file of the user's where the new run writes one: found after the run, before
    anything is deleted or written."""
    out, other = tmp_path / "r", tmp_path / "other"
    repro(out, ABS)
    repro(other, "--after", ABS, SOFT_MAX)
    theirs = sorted(p.relative_to(other) for p in (other / "case2").iterdir())[0]
    (out / theirs).parent.mkdir()
    (out / theirs).write_text("the user's")
    before = snapshot(out)
    p = repro(out, "--after", ABS, SOFT_MAX, check=False)
    assert p.returncode == 2 and "exists and was not written by ops repro: nothing written" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and snapshot(out) == before


def test_a_rewrite_replaces_only_its_own_files_and_records_their_digests(tmp_path):
    out = tmp_path / "r"
    repro(out, ABS)
    (out / "notes.txt").write_text("mine")
    repro(out, SOFT_MAX)
    manifest = json.loads((out / "repro.json").read_text())
    assert manifest["cases"] == [SOFT_MAX] and (out / "notes.txt").read_text() == "mine"
    assert sorted(manifest["sha256"]) == manifest["files"]
    assert all(_sha((out / f).read_bytes()) == d for f, d in manifest["sha256"].items())
    assert built_and_reproduced(out)


def built_and_reproduced(out) -> bool:
    return make(out).returncode == 0 and make(out, "run").returncode == 0


# ------------------------------------------------- OUTDIR, before the device run ----

def test_an_outdir_that_cannot_be_written_is_refused_before_the_run(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    listed = tmp_path / "listed"
    listed.mkdir()
    (listed / "README.md").write_text("mine")
    (listed / "repro.json").write_text("[1, 2]")
    for outdir, message in [(tmp_path / "file" / "sub", "is not a folder"), ("/proc/ops-repro-43", "cannot write"),
                            (tmp_path / "dangling", "symbolic link to nothing"), (listed, "not one ops repro wrote")]:
        one_line_exit_2(repro(outdir, ABS, check=False), message)
    assert not (tmp_path / "nowhere").exists() and (listed / "README.md").read_text() == "mine"


def test_a_name_with_a_slash_is_a_name_not_a_folder(tmp_path):
    out = tmp_path / "r"
    repro(out, "--name", "a=blk/0/../../x", ABS)
    assert [p.name for p in (out / "case1").glob("in_*")] == ["in_0_blk_0_.._.._x.npy"]
    assert built_and_reproduced(out)
