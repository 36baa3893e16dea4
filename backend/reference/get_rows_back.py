"""GET_ROWS_BACK, from its definition: out = zeros [m, n]; out[rows[i]] += grad[i] for each i."""
from __future__ import annotations

import numpy as np

from . import reference


@reference("GET_ROWS_BACK")
def get_rows_back(node, grad, rows):
    n, m = node.ne[0], node.ne[1]
    out = np.zeros((m, n), np.float64)
    ids = rows.reshape(-1).astype(np.int64)
    # rows repeat: unbuffered accumulation, in row order as ggml-cpu adds them
    np.add.at(out, ids, np.asarray(grad, np.float64).reshape(-1, n)[: ids.size])
    return out.reshape(node.ne[::-1])
