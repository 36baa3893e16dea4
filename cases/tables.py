"""The costly lookup tables of libggml's iq quantizers, and which cases need them, read
from their names (a worker pool routes cases by them before anything imports NumPy)."""
from __future__ import annotations

import re

# libggml's quantizers of these types first build lookup tables (ggml_quantize_init: grids,
# neighbour maps), once per process and per table: seconds each on the wheel's libggml
# (measured on one core: iq1_s / iq1_m 8.8 s, iq2_s 3.9 s, iq2_xs 1.9 s, iq2_xxs 0.9 s,
# iq3 0.1-0.2 s), far more than quantizing a case's inputs. Types in one table share it.
QUANTIZER_TABLES = {"iq2_xxs": "iq2_xxs", "iq2_xs": "iq2_xs", "iq1_s": "iq1", "iq1_m": "iq1",
                    "iq2_s": "iq2_s", "iq3_xxs": "iq3_xxs", "iq3_s": "iq3_s"}
_TYPE_NAME = re.compile(r"\b(" + "|".join(QUANTIZER_TABLES) + r")\b")


def quantizer_table(vars: str) -> str | None:
    """The costly libggml quantizer table a case needs, read from its vars string (the
    first one named; None: none): a worker that built it should get the case."""
    m = _TYPE_NAME.search(vars)
    return QUANTIZER_TABLES[m.group(1)] if m else None


def quantizer_tables(vars: str) -> set[str]:
    """Every costly quantizer table named in a case's vars."""
    return {QUANTIZER_TABLES[m] for m in _TYPE_NAME.findall(vars)}
