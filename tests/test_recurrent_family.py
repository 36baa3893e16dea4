"""SSM_SCAN, SSM_SCAN_ROLLBACK, SSM_CONV_BIAS_SILU, RWKV_WKV6/7, GATED_LINEAR_ATTN,
GATED_DELTA_NET and SOLVE_TRI: constructor shapes and op_params, the references against
element-by-element loops on small inputs, the grids, and sampled cases on GGML-CPU."""
import numpy as np
import pytest

from _sample import assert_ok, cases_of, sample
from cannops.backend.reference import recurrent as ref
from cannops.cases.graph import Graph
from cannops.cases.recurrent import (gated_delta_net, gated_linear_attn, rwkv_wkv6, rwkv_wkv7, solve_tri,
                                     ssm_scan)

RNG = np.random.default_rng(7)


def u(*shape, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape)


def test_constructor_shapes_and_params():
    g = Graph()
    s = g.new_tensor("f32", [16, 4, 6, 2])                      # d_state, head_dim, n_head, n_seqs
    x = g.new_tensor("f32", [4, 6, 5, 2])
    t = ssm_scan(s, x, g.new_tensor("f32", [6, 5, 2]), g.new_tensor("f32", [1, 6]),
                 g.new_tensor("f32", [16, 3, 5, 2]), g.new_tensor("f32", [16, 3, 5, 2]),
                 g.new_tensor("i32", [2]), K=3)
    assert t.ne == (4 * 6 * 5 * 2 + 3 * 16 * 4 * 6 * 2, 1, 1, 1) and t.param_i32(0) == 3
    with pytest.raises(AssertionError):   # Mamba-1 decays (A per state) have no snapshots
        ssm_scan(s, x, g.new_tensor("f32", [6, 5, 2]), g.new_tensor("f32", [16, 6]),
                 g.new_tensor("f32", [16, 3, 5, 2]), g.new_tensor("f32", [16, 3, 5, 2]), g.new_tensor("i32", [2]), 2)
    k = [g.new_tensor("f32", [8, 3, 10]) for _ in range(6)]
    st = g.new_tensor("f32", [8 * 8 * 3, 2])
    assert rwkv_wkv6(k[0], k[1], k[2], g.new_tensor("f32", [8, 3]), k[3], st).ne == (24, 10 + 16, 1, 1)
    gla = gated_linear_attn(*k[:4], st, 0.25)
    assert gla.ne == (24, 26, 1, 1) and gla.param_f32(0) == 0.25
    assert rwkv_wkv7(*k, st).ne == (24, 26, 1, 1)
    q = g.new_tensor("f32", [8, 3, 5, 2])
    v = g.new_tensor("f32", [8, 6, 5, 2])
    gdn = gated_delta_net(q, q, v, g.new_tensor("f32", [1, 6, 5, 2]), g.new_tensor("f32", [1, 6, 5, 2]),
                          g.new_tensor("f32", [8, 8, 6, 2]), K=2)
    assert gdn.ne == (48, 5 * 2 + 2 * 8 * 2, 1, 1) and gdn.param_i32(0) == 2
    assert solve_tri(g.new_tensor("f32", [7, 7, 2, 3]), g.new_tensor("f32", [4, 7, 2, 3])).ne == (4, 7, 2, 3)


def _node(op_ne, **params):
    """A stand-in node for calling a reference directly."""
    class N:
        ne = op_ne
        def param_i32(self, i): return params["i32"][i]
        def param_f32(self, i): return params["f32"][i]
    return N()


def test_ssm_scan_mamba2_against_loops_with_snapshots():
    ns, nt, H, P, N, G, K = 2, 4, 4, 3, 5, 2, 3
    x, dt, B, C = u(ns, nt, H, P), u(1, ns, nt, H), u(ns, nt, G, N), u(ns, nt, G, N)
    A, s, ids = u(1, 1, H, 1, lo=-1, hi=-0.5), u(ns, H, P, N), np.array([1, 0])
    n_out = ns * nt * H * P + K * ns * H * P * N
    out = ref.ssm_scan(_node((n_out, 1, 1, 1), i32=[K]), s, x, dt, A, B, C, ids).ravel()
    y_ref = np.zeros((ns, nt, H, P))
    states = np.zeros((K, ns, H, P, N))
    for n in range(ns):
        S = s[ids[n]].copy()
        for t in range(nt):
            for h in range(H):
                d = np.log1p(np.exp(dt[0, n, t, h]))
                g = h // (H // G)
                for p in range(P):
                    S[h, p] = S[h, p] * np.exp(d * A[0, 0, h, 0]) + d * x[n, t, h, p] * B[n, t, g]
                    y_ref[n, t, h, p] = S[h, p] @ C[n, t, g]
            if nt - 1 - t < K:
                states[nt - 1 - t, n] = S
    np.testing.assert_allclose(out, np.concatenate([y_ref.ravel(), states.ravel()]), rtol=1e-12, atol=1e-12)


def test_rwkv6_gla_rwkv7_against_loops():
    S, H, L, ns = 3, 2, 4, 2
    T = L * ns
    k, v, r, w, a, b = (u(1, T, H, S) for _ in range(6))
    s0 = u(1, 1, ns, S * S * H)
    tf = u(1, 1, H, S)
    y6, y_gla, y7 = np.zeros((T, H, S)), np.zeros((T, H, S)), np.zeros((T, H, S))
    st6, st_gla, st7 = (s0.reshape(ns, H, S, S).copy() for _ in range(3))
    for n in range(ns):
        for l in range(L):
            t = n * L + l
            for h in range(H):
                kk, vv, rr, ww, aa, bb = (z[0, t, h] for z in (k, v, r, w, a, b))
                kv = np.outer(kk, vv)
                y6[t, h] = rr @ (tf[0, 0, h][:, None] * kv + st6[n, h])
                st6[n, h] = st6[n, h] * ww[:, None] + kv                   # w as the time decay
                st_gla[n, h] = st_gla[n, h] * ww[:, None] + kv              # w as the gate
                y_gla[t, h] = 0.5 * rr @ st_gla[n, h]                       # r as the query
                sa = st7[n, h] @ aa
                st7[n, h] = st7[n, h] * ww[None, :] + np.outer(vv, kk) + np.outer(sa, bb)
                y7[t, h] = st7[n, h] @ rr
    ne = (S * H, T + S * ns, 1, 1)
    np.testing.assert_allclose(ref.rwkv_wkv6(_node(ne), k, v, r, tf, w, s0).ravel(),
                               np.concatenate([y6.ravel(), st6.ravel()]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.gated_linear_attn(_node(ne, f32=[0.5]), k, v, r, w, s0).ravel(),
                               np.concatenate([y_gla.ravel(), st_gla.ravel()]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ref.rwkv_wkv7(_node(ne), r, w, k, v, a, b, s0).ravel(),
                               np.concatenate([y7.ravel(), st7.ravel()]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kda", [False, True])
def test_gated_delta_net_against_loops(kda):
    S, Hk, rep, nt, ns, K = 4, 2, 2, 3, 2, 2
    H = Hk * rep
    q, k = u(ns, nt, Hk, S), u(ns, nt, Hk, S)
    v, beta = u(ns, nt, H, S, lo=-0.3, hi=5), u(ns, nt, H, 1, lo=0, hi=1)
    g = u(ns, nt, H, S if kda else 1, lo=-2, hi=-1e-4)
    state = u(ns, H, S, S)                                  # stored transposed: [j][i] = S[i][j]
    out = ref.gated_delta_net(_node((S * H, nt * ns + K * S * ns, 1, 1), i32=[K]), q, k, v, g, beta, state)
    y, snaps = np.zeros((ns, nt, H, S)), np.zeros((K, ns, H, S, S))
    for n in range(ns):
        for h in range(H):
            M = state[n, h].T.copy()                         # M[i][j], i = key channel
            for t in range(nt):
                qq, kk = q[n, t, h % Hk], k[n, t, h % Hk]
                M = M * np.exp(g[n, t, h])[:, None]
                delta = beta[n, t, h, 0] * (v[n, t, h] - kk @ M)
                M = M + np.outer(kk, delta)
                y[n, t, h] = qq @ M / np.sqrt(S)
                if nt - 1 - t < K:
                    snaps[nt - 1 - t, n, h] = M.T
    np.testing.assert_allclose(out.ravel(), np.concatenate([y.ravel(), snaps.ravel()]), rtol=1e-12, atol=1e-12)


def test_solve_tri_ignores_the_upper_triangle():
    a = np.tril(u(2, 1, 5, 5, lo=0.1, hi=1.0))
    b = u(2, 1, 5, 3)
    x = ref.solve_tri(None, a + np.triu(np.ones((5, 5)), 1), b)   # garbage above the diagonal
    np.testing.assert_allclose(a @ x, b, atol=1e-12)


def test_grid_sizes():
    sizes = {op: len(cases_of(op)) for op in ("SSM_SCAN", "SSM_SCAN_ROLLBACK", "SSM_CONV_BIAS_SILU", "RWKV_WKV6",
                                              "RWKV_WKV7", "GATED_LINEAR_ATTN", "GATED_DELTA_NET", "SOLVE_TRI")}
    assert sizes == {"SSM_SCAN": 9, "SSM_SCAN_ROLLBACK": 1, "SSM_CONV_BIAS_SILU": 90, "RWKV_WKV6": 4,
                     "RWKV_WKV7": 5, "GATED_LINEAR_ATTN": 4, "GATED_DELTA_NET": 36, "SOLVE_TRI": 24}
    assert not cases_of("SSM_SCAN_ROLLBACK", "SSM_CONV_BIAS_SILU", mode="support")   # fused: test mode only
    perf = {c.op for c in cases_of("SSM_SCAN", "SSM_CONV_BIAS_SILU", "GATED_DELTA_NET", "SOLVE_TRI", mode="perf")}
    assert perf == {"SSM_SCAN", "SSM_CONV_BIAS_SILU", "GATED_DELTA_NET", "SOLVE_TRI"}


def test_sampled_cases_ok_on_ggml_cpu():
    small = [c for c in cases_of("SSM_SCAN", "SSM_SCAN_ROLLBACK", "RWKV_WKV6", "RWKV_WKV7", "GATED_LINEAR_ATTN")
             if "n_seq_tokens=1," in c.name or "n_seq_tokens=4," in c.name or "n_seq_tokens=8," in c.name]
    cases = (small + sample(cases_of("GATED_DELTA_NET"), 8) + sample(cases_of("SSM_CONV_BIAS_SILU"), 6)
             + [c for c in cases_of("SOLVE_TRI") if c.params["ne_lhs"][0] < 80][:6])
    assert_ok("GGML-CPU", cases)
