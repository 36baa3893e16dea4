"""The simulator's hygiene switches (docs/hygiene.md), read at aclInit, for any client
(ggml-cann through the simulated toolkit as much as ops' own layer):

* CANN_SIM_POISON=1: fresh device memory (aclrtMalloc) is 0xFF bytes, a NaN in every float
  type, instead of 0xA5: an element a kernel never writes shows as a NaN in its output;
* CANN_SIM_CHECK_INPUTS=1: an aclnn call whose output overlaps one of its inputs is refused
  at GetWorkspaceSize, unless the two are the one operand the operator takes in place (a
  parameter named ...Ref: the selfRef of aclnnInplace*).
"""
from __future__ import annotations

import os

from .binding import ffi, lib
from .descriptors import TensorDesc, reach
from .refusals import SimError
from .state import STATE

SWITCHES = ("CANN_SIM_POISON", "CANN_SIM_CHECK_INPUTS")


def switches_from_env() -> tuple[bool, bool]:
    """(poison, check_inputs) from the environment: each "0" / "1", unset for 0."""
    poison, check_inputs = map(flag_from_env, SWITCHES)
    return poison, check_inputs


def flag_from_env(name: str, default: str = "0") -> bool:
    """A switch of the simulator's: "0" / "1", unset for `default`; anything else refused."""
    text = os.environ.get(name, "") or default
    if text not in ("0", "1"):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{name}={text!r} is not 0 or 1")
    return text == "1"


def span(t: TensorDesc) -> tuple[int, int]:
    """The bytes [lo, hi) a tensor's view reaches (hi == lo: empty)."""
    size = t.np_dtype.itemsize
    if any(d == 0 for d in t.dims):
        return t.addr + t.offset * size, t.addr + t.offset * size
    lo, hi = reach(t.offset, t.dims, t.strides)
    return t.addr + lo * size, t.addr + (hi + 1) * size


def check_overlap(name: str, params, plan) -> None:
    """CANN_SIM_CHECK_INPUTS: refuse a plan whose output overlaps an input, but for an
    operand the operator declares in place: one descriptor passed as a parameter whose header
    name ends in Ref (aclnn's naming of what is read and written: selfRef, varRef, ...)."""
    names = _tensor_names(name, params)
    for o in plan.outputs:
        olo, ohi = span(o)
        for k, i in enumerate(plan.inputs):
            if i is o and any(n.endswith("Ref") for n in names.get(id(o), ())):
                continue
            ilo, ihi = span(i)
            if olo < ihi and ilo < ohi:
                raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                               f"{_name(names, o, 'an output', -1)} [{olo:#x}, +{ohi - olo}) overlaps "
                               f"{_name(names, i, f'input {k}', 0)} [{ilo:#x}, +{ihi - ilo}), which "
                               f"aclnn{name} does not take in place (CANN_SIM_CHECK_INPUTS)")


def _name(names: dict[int, list[str]], t: TensorDesc, default: str, which: int) -> str:
    """A descriptor by its parameter's name: the first one passing it for an input, the
    last for an output (aclnn puts outputs last)."""
    found = names.get(id(t))
    return found[which] if found else default


def _tensor_names(name: str, params) -> dict[int, list[str]]:
    """id(descriptor) -> the header's names of the parameters that passed it."""
    from .trace import param_names
    out: dict[int, list[str]] = {}
    for n, p in zip(param_names(f"aclnn{name}GetWorkspaceSize"), params):
        if isinstance(p, ffi.CData) and ffi.typeof(p).cname.rstrip(" *").endswith("aclTensor") and p != ffi.NULL:
            t = STATE.tensors.objects.get(int(ffi.cast("uintptr_t", p)))
            if t is not None:
                out.setdefault(id(t), []).append(n)
    return out
