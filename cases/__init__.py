"""The case catalog: ggml's tensor model (graph.py) and one module per op family."""
_CATALOG = ("FAMILIES", "Case", "Family", "all_cases", "family", "register")


def __getattr__(name):
    # imported on first use: the names cache (cache.py) is read without NumPy or the catalog
    if name in _CATALOG:
        from . import catalog
        return getattr(catalog, name)
    raise AttributeError(name)
