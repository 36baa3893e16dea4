"""A GGUF file's header read with bounds: its metadata and tensor infos, every count and length
checked against what is left of the file and against limits before it is read, so that a
damaged or hostile file costs bounded memory and time (the weights are never read).

The layout is gguf's (ggml/docs/gguf.md; gguf.cpp's reader): magic, version, tensor and key
counts, the keys (a string, a value type, the value), then the tensor infos (a name, the
dims, a type, an offset). The gguf package's GGUFReader maps every array and string of the
file into objects (a vocabulary of 300k strings took 450 MB, an array count of 2^40 grew
without bound): this reader walks them with a bounded buffer and keeps only the small values.
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO

from .untrusted import open_regular, quoted

MAGIC = b"GGUF"
MAX_KEYS = 1 << 14          # real models hold tens of keys
MAX_TENSORS = 1 << 16       # DeepSeek-V3 has about 1,150 tensor infos; unmerged experts some 10k
MAX_KEY_BYTES = 1 << 10     # gguf.md allows 65535; real keys are under 100 bytes
MAX_NAME_BYTES = 63         # GGML_MAX_NAME (64) with its NUL
MAX_ARRAY = 1 << 24         # elements of one array (vocabularies: 32k to 262k strings)
MAX_DIMS = 4                # GGML_MAX_DIMS
KEEP_STRING = 1 << 16       # a longer string value (a chat template, a licence) is not kept
KEEP_ARRAY = 1 << 10        # a longer array (a vocabulary) is not kept: per-layer values are
KEEP_TOTAL = 1 << 16        # array elements kept over the whole file
KEEP_BYTES = 4 << 20        # string bytes kept over the whole file
INT64_MAX = (1 << 63) - 1
CHUNK = 1 << 16             # bytes read at a time

# GGUF value types (gguf.md's gguf_metadata_value_type) -> struct format of a scalar
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
TYPE_NAMES = {0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32",
              7: "bool", 8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64"}
STRING, ARRAY = 8, 9


@dataclass(frozen=True)
class Skipped:
    """A value too large to keep (a vocabulary, a long text): what it was, not its contents."""
    what: str

    def __repr__(self) -> str:
        return self.what


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type: int        # ggml_type's enum value
    ne: tuple[int, ...]


class GGUFError(ValueError):
    """A file that is not a GGUF, or whose header is damaged: one line naming the file and where."""


class _Cursor:
    """Reads forward through the header, never past the file's end: every length and count is
    checked against the bytes left before anything is read or skipped. Reads go through a
    buffer of CHUNK bytes, so that walking a vocabulary costs neither a call per string nor
    memory."""

    def __init__(self, f: BinaryIO, size: int):
        self.f, self.left, self.order = f, size, "<"
        self.kept, self.kept_bytes = 0, 0   # array elements and string bytes kept so far
        self.buf, self.pos = b"", 0

    def need(self, n: int, what: str) -> None:
        if n > self.left:
            raise GGUFError(f"{what} needs {n:,} bytes, the file has {self.left:,} left")

    def _fill(self, n: int, what: str) -> None:
        """At least n bytes buffered from pos (n within what is left)."""
        if len(self.buf) - self.pos < n:
            self.buf = self.buf[self.pos:] + self.f.read(max(CHUNK, n))
            self.pos = 0
            if len(self.buf) < n:
                raise GGUFError(f"{what}: the file ended early (did it change while read?)")

    def take(self, n: int, what: str) -> bytes:
        self.need(n, what)
        self._fill(n, what)
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        self.left -= n
        return data

    def skip(self, n: int, what: str) -> None:
        self.need(n, what)
        self.pos += n
        self.left -= n
        if self.pos > len(self.buf):
            self.f.seek(self.pos - len(self.buf), os.SEEK_CUR)
            self.buf, self.pos = b"", 0

    def skip_strings(self, n: int, what: str) -> None:
        """n strings skipped, each length checked (the walk of a vocabulary, inlined)."""
        length = struct.Struct(self.order + "Q").unpack_from
        for i in range(n):
            if self.left < 8 or len(self.buf) - self.pos < 8:
                self.need(8, f"{what}[{i}]")
                self._fill(8, f"{what}[{i}]")
            (size,) = length(self.buf, self.pos)
            self.pos += 8
            self.left -= 8
            self.skip(size, f"{what}[{i}]")

    def scalar(self, fmt: str, what: str) -> Any:
        return struct.unpack(self.order + fmt, self.take(struct.calcsize(fmt), what))[0]

    def count(self, what: str, limit: int, unit: int) -> int:
        """A u64 count of things of at least `unit` bytes each, refused past `limit` or past
        what the rest of the file can hold."""
        n = self.scalar("Q", what)
        if n > limit:
            raise GGUFError(f"{what}: a count of {n:,}, more than the {limit:,} read")
        self.need(n * unit, f"{what} ({n:,} of at least {unit} bytes)")
        return n

    def string(self, what: str, limit: int, keep: int, counted: bool = True) -> str | Skipped:
        """A string of at most `limit` bytes, kept up to `keep` bytes (and, `counted`, within
        KEEP_BYTES over the file), else skipped."""
        n = self.count(what, limit, 1)
        if n > keep or counted and self.kept_bytes + n > KEEP_BYTES:
            self.skip(n, what)
            return Skipped(f"<a string of {n:,} bytes>")
        if counted:
            self.kept_bytes += n
        try:
            return self.take(n, what).decode("utf-8")
        except UnicodeDecodeError:
            raise GGUFError(f"{what}: not UTF-8") from None

    def value(self, vtype: int, what: str, keep: bool) -> Any:
        if vtype in SCALARS:
            return self.scalar(SCALARS[vtype], what)
        if vtype == STRING:
            return self.string(what, INT64_MAX, KEEP_STRING if keep else -1)
        if vtype != ARRAY:
            raise GGUFError(f"{what}: unknown value type {vtype}")
        etype = self.scalar("I", f"{what}'s element type")
        if etype not in SCALARS and etype != STRING:
            raise GGUFError(f"{what}: an array of {TYPE_NAMES.get(etype, f'type {etype}')} is not read")
        unit = struct.calcsize(SCALARS[etype]) if etype in SCALARS else 8
        n = self.count(f"{what}'s array", MAX_ARRAY, unit)
        desc = Skipped(f"<an array of {n:,} {TYPE_NAMES[etype]}>")
        if not keep or n > KEEP_ARRAY or self.kept + n > KEEP_TOTAL:
            if etype in SCALARS:
                self.skip(n * unit, what)
            else:
                self.skip_strings(n, what)
            return desc
        self.kept += n
        return [self.value(etype, f"{what}[{i}]", keep) for i in range(n)]


def _kv(cur: _Cursor, i: int, skip_prefixes: tuple[str, ...]) -> tuple[str, Any]:
    key = cur.string(f"key #{i}'s name", MAX_KEY_BYTES, MAX_KEY_BYTES, counted=False)
    vtype = cur.scalar("I", f"key {quoted(key)}'s type")
    keep = not key.startswith(skip_prefixes)
    return key, cur.value(vtype, f"key {quoted(key)}", keep)


def _tensor_info(cur: _Cursor, i: int) -> TensorInfo:
    name = cur.string(f"tensor #{i}'s name", MAX_NAME_BYTES, MAX_NAME_BYTES, counted=False)
    what = f"tensor {quoted(name)}"
    n_dims = cur.scalar("I", f"{what}'s n_dims")
    if n_dims > MAX_DIMS:
        raise GGUFError(f"{what}: {n_dims} dims, more than ggml's {MAX_DIMS}")
    ne = tuple(cur.scalar("Q", f"{what}'s ne") for _ in range(n_dims))
    elements = 1
    for n in ne:
        elements *= n
    if elements > INT64_MAX:
        raise GGUFError(f"{what}: ne {list(ne)} has more than 2^63 elements")
    ttype = cur.scalar("I", f"{what}'s type")
    cur.scalar("Q", f"{what}'s offset")
    return TensorInfo(name, ttype, ne)


def read_header(path: str, skip_prefixes: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[TensorInfo]]:
    """The keys (name -> value; those under `skip_prefixes` and the large ones as Skipped) and
    tensor infos of the GGUF at `path`; OSError where it cannot be opened, NotRegular where it
    is not a regular file, GGUFError naming what is damaged."""
    with open_regular(path) as f:
        cur = _Cursor(f, os.fstat(f.fileno()).st_size)
        if cur.take(min(4, cur.left), "the magic") != MAGIC:
            raise GGUFError("not a GGUF file (no GGUF magic)")
        version = cur.scalar("I", "the version")
        if version not in (2, 3) and struct.unpack(">I", struct.pack("<I", version))[0] in (2, 3):
            cur.order = ">"   # a big-endian GGUF (gguf-py's --bigendian)
        elif version not in (2, 3):
            raise GGUFError(f"GGUF version {version}: only versions 2 and 3 are read")
        n_tensors = cur.scalar("Q", "the tensor count")
        n_keys = cur.scalar("Q", "the key count")
        for what, n, limit in (("tensors", n_tensors, MAX_TENSORS), ("keys", n_keys, MAX_KEYS)):
            if n > limit:
                raise GGUFError(f"a header of {n:,} {what}, more than the {limit:,} read")
        # a key takes at least 8 + 4 + 1 bytes, a tensor info 8 + 4 + 4 + 8
        cur.need(13 * n_keys + 24 * n_tensors, f"{n_keys:,} keys and {n_tensors:,} tensor infos")
        keys = dict(_kv(cur, i, skip_prefixes) for i in range(n_keys))
        tensors = [_tensor_info(cur, i) for i in range(n_tensors)]
    return keys, tensors
