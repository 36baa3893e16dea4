"""The `ops` command line: test, perf, support, list, merge."""
__version__ = "0.1.0"


def plural(n: int, noun: str) -> str:
    """'1 case', '2 cases': a count with its noun, as a message says it."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
