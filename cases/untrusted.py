"""Reading files that come from outside (model files, case lists): regular files only, sizes and
line lengths bounded before they are read, and their text quoted where it reaches a terminal."""
from __future__ import annotations

import os
import stat
from typing import BinaryIO

MAX_TEXT_BYTES = 32 << 20   # a case list: the whole catalog's names take about 3 MB
MAX_LINE = 16 << 10         # a case name or an export line: the longest are under 1 KB
MAX_LINES = 1 << 20         # the whole catalog is some 60k names


class NotRegular(ValueError):
    """A path that names a FIFO, a device or a directory where a file was expected."""


def quoted(text: str, limit: int = 60) -> str:
    """`text` as a Python literal, at most `limit` characters of it: newlines, escape codes and
    other unprintable characters escaped, so that a value from a file cannot drive a terminal."""
    return repr(text[:limit]) + ("..." if len(text) > limit else "")


def open_regular(path: str) -> BinaryIO:
    """`path` opened for reading, refused (NotRegular) unless a regular file: a FIFO would block
    the open and a device never end (opened without blocking, then checked)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or the like"
            raise NotRegular(f"{path} is {kind}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_lines(path: str, max_bytes: int = MAX_TEXT_BYTES, max_line: int = MAX_LINE) -> list[str]:
    """The UTF-8 lines of a regular file of at most `max_bytes`, none longer than `max_line`
    bytes; OSError where it cannot be read, ValueError (one line, a short prefix of the line
    quoted) where it is too large."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise ValueError(f"{size:,} bytes, more than the {max_bytes:,} a case list may take")
        lines, total = [], 0
        for n, raw in enumerate(iter(lambda: f.readline(max_line + 1), b""), 1):
            if n > MAX_LINES:   # (32 MiB of empty lines would be 33M strings)
                raise ValueError(f"more than the {MAX_LINES:,} lines a case list may take")
            total += len(raw)
            text = raw.decode("utf-8", errors="replace")
            if len(raw) > max_line or total > max_bytes:
                raise ValueError(f"line {n} is longer than {max_line:,} bytes: {quoted(text)}"
                                 if len(raw) > max_line else f"more than the {max_bytes:,} bytes a case list may take")
            try:
                lines.append(raw.decode("utf-8").rstrip("\r\n"))
            except UnicodeDecodeError:
                raise ValueError(f"line {n} is not UTF-8: {quoted(text)}") from None
    return lines
