"""The op cases a model's forward pass makes, derived from a GGUF file's metadata and tensor
infos (no weight is read), as catalog cases named as test-backend-ops names them.

The graph is llama.cpp's (src/models/<arch>.cpp, llm_graph_context's build_norm, build_ffn,
build_moe_ffn, build_attn with flash attention): one MUL_MAT per weight type and shape at
each batch size, MUL_MAT_ID for the experts, GET_ROWS of the embeddings, ROPE with the
model's mode, n_rot and scaling, FLASH_ATTN_EXT with its heads and head sizes, the KV
cache's SET_ROWS, the norms, the GLU, the MoE gating, and the residual and broadcast ops.

What a test-backend-ops name cannot say is left at the struct's own value: ROPE's
freq_base and beta_fast/slow, FLASH_ATTN_EXT's kq_scale (1/sqrt(hsk) there), and the strides
of views that test_mul_mat has no parameter for (DeepSeek's permuted q_nope is taken
contiguous). docs/models.md lists the shapes per architecture.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from .catalog import Case, family
from .gguf_header import GGUFError, Skipped, TensorInfo, read_header
from .names import case_from_name
from .reduce import SORT_DESC
from .rope import NEOX, NORMAL
from .types import ggml_type
from .untrusted import NotRegular, quoted
from .versions import at_or_after, current

# per architecture: rope mode, the gated unit of its FFN, and what it has beyond llama's
# graph (llama_model_rope_type; src/models/*.cpp)
ARCHS: dict[str, dict[str, Any]] = {
    "llama": dict(rope=NORMAL, glu="SWIGLU"),
    "qwen2": dict(rope=NEOX, glu="SWIGLU"),
    "qwen2moe": dict(rope=NEOX, glu="SWIGLU", norm_w=False),
    "qwen3": dict(rope=NEOX, glu="SWIGLU"),
    "qwen3moe": dict(rope=NEOX, glu="SWIGLU", norm_w=True),
    "deepseek2": dict(rope=NORMAL, glu="SWIGLU"),
    "gemma": dict(rope=NEOX, glu="GEGLU", embd_scale=True, q_scale=True),
    "gemma2": dict(rope=NEOX, glu="GEGLU", embd_scale=True, q_scale=True, swa=lambda il: il % 2 == 0),
    "gemma3": dict(rope=NEOX, glu="GEGLU", embd_scale=True, q_scale=True, swa=lambda il: (il + 1) % 6 != 0),
}

# the keys every architecture is derived from ({arch}.KEY); a missing one is an error naming it
REQUIRED = ("embedding_length", "block_count", "attention.head_count")

GATING_SOFTMAX, GATING_SIGMOID = 1, 2   # llama_expert_gating_func_type


# a model dimension past this is a damaged file, not a model (the largest real ones: vocabularies
# of 256k, FFNs of 50k); the cases' own sizes are bounded again where they are built
MAX_SIZE = 1 << 24
ARCH_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")   # llama.cpp's LLM_ARCH_NAMES: gptneox, command-r, ...
# tensors read by name, and the dims the graph reads of them
DIMS = {"token_embd.weight": (2,), "output.weight": (2,), "ffn_up.weight": (2,), "ffn_up_shexp.weight": (2,),
        "ffn_gate_inp_shexp.weight": (1, 2), "ffn_up_exps.weight": (3,), "ffn_gate_exps.weight": (3,),
        "ffn_down_exps.weight": (3,), "attn_k_b.weight": (3,), "attn_v_b.weight": (3,)}


def _kind(v: Any) -> str:
    return ("a boolean" if isinstance(v, bool) else "an array" if isinstance(v, list) else
            "a string" if isinstance(v, str) else repr(v) if isinstance(v, Skipped) else type(v).__name__)


@dataclass(frozen=True)
class Model:
    """A GGUF's architecture, metadata (key -> value) and tensor infos (name -> (type, ne))."""
    arch: str
    keys: dict[str, Any]
    tensors: dict[str, tuple[str, tuple[int, ...]]]
    path: str = ""

    def key(self, name: str, default: Any = None) -> Any:
        return self.keys.get(f"{self.arch}.{name}", default)

    def bad(self, name: str, why: str) -> ValueError:
        """The one-line error of a key (or a tensor: `name` with a '.weight'), naming the file."""
        return ValueError(f"{self.path or 'the model'}: {self.arch}.{name}: {why}")

    def count(self, name: str, default: int | None = None, low: int = 1) -> int:
        """{arch}.NAME as an integer in [low, MAX_SIZE], `default` where absent (None: required)."""
        v = self.key(name, default)
        if v is None:
            raise self.bad(name, "missing (the graph needs it)")
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.bad(name, f"{_kind(v)} where an integer belongs")
        if not low <= v <= MAX_SIZE:
            raise self.bad(name, f"{v} is out of range [{low}, {MAX_SIZE}]")
        return v

    def real(self, name: str, default: float, low: float = 0.0) -> float:
        """{arch}.NAME as a finite number >= low, `default` where absent."""
        v = self.key(name, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.bad(name, f"{_kind(v)} where a number belongs")
        if not (math.isfinite(v) and v >= low):
            raise self.bad(name, f"{v:g} is not a finite number >= {low:g}")
        return float(v)

    def flag(self, name: str, default: bool) -> bool:
        v = self.key(name, default)
        if not isinstance(v, bool):
            raise self.bad(name, f"{_kind(v)} where a boolean belongs")
        return v

    def word(self, name: str, default: str) -> str:
        v = self.key(name, default)
        if not isinstance(v, str):
            raise self.bad(name, f"{_kind(v)} where a string belongs")
        return v


def _tensor_type(path: str, t: TensorInfo) -> tuple[str, tuple[int, ...]]:
    """A tensor info as (type as ggml spells it, ne); ValueError naming an unknown type."""
    from gguf import GGMLQuantizationType
    try:
        return ggml_type(GGMLQuantizationType(t.type).name.lower()).name, t.ne
    except (ValueError, KeyError):
        raise ValueError(f"{path}: tensor {quoted(t.name)}: unknown ggml type {t.type}") from None


def read_gguf(path: str) -> Model:
    """The metadata and tensor infos of a GGUF file (the weights are never read; the header is
    read with bounds: cases/gguf_header.py); ValueError in one line naming the file."""
    try:
        # tokenizer.ggml.*: the vocabulary (large, and not needed)
        keys, infos = read_header(path, skip_prefixes=("tokenizer.ggml.",))
    except OSError as e:
        raise ValueError(f"{path}: not readable: {e.strerror or e}") from None
    except GGUFError as e:
        raise ValueError(f"{path}: not a readable GGUF file: {e}") from None
    except NotRegular as e:
        raise ValueError(str(e)) from None
    tensors = {}
    for t in infos:
        if t.name in tensors:
            raise ValueError(f"{path}: tensor {quoted(t.name)} is listed twice")
        tensors[t.name] = _tensor_type(path, t)
    arch = keys.get("general.architecture")
    if arch is None:
        raise ValueError(f"{path}: no general.architecture key")
    if not isinstance(arch, str) or not ARCH_NAME.fullmatch(arch):
        shown = quoted(arch) if isinstance(arch, str) else _kind(arch)
        raise ValueError(f"{path}: general.architecture: {shown} is not an architecture name")
    return Model(arch, keys, tensors, path)


def _check_tensors(m: Model) -> None:
    """The tensors the graph reads: the dims it reads of each, every dim in [1, MAX_SIZE]."""
    for name, (_, ne) in m.tensors.items():
        parts = name.split(".", 2)
        base = parts[2] if parts[0] == "blk" and len(parts) == 3 else name
        dims = DIMS.get(base)
        if dims is None and not (parts[0] == "blk" and base.endswith((".weight", ".bias"))):
            continue
        if dims is not None and len(ne) not in dims:
            raise ValueError(f"{m.path or 'the model'}: tensor {name}: {len(ne)}-d (ne {list(ne)}), "
                             f"the graph reads it as {' or '.join(map(str, dims))}-d")
        if any(not 1 <= n <= MAX_SIZE for n in ne):
            raise ValueError(f"{m.path or 'the model'}: tensor {name}: ne {list(ne)} has a dim out of "
                             f"range [1, {MAX_SIZE}]")


@dataclass
class ModelCase:
    """A case of the model, how often one forward pass (of `n_tokens` tokens) runs it, and
    the weights or steps it comes from."""
    case: Case
    n_tokens: int
    count: int = 0
    roles: list[str] = field(default_factory=list)
    # how often each batch size's forward pass runs it (its runs of `count`, per tokens)
    by_tokens: dict[int, int] = field(default_factory=dict)

    def flops(self) -> int:
        """The floating-point work of all its runs in one forward pass (0: memory-bound)."""
        fam = self.case.family
        if fam.flops is None:
            return 0
        return self.count * fam.flops(None, self.case.params)


class _Cases:
    """The cases derived so far, in order, each name once (with its count and roles)."""

    def __init__(self, version: str, flash_attn: bool = True, path: str = "the model"):
        self.version, self.path = version, path
        self.flash_attn = flash_attn   # llama.cpp's --flash-attn: FLASH_ATTN_EXT, or KQ / softmax / KQV
        self.by_name: dict[str, ModelCase] = {}

    def add(self, fam_name: str, n_tokens: int, role: str, **params) -> None:
        fam = family(fam_name, self.version)
        defaults = {k: v for d in fam.changes if at_or_after(self.version, d.version) for k, v in d.defaults.items()}
        later = params.pop("later", {})   # params of a later catalog version, where it has them
        params = {**defaults, **params, **{k: v for k, v in later.items() if k in defaults}}
        # read back from its name: the case `ops test --cases` runs (floats as %f prints them)
        try:
            case = case_from_name(Case(fam, params).name)
        except ValueError as e:   # a size past what a case may take: the model's keys or shapes
            raise ValueError(f"{self.path}: the {fam_name} case of {role} is refused: {e}") from None
        mc = self.by_name.setdefault(case.name, ModelCase(case, n_tokens))
        mc.count += 1
        mc.by_tokens[n_tokens] = mc.by_tokens.get(n_tokens, 0) + 1
        if role not in mc.roles:
            mc.roles.append(role)

    # the families as the model's graph uses them

    def mul_mat(self, t, role, type_a, m, k, n, bs=(1, 1), nr=(1, 1)):
        self.add("mul_mat", t, role, type_a=type_a, type_b="f32", m=m, n=n, k=k, bs=list(bs), nr=list(nr),
                 per=[0, 1, 2, 3], k_v=0, o=1)

    def binary(self, t, role, op, ne, nr=(1, 1, 1, 1)):
        ne = (list(ne) + [1, 1, 1])[:4]
        self.add("bin_bcast", t, role, op=op, type="f32", ne=ne, nr=list(nr), nf=1, perm1=False, src_overlap=False)

    def rms_norm(self, t, role, ne, eps):
        ne = (list(ne) + [1, 1, 1])[:4]
        self.add("rms_norm", t, role, type="f32", ne=ne, v=0, eps=eps, inplace=False)
        # the norm's weight, broadcast over the rows
        self.binary(t, role, "MUL", [ne[0], 1, 1, 1], [1, ne[1], ne[2], ne[3]])

    def unary(self, t, role, op, ne):
        self.add("unary", t, role, op=op, type="f32", ne_a=(list(ne) + [1, 1, 1])[:4], v=0)

    def scale(self, t, role, ne, s):
        self.add("scale", t, role, type="f32", ne=(list(ne) + [1, 1, 1])[:4], scale=float(s), bias=0.0,
                 inplace=False)


def _pad(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def derive(model: Model, batches: Iterable[int] = (1, 512), ctx: int = 4096,
           version: str | None = None, flash_attn: bool = True) -> list[ModelCase]:
    """The cases of one forward pass of `model` over each batch size (tokens per ubatch) with
    a KV cache of `ctx` cells, in graph order, each once; ValueError for an architecture that
    is not modelled or a GGUF that lacks the keys it needs."""
    spec = ARCHS.get(model.arch)
    if spec is None:
        raise ValueError(f"architecture {model.arch!r} is not modelled (known: {', '.join(ARCHS)}); deriving "
                         f"its cases needs {', '.join(model.arch + '.' + k for k in REQUIRED)}, its tensor "
                         f"infos and the graph of src/models/{model.arch}.cpp")
    missing = [f"{model.arch}.{k}" for k in REQUIRED if model.key(k) is None]
    if missing:
        raise ValueError(f"{model.path or 'the model'}: missing GGUF key{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}")
    model.count("block_count")
    _check_tensors(model)
    out = _Cases(version or current(), flash_attn, model.path or "the model")
    for t in batches:
        if not 1 <= t <= ctx:
            raise ValueError(f"a batch of {t} tokens does not fit a context of {ctx}")
        _forward(model, spec, out, t, ctx)
    return list(out.by_name.values())


def _layers(model: Model) -> dict[int, dict[str, tuple[str, tuple[int, ...]]]]:
    """blk.N.NAME.weight / .bias -> {N: {NAME.weight: info}}."""
    layers: dict[int, dict] = {}
    for name, info in model.tensors.items():
        parts = name.split(".", 2)
        if parts[0] == "blk" and len(parts) == 3 and parts[1].isdigit():
            layers.setdefault(int(parts[1]), {})[parts[2]] = info
    return layers


def _forward(m: Model, spec: dict, out: _Cases, T: int, ctx: int) -> None:
    n_embd = m.count("embedding_length")
    n_head = m.count("attention.head_count")
    n_head_kv = m.count("attention.head_count_kv", n_head)
    if n_head % n_head_kv:
        raise m.bad("attention.head_count_kv", f"{n_head_kv} does not divide head_count {n_head}")
    if n_embd < n_head and m.key("attention.key_length") is None:
        raise m.bad("attention.head_count", f"{n_head} heads of embedding_length {n_embd} leave no head size "
                                            f"(and there is no attention.key_length)")
    hd_k = m.count("attention.key_length", n_embd // n_head)
    hd_v = m.count("attention.value_length", hd_k)
    n_rot = m.count("rope.dimension_count", hd_k)
    if n_rot > hd_k:
        raise m.bad("rope.dimension_count", f"{n_rot} is more than the head size {hd_k}")
    eps = m.real("attention.layer_norm_rms_epsilon", 1e-6)
    softcap = m.real("attn_logit_softcapping", 0.0)
    n_swa = m.count("attention.sliding_window", 0, low=0)

    # RoPE scaling: freq_scale = 1/factor; YaRN's ext_factor 1 (llama_context's default) and
    # attn_factor as deepseek2 pre-scales it (1 / (1 + 0.1 ln factor))
    scaling = m.word("rope.scaling.type", "none")
    factor = m.real("rope.scaling.factor", 0.0)
    fs = 1.0 / factor if scaling in ("linear", "yarn") and factor > 0 else 1.0
    ef = 1.0 if scaling == "yarn" else 0.0
    af = m.real("rope.scaling.attn_factor", 1.0) or 1.0
    if scaling == "yarn" and m.arch == "deepseek2" and fs < 1.0:
        af = af / (1.0 + 0.1 * math.log(1.0 / fs))
    ff = "rope_freqs.weight" in m.tensors or any(k.endswith("rope_freqs.weight") for k in m.tensors)

    # embeddings
    if "token_embd.weight" not in m.tensors:
        raise ValueError(f"{m.path or 'the model'}: no token_embd.weight tensor" + (
            "" if m.tensors else " (no tensor at all: a vocab-only GGUF, as llama.cpp's "
                                 "models/ggml-vocab-*.gguf; the cases come from the weights' shapes)"))
    emb_type, emb_ne = m.tensors["token_embd.weight"]
    out.add("get_rows", T, "token_embd", type=emb_type, n=emb_ne[0], m=emb_ne[1], r=T, be1=1, be2=1, v=0)
    if spec.get("embd_scale"):
        out.scale(T, "embeddings * sqrt(n_embd)", [n_embd, T], math.sqrt(n_embd))

    layers = sorted(_layers(m).items())
    for il, lt in layers:
        def role(name):
            return f"blk.*.{name}"

        # norms and biases of the layer, each as its op and its broadcast
        for name, (ty, ne) in sorted(lt.items()):
            if name.endswith("_norm.weight") and len(ne) == 1:
                rows = {"attn_q_norm.weight": [n_head, T], "attn_k_norm.weight": [n_head_kv, T]}.get(name, [T])
                out.rms_norm(T, role(name), [ne[0]] + rows, eps)
            elif name.endswith(".bias") and len(ne) == 1:
                out.binary(T, role(name), "ADD", [ne[0], 1, 1, 1], [1, T, 1, 1])
        # the matrix products of the layer's 2-d weights
        for name, (ty, ne) in sorted(lt.items()):
            if name.endswith(".weight") and len(ne) == 2:
                out.mul_mat(T, role(name), ty, ne[1], ne[0], T)

        _attention(m, out, lt, il, T, ctx, spec, n_head, n_head_kv, hd_k, hd_v, n_rot, fs, ef, af, ff,
                   softcap, n_swa)
        if il == layers[-1][0]:   # the last layer keeps the rows of the outputs (inp_out_ids): of
            for rows_role in ("the outputs' rows (inp_out_ids)", "the residual's rows (inp_out_ids)"):
                out.add("get_rows", T, rows_role, type="f32", n=n_embd, m=T, r=T, be1=1, be2=1, v=0)   # cur, inpSA
        out.binary(T, "residual", "ADD", [n_embd, T, 1, 1])     # ffn_inp = cur + inpSA
        _ffn(m, out, lt, T, spec, n_embd)
        out.binary(T, "residual", "ADD", [n_embd, T, 1, 1])     # cur = cur + ffn_inp

    if "output_norm.weight" in m.tensors:
        out.rms_norm(T, "output_norm.weight", [n_embd, T], eps)
    head_type, head_ne = m.tensors.get("output.weight", (emb_type, emb_ne))
    out.mul_mat(T, "output.weight" if "output.weight" in m.tensors else "token_embd.weight (tied)",
                head_type, head_ne[1], head_ne[0], T)
    final_cap = m.real("final_logit_softcapping", 0.0)
    if final_cap:
        out.scale(T, "final logit softcap", [head_ne[1], T], 1.0 / final_cap)
        out.unary(T, "final logit softcap", "TANH", [head_ne[1], T])
        out.scale(T, "final logit softcap", [head_ne[1], T], final_cap)


def _attention(m, out, lt, il, T, ctx, spec, n_head, n_head_kv, hd_k, hd_v, n_rot, fs, ef, af, ff, softcap, n_swa):
    """RoPE, the KV cache's store and flash attention (llm_graph_context::build_attn with
    flash attention: Q, K and V in their stored {D, heads, tokens} order, hence permuted)."""
    swa = spec.get("swa")
    kv = ctx
    if n_swa and swa and swa(il):
        kv = min(ctx, _pad(n_swa + T, 256))   # an SWA cache holds the window and the ubatch
    # gemma3's sliding layers rotate without the global layers' scaling
    fs_layer = 1.0 if m.arch == "gemma3" and swa and swa(il) else fs

    def rope(role, d, heads, view=False):
        # view: the rotated part of each head, a strided view (test_rope's v=1 is one too)
        out.add("rope", T, role, type="f32", ne_a=[d, heads, T, 1], n_dims=n_rot, mode=spec["rope"], n_ctx=ctx,
                fs=fs_layer, ef=ef, af=af, ff=ff, v=int(view), inplace=False, forward=True)

    def store(role, width):
        out.add("set_rows", T, role, type_src="f32", type_dst="f16", type_idx="i64", ne=[width, kv, 1, 1],
                nr23=[1, 1], r=T, v=0)

    def attend(hsk, hsv, nh, gqa):
        if not out.flash_attn:   # build_attn_mha without flash attention: KQ, softmax, KQV
            kq = "attention KQ (no flash attention)"
            out.add("mul_mat", T, kq, type_a="f16", type_b="f32", m=kv, n=T, k=hsk, bs=[nh, 1], nr=[gqa, 1],
                    per=[0, 2, 1, 3], k_v=0, o=1)
            if softcap:
                out.scale(T, kq, [kv, T, nh * gqa], 1.0 / softcap)
                out.unary(T, kq, "TANH", [kv, T, nh * gqa])
                out.scale(T, kq, [kv, T, nh * gqa], softcap)
            out.add("soft_max", T, kq, type="f32", ne=[kv, T, 1, 1], mask=True, sinks=False, m_prec="f16",
                    nr23=[nh * gqa, 1], scale=1.0 / math.sqrt(hsk), max_bias=0.0, inplace=False)
            out.add("mul_mat", T, "attention KQV (no flash attention)", type_a="f16", type_b="f32", m=hsv, n=T,
                    k=kv, bs=[nh, 1], nr=[gqa, 1], per=[0, 1, 2, 3], k_v=0, o=1)
            return
        out.add("flash_attn_ext", T, "attention", hsk=hsk, hsv=hsv, nh=nh, nr23=[gqa, 1], kv=kv, nb=T, mask=True,
                sinks=False, max_bias=0.0, logit_softcap=softcap, prec="f32", type_K="f16", type_V="f16",
                permute=[0, 2, 1, 3], later=dict(v_is_view_of_k=hsk == 576 and hsv == 512))

    if m.arch == "deepseek2":
        kv_lora = m.count("attention.kv_lora_rank", 512)
        rope("q_pe", n_rot, n_head, view=True)   # views of q's and kv_a_mqa's rows (deepseek2.cpp)
        rope("k_pe", n_rot, 1, view=True)
        if "attn_k_b.weight" in lt:   # MLA, the absorbed form: MQA over the compressed cache
            ty, ne = lt["attn_k_b.weight"]   # {nope, kv_lora_rank, n_head}
            out.mul_mat(T, "blk.*.attn_k_b.weight", ty, ne[1], ne[0], T, bs=(ne[2], 1))
            # Q and K: the compressed part and the rotated one side by side (strided views both)
            out.add("concat", T, "Q = [q_nope absorbed, q_pe]", type="f32", ne_a=[kv_lora, n_head, T, 1],
                    ne_b_d=n_rot, dim=0, v=3)
            out.add("concat", T, "K = [kv_cmpr, k_pe]", type="f32", ne_a=[kv_lora, 1, T, 1], ne_b_d=n_rot, dim=0,
                    v=3)
            store("K cache (compressed)", kv_lora + n_rot)
            attend(kv_lora + n_rot, kv_lora, 1, n_head)
            ty, ne = lt["attn_v_b.weight"]   # {kv_lora_rank, v, n_head}: per head, over the tokens
            out.mul_mat(T, "blk.*.attn_v_b.weight", ty, ne[1], ne[0], T, bs=(ne[2], 1))
            # the heads' outputs {v, T, n_head} permuted to {v, n_head, T}, made contiguous
            out.add("cont", T, "attention output (permuted)", type="f32", ne=[ne[2], ne[1], T, 1], use_view_slice=0)
        else:                          # MHA after decompression (attn_kv_b)
            hd_k_mla = m.count("attention.key_length_mla", hd_k)
            hd_v_mla = m.count("attention.value_length_mla", hd_v)
            store("K cache", hd_k_mla * n_head)
            store("V cache", hd_v_mla * n_head)
            attend(hd_k_mla, hd_v_mla, n_head, 1)
        return
    if spec.get("q_scale"):
        scalar = m.real("attention.query_pre_attn_scalar", 0.0) or hd_k   # gemma2: 1/sqrt(query_pre_attn_scalar)
        out.scale(T, "Q * 1/sqrt(query_pre_attn_scalar)", [hd_k, n_head, T], 1.0 / math.sqrt(scalar))
    rope("Q", hd_k, n_head)
    rope("K", hd_k, n_head_kv)
    store("K cache", hd_k * n_head_kv)
    store("V cache", hd_v * n_head_kv)
    attend(hd_k, hd_v, n_head_kv, n_head // n_head_kv)


def _ffn(m, out, lt, T, spec, n_embd):
    """The dense FFN's gated unit (build_ffn, LLM_FFN_PAR), or the experts (build_moe_ffn)."""
    glu = spec["glu"]

    def gated(role, n_ff, rows):
        out.add("glu_split", T, role, op=glu, type="f32", ne_a=([n_ff, *rows] + [1, 1, 1])[:4], v=0)

    if "ffn_up.weight" in lt:
        gated("ffn_up * act(ffn_gate)", lt["ffn_up.weight"][1][1], [T])
    if "ffn_up_shexp.weight" in lt:
        gated("shared expert", lt["ffn_up_shexp.weight"][1][1], [T])
    if "ffn_gate_inp_shexp.weight" in lt:   # qwen2moe: the shared expert's sigmoid gate
        ty, ne = lt["ffn_gate_inp_shexp.weight"]
        out.mul_mat(T, "blk.*.ffn_gate_inp_shexp.weight", ty, 1, ne[0], T)
        out.unary(T, "shared expert gate: sigmoid as silu(x) / x", "SILU", [1, T])   # (qwen2moe.cpp)
        out.binary(T, "shared expert gate: sigmoid as silu(x) / x", "DIV", [1, T, 1, 1])
        out.binary(T, "shared expert gate", "MUL", [1, T, 1, 1], [n_embd, 1, 1, 1])
    if "ffn_up_exps.weight" not in lt:
        return
    n_expert = m.count("expert_count")
    n_used = m.count("expert_used_count")
    if n_used > n_expert:
        raise m.bad("expert_used_count", f"{n_used} is more than expert_count {n_expert}")
    if n_expert != lt["ffn_up_exps.weight"][1][2]:
        raise m.bad("expert_count", f"{n_expert}, but ffn_up_exps holds {lt['ffn_up_exps.weight'][1][2]} experts")
    gating = m.count("expert_gating_func", GATING_SOFTMAX, low=0) or GATING_SOFTMAX
    if gating == GATING_SIGMOID:
        out.unary(T, "expert gating (sigmoid)", "SIGMOID", [n_expert, T])
    else:
        out.add("soft_max", T, "expert gating (softmax)", type="f32", ne=[n_expert, T, 1, 1], mask=False,
                sinks=False, m_prec="f32", nr23=[1, 1], scale=1.0, max_bias=0.0, inplace=False)
    # ggml_argsort_top_k: the experts sorted by weight, the first n_used taken (a view)
    out.add("argsort", T, "expert selection (argsort, top k)", type="f32", ne=[n_expert, T, 1, 1], order=SORT_DESC)
    out.add("get_rows", T, "expert weights", type="f32", n=1, m=n_expert, r=n_used, be1=T, be2=1, v=0)
    norm_w = m.flag("expert_weights_norm", spec.get("norm_w", False))
    if norm_w:
        out.add("sum_rows", T, "expert weights / their sum", type="f32", ne=[n_used, T, 1, 1], permute=False,
                slice=False)
        # the sum clamped away from 0 (6.1e-5: f16's smallest normal), then the division
        out.add("clamp", T, "expert weights / their sum", type="f32", ne=[1, T, 1, 1], min=6.103515625e-5,
                max=float("inf"))
        out.binary(T, "expert weights / their sum", "DIV", [1, T, 1, 1], [n_used, 1, 1, 1])
    w_scale = m.real("expert_weights_scale", 0.0)
    if w_scale and w_scale != 1.0:
        out.scale(T, "expert weights * scale", [1, n_used, T], w_scale)
    for name in ("ffn_up_exps.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight"):
        if name not in lt:
            continue
        ty, ne = lt[name]   # {k, m, n_expert}
        out.add("mul_mat_id", T, f"blk.*.{name}", type_a=ty, type_b="f32", n_mats=ne[2], n_used=n_used,
                b=name != "ffn_down_exps.weight", m=ne[1], n=T, k=ne[0])
    gated("experts", lt["ffn_up_exps.weight"][1][1], [n_used, T])
    out.binary(T, "experts * their weights", "MUL", [1, n_used, T, 1], [n_embd, 1, 1, 1])


def derive_names(path: str, batches: Iterable[int] = (1, 512), ctx: int = 4096) -> list[str]:
    """The case names of a GGUF model, one per line's worth, in graph order."""
    return [mc.case.name for mc in derive(read_gguf(path), batches, ctx)]
