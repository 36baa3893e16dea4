"""JUnit XML (the Ant / Surefire form that Jenkins, GitLab, GitHub and Azure read): one
testsuite per device, one testcase per case; a FAIL is a <failure> with its reason, a case
not supported (or skipped) is <skipped>, a known deviation passes with a note in
<system-out>. In perf, a case slower than the baseline is a <failure> too."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from .engine import DEVIATION, FAIL, NOT_SUPPORTED, SKIPPED, CaseResult, Run

# characters XML 1.0 cannot carry (a worker's log tail may hold any byte)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _text(s: str) -> str:
    return _NOT_XML.sub("\ufffd", s)


def _seconds(x: float) -> str:
    return f"{x:.6f}"


def _testcase(r: CaseResult, mode: str, slower: dict | None) -> tuple[ET.Element, str]:
    """The element and its outcome: passed / failure / skipped."""
    tc = ET.Element("testcase", name=_text(r.name), classname=_text(f"{r.device}.{r.op}"),
                    time=_seconds(r.seconds if mode != "perf" else r.time_us * r.n_runs / 1e6))
    outcome = "passed"
    first = r.reason.partition("\n")[0]
    if r.status == FAIL:
        f = ET.SubElement(tc, "failure", message=_text(first or "FAIL"), type="FAIL")
        detail = r.reason
        if r.error is not None:
            detail += f"\n{r.metric or 'error'} = {r.error:.9g}" + (
                f" (threshold {r.threshold:.9g})" if r.threshold is not None else "")
        if r.max_abs is not None:
            detail += (f"\nstrict: max abs error {r.max_abs:.9g}, max rel error {r.max_rel:.9g}, "
                       f"worst element {r.worst_index}")
        if r.blame:
            detail += f"\nblame: {r.blame}"
        if r.trace:
            from .engine import trace_lines   # its module needs NumPy
            detail += "".join(f"\n{ln}" for ln in trace_lines(r))
        f.text = _text(detail)
        outcome = "failure"
    elif r.status in (NOT_SUPPORTED, SKIPPED):
        msg = f"not supported [{r.blamed}]" if r.status == NOT_SUPPORTED else "skipped"
        ET.SubElement(tc, "skipped", message=_text(msg + (f": {first}" if first else "")))
        outcome = "skipped"
    elif slower and r.name in slower:
        base, change = slower[r.name]
        f = ET.SubElement(tc, "failure", type="SLOWER",
                          message=f"{change:+.1f}% slower than the baseline")
        f.text = f"{r.time_us:.2f} us/run now, {base:.2f} us/run in the baseline ({change:+.1f}%)"
        outcome = "failure"
    if r.status == DEVIATION:
        ET.SubElement(tc, "system-out").text = _text(f"known deviation [{r.device}: {r.note}]: {r.reason}")
    elif mode == "perf" and r.n_runs:
        rate = f"{r.flops / 1e9:.2f} GFLOPS" if r.flops else f"{r.bandwidth_gb_s:.2f} GB/s"
        spread = f" ±{r.spread:.1%}" if r.spread is not None else ""
        doubts = f" [{r.doubts}]" if r.doubts else ""
        ET.SubElement(tc, "system-out").text = f"{r.n_runs} runs - {r.time_us:.2f} us/run{spread} - {rate}{doubts}"
    return tc, outcome


def junit_xml(run: Run, slower: dict[str, dict[str, tuple[float, float]]] | None = None) -> str:
    """The run as a JUnit XML document. `slower`: device -> case name -> (baseline us/run,
    change in %), for perf cases flagged against a baseline."""
    from .support import run_devices
    root = ET.Element("testsuites", name=f"ops {run.mode}")
    totals = dict(tests=0, failures=0, errors=0, skipped=0, time=0.0)
    results = sorted(run.results, key=lambda r: r.index)
    for device in run_devices(run):
        suite = ET.SubElement(root, "testsuite", name=f"ops {run.mode} {device}")
        props = ET.SubElement(suite, "properties")
        for k, v in (("device", device), ("mode", run.mode), ("seed", run.seed),
                     ("ops_filter", run.ops_filter), ("params_filter", run.params_filter),
                     ("shard", run.shard), ("sample", run.sample), ("version", run.version), ("interrupted", run.interrupted),
                     ("strict", run.strict)):
            if v is not None:
                text = str(v).lower() if isinstance(v, bool) else str(v)
                ET.SubElement(props, "property", name=k, value=_text(text))
        counts = dict(tests=0, failures=0, errors=0, skipped=0, time=0.0)
        for r in results:
            if r.device != device:
                continue
            tc, outcome = _testcase(r, run.mode, (slower or {}).get(device))
            suite.append(tc)
            counts["tests"] += 1
            counts["time"] += float(tc.get("time"))
            if outcome == "failure":
                counts["failures"] += 1
            elif outcome == "skipped":
                counts["skipped"] += 1
        for k, v in counts.items():
            suite.set(k, _seconds(v) if k == "time" else str(v))
            totals[k] += v
    for k, v in totals.items():
        root.set(k, _seconds(v) if k == "time" else str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(run: Run, out, slower=None) -> None:
    out.write(junit_xml(run, slower))
