"""The ggml-cann findings, filed-ready (docs/upstream/): every finding of
docs/ggml-cann-on-cann-sim.md (each probe of bench/ggml_cann_findings.py) has a report or an
index line saying why not, every report has the parts an upstream issue needs, and each
report's smallest case, run by test-backend-ops of a `make ggml-cann` build on the simulated
toolkit, shows the fault the report describes (skipped where no build is present, unless
`make upstream-check` asks for it: UPSTREAM_CHECK_REQUIRED=1), and so does its reproducer:
written by `ops repro -b GGML-CANN0` (UPSTREAM_CHECK_REPRO=1: make upstream-check rebuilds
the bridge on the 910B prefix first, then on the 310P's for its reports:
UPSTREAM_CHECK_BRIDGE), built and run with no Python on PATH."""
import importlib.util
import json
import os
import pathlib
import re
import shlex
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
UPSTREAM = ROOT / "docs" / "upstream"
REPORTS = sorted(p for p in UPSTREAM.glob("*.md") if p.name != "README.md")
SECTIONS = ("## What fails", "## Smallest case", "## The failing call", "## ggml-cann source",
            "## Evidence from the aclnn docs", "## Suggested fix", "## Reproducer")
FIXED_SECTIONS = ("## What failed", "## Smallest case", "## Fixed in")
BUILD = pathlib.Path(os.environ.get("UPSTREAM_CHECK_BUILD", ROOT / "build" / "ggml-cann"))
REQUIRED = os.environ.get("UPSTREAM_CHECK_REQUIRED") == "1"
REPRO = os.environ.get("UPSTREAM_CHECK_REPRO") == "1"
BRIDGE = os.environ.get("UPSTREAM_CHECK_BRIDGE", "910B")   # the variant whose prefix the bridge is on
OPS = ROOT / ".venv" / "bin" / "ops"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _probes() -> set[str]:
    spec = importlib.util.spec_from_file_location("ggml_cann_findings", ROOT / "bench" / "ggml_cann_findings.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return set(module.PROBES)


def index_rows() -> list[dict]:
    """The rows of docs/upstream/README.md's index: report, finding, probes, versions, status."""
    rows = []
    for line in (UPSTREAM / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 5 or cells[0] in ("report", "---"):
            continue
        link = re.match(r"\[[^\]]+\]\(([^)]+)\)", cells[0])
        rows.append({"report": link[1] if link else None, "finding": cells[1],
                     "probes": set(re.findall(r"`([\w-]+)`", cells[2])), "versions": cells[3],
                     "status": cells[4]})
    return rows


def header(text: str) -> dict[str, str]:
    """A report's header table (| field | value |) before its first section."""
    head = text.split("\n## ", 1)[0]
    return {m[1].strip(): m[2].strip() for m in re.finditer(r"^\| *([\w ]+?) *\| *(.+?) *\|$", head, re.M)}


def _sh_block(text: str, heading: str) -> list[str]:
    """The lines of the first ```sh block of a report's section."""
    section = text.split(f"## {heading}\n", 1)[-1].split("\n## ", 1)[0] if f"## {heading}\n" in text else ""
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    return block[1].splitlines() if block else []


def repro_block(text: str) -> dict:
    """The ```sh block of "## Reproducer": each `ops repro` command (its cases and folder) with
    the status it records (the `# recorded: FAIL` line after it), or why there is none
    (# no repro: WHY)."""
    runs, no_repro = [], None
    for line in _sh_block(text, "Reproducer"):
        if line.startswith("ops repro "):
            runs.append([shlex.split(line), None])
        elif (m := re.match(r"# recorded: (\w+)$", line)) and runs:
            runs[-1][1] = m[1]
        elif m := re.match(r"# no repro: (.+)", line):
            no_repro = m[1]
    return {"runs": [tuple(r) for r in runs], "no_repro": no_repro}


def check_block(text: str) -> dict:
    """The first ```sh block of "## Smallest case": the test-backend-ops command and its
    directives (# expect: REGEX, # variant: 310P, # simulator: without RULE, # no check: WHY)."""
    lines = _sh_block(text, "Smallest case")
    out = {"command": [l for l in lines if l.startswith("test-backend-ops ")], "expect": [], "variant": "910B",
           "without": None, "no_check": None}
    for line in lines:
        if m := re.match(r"# (expect|variant|no check): (.+)|# simulator: without (\S+)$", line):
            if m[1] == "expect":
                out["expect"].append(m[2])
            else:
                out[{"variant": "variant", "no check": "no_check", None: "without"}[m[1]]] = m[2] or m[3]
    return out


def test_there_are_reports_and_an_index():
    assert len(REPORTS) >= 10 and (UPSTREAM / "README.md").exists()


def test_the_index_lists_every_report_once_and_with_its_status():
    rows = index_rows()
    listed = [r["report"] for r in rows if r["report"]]
    assert sorted(listed) == sorted(p.name for p in REPORTS)
    for row in rows:
        if row["report"]:
            status = header((UPSTREAM / row["report"]).read_text()).get("status", "")
            assert row["status"] == status, f"{row['report']}: index says {row['status']!r}, report {status!r}"
        else:
            assert row["status"].startswith("no report:"), f"{row['finding']}: a line without a report says why"


def test_every_finding_probe_has_a_report_or_a_reason():
    covered = [p for row in index_rows() for p in row["probes"]]
    assert sorted(covered) == sorted(set(covered)), "a probe is in two rows of the index"
    assert set(covered) == _probes(), f"not in docs/upstream/README.md: {sorted(_probes() - set(covered))}"


@pytest.mark.parametrize("report", REPORTS, ids=lambda p: p.stem)
def test_a_report_has_the_parts_an_upstream_issue_needs(report):
    text = report.read_text()
    fields = header(text)
    assert text.startswith("# ") and {"ggml versions", "status"} <= fields.keys(), report.name
    sections = FIXED_SECTIONS if fields["status"].startswith("fixed") else SECTIONS
    missing = [s for s in sections if f"\n{s}\n" not in text]
    assert not missing, f"{report.name} lacks {missing}"
    block = check_block(text)
    assert block["no_check"] or (len(block["command"]) == 1 and block["expect"]), \
        f"{report.name}: one test-backend-ops command and what it shows (# expect:), or # no check: why"
    for command in block["command"]:
        assert " -o " in command and " -p " in command, f"{report.name}: -o and -p pick the smallest case"
    repro = repro_block(text)
    assert fields["status"].startswith("fixed") or repro["no_repro"] or repro["runs"], \
        f"{report.name}: an `ops repro … build/upstream/{report.stem}` line and its # recorded: status, or # no repro: why"
    for argv, recorded in repro["runs"]:
        assert recorded and argv[-1].startswith(f"build/upstream/{report.stem}"), \
            f"{report.name}: {' '.join(argv)}: into build/upstream/{report.stem}…, and its # recorded: status"


def _env(variant_dir: pathlib.Path, without: str | None) -> dict:
    """The variant's launcher environment (env.sh's exports), less one relaxation."""
    env = dict(os.environ)
    for m in re.finditer(r"^export (\w+)=(.*)$", (variant_dir / "env.sh").read_text(), re.M):
        env[m[1]] = m[2]
    if without == "malloc-align":
        env.pop("CANN_SIM_MALLOC_ALIGN", None)
    elif without:
        env["CANN_SIM_ALLOW"] = ",".join(r for r in env["CANN_SIM_ALLOW"].split(",") if r != without)
    return env


def _variant_or_skip(variant: str) -> pathlib.Path:
    """A `make ggml-cann` variant's folder; no build: a skip (a failure for the 910B under make upstream-check)."""
    if not (BUILD / variant / "bin" / "test-backend-ops").exists():
        if REQUIRED and variant == "910B":
            pytest.fail(f"no {BUILD / variant}/bin/test-backend-ops: make ggml-cann VARIANTS=910B")
        pytest.skip(f"no {BUILD / variant}/bin/test-backend-ops: make ggml-cann VARIANTS={variant}")
    return BUILD / variant


CHECKED = [p for p in REPORTS if not check_block(p.read_text())["no_check"]]


@pytest.mark.parametrize("report", CHECKED, ids=lambda p: p.stem)
def test_the_smallest_case_shows_the_fault(report):
    block = check_block(report.read_text())
    variant = _variant_or_skip(block["variant"])
    # the launcher (bin/) sets the variant's relaxations; without one, the binary under prefix/
    binary = variant / ("prefix/bin" if block["without"] else "bin") / "test-backend-ops"
    argv = [str(binary), *shlex.split(block["command"][0])[1:]]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=_env(variant, block["without"]))
    text = ANSI.sub("", p.stdout + p.stderr)
    for expect in block["expect"]:
        assert re.search(expect, text), f"{report.name}: no /{expect}/ in:\n{text[-3000:]}"


REPRODUCED = [(p, k) for p in REPORTS for k in range(len(repro_block(p.read_text())["runs"]))]


@pytest.mark.parametrize("report,k", REPRODUCED, ids=lambda x: x.stem if isinstance(x, pathlib.Path) else str(x))
def test_the_reproducer_builds_runs_without_python_and_shows_the_fault(report, k):
    """`ops repro` on GGML-CANN0 writes the folder; `make` and `make run` under a bare
    environment (PATH=/usr/bin:/bin) reproduce the recorded device output byte for byte,
    or, where ggml-cann killed the process, the same death with the same refusal; where the
    report is about a relaxation, the same program without it aborts on the refusal."""
    if not REPRO:
        pytest.skip("make upstream-check writes and runs the reproducers (the bridge on the 910B prefix)")
    text = report.read_text()
    (argv, recorded), block = repro_block(text)["runs"][k], check_block(text)
    variant = _variant_or_skip(block["variant"])
    if block["variant"] != BRIDGE:
        pytest.skip(f"the bridge is on the {BRIDGE} prefix; the {block['variant']}'s run on theirs (make upstream-check)")
    env = _env(variant, None)
    argv = [str(OPS), *argv[1:]]
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, f"{' '.join(argv)}:\n{p.stderr[-2000:]}"
    folder = ROOT / argv[-1]
    manifest = json.loads((folder / "repro.json").read_text())
    assert manifest["status"] == recorded
    bare = {"PATH": "/usr/bin:/bin"}
    built = subprocess.run(["make"], cwd=folder, capture_output=True, text=True, timeout=300, env=bare)
    assert built.returncode == 0, built.stderr[-2000:]
    run = subprocess.run(["make", "run"], cwd=folder, capture_output=True, text=True, timeout=600, env=bare)
    said = ("dies as in the recorded run" if "died" in manifest
            else "reproduced: the device's outputs are the stored ones, byte for byte")
    assert run.returncode == 0 and said in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]
    if "died" in manifest:    # the refusal the report names (one of its # expect:), in what the program saw
        seen = ANSI.sub("", run.stdout)
        assert manifest["died"]["expected"] in seen
        assert not block["expect"] or any(re.search(e, seen) for e in block["expect"]), \
            f"{report.name}: none of {block['expect']} in:\n{seen[-3000:]}"
    if block["without"]:   # the same program, the relaxation taken out: the refusal the report names
        less = _env(variant, block["without"])
        override = [f"CANN_SIM_ALLOW={less['CANN_SIM_ALLOW']}", f"CANN_SIM_MALLOC_ALIGN={less.get('CANN_SIM_MALLOC_ALIGN', '')}"]
        run = subprocess.run(["make", "run", *override], cwd=folder, capture_output=True, text=True, timeout=600,
                             env=bare)
        text = ANSI.sub("", run.stdout + run.stderr)
        assert run.returncode != 0, text[-2000:]
        for expect in block["expect"]:
            assert re.search(expect, text), f"{report.name}: no /{expect}/ in:\n{text[-3000:]}"


def test_the_directives_of_a_check_are_read():
    block = check_block("## Smallest case\n\n```sh\ntest-backend-ops test -b CANN0 -o ADD -p 'x'\n"
                        "# variant: 310P\n# simulator: without storage-shape\n# expect: a\n# expect: b\n```\n")
    assert block == {"command": ["test-backend-ops test -b CANN0 -o ADD -p 'x'"], "expect": ["a", "b"],
                     "variant": "310P", "without": "storage-shape", "no_check": None}
    assert check_block((UPSTREAM / "l2-norm-eps.md").read_text())["no_check"].startswith("fixed")
