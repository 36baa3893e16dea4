"""Entry points of aclnn/acl_meta.h: creating and destroying aclTensor, aclScalar,
aclIntArray and aclTensorList descriptors, each checked as its page asks."""
from __future__ import annotations

import math

from .binding import ffi, lib

from . import dtypes
from .descriptors import ScalarDesc, TensorDesc, reach
from .entries import entry
from .memory import host_bytes
from .refusals import SimError
from .state import STATE, tolerate

TENSOR_DATA_ALIGN = 32   # aclCreateTensor's tensorData (aolapi operatorlist_00019)


@entry
def aclCreateTensor(view_dims, n_dims, dtype, stride, offset, fmt, storage_dims, n_storage, data):
    n_dims, n_storage, offset = int(n_dims), int(n_storage), int(offset)
    if (n_dims and view_dims == ffi.NULL) or (n_storage and storage_dims == ffi.NULL):
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensor: dims are nullptr")
    if not dtypes.known(dtype):
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                       f"aclCreateTensor: data type {dtypes.name(dtype)} is not simulated")
    dims = tuple(ffi.unpack(view_dims, n_dims)) if n_dims else ()
    storage = tuple(ffi.unpack(storage_dims, n_storage)) if n_storage else ()
    if stride == ffi.NULL:
        strides = tuple(math.prod(dims[i + 1:]) for i in range(n_dims))
    else:
        strides = tuple(ffi.unpack(stride, n_dims)) if n_dims else ()
    if any(d < 0 for d in dims) or offset < 0:
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, f"aclCreateTensor: negative dims {dims} / {storage}")
    if any(d < 0 for d in storage):
        message = f"aclCreateTensor: negative storage dims {list(storage)} (view dims {list(dims)})"
        if all(dims):
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID, message)
        tolerate("storage-shape", message)   # an empty view reads nothing
        storage = (0,)
    # the elements the view reaches must all lie inside the storage
    n_storage_elems = math.prod(storage)
    if all(dims):
        lo, hi = reach(offset, dims, strides)
        if lo < 0 or hi >= n_storage_elems:
            message = (f"aclCreateTensor: view dims {list(dims)} strides {list(strides)} "
                       f"offset {offset} reach element {hi if hi >= n_storage_elems else lo}, "
                       f"outside the storage of {n_storage_elems} elements {list(storage)}")
            if lo < 0:
                raise SimError(lib.ACLNN_ERR_PARAM_INVALID, message)
            # tolerated: the storage is taken as reaching the view's last element, and that
            # memory must still lie in one live allocation at launch
            tolerate("storage-shape", message)
            storage = (hi + 1,)
    addr = int(ffi.cast("uintptr_t", data))
    if addr % TENSOR_DATA_ALIGN:
        # its page: "tensorData: tensor在Device侧的存储地址,该地址必须32字节对齐"; a view that
        # starts elsewhere is the aligned base plus `offset` elements
        tolerate("tensor-data-align",
                 f"aclCreateTensor: tensorData {addr:#x} is not {TENSOR_DATA_ALIGN}-byte aligned "
                 f"({addr % TENSOR_DATA_ALIGN} bytes past); pass the aligned address below it "
                 "and the view's start as `offset`")
    desc = TensorDesc(dims, strides, offset, int(dtype), int(fmt), storage, addr)
    return ffi.cast("aclTensor *", STATE.tensors.new(desc))


@entry
def aclDestroyTensor(tensor):
    STATE.tensors.pop(tensor, "aclDestroyTensor")
    return 0


@entry
def aclCreateScalar(value, dtype):
    if value == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is nullptr")
    if not dtypes.known(dtype):
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, f"aclCreateScalar: data type {dtypes.name(dtype)}")
    raw = host_bytes(int(ffi.cast("uintptr_t", value)), dtypes.numpy_dtype(dtype).itemsize)
    v = raw.view(dtypes.numpy_dtype(dtype))[0].item()
    return ffi.cast("aclScalar *", STATE.scalars.new(ScalarDesc(v, int(dtype))))


@entry
def aclDestroyScalar(scalar):
    STATE.scalars.pop(scalar, "aclDestroyScalar")
    return 0


@entry
def aclCreateIntArray(value, size):
    size = int(size)
    if size and value == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateIntArray: value is nullptr")
    return ffi.cast("aclIntArray *", STATE.int_arrays.new(tuple(int(value[i]) for i in range(size))))


@entry
def aclDestroyIntArray(array):
    STATE.int_arrays.pop(array, "aclDestroyIntArray")
    return 0


@entry
def aclCreateTensorList(value, size):
    size = int(size)
    if size and value == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensorList: value is nullptr")
    items = tuple(int(ffi.cast("uintptr_t", value[i])) for i in range(size))
    for i, h in enumerate(items):
        if h not in STATE.tensors.objects:
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                           f"aclCreateTensorList: value[{i}] {h:#x} is not a live aclTensor")
    return ffi.cast("aclTensorList *", STATE.tensor_lists.new(items))


@entry
def aclDestroyTensorList(array):
    items = STATE.tensor_lists.pop(array, "aclDestroyTensorList")
    for h in items:   # the list owns its tensors: they are destroyed with it
        if STATE.tensors.objects.pop(h, None) is None:
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                           f"aclDestroyTensorList: its aclTensor {h:#x} was already destroyed")
    return 0
