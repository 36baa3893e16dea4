"""`ops repro`: a case (or a sequence of cases, the last compared) run once on one device
with everything it did recorded, written out as what a bug report needs: the case, seed
and versions, inputs and outputs as .npy, the call trace, a README in the form of an
upstream issue, and a standalone C program with its Makefile (the device's writer:
backend/ggml/repro.py, backend/cann/repro.py) that makes the same calls on the same
inputs and says whether the stored device outputs reproduce."""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from .markdown import code, fenced, printable
from .repro_folder import Folder, check_folder
from .selection import BadInput


@dataclass(frozen=True)
class ReproSpec:
    names: tuple[str, ...]     # the cases in order; the last is compared
    device: str
    outdir: str
    seed: int = 0
    argv: tuple[str, ...] = ()   # the command line, for the README
    tensor_names: tuple[tuple[str, str], ...] = ()   # --name LEAF=NAME: the compared case's tensors renamed


def check_repro(spec: ReproSpec) -> tuple[list, Folder]:
    """The cases and OUTDIR, after every check that needs no run: a bad one is BadInput
    (one line)."""
    from cannops.backend.base import list_devices
    if not spec.names:
        raise BadInput("ops repro: name at least one case")
    from .repro_run import case_named, renamed
    cases = [case_named(name) for name in spec.names]
    renamed(cases[-1].build(), spec.tensor_names)
    folder = check_folder(Path(spec.outdir))
    names = [n for n, _ in list_devices([spec.device])]
    if spec.device not in names:
        raise BadInput(f"device {spec.device!r} not available here; available: {', '.join(names) or 'none'}")
    if not spec.device.startswith(("GGML-", "CANN")):
        raise BadInput(f"ops repro cannot reproduce {spec.device}: it writes programs for ops' CANN layer "
                       "(CANN-SIM, CANN0, ...) and ggml devices (GGML-*)")
    _check_build_environment(spec.device)
    return cases, folder


def _check_build_environment(device: str) -> None:
    """What of the environment goes into the Makefile (the simulator's CANN_SIM_* settings,
    a CANN device's ASCEND_TOOLKIT_HOME) can go there."""
    from cannops.backend.repro import make_path, sim_environment
    try:
        sim_environment()
        if not device.startswith("GGML-") and os.environ.get("ASCEND_TOOLKIT_HOME"):
            make_path(os.environ["ASCEND_TOOLKIT_HOME"], "ASCEND_TOOLKIT_HOME")
    except ValueError as e:
        raise BadInput(f"ops repro: {e}") from None


def write_repro(spec: ReproSpec, say=print) -> dict:
    """Run the cases on the device, recorded, in a process of its own (repro_run.py), and
    write the folder; the manifest returned. A run that kills that process still leaves
    its program, which then must see the device die the same way."""
    from cannops.backend.base import open_device
    from .repro_run import device_runs, renamed
    cases, folder = check_repro(spec)
    graphs = [c.build() for c in cases]
    renamed(graphs[-1], spec.tensor_names)
    runs, death = device_runs(spec.device, cases, graphs, spec.seed, say, spec.tensor_names)
    if death is not None:
        _died(runs[-1], death, spec.device)
    device = open_device(spec.device)     # its writer and versions; nothing runs on it here
    try:
        return _write(spec, folder, device, runs, death)
    finally:
        device.close()


def _died(run, death, device_name: str) -> None:
    """The case the device's process died in: a FAIL saying how, with no outputs."""
    from .results import FAIL, CaseResult
    run.result = CaseResult(device=device_name, op=run.case.op, params=run.case.vars, status=FAIL,
                            reason=f"the device's process was {_how_it_ended(death.exitcode)}: {death.message}",
                            threshold=run.case.family.threshold(run.case.params))


# ------------------------------------------------------------------ files ----

def _write(spec: ReproSpec, folder: Folder, device, runs: list, death=None) -> dict:
    arrays: dict[str, object] = {}      # written once the program is (a failure leaves nothing)
    from cannops.backend import callsite
    from cannops.backend.repro import HEADER
    for r in runs:   # where ggml-cann made each call (on the simulated toolkit): trace.json, the README
        callsite.resolve(r.calls or [])
        callsite.resolve(r.result.trace or [])
    steps = [_case_files(f"case{k}", run, k == len(runs), arrays) for k, run in enumerate(runs, 1)]
    title = f"written by `ops repro` (ops {_ops_version()}): {runs[-1].case.name} on {device.name}"
    try:
        texts = device.reproducer(steps, [r.program for r in runs], title, **({"death": death} if death else {}))
    except ValueError as e:   # a call recorded that the program cannot make again
        raise BadInput(f"{runs[-1].case.name} on {device.name}: no reproducer written: {e}") from None
    versions = _versions(device)
    texts["trace.json"] = json.dumps([{"case": r.case.name, "calls": r.calls} for r in runs], indent=1) + "\n"
    manifest = {"tool": "ops repro", "ops": _ops_version(), "device": device.name, "seed": spec.seed,
                "cases": [r.case.name for r in runs], "compared": runs[-1].case.name,
                "status": runs[-1].result.status, "reason": runs[-1].result.reason,
                "error": runs[-1].result.error, "threshold": runs[-1].result.threshold,
                "versions": versions, "command": list(spec.argv)}
    if hasattr(runs[-1].program, "recorder"):   # ops' CANN layer: who recorded its calls
        manifest["recorded_by"] = runs[-1].program.recorder
    if death is not None:
        manifest["died"] = {"case": len(runs), "exitcode": death.exitcode, "message": death.message,
                            "expected": death.expected}
    texts["README.md"] = _readme(spec, device, runs, versions, death)
    files = {rel: _npy(array) for rel, array in arrays.items()}
    files["repro.h"] = HEADER.read_bytes()
    files.update({name: c if isinstance(c, bytes) else c.encode() for name, c in texts.items()})
    folder.write(files, manifest)
    return {**manifest, "files": sorted(files)}


def _npy(array) -> bytes:
    import io
    import numpy as np
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(array))
    return buf.getvalue()


def _case_files(folder: str, run, compared: bool, arrays: dict):
    """A case's step of the program, its arrays (to be saved under their paths) in `arrays`."""
    import numpy as np
    from cannops.backend.repro import Checked, Step

    def save(name: str, array) -> str:
        rel = f"{folder}/{name}"
        arrays[rel] = array
        return rel

    g, prog = run.graph, run.program
    step = Step(run.case.name, folder)
    for t in g.leaves:
        if t.index in run.inputs:
            path = save(f"in_{t.index}_{_file_word(t.name) or 'leaf'}.npy", run.inputs[t.index])
            if t.index in prog.leaves:        # a ggml program uploads these (CANN: its copies' bytes)
                step.inputs[prog.leaves[t.index]] = path
    threshold = run.result.threshold
    for i in [i for i in run.check if i in prog.outputs]:
        node = g.tensors[i]
        ref = np.asarray(run.expected[i][0], np.float64)
        dev = save(f"out_{i}.bytes.npy", prog.raw[i])
        save(f"out_{i}.npy", prog.outputs[i])
        rpath = save(f"ref_{i}.npy", ref)
        if compared:
            step.checked.append(Checked(f"{node.op_desc} #{i}" + (f" {node.name}" if node.name else ""), dev, rpath,
                                        threshold, node.type.name, tuple(node.ne), tuple(node.nb),
                                        prog.checked[i], node.view_offs))
    return step


def _file_word(name: str) -> str:
    """A tensor name (any text, `--name`) as part of a file name: letters, digits, `.`,
    `-` and `_` kept, anything else `_`."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name or "")[:48]


def _ops_version() -> str:
    from . import __version__
    return __version__


def _versions(device) -> dict:
    """What the outputs depend on: ops, the device's library (ggml and its source.json),
    the CANN toolkit or the simulator, the SoC."""
    from cannops.backend.base import device_details
    v: dict = {"ops": _ops_version(), "python": sys.version.split()[0]}
    v.update(getattr(device, "repro_versions", dict)())
    v.setdefault("device", device.description)
    state = sys.modules.get("cannops.backend.cann.sim.state")
    if "cann" not in v and state is not None:       # a ggml-cann on the simulated toolkit
        v["cann"] = f"CANN-SIM, ops' simulated toolkit (backend/cann/sim), SoC {state.soc_from_env()}"
    with contextlib.suppress(Exception):
        details = device_details(device.name)
        if details:
            v["device_details"] = details
    home = os.environ.get("ASCEND_TOOLKIT_HOME")
    if home:
        v["ascend_toolkit_home"] = home
    sim = {k: val for k, val in os.environ.items() if k.startswith("CANN_SIM_")}
    if sim:
        v["cann_sim_env"] = sim
    return v


def _readme(spec: ReproSpec, device, runs: list, versions: dict, death=None) -> str:
    from .compare import worst_elements
    last = runs[-1]
    r = last.result
    verdict = r.status if not r.reason else f"{r.status}: {r.reason}"
    lines = [f"# {last.case.op} on {device.name}: {r.status}", "",
             f"Case {code(last.case.name)} on {device.name}, inputs of seed {spec.seed}: **{printable(verdict)}**.", ""]
    if r.blame:
        lines += [f"Blame (each aclnn call evaluated again in float64 on its own inputs): {r.blame}.", ""]
    if spec.tensor_names:
        renames = ", ".join(f"{code(a)} is {code(b)}" for a, b in spec.tensor_names)
        lines += [f"Its tensors renamed (`--name`): {renames}.", ""]
    if len(runs) > 1:
        lines += ["The fault depends on what ran before: the program runs these cases in order, on one device,",
                  "and compares the last:", ""] + [f"{k}. `{x.case.name}`" for k, x in enumerate(runs, 1)] + [""]
    if death is not None:
        lines += _death_section(spec, runs, death)
    run_says = ("exit 0: the device dies again as it did; 1: it does not (the case computes, or dies otherwise)"
                if death else "exit 0: the stored device outputs reproduce byte for byte; 1: they do not")
    lines += ["## Versions", ""] + [f"* {k}: {printable(_flat(val))}" for k, val in versions.items()] + [""]
    lines += ["## Reproduce", "", "```sh", *_how(device), f"make run      # {run_says}", "```", "",
              "With ops itself:", ""]
    lines += fenced("sh", [f"ops test -b {device.name} --seed {spec.seed} -o "
                           + _quote(",".join(x.case.name for x in runs)),
                           " ".join(_quote(a) for a in ("ops", *spec.argv)) if spec.argv else ""]) + [""]
    lines += ["## Expected (reference) and got (device)", ""]
    if last.program.__dict__.get("error"):
        lines += [f"The run stopped at a refused call: {printable(last.program.error)}", ""]
    if death is not None:
        lines += ["No output: the device's process died before it had one (What happened, above).", ""]
    for i in [i for i in last.check if i in last.program.outputs]:
        node = last.graph.tensors[i]
        worst = worst_elements(last.expected[i][0], last.program.outputs[i])
        lines += [f"{code(node.op_desc)} (node #{i}, {node.type.name}, ne {list(node.ne)}):", ""]
        if not worst:
            lines += ["identical to the reference", ""]
            continue
        lines += ["| flat index | expected | got |", "| ---: | ---: | ---: |"]
        lines += [f"| {k} | {want:.9g} | {got:.9g} |" for k, got, want in worst] + [""]
    lines += _calls_section(device, last)
    lines += ["## Files", "",
              "* `repro.c`, `repro.h`, `Makefile`: the standalone program (no Python)",
              "* `caseK/in_*.npy`: inputs; `caseK/ref_*.npy`: the reference (float64); `caseK/out_*.npy`: "
              "the device's output (values), `caseK/out_*.bytes.npy` (its bytes, as compared)",
              "* `trace.json`: the device's ACL / aclnn calls, one record each (docs/trace-and-blame.md)",
              "* `repro.json`: the same facts for a program", ""]
    return "\n".join(lines)


def _death_section(spec: ReproSpec, runs: list, death) -> list[str]:
    """What happened when the device's process died: where, how, what it said last."""
    k = len(runs)
    lines = ["## What happened", "",
             f"The device's process died in case {k} of {len(spec.names)}"
             + (" (the cases after it did not run): " if k < len(spec.names) else ": ")
             + f"{_how_it_ended(death.exitcode)}, saying {code(death.message)}. It has no output to compare: "
             "`repro.c` runs the cases in a child process, and `make run` exits 0 when that child ends the same "
             f"way ({_how_it_ended(death.exitcode)}) with {code(death.expected)} in its output, 1 when it does not "
             "(the case computes: fixed, or it dies otherwise).", "",
             "The last lines of its output:", "", *fenced("", death.output.splitlines()), ""]
    return lines


def _how_it_ended(exitcode: int) -> str:
    import signal
    if exitcode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-exitcode).name}"
        return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def _calls_section(device, run) -> list[str]:
    """The compared case's aclnn calls in the trace's compact form (the blamed one marked
    `>`): those of the blame's run where there was one, else the recorded ones."""
    from cannops.backend import trace
    calls = [c for c in run.result.trace or run.calls if c["call"].startswith("aclnn")]
    if not calls:
        return []
    blamed, _ = trace.blame(calls, run.result.threshold, run.result.error)
    return (["## Calls", "", f"The aclnn calls of the case on {device.name} (`trace.json` has them in full, "
             "with the runtime's):", ""] + fenced("", trace.compact(calls, blamed)) + [""])


def _how(device) -> list[str]:
    if device.name.startswith("GGML-"):
        return ["make          # against GGML_PREFIX=<a ggml install prefix> (default: the one ops ran on)"]
    return ["make          # against ASCEND_TOOLKIT_HOME (a CANN toolkit: set_env.sh sets it)"]


def _flat(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


def _quote(text: str) -> str:
    import shlex
    return shlex.quote(text)
