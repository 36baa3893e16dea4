"""Run a test-backend-ops binary op by op (as the Ascend CI does), read its console lines,
and count OK / not supported / FAIL per op; a process that dies (ggml-cann aborts on any
failed ACL call) is recorded with the last lines of its stderr, and the op goes on from the
cases it had not reached (they are excluded from the rerun by a params regex).

  python bench/tbo_ops.py BINARY [-b CANN0] [-o OP,OP] [-p OP=REGEX ...] [--json FILE]
                                 [--logs DIR] [--timeout S] [--require-clean]

Without -o, every op the binary lists (--list-ops). Used by .ci/run (a sample on the
simulated 910B), `make bench` (time per case) and docs/ggml-cann-on-cann-sim.md.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")       # test-backend-ops colours its statuses
# a case line; a FAIL line starts with the failed check instead of the indent
# ("[GET_ROWS] ERR = 1.98 > 0.0000001   GET_ROWS(type=q8_0,…): FAIL")
CASE = re.compile(r"(?:^  |   )(?P<op>[A-Z0-9_]+)\((?P<params>.*)\): (?P<status>.*)$")
RERUNS = 200  # per op: after that many deaths, the op's remaining cases are not run


def status_of(text: str) -> str:
    if text.startswith("OK"):
        return "OK"
    if text.startswith("not supported"):
        return "not supported"
    if "skipping" in text:
        return "skipped"
    return "FAIL"


def list_ops(binary: str) -> list[str]:
    out = subprocess.run([binary, "--list-ops"], capture_output=True, text=True, timeout=60).stdout
    return [w for w in re.findall(r"^\s*([A-Z][A-Z0-9_]+)\s*$", out, re.M)]


def support_order(binary: str, backend: str, op: str, params: str | None) -> list[str]:
    cmd = [binary, "support", "-b", backend, "-o", op] + (["-p", params] if params else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    return list(parse_cases(out, op))


def parse_cases(out: str, op: str) -> dict[str, str]:
    """params -> status of the case lines of `op` in test-backend-ops' stdout (the first
    line of a case counts)."""
    cases: dict[str, str] = {}
    for m in map(CASE.search, ANSI.sub("", out).splitlines()):
        if m and m["op"] == op and m["params"] not in cases and m["status"].strip():
            cases[m["params"]] = status_of(m["status"])
    return cases


def dying_case(out: str, op: str) -> str | None:
    """The case whose line a process that died had begun ("  OP(params): " and no status:
    test-backend-ops prints the name before it computes), else None."""
    lines = [m for m in map(CASE.search, ANSI.sub("", out).splitlines()) if m and m["op"] == op]
    return lines[-1]["params"] if lines and not lines[-1]["status"].strip() else None


CHUNK = 200   # cases named in one params regex after a death (one argument: 128 KiB at most)


def run_op(binary: str, backend: str, op: str, timeout: float, params: str | None = None,
           log: pathlib.Path | None = None) -> dict:
    cases: dict[str, str] = {}
    deaths: list[dict] = []
    pending: list[str] | None = None   # after a death: the cases still to run, in order
    t0 = time.monotonic()
    while True:
        cmd = [binary, "test", "-b", backend, "-o", op]
        chunk = pending[:CHUNK] if pending is not None else []
        if chunk:      # test-backend-ops takes one params regex: these cases by name
            cmd += ["-p", "^(" + "|".join(re.escape(p) for p in chunk) + ")$"]
        elif params:
            cmd += ["-p", params]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
        if log is not None:   # the raw console of every process of the op, in order
            with log.open("a") as f:
                f.write(f"$ {' '.join(cmd)}\n{out}{err}[exit {rc}]\n")
        before = len(cases)
        for case, status in parse_cases(out, op).items():
            cases.setdefault(case, status)
        finished = rc == 0 or (rc == 1 and "Backend " in out and "tests passed" in out)
        if finished:
            if pending is None:
                break
            pending = [p for p in pending[len(chunk):] if p not in cases]
            if not pending:
                break
            continue
        if rc == "timeout" and len(cases) > before:
            # the process ran out of time with cases still finishing: no case is to blame,
            # the rest runs in chunks (a case alone over the limit fails below)
            if pending is None:
                pending = support_order(binary, backend, op, params)
            pending = [p for p in pending if p not in cases]
            if not pending:
                break
            continue
        # the case that died printed nothing: it is the first one, in enumeration order,
        # that did not finish (support mode enumerates an op's cases in the same order)
        if pending is None:
            pending = support_order(binary, backend, op, params)
        victim = dying_case(out, op) or next((p for p in pending if p not in cases), None)
        deaths.append({"rc": rc, "after": len(cases), "case": victim,
                       "stderr": "\n".join(err.strip().splitlines()[-6:])})
        if victim is None or len(deaths) >= RERUNS:
            break
        cases[victim] = "FAIL"     # a crash or a case over the time limit fails, as in the Ascend CI
        pending = [p for p in pending if p not in cases]
        if not pending:
            break
    counts = {s: sum(1 for v in cases.values() if v == s) for s in ("OK", "not supported", "FAIL", "skipped")}
    return {"op": op, "counts": counts, "cases": cases, "deaths": deaths,
            "seconds": round(time.monotonic() - t0, 2), "finished": not deaths}


def source_of(binary: str) -> dict | None:
    """What `make ggml-cann` recorded of the binary's ggml (<variant>/source.json beside its
    bin/ launcher: release or tree, ggml version), None for another binary."""
    path = pathlib.Path(binary).resolve().parent.parent / "source.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("-b", "--backend", default="CANN0")
    ap.add_argument("-o", "--ops", help="comma list of op names (default: every op listed)")
    ap.add_argument("-p", "--params", action="append", default=[], metavar="OP=REGEX",
                    help="only the cases of OP whose params match REGEX (repeatable)")
    ap.add_argument("--json", help="write the per-op results here (after each op)")
    ap.add_argument("--resume", action="store_true", help="keep the ops --json already holds")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per test-backend-ops process")
    ap.add_argument("--logs", help="keep each op's raw console (stdout, stderr, exit) as DIR/OP.log")
    ap.add_argument("--require-clean", action="store_true",
                    help="exit 1 if an op died, failed or printed no OK line")
    args = ap.parse_args()
    ops = args.ops.split(",") if args.ops else list_ops(args.binary)
    params = dict(p.split("=", 1) for p in args.params)
    results, bad = [], []
    done = {}
    if args.resume and args.json and pathlib.Path(args.json).exists():
        done = {r["op"]: r for r in json.loads(pathlib.Path(args.json).read_text())["ops"]}
    for op in ops:
        log = None
        if args.logs and op not in done:
            log = pathlib.Path(args.logs) / f"{op}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.unlink(missing_ok=True)
        r = done.get(op) or run_op(args.binary, args.backend, op, args.timeout, params.get(op), log)
        results.append(r)
        if args.json:       # after every op: an interrupted run loses nothing it measured
            pathlib.Path(args.json).write_text(json.dumps(
                {"binary": args.binary, "backend": args.backend, "source": source_of(args.binary),
                 "ops": results}, indent=1))
        c = r["counts"]
        line = (f"{op:28s} {c['OK']:6d} OK {c['not supported']:6d} n/s {c['FAIL']:4d} FAIL "
                f"{r['seconds']:8.1f} s" + (f"  DIED x{len(r['deaths'])}" if r["deaths"] else ""))
        print(line, flush=True)
        for d in r["deaths"][:1]:
            print("    " + d["stderr"].replace("\n", "\n    "), flush=True)
        if r["deaths"] or c["FAIL"] or not c["OK"]:
            bad.append(op)
    total = {k: sum(r["counts"][k] for r in results) for k in ("OK", "not supported", "FAIL")}
    print(f"{len(ops)} ops: {total['OK']} OK, {total['not supported']} not supported, "
          f"{total['FAIL']} FAIL; died: {sum(1 for r in results if r['deaths'])} op(s)")
    return 1 if args.require_clean and bad else 0


if __name__ == "__main__":
    sys.exit(main())
