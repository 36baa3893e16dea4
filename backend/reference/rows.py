"""SET_ROWS, from its definition: rows of a source written into a destination by row ids."""
from __future__ import annotations

import numpy as np

from . import Rows, reference


@reference("SET_ROWS")
def set_rows(node, src, ids, dst):
    """dst[i3, i2, ids[i3 % n3, i2 % n2, i], :] = src[i3, i2, i, :] (ids: shape [1, n3, n2, r],
    broadcast over dims 2 and 3 by tiling). Only those rows are written: a quantized
    destination has them quantized, every other row keeps its stored blocks."""
    ne3, ne2, ne1 = dst.shape[:3]
    rows = ids[0].astype(np.int64)[np.ix_(np.arange(ne3) % ids.shape[1], np.arange(ne2) % ids.shape[2])]
    i3, i2 = np.ogrid[:ne3, :ne2]
    i3, i2 = i3[..., None], i2[..., None]           # against rows: (ne3, ne2, r)
    if not ((rows >= 0) & (rows < ne1)).all():
        raise ValueError(f"SET_ROWS: a row id outside [0, {ne1})")
    out = np.array(dst, dtype=np.float32 if node.type.is_quantized else dst.dtype)
    out[i3, i2, rows] = src
    mask = np.zeros((ne3, ne2, ne1), bool)
    mask[i3, i2, rows] = True
    return Rows(out, mask)
