"""Call traces of a CANN device's run, as results keep them: each record is one ACL /
aclnn call (a JSON object: `call`, `args`, `workspace`, `stream`, `rc`, `error`,
`tolerated`, `cube`, and after a replay `own_nmse` / `floor_nmse`); here their compact
form under a FAIL line and the blame that names the first call out of proportion.

Records come from the CANN simulator (backend/cann/sim/trace.py, which sees every call)
or from the native layer itself on a real device (native/aclnn/trace.c, its aclnn calls).
A client of the simulated toolkit (test-backend-ops under `ops tbo`) gets them framed in
its own stdout (`frame`, `Unframer`), where they fall between the lines it prints."""
from __future__ import annotations

import json

from . import callsite

# The blame names a call whose own error both exceeds the case's tolerance and is at
# least this share of the case's error: an error that small cannot have made the FAIL,
# however many calls it passed through (a softmax amplifies its logits' error by their
# magnitude, a few units, never a hundredfold here).
SHARE = 0.01


def _tensor(d: dict) -> str:
    if "dead" in d:
        return f"<dead {d['dead']}>"
    s = f"{d['dtype']}{d['ne']}"
    ne, st = d["ne"], d["strides"]
    expect, contiguous = 1, True
    for n, k in zip(reversed(ne), reversed(st)):
        contiguous &= n == 1 or k == expect
        expect *= n
    if not contiguous:
        s += f"/{st}"
    if d.get("offset"):
        s += f"+{d['offset']}"
    if d.get("format"):
        s += f":{d['format']}"
    return s.replace(" ", "")


def arg_text(v) -> str:
    if isinstance(v, dict):
        if "dtype" in v and "ne" in v or "dead" in v:
            return _tensor(v)
        if "scalar" in v:
            return f"{v['scalar']:g}" if isinstance(v["scalar"], float) else str(v["scalar"])
        if "ints" in v:
            return str(v["ints"]).replace(" ", "")
        if "list" in v:
            return "[" + ",".join(_tensor(t) for t in v["list"]) + "]"
    if v is None:
        return "null"
    return str(v)


def call_text(c: dict, site: bool = True) -> str:
    """One call on one line: aclnnMuls(self=FLOAT[2,3], other=0.5, out=FLOAT[2,3]) ws 0, then
    where the client made it (`site`, where known)."""
    if "note" in c:
        return f"{c['call']} {c['note']}"
    args = c.get("args") or {}
    text = c["call"] + "(" + ", ".join(f"{k}={arg_text(v)}" for k, v in args.items()) + ")"
    if c.get("workspace"):
        text += f" ws {c['workspace']}"
    if c.get("cube"):
        text += f" cube {c['cube']}"
    if c.get("rc"):
        text += f" -> {c['rc']}" + (f" {c['error'].splitlines()[0][:160]}" if c.get("error") else "")
    if c.get("tolerated"):
        text += f" tolerated [{','.join(c['tolerated'])}]"
    if c.get("warnings"):
        text += f" warning: {'; '.join(c['warnings'])}"
    if c.get("own_nmse") is not None:
        text += f" own NMSE {c['own_nmse']:.3g}"
    where = callsite.text(c) if site else ""
    return f"{text} {where}" if where else text


def compact(calls: list[dict], blamed: int | None = None, limit: int = 40) -> list[str]:
    """The trace as lines under a FAIL: numbered calls, the blamed one marked; past
    `limit` calls only the first ones, the blamed one and the failing ones."""
    keep = set(range(min(limit, len(calls))))
    keep |= {i for i, c in enumerate(calls) if c.get("rc")} | ({blamed} if blamed is not None else set())
    out, last = [], -1
    for i in sorted(keep):
        if i > last + 1:
            out.append(f"  ... {i - last - 1} calls")
        out.append(f"{'>' if i == blamed else ' '} #{i + 1} {call_text(calls[i])}")
        last = i
    if last < len(calls) - 1:
        out.append(f"  ... {len(calls) - 1 - last} calls")
    return out


def operator_calls(calls: list[dict]) -> list[int]:
    return [i for i, c in enumerate(calls) if c["call"].startswith("aclnn")]


def blame(calls: list[dict], threshold: float | None, error: float | None) -> tuple[int | None, str]:
    """(index of the call to blame, the phrase for the FAIL line): the first call that
    failed, else the first whose own error (own_nmse, from a float64 replay) is out of
    tolerance and out of proportion to the case's error; (None, what was seen) otherwise."""
    ops = operator_calls(calls)
    n = len(ops)

    def where(i: int) -> str:
        k = ops.index(i) + 1 if i in ops else None
        return f"call {k} of {n}" if k else f"call #{i + 1}"

    def named(i: int, what: str) -> str:   # the call, what it did, where the client made it
        site = callsite.text(calls[i])
        return f"{calls[i]['call']} ({what})" + (f" {site}" if site else "")
    for i, c in enumerate(calls):
        if c.get("rc"):   # its message is the FAIL's reason already, and on its trace line
            return i, f"{named(i, where(i))} returned {c['rc']}"
    judged = [i for i in ops if calls[i].get("own_nmse") is not None]
    if not judged:
        return None, ""
    bar = threshold if threshold is not None else 0.0
    if error is not None and error == error:   # not NaN
        bar = max(bar, SHARE * error)
    last = ops[-1]
    for i in judged:
        own = calls[i]["own_nmse"]
        if own > bar:
            before = f", before {calls[last]['call']}" if i != last else ""
            why = f"own NMSE {own:.3g} > {bar:.3g}"
            floor = calls[i].get("floor_nmse")
            if floor and own <= 2 * floor:
                why += f": its output type's rounding, {floor:.3g}"
            return i, f"{named(i, where(i) + before)} out of tolerance ({why})"
    worst = max(judged, key=lambda i: calls[i]["own_nmse"])
    return None, (f"every call computed what it was asked (no aclnn call out of tolerance on its own "
                  f"inputs; largest own NMSE {calls[worst]['own_nmse']:.3g}, {named(worst, where(worst))}): "
                  f"the fault is in the calls' arguments or their order")


# --- records framed in a toolkit client's stdout (CANN_SIM_TRACE=1) ----------------------

OWN_KEYS = ("own_nmse", "floor_nmse", "exact_error")


def replayed(calls: list[dict], rec: dict) -> None:
    """A `replay` record (CANN_SIM_BLAME=1: a call's own error, framed once it ran): onto
    the call among `calls` that carries its index `i`."""
    k = rec.get("replay")
    for c in reversed(calls):
        if isinstance(k, int) and c.get("i") == k:
            c.update({key: rec[key] for key in OWN_KEYS if isinstance(rec.get(key), (int, float, str))})
            return


# A frame: this, one JSON object (ASCII: json escapes every control byte), a newline. The
# record separator byte never appears in what test-backend-ops prints, and a frame may
# fall in the middle of a line (the checks a FAIL prints before its name): a reader takes
# frames out of the bytes before it splits them into lines.
FRAME = b"\x1ecann-sim "


def frame(record: dict) -> bytes:
    return FRAME + json.dumps(record, separators=(",", ":")).encode() + b"\n"


class Unframer:
    """A toolkit client's stdout, fed as it comes: `feed(bytes)` gives back, in order, the
    program's own bytes and the records (dicts) framed between them; a frame cut by the
    end of a chunk waits for the next one."""

    def __init__(self):
        self.held = b""

    def feed(self, data: bytes) -> list:
        data, self.held = self.held + data, b""
        out: list = []
        while data:
            i = data.find(FRAME[:1])
            if i < 0:
                out.append(data)
                break
            if i:
                out.append(data[:i])
            j = data.find(b"\n", i)
            if j < 0:
                self.held = data[i:]
                break
            record = _record(data[i:j]) if data.startswith(FRAME, i) else None
            out.append(data[i:j + 1] if record is None else record)   # not a frame: the program's
            data = data[j + 1:]
        return out

    def close(self) -> list:
        """What is held at the end (a frame the process died writing): as bytes."""
        held, self.held = self.held, b""
        return [held] if held else []


def _record(raw: bytes) -> dict | None:
    try:
        value = json.loads(raw[len(FRAME):])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def unframe(data: bytes) -> tuple[bytes, list[dict]]:
    """A whole output at once: the program's bytes, and the records."""
    u = Unframer()
    parts = u.feed(data) + u.close()
    return b"".join(p for p in parts if isinstance(p, bytes)), [p for p in parts if isinstance(p, dict)]
