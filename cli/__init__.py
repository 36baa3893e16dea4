"""The `ops` command line: test, perf, support, list, merge; the run engine is cli/engine/."""
from .engine import __version__  # noqa: F401  (the engine's package loads none of its modules)


def plural(n: int, noun: str) -> str:
    """'1 case', '2 cases': a count with its noun, as a message says it."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
