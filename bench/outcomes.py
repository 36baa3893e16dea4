"""Whether a change left `ops`'s outcomes as they were (a speed change must: issue 23): a
fixed-seed sample run on GGML-CPU, CANN-SIM and NUMPY (and 2 cases an op of the 0.25.3 catalog), FAULTY's crashes and overrun, the
console of a small run, and `ops support` of both catalog versions (with --soc too), each
written into a folder; `compare` tells two folders apart.

    python bench/outcomes.py run /tmp/before      # on the old tree
    python bench/outcomes.py run /tmp/after       # on the new one
    python bench/outcomes.py compare /tmp/before /tmp/after    # exit status 1: they differ

Compared: every result's status, reason (its first line: a crash's reason quotes the
worker's traceback, whose line numbers move with any edit), error figures, notes and
worst elements; the support tables and their per-case JSON; the devices' names,
descriptions and SoCs (not memory figures). The sample is taken from the catalog in use
(issue 23's 404-case sample of everyday ops, and every 15th case of 20 more ops).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

OPS = [sys.executable, "-m", "cannops.cli.main"]
EVERYDAY = ["MUL_MAT", "CPY", "SOFT_MAX", "CONCAT", "GET_ROWS", "ADD", "MUL", "RMS_NORM", "SSM_CONV",
            "ARGSORT", "CONT", "SUM_ROWS", "ROPE", "SET_ROWS"]
MORE = ["ABS", "GELU", "NORM", "GROUP_NORM", "SUM", "MEAN", "ACC", "PAD", "IM2COL", "CONV_2D", "TOP_K",
        "SOFT_MAX_BACK", "OUT_PROD", "GET_ROWS_BACK", "SILU_BACK", "ROPE_BACK", "SSM_SCAN", "RWKV_WKV6",
        "ARGMAX", "UPSCALE"]
FIELDS = ("status", "reason", "by", "error", "threshold", "metric", "note", "worst", "max_abs", "max_rel",
          "worst_index")
FAULTS = "abort=ABS,segv=NEG,overrun=SQR"


def ops(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*OPS, *args], capture_output=True, text=True, env={**os.environ, **(env or {})})


def names(op_list: list[str]) -> list[str]:
    return ops("list", "cases", "-o", ",".join(op_list)).stdout.split()


def sample() -> list[str]:
    every, by_op = names(EVERYDAY), {}
    for name in every:
        by_op.setdefault(name.partition("(")[0], []).append(name)
    return ([n for op in EVERYDAY for n in by_op.get(op, [])[::12]] + names(["FLASH_ATTN_EXT"])[::100]
            + names(MORE)[::15])


def selection(cases: list[str]) -> list[str]:
    """-o options of 100 names each (one argument may hold 128 kB at most)."""
    return [x for i in range(0, len(cases), 100) for x in ("-o", ",".join(cases[i:i + 100]))]


def run(out: str) -> None:
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ops-outcomes-") as cache:
        env = {"OPS_CACHE_DIR": cache}
        cases = sample()
        jobs = [("test_ggml", ["test", "-b", "GGML-CPU", "-j", "2", "--seed", "1", *selection(cases)], {}),
                ("test_sim", ["test", "-b", "CANN-SIM,NUMPY", "-j", "2", "--seed", "1", *selection(cases[::4])], {}),
                ("test_0.25.3", ["test", "-b", "GGML-CPU,CANN-SIM", "--catalog", "0.25.3", "-j", "2", "--seed", "1",
                                 "--sample", "2"], {}),
                ("faulty", ["test", "-b", "FAULTY,GGML-CPU", "-o", "ABS,NEG,SQR,SIN"], {"OPS_FAULTY": FAULTS})]
        for name, args, extra in jobs:
            p = ops(*args, "--results", os.path.join(out, f"{name}.json"), env={**env, **extra})
            print(f"{name}: exit status {p.returncode}")
        for name, args in (("abs", ["test", "-o", "ABS", "-b", "GGML-CPU"]),
                           ("support-soc", ["support", "--soc", "910B,310P", "-o", "ADD,MUL_MAT,CPY,ROPE,SOFT_MAX"]),
                           *((f"support-{v}", ["support", "--catalog", v]) for v in ("0.20.2", "0.25.3"))):
            p = ops(*args, env=env)
            with open(os.path.join(out, f"{name}.txt"), "w") as f:
                f.write(p.stdout)
            if name.startswith("support-0"):
                with open(os.path.join(out, f"{name}.json"), "w") as f:
                    f.write(ops(*args, "--output", "json", env=env).stdout)
            print(f"{name}: exit status {p.returncode}")


def _results(path: str) -> tuple[dict, list]:
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    out = {}
    for r in doc["results"]:
        r = {**r, "reason": r.get("reason", "").split("\n")[0]}
        out[(r["device"], r["op"], r["params"])] = {k: r.get(k) for k in FIELDS}
    return out, [(d["name"], d["description"], d.get("soc", "")) for d in doc["devices"]]


def compare(a: str, b: str) -> list[str]:
    diff = []
    for name in sorted(f for f in os.listdir(a) if f.endswith(".json")):
        (ra, da), (rb, db) = _results(os.path.join(a, name)), _results(os.path.join(b, name))
        found = [f"{name}: only in one: {k}" for k in sorted(ra.keys() ^ rb.keys())]
        found += [f"{name}: {k}: {f} {ra[k][f]!r} -> {rb[k][f]!r}"
                  for k in sorted(ra.keys() & rb.keys()) for f in FIELDS if ra[k][f] != rb[k][f]]
        found += [f"{name}: devices {da} -> {db}"] if da != db else []
        print(f"{name}: {len(ra)} / {len(rb)} results, {len(found)} differences")
        diff += found
    for name in sorted(f for f in os.listdir(a) if f.endswith(".txt")):
        with open(os.path.join(a, name)) as fa, open(os.path.join(b, name)) as fb:
            same = fa.read() == fb.read()
        print(f"{name}: {'the same' if same else 'DIFFERENT'}")
        diff += [] if same else [f"{name} differs"]
    return diff


if __name__ == "__main__":
    if sys.argv[1:2] == ["run"] and len(sys.argv) == 3:
        run(sys.argv[2])
    elif sys.argv[1:2] == ["compare"] and len(sys.argv) == 4:
        found = compare(sys.argv[2], sys.argv[3])
        print("\n".join(found[:50]))
        sys.exit(1 if found else 0)
    else:
        sys.exit(__doc__)
