"""The case catalog: ggml's tensor model (graph.py) and one module per op family."""
from .catalog import FAMILIES, Case, Family, all_cases, all_op_names, family, register  # noqa: F401
