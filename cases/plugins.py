"""The family-plugin loader that every registry shares: it imports, once, each module of a
package whose import registers that family's entries (cases, references, ggml replays,
CANN rules, simulator operators), so adding a family is adding a file.

Which modules are plugins is said by the modules themselves: by their name's prefix
(rules_*, ops_*), or, where a package mixes plugins with the modules they are built from
(cases/), by what a plugin does: it calls its registry's `register(...)` as a statement of
its own (at column 0 of its source), which is read without importing anything.
`plugin_modules` is the one place that decides; tests/test_imports.py asks it too, to
check the layering of every module a `load_plugins` call imports."""
from __future__ import annotations

import importlib
import pathlib
import pkgutil
import re

_loaded: set[tuple[str, str, str | None]] = set()


def _source(folder: pathlib.Path, name: str) -> str:
    path = folder / f"{name}.py"
    return (path if path.exists() else folder / name / "__init__.py").read_text(encoding="utf-8")


def plugin_modules(folder: str | pathlib.Path, prefix: str = "", registers: str | None = None) -> list[str]:
    """The names of the modules of the package in `folder` that load_plugins imports, in
    name order: each whose name starts with `prefix` and, when `registers` is given, whose
    source calls `registers(` at module level."""
    folder = pathlib.Path(folder)
    names = sorted(m.name for m in pkgutil.iter_modules([str(folder)]) if m.name.startswith(prefix))
    if registers is None:
        return names
    call = re.compile(rf"^{re.escape(registers)}\(", re.M)
    return [n for n in names if call.search(_source(folder, n))]


def load_plugins(package: str, prefix: str = "", registers: str | None = None) -> None:
    """Import the plugin modules of `package` (plugin_modules: by `prefix`, and by a call
    of `registers` where given), in name order, the first time it is asked for."""
    if (package, prefix, registers) in _loaded:
        return
    # marked before importing: a family module that asks its registry for the families
    # while it is being imported must not import them all over again
    _loaded.add((package, prefix, registers))
    for folder in importlib.import_module(package).__path__:
        for name in plugin_modules(folder, prefix, registers):
            importlib.import_module(f"{package}.{name}")
