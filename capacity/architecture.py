"""Model architecture facts read from a Hugging Face ``config.json``, and the parameter counts they imply.

One converter, :func:`architecture_from_config`, reads every fact from the config. Each fact has a list of
alternative field names (commented with the family that uses them), the way vLLM's config converter does.
A missing or malformed field raises :class:`~capacity.errors.ConfigError` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from capacity.errors import ConfigError

__all__ = [
    "DTYPE_BYTES",
    "SUPPORTED_MODEL_TYPES",
    "Architecture",
    "AttentionKind",
    "architecture_from_config",
]

AttentionKind = Literal["MHA", "GQA", "MQA", "MLA"]

#: Bytes per element of the dtypes a config's ``torch_dtype`` may name.
DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}

#: Largest value accepted for any size in a config: keeps the arithmetic in float range and refuses nonsense.
MAX_CONFIG_INT = 2**31 - 1

#: ``model_type`` values the converter understands, and the family each belongs to.
SUPPORTED_MODEL_TYPES: dict[str, str] = {
    "llama": "llama",
    "mistral": "llama",
    "mixtral": "mixtral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "qwen2_moe": "qwen2_moe",
    "qwen3_moe": "qwen3_moe",
    "deepseek_v2": "deepseek",
    "deepseek_v3": "deepseek",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "gemma3_text": "gemma3",
    "phi3": "phi3",
}

# Alternative names per fact, first match wins.
_HIDDEN = ("hidden_size", "d_model", "n_embd")  # d_model: T5/Whisper style, n_embd: GPT-2 style
_LAYERS = ("num_hidden_layers", "n_layer", "num_layers")  # n_layer: GPT-2/Falcon, num_layers: ChatGLM
_HEADS = ("num_attention_heads", "n_head", "num_heads")  # n_head: GPT-2/Falcon
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")  # ChatGLM last
_HEAD_DIM = ("head_dim", "kv_channels")  # head_dim: Gemma/Qwen3 (explicit); kv_channels: ChatGLM
_INTERMEDIATE = ("intermediate_size", "ffn_hidden_size", "n_inner")  # ffn_hidden_size: ChatGLM
_VOCAB = ("vocab_size", "padded_vocab_size", "n_vocab")
_POSITIONS = (  # the same list vLLM reads to derive max_model_len
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)
_DTYPE = ("torch_dtype", "dtype")  # transformers >= 4.56 writes ``dtype``
_EXPERTS = ("num_local_experts", "n_routed_experts", "num_experts")  # Mixtral / DeepSeek / Qwen MoE
_EXPERTS_PER_TOKEN = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k")


@dataclass(frozen=True, kw_only=True)
class Architecture:
    """The facts of one decoder-only transformer that memory and speed depend on."""

    name: str
    """Catalog id or the name the caller gave (defaults to ``model_type``)."""
    model_type: str
    """Hugging Face ``model_type`` (``llama``, ``deepseek_v3``, ...)."""
    hidden_size: int
    """Width of the residual stream."""
    num_layers: int
    """Decoder layers (``num_hidden_layers``)."""
    num_attention_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads before tensor parallelism (equal to ``num_attention_heads`` for MHA; 1 for MLA)."""
    head_dim: int
    """Dimension of one attention head (explicit in Gemma/Qwen3 configs, else hidden / heads)."""
    intermediate_size: int
    """Width of the dense MLP (gated: gate, up and down projections)."""
    vocab_size: int
    """Vocabulary rows of the embedding table and LM head."""
    max_position_embeddings: int
    """Longest context the model accepts (vLLM's derived max_model_len before rope scaling)."""
    tie_word_embeddings: bool
    """LM head shares the input embedding table (Gemma)."""
    dtype: str
    """Model dtype as vLLM runs it: ``bfloat16`` or ``float16`` (float32 checkpoints run in bfloat16)."""
    weight_bytes_per_parameter: float
    """Bytes per linear-layer weight (2 for bf16/fp16, 1 for fp8-quantized checkpoints such as
    DeepSeek-V3)."""
    qkv_bias: bool = False
    """Q, K and V projections carry a bias (Qwen2)."""
    qk_norm: bool = False
    """Per-head RMSNorm on queries and keys (Qwen3, Gemma 3)."""
    norms_per_layer: int = 2
    """Norm vectors of width ``hidden_size`` per layer (2; Gemma 2/3 have 4)."""
    kv_lora_rank: int | None = None
    """MLA latent width d_c (DeepSeek V2/V3); None for non-MLA attention."""
    q_lora_rank: int | None = None
    """MLA query compression width (None: queries projected directly, as in DeepSeek-V2-Lite)."""
    qk_rope_head_dim: int = 0
    """MLA decoupled RoPE dimension d_h^R, cached next to the latent."""
    qk_nope_head_dim: int = 0
    """MLA per-head query/key dimension without RoPE."""
    v_head_dim: int = 0
    """MLA per-head value dimension."""
    num_experts: int = 0
    """Routed experts per MoE layer (0: dense model)."""
    num_experts_per_token: int = 0
    """Routed experts each token uses (top-k)."""
    moe_intermediate_size: int = 0
    """Width of one routed expert's MLP."""
    num_moe_layers: int = 0
    """Layers whose MLP is a mixture of experts (the rest are dense, e.g. DeepSeek's
    first_k_dense_replace)."""
    shared_expert_intermediate_size: int = 0
    """Total width of the always-on shared expert MLP in each MoE layer (DeepSeek, Qwen2-MoE); 0 if none."""
    shared_expert_gate: bool = False
    """Qwen2-MoE gates its shared expert with a hidden_size x 1 projection."""
    sliding_window: int | None = None
    """Tokens a sliding-window layer attends to (None: all layers attend to the full context)."""
    num_sliding_window_layers: int = 0
    """Layers that use the sliding window (Gemma 2: every other layer; Gemma 3: 5 of 6; Mistral v0.1: all)."""
    layer_kinds: tuple[str, ...] = field(default=(), repr=False)
    """Reserved for future per-layer detail; empty today."""

    # ----- attention ---------------------------------------------------------------------------------------
    @property
    def attention(self) -> AttentionKind:
        """MLA when a latent rank is set; MHA when every query head has its own KV head; MQA with one."""
        if self.kv_lora_rank is not None:
            return "MLA"
        if self.num_kv_heads == self.num_attention_heads:
            return "MHA"
        if self.num_kv_heads == 1:
            return "MQA"
        return "GQA"

    @property
    def is_moe(self) -> bool:
        """True when some layers route tokens to experts."""
        return self.num_experts > 0 and self.num_moe_layers > 0

    @property
    def num_full_attention_layers(self) -> int:
        """Layers whose KV cache grows with the whole context."""
        return self.num_layers - self.num_sliding_window_layers

    @property
    def kv_elements_per_token_per_layer(self) -> int:
        """Cached elements per token per layer before TP: ``2 * kv_heads * head_dim``; MLA ``d_c +
        d_rope``."""
        if self.kv_lora_rank is not None:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.num_kv_heads * self.head_dim

    # ----- parameter counts --------------------------------------------------------------------------------
    @cached_property
    def parameter_groups(self) -> ParameterGroups:
        """Parameter counts split by how tensor parallelism shards them (see :class:`ParameterGroups`)."""
        return _count_parameters(self)

    @property
    def parameters(self) -> int:
        """All parameters (input embedding and LM head included once each; tied embeddings counted once)."""
        return self.parameter_groups.total

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through: MoE layers count only top-k routed experts plus shared."""
        return self.parameter_groups.active


@dataclass(frozen=True, kw_only=True)
class ParameterGroups:
    """Parameter counts grouped by how vLLM's tensor parallelism places them on GPUs."""

    embedding: int
    """Input embedding table (vocab-parallel: split across TP ranks; read by lookup, not streamed)."""
    lm_head: int
    """Output projection (vocab-parallel; 0 when tied to the embedding)."""
    sharded: int
    """Dense parameters split evenly across TP ranks (column/row-parallel linears, dense MLPs)."""
    replicated: int
    """Parameters every TP rank holds whole (norms, routers, MLA down-projections)."""
    kv_projection_per_head: int
    """K and V projection weights (and biases) of one KV head over all layers; TP ranks hold
    ``max(1, kv_heads // tp)`` heads each, so they are replicated when tp > kv_heads."""
    routed_expert: int
    """One routed expert's weights in one MoE layer (split across TP ranks)."""
    num_kv_heads: int
    """KV heads of non-MLA attention (0 for MLA: its projections are counted in sharded/replicated)."""
    num_experts: int
    """Routed experts per MoE layer."""
    num_moe_layers: int
    """MoE layers."""
    experts_per_token: int
    """Top-k routed experts per token."""

    @property
    def routed_experts_total(self) -> int:
        """All routed expert weights of all MoE layers."""
        return self.routed_expert * self.num_experts * self.num_moe_layers

    @property
    def total(self) -> int:
        """Every parameter of the model."""
        return (
            self.embedding
            + self.lm_head
            + self.sharded
            + self.replicated
            + self.kv_projection_per_head * self.num_kv_heads
            + self.routed_experts_total
        )

    @property
    def active(self) -> int:
        """Parameters used per token: top-k of the routed experts, everything else whole."""
        routed_active = self.routed_expert * self.experts_per_token * self.num_moe_layers
        return self.total - self.routed_experts_total + routed_active


def _count_parameters(a: Architecture) -> ParameterGroups:
    """Count parameters the way the checkpoints store them (gated MLPs: gate, up, down)."""
    h = a.hidden_size
    sharded = 0
    replicated = a.norms_per_layer * h * a.num_layers + h  # per-layer norms and the final norm
    kv_per_head = 0
    kv_heads = 0
    if a.kv_lora_rank is not None:
        heads = a.num_attention_heads
        q_width = heads * (a.qk_nope_head_dim + a.qk_rope_head_dim)
        if a.q_lora_rank is not None:
            replicated += (h * a.q_lora_rank + a.q_lora_rank) * a.num_layers  # q_a_proj + q_a_layernorm
            sharded += a.q_lora_rank * q_width * a.num_layers  # q_b_proj
        else:
            sharded += h * q_width * a.num_layers  # q_proj
        # kv_a_proj_with_mqa (latent + rope key) and its norm are replicated on every rank.
        replicated += (h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank) * a.num_layers
        sharded += a.kv_lora_rank * heads * (a.qk_nope_head_dim + a.v_head_dim) * a.num_layers  # kv_b_proj
        sharded += heads * a.v_head_dim * h * a.num_layers  # o_proj
    else:
        q_out = a.num_attention_heads * a.head_dim
        sharded += (h * q_out + q_out * h) * a.num_layers  # q_proj and o_proj
        if a.qkv_bias:
            sharded += q_out * a.num_layers
        kv_per_head = (2 * h * a.head_dim + (2 * a.head_dim if a.qkv_bias else 0)) * a.num_layers
        kv_heads = a.num_kv_heads
        if a.qk_norm:
            replicated += 2 * a.head_dim * a.num_layers
    dense_layers = a.num_layers - a.num_moe_layers
    sharded += 3 * h * a.intermediate_size * dense_layers
    routed_expert = 0
    if a.num_moe_layers:
        routed_expert = 3 * h * a.moe_intermediate_size
        replicated += h * a.num_experts * a.num_moe_layers  # router
        sharded += 3 * h * a.shared_expert_intermediate_size * a.num_moe_layers
        if a.shared_expert_gate:
            replicated += h * a.num_moe_layers
    embedding = a.vocab_size * h
    lm_head = 0 if a.tie_word_embeddings else a.vocab_size * h
    return ParameterGroups(
        embedding=embedding,
        lm_head=lm_head,
        sharded=sharded,
        replicated=replicated,
        kv_projection_per_head=kv_per_head,
        routed_expert=routed_expert,
        num_kv_heads=kv_heads,
        num_experts=a.num_experts if a.num_moe_layers else 0,
        num_moe_layers=a.num_moe_layers,
        experts_per_token=a.num_experts_per_token if a.num_moe_layers else 0,
    )


# ----- the converter ---------------------------------------------------------------------------------------


def _lookup(cfg: Mapping[str, Any], names: Sequence[str]) -> tuple[str, Any] | None:
    for name in names:
        if name in cfg and cfg[name] is not None:
            return name, cfg[name]
    return None


def _as_int(name: str, value: Any, *, minimum: int) -> int:
    if isinstance(value, bool):
        raise ConfigError(name, f"is {value!r}; expected an integer >= {minimum}")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(name, f"is {value!r:.40}; expected an integer >= {minimum}")
    if value < minimum or value > MAX_CONFIG_INT:
        raise ConfigError(name, f"is {value}; expected an integer between {minimum} and {MAX_CONFIG_INT}")
    return value


def _int(
    cfg: Mapping[str, Any], names: Sequence[str], *, minimum: int = 1, default: int | None = None
) -> int:
    found = _lookup(cfg, names)
    if found is None:
        if default is not None:
            return default
        raise ConfigError(
            names[0], f"is missing; expected an integer >= {minimum} (also read as: {', '.join(names)})"
        )
    return _as_int(found[0], found[1], minimum=minimum)


def _opt_int(cfg: Mapping[str, Any], names: Sequence[str], *, minimum: int = 1) -> int | None:
    found = _lookup(cfg, names)
    return None if found is None else _as_int(found[0], found[1], minimum=minimum)


def _bool(cfg: Mapping[str, Any], name: str, default: bool) -> bool:
    value = cfg.get(name, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(name, f"is {value!r:.40}; expected true or false")
    return value


def _int_list(cfg: Mapping[str, Any], name: str) -> list[int]:
    value = cfg.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(name, f"is {value!r:.40}; expected a list of layer indices")
    return [_as_int(name, v, minimum=0) for v in value]


def _dtype(cfg: Mapping[str, Any]) -> str:
    found = _lookup(cfg, _DTYPE)
    if found is None:
        # vLLM runs a config without a dtype (float32 by transformers' default) in bfloat16.
        return "bfloat16"
    name, value = found
    if not isinstance(value, str) or value.removeprefix("torch.") not in DTYPE_BYTES:
        raise ConfigError(name, f"is {value!r:.40}; expected one of {', '.join(DTYPE_BYTES)}")
    value = value.removeprefix("torch.")
    return "bfloat16" if value == "float32" else value  # vLLM's "auto" downcasts float32 checkpoints


def _weight_bytes_per_parameter(cfg: Mapping[str, Any], dtype: str) -> float:
    quant = cfg.get("quantization_config")
    if quant is None:
        return float(DTYPE_BYTES[dtype])
    if not isinstance(quant, Mapping):
        raise ConfigError("quantization_config", f"is {quant!r:.40}; expected an object with quant_method")
    method = quant.get("quant_method")
    if method == "fp8":  # DeepSeek-V3/R1 block-wise fp8 checkpoints
        return 1.0
    raise ConfigError(
        "quantization_config.quant_method",
        f"is {method!r:.40}; only unquantized checkpoints and 'fp8' are understood",
    )


def _text_config(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """Multimodal wrappers (Gemma 3) keep the language model's facts under ``text_config``."""
    text = config.get("text_config")
    if text is None:
        return config
    if not isinstance(text, Mapping):
        raise ConfigError("text_config", f"is {text!r:.40}; expected an object")
    merged = dict(text)
    for key in (*_DTYPE, "quantization_config", "tie_word_embeddings"):
        if key not in merged and key in config:
            merged[key] = config[key]
    merged.setdefault("model_type", config.get("model_type"))
    return merged


def _model_type(cfg: Mapping[str, Any]) -> str:
    value = cfg.get("model_type")
    accepted = ", ".join(sorted(SUPPORTED_MODEL_TYPES))
    if value is None:
        raise ConfigError("model_type", f"is missing; expected one of {accepted}")
    if not isinstance(value, str) or value not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            "model_type",
            f"is {value!r:.40}, an architecture kvright does not know; expected one of {accepted}",
        )
    return value


def _sliding(cfg: Mapping[str, Any], family: str, num_layers: int) -> tuple[int | None, int]:
    """Sliding window size and how many layers use it."""
    layer_types = cfg.get("layer_types")
    window = _opt_int(cfg, ("sliding_window",))
    if family == "qwen2" or family == "qwen3" or family == "qwen2_moe" or family == "qwen3_moe":
        if not _bool(cfg, "use_sliding_window", False):
            return None, 0  # Qwen configs carry a window that is off unless use_sliding_window is true
        max_window_layers = _int(cfg, ("max_window_layers",), minimum=0, default=num_layers)
        sliding = max(0, num_layers - min(max_window_layers, num_layers))
        return (window, sliding) if window is not None and sliding else (None, 0)
    if window is None:
        return None, 0
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != num_layers:
            raise ConfigError("layer_types", f"expected a list of {num_layers} strings (one per layer)")
        if any(t not in ("sliding_attention", "full_attention") for t in layer_types):
            raise ConfigError("layer_types", "entries must be 'sliding_attention' or 'full_attention'")
        return window, sum(1 for t in layer_types if t == "sliding_attention")
    if family == "gemma2":
        return window, (num_layers + 1) // 2  # layers 0, 2, 4, ... slide (HF Gemma2: layer_idx % 2 == 0)
    if family == "gemma3":
        pattern = _int(cfg, ("sliding_window_pattern",), default=6)  # every pattern-th layer is global
        return window, num_layers - num_layers // pattern
    return window, num_layers  # Mistral v0.1, Phi-3: every layer slides


def _count_multiples(start: int, stop: int, step: int) -> int:
    """How many i in [start, stop) are multiples of step (layer counts without a loop over layers)."""
    if stop <= start:
        return 0
    return (stop - 1) // step - (start - 1) // step if start > 0 else (stop - 1) // step + 1


def architecture_from_config(config: Mapping[str, Any], *, name: str | None = None) -> Architecture:
    """Read an :class:`Architecture` from a Hugging Face ``config.json`` mapping.

    Raises :class:`ConfigError` naming the first field that is missing, of the wrong type or out of range.
    """
    if not isinstance(config, Mapping):
        raise ConfigError("<root>", f"is {type(config).__name__}; expected a JSON object")
    cfg = _text_config(config)
    model_type = _model_type(cfg)
    family = SUPPORTED_MODEL_TYPES[model_type]
    hidden = _int(cfg, _HIDDEN)
    layers = _int(cfg, _LAYERS)
    heads = _int(cfg, _HEADS)
    kv_heads = _int(cfg, _KV_HEADS, default=heads)
    if kv_heads > heads or heads % kv_heads:
        raise ConfigError(
            "num_key_value_heads",
            f"is {kv_heads}; expected a divisor of num_attention_heads ({heads})",
        )
    default_head_dim = hidden // heads if hidden % heads == 0 else None
    head_dim = _int(cfg, _HEAD_DIM, default=default_head_dim)
    vocab = _int(cfg, _VOCAB)
    positions = _int(cfg, _POSITIONS)
    dtype = _dtype(cfg)
    weight_bytes = _weight_bytes_per_parameter(cfg, dtype)
    tied = _bool(cfg, "tie_word_embeddings", family in ("gemma2", "gemma3"))

    mla: dict[str, Any] = {}
    if family == "deepseek":
        kv_lora = _int(cfg, ("kv_lora_rank",))
        mla = {
            "kv_lora_rank": kv_lora,
            "q_lora_rank": _opt_int(cfg, ("q_lora_rank",)),
            "qk_rope_head_dim": _int(cfg, ("qk_rope_head_dim",)),
            "qk_nope_head_dim": _int(cfg, ("qk_nope_head_dim",)),
            "v_head_dim": _int(cfg, ("v_head_dim",)),
        }
        kv_heads = heads  # MLA: the config's KV-head count is not what is cached; the latent is

    moe: dict[str, Any] = {}
    if family in ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek"):
        experts = _int(cfg, _EXPERTS)
        top_k = _int(cfg, _EXPERTS_PER_TOKEN)
        if top_k > experts:
            raise ConfigError("num_experts_per_tok", f"is {top_k}; expected at most the {experts} experts")
        if family == "mixtral":
            expert_width = _int(cfg, _INTERMEDIATE)  # Mixtral's intermediate_size is the expert's
            moe_layers = layers
            intermediate = expert_width
            shared_width = 0
        else:
            expert_width = _int(cfg, ("moe_intermediate_size",))
            intermediate = _int(cfg, _INTERMEDIATE, default=expert_width)
            if family == "deepseek":
                first_dense = _int(cfg, ("first_k_dense_replace",), minimum=0, default=0)
                freq = _int(cfg, ("moe_layer_freq",), default=1)
                moe_layers = _count_multiples(first_dense, layers, freq)
                shared_width = expert_width * _int(cfg, ("n_shared_experts",), minimum=0, default=0)
            else:
                step = _int(cfg, ("decoder_sparse_step",), default=1)
                dense_only = set(_int_list(cfg, "mlp_only_layers"))
                moe_layers = _count_multiples(1, layers + 1, step) - sum(
                    1 for i in dense_only if i < layers and (i + 1) % step == 0
                )
                shared_width = (
                    _int(cfg, ("shared_expert_intermediate_size",), minimum=0, default=0)
                    if family == "qwen2_moe"
                    else 0
                )
        moe = {
            "num_experts": experts,
            "num_experts_per_token": top_k,
            "moe_intermediate_size": expert_width,
            "num_moe_layers": moe_layers,
            "shared_expert_intermediate_size": shared_width,
            "shared_expert_gate": family == "qwen2_moe" and shared_width > 0,
        }
    else:
        intermediate = _int(cfg, _INTERMEDIATE)

    window, sliding_layers = _sliding(cfg, family, layers)
    return Architecture(
        name=name if name is not None else model_type,
        model_type=model_type,
        hidden_size=hidden,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=1 if mla else kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate,
        vocab_size=vocab,
        max_position_embeddings=positions,
        tie_word_embeddings=tied,
        dtype=dtype,
        weight_bytes_per_parameter=weight_bytes,
        qkv_bias=_bool(cfg, "attention_bias", family in ("qwen2", "qwen2_moe")) and family != "qwen3",
        qk_norm=family in ("qwen3", "qwen3_moe", "gemma3"),
        norms_per_layer=4 if family in ("gemma2", "gemma3") else 2,
        sliding_window=window,
        num_sliding_window_layers=sliding_layers,
        **mla,
        **moe,
    )
