"""No path of a development machine in the project: what lies outside the checkout (a ggml
clone, the hicann mirrors) is an argument or a documented environment variable, refused in
one line (exit 2) when absent; the shared folder is named beside the checkout."""
import importlib.util
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
# a machine's folders (this project's machines: /work, /root; others': /home, /Users), as
# the start of an absolute path: `../shared` and URLs' paths do not match
# (POSIX ERE, for git grep, and Python's re alike)
MACHINE_PATH = r"""(^|[ "'=(,:]|\[)/(work|root|home|Users)/"""


def _bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_file_of_the_project_names_a_machine_path():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    p = subprocess.run(["git", "grep", "-n", "-I", "--untracked", "-E", MACHINE_PATH], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), p.stderr   # 1: no match
    assert p.stdout == "", "absolute paths of a machine:\n" + p.stdout


# the old tree's lines (`@` for the root's `/`, so that this file does not match)
@pytest.mark.parametrize("text, machine", [
    ('GGML = os.environ.get("GGML_MIRROR", "@work/.mirror/ggml")', True),
    ("    [--mirrors @work/.mirror]", True),
    ("# (@work/shared/PRECISION.md)", True),
    ("@home/user/ggml/build", True),
    ("REFERENCE = ROOT.parent / 'shared' / 'reference'  # ../shared/reference", False),
    ("https://github.com/ggml-org/ggml/tree/master/src", False),
])
def test_the_pattern_tells_a_machine_path(text, machine):
    import re
    assert bool(re.search(MACHINE_PATH, text.replace("@", "/"))) is machine


def test_replay_trees_without_a_ggml_clone_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    replay = _bench("ascend_ci_replay")
    monkeypatch.setattr(replay, "BUILD", tmp_path)   # no tree unpacked yet
    monkeypatch.delenv("GGML_MIRROR", raising=False)
    for argv in (["trees"], ["trees", "--ggml-git", str(tmp_path / "absent")]):
        assert replay.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--ggml-git DIR or GGML_MIRROR" in err
    assert not any(tmp_path.iterdir())   # refused before any work


def test_extract_tables_without_mirrors_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    tables = _bench("extract_ascend_tables")
    monkeypatch.delenv("ASCEND_OPS_MIRRORS", raising=False)
    out = tmp_path / "tables.json"
    (tmp_path / "hicann+ops-math" / "repo").mkdir(parents=True)   # one of the four
    for argv, why in ((["--out", str(out)], "--mirrors DIR or ASCEND_OPS_MIRRORS"),
                      (["--out", str(out), "--mirrors", str(tmp_path)], "hicann+ops-nn/repo")):
        assert tables.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err
    assert not out.exists()
