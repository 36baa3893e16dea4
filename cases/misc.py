"""test_ssm_conv (SSM_CONV: Mamba's depth-wise causal conv1d, a sliding dot product per
channel) and test_timestep_embedding (TIMESTEP_EMBEDDING: sinusoidal diffusion timesteps)."""
from __future__ import annotations

from .catalog import Family, register
from .tolerances import CUBE_F16_310P
from .graph import Tensor, new_op
from .types import F32


def ssm_conv(sx: Tensor, c: Tensor) -> Tensor:
    """ggml_ssm_conv: sx {d_conv-1+n_t, d_inner, n_s}, c {d_conv, d_inner} -> {d_inner, n_t, n_s}."""
    assert sx.ne[3] == 1 and c.ne[2] == 1 and c.ne[3] == 1  # ggml_is_3d, ggml_is_matrix
    d_conv, d_inner = c.ne[0], c.ne[1]
    n_t = sx.ne[0] - d_conv + 1
    assert sx.ne[1] == d_inner and n_t >= 0
    return new_op(sx.graph, "SSM_CONV", F32, [d_inner, n_t, sx.ne[2]], [sx, c])


def timestep_embedding(t: Tensor, dim: int, max_period: int) -> Tensor:
    """ggml_timestep_embedding: {n} timesteps -> {dim, n}; op_params = [dim, max_period]."""
    return new_op(t.graph, "TIMESTEP_EMBEDDING", F32, [dim, t.ne[0]], [t], i32=[dim, max_period])


def ssm_conv_eval_grid():
    cases = []
    for d_conv in (3, 4, 9):
        for d_inner in (1024, 1536, 2048):
            b = [d_conv, d_inner, 1, 1]
            # one token, two, four sequences, and n_t = 64 (> 32: the long-token path)
            for ne_a in ([d_conv, d_inner, 1, 1], [2 * d_conv, d_inner, 1, 1], [d_conv, d_inner, 4, 1],
                         [d_conv - 1 + 64, d_inner, 1, 1], [d_conv - 1 + 64, d_inner, 4, 1]):
                cases.append(dict(type="f32", ne_a=ne_a, ne_b=b))
    return cases


def ssm_conv_domain(st):
    """`ops fuzz`: any kernel width, channel count and sequence count, and at least one token
    (ggml takes n_t = 0, an empty output, which the reference does not compute)."""
    def case(d_conv, d_inner, n_t, n_s):
        return dict(type="f32", ne_a=[d_conv - 1 + n_t, d_inner, n_s, 1], ne_b=[d_conv, d_inner, 1, 1])
    return st.builds(case, st.integers(1, 9), st.integers(1, 2048), st.integers(1, 80), st.integers(1, 4))


register(Family(
    name="ssm_conv",
    build=lambda g, type, ne_a, ne_b: ssm_conv(g.new_tensor(type, ne_a, "a"), g.new_tensor(type, ne_b, "b")),
    fuzz_domain=ssm_conv_domain,
    vars=("type", "ne_a", "ne_b"),
    op="SSM_CONV",
    eval_grid=ssm_conv_eval_grid,
    strict=CUBE_F16_310P,   # its aclnnConvolution, cubeMathType 1 on 310P
    # granite-4.0-h-1b shapes: prefill, prefill, generate
    perf_grid=lambda: [dict(type="f32", ne_a=a, ne_b=b) for a, b in (
        ([515, 3328, 1, 1], [4, 3328, 1, 1]), ([937, 8192, 1, 1], [4, 8192, 1, 1]),
        ([4, 3328, 1, 1], [4, 3328, 1, 1]))],
))

register(Family(
    name="timestep_embedding",
    build=lambda g, type, ne_a, dim, max_period: timestep_embedding(g.new_tensor(type, ne_a, "a"), dim, max_period),
    vars=("type", "ne_a", "dim", "max_period"),
    op="TIMESTEP_EMBEDDING",
    eval_grid=lambda: [dict(type="f32", ne_a=[2, 1, 1, 1], dim=320, max_period=10000)],
))
