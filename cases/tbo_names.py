"""test-backend-ops' case names, listed from the binary: the reference lists the catalog of
a ggml version is checked against (tests/test_parity_versions.py).

    python -m cannops.native.tbo_names BIN SOURCE OUTDIR
    python -m cannops.native.tbo_names --compare VERSION OUTDIR


writes OUTDIR/support.tsv and OUTDIR/test.tsv (op, params, status), the layout of
shared/reference/test-backend-ops-v0.20.2-*.tsv (the shared folder beside the checkout).
Support mode lists every case without computing (under a second). Test mode lists the
same cases plus those that run their whole graph (test_case::run_whole_graph, the fused
ones); running every case there takes minutes, so only the fused ones are run (about 1 minute on 2 cores): the ops that
support mode never prints, found among the quoted upper-case names in
SOURCE (test-backend-ops.cpp; -o takes no lookahead, a '(' makes an entry a case name), and
the fused variants of ops that have both kinds, picked by their params (-p), as each
struct's run_whole_graph() reads.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

# op names -> params regex of their run_whole_graph() cases, for the structs whose op name
# is shared with non-fused cases (test-backend-ops.cpp of ggml 0.25.3):
SHARED_FUSED = (
    ("ADD,SUB,MUL,DIV", r"nf=([2-9]|[1-9][0-9]+),"),   # test_bin_bcast: nf > 1
    ("MUL_MAT", r",o=([2-9]|[1-9][0-9]+)"),             # test_mul_mat: o > 1
    ("TOP_K", r"ties=1"),                                # test_top_k: ties
    ("DSV4_HC_POST", r"gated=1"),                        # test_dsv4_hc_post: gated
)

_LINE = re.compile(r"^  ([A-Z][A-Z0-9_]*)\((.*)\): (.*)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run(binary: str, *args: str) -> list[tuple[str, str, str]]:
    """(op, params, status) of each case line test-backend-ops prints, in its order."""
    proc = subprocess.run([binary, *args], capture_output=True, text=True, errors="replace")
    rows = []
    for line in proc.stdout.splitlines():
        m = _LINE.match(_ANSI.sub("", line))
        if m:
            rows.append((m[1], m[2], m[3].strip()))
    if proc.returncode not in (0, 1) or not rows and proc.returncode:
        sys.exit(f"{binary} {' '.join(args)}: exit status {proc.returncode}\n{proc.stderr[-2000:]}")
    return rows


def unique(rows):
    seen, out = set(), []
    for r in rows:
        if r[:2] not in seen:
            seen.add(r[:2])
            out.append(r)
    return out


def write(path: Path, header: str, rows) -> None:
    path.write_text("op\tparams\t" + header + "\n" + "".join(f"{o}\t{p}\t{s}\n" for o, p, s in rows))


def reference(path: Path) -> dict[str, set[str]]:
    """op -> its case names, from a list written by main()."""
    names: dict[str, set[str]] = {}
    for line in path.read_text().splitlines()[1:]:
        op, params, _ = line.split("\t")
        names.setdefault(op, set()).add(f"{op}({params})")
    return names


def compare(version: str, listdir: Path, mode: str) -> list[tuple[str, str, int, int, int, list[str]]]:
    """Per op of the reference or the catalog of `version`: (op, families, names equal,
    missing from the catalog, extra in it, a few of the differing names)."""
    from cannops.cases.catalog import all_cases
    ref = reference(listdir / f"{mode}.tsv")
    ours: dict[str, set[str]] = {}
    fams: dict[str, set[str]] = {}
    for c in all_cases(mode, version):
        ours.setdefault(c.op, set()).add(c.name)
        fams.setdefault(c.op, set()).add(c.family.name)
    rows = []
    for op in sorted(set(ref) | set(ours)):
        r, o = ref.get(op, set()), ours.get(op, set())
        rows.append((op, ",".join(sorted(fams.get(op, ()))) or "-", len(r & o), len(r - o), len(o - r),
                     sorted(r - o)[:1] + sorted(o - r)[:1]))
    return rows


def print_comparison(version: str, listdir: Path) -> None:
    for mode in ("test", "support"):
        rows = compare(version, listdir, mode)
        print(f"# {mode} mode, catalog {version} against {listdir}: op, families, equal, missing, extra")
        for op, fams, eq, miss, extra, eg in rows:
            print(f"{'ok  ' if not miss and not extra else 'DIFF'} {op:32s} {eq:6d} {miss:6d} {extra:6d}  {fams}"
                  + (f"  e.g. {eg[0]}" if eg else ""))
        done = [r for r in rows if not r[3] and not r[4]]
        print(f"# {mode}: {len(done)}/{len(rows)} ops equal; names equal {sum(r[2] for r in rows)}, "
              f"missing {sum(r[3] for r in rows)}, extra {sum(r[4] for r in rows)}")


def main(argv: list[str]) -> None:
    if len(argv) == 3 and argv[0] == "--compare":
        return print_comparison(argv[1], Path(argv[2]))
    if len(argv) != 3:
        sys.exit(__doc__)
    binary, source, outdir = argv
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    support = unique(run(binary, "support", "-b", "CPU"))
    write(out / "support.tsv", "cpu_supported",
          [(o, p, "1" if s == "SUPPORTED" else "0") for o, p, s in support])
    ops = sorted({o for o, _, _ in support})
    test = list(support)
    # ops support mode never prints: every case of theirs runs its whole graph
    named = set(re.findall(r'"([A-Z][A-Z0-9_]+)"', Path(source).read_text())) - set(ops)
    test += run(binary, "test", "-b", "CPU", "-o", ",".join(sorted(named) + [".*_MUL$"]))
    for names, params in SHARED_FUSED:
        test += run(binary, "test", "-b", "CPU", "-o", names, "-p", params)
    status = {(o, p): s for o, p, s in test}   # a computed case's status over support mode's
    write(out / "test.tsv", "cpu_status", [(o, p, status[(o, p)]) for o, p, _ in unique(test)])
    print(f"{out}: {len(support)} support-mode names over {len(ops)} ops, "
          f"{len(unique(test))} test-mode names over {len({o for o, _, _ in test})} ops")


if __name__ == "__main__":
    main(sys.argv[1:])
