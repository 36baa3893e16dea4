"""MUL_MAT, from its definition: out[i3, i2] = b[i3, i2] @ a[i3 // r3, i2 // r2]^T, in f64.

ggml broadcasts a over b's batch dims by repetition of each matrix (r2 = ne12 / ne02
consecutive b matrices share one a matrix), not by tiling. Quantized a arrives dequantized
(gguf's dequantizers, through the interpreter's Memory.read).
"""
from __future__ import annotations

import numpy as np

from . import reference


# elements of a widened to f64 at a time: a 16384 x 16384 f32 a was 2 GiB more whole
WIDEN_CHUNK = 1 << 24


@reference("MUL_MAT")
def mul_mat(node, a, b):
    ne03, ne02, m, k = a.shape                            # a: (ne03, ne02, m, k)
    b = np.asarray(b, dtype=np.float64)                  # (ne13, ne12, n, k)
    ne13, ne12, n, _ = b.shape
    r3, r2 = ne13 // ne03, ne12 // ne02
    # group b's batches by the a matrix they use: (ne03, r3, ne02, r2, n, k)
    bg = b.reshape(ne03, r3, ne02, r2, n, k)
    step = max(1, WIDEN_CHUNK // max(1, ne03 * ne02 * k))   # rows of a (columns of out) at a time
    if step >= m:
        ag = np.asarray(a, dtype=np.float64)[:, None, :, None]              # (ne03, 1, ne02, 1, m, k)
        return np.matmul(bg, np.swapaxes(ag, -1, -2)).reshape(ne13, ne12, n, m)
    out = np.empty((ne03, r3, ne02, r2, n, m))
    for j in range(0, m, step):
        ag = np.asarray(a[:, :, j:j + step], dtype=np.float64)[:, None, :, None]
        out[..., j:j + step] = np.matmul(bg, np.swapaxes(ag, -1, -2))
    return out.reshape(ne13, ne12, n, m)
