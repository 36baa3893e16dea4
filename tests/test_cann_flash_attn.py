"""FLASH_ATTN_EXT on CANN-SIM (aclnnFusedInferAttentionScoreV2, f16, BSND): sampled f16
cases against the NumPy reference (D padded to 16, GQA, ALiBi through pseShift, permuted
inputs, one query), what the rule refuses as ggml-cann does, and what the simulator refuses
as the operator's doc says."""
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, rejected  # noqa: E402
from _sample import cases_of, sample  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402


def _f16_supported(c):
    p = c.params
    return (p["type_K"] == p["type_V"] == "f16" and not p["sinks"] and p["logit_softcap"] == 0
            and p["hsk"] == p["hsv"] and p["kv"] <= 512 and p["nb"] <= 32)


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in cases_of("FLASH_ATTN_EXT")}


def test_sampled_f16_cases_match_the_reference(dev, cases):
    picked = sample([c for c in cases.values() if _f16_supported(c)], 8)
    # and the paths a hash sample may miss: D 40 padded to 48 with ALiBi over 3 sequences,
    # a permuted (token-major) layout, one query row, 12 heads (ALiBi's second slope range)
    fa = ("FLASH_ATTN_EXT(hsk={},hsv={},nh=4,nr23={},kv={},nb={},mask={},sinks=0,max_bias={},"
          "logit_softcap=0.000000,prec={},type_K=f16,type_V=f16,permute={})")
    names = [c.name for c in picked] + [
        fa.format(40, 40, "[1,3]", 113, 3, 1, "8.000000", "f32", "[0,1,2,3]"),
        fa.format(64, 64, "[4,1]", 512, 32, 1, "0.000000", "f32", "[0,2,1,3]"),
        fa.format(128, 128, "[12,1]", 512, 1, 1, "8.000000", "def", "[0,1,2,3]"),
        fa.format(80, 80, "[1,1]", 113, 3, 0, "0.000000", "f32", "[0,1,2,3]"),
    ]
    assert check_cases(dev, cases, names) == len(names)


def test_what_ggml_cann_refuses(dev, cases):
    base = ("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=4,nr23=[1,1],kv=113,nb=3,mask=1,sinks={},max_bias=0.000000,"
            "logit_softcap=0.000000,prec=f32,type_K={},type_V={},permute=[0,1,2,3])")
    for name, why in ((base.format(1, "f16", "f16"), "sinks"), (base.format(0, "q8_0", "q8_0"), "src1 type"),
                      (base.format(0, "f32", "f32"), "src1 type")):
        c = cases[name]
        s = dev.supports(c, c.build())
        assert not s.ok and why in s.reason, (name, s.reason)
    soft = next(c for c in cases.values() if c.params["logit_softcap"] and not c.params["sinks"])
    assert "softcap" in dev.supports(soft, soft.build()).reason


def _fia(t, q, k, v, out, pse=None, layout=b"BSND", heads=4, kv_heads=2, inner=2):
    keys = lib_list(t, k)
    values = lib_list(t, v)
    n = ffi.NULL
    args = [q, keys, values, pse or n, n, n, n] + [n] * 17
    args += [heads, 0.125, 65535, 65535, ffi.new("char[]", layout), kv_heads, 0, inner, 0, 0, False, 0, 0,
             out, n]
    return args


def lib_list(t, x):
    """A list of one tensor (made once per tensor: the list owns it, and destroys it)."""
    key = int(ffi.cast("uintptr_t", x))
    if key not in t.lists:
        t.lists[key] = t.meta.aclCreateTensorList(ffi.new("aclTensor *[]", [x]), 1)
        t.handles.remove(x)
    return t.lists[key]


def test_documented_refusals():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    fia = SIM["FusedInferAttentionScoreV2"]
    t = SimTensors()
    t.lists = {}
    F16 = lib.ACL_FLOAT16
    try:
        q, out = t.tensor([1, 8, 4, 64], F16), t.tensor([1, 8, 4, 64], F16)     # B, S, N, D
        fia(*_fia(t, q, t.tensor([1, 32, 2, 64], F16), t.tensor([1, 32, 2, 64], F16), out))   # accepted
        # key strided as a ggml KV-cache view: the doc marks key non-contiguous "x"
        strided = t.tensor([1, 32, 2, 64], F16, strides=[8192, 64, 4096, 1])
        e = rejected(fia, *_fia(t, q, strided, t.tensor([1, 32, 2, 64], F16), out))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "contiguous" in str(e)
        # D 40: not 16-aligned with Q_S > 1
        q40, o40 = t.tensor([1, 8, 4, 40], F16), t.tensor([1, 8, 4, 40], F16)
        e = rejected(fia, *_fia(t, q40, t.tensor([1, 32, 2, 40], F16), t.tensor([1, 32, 2, 40], F16), o40))
        assert "16-aligned" in str(e)
        # 4 query heads over 3 K/V heads
        e = rejected(fia, *_fia(t, q, t.tensor([1, 32, 3, 64], F16), t.tensor([1, 32, 3, 64], F16), out,
                                kv_heads=3))
        assert "multiple" in str(e)
        # pseShift in FLOAT with a FLOAT16 query; then a pseShift shorter than KV_S
        k, v = t.tensor([1, 32, 2, 64], F16), t.tensor([1, 32, 2, 64], F16)
        e = rejected(fia, *_fia(t, q, k, v, out, pse=t.tensor([1, 4, 8, 32], lib.ACL_FLOAT)))
        assert "FLOAT" in str(e)
        e = rejected(fia, *_fia(t, q, k, v, out, pse=t.tensor([1, 4, 8, 16], F16)))
        assert "pseShift shape" in str(e)
        assert "inputLayout" in str(rejected(fia, *_fia(t, q, k, v, out, layout=b"SBH")))
        assert "innerPrecise" in str(rejected(fia, *_fia(t, q, k, v, out, inner=7)))
    finally:
        for lst in t.lists.values():
            t.meta.aclDestroyTensorList(lst)
        t.close()
