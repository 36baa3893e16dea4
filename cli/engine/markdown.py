"""Markdown that holds any text (a tensor name, a device's output, a command line): code
spans and fenced blocks that nothing inside them can close or break."""
from __future__ import annotations

import re


def printable(text: str) -> str:
    """One line of text: every character that is not printable (a line break, an escape
    code) as \\xNN."""
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)


def code(text: str) -> str:
    """`text` as an inline code span: a fence of more backticks than any run in it."""
    flat = printable(text)
    fence = "`" * (1 + max((len(m) for m in re.findall("`+", flat)), default=0))
    pad = " " if flat[:1] == "`" or flat[-1:] == "`" else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def fenced(info: str, lines: list[str]) -> list[str]:
    """A fenced code block of `lines` (each made printable): its fence longer than any
    run of backticks in them, so no line closes it."""
    body = [printable(ln) for ln in lines]
    fence = "`" * max(3, 1 + max((len(m) for ln in body for m in re.findall("`+", ln)), default=0))
    return [fence + info, *body, fence]
