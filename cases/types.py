"""ggml tensor types: names, enum values, block sizes and NumPy dtypes.

Enum values and block/type sizes come from the `gguf` package (the same numbers as
ggml's `enum ggml_type`); bf16 comes from `ml_dtypes`.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import ml_dtypes
import numpy as np


def _gguf_constants():
    """gguf's table of ggml types (gguf/constants.py), read without the package's
    __init__, which imports its file reader and writer and their YAML metadata too (35 ms,
    a third of a worker's start-up besides NumPy): a private copy of that one module, for
    the enum values and sizes only (GGMLType.qtype is the package's own enum). Where it
    cannot be read alone, the package's."""
    try:
        where = importlib.util.find_spec("gguf").submodule_search_locations[0]
        spec = importlib.util.spec_from_file_location("_cannops_gguf_constants",
                                                      os.path.join(where, "constants.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    except Exception:
        from gguf import constants
        return constants


@dataclass(frozen=True)
class GGMLType:
    name: str            # ggml_type_name(): "f32", "q4_0", ...
    value: int           # enum ggml_type
    blck_size: int       # elements per block
    type_size: int       # bytes per block
    dtype: np.dtype | None  # element dtype, None for block-quantized types

    @property
    def is_quantized(self) -> bool:
        return self.dtype is None

    @property
    def is_float(self) -> bool:
        return self.dtype is not None and self.dtype.kind == "f" or self.name == "bf16"

    @property
    def is_int(self) -> bool:
        return self.dtype is not None and self.dtype.kind == "i"

    @property
    def qtype(self):
        """The gguf package's enum member of this type (what its codecs take)."""
        from gguf import GGMLQuantizationType
        try:
            return GGMLQuantizationType(self.value)
        except ValueError:
            raise NotImplementedError(f"{self.name}: unknown to the installed gguf package") from None

    def row_size(self, ne0: int) -> int:
        return self.type_size * ne0 // self.blck_size

    def __repr__(self) -> str:
        return self.name


_DTYPES = {
    "F32": np.dtype(np.float32), "F16": np.dtype(np.float16), "BF16": np.dtype(ml_dtypes.bfloat16),
    "F64": np.dtype(np.float64), "I8": np.dtype(np.int8), "I16": np.dtype(np.int16),
    "I32": np.dtype(np.int32), "I64": np.dtype(np.int64),
}

TYPES: dict[str, GGMLType] = {}
_gguf = _gguf_constants()
for _q in _gguf.GGMLQuantizationType:
    _blck, _size = _gguf.GGML_QUANT_SIZES[_q]
    # ggml_type_name() spells the k-quants with a capital K ("q4_K"); the lowercase spelling
    # is kept as an alias
    _name = _q.name.lower()
    _name = _name[:-1] + "K" if _name.endswith("_k") else _name
    TYPES[_name] = TYPES[_q.name.lower()] = GGMLType(_name, int(_q.value), _blck, _size, _DTYPES.get(_q.name))

# ggml types newer than the installed gguf package (enum value, block size, bytes per block
# as in ggml v0.20.2); gguf has no (de)quantizer for them
for _name, _value, _blck, _size in (("q2_0", 42, 64, 18),):
    TYPES.setdefault(_name, GGMLType(_name, _value, _blck, _size, None))

F32, F16, BF16, I32, I64 = (TYPES[n] for n in ("f32", "f16", "bf16", "i32", "i64"))


def ggml_type(t: GGMLType | str) -> GGMLType:
    """Accept a GGMLType or its ggml name."""
    if isinstance(t, GGMLType):
        return t
    try:
        return TYPES[t]
    except KeyError:
        raise ValueError(f"unknown ggml type {t!r}") from None
