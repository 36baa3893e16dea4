"""Small GGUF models of real architectures, written with the gguf package: the keys and the
tensor names, shapes and types that llama.cpp's converter writes for each family, zero-filled
data. Dimensions are small (a case runs in a second) but keep each architecture's ratios:
GQA, head sizes, MLA ranks, experts."""
from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType as Q, GGUFWriter
from gguf.quants import quant_shape_to_byte_shape


def _zeros(ne: tuple[int, ...], type_name: str) -> tuple[np.ndarray, Q]:
    """Zero-filled data of a tensor of shape ne (ggml order) and type."""
    qt = Q[type_name.upper()]
    shape = tuple(reversed(ne))
    if qt == Q.F32:
        return np.zeros(shape, np.float32), qt
    if qt == Q.F16:
        return np.zeros(shape, np.float16), qt
    return np.zeros(quant_shape_to_byte_shape(shape, qt), np.uint8), qt


def write_model(path, arch: str, keys: dict, tensors: dict[str, tuple[tuple[int, ...], str]], typed=()) -> str:
    """A GGUF at path: general.architecture, `keys` ({arch}.KEY or full names), `typed` keys
    (full name, GGUFValueType, value) and the tensors {name: (ne, type)}."""
    w = GGUFWriter(str(path), arch)
    if "token_embd.weight" in tensors:   # what llama.cpp's loader requires of every model
        w.add_tokenizer_model("none")    # (no vocabulary: loaded as such, with its size)
        ne = tensors["token_embd.weight"][0]
        w.add_uint32(f"{arch}.vocab_size", ne[1] if len(ne) > 1 else 1)   # (a wrong one: tests/test_hostile_models.py)
        keys = {"context_length": 8192, **keys}
    for k, v in keys.items():
        name = k if k.startswith("general.") else f"{arch}.{k}"
        if isinstance(v, bool):
            w.add_bool(name, v)
        elif isinstance(v, int):
            w.add_uint32(name, v)
        elif isinstance(v, float):
            w.add_float32(name, v)
        elif isinstance(v, list):
            w.add_array(name, v)
        else:
            w.add_string(name, v)
    for name, vtype, v in typed:
        w.add_key_value(name, v, vtype)
    for name, (ne, ty) in tensors.items():
        data, qt = _zeros(ne, ty)
        w.add_tensor(name, data, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def _dense_layer(il, n_embd, n_q, n_kv, n_ff, wt="q4_0", down="q6_K", norms=("attn_norm", "ffn_norm")):
    t = {f"blk.{il}.{n}.weight": ((n_embd,), "f32") for n in norms}
    t.update({
        f"blk.{il}.attn_q.weight": ((n_embd, n_q), wt),
        f"blk.{il}.attn_k.weight": ((n_embd, n_kv), wt),
        f"blk.{il}.attn_v.weight": ((n_embd, n_kv), down),
        f"blk.{il}.attn_output.weight": ((n_q, n_embd), wt),
        f"blk.{il}.ffn_gate.weight": ((n_embd, n_ff), wt),
        f"blk.{il}.ffn_up.weight": ((n_embd, n_ff), wt),
        f"blk.{il}.ffn_down.weight": ((n_ff, n_embd), down),
    })
    return t


def _common(n_embd, n_vocab, emb="q6_K", tied=False, out="q6_K"):
    t = {"token_embd.weight": ((n_embd, n_vocab), emb), "output_norm.weight": ((n_embd,), "f32")}
    if not tied:
        t["output.weight"] = ((n_embd, n_vocab), out)
    return t


# Llama 3 8B, scaled down: n_embd 4096 -> 256, 32/8 heads of 128 -> 4/1 heads of 64 (GQA 4),
# n_ff 14336 -> 512; rope_freqs (Llama 3.1's factors); Q4_K_M-like types
def llama(path, n_layer=2):
    keys = {"embedding_length": 256, "block_count": n_layer, "feed_forward_length": 512, "context_length": 8192,
            "attention.head_count": 4, "attention.head_count_kv": 1, "rope.dimension_count": 64,
            "rope.freq_base": 500000.0, "attention.layer_norm_rms_epsilon": 1e-5}
    t = _common(256, 512)
    t["rope_freqs.weight"] = ((32,), "f32")
    for il in range(n_layer):
        t.update(_dense_layer(il, 256, 256, 64, 512, wt="q4_K", down="q6_K" if il == 0 else "q4_K"))
    return write_model(path, "llama", keys, t)


# Qwen2 7B scaled: GQA 7 (28/4 heads), q/k/v biases, NeoX rope, YaRN keys
def qwen2(path, n_layer=2):
    keys = {"embedding_length": 448, "block_count": n_layer, "feed_forward_length": 512,
            "attention.head_count": 7, "attention.head_count_kv": 1, "rope.freq_base": 1000000.0,
            "attention.layer_norm_rms_epsilon": 1e-6, "rope.scaling.type": "yarn", "rope.scaling.factor": 4.0}
    t = _common(448, 512, emb="q8_0", out="q8_0")
    for il in range(n_layer):
        t.update(_dense_layer(il, 448, 448, 64, 512, wt="q8_0", down="q8_0"))
        t.update({f"blk.{il}.attn_{x}.bias": ((n,), "f32") for x, n in (("q", 448), ("k", 64), ("v", 64))})
    return write_model(path, "qwen2", keys, t)


# Qwen3 0.6B scaled: head_dim 128 (key_length) independent of n_embd, q/k norms, tied embeddings
def qwen3(path, n_layer=2):
    keys = {"embedding_length": 256, "block_count": n_layer, "feed_forward_length": 768,
            "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 128,
            "attention.value_length": 128, "rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-6}
    t = _common(256, 512, emb="f16", tied=True)
    for il in range(n_layer):
        t.update(_dense_layer(il, 256, 512, 256, 768, wt="q8_0", down="q8_0"))
        t.update({f"blk.{il}.attn_q_norm.weight": ((128,), "f32"), f"blk.{il}.attn_k_norm.weight": ((128,), "f32")})
    return write_model(path, "qwen3", keys, t)


def _moe(il, n_embd, n_exp, n_ff_exp, ty="q4_0", down="q8_0"):
    return {f"blk.{il}.ffn_gate_inp.weight": ((n_embd, n_exp), "f32"),
            f"blk.{il}.ffn_gate_exps.weight": ((n_embd, n_ff_exp, n_exp), ty),
            f"blk.{il}.ffn_up_exps.weight": ((n_embd, n_ff_exp, n_exp), ty),
            f"blk.{il}.ffn_down_exps.weight": ((n_ff_exp, n_embd, n_exp), down)}


# Qwen3-30B-A3B scaled: 128 experts -> 16, 8 used, q/k norms, normalised top-k weights
def qwen3moe(path, n_layer=2):
    keys = {"embedding_length": 256, "block_count": n_layer, "feed_forward_length": 768,
            "expert_feed_forward_length": 256, "expert_count": 16, "expert_used_count": 8,
            "attention.head_count": 4, "attention.head_count_kv": 1, "attention.key_length": 128,
            "attention.value_length": 128, "rope.freq_base": 1000000.0, "attention.layer_norm_rms_epsilon": 1e-6}
    t = _common(256, 512, emb="q4_K")
    for il in range(n_layer):
        layer = _dense_layer(il, 256, 512, 128, 1, wt="q4_K")
        t.update({k: v for k, v in layer.items() if ".ffn_" not in k or k.endswith("_norm.weight")})
        t.update({f"blk.{il}.attn_q_norm.weight": ((128,), "f32"), f"blk.{il}.attn_k_norm.weight": ((128,), "f32")})
        t.update(_moe(il, 256, 16, 256, ty="q4_K", down="q6_K"))
    return write_model(path, "qwen3moe", keys, t)


# Qwen1.5/2-MoE scaled: softmax gating without normalisation, a shared expert with a sigmoid gate
def qwen2moe(path, n_layer=2):
    keys = {"embedding_length": 256, "block_count": n_layer, "expert_feed_forward_length": 128,
            "expert_shared_feed_forward_length": 512, "expert_count": 8, "expert_used_count": 4,
            "attention.head_count": 4, "attention.head_count_kv": 4, "rope.freq_base": 1000000.0,
            "attention.layer_norm_rms_epsilon": 1e-6}
    t = _common(256, 512, emb="q8_0")
    for il in range(n_layer):
        layer = _dense_layer(il, 256, 256, 256, 1, wt="q8_0")
        t.update({k: v for k, v in layer.items() if ".ffn_" not in k or k.endswith("_norm.weight")})
        t.update({f"blk.{il}.attn_{x}.bias": ((256,), "f32") for x in "qkv"})
        t.update(_moe(il, 256, 8, 128, ty="q8_0", down="q8_0"))
        t.update({f"blk.{il}.ffn_gate_inp_shexp.weight": ((256,), "f32"),
                  f"blk.{il}.ffn_gate_shexp.weight": ((256, 512), "q8_0"),
                  f"blk.{il}.ffn_up_shexp.weight": ((256, 512), "q8_0"),
                  f"blk.{il}.ffn_down_shexp.weight": ((512, 256), "q8_0")})
    return write_model(path, "qwen2moe", keys, t)


# DeepSeek-V3 scaled: MLA (q_lora 1536 -> 192, kv_lora 512, rope 64, nope 128, v 128), the
# absorbed attn_k_b / attn_v_b form, one leading dense layer, sigmoid gating with a bias,
# normalised and scaled (2.5) weights, a shared expert, YaRN x40
def deepseek2(path, n_layer=2, mla=True):
    n_embd, n_head, nope, rope, v, kv_lora, q_lora = 256, 4, 128, 64, 128, 512, 192
    keys = {"embedding_length": n_embd, "block_count": n_layer, "feed_forward_length": 512,
            "expert_feed_forward_length": 256, "expert_count": 16, "expert_used_count": 4,
            "expert_shared_count": 1, "leading_dense_block_count": 1, "expert_weights_scale": 2.5,
            "expert_weights_norm": True, "expert_gating_func": 2,
            "attention.head_count": n_head, "attention.head_count_kv": 1 if mla else n_head,
            "attention.key_length": kv_lora + rope if mla else nope + rope,
            "attention.value_length": kv_lora if mla else v,
            "attention.key_length_mla": nope + rope, "attention.value_length_mla": v,
            "attention.q_lora_rank": q_lora, "attention.kv_lora_rank": kv_lora, "rope.dimension_count": rope,
            "rope.freq_base": 10000.0, "rope.scaling.type": "yarn", "rope.scaling.factor": 40.0,
            "rope.scaling.yarn_log_multiplier": 0.1, "attention.layer_norm_rms_epsilon": 1e-6}
    t = _common(n_embd, 512, emb="q8_0")
    for il in range(n_layer):
        p = f"blk.{il}."
        t.update({p + "attn_norm.weight": ((n_embd,), "f32"), p + "ffn_norm.weight": ((n_embd,), "f32"),
                  p + "attn_q_a_norm.weight": ((q_lora,), "f32"), p + "attn_kv_a_norm.weight": ((kv_lora,), "f32"),
                  p + "attn_q_a.weight": ((n_embd, q_lora), "q8_0"),
                  p + "attn_q_b.weight": ((q_lora, n_head * (nope + rope)), "q8_0"),
                  p + "attn_kv_a_mqa.weight": ((n_embd, kv_lora + rope), "q8_0"),
                  p + "attn_output.weight": ((n_head * v, n_embd), "q8_0")})
        if mla:
            t.update({p + "attn_k_b.weight": ((nope, kv_lora, n_head), "q8_0"),
                      p + "attn_v_b.weight": ((kv_lora, v, n_head), "q8_0")})
        else:
            t[p + "attn_kv_b.weight"] = ((kv_lora, n_head * (nope + v)), "q8_0")
        if il < 1:
            t.update({p + "ffn_gate.weight": ((n_embd, 512), "q8_0"), p + "ffn_up.weight": ((n_embd, 512), "q8_0"),
                      p + "ffn_down.weight": ((512, n_embd), "q8_0")})
        else:
            t.update(_moe(il, n_embd, 16, 256, ty="q4_K", down="q6_K"))
            t[p + "exp_probs_b.bias"] = ((16,), "f32")
            # the shared expert: expert_feed_forward_length x expert_shared_count wide, as
            # llama.cpp's loader checks (deepseek2: n_ff_exp * n_expert_shared)
            t.update({p + "ffn_gate_shexp.weight": ((n_embd, 256), "q8_0"),
                      p + "ffn_up_shexp.weight": ((n_embd, 256), "q8_0"),
                      p + "ffn_down_shexp.weight": ((256, n_embd), "q8_0")})
    return write_model(path, "deepseek2", keys, t)


# Gemma 2 2B scaled: head_dim 256 != n_embd / n_head, GEGLU, pre/post norms, attention and
# final logit soft-capping, alternating sliding-window layers, tied embeddings
def gemma2(path, n_layer=2):
    keys = {"embedding_length": 256, "block_count": n_layer, "feed_forward_length": 512,
            "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 256,
            "attention.value_length": 256, "attention.layer_norm_rms_epsilon": 1e-6,
            "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "attention.sliding_window": 256,
            "attention.query_pre_attn_scalar": 256, "rope.freq_base": 10000.0}
    t = _common(256, 512, emb="q8_0", tied=True)
    for il in range(n_layer):
        t.update(_dense_layer(il, 256, 1024, 512, 512, wt="q8_0", down="q8_0",
                              norms=("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm")))
    return write_model(path, "gemma2", keys, t)


# Gemma 3 4B scaled: q/k norms, 5 sliding layers to 1 global, linear RoPE scaling x8 (global)
def gemma3(path, n_layer=6):
    keys = {"embedding_length": 256, "block_count": n_layer, "feed_forward_length": 512,
            "attention.head_count": 4, "attention.head_count_kv": 2, "attention.key_length": 128,
            "attention.value_length": 128, "attention.layer_norm_rms_epsilon": 1e-6,
            "attention.sliding_window": 256, "rope.freq_base": 1000000.0, "rope.scaling.type": "linear",
            "rope.scaling.factor": 8.0}
    t = _common(256, 512, emb="q4_0", tied=True)
    for il in range(n_layer):
        t.update(_dense_layer(il, 256, 512, 256, 512, wt="q4_0", down="q4_0",
                              norms=("attn_norm", "post_attention_norm", "ffn_norm", "post_ffw_norm")))
        t.update({f"blk.{il}.attn_q_norm.weight": ((128,), "f32"), f"blk.{il}.attn_k_norm.weight": ((128,), "f32")})
    return write_model(path, "gemma3", keys, t)


# Gemma 1 2B scaled: MQA (8 heads, 1 KV head), head_dim 256, GEGLU
def gemma(path, n_layer=2):
    keys = {"embedding_length": 256, "block_count": n_layer, "feed_forward_length": 512,
            "attention.head_count": 4, "attention.head_count_kv": 1, "attention.key_length": 256,
            "attention.value_length": 256, "attention.layer_norm_rms_epsilon": 1e-6, "rope.freq_base": 10000.0}
    t = _common(256, 512, emb="q8_0", tied=True)
    for il in range(n_layer):
        t.update(_dense_layer(il, 256, 1024, 256, 512, wt="q8_0", down="q8_0"))
    return write_model(path, "gemma", keys, t)


MODELS = {f.__name__: f for f in (llama, qwen2, qwen3, qwen2moe, qwen3moe, deepseek2, gemma, gemma2, gemma3)}
