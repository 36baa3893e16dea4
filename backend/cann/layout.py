"""ggml-cann's device layout of q4_0 / q8_0 tensors, applied where our CANN device uploads
and downloads them (as ggml-cann's buffer set_tensor / get_tensor do, whatever op reads them).

On the device such a tensor is two regions instead of interleaved 18 / 34-byte blocks:
first every quant of the tensor in element order (q8_0: one int8 each; q4_0: int4, two per
byte, the even element in the low nibble, stored signed, i.e. the block's unsigned nibble
minus 8), then every block's f16 scale in block order. The byte size is unchanged, so
aclnn can read the quants as an INT8 / INT4 tensor and the scales as a FLOAT16 one.
"""
from __future__ import annotations

import numpy as np

TRANSFORMED = ("q4_0", "q8_0")


def _blocks(type, data: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(data).view(np.uint8).reshape(-1, type.type_size)


def to_device(type, data: np.ndarray) -> np.ndarray:
    """Host blocks (any shape of uint8, whole tensor) -> the device's byte image."""
    if type.name not in TRANSFORMED:
        return data
    b = _blocks(type, data)
    scales, qs = b[:, :2], b[:, 2:]
    if type.name == "q4_0":
        # block element j < 16 is qs[j]'s low nibble, element 16 + j its high nibble
        nib = np.concatenate([qs & 0x0F, qs >> 4], axis=1)          # (blocks, 32), element order
        qs = (nib[:, 0::2] | (nib[:, 1::2] << 4)) ^ 0x88             # pairs; unsigned-8 -> signed
    return np.concatenate([qs.reshape(-1), scales.reshape(-1)])


def from_device(type, image: np.ndarray) -> np.ndarray:
    """The device's byte image of a whole tensor -> host blocks (flat uint8)."""
    if type.name not in TRANSFORMED:
        return image
    image = np.ascontiguousarray(image).view(np.uint8).reshape(-1)
    n_blocks = image.size // type.type_size
    n_q = image.size - 2 * n_blocks
    qs: np.ndarray = image[:n_q].reshape(n_blocks, -1)
    scales = image[n_q:].reshape(n_blocks, 2)
    if type.name == "q4_0":
        qs = qs ^ 0x88
        nib = np.empty((n_blocks, 32), np.uint8)
        nib[:, 0::2], nib[:, 1::2] = qs & 0x0F, qs >> 4
        qs = nib[:, :16] | (nib[:, 16:] << 4)
    return np.concatenate([scales, qs], axis=1).reshape(-1)
