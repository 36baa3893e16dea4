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


MAX_FRAME = 1 << 20    # bytes of one record (a call's takes a few hundred); a longer one is left out
MAX_DEPTH = 8          # nesting of a record's values (a call's tensor list: 5)
BAD_RECORD = "bad record"   # the key of what a frame that is no valid record gives: why


class Unframer:
    """A toolkit client's stdout, fed as it comes: `feed(bytes)` gives back, in order, the
    program's own bytes and the records (dicts) framed between them; a frame cut by the
    end of a chunk waits for the next one. A frame that is no valid record (not JSON, too
    deep, too long, a call that is not a string: `record_problem`) gives {BAD_RECORD: why}.
    Each byte is looked at a bounded number of times, and a frame held is at most
    MAX_FRAME bytes, however the output is cut into chunks."""

    def __init__(self):
        self.held: bytearray | None = None   # a frame begun (or a record separator), to its newline
        self.plain = False   # a line begun by a record separator that starts no frame: the program's
        self.over = 0        # bytes of a frame past MAX_FRAME, left out

    def feed(self, data: bytes) -> list:
        out: list = []
        pos, n = 0, len(data)
        while pos < n:
            if self.held is None and not self.plain:
                i = data.find(FRAME[:1], pos)
                if i < 0:
                    out.append(data[pos:])
                    break
                if i > pos:
                    out.append(data[pos:i])
                self.held, pos = bytearray(), i
            j = data.find(b"\n", pos)
            end = n if j < 0 else j + 1
            if self.plain:
                out.append(data[pos:end])
            else:
                self._hold(data[pos:end], out)
            pos = end
            if j >= 0:
                if self.held is not None:
                    out.append(self._record())
                self.held, self.plain, self.over = None, False, 0
        return out

    def _hold(self, piece: bytes, out: list) -> None:
        if self.over:
            self.over += len(piece)
            return
        self.held += piece
        if len(self.held) >= len(FRAME) and not self.held.startswith(FRAME):
            out.append(bytes(self.held))   # not a frame: the program's, to its newline
            self.held, self.plain = None, True
        elif len(self.held) > MAX_FRAME:
            self.over, self.held = len(self.held), bytearray(FRAME)

    def _record(self):
        if self.over:
            return {BAD_RECORD: f"a frame of {self.over} bytes, over the {MAX_FRAME} a record may take"}
        if not self.held.startswith(FRAME):
            return bytes(self.held)
        return _record(bytes(self.held[len(FRAME):]))

    def close(self) -> list:
        """What is held at the end (a frame the process died writing): as bytes."""
        held, over = self.held, self.over
        self.held, self.plain, self.over = None, False, 0
        if over:
            return [{BAD_RECORD: f"a frame cut by the end of the output, over {MAX_FRAME} bytes"}]
        return [bytes(held)] if held else []


def _record(raw: bytes) -> dict:
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {BAD_RECORD: "a frame that is not JSON (or nested too deep to read)"}
    why = record_problem(value)
    return value if why is None else {BAD_RECORD: why}


def _depth(value) -> int:
    """How deep lists and dicts nest in a JSON value (without recursion: any depth)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list)):
            deepest = max(deepest, d)
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _tensor_problem(t) -> str | None:
    if not isinstance(t, dict):
        return "a tensor that is not an object"
    if "dead" in t:
        return None
    if not isinstance(t.get("dtype"), str):
        return "a tensor without a dtype string"
    for k in ("ne", "strides"):
        v = t.get(k)
        if not isinstance(v, list) or not all(type(x) is int for x in v):
            return f"a tensor whose {k} is not a list of integers"
    return None


def record_problem(rec) -> str | None:
    """Why a framed value is no record that results may keep and the trace's lines can
    show (None: it is one): an object at most MAX_DEPTH deep; a call's fields of their
    types (call, note and error strings, rc an integer, tolerated and warnings lists of
    strings, NMSEs numbers, args an object of tensors, scalars, lists)."""
    if not isinstance(rec, dict):
        return "a frame that is not a JSON object"
    if _depth(rec) > MAX_DEPTH:
        return f"a record nested deeper than {MAX_DEPTH}"
    if "call" not in rec:
        return None   # (the simulator's hello; others are not read)
    if not isinstance(rec["call"], str):
        return "a call record whose call is not a string"
    for key in ("note", "error"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            return f"a call record whose {key} is not a string"
    if "rc" in rec and type(rec["rc"]) is not int:
        return "a call record whose rc is not an integer"
    for key in ("tolerated", "warnings"):
        v = rec.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            return f"a call record whose {key} is not a list of strings"
    for key in ("own_nmse", "floor_nmse"):
        if rec.get(key) is not None and not _is_number(rec[key]):
            return f"a call record whose {key} is not a number"
    if "at" in rec:   # ops resolves a site (callsite.py): a frame never brings one
        return "a call record with a resolved site (at)"
    site = rec.get("site")
    if site is not None and not (isinstance(site, list) and all(
            isinstance(f, list) and len(f) == 2 and all(isinstance(x, str) for x in f) for f in site)):
        return "a call record whose site is not a list of [object, offset] strings"
    return _args_problem(rec.get("args"))


def _args_problem(args) -> str | None:
    if args is None:
        return None
    if not isinstance(args, dict):
        return "a call record whose args is not an object"
    for v in args.values():
        if not isinstance(v, dict):
            continue
        if "dtype" in v and "ne" in v or "dead" in v:
            why = _tensor_problem(v)
        elif "list" in v:
            items = v["list"]
            why = "a tensor list that is not a list" if not isinstance(items, list) else next(
                filter(None, map(_tensor_problem, items)), None)
        else:
            why = None
        if why:
            return f"a call record with {why}"
    return None


def unframe(data: bytes) -> tuple[bytes, list[dict]]:
    """A whole output at once: the program's bytes, and the records."""
    u = Unframer()
    parts = u.feed(data) + u.close()
    return b"".join(p for p in parts if isinstance(p, bytes)), [p for p in parts if isinstance(p, dict)]
