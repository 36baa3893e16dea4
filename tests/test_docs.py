"""README.md and docs/**/*.md point at what is there: every relative link reaches a file (and
its #anchor a heading of that file), and every path of the tree they name in backquotes
(`backend/cann/rules_ssm_conv.py`, `native/aclnn/api/*.def`) exists."""
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md")), ROOT / "native" / "aclnn" / "README.md"]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
# the tree's own folders: a backquoted path under one of them names a file of the checkout
TREE = ("cli/", "cases/", "backend/", "native/", "tests/", "bench/", "docs/", ".ci/")
# ... but for these, which name files of other trees: llama.cpp's, the aclnn op repositories'
FOREIGN = {"tests/test-backend-ops.cpp", "docs/aclnnXxx.md"}


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(page: pathlib.Path) -> set[str]:
    seen, out = {}, set()
    for line in FENCE.sub("", page.read_text()).splitlines():
        if m := re.match(r"#{1,6} (.+)", line):
            slug = _slug(m[1])
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _prose(page: pathlib.Path) -> str:
    return FENCE.sub("", page.read_text())


def test_the_pages_are_there():
    assert {p.name for p in PAGES} >= {"README.md", "architecture.md", "rules-vs-ggml-cann.md"}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_its_anchor(page):
    broken = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):
            continue   # http(s), mailto: not ours to check
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: {broken}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_named_exists(page):
    missing = []
    for text in CODE.findall(_prose(page)):
        for word in text.split():
            word = word.rstrip(".,;:)").partition("::")[0]   # a pytest node id: its file
            if not word.startswith(TREE) or word in FOREIGN or "<" in word or "..." in word or "…" in word:
                continue   # a template (ops_<family>.c) or an elided path
            if not any(ROOT.glob(word.rstrip("/"))):
                missing.append(word)
    assert not missing, f"{page.relative_to(ROOT)} names paths that are not there: {missing}"


def test_a_slug_is_githubs():
    assert _slug("Whole catalog on CANN-SIM with `--strict`, both SoCs") == \
        "whole-catalog-on-cann-sim-with---strict-both-socs"
    assert _slug("The 310P (Atlas inference series)") == "the-310p-atlas-inference-series"
    assert _slug("`make bench`") == "make-bench"
