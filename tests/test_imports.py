"""No import cycle among the package's modules and the layering cli -> engine -> backend ->
cases -> native, module by module. Read from the sources: imports inside functions and
TYPE_CHECKING blocks included (an annotation's import is still a dependency a reader
follows), imports in Python code held in a string (code embedded in a built library), and,
for the layering, the modules each `load_plugins` call imports (cases/plugins.py)."""
import ast
import importlib
import pathlib

import pytest

ROOTS = ("cannops.cli", "cannops.cases", "cannops.backend", "cannops.native")


def _modules(roots: dict[str, pathlib.Path] | None = None) -> dict[str, tuple[pathlib.Path, bool]]:
    """module name -> (source file, is a package), for each root package -> its folder
    (default: ours)."""
    if roots is None:
        roots = {r: pathlib.Path(importlib.import_module(r).__path__[0]) for r in ROOTS}
    mods = {}
    for root, folder in roots.items():
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


def _embedded(tree: ast.AST) -> list[ast.AST]:
    """The import statements of Python code held in the module's strings (e.g. the init
    code a built library runs)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            found += [n for code in _parsed(node.value) for n in ast.walk(code)
                      if isinstance(n, ast.Import) or isinstance(n, ast.ImportFrom) and not n.level]
    return found


def _parsed(text: str) -> list[ast.AST]:
    """`text` as Python code, or (a template with {fields}, a fragment) each of its lines
    that parses on its own."""
    try:
        return [ast.parse(text)]
    except SyntaxError:
        pass
    found = []
    for line in text.splitlines():
        try:
            found.append(ast.parse(line.strip()))
        except SyntaxError:
            continue
    return found


def _imports(name: str, path: pathlib.Path, is_pkg: bool, mods) -> set[str]:
    tree = ast.parse(path.read_text())
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in list(ast.walk(tree)) + _embedded(tree):
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


def _plugin_loads(name: str, path: pathlib.Path, is_pkg: bool, mods) -> set[str]:
    """The modules the `load_plugins(package, prefix=..., registers=...)` calls of a module
    import, as cases/plugins.py chooses them; a call whose package or options are not
    literal (or the module's own __name__ / __package__) cannot be checked and fails."""
    from cannops.cases.plugins import plugin_modules
    package = name if is_pkg else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "load_plugins"):
            continue
        args = dict(zip(("package", "prefix", "registers"), node.args)) | {k.arg: k.value for k in node.keywords}
        where = args["package"]
        names = {"__name__": name, "__package__": package}
        target = names.get(getattr(where, "id", None), getattr(where, "value", None))
        options = {k: v.value for k, v in args.items() if k != "package" and isinstance(v, ast.Constant)}
        assert isinstance(target, str) and len(options) == len(args) - 1, \
            f"{name}: a load_plugins call this test cannot follow: {ast.unparse(node)}"
        assert target in mods and mods[target][1], f"{name}: load_plugins of {target}, not a package of ours"
        found |= {f"{target}.{m}" for m in plugin_modules(mods[target][0].parent, **options)}
    return found


def _graph(mods) -> dict[str, set[str]]:
    return {m: _imports(m, path, is_pkg, mods) for m, (path, is_pkg) in mods.items()}


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
    """Plugin loads are left out: a plugin imports its registry, which loads it when first
    asked (cases/plugins.py), a loop by design that runs once."""
    mods = _modules()
    assert len(mods) > 100
    assert _cycles(_graph(mods)) == []


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


def _with_plugin_loads(mods) -> dict[str, set[str]]:
    """The import graph, each module's plugin loads added to its imports."""
    graph = _graph(mods)
    return {m: graph[m] | _plugin_loads(m, path, is_pkg, mods) for m, (path, is_pkg) in mods.items()}


def test_imports_point_one_way():
    """Plugin loads included: a registry must not load modules of a layer above its own."""
    mods = _modules()
    graph = _with_plugin_loads(mods)
    assert sum(map(len, graph.values())) - sum(map(len, _graph(mods).values())) > 100   # the loads seen
    assert _against_the_layers(graph) == []


def test_plugin_loads_and_embedded_code_against_the_layers_are_found(tmp_path):
    """Planted: a registry of cases loading a package of backend's, a family module of
    cases (found by its register call) importing from backend, and native code that
    embeds an import of backend in a string."""
    files = {"cases/__init__.py": "", "backend/__init__.py": "", "native/__init__.py": "",
             "backend/fams/__init__.py": "", "backend/fams/fam_a.py": "", "backend/fams/other.py": "",
             "cases/registry.py": 'from .plugins import load_plugins\nload_plugins("cannops.backend.fams", "fam_")\n',
             "cases/catalog.py": "def load_all():\n    load_plugins(__package__, registers='register')\n",
             "cases/rows.py": "def build():\n    from cannops.backend.fams import other\n\n\nregister(build)\n",
             "cases/model.py": "def register(f):\n    pass\n",
             "native/lib.py": 'INIT = """\nimport sys\nfor d in {dirs!r}:\n    pass\nfrom cannops.backend import fams\n"""\n'}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    mods = _modules({f"cannops.{r}": tmp_path / r for r in ("cases", "backend", "native")})
    assert _plugin_loads("cannops.cases.catalog", *mods["cannops.cases.catalog"], mods) == {"cannops.cases.rows"}
    assert _against_the_layers(_with_plugin_loads(mods)) == [
        "cannops.cases.registry imports cannops.backend.fams.fam_a: cannops.cases is below cannops.backend",
        "cannops.cases.rows imports cannops.backend.fams.other: cannops.cases is below cannops.backend",
        "cannops.native.lib imports cannops.backend.fams: cannops.native is below cannops.backend"]
    (tmp_path / "cases" / "registry.py").write_text("load_plugins(PACKAGE)\n")
    with pytest.raises(AssertionError, match="cannot follow: load_plugins"):
        _with_plugin_loads(mods)


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
