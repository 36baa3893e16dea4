"""The aclnn two-phase protocol in the simulator, and the checks operators share.

An operator module registers, per aclnn operator, a *prepare* function with
`@operator("Add")`. It receives the GetWorkspaceSize arguments (cffi values), checks
them as the operator's documentation says (raising `invalid(...)` / SimError with the
documented code), and returns a `Plan`: the inputs and outputs it touches and a
NumPy `compute(*inputs) -> result(s)`. The framework then
  * asks for workspace to gather every non-contiguous input (and really gathers it
    there at run time, so a short or reused workspace corrupts nothing silently);
  * hands out a single-use aclOpExecutor, which its launch releases (or, once made
    repeatable with aclSetAclOpExecutorRepeatable, aclDestroyAclOpExecutor): one that
    gets neither is reported as a leak when the device closes;
  * at launch, checks executor, workspace and stream, and queues the plan on the
    stream; it runs when the stream is synchronised, reading device memory then.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Literal, Sequence, overload

import numpy as np

from .binding import ffi, lib

from ..soc import unoffered
from . import cost, dtypes, faults, trace
from .descriptors import ScalarDesc, TensorDesc
from .entries import api_entries, entry, guarded
from .hygiene import check_overlap
from .refusals import SimError
from .state import STATE, soc_family, tolerate
from .streams import enqueue, get_stream

OPS: dict[str, Callable[..., "Plan"]] = {}
MAX_DIMS = 8
# Per simulated SoC family, next to each operator's A2 / A3 checks: the operators its pages
# do not offer there (soc.UNOFFERED, with each page), and the dtypes its pages' rows leave
# out there, for every operator ("*") and per operator. The 310P: no BFLOAT16 ("Atlas 推理
# 系列产品：不支持BFLOAT16" on aclnnCast, aclnnAbs, aclnnCat, aclnnGatherV2, aclnnRmsNorm,
# aclnnReduceSum, aclnnMm, ...; where a page lists it with no 310P note, its op_api takes
# BF16 on DAV_2201 / regbase only: aclnnSigmoid, aclnnNorm, aclnnElu, aclnnArgsort), and
# the 310P notes of aclnnAbs, aclnnInplaceFillScalar, aclnnReflectionPad1d (their op_api's
# default lists agree); tests/test_cann_sim_tables.py checks them against the pages.
SOC_DTYPES_OUT: dict[str, dict[str, frozenset[str]]] = {
    "310P": {"*": frozenset({"bf16"}),
             "Abs": frozenset({"c64"}),
             "InplaceFillScalar": frozenset({"u16", "u32", "u64"}),
             "ReflectionPad1d": frozenset({"c64", "c128"})},
}
WS_ALIGN = 512


def operator(name: str, unit: str = cost.VECTOR, flops: Callable[["Plan"], int] = cost.ELEMENTWISE):
    """Register the prepare function of aclnn<name>, with the unit it runs on and its FLOP
    formula (cost.py: one per element of the largest tensor unless given)."""
    def deco(fn):
        OPS[name] = fn
        cost.register(name, unit, flops)
        return fn
    return deco


@dataclass(eq=False)
class Plan:
    compute: Callable[..., object]
    inputs: Sequence[TensorDesc] = ()
    outputs: Sequence[TensorDesc] = ()
    name: str = ""
    workspace: int = 0
    staged: list[int] = field(default_factory=list)   # workspace offset per input, -1: direct
    repeatable: bool = False
    call: int = -1        # its record in the call trace (trace.py), -1: not traced
    reads: Sequence[TensorDesc] = ()   # tensors it reads that compute() is not handed (cost.py)
    sizes: dict = field(default_factory=dict)   # what its FLOP formula needs beyond the tensors


# ------------------------------------------------------------------- checks ----

def invalid(message: str) -> SimError:
    return SimError(lib.ACLNN_ERR_PARAM_INVALID, message)


@overload
def tensor(ptr, what: str, optional: Literal[False] = False) -> TensorDesc: ...
@overload
def tensor(ptr, what: str, optional: bool) -> TensorDesc | None: ...
def tensor(ptr, what: str, optional: bool = False) -> TensorDesc | None:
    """A live aclTensor whose storage lies inside one live device allocation."""
    if optional and ptr == ffi.NULL:
        return None
    t = STATE.tensors.get(ptr, what)
    if t.storage_bytes:
        a = STATE.memory.find(t.addr, t.storage_bytes)
        if a is None or not a.live:
            raise invalid(f"{what}: storage [{t.addr:#x}, +{t.storage_bytes}) is not inside one "
                          f"live device allocation" + (" (it was freed)" if a else ""))
    return t


def scalar(ptr, what: str) -> ScalarDesc:
    return STATE.scalars.get(ptr, what)


def int_array(ptr, what: str) -> tuple[int, ...]:
    return STATE.int_arrays.get(ptr, what)


def need_dtype(t: TensorDesc, what: str, allowed: set[str]) -> None:
    if dtypes.short(t.dtype) not in allowed:
        raise invalid(f"{what} dtype {dtypes.name(t.dtype)} should be in "
                      f"[{dtypes.names(sorted(allowed))}]")


def need_same_dtype(a: TensorDesc, b: TensorDesc, an: str, bn: str) -> None:
    if a.dtype != b.dtype:
        raise invalid(f"{an} dtype {dtypes.name(a.dtype)} and {bn} dtype "
                      f"{dtypes.name(b.dtype)} should be the same")


def need_cast(src: int, dst: int, what: str) -> None:
    if not dtypes.can_cast(src, dst):
        raise invalid(f"{what}: {dtypes.name(src)} cannot be converted to {dtypes.name(dst)}")


def need_same_shape(a: TensorDesc, b: TensorDesc, an: str, bn: str) -> None:
    if a.dims != b.dims:
        raise invalid(f"{an} shape {list(a.dims)} and {bn} shape {list(b.dims)} should be the same")


# The formats that only name a layout of plain (ND) memory, unlike the private ones (5HD, NZ)
ORIGIN_FORMATS = {lib.ACL_FORMAT_NCHW, lib.ACL_FORMAT_NHWC, lib.ACL_FORMAT_NCL, lib.ACL_FORMAT_NCDHW,
                  lib.ACL_FORMAT_NDHWC, lib.ACL_FORMAT_NC}


def need_nd(*named: tuple[TensorDesc, str]) -> None:
    """Operators whose page lists format ND only. An origin format (NCL, NCHW, …) tags the
    same plain memory: refused as the page says unless CANN_SIM_ALLOW=origin-format."""
    for t, what in named:
        if t.format == lib.ACL_FORMAT_ND:
            continue
        message = f"{what} format {t.format} should be ND"
        if t.format not in ORIGIN_FORMATS:
            raise invalid(message)
        tolerate("origin-format", message)


def need_contiguous(t: TensorDesc, what: str) -> None:
    """For operators whose docs mark non-contiguous tensors unsupported (×)."""
    if not t.is_contiguous():
        raise invalid(f"{what} must be contiguous (strides {list(t.strides)}, dims {list(t.dims)})")


def need_dims(*named: tuple[TensorDesc, str], lo: int = 0, hi: int = MAX_DIMS) -> None:
    for t, what in named:
        if not lo <= t.ndim <= hi:
            raise invalid(f"{what} has {t.ndim} dims, should be in [{lo}, {hi}]")


def broadcast(a: Sequence[int], b: Sequence[int], an: str, bn: str) -> tuple[int, ...]:
    """numpy broadcasting (the docs' "broadcast关系")."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise invalid(f"{an} shape {list(a)} and {bn} shape {list(b)} cannot broadcast")
        out.append(y if x == 1 else x)
    return tuple(out)


def promote(a: int, b: int, an: str, bn: str) -> int:
    r = dtypes.promote(a, b)
    if r is None:
        raise invalid(f"{an} dtype {dtypes.name(a)} and {bn} dtype {dtypes.name(b)} "
                      "cannot be promoted")
    return r


def as_compute(values: np.ndarray, acl: int) -> np.ndarray:
    """Input values converted to type `acl` as opbase's Cast to the deduced type does
    (rounded there: an s32 or f32 input of an f16 computation loses its extra bits), then
    held in `acl`'s compute type (f32 for the half types)."""
    values = np.asarray(values)
    if dtypes.EXACT and dtypes.short(acl) in dtypes.FLOATS:
        return values.astype(np.float64)
    if values.dtype != dtypes.numpy_dtype(acl):
        values = dtypes.convert(values, acl)
    return values.astype(dtypes.compute_dtype(acl), copy=False)


def unary_type(self_acl: int, out_acl: int) -> int:
    """Where an element-wise operator of one tensor computes (ops-math's op_api: Exp, Sqrt,
    Log, Tanh, Neg): in self's type when it is floating or complex, else in FLOAT when out
    is floating (bool / integer self cast first), else in self's type; the kernel's result
    is then cast to out."""
    s = dtypes.short(self_acl)
    if s in dtypes.FLOATS or s in dtypes.COMPLEX or dtypes.short(out_acl) not in dtypes.FLOATS:
        return self_acl
    return dtypes.BY_NAME["f32"]


BF16 = dtypes.numpy_dtype(lib.ACL_BF16)


def as_f32(v: np.ndarray) -> np.ndarray:
    """A float array as f32 (exact from the half types); as f64 in the blame's exact mode."""
    if dtypes.EXACT:
        return np.asarray(v, np.float64)
    if v.dtype == BF16:
        # bfloat16 is the upper half of a float32: widen the bits (exact, and fast)
        return (v.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.asarray(v, np.float32)


REPEAT_F32 = 64   # f32 elements of one vector instruction's repeat (ELEM_PER_REP_FP32)


def sum_halving(v: np.ndarray, axes: tuple[int, ...], keepdims: bool = False) -> np.ndarray:
    """An f32 sum over `axes` in the vector units' order (ops-nn norm/rms_norm/op_kernel/
    reduce_common.h, ReduceSumHalfInterval): the elements past the largest power of two
    are added onto the first ones, then the second half onto the first until one repeat
    (64) is left, whose WholeReduceSum is taken as the same halving down to one."""
    if dtypes.EXACT:
        return np.sum(np.asarray(v, np.float64), axis=axes, keepdims=keepdims)
    v = np.asarray(v, np.float32)
    axes = tuple(a % v.ndim for a in axes) if v.ndim else ()
    kept = tuple(1 if i in axes else n for i, n in enumerate(v.shape))
    rest = [i for i in range(v.ndim) if i not in axes]
    w = np.transpose(v, rest + list(axes)).reshape(tuple(v.shape[i] for i in rest) + (-1,))
    n = w.shape[-1]
    if n == 0:
        s = np.zeros(w.shape[:-1], np.float32)
    else:
        body = 1 << (n.bit_length() - 1)
        w = w[..., :body] + np.pad(w[..., body:], [(0, 0)] * (w.ndim - 1) + [(0, 2 * body - n)]) \
            if body < n else w
        while w.shape[-1] > 1:
            half = w.shape[-1] // 2
            w = w[..., :half] + w[..., half:]
        s = w[..., 0]
    return s.reshape(kept) if keepdims else s


def rounded(values, acl: int):
    """A result of the deduced type `acl`, as the kernel writes it: a half type's result
    (computed in f32) rounded to it, before opbase's Cast of it to out's type."""
    if dtypes.short(acl) in dtypes.HALF and not dtypes.EXACT:
        return dtypes.convert(values, acl)
    return values


def in_type(acl: int, fn: Callable[..., object]) -> Callable[..., object]:
    """compute = fn with its result rounded to the deduced type `acl` (`rounded`): the
    precision model of "cast the inputs to the deduced type, compute there, cast to out"."""
    if dtypes.short(acl) not in dtypes.HALF:
        return fn
    return lambda *arrays: rounded(fn(*arrays), acl)


# --------------------------------------------------------------- protocol ----

@overload
def check_soc(name: str) -> None: ...
@overload
def check_soc(name: str, plan: Plan) -> Plan: ...
def check_soc(name: str, plan: Plan | None = None) -> Plan | None:
    """The simulated SoC's refusals on top of an operator's own checks: before them, an
    operator the SoC does not offer (soc.UNOFFERED); after them, the plan's BFLOAT16
    tensors where the SoC's dtype rows leave BFLOAT16 out. Returns the plan."""
    soc = soc_family()
    if plan is None:
        reason = unoffered(soc, name)
        if reason:
            why = f"aclnn{name}GetWorkspaceSize: not offered on {STATE.soc}: {reason}"
            if "unoffered-operator" not in STATE.allowed:
                raise SimError(lib.ACLNN_ERR_INNER_FIND_KERNEL_ERROR, why)
            tolerate("unoffered-operator", why)
    else:
        table = SOC_DTYPES_OUT.get(soc, {})
        out = table.get("*", frozenset()) | table.get(name, frozenset())
        for t in (*plan.inputs, *plan.outputs):
            if dtypes.short(t.dtype) in out:
                raise invalid(f"{dtypes.name(t.dtype)} is not supported on {STATE.soc} (the Atlas "
                              f"inference series' dtype rows leave it out)")
    return plan


def _prepare(name: str, args) -> Plan:
    *params, ws_size, executor = args
    if ws_size == ffi.NULL or executor == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR,
                       f"aclnn{name}GetWorkspaceSize: workspaceSize or executor is nullptr")
    prepare = OPS.get(name)
    if prepare is None:
        raise SimError(lib.ACLNN_ERR_INNER_FIND_KERNEL_ERROR, f"aclnn{name} is not simulated")
    check_soc(name)
    try:
        plan = check_soc(name, prepare(*params))
    except SimError as e:
        raise SimError(e.code, f"aclnn{name}GetWorkspaceSize: {e}") from e
    plan.name = name
    if STATE.check_inputs:
        try:
            check_overlap(name, params, plan)
        except SimError as e:
            raise SimError(e.code, f"aclnn{name}GetWorkspaceSize: {e}") from e
    offset = 0
    for t in plan.inputs:
        nbytes = math.prod(t.dims) * t.np_dtype.itemsize
        if nbytes and not t.is_contiguous():
            plan.staged.append(offset)
            offset += -(-nbytes // WS_ALIGN) * WS_ALIGN
        else:
            plan.staged.append(-1)
    plan.workspace = offset
    ws_size[0] = offset
    executor[0] = ffi.cast("aclOpExecutor *", STATE.executors.new(plan))
    return plan


_launched: set[int] = set()


def _launch(name: str, workspace, ws_size, executor, stream) -> None:
    what = f"aclnn{name}"
    h = int(ffi.cast("uintptr_t", executor))
    if h in _launched:
        raise invalid(f"{what}: aclOpExecutor {h:#x} was already launched; an executor runs "
                      "once (call GetWorkspaceSize again)")
    plan = STATE.executors.get(executor, what)
    if plan.name != name:
        raise invalid(f"{what}: the executor was made by aclnn{plan.name}GetWorkspaceSize")
    if not plan.repeatable:   # the launch releases the executor, whatever it answers
        STATE.executors.pop(executor, what)
        _launched.add(h)
    s = get_stream(stream, what)
    ws, ws_size = int(ffi.cast("uintptr_t", workspace)), int(ws_size)
    if ws_size < plan.workspace:
        raise invalid(f"{what}: workspaceSize {ws_size} is smaller than the "
                      f"{plan.workspace} bytes aclnn{name}GetWorkspaceSize asked for")
    if plan.workspace:
        if not ws:
            raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, f"{what}: workspace is nullptr")
        a = STATE.memory.find(ws, ws_size)
        if a is None or not a.live:
            raise invalid(f"{what}: workspace [{ws:#x}, +{ws_size}) is not inside one live "
                          "device allocation")
    # a capture keeps its launches' cost records even uncounted: a later replay may be counted
    counted = cost.launched(plan, s) if cost.ON or s.capture is not None else None
    if trace.ON:
        trace.launched(plan, stream, counted)
    enqueue(s, lambda: execute(plan, ws))   # or into the stream's capture


@entry
def aclSetAclOpExecutorRepeatable(executor):
    """The executor may be launched again and again; aclDestroyAclOpExecutor releases it."""
    _executor(executor, "aclSetAclOpExecutorRepeatable").repeatable = True
    return 0


@entry
def aclDestroyAclOpExecutor(executor):
    what = "aclDestroyAclOpExecutor"
    if not _executor(executor, what).repeatable:
        raise invalid(f"{what}: the executor is not repeatable: its launch releases it "
                      "(aclSetAclOpExecutorRepeatable hands its release to the caller)")
    STATE.executors.pop(executor, what)
    return 0


def _executor(executor, what: str) -> Plan:
    if executor == ffi.NULL:   # the docs' code for a null executor
        raise SimError(lib.ACLNN_ERR_INNER_NULLPTR, f"{what}: executor is nullptr")
    return STATE.executors.get(executor, what)


_WIDE = (np.dtype(np.float64), np.dtype(np.complex128))


def execute(plan: Plan, ws: int) -> None:
    """Run a plan (at stream synchronisation): gather, compute, convert, store."""
    arrays = []
    for t, off in zip(plan.inputs, plan.staged):
        a = t.array()
        if off >= 0:   # gathered into the workspace first, as the kernels need
            slot = STATE.memory.bytes(ws + off, a.nbytes, f"aclnn{plan.name} workspace", write=True)
            staged = np.ndarray(a.shape, a.dtype, slot)
            staged[...] = a
            a = staged
        arrays.append(a)
    ran = trace.running(plan, arrays) if trace.ON else None
    with np.errstate(all="ignore"):
        results = plan.compute(*arrays)
    if not isinstance(results, tuple):
        results = (results,)
    if STATE.fault is not None:
        results = faults.spoiled(STATE.fault, plan.name, results)
    wide = any(t.np_dtype in _WIDE for t in (*plan.inputs, *plan.outputs))
    for t, r in zip(plan.outputs, results):
        out, r = t.array(write=True), np.asarray(r)
        if r.dtype in _WIDE and not wide:   # the precision model: no f64 device side
            raise SimError(lib.ACLNN_ERR_INNER, f"aclnn{plan.name}: the simulator computed "
                           f"{dtypes.name(plan.outputs[0].dtype)} results in {r.dtype} (a model bug)")
        # stored as is where it has the type already (a converted copy costs a pass)
        out[...] = r if r.dtype == out.dtype else dtypes.convert(np.broadcast_to(r, out.shape), t.dtype)
    if ran is not None:
        trace.ran(ran, plan)


def attach() -> None:
    for name, kind in api_entries():
        if kind != 1:
            continue

        def gws(*args, _name=name):
            if not trace.ON:
                _prepare(_name, args)
                return 0
            call = trace.operator_call(_name, args)
            try:
                plan = _prepare(_name, args)
            except SimError as e:
                trace.failed(call, e.code, str(e))
                raise
            except Exception as e:
                trace.failed(call, lib.ACLNN_ERR_INNER, f"CANN simulator internal error: {e!r}")
                raise
            trace.prepared(call, plan, plan.workspace)
            return 0

        def launch(workspace, ws_size, executor, stream, _name=name):
            try:
                _launch(_name, workspace, ws_size, executor, stream)
            except SimError as e:
                if trace.ON:
                    trace.launch_failed(_name, stream, e.code, str(e))
                raise
            return 0

        ffi.def_extern(name=f"sim_aclnn{name}GetWorkspaceSize")(
            guarded(f"aclnn{name}GetWorkspaceSize", gws, lib.ACLNN_ERR_INNER))
        ffi.def_extern(name=f"sim_aclnn{name}")(guarded(f"aclnn{name}", launch, lib.ACLNN_ERR_INNER))
