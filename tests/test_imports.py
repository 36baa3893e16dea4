"""No import cycle among the package's modules: read from the sources (imports inside
functions included, TYPE_CHECKING blocks not), the import graph has no loop, so that the
layering cli -> backend -> cases -> native holds module by module too."""
import ast
import importlib
import pathlib

ROOTS = ("cannops.cli", "cannops.cases", "cannops.backend", "cannops.native")


def _modules() -> dict[str, tuple[pathlib.Path, bool]]:
    """module name -> (source file, is a package)"""
    mods = {}
    for root in ROOTS:
        folder = pathlib.Path(importlib.import_module(root).__path__[0])
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            mods[".".join([root] + parts[:-1 if is_pkg else None])] = (path, is_pkg)
    return mods


def _owner(name: str, mods) -> str | None:
    """The module of ours that `name` (a module, or a name inside one) lives in."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: pathlib.Path, is_pkg: bool, mods) -> set[str]:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []   # for annotations only: never imported at run time
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            mod = (base + (f".{node.module}" if node.module else "")) if node.level else node.module
            # `from pkg import sub` depends on the submodule, not on what pkg's __init__ imports
            subs = [f"{mod}.{a.name}" for a in node.names]
            targets = [s for s in subs if s in mods] + ([mod] if any(s not in mods for s in subs) else [])
        else:
            continue
        found.update(o for t in targets if t.startswith("cannops.") and (o := _owner(t, mods)) and o != name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on_stack.discard(comp[-1])
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    mods = _modules()
    assert len(mods) > 100
    graph = {m: _imports(m, path, is_pkg, mods) for m, (path, is_pkg) in mods.items()}
    assert _cycles(graph) == []


def test_a_cycle_is_found():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The layers, highest first: a module imports its own layer's modules and lower layers' only
# (DESIGN.md: cli -> engine -> backend -> cases -> native); the command line reaches the
# engine through its package's API (cli/engine/__init__.py), never its modules.
LAYERS = ("cannops.cli", "cannops.cli.engine", "cannops.backend", "cannops.cases", "cannops.native")
ENGINE = "cannops.cli.engine"


def _layer(module: str) -> int:
    return max((i for i, root in enumerate(LAYERS) if module == root or module.startswith(root + ".")),
               key=lambda i: len(LAYERS[i]))


def _against_the_layers(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            if _layer(t) < _layer(m):
                found.append(f"{m} imports {t}: {LAYERS[_layer(m)]} is below {LAYERS[_layer(t)]}")
            elif _layer(m) == 0 and _layer(t) == 1 and t != ENGINE:
                found.append(f"{m} imports {t}: the engine's modules are reached through {ENGINE}'s API")
    return found


def test_imports_point_one_way():
    mods = _modules()
    graph = {m: _imports(m, path, is_pkg, mods) for m, (path, is_pkg) in mods.items()}
    assert _against_the_layers(graph) == []


def test_an_import_against_the_layers_is_found():
    graph = {"cannops.cases.x": {"cannops.backend.y"}, "cannops.cli.main": {"cannops.cli.engine.runner"},
             "cannops.cli.engine.runner": {"cannops.cases.x", "cannops.cli.engine.spec"},
             "cannops.cli.options": {"cannops.cli.engine"}}
    assert _against_the_layers(graph) == [
        "cannops.cases.x imports cannops.backend.y: cannops.cases is below cannops.backend",
        "cannops.cli.main imports cannops.cli.engine.runner: the engine's modules are reached through "
        "cannops.cli.engine's API"]


def test_the_engines_api_names_no_module_of_its_own():
    """A public name that is also a submodule's would hide the module from `from . import`
    inside the engine (its __getattr__ answers first)."""
    from cannops.cli import engine
    modules = {p.stem for p in pathlib.Path(engine.__path__[0]).glob("*.py")}
    assert not modules & set(engine._API)
    for name in engine.__all__:
        assert getattr(engine, name) is not None


def test_no_source_loads_c_through_ctypes():
    """C is reached through cffi only (the project's rule): no module imports ctypes."""
    import re
    root = pathlib.Path(__file__).resolve().parents[1]
    users = [str(f.relative_to(root)) for d in ("cli", "backend", "cases", "native", "bench")
             for f in (root / d).rglob("*.py") if re.search(r"^\s*(import ctypes|from ctypes\b)", f.read_text(), re.M)]
    assert users == []
