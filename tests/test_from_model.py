"""Cases from a GGUF model (cases/from_model.py, `ops cases --from-gguf`, `ops test --cases`):
GGUFs of each family written here with the gguf package (tests/_gguf_models.py), the shapes
llama.cpp's graph gives them, and a sample of the cases run on GGML-CPU and CANN-SIM."""
import subprocess
import sys

import pytest

from _gguf_models import MODELS, write_model
from cannops.backend.base import list_devices
from cannops.cases.from_model import derive, read_gguf
from cannops.cases.graph_ops_file import read_graph_ops
from cannops.native import ggml_sources

ROOT = ggml_sources.ROOT

OPS = [sys.executable, "-m", "cannops.cli.main"]
T, CTX = 8, 256   # a batch of 8 tokens over a 256-cell KV cache

MM = "MUL_MAT(type_a={},type_b=f32,m={},n={},k={},bs=[{},1],nr=[{},{}],per=[0,1,2,3],k_v=0,o=1)"


def mm(ty, m, k, n=T, bs=1, nr=(1, 1)):
    return MM.format(ty, m, n, k, bs, *nr)


def fa(hsk, hsv, nh, gqa, softcap=0.0, kv=CTX):
    return (f"FLASH_ATTN_EXT(hsk={hsk},hsv={hsv},nh={nh},nr23=[{gqa},1],kv={kv},nb={T},mask=1,sinks=0,"
            f"max_bias=0.000000,logit_softcap={softcap:f},prec=f32,type_K=f16,type_V=f16,permute=[0,2,1,3])")


def rope(d, heads, n_dims, mode, fs=1.0, ef=0.0, af=1.0, ff=0, v=0):
    return (f"ROPE(type=f32,ne_a=[{d},{heads},{T},1],n_dims={n_dims},mode={mode},n_ctx={CTX},fs={fs:f},"
            f"ef={ef:f},af={af:f},ff={ff},v={v},inplace=0)")


def mmid(ty, n_mats, n_used, b, m, k):
    return f"MUL_MAT_ID(type_a={ty},type_b=f32,n_mats={n_mats},n_used={n_used},b={b},m={m},n={T},k={k})"


def glu(op, *ne):
    ne = (list(ne) + [1, 1, 1])[:4]
    return f"{op}(type=f32,ne_a=[{','.join(map(str, ne))}],v=0,split)"


# per family, shapes its graph makes in llama.cpp (src/models/<arch>.cpp) for the scaled
# models of _gguf_models.py: head sizes, GQA, rope mode and scaling, the FFN's gate, experts
SHAPES = {
    "llama": [  # GQA 4, head 64, NORMAL rope with rope_freqs, q4_K with a q6_K ffn_down in layer 0;
        # the last layer keeps the outputs' rows (inp_out_ids)
        f"GET_ROWS(type=f32,n=256,m={T},r={T},be1=1,be2=1,v=0)",
        mm("q4_K", 256, 256), mm("q4_K", 64, 256), mm("q6_K", 64, 256), mm("q6_K", 256, 512),
        mm("q4_K", 256, 512), mm("q6_K", 512, 256),
        rope(64, 4, 64, 0, ff=1), rope(64, 1, 64, 0, ff=1), fa(64, 64, 1, 4), glu("SWIGLU", 512, T),
        f"GET_ROWS(type=q6_K,n=256,m=512,r={T},be1=1,be2=1,v=0)",
        f"RMS_NORM(type=f32,ne=[256,{T},1,1],v=0,eps=0.000010,inplace=0)"],
    "qwen2": [  # GQA 7, NEOX, YaRN x4 (ext_factor 1), q/k/v biases
        mm("q8_0", 448, 448), mm("q8_0", 64, 448), rope(64, 7, 64, 2, fs=0.25, ef=1.0),
        fa(64, 64, 1, 7), f"ADD(type=f32,ne=[64,1,1,1],nr=[1,{T},1,1],nf=1,perm1=0,src_overlap=0)"],
    "qwen3": [  # head 128 from key_length, per-head q/k norms, tied output
        mm("q8_0", 512, 256), rope(128, 4, 128, 2), rope(128, 2, 128, 2), fa(128, 128, 2, 2),
        f"RMS_NORM(type=f32,ne=[128,4,{T},1],v=0,eps=0.000001,inplace=0)",
        f"MUL(type=f32,ne=[128,1,1,1],nr=[1,2,{T},1],nf=1,perm1=0,src_overlap=0)", mm("f16", 512, 256)],
    "qwen3moe": [  # 16 experts, 8 used; softmax gating, argsort's top k, normalised (clamped sum) weights
        mm("f32", 16, 256), mmid("q4_K", 16, 8, 1, 256, 256), mmid("q6_K", 16, 8, 0, 256, 256),
        glu("SWIGLU", 256, 8, T),
        f"SOFT_MAX(type=f32,ne=[16,{T},1,1],mask=0,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,"
        f"max_bias=0.000000,inplace=0)",
        f"ARGSORT(type=f32,ne=[16,{T},1,1],order=1)", f"GET_ROWS(type=f32,n=1,m=16,r=8,be1={T},be2=1,v=0)",
        f"SUM_ROWS(type=f32,ne=[8,{T},1,1],permute=0,slice=0)", f"CLAMP(type=f32,ne=[1,{T},1,1],min=0.000061,max=inf)",
        f"DIV(type=f32,ne=[1,{T},1,1],nr=[8,1,1,1],nf=1,perm1=0,src_overlap=0)",
        f"MUL(type=f32,ne=[1,8,{T},1],nr=[256,1,1,1],nf=1,perm1=0,src_overlap=0)"],
    "qwen2moe": [  # the shared expert and its gate: sigmoid as silu(x) / x
        mm("f32", 1, 256), f"SILU(type=f32,ne_a=[1,{T},1,1],v=0)",
        f"DIV(type=f32,ne=[1,{T},1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)", glu("SWIGLU", 512, T),
        mmid("q8_0", 8, 4, 1, 128, 256), fa(64, 64, 4, 1)],
    "deepseek2": [  # MLA: q_a/q_b, kv_a_mqa, the absorbed k_b / v_b, MQA 576/512; YaRN x40
        mm("q8_0", 192, 256), mm("q8_0", 768, 192), mm("q8_0", 576, 256),
        mm("q8_0", 512, 128, bs=4), mm("q8_0", 128, 512, bs=4),
        f"CONCAT(type=f32,ne_a=[512,4,{T},1],ne_b_d=64,dim=0,v=3)", f"CONT(type=f32,ne=[4,128,{T},1],use_view_slice=0)",
        rope(64, 4, 64, 0, fs=0.025, ef=1.0, af=0.730520, v=1),   # q_pe, k_pe: strided views
        rope(64, 1, 64, 0, fs=0.025, ef=1.0, af=0.730520, v=1),
        fa(576, 512, 1, 4), f"SET_ROWS(type_src=f32,type_dst=f16,type_idx=i64,ne=[576,{CTX},1,1],nr23=[1,1],r={T},v=0)",
        f"SIGMOID(type=f32,ne_a=[16,{T},1,1],v=0)", f"SCALE(type=f32,ne=[1,4,{T},1],scale=2.500000,bias=0.000000,inplace=0)",
        mmid("q4_K", 16, 4, 1, 256, 256), glu("SWIGLU", 256, T), glu("SWIGLU", 512, T)],
    "gemma": [  # MQA with head 256, GEGLU, embeddings * sqrt(n_embd), Q * 1/sqrt(256)
        fa(256, 256, 1, 4), glu("GEGLU", 512, T), rope(256, 4, 256, 2),
        f"SCALE(type=f32,ne=[256,4,{T},1],scale=0.062500,bias=0.000000,inplace=0)",
        f"SCALE(type=f32,ne=[256,{T},1,1],scale=16.000000,bias=0.000000,inplace=0)"],
    "gemma2": [  # attention softcap 50, final 30, Q pre-scaled by 1/sqrt(256)
        fa(256, 256, 2, 2, softcap=50.0), f"TANH(type=f32,ne_a=[512,{T},1,1],v=0)",
        f"SCALE(type=f32,ne=[512,{T},1,1],scale=30.000000,bias=0.000000,inplace=0)",
        f"SCALE(type=f32,ne=[256,4,{T},1],scale=0.062500,bias=0.000000,inplace=0)"],
    "gemma3": [  # sliding layers unscaled, the global one with linear x8; q/k norms; Q * 1/sqrt(128)
        rope(128, 4, 128, 2), rope(128, 4, 128, 2, fs=0.125), fa(128, 128, 2, 2), glu("GEGLU", 512, T),
        f"SCALE(type=f32,ne=[128,4,{T},1],scale=0.088388,bias=0.000000,inplace=0)",
        f"RMS_NORM(type=f32,ne=[128,2,{T},1],v=0,eps=0.000001,inplace=0)"],
}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("gguf")
    return {name: write(d / f"{name}.gguf") for name, write in MODELS.items()}


@pytest.mark.parametrize("arch", list(SHAPES))
def test_a_family_makes_the_shapes_its_architecture_builds(models, arch):
    found = derive(read_gguf(models[arch]), [T], CTX)
    names = [mc.case.name for mc in found]
    assert len(names) == len(set(names))
    missing = [n for n in SHAPES[arch] if n not in names]
    assert not missing, "\n".join(missing + ["-- derived:"] + names)


EXPORT = ROOT / "build" / "ggml-cpu" / "prefix" / "bin" / "test-export-graph-ops"


def _node(op, type_name, ne, sources) -> tuple:
    """What a graph node is made of: its op, its type and ne, its sources' types and ne."""
    return op, type_name, tuple(ne), tuple((t, tuple(n)) for t, n in sources)


@pytest.mark.skipif(not EXPORT.exists(), reason="no test-export-graph-ops (make ggml-cpu-export)")
@pytest.mark.parametrize("arch", list(SHAPES))
def test_the_derived_cases_are_the_nodes_llama_cpp_builds(models, arch, tmp_path):
    """llama.cpp itself (test-export-graph-ops of the 0.25.3 build: the model loaded, its prompt
    graph of a ubatch of T tokens and its one-token graph reserved over a KV cache of CTX
    cells) against the derivation at batches 1 and T: every node, by op, type and ne and its
    sources' types and ne, both ways. (Strides and the op_params words a test-backend-ops
    name cannot carry are left out: docs/models.md.)"""
    out = tmp_path / "nodes.txt"
    r = subprocess.run([str(EXPORT), "-m", models[arch], "-o", str(out), "-c", str(CTX), "-b", str(T),
                        "-ub", str(T), "-np", "1"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    exported = {}
    for line in out.read_text().splitlines():
        (case,) = read_graph_ops([line], "0.25.3")
        p = case.params
        exported[_node(case.op, p["type"], p["ne"], [(t, n) for t, n, _ in p["sources"]])] = p["name"]
    derived = {}
    for mc in derive(read_gguf(models[arch]), [1, T], CTX):
        t = mc.case.build().out
        derived[_node(mc.case.op, t.type.name, t.ne, [(s.type.name, s.ne) for s in t.src if s is not None])] = \
            mc.case.name
    assert [derived[k] for k in derived if k not in exported] == []
    assert [(exported[k], k) for k in exported if k not in derived] == []


def test_counts_say_how_often_a_forward_pass_runs_a_case(models):
    found = {mc.case.name: mc for mc in derive(read_gguf(models["gemma3"]), [T], CTX)}
    assert found[rope(128, 4, 128, 2)].count == 5 and found[rope(128, 4, 128, 2, fs=0.125)].count == 1
    assert found[fa(128, 128, 2, 2)].count == 6
    q = found[mm("q4_0", 512, 256)]    # attn_q, ffn_gate, ffn_up of 6 layers, the tied output
    assert q.count == 19 and "token_embd.weight (tied)" in q.roles and q.flops() == 19 * 2 * 512 * 256 * T


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3moe"])
def test_each_layer_adds_two_residuals(models, arch):
    # llama.cpp's layers: ffn_inp = cur + inpSA after attention, cur = cur + ffn_inp after
    # the FFN; both [n_embd, T]: one case, run twice a layer (the estimate sums the runs)
    found = derive(read_gguf(models[arch]), [T], CTX)
    n_embd = read_gguf(models[arch]).key("embedding_length")
    name = f"ADD(type=f32,ne=[{n_embd},{T},1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"
    residual = next(mc for mc in found if mc.case.name == name)
    assert residual.by_tokens[T] == 2 * 2 and "residual" in residual.roles   # 2 layers


def test_deepseek2_without_mla_attends_with_192_and_128(tmp_path):
    path = MODELS["deepseek2"](tmp_path / "ds.gguf", mla=False)
    names = [mc.case.name for mc in derive(read_gguf(path), [T], CTX)]
    assert fa(192, 128, 4, 1) in names and mm("q8_0", 1024, 512) in names   # attn_kv_b


def test_an_unknown_architecture_names_the_keys_it_would_need(tmp_path):
    path = write_model(tmp_path / "m.gguf", "mamba2", {"embedding_length": 64}, {})
    with pytest.raises(ValueError, match=r"'mamba2' is not modelled .*mamba2\.embedding_length"):
        derive(read_gguf(path))
    r = subprocess.run([*OPS, "cases", "--from-gguf", path], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "mamba2.block_count" in r.stderr


def test_a_missing_key_or_embedding_is_named(tmp_path):
    path = write_model(tmp_path / "m.gguf", "llama", {"embedding_length": 64}, {})
    with pytest.raises(ValueError, match="llama.block_count, llama.attention.head_count"):
        derive(read_gguf(path))
    path = write_model(tmp_path / "e.gguf", "llama", {"embedding_length": 64, "block_count": 1,
                                                      "attention.head_count": 2}, {})
    with pytest.raises(ValueError, match="no token_embd.weight"):
        derive(read_gguf(path))


VOCABS = ROOT / "build" / "sdist" / f"llama_cpp_python-{ggml_sources.VERSION}" / "vendor" / "llama.cpp" / "models"


@pytest.mark.skipif(not VOCABS.is_dir(), reason="the pinned llama-cpp-python sdist is not unpacked (make ggml-cpu)")
def test_the_real_ggufs_of_the_pinned_sdist_are_vocab_only():
    """The only real GGUFs a registry package here ships: llama.cpp's models/ggml-vocab-*.gguf in
    the pinned sdist. Their metadata is a real model's (ggml-vocab-llama-spm: LLaMA 7B's 32 layers
    of 4096), but they hold no tensor: a one-line error that says so, or names an architecture
    that is not modelled, each exit 2."""
    vocabs = sorted(VOCABS.glob("ggml-vocab-*.gguf"))
    assert len(vocabs) > 10
    spm = read_gguf(str(VOCABS / "ggml-vocab-llama-spm.gguf"))
    assert (spm.arch, spm.key("block_count"), spm.key("embedding_length"), spm.tensors) == ("llama", 32, 4096, {})
    said = {}
    for path in vocabs:
        r = subprocess.run([*OPS, "cases", "--from-gguf", str(path)], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and not r.stdout, (path, r.stderr)
        said[path.name] = "vocab-only" if "a vocab-only GGUF" in r.stderr else "not modelled" \
            if "is not modelled" in r.stderr else r.stderr
    assert set(said.values()) == {"vocab-only", "not modelled"}, said
    assert said["ggml-vocab-qwen2.gguf"] == "vocab-only" and said["ggml-vocab-phi-3.gguf"] == "not modelled"


def test_cases_file_runs_on_ggml_cpu_and_cann_sim_without_fail(models, tmp_path):
    """`ops cases` writes the file, `ops test --cases` runs 2 cases of each op of every family."""
    devices = [d for d in ("GGML-CPU", "CANN-SIM") if d in dict(list_devices())]
    if not devices:
        pytest.skip("neither GGML-CPU nor CANN-SIM here")
    lines = []
    for arch, path in models.items():
        r = subprocess.run([*OPS, "cases", "--from-gguf", path, "--batch", "1,8", "--ctx", "256", "--why"],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        lines += [f"# {arch}"] + r.stdout.splitlines()
    cases = tmp_path / "cases.txt"
    cases.write_text("\n".join(lines) + "\n")
    r = subprocess.run([*OPS, "test", "--cases", str(cases), "--sample", "2", "-b", ",".join(devices), "-j", "2",
                        "--no-ref-cache"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert f"{len(devices)}/{len(devices)} backends passed" in r.stdout


def test_cases_file_errors_are_one_line_before_any_work(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("MUL_MAT\n")
    for args, why in ((["--cases", str(tmp_path / "none.txt")], "cannot read --cases"),
                      (["--cases", str(bad)], "is not a case name"),
                      (["--cases", str(bad), "-o", "ADD"], "cannot go with -o")):
        r = subprocess.run([*OPS, "test", *args], capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and why in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_model_report_names_what_a_310p_would_not_run(models):
    r = subprocess.run([*OPS, "support", "--from-gguf", models["qwen3"], "-b", "CANN-SIM", "--soc", "310P",
                        "--batch", "1,8", "--ctx", "256"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    fa_line = next(line for line in r.stdout.splitlines() if line.strip().startswith("FLASH_ATTN_EXT"))
    assert "not supported: on CPU" in fa_line and "%" in fa_line
    # the evidence of that verdict: ggml-cann's 310P branch of supports_op refuses it
    assert fa_line.endswith("  device path"), fa_line
    assert "310P" in r.stdout and "probed" in r.stdout
    verdict = next(line for line in r.stdout.splitlines() if "=>" in line)
    # the 310P has neither flash attention nor q8_0 matmuls in ggml-cann: both to the CPU
    assert "CPU fallback" in verdict and "FLASH_ATTN_EXT" in verdict
    assert "MUL_MAT" in verdict.replace("FLASH_ATTN_EXT", "")
    r = subprocess.run([*OPS, "support", "--from-gguf", models["qwen3"], "-b", "CANN-SIM", "--batch", "1,8",
                        "--ctx", "256"], capture_output=True, text=True, timeout=600)
    assert "on CANN-SIM: runs entirely on the device" in r.stdout, r.stdout


def _verdict(path, *soc):
    r = subprocess.run([*OPS, "support", "--from-gguf", path, "-b", "CANN-SIM", *soc, "--batch", "1,8",
                        "--ctx", "256"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    line = next(line for line in r.stdout.splitlines() if "=>" in line)
    return set(line.split(" would run ")[1].split(" on the CPU")[0].split(", ")) if " would run " in line else set(), \
        r.stdout


def test_model_report_names_the_310p_refusals_of_deepseek2(models):
    """DeepSeek's q_pe / k_pe rotate strided views of q and of kv_a_mqa's rows: the 310P
    branch of ggml-cann rotates contiguous rows only, so ROPE joins what the 310P hands to the
    CPU (with flash attention, its q8_0 matmuls), while the 910B runs it."""
    on_910b, _ = _verdict(models["deepseek2"])
    on_310p, text = _verdict(models["deepseek2"], "--soc", "310P")
    assert "ROPE" not in on_910b and {"ROPE", "FLASH_ATTN_EXT", "MUL_MAT"} <= on_310p, (on_910b, on_310p)
    assert on_910b <= on_310p
    assert "non-contiguous src0 on 310P" in text


def test_without_flash_attention_kq_softmax_kqv(models, tmp_path):
    names = [mc.case.name for mc in derive(read_gguf(models["qwen3"]), [T], CTX, flash_attn=False)]
    assert not any(n.startswith("FLASH_ATTN_EXT") for n in names)
    kq = "MUL_MAT(type_a=f16,type_b=f32,m={},n={},k={},bs=[2,1],nr=[2,1],per=[{}],k_v=0,o=1)"
    assert kq.format(CTX, T, 128, "0,2,1,3") in names and kq.format(128, T, CTX, "0,1,2,3") in names
    assert (f"SOFT_MAX(type=f32,ne=[{CTX},{T},1,1],mask=1,sinks=0,m_prec=f16,nr23=[4,1],scale=0.088388,"
            f"max_bias=0.000000,inplace=0)") in names
    r = subprocess.run([*OPS, "cases", "--from-gguf", models["gemma2"], "--batch", "8", "--ctx", "256",
                        "--no-flash-attn"], capture_output=True, text=True, timeout=300)
    cases = tmp_path / "nofa.txt"
    cases.write_text("\n".join(line for line in r.stdout.splitlines() if not line.startswith("MUL_MAT(type_a=q")))
    devices = [d for d in ("GGML-CPU", "CANN-SIM") if d in dict(list_devices())]
    r = subprocess.run([*OPS, "test", "--cases", str(cases), "-b", ",".join(devices), "--no-ref-cache"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-3000:]
