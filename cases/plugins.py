"""The family-plugin loader that every registry shares: it imports, once, each module of a
package whose import registers that family's entries (cases, references, ggml replays,
CANN rules, simulator operators), so adding a family is adding a file."""
from __future__ import annotations

import importlib
import pkgutil

_loaded: set[tuple[str, str]] = set()


def load_plugins(package: str, prefix: str = "", skip: tuple[str, ...] = ()) -> None:
    """Import every module of `package` whose name starts with `prefix` and is not in
    `skip`, in name order, the first time it is asked for."""
    if (package, prefix) in _loaded:
        return
    # marked before importing: a family module that asks its registry for the families
    # while it is being imported must not import them all over again
    _loaded.add((package, prefix))
    path = importlib.import_module(package).__path__
    for name in sorted(m.name for m in pkgutil.iter_modules(path)):
        if name.startswith(prefix) and name not in skip:
            importlib.import_module(f"{package}.{name}")
