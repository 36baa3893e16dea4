"""Extract, for every aclnn operator the CANN simulator implements, Ascend's own dtype
tables from the hicann op repositories: the page's parameter table (docs/aclnn*.md), its
per-product notes for Atlas A2 and Atlas 推理系列 (310P), its product table's state for
each (offered, not offered, not documented), the dtype combinations of its system tests
(tests/st/aclnn<Name>/*.json) and the SoCs its kernel registrations name
(op_host/*_def.cpp), into tests/data/ascend-tables.json.

    .venv/bin/python bench/extract_ascend_tables.py --mirrors DIR [--out PATH]

The mirrors are bare git repositories under DIR (DIR/hicann+ops-math/repo, ...; --mirrors,
else the environment variable ASCEND_OPS_MIRRORS), read at HEAD; their commits are recorded
in the output. tests/test_cann_sim_tables.py checks the simulator
against the output.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
REPOS = ("ops-math", "ops-nn", "ops-transformer", "ops-cv")
OUT = ROOT / "tests" / "data" / "ascend-tables.json"

# the pages' dtype names -> the simulator's short names (docs/cann-sim-dtypes.md)
DTYPES = {"FLOAT": "f32", "FLOAT32": "f32", "FLOAT16": "f16", "BFLOAT16": "bf16", "DOUBLE": "f64",
          "FLOAT64": "f64",
          "INT8": "s8", "INT16": "s16", "INT32": "s32", "INT64": "s64", "UINT8": "u8",
          "UINT16": "u16", "UINT32": "u32", "UINT64": "u64", "BOOL": "bool",
          "COMPLEX64": "c64", "COMPLEX128": "c128", "COMPLEX32": "c32", "INT4": "s4",
          "HIFLOAT8": "hif8", "FLOAT8_E4M3FN": "f8e4m3", "FLOAT8_E5M2": "f8e5m2",
          "FLOAT8_E8M0": "f8e8m0", "FLOAT4_E2M1": "f4e2m1", "FLOAT4_E1M2": "f4e1m2"}
DTYPE_RE = re.compile(r"(?<![A-Z0-9_])(" + "|".join(sorted(DTYPES, key=len, reverse=True)) + r")(?![A-Z0-9_])")
ST_DTYPES = {"fp32": "f32", "float32": "f32", "fp16": "f16", "float16": "f16", "bf16": "bf16",
             "bfloat16": "bf16", "fp64": "f64", "float64": "f64", "int8": "s8", "int16": "s16",
             "int32": "s32", "int64": "s64", "uint8": "u8", "uint16": "u16", "uint32": "u32",
             "uint64": "u64", "bool": "bool", "complex64": "c64", "complex128": "c128"}
A2 = "Atlas A2 训练系列产品"
P310 = "<term>Atlas 推理系列产品</term>"


def git(repo: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def simulated_operators() -> list[str]:
    names = set()
    for f in sorted((ROOT / "backend" / "cann" / "sim").glob("ops_*.py")):
        names |= set(re.findall(r'@operator\("(\w+)"\)', f.read_text()))
    return sorted(names)


def dtypes_in(text: str) -> list[str]:
    out = []
    for m in DTYPE_RE.findall(text):
        if DTYPES[m] not in out:
            out.append(DTYPES[m])
    return out


def products(line: str) -> set[str]:
    got = set()
    if A2 in line:
        got.add("A2")
    if P310 in line:
        got.add("310P")
    return got


def text_of(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", cell)).strip()


def section(page: str, name: str) -> str:
    """The part of a page about aclnn<name>GetWorkspaceSize (a page may hold several)."""
    m = re.search(rf"^#+\s*aclnn{name}GetWorkspaceSize\s*$", page, re.M)
    if not m:
        return page
    nxt = re.search(r"^##\s", page[m.end():], re.M)
    return page[m.start(): m.end() + nxt.start()] if nxt else page[m.start():]


# a product's state on a page's 产品支持情况 (table "| <term>..</term> | √ |" or bullet
# "- <term>..</term>：支持"): a row that offers it, a row that refuses it (× / 不支持), or no
# row at all, which says nothing either way (the open repositories document the kernels
# they ship; the Atlas inference series' come in CANN's closed 310P kernel package)
OFFERED, NOT_OFFERED, NOT_DOCUMENTED = "offered", "not offered", "not documented"


def support(page: str) -> dict[str, str]:
    """Product ("A2", "310P") -> OFFERED, NOT_OFFERED or NOT_DOCUMENTED."""
    head = page.split("## 功能说明")[0]
    out = {"A2": NOT_DOCUMENTED, "310P": NOT_DOCUMENTED}
    for line in head.splitlines():
        for p in products(line):
            verdict = text_of(line.split("</term>")[-1])
            out[p] = NOT_OFFERED if "不支持" in verdict or "×" in verdict else OFFERED
    return out


def param_cells(sec: str, column: str):
    """(parameter, the cell's HTML) of each row of the page's HTML parameter tables, in the
    first column whose head starts with `column` ("数据类型", "维度")."""
    for table in re.findall(r"<table.*?</table>", sec, re.S):
        heads = [text_of(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table, re.S)]
        col = next((i for i, h in enumerate(heads) if h.startswith(column)), None)
        if col is None or "参数名" not in heads[:1]:
            continue
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.S):
            cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
            name = re.match(r"[A-Za-z_]\w*", text_of(cells[0])) if cells else None
            if len(cells) == len(heads) and name:   # "self（aclTensor*）" -> self
                yield name.group(0), cells[col]


def table_params(sec: str) -> dict[str, list[str]]:
    """Parameter -> dtypes of the page's HTML parameter table (its 数据类型 column)."""
    params: dict[str, list[str]] = {}
    for name, cell in param_cells(sec, "数据类型"):
        params.setdefault(name, dtypes_in(text_of(cell)))
    return params


def table_marks(sec: str) -> dict[str, dict[str, list[str]]]:
    """Parameter -> dtype -> the footnote marks it carries in the 数据类型 column
    ("FLOAT<sup>2</sup>"), which a product's note refuses ("角标“2”代表该系列不支持的数据类型")."""
    marks: dict[str, dict[str, list[str]]] = {}
    for name, cell in param_cells(sec, "数据类型"):
        if name in marks:   # the first row of a name, as table_params
            continue
        marks[name] = {}
        for m in DTYPE_RE.finditer(cell):
            sup = re.match(r"\s*<sup>([^<]*)</sup>", cell[m.end():])
            if sup:
                marks[name][DTYPES[m.group(1)]] = re.findall(r"\w+", sup.group(1))
    return {p: m for p, m in marks.items() if m}


def table_dims(sec: str) -> dict[str, list[int]]:
    """Parameter -> [lowest, highest] rank of the page's 维度(shape) column where it states
    them ("1-8", "0-8维", "不超过8维", "2-8维和0维": the highest, and the lowest stated)."""
    dims: dict[str, list[int]] = {}
    for name, cell in param_cells(sec, "维度"):
        cell = text_of(cell)
        span = re.search(r"(\d)\s*[-~]\s*(\d)", cell)
        top = re.search(r"(?:不超过|不高于|小于等于|不大于)\s*(\d)\s*维", cell)
        if span:
            dims.setdefault(name, [int(span.group(1)), int(span.group(2))])
        elif top:
            dims.setdefault(name, [0, int(top.group(1))])
    return dims


def bullet_params(sec: str) -> tuple[dict[str, list[str]], list[tuple[str, str, set[str]]]]:
    """Markdown pages: `- self（aclTensor*, ...）：... 数据类型支持X、Y` bullets, and the
    product notes (param or "", note text, products) of the whole section."""
    params: dict[str, list[str]] = {}
    notes = []
    current, depth = "", -1
    lines = sec.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)-\s*(?:\*\*)?([A-Za-z_][A-Za-z0-9_]*)(?:\*\*)?\s*[（(]", line)
        indent = len(line) - len(line.lstrip())
        if m:
            current, depth = m.group(2), indent
            found = re.search(r"数据类型支持(.*)", line)
            if found and "<term>" not in line:
                params.setdefault(current, dtypes_in(found.group(1)))
        elif line.strip() and indent <= depth and not line.lstrip().startswith("- <term>"):
            current, depth = "", -1
        if "<term>" in line:   # notes of other products matter too ("仅支持该产品")
            body = text_of(line.split("</term>")[-1]).lstrip("：:").strip()
            if not body:   # "- <term>A2</term>、<term>A3</term>：" then its own bullets
                for more in lines[i + 1:]:   # (ops-cv's pages leave a blank line first)
                    if not more.strip() and not body:
                        continue
                    if not more.strip() or len(more) - len(more.lstrip()) <= indent:
                        break
                    body += text_of(more).lstrip("- ") + "；"
            notes.append((current, body, products(line)))
    return params, notes


def apply_notes(table: dict[str, list[str]], notes, product: str,
                marks: dict[str, dict[str, list[str]]]) -> tuple[dict[str, list[str]], list[str]]:
    """The product's dtypes per parameter: a note's 数据类型支持 list replaces the table's,
    its 不支持 list is removed, and so are the dtypes a footnote mark it refuses stands by
    (table_marks); a note names its parameter or applies to all."""
    out = {p: list(d) for p, d in table.items()}
    texts = []
    for param, body, prods in notes:
        if product not in prods:   # "<term>950</term>：COMPLEX32、COMPLEX64仅支持该产品。"
            only = [d for c in re.split(r"[；;。]", body) if "仅支持该产品" in c for d in dtypes_in(c)]
            for k in ([param] if param in out else list(out)):
                out[k] = [d for d in out[k] if d not in only]
            continue
        texts.append((param + ": " if param else "") + body)
        for clause in re.split(r"[；;。]", body):
            mark = re.search(r"角标[“\"]?(\w+)[”\"]?代表该系列不支持", clause)
            if mark:
                for k in out:
                    out[k] = [d for d in out[k] if mark.group(1) not in marks.get(k, {}).get(d, ())]
                continue
            names = dtypes_in(clause)
            if not names or "当" in clause:   # a condition ("当self为BFLOAT16时，不支持...") lists no dtypes
                continue
            subject = clause.split("数据类型")[0]   # "self和out的数据类型不支持BOOL"
            named = [p for p in out if re.search(rf"(?<![A-Za-z]){re.escape(p)}(?![A-Za-z])", subject)]
            keys = named or ([param] if param else list(out))
            for k in keys:
                if "不支持" in clause:
                    out[k] = [d for d in out.get(k, []) if d not in names]
                elif "支持" in clause:
                    out[k] = names
    return out, texts


def pages(mirrors: pathlib.Path) -> dict[str, list[tuple[str, str]]]:
    """aclnn operator name -> [(repo, path)] of the pages naming it (experimental last)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for repo in REPOS:
        d = mirrors / f"hicann+{repo}" / "repo"
        for path in git(d, "ls-tree", "-r", "--name-only", "HEAD").splitlines():
            if re.search(r"/docs/aclnn[^/]*\.md$", path):
                for part in pathlib.PurePath(path).stem.split("&"):
                    found.setdefault(part.removeprefix("aclnn"), []).append((repo, path))
    for v in found.values():
        v.sort(key=lambda rp: ("experimental" in rp[1], rp))
    return found


def system_tests(mirrors: pathlib.Path, repo: str, doc: str, name: str) -> dict | None:
    d = mirrors / f"hicann+{repo}" / "repo"
    op_dir = doc.split("/docs/")[0]
    st_dir = f"{op_dir}/tests/st/aclnn{name}"
    files = [p for p in git(d, "ls-tree", "-r", "--name-only", "HEAD", st_dir).splitlines()
             if p.endswith(".json")]
    if not files:
        return None
    combos, ranks, n = set(), set(), 0
    for f in files:
        try:
            cases = json.loads(git(d, "show", f"HEAD:{f}"))
        except json.JSONDecodeError:
            continue
        for case in cases if isinstance(cases, list) else []:
            tensors = [i for i in case.get("inputs", []) if isinstance(i, dict) and i.get("type") == "tensor"]
            n += 1
            combos.add(tuple(ST_DTYPES.get(str(i.get("dtype")), str(i.get("dtype"))) for i in tensors))
            ranks |= {len(i["shape"]) for i in tensors if isinstance(i.get("shape"), list)}
    return {"files": files, "cases": n, "input_dtypes": sorted(list(c) for c in combos),
            "ranks": sorted(ranks)}


def registered(mirrors: pathlib.Path, repo: str, doc: str) -> list[str]:
    """The SoCs the operator's kernel registrations (op_host/*_def.cpp: AddConfig) name,
    over its directory; [] where it registers none (an AICPU or composed operator)."""
    d = mirrors / f"hicann+{repo}" / "repo"
    socs = set()
    for f in git(d, "ls-tree", "-r", "--name-only", "HEAD", doc.split("/docs/")[0]).splitlines():
        if f.endswith("_def.cpp"):
            socs |= set(re.findall(r'AddConfig\("(\w+)"', git(d, "show", f"HEAD:{f}")))
    return sorted(socs)


def extract(mirrors: pathlib.Path) -> dict:
    index = pages(mirrors)
    out = {"generated_by": "bench/extract_ascend_tables.py",
           "sources": {r: git(mirrors / f"hicann+{r}" / "repo", "rev-parse", "HEAD").strip() for r in REPOS},
           "operators": {}}
    for name in simulated_operators():
        if name not in index:
            out["operators"][name] = {"page": None}
            continue
        repo, path = index[name][0]
        page = git(mirrors / f"hicann+{repo}" / "repo", "show", f"HEAD:{path}")
        sec = section(page, name)
        table = table_params(sec)
        listed, notes = bullet_params(sec)
        for p, d in listed.items():
            table.setdefault(p, d)
        table = {p: d for p, d in table.items() if d}
        entry = {"page": f"{repo}:{path}", "support": support(page), "table": table,
                 "dims": table_dims(sec)}
        marks = table_marks(sec)
        for product in ("A2", "310P"):
            params, texts = apply_notes(table, notes, product, marks)
            entry[product] = params
            entry[f"{product}_notes"] = texts
        entry["st"] = system_tests(mirrors, repo, path, name)
        entry["registered"] = registered(mirrors, repo, path)
        out["operators"][name] = entry
    return out


def mirrors_missing(mirrors: pathlib.Path | None) -> str | None:
    """Why the mirrors' folder cannot be read (None: it can): each repository must be there."""
    if mirrors is None:
        return "no mirrors' folder: --mirrors DIR or ASCEND_OPS_MIRRORS"
    absent = [r for r in REPOS if not (mirrors / f"hicann+{r}" / "repo").is_dir()]
    return f"{mirrors}: no bare git repository hicann+{absent[0]}/repo" if absent else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mirrors", type=pathlib.Path, default=os.environ.get("ASCEND_OPS_MIRRORS") or None,
                    help="the folder of the hicann repositories' bare clones (default: $ASCEND_OPS_MIRRORS)")
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    args = ap.parse_args(argv)
    why = mirrors_missing(None if args.mirrors is None else pathlib.Path(args.mirrors))
    if why:
        print(f"extract_ascend_tables: {why}", file=sys.stderr)
        return 2
    data = extract(pathlib.Path(args.mirrors))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, ensure_ascii=False, indent=1, sort_keys=False) + "\n")
    ops = data["operators"]
    print(f"{args.out}: {len(ops)} operators, {sum(1 for e in ops.values() if e['page'])} with a page, "
          f"{sum(1 for e in ops.values() if e.get('st'))} with system tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
