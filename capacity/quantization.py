"""How a checkpoint stores its weights on the GPU: the quantization method, which modules it quantizes, and
the bytes one weight of each module kind occupies once vLLM 0.32 has loaded it.

One reader, :func:`weight_format`, reads the ``quantization_config`` block of ``config.json`` (at the top
level, under ``text_config``, or the ``compression_config`` key older compressed-tensors files use) and,
when the config has none, NVIDIA ModelOpt's ``hf_quant_config.json`` -- the order vLLM's config loader uses
(``transformers_utils/config.py``: "ModelOpt 0.29.0 and before saves the quantization config in a separate
hf_quant_config.json"). Method names are normalized as vLLM does (``model_arch_config_convertor.py``): lower
case, ``compressed_tensors`` -> ``compressed-tensors``, a ModelOpt producer -> ``modelopt`` / ``modelopt_fp4``
by ``quant_algo``.

What each method stores, from vLLM 0.32's ``model_executor/layers/quantization`` (the bytes are what the
kernels keep after ``process_weights_after_loading``; scales, zero points and global scales are amortized per
weight):

========================  =====================================================================  ============
method                    stored per weight                                                      bf16 model
========================  =====================================================================  ============
``fp8``                   1 byte; fp32 scale per tensor, or per ``[n, k]`` block                 1.0 / 1.00024
``fbgemm_fp8``            1 byte; fp32 scale per output row                                      1.00098
``awq`` (4-bit only)      int4 packed in int32; model-dtype scale + 4-bit zero per group         0.51953 g128
``gptq`` (sym only)       int4/int8 packed in int32; model-dtype scale per group (Marlin drops   0.51563 g128
                          the qzeros of symmetric checkpoints after loading)
``mxfp4``                 routed experts only: 4 bits + one e8m0 byte per 32 (4.25 bits)         0.53125
``modelopt_nvfp4``        4 bits + one fp8 scale per 16 (4.5 bits) + an fp32 global per tensor   0.5625
``modelopt_fp8``          1 byte; fp32 per tensor (``FP8``), per row, or per 128x128 block       1.0
``compressed-tensors``    per config group: the same layouts (wNa16 int, w8a8 int8/fp8, NVFP4,
                          MXFP4), ``ignore`` left in the model dtype
========================  =====================================================================  ============

Module kinds a method does not quantize (``ignore`` / ``modules_to_not_convert`` / ``exclude_modules`` /
GPTQ ``dynamic`` negative rules, or the method's own rule: mxfp4 only touches routed experts, fbgemm only
linear layers, embeddings always stay, lm_head only where the config says) weigh ``model_dtype_bytes``.

Approximations, each well under the 5% the planner needs:

* A scale per output row is amortized over :data:`PER_ROW_IN_FEATURES` input features (the kind's real width
  is not known here): one fp32 scale per 4096 weights is 0.1%; at real widths (2048-18432) it is 0.2%-0.02%.
* Per-tensor scales are 0 bytes. Marlin / CUTLASS tile padding of odd widths is not counted.
* Ignore lists are matched against canonical module names (Llama/Qwen/DeepSeek/Mixtral/Llama 4/gpt-oss/
  Nemotron-H/Qwen3-Next naming, with the ``model.``, ``model.language_model.``, ``language_model.model.`` and
  ``backbone.`` roots). An entry that names only some projections of a module kind in a layer (``q_proj`` of
  layer 0) leaves that share unquantized with an even split per projection: q/k/v/o differ in size, so this
  is approximate for partial listings, exact for whole-module ones (the common case).
* The MoE router stays in the model dtype everywhere (real checkpoints keep it so; several vLLM models build
  it without a quant config); it is hidden x experts per layer, a rounding error.
* The vision tower counts as one unit: only an entry that covers the tower (not just the projector) leaves it
  unquantized.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, Literal, get_args

from capacity.errors import ConfigError

__all__ = [
    "ACCEPTED_METHODS",
    "MODULE_KINDS",
    "ONLINE_FP8",
    "PER_ROW",
    "PER_ROW_IN_FEATURES",
    "PER_TENSOR",
    "UNQUANTIZED",
    "ModuleKind",
    "Rule",
    "Scheme",
    "WeightFormat",
    "weight_format",
]

ModuleKind = Literal[
    "attention",
    "mlp",
    "experts",
    "shared_experts",
    "router",
    "embedding",
    "lm_head",
    "mamba",
    "kda",
    "vision",
    "indexer",
    "latent_projection",
]
"""Where a weight lives: ``attention`` q/k/v/o (and MLA) projections; ``mlp`` dense gate/up/down; ``experts``
routed experts; ``shared_experts``; ``router`` the MoE gate; ``embedding``; ``lm_head``; ``mamba`` Mamba /
linear-attention projections; ``kda`` Kimi Delta Attention's (Kimi-Linear, Kimi-K3), named under
``self_attn`` as attention is, and so a kind of its own; ``vision`` the vision tower and projector;
``indexer`` DeepSeek-V3.2's sparse attention indexer; ``latent_projection`` a latent MoE's projections into
and out of the experts' width (Nemotron-3-Super's ``fc1_latent_proj`` / ``fc2_latent_proj``). Norms, biases
and conv1d weights are never quantized and are not a kind."""

MODULE_KINDS: tuple[ModuleKind, ...] = get_args(ModuleKind)

#: Kinds that sit inside a decoder layer (the others: embedding, lm_head, vision).
_LAYERED: frozenset[ModuleKind] = frozenset(
    {
        "attention",
        "mlp",
        "experts",
        "shared_experts",
        "router",
        "mamba",
        "kda",
        "indexer",
        "latent_projection",
    }
)
#: What vLLM builds as ``LinearBase`` layers with the model's quant config (routed experts are a
#: ``RoutedExperts`` layer; the router is left out, see the module docstring).
_LINEAR: frozenset[ModuleKind] = frozenset(
    {"attention", "mlp", "shared_experts", "mamba", "kda", "indexer", "latent_projection", "vision"}
)
_LINEAR_AND_EXPERTS: frozenset[ModuleKind] = _LINEAR | {"experts"}
_DECODER_LINEAR_AND_EXPERTS: frozenset[ModuleKind] = _LINEAR_AND_EXPERTS - {"vision"}

PER_TENSOR = 0
"""``Scheme.weights_per_scale`` for one scale per tensor (amortized to 0)."""
PER_ROW = -1
"""``Scheme.weights_per_scale`` for one scale per output row (amortized over :data:`PER_ROW_IN_FEATURES`)."""
PER_ROW_IN_FEATURES = 4096
"""Input width assumed to amortize a per-row scale: a 4-byte scale per row adds 4 / 4096 = 0.1% per weight."""

#: A decoder layer index no real model has: the "any layer" a query without a layer is answered for, so
#: ignore entries that name specific layers do not apply and patterns over all layers do.
_ANY_LAYER = 987654


@dataclass(frozen=True, kw_only=True)
class Scheme:
    """How one quantized weight is stored: its bits plus the scale (and zero point) shared by a group."""

    weight_bits: int
    """Bits of the weight itself (8 for fp8/int8, 4 for int4/fp4; packed into int32/uint8 without waste)."""
    scale_bytes: float | None
    """Bytes of one scale (4: fp32, 1: fp8/e8m0); None: the model dtype (AWQ/GPTQ/wNa16 group scales)."""
    weights_per_scale: int
    """Weights sharing one scale: a group size, ``n * k`` for blocks, :data:`PER_ROW`, :data:`PER_TENSOR`."""
    zero_point_bits: int = 0
    """Bits of one zero point per scale (asymmetric integer schemes); 0 when symmetric."""
    block: tuple[int, int] | None = None
    """The ``[n, k]`` FP8 weight block of a block-quantized scheme, whose shape vLLM checks every TP-split
    width of the module against (``validate_fp8_block_shape``); None for any other scheme."""

    def bytes_per_parameter(self, model_dtype_bytes: int) -> float:
        """``weight_bits / 8 + (scale + zero point) / weights_per_scale``."""
        scale = model_dtype_bytes if self.scale_bytes is None else self.scale_bytes
        per_scale = scale + self.zero_point_bits / 8
        if self.weights_per_scale == PER_TENSOR:
            overhead = 0.0
        elif self.weights_per_scale == PER_ROW:
            overhead = per_scale / PER_ROW_IN_FEATURES
        else:
            overhead = per_scale / self.weights_per_scale
        return self.weight_bits / 8 + overhead


@dataclass(frozen=True, kw_only=True)
class Rule:
    """Modules a pattern list selects, and what they get: the first rule that names a module decides."""

    patterns: tuple[str, ...] = ()
    """Module-name patterns: ``re:`` regexes (matched from the start, as vLLM's ``re.match``), globs with
    ``*`` (a module and its subtree), or plain names matched at dot boundaries anywhere in the name
    (``lm_head``, ``mlp.gate``, ``model.layers.3.self_attn``)."""
    kinds: frozenset[ModuleKind] = frozenset()
    """Kinds selected whatever their name (compressed-tensors class targets such as ``Linear``)."""
    scheme: Scheme | None = None
    """The storage of the selected modules; None leaves them in the model dtype."""


@dataclass(frozen=True, kw_only=True)
class WeightFormat:
    """The weight format of one checkpoint as vLLM 0.32 loads it."""

    method: str
    """``none``, ``fp8``, ``fbgemm_fp8``, ``compressed-tensors``, ``awq``, ``gptq``, ``mxfp4``, ``mxfp8``,
    ``modelopt_fp8``, ``modelopt_nvfp4``, ``modelopt_mxfp8``, or ``fp8_per_tensor`` (online, at load)."""
    label: str
    """One line for people: ``AWQ 4-bit, group 128, zero points``, ``fp8 128x128 blocks``."""
    weight_block_size: tuple[int, int] | None = None
    """FP8 block quantization ``[n, k]``: each TP rank's share of a column-parallel width must be a multiple
    of ``n`` (vLLM ``validate_fp8_block_shape``)."""
    compute_format: str | None = None
    """What the GPU must run natively for the fast kernel: ``fp8``, ``fp4``, ``mxfp8``, ``int8``, ``int4``;
    None when nothing is quantized."""
    weight_only: bool = False
    """Activations stay in the model dtype (W4A16 / W8A16): the matmul runs at bf16 speed, only the weight
    reads shrink."""
    kv_cache_dtype: str | None = None
    """The KV-cache dtype ``--kv-cache-dtype auto`` resolves to for this checkpoint (ModelOpt
    ``kv_cache_quant_algo``, compressed-tensors ``kv_cache_scheme``); None: the model dtype."""
    scheme: Scheme | None = None
    """Storage of the modules the method quantizes by default (``default_kinds``) when no rule names them."""
    default_kinds: frozenset[ModuleKind] = frozenset()
    """Kinds the method quantizes unless a rule says otherwise."""
    rules: tuple[Rule, ...] = ()
    """Ignore lists and per-module overrides, in precedence order."""
    warnings: tuple[str, ...] = ()
    """What the operator should know before serving it (deprecated methods, flags needed)."""
    naming: str = ""
    """The model's own module names where its vLLM class departs from every family's (:data:`_OWN_NAMES`:
    ``gemma4``); empty: any family's spelling names a module."""
    flag: str | None = None
    """The ``--quantization`` vLLM must be given to read the format at all: a legacy GPTQ or AWQ checkpoint
    whose quantization is only in ``quantize_config.json`` / ``quant_config.json`` (vLLM reads those files
    only for the method it is told, ``get_quant_config``); None where config.json says it."""
    deprecated: bool = False
    """vLLM 0.32 lists the method in ``DEPRECATED_QUANTIZATION_METHODS`` and loads it only with
    ``--allow-deprecated-quantization`` (``ModelConfig._verify_quantization``), which a plan then adds."""

    def bytes_per_parameter(
        self,
        module: ModuleKind,
        *,
        layer: int | None,
        model_dtype_bytes: int,
        shares: Sequence[float] | None = None,
    ) -> float:
        """Bytes one weight of ``module`` in decoder layer ``layer`` (None: not in a layer, or any layer)
        occupies on the GPU as vLLM loads it, scales and zero points amortized per weight. When the checkpoint
        leaves some of the module's projections unquantized, the mean over them, weighted by ``shares`` (each
        projection's size, in the order of the naming family the rules resolve to; ``(0, 1, 1, 0)`` for the K
        and V of q, k, v, o) when given for that family, else equally."""
        parts = self._resolve(module, layer)
        each = [model_dtype_bytes if s is None else s.bytes_per_parameter(model_dtype_bytes) for s in parts]
        if shares is not None and len(shares) == len(each) and sum(shares) > 0:
            return sum(b * w for b, w in zip(each, shares, strict=True)) / sum(shares)
        return sum(each) / len(each)

    def quantizes(self, module: ModuleKind, *, layer: int | None) -> bool:
        """Whether any projection of ``module`` in ``layer`` is stored quantized."""
        return any(s is not None for s in self._resolve(module, layer))

    def weight_block(self, module: ModuleKind, *, layer: int | None) -> tuple[int, int] | None:
        """The FP8 weight block ``[n, k]`` of ``module`` in ``layer`` when a projection of it is stored in
        blocks, else None: in a checkpoint that mixes formats (ModelOpt MIXED_PRECISION, compressed-tensors
        groups) only the block-quantized modules are held to the block's shape."""
        return next((s.block for s in self._resolve(module, layer) if s is not None and s.block), None)

    def weight_group(self, module: ModuleKind, *, layer: int | None) -> int | None:
        """The group size of ``module`` in ``layer`` when a projection of it stores integer weights in
        groups with scales in the model dtype (GPTQ, AWQ, compressed-tensors and AutoRound W4A16 / W8A16:
        vLLM's mixed-precision kernels), else None."""
        return next(
            (
                s.weights_per_scale
                for s in self._resolve(module, layer)
                if s is not None and s.block is None and s.scale_bytes is None and s.weights_per_scale > 0
            ),
            None,
        )

    def _resolve(self, module: ModuleKind, layer: int | None) -> tuple[Scheme | None, ...]:
        if module not in MODULE_KINDS:
            raise ValueError(f"unknown module kind {module!r}; expected one of {', '.join(MODULE_KINDS)}")
        return _resolve(self, module, layer if module in _LAYERED else None)


UNQUANTIZED = WeightFormat(method="none", label="unquantized (model dtype)")

_FP8_PER_TENSOR = Scheme(weight_bits=8, scale_bytes=4, weights_per_scale=PER_TENSOR)
_FP8_PER_ROW = Scheme(weight_bits=8, scale_bytes=4, weights_per_scale=PER_ROW)
_MXFP4 = Scheme(weight_bits=4, scale_bytes=1, weights_per_scale=32)
_MXFP8 = Scheme(weight_bits=8, scale_bytes=1, weights_per_scale=32)


def _fp8_blocks(n: int, k: int) -> Scheme:
    """FP8 weights with an fp32 scale per ``n x k`` block."""
    return Scheme(weight_bits=8, scale_bytes=4, weights_per_scale=n * k, block=(n, k))


ONLINE_FP8 = WeightFormat(
    method="fp8_per_tensor",
    label="fp8 per-tensor, quantized at load (--quantization fp8_per_tensor)",
    compute_format="fp8",
    scheme=_FP8_PER_TENSOR,
    default_kinds=_LINEAR_AND_EXPERTS,
    warnings=(
        "vLLM 0.32 refuses --quantization fp8 on an unquantized checkpoint; "
        "--quantization fp8_per_tensor quantizes it at load",
    ),
)
"""An unquantized checkpoint served with ``--quantization fp8_per_tensor`` (vLLM 0.32's ``Fp8Config`` raises
"no longer supports online quantization" for ``--quantization fp8``; ``online/base.py``): every
``LinearBase`` (vision towers included: Qwen2.5/3-VL, Gemma 3, LLaVA and Mistral 3 build them with the quant
config) and the routed experts in per-tensor fp8, quantized layer by layer as they load; embeddings, lm_head
and the router stay in the model dtype."""


# ----- module names -----------------------------------------------------------------------------------------
_ROOTS = (
    "model.layers",
    "model.language_model.layers",
    "language_model.model.layers",
    "backbone.layers",
    "model.llm.layers",  # Inkling's checkpoint (vLLM's mapper makes it model.layers)
)
_ATTN = ("self_attn", "attn", "mixer", "attention")
_MLP = ("mlp", "feed_forward", "mixer", "ffn")
_MOE = ("mlp", "block_sparse_moe", "feed_forward", "mixer", "moe", "ffn")


def _leaves(containers: Sequence[str], names: Sequence[str]) -> tuple[str, ...]:
    return tuple(f"{c}.{n}" for c in containers for n in names)


def _expert_leaves(projections: Sequence[str]) -> tuple[str, ...]:
    # the fused module vLLM builds, then one checkpoint expert's projections
    return _leaves(_MOE, ("experts",)) + _leaves(_MOE, tuple(f"experts.0.{p}" for p in projections))


#: Per kind: alternative families (naming schemes) of parts, each part a tuple of name spellings relative to
#: the layer (``self_attn.q_proj``) or, for kinds outside layers, whole names. A pattern that names a part in
#: any spelling names that part; a family's parts share the kind's weight evenly.
_FAMILIES: dict[ModuleKind, tuple[tuple[tuple[str, ...], ...], ...]] = {
    "attention": (
        (
            _leaves(_ATTN, ("q_proj", "qkv_proj", "query_key_value", "wq")),
            _leaves(_ATTN, ("k_proj", "qkv_proj", "query_key_value", "wk")),
            _leaves(_ATTN, ("v_proj", "qkv_proj", "query_key_value", "wv")),
            _leaves(_ATTN, ("o_proj", "out_proj", "dense", "wo")),
        ),
        (  # MLA (DeepSeek V2/V3, Kimi K2)
            _leaves(_ATTN, ("q_a_proj", "fused_qkv_a_proj")),
            _leaves(_ATTN, ("q_b_proj",)),
            _leaves(_ATTN, ("kv_a_proj_with_mqa", "fused_qkv_a_proj")),
            _leaves(_ATTN, ("kv_b_proj",)),
            _leaves(_ATTN, ("o_proj",)),
        ),
        (  # DeepSeek-V4 (vLLM's DeepseekV4Attention: wq_a and wkv fused, the grouped output wo_a, wo_b)
            _leaves(_ATTN, ("fused_wqa_wkv", "wq_a", "wkv")),
            _leaves(_ATTN, ("wq_b",)),
            _leaves(_ATTN, ("wo_a",)),
            _leaves(_ATTN, ("wo_b",)),
        ),
    ),
    "mlp": (
        (
            _leaves(_MLP, ("gate_proj", "gate_up_proj", "w1", "fc1")),
            _leaves(_MLP, ("up_proj", "gate_up_proj", "w3", "fc1")),
            _leaves(_MLP, ("down_proj", "w2", "fc2")),
        ),
    ),
    "experts": (
        (
            _expert_leaves(("gate_proj", "w1", "gate_up_proj")),
            _expert_leaves(("up_proj", "w3", "gate_up_proj")),
            _expert_leaves(("down_proj", "w2")),
        ),
    ),
    "shared_experts": (
        (
            _leaves(
                _MOE, ("shared_experts.gate_proj", "shared_expert.gate_proj", "shared_experts.gate_up_proj")
            ),
            _leaves(_MOE, ("shared_experts.up_proj", "shared_expert.up_proj", "shared_experts.gate_up_proj")),
            _leaves(_MOE, ("shared_experts.down_proj", "shared_expert.down_proj")),
        ),
    ),
    "router": ((_leaves(_MOE, ("gate", "router", "shared_expert_gate")),),),
    "mamba": (
        (  # Mamba-2 (Nemotron-H's mixer, Granite 4 / Jamba's mamba)
            _leaves(("mamba", "mixer", "mamba_mixer"), ("in_proj",)),
            _leaves(("mamba", "mixer", "mamba_mixer"), ("out_proj",)),
        ),
        (  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
            _leaves(("linear_attn",), ("in_proj_qkvz", "in_proj_qkv", "in_proj_z")),
            _leaves(("linear_attn",), ("in_proj_ba", "in_proj_b", "in_proj_a")),
            _leaves(("linear_attn",), ("out_proj",)),
        ),
    ),
    "kda": (
        (  # in_proj (q, k, v, beta; Kimi-K3's full-rank gate), f_b, g_b, o_proj; f_a and g_a take their mean
            _leaves(("self_attn",), ("q_proj", "k_proj", "v_proj", "b_proj", "g_proj", "in_proj_qkvgfab")),
            _leaves(("self_attn",), ("f_b_proj",)),
            _leaves(("self_attn",), ("g_b_proj",)),
            _leaves(("self_attn",), ("o_proj",)),
        ),
    ),
    "indexer": (
        (
            _leaves(("self_attn.indexer", "attn.indexer"), ("wq_b",)),
            _leaves(("self_attn.indexer", "attn.indexer"), ("wk",)),
            _leaves(("self_attn.indexer", "attn.indexer"), ("weights_proj",)),
        ),
    ),
    "latent_projection": ((_leaves(_MOE, ("fc1_latent_proj",)), _leaves(_MOE, ("fc2_latent_proj",))),),
    "embedding": (
        (
            (
                "model.embed_tokens",
                "model.language_model.embed_tokens",
                "language_model.model.embed_tokens",
                "backbone.embeddings",
                "transformer.wte",
            ),
        ),
    ),
    "lm_head": ((("lm_head", "language_model.lm_head", "model.lm_head"),),),
    "vision": (
        (
            (
                "visual.blocks.0.attn.qkv",
                "model.visual.blocks.0.attn.qkv",
                "vision_tower.vision_model.encoder.layers.0.self_attn.q_proj",
                "model.vision_tower.vision_model.encoder.layers.0.self_attn.q_proj",
                "vision_model.encoder.layers.0.self_attn.q_proj",
                "model.vision_model.encoder.layers.0.self_attn.q_proj",
                "vision_model.model.layers.0.self_attn.q_proj",  # Llama 4 (Llama4VisionModel)
                "model.vision_model.model.layers.0.self_attn.q_proj",
                "vision_tower.transformer.layers.0.attention.q_proj",
                "model.vision_tower.transformer.layers.0.attention.q_proj",
                "vision_encoder.transformer.layers.0.attention.wq",
            ),
        ),
    ),
}


#: Module kinds a model's vLLM class names its own way, in place of every family's spellings: a pattern that
#: names another family's spelling does not name the module in that model. Gemma 4 keeps its routed experts
#: beside the dense MLP (``layers.N.experts``, gemma4.py), so a checkpoint's ``layers.N.mlp*`` exclusion
#: leaves them quantized, as vLLM's ModelOpt check does.
_OWN_NAMES: dict[str, dict[ModuleKind, tuple[tuple[tuple[str, ...], ...], ...]]] = {
    "gemma4": {
        "experts": (
            (
                ("experts", "experts.gate_up_proj", "experts.0.gate_proj"),
                ("experts", "experts.gate_up_proj", "experts.0.up_proj"),
                ("experts", "experts.down_proj", "experts.0.down_proj"),
            ),
        ),
        "router": ((("router",),),),
    },
    # Inkling (vLLM's models/inkling): q, k, v and the relative branch fused in attn.qkvr (the checkpoint's
    # wq_du, wk_dv, wv_dv, wr_du), the output attn.wo_ud; a dense MLP's mlp.gate_up_proj and mlp.down_proj
    # (the checkpoint's w13_dn and w2_md); the LM head (the checkpoint's model.llm.unembed).
    "inkling": {
        "lm_head": ((("lm_head", "model.llm.unembed"),),),
        "attention": (
            (
                ("attn.qkvr", "attn.wq_du", "attn.wr_du"),
                ("attn.qkvr", "attn.wk_dv"),
                ("attn.qkvr", "attn.wv_dv"),
                ("attn.wo_ud",),
            ),
        ),
        "mlp": (
            (
                ("mlp.gate_up_proj", "mlp.w13_dn"),
                ("mlp.gate_up_proj", "mlp.w13_dn"),
                ("mlp.down_proj", "mlp.w2_md"),
            ),
        ),
    },
}

#: Model types whose modules :data:`_OWN_NAMES` spells.
_NAMING_OF_TYPE = {
    "gemma4": "gemma4",
    "gemma4_text": "gemma4",
    **dict.fromkeys(("inkling_mm_model", "inkling_model", "inkling_text"), "inkling"),
}


def _families(module: ModuleKind, naming: str) -> tuple[tuple[tuple[str, ...], ...], ...]:
    return _OWN_NAMES.get(naming, {}).get(module) or _FAMILIES[module]


def _spellings(
    module: ModuleKind, family: int, part: int, layer: int | None, naming: str = ""
) -> tuple[str, ...]:
    leaves = _families(module, naming)[family][part]
    if module not in _LAYERED:
        return leaves
    index = _ANY_LAYER if layer is None else layer
    return tuple(f"{root}.{index}.{leaf}" for root in _ROOTS for leaf in leaves)


# A plain entry inside a decoder layer: an optional language-model root, ``layers.N``, an optional tail.
_LAYER_ENTRY = re.compile(
    r"^(?:(?:model|language_model|backbone|transformer|llm)\.){0,3}(?:layers|h)\.(\d+)(?:\.(.+))?$"
)


@dataclass(frozen=True)
class _Pattern:
    text: str
    regex: re.Pattern[str] | None
    """re: and glob entries, compiled."""
    layer: int | None
    """Plain entries naming one decoder layer."""
    tail: str
    """Plain entries: what follows ``layers.N.`` (empty: the whole layer), or the whole entry."""

    @property
    def layer_specific(self) -> bool:
        """Whether the entry can select some layers and not others (a layer number, or digits in a regex)."""
        if self.regex is None:
            return self.layer is not None
        return any(ch.isdigit() for ch in self.text)

    def matches(
        self, module: ModuleKind, family: int, part: int, layer: int | None, naming: str = ""
    ) -> bool:
        if self.regex is not None:
            return any(self.regex.match(s) for s in _spellings(module, family, part, layer, naming))
        if self.layer is not None:
            if module not in _LAYERED or layer != self.layer:
                return False
            leaves = _families(module, naming)[family][part]
            return not self.tail or any(_within(self.tail, leaf) for leaf in leaves)
        return any(_within(self.tail, s) for s in _spellings(module, family, part, layer, naming))


def _within(entry: str, name: str) -> bool:
    """``entry`` names ``name`` or an ancestor or a dotted run of its components (vLLM's substring rules,
    kept to dot boundaries so ``mlp.gate`` is not ``mlp.gate_proj``)."""
    return f".{entry}." in f".{name}."


@lru_cache(maxsize=4096)
def _compile(text: str) -> _Pattern:
    if text.startswith("re:"):
        return _Pattern(text, re.compile(text[3:]), None, text)
    if "*" in text or "?" in text:
        # a glob names a module and its subtree (ModelOpt's ``module_path*``, mxfp4's ``model.layers.*.mlp``)
        body = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in text)
        return _Pattern(text, re.compile(rf"(?:{body})(?:\..*)?\Z"), None, text)
    m = _LAYER_ENTRY.match(text)
    if m:
        return _Pattern(text, None, int(m.group(1)), m.group(2) or "")
    return _Pattern(text, None, None, text)


@lru_cache(maxsize=1024)
def _split(patterns: tuple[str, ...]) -> tuple[tuple[_Pattern, ...], dict[int, tuple[_Pattern, ...]]]:
    """(patterns that select the same modules in every layer, layer-specific ones by layer; -1: any layer)."""
    everywhere: list[_Pattern] = []
    by_layer: dict[int, list[_Pattern]] = {}
    for text in patterns:
        p = _compile(text)
        if not p.layer_specific:
            everywhere.append(p)
        else:
            by_layer.setdefault(-1 if p.layer is None else p.layer, []).append(p)
    return tuple(everywhere), {k: tuple(v) for k, v in by_layer.items()}


Matches = tuple[tuple[bool, ...], ...]
"""Per family, per part: whether a rule names that part."""


@lru_cache(maxsize=65536)
def _rule_matches(
    patterns: tuple[str, ...], module: ModuleKind, layer: int | None, naming: str = ""
) -> Matches:
    everywhere, by_layer = _split(patterns)
    if module not in _LAYERED:
        candidates = everywhere + tuple(p for ps in by_layer.values() for p in ps)
    elif layer is None:
        candidates = everywhere
    else:
        extra = by_layer.get(layer, ()) + by_layer.get(-1, ())
        if not extra:  # the same answer as for any layer: share its cache entry
            return _rule_matches(patterns, module, None, naming)
        candidates = everywhere + extra
    return tuple(
        tuple(any(p.matches(module, f, i, layer, naming) for p in candidates) for i in range(len(parts)))
        for f, parts in enumerate(_families(module, naming))
    )


@lru_cache(maxsize=65536)
def _resolve(fmt: WeightFormat, module: ModuleKind, layer: int | None) -> tuple[Scheme | None, ...]:
    """The scheme of each part of ``module`` in ``layer``: the first rule that names it, else the default. The
    router is never quantized (the module docstring), whatever a pattern of the file's would select."""
    families = _families(module, fmt.naming)
    if module == "router":
        return tuple(None for _ in families[0])
    per_rule: list[Matches] = []
    for rule in fmt.rules:
        if module in rule.kinds:
            per_rule.append(tuple(tuple(True for _ in parts) for parts in families))
        elif rule.patterns:
            per_rule.append(_rule_matches(rule.patterns, module, layer, fmt.naming))
        else:
            per_rule.append(tuple(tuple(False for _ in parts) for parts in families))
    # the naming scheme the rules speak: the family with the most parts named by a pattern (class targets
    # name every part of every family), the first on a tie
    named = [m for rule, m in zip(fmt.rules, per_rule, strict=True) if module not in rule.kinds]
    family = max(
        range(len(families)),
        key=lambda f: (sum(any(m[f][i] for m in named) for i in range(len(families[f]))), -f),
    )
    default = fmt.scheme if module in fmt.default_kinds else None
    resolved: list[Scheme | None] = []
    for i in range(len(families[family])):
        for rule, m in zip(fmt.rules, per_rule, strict=True):
            if m[family][i]:
                resolved.append(rule.scheme)
                break
        else:
            resolved.append(default)
    return tuple(resolved)


# ----- reading the config ----------------------------------------------------------------------------------
#: Methods :func:`weight_format` reads (vLLM 0.32 names, as the checkpoint spells them).
ACCEPTED_METHODS: tuple[str, ...] = (
    "awq",
    "auto_awq",
    "awq_marlin",
    "compressed-tensors",
    "fbgemm_fp8",
    "fp8",
    "gptq",
    "auto_gptq",
    "gptq_marlin",
    "auto-round",
    "inc",
    "modelopt",
    "modelopt_fp4",
    "modelopt_mixed",
    "modelopt_mxfp8",
    "mxfp4",
    "mxfp8",
    "quark",
)

#: Methods vLLM 0.32 does not load (or kvright does not plan), with the reason.
_REFUSED: dict[str, str] = {
    "bitsandbytes": "vLLM 0.32 no longer loads bitsandbytes checkpoints (removed after RFC vllm#39583)",
    "gguf": "vLLM 0.32 no longer loads GGUF checkpoints (removed after RFC vllm#39583)",
    "hqq": "vLLM 0.32 does not load HQQ checkpoints",
    "eetq": "vLLM 0.32 does not load EETQ checkpoints",
    "marlin": "vLLM 0.32 has no standalone marlin checkpoint format",
    "squeezellm": "vLLM 0.32 does not load SqueezeLLM checkpoints",
    "aqlm": "vLLM 0.32 does not load AQLM checkpoints",
}

_ALGO_FIELDS = ("FP8", "FP8_PER_CHANNEL_PER_TOKEN", "FP8_PB_WO", "NVFP4", "W4A16_NVFP4", "MXFP8")
# vLLM's config loader maps a ModelOpt producer's quant_algo to a method and refuses the rest
_MODELOPT_PRODUCER_ALGOS = {
    "FP8": "modelopt",
    "FP8_PER_CHANNEL_PER_TOKEN": "modelopt",
    "FP8_PB_WO": "modelopt",
    "NVFP4": "modelopt_fp4",
}


#: Classes vLLM 0.32 reads a compressed-tensors ``mxfp4-pack-quantized`` block of as ``quant_method: mxfp4``
#: (``KimiK3ForConditionalGenerationConfig`` in models/config.py rewrites it, for Mxfp4Config's backends):
#: the routed experts MXFP4, every linear layer unquantized, the ignore list unread.
_MXFP4_REWRITTEN = frozenset({"KimiK3ForConditionalGeneration", "KimiK3MTPModel"})


#: The files a legacy GPTQ or AWQ checkpoint keeps its quantization in (AutoGPTQ's, AutoAWQ's), in the order
#: kvright looks for them; vLLM reads them only with ``--quantization gptq`` / ``awq``.
LEGACY_QUANT_FILES = ("quantize_config.json", "quant_config.json")


def weight_format(
    config: Mapping[str, Any],
    *,
    hf_quant_config: Mapping[str, Any] | None = None,
    legacy_quant_config: tuple[str, Mapping[str, Any]] | None = None,
    architecture: str = "",
) -> WeightFormat:
    """The weight format of a checkpoint from its ``config.json`` (top-level or text-level) and, when present
    beside it, ``hf_quant_config.json`` (read only when config.json has no quantization block, as vLLM does)
    or, failing both, a legacy GPTQ / AWQ file (``legacy_quant_config``: its name, one of
    :data:`LEGACY_QUANT_FILES`, and its content), which vLLM reads only when ``--quantization`` names the
    method (:attr:`WeightFormat.flag`). ``architecture`` is the class the file names (a rewrite of vLLM's is
    keyed on it). No quantization: :data:`UNQUANTIZED`. An unknown or unsupported method raises
    :class:`~capacity.errors.ConfigError` on ``quantization_config.quant_method`` naming what is accepted; a
    malformed field raises it naming the field."""
    if not isinstance(config, Mapping):
        raise ConfigError("config", f"is {config!r:.40}; expected an object")
    block, where = _quantization_block(config, hf_quant_config)
    naming = _NAMING_OF_TYPE.get(str(config.get("model_type") or ""), "")
    if block is None and legacy_quant_config is not None:
        return replace(_legacy(*legacy_quant_config), naming=naming)
    if block is None:
        return UNQUANTIZED
    block = dict(block)
    method = _normalized_method(block, where)
    if (
        architecture in _MXFP4_REWRITTEN
        and method == "compressed-tensors"
        and block.get("format") == "mxfp4-pack-quantized"
    ):
        method = "mxfp4"
    reader = _READERS.get(method)
    if reader is None:
        reason = _REFUSED.get(method) or _unread_reason(method)
        raise ConfigError(
            f"{where}.quant_method",
            f"is {method!r} ({reason}); expected one of {', '.join(ACCEPTED_METHODS)}",
        )
    fmt = replace(reader(block, where), naming=naming)
    if config.get("model_type") == "deepseek_v4" and method == "fp8":
        return _deepseek_v4_fp8(fmt, block, where, config.get("expert_dtype", "fp4"))
    if config.get("model_type") in ("deepseek_v41", "deepseek_v41_text") and method == "fp8":
        # DeepseekV41Config takes expert_dtype from the quantization block where the file states none
        expert_dtype = config.get("expert_dtype", block.get("expert_dtype", "fp4"))
        return _deepseek_v4_fp8(fmt, block, where, expert_dtype, v41=True)
    return fmt


def _legacy(name: str, block: Mapping[str, Any]) -> WeightFormat:
    """A GPTQ or AWQ checkpoint from before transformers wrote ``quantization_config`` (TheBloke's GPTQ
    uploads): AutoGPTQ's ``quantize_config.json`` (bits, group_size, desc_act, sym) or AutoAWQ's
    (w_bit, q_group_size, zero_point, version), read by the method's own reader. The method is the file's
    ``quant_method`` where it says, else AWQ's keys name AWQ, else GPTQ; vLLM needs it as
    ``--quantization``."""
    if not isinstance(block, Mapping):
        raise ConfigError(name, f"is {block!r:.40}; expected an object")
    stated = block.get("quant_method")
    awq_keys = "w_bit" in block or "zero_point" in block
    method = stated if isinstance(stated, str) else "awq" if awq_keys else "gptq"
    if method not in ("gptq", "awq"):
        raise ConfigError(
            f"{name}.quant_method",
            f"is {method!r}; a {name} beside a config.json without quantization_config is read as gptq or "
            "awq",
        )
    fmt = _READERS[method]({**block, "quant_method": method}, name)
    return replace(
        fmt,
        flag=method,
        warnings=(
            *fmt.warnings,
            f"the quantization is only in {name} (config.json has no quantization_config): vLLM reads it "
            f"only with --quantization {method}, which the plan adds",
        ),
    )


def _unread_reason(method: str) -> str:
    """Why kvright refuses a method it has no reader for: one vLLM does not load at all, or one it loads
    and kvright does not weigh yet (AMD's Quark, torchao, ...: the plan would be wrong without a word)."""
    from capacity.architecture import engine_vocabulary  # the engine's names (architecture imports this)

    engine = engine_vocabulary()
    if method in engine.quantization_methods:
        return f"vLLM {engine.vllm} loads it; kvright does not weigh {method} checkpoints yet"
    return f"not a method vLLM {engine.vllm} loads"


def _deepseek_v4_fp8(
    fmt: WeightFormat, block: Mapping[str, Any], where: str, expert_dtype: Any, *, v41: bool = False
) -> WeightFormat:
    """vLLM reads a DeepSeek-V4 checkpoint's fp8 block as ``deepseek_v4_fp8`` (``DeepseekV4FP8Config``,
    ``override_quantization_method``): with ``expert_dtype`` fp8 everything is Fp8Config's, float32 scales;
    with fp4 (the default) the linear layers' block scales are one-byte e8m0 (``is_scale_e8m0``) and the
    routed experts MXFP4, or NVFP4 (ModelOpt's method, fp8 scales per 16) where ``moe_quant_algo`` says
    NVFP4 (NVIDIA's DeepSeek-V4 NVFP4 checkpoints); an ignore list naming them still leaves them unquantized
    (its rules come first). DeepSeek-V4.1's (``v41``) 32x32 blocks with fp4 experts are ModelOpt's MXFP8
    linears instead: a one-byte E8M0 scale per 32 inputs of every row."""
    if expert_dtype not in ("fp4", "fp8"):
        raise ConfigError(
            "expert_dtype",
            f"is {expert_dtype!r:.40}; vLLM 0.32's DeepSeek-V4 reads 'fp4' (the default) or 'fp8'",
        )
    if expert_dtype == "fp8":
        kinds = fmt.default_kinds - {"vision"} if v41 else fmt.default_kinds
        return replace(fmt, method="deepseek_v4_fp8", default_kinds=kinds)
    nvfp4 = str(block.get("moe_quant_algo") or "").upper() == "NVFP4"
    experts, named = (_nvfp4(16), "NVFP4") if nvfp4 else (_MXFP4, "MXFP4")
    scheme, label = fmt.scheme, fmt.label
    if fmt.weight_block_size is not None:
        n, k = fmt.weight_block_size
        scheme = Scheme(weight_bits=8, scale_bytes=1, weights_per_scale=n * k, block=(n, k))
        label = f"{label} (e8m0 scales)"
        if v41 and (n, k) == (32, 32):
            scheme = Scheme(weight_bits=8, scale_bytes=1, weights_per_scale=32, block=(1, 32))
            label = "MXFP8 (a 1x32 e8m0 scale per row)"
    if v41:  # its wrapper builds the tower and aligner without the quantization
        fmt = replace(fmt, default_kinds=fmt.default_kinds - {"vision"})
    return replace(
        fmt,
        method="deepseek_v4_fp8",
        label=f"{label}, experts in {named}",
        scheme=scheme,
        rules=(*fmt.rules, Rule(kinds=frozenset({"experts"}), scheme=experts)),
    )


#: Where a multimodal wrapper's file keeps its language model's config: transformers' ``text_config``,
#: InternVL's ``llm_config``, DeepseekVLV2Config's ``language_config`` (DeepSeek-VL2, DeepSeek-OCR).
TEXT_CONFIG_KEYS = ("text_config", "llm_config", "language_config")


def _quantization_block(
    config: Mapping[str, Any], hf_quant_config: Mapping[str, Any] | None
) -> tuple[Mapping[str, Any] | None, str]:
    scopes: list[tuple[Mapping[str, Any], str]] = [(config, "")]
    for key in TEXT_CONFIG_KEYS:
        text = config.get(key)
        if isinstance(text, Mapping):
            scopes.append((text, f"{key}."))
    for scope, prefix in scopes:
        for key in (
            "quantization_config",
            "compression_config",
        ):  # compression_config: older compressed-tensors
            value = scope.get(key)
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise ConfigError(f"{prefix}{key}", f"is {value!r:.40}; expected an object")
            return value, f"{prefix}{key}"
    if hf_quant_config is not None:
        if not isinstance(hf_quant_config, Mapping):
            raise ConfigError("hf_quant_config.json", f"is {hf_quant_config!r:.40}; expected an object")
        return hf_quant_config, "hf_quant_config.json"
    return None, ""


def _normalized_method(block: dict[str, Any], where: str) -> str:
    """The method vLLM 0.32 loads the checkpoint with: ``model_arch_config_convertor`` (a ModelOpt producer's
    ``quantization.quant_algo`` names the method; ``compressed_tensors`` is spelled with a hyphen), then
    ``ModelConfig._verify_quantization``'s overrides, where a ``modelopt*`` method's ``quant_algo`` (the
    legacy block's or config.json's flat one) picks the ModelOpt config class."""
    producer = block.get("producer")
    inner = block.get("quantization")
    is_modelopt = (isinstance(producer, Mapping) and producer.get("name") == "modelopt") or (
        isinstance(inner, Mapping) and "modelopt_quant_config" in inner
    )
    value = block.get("quant_method")
    if is_modelopt and inner is not None:
        if not isinstance(inner, Mapping):
            raise ConfigError(
                f"{where}.quantization", f"is {inner!r:.40}; expected an object with quant_algo"
            )
        algo = inner.get("quant_algo")
        if algo is not None:
            value = _MODELOPT_PRODUCER_ALGOS.get(str(algo).upper())
            if value is None:
                raise ConfigError(
                    f"{where}.quantization.quant_algo",
                    f"is {algo!r}; vLLM 0.32 reads ModelOpt checkpoints with one of "
                    f"{', '.join(_MODELOPT_PRODUCER_ALGOS)}",
                )
    if value is None:
        algo = (inner if isinstance(inner, Mapping) else block).get("quant_algo")
        unnamed = (
            f" (its quant_algo {algo!r} is ModelOpt's, but vLLM 0.32 reads it only under quant_method "
            "'modelopt', or a producer.name 'modelopt' over a 'quantization' block, and otherwise loads the "
            "weights as unquantized)"
            if algo is not None
            else ""
        )
        raise ConfigError(
            f"{where}.quant_method",
            f"is missing{unnamed}; expected one of {', '.join(ACCEPTED_METHODS)}, or a ModelOpt file with "
            "producer.name 'modelopt'",
        )
    if not isinstance(value, str):
        raise ConfigError(
            f"{where}.quant_method", f"is {value!r:.40}; expected one of {', '.join(ACCEPTED_METHODS)}"
        )
    method = value.strip().lower().replace("compressed_tensors", "compressed-tensors")
    if method.startswith("modelopt"):
        scope = inner if "quantization" in block else block
        algo = str(scope.get("quant_algo", "") if isinstance(scope, Mapping) else "").upper()
        for matches, override in _MODELOPT_OVERRIDES:
            if matches(algo):
                return override
    return method


#: ``override_quantization_method`` of vLLM 0.32's ModelOpt config classes, in the order it asks them.
_MODELOPT_OVERRIDES: tuple[tuple[Callable[[str], bool], str], ...] = (
    (lambda algo: algo == "FP8", "modelopt"),
    (lambda algo: "NVFP4" in algo or "FP4" in algo, "modelopt_fp4"),
    (lambda algo: "MXFP8" in algo, "modelopt_mxfp8"),
    (lambda algo: algo == "MIXED_PRECISION", "modelopt_mixed"),
)


# ----- field readers ----------------------------------------------------------------------------------------
def _get(
    block: Mapping[str, Any], keys: Sequence[str], where: str, default: Any = ..., what: str = ""
) -> Any:
    for key in keys:
        if block.get(key) is not None:
            return block[key]
    if default is ...:
        raise ConfigError(f"{where}.{keys[-1]}", f"is missing; expected {what}")
    return default


def _int(
    block: Mapping[str, Any], keys: Sequence[str], where: str, *, allowed: Sequence[int] = (), **kw: Any
) -> int:
    expected = f"one of {', '.join(map(str, allowed))}" if allowed else "a positive integer or -1"
    value = _get(block, keys, where, what=expected, **kw)
    field = f"{where}.{next((k for k in keys if k in block), keys[-1])}"
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(field, f"is {value!r:.40}; expected {expected}")
    if allowed and value not in allowed:
        raise ConfigError(field, f"is {value}; expected {expected}")
    if (not allowed and value == 0) or value < -1:
        raise ConfigError(field, f"is {value}; expected {expected}")
    return value


def _bool(block: Mapping[str, Any], keys: Sequence[str], where: str, **kw: Any) -> bool:
    value = _get(block, keys, where, what="true or false", **kw)
    if not isinstance(value, bool):
        field = f"{where}.{next((k for k in keys if k in block), keys[-1])}"
        raise ConfigError(field, f"is {value!r:.40}; expected true or false")
    return value


def _names(block: Mapping[str, Any], keys: Sequence[str], where: str) -> tuple[str, ...]:
    key = next((k for k in keys if block.get(k) is not None), None)
    if key is None:
        return ()
    value = block[key]
    if isinstance(value, list) and all(isinstance(v, list) for v in value):  # GPTQ's list of lists
        value = [v for sub in value for v in sub]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}.{key}", f"is {value!r:.60}; expected a list of module names")
    return tuple(value)


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(field, f"is {value!r:.40}; expected a positive integer")
    return value


def _group_label(group: int) -> str:
    return "per channel" if group == -1 else f"group {group}"


# ----- one reader per method -------------------------------------------------------------------------------
def _fp8(block: dict[str, Any], where: str) -> WeightFormat:
    """``Fp8Config.from_config`` (fp8.py): activation_scheme static|dynamic; weight_block_size [n, k] (dynamic
    activations only); ignored_layers, else modules_to_not_convert; store_dtype mxfp4 for the experts."""
    scheme_name = _get(block, ("activation_scheme",), where, what="static or dynamic")  # vLLM requires it
    if scheme_name not in ("static", "dynamic"):
        raise ConfigError(f"{where}.activation_scheme", f"is {scheme_name!r:.40}; expected static or dynamic")
    raw_block = block.get("weight_block_size")
    block_size: tuple[int, int] | None = None
    if raw_block is not None:
        if (
            not isinstance(raw_block, list)
            or len(raw_block) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in raw_block)
        ):
            raise ConfigError(
                f"{where}.weight_block_size", f"is {raw_block!r:.40}; expected [n, k], e.g. [128, 128]"
            )
        if scheme_name != "dynamic":
            raise ConfigError(
                f"{where}.activation_scheme",
                "is static; vLLM's block-wise fp8 (weight_block_size) needs dynamic activations",
            )
        block_size = (raw_block[0], raw_block[1])
    ignored = _names(block, ("ignored_layers",), where) or _names(block, ("modules_to_not_convert",), where)
    rules = [Rule(patterns=ignored)] if ignored else []
    label = f"fp8 {block_size[0]}x{block_size[1]} blocks" if block_size else "fp8 per-tensor"
    store = block.get("store_dtype")
    if store is not None and store != "mxfp4":
        raise ConfigError(f"{where}.store_dtype", f"is {store!r:.40}; expected mxfp4 or nothing")
    if store == "mxfp4":
        rules.append(Rule(kinds=frozenset({"experts"}), scheme=_MXFP4))
        label += ", experts in MXFP4"
    scheme = _FP8_PER_TENSOR if block_size is None else _fp8_blocks(*block_size)
    return WeightFormat(
        method="fp8",
        label=label,
        weight_block_size=block_size,
        compute_format="fp8",
        scheme=scheme,
        default_kinds=_LINEAR_AND_EXPERTS,
        rules=tuple(rules),
    )


def _fbgemm_fp8(block: dict[str, Any], where: str) -> WeightFormat:
    """``FBGEMMFp8Config`` (fbgemm_fp8.py): fp8 weights with an fp32 scale per output row, linear layers only
    (no MoE method), modules_to_not_convert matched exactly; deprecated in 0.32."""
    ignored = _names(block, ("modules_to_not_convert",), where)
    if "modules_to_not_convert" not in block:
        _get(block, ("modules_to_not_convert",), where, what="a list of module names")
    ub = _get(block, ("activation_scale_ub",), where, what="a number")
    if isinstance(ub, bool) or not isinstance(ub, int | float) or not math.isfinite(ub) or ub <= 0:
        raise ConfigError(f"{where}.activation_scale_ub", f"is {ub!r:.40}; expected a positive number")
    return WeightFormat(
        method="fbgemm_fp8",
        label="fp8 per-row (fbgemm)",
        compute_format="fp8",
        scheme=_FP8_PER_ROW,
        default_kinds=_LINEAR,
        rules=(Rule(patterns=ignored),) if ignored else (),
        warnings=(
            "fbgemm_fp8 is deprecated in vLLM 0.32, which loads it only with --allow-deprecated-quantization "
            "(a plan adds the flag); a later vLLM may not load it at all",
        ),
        deprecated=True,
    )


def _awq(block: dict[str, Any], where: str) -> WeightFormat:
    """``AutoAWQConfig`` (auto_awq.py): 4-bit only in 0.32; qweight int32 (8 per word), a model-dtype scale
    and a 4-bit zero per group per output; modules_to_not_convert by substring; lm_head when ``lm_head``."""
    _int(block, ("w_bit", "bits"), where, allowed=(4,))
    group = _int(block, ("q_group_size", "group_size"), where)
    zero_point = _bool(block, ("zero_point",), where)
    lm_head = _bool(block, ("lm_head",), where, default=False)
    ignored = _names(block, ("modules_to_not_convert",), where)
    scheme = Scheme(
        weight_bits=4,
        scale_bytes=None,
        weights_per_scale=PER_ROW if group == -1 else group,
        zero_point_bits=4 if zero_point else 0,
    )
    kinds: set[ModuleKind] = set(_DECODER_LINEAR_AND_EXPERTS)
    if lm_head:
        kinds.add("lm_head")
    return WeightFormat(
        method="awq",
        label=f"AWQ 4-bit, {_group_label(group)}" + (", zero points" if zero_point else ""),
        compute_format="int4",
        weight_only=True,
        scheme=scheme,
        default_kinds=frozenset(kinds),
        rules=(Rule(patterns=ignored),) if ignored else (),
    )


def _gptq_scheme(bits: int, group: int) -> Scheme:
    # symmetric: Marlin replaces qzeros with an empty tensor after loading (mixed_precision/marlin.py)
    return Scheme(weight_bits=bits, scale_bytes=None, weights_per_scale=PER_ROW if group == -1 else group)


def _gptq(block: dict[str, Any], where: str) -> WeightFormat:
    """``AutoGPTQConfig`` (auto_gptq.py, gptq_utils.py): bits 4|8 symmetric only (TYPE_MAP); no group
    activation ordering (``desc_act`` true with groups, in the file or a dynamic rule); dynamic rules
    ``-:regex`` skip modules, ``+:regex`` override bits/group_size; modules_in_block_to_quantize limits the
    quantized linears; lm_head when ``lm_head``."""
    bits = _int(block, ("bits",), where, allowed=(4, 8))
    group = _int(block, ("group_size",), where)
    desc_act = _bool(block, ("desc_act",), where)
    _no_group_act_order(desc_act, group, f"{where}.desc_act")
    if not _bool(block, ("sym",), where):
        raise ConfigError(
            f"{where}.sym", "is false; vLLM 0.32 serves symmetric GPTQ only (bits 4 or 8, sym true)"
        )
    lm_head = _bool(block, ("lm_head",), where, default=False)
    rules: list[Rule] = []
    dynamic = block.get("dynamic") or {}
    if not isinstance(dynamic, Mapping):
        raise ConfigError(f"{where}.dynamic", f"is {dynamic!r:.40}; expected an object of regex -> overrides")
    for pattern, override in dynamic.items():
        if not isinstance(pattern, str) or not isinstance(override, Mapping):
            raise ConfigError(f"{where}.dynamic", f"has {pattern!r:.40}; expected regex -> object")
        if pattern.startswith("-:"):
            rules.append(Rule(patterns=(f"re:{pattern[2:]}",)))
            continue
        o_bits = _int(override, ("bits",), f"{where}.dynamic", allowed=(4, 8), default=bits)
        o_group = _int(override, ("group_size",), f"{where}.dynamic", default=group)
        o_desc_act = _bool(override, ("desc_act",), f"{where}.dynamic", default=desc_act)
        _no_group_act_order(o_desc_act, o_group, f"{where}.dynamic[{pattern!r:.40}].desc_act")
        rules.append(
            Rule(patterns=(f"re:{pattern.removeprefix('+:')}",), scheme=_gptq_scheme(o_bits, o_group))
        )
    scheme = _gptq_scheme(bits, group)
    kinds: set[ModuleKind] = set(_DECODER_LINEAR_AND_EXPERTS)
    only = _names(block, ("modules_in_block_to_quantize",), where)
    if only:  # the linears not listed stay unquantized; routed experts follow the dynamic rules only
        rules.append(Rule(patterns=only, scheme=scheme))
        kinds = {"experts"}
    if lm_head:
        kinds.add("lm_head")
    return WeightFormat(
        method="gptq",
        label=f"GPTQ {bits}-bit, {_group_label(group)}",
        compute_format="int4" if bits == 4 else "int8",
        weight_only=True,
        scheme=scheme,
        default_kinds=frozenset(kinds),
        rules=tuple(rules),
    )


def _no_group_act_order(desc_act: bool, group: int, field: str) -> None:
    """vLLM 0.32 refuses GPTQ's group activation ordering (``normalize_and_validate_gptq_desc_act``): with
    one group per output channel (``group_size`` -1) the ordering changes nothing and is accepted."""
    if desc_act and group != -1:
        raise ConfigError(
            field,
            f"is true with group_size {group}: vLLM 0.32 no longer serves GPTQ with group activation "
            "ordering; accepted: desc_act false (static ordering), or group_size -1",
        )


#: ``INCConfig`` (vLLM 0.32 inc/inc.py): what it accepts.
_INC_BITS = (2, 3, 4, 5, 6, 7, 8)
_INC_FORMATS = ("auto_round:auto_gptq", "auto_round:auto_awq", "auto_round:fp8", "auto_round:llm_compressor")
_INC_BACKENDS = ("auto", "gptq", "gptq:marlin", "awq", "awq:marlin", "marlin")
#: An ``extra_config`` key with one of these is a regex (``INCConfigParser``), else a module name.
_REGEX_CHARS = frozenset("*+?^$()[]{}|\\")
#: Raw fields INC's block-wise FP8 checks (``_validate_raw_config``); absent means the expected value.
_INC_FP8_FIELDS: dict[str, Any] = {
    "act_bits": 8,
    "act_data_type": "fp",
    "act_sym": True,
    "act_dynamic": True,
    "activation_scheme": "dynamic",
    "fmt": "e4m3",
}
_INC_MXFP8_FIELDS: dict[str, Any] = {
    "act_bits": 8,
    "act_data_type": "mx_fp",
    "act_group_size": 32,
    "act_sym": True,
    "act_dynamic": True,
}


def _inc_group(value: Any, field: str) -> int | tuple[int, int]:
    """INC's ``group_size``: an integer (-1: one group per row), or ``[n, k]`` for block-wise FP8."""
    if isinstance(value, list | tuple):
        whole = all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)
        if len(value) != 2 or not whole:
            raise ConfigError(field, f"is {value!r:.40}; expected an integer, or [n, k] for FP8 blocks")
        return (value[0], value[1])
    if isinstance(value, bool) or not isinstance(value, int) or (value < 1 and value != -1):
        raise ConfigError(field, f"is {value!r:.40}; expected a positive integer or -1, or [n, k]")
    return value


@dataclass(frozen=True)
class _IncLayer:
    """What vLLM's ``INCLayerConfig`` holds for one module: the file's values, or an override's."""

    data_type: str
    bits: int
    group: int | tuple[int, int]
    sym: bool

    def scheme(self) -> Scheme:
        """Integers packed in int32 with a model-dtype scale per group (and a ``bits``-wide zero point when
        asymmetric, GPTQ or AWQ packing alike), FP8 in ``[n, k]`` blocks, or MXFP."""
        if isinstance(self.group, tuple):  # block-wise FP8 (_inc_check: only there)
            return _fp8_blocks(*self.group)
        if "mx_fp" in self.data_type:
            return _MXFP4 if self.bits == 4 else _MXFP8
        return Scheme(
            weight_bits=self.bits,
            scale_bytes=None,
            weights_per_scale=PER_ROW if self.group == -1 else self.group,
            zero_point_bits=0 if self.sym else self.bits,
        )


def _inc(block: dict[str, Any], where: str) -> WeightFormat:
    """``INCConfig`` (inc/inc.py, inc/config_parser.py): Intel AutoRound checkpoints (``quant_method``
    ``auto-round``, which vLLM reads as ``inc``). ``data_type`` int (bits 2-8, GPTQ or AWQ packing, an
    integer group), fp (FP8 in ``[n, k]`` blocks) or mx_fp (MXFP4 / MXFP8, group 32); ``sym`` (default
    true); ``block_name_to_quantize`` (or ``to_quant_block_names``): only modules under those names are
    quantized; ``extra_config``: per-module overrides by exact name, name suffix or regex (``bits`` 16 or
    more leaves the module unquantized). The LM head stays unquantized unless ``extra_config`` names it."""
    data_type = _get(block, ("data_type",), where, default="int")
    data_type = "fp" if data_type == "fp8" else data_type
    if not isinstance(data_type, str) or (data_type not in ("int", "fp") and "mx_fp" not in data_type):
        raise ConfigError(f"{where}.data_type", f"is {data_type!r:.40}; expected int, fp or mx_fp")
    bits = _int(block, ("bits",), where, allowed=_INC_BITS)
    raw_group = _get(block, ("group_size",), where, what="an integer or [n, k]")
    group = _inc_group(raw_group, f"{where}.group_size")
    sym = _bool(block, ("sym",), where, default=True)
    if data_type == "fp" and bits == 8 and isinstance(group, tuple):
        default_packing = "auto_round:fp8"
    elif "mx_fp" in data_type:
        default_packing = "auto_round:llm_compressor"
    else:
        default_packing = "auto_round:auto_gptq"
    packing = _get(block, ("packing_format",), where, default=None) or default_packing
    backend = _get(block, ("backend", "vllm_backend"), where, default="auto")
    for field, value, accepted in (
        ("packing_format", packing, _INC_FORMATS),
        ("backend", backend, _INC_BACKENDS),
    ):
        if value not in accepted:
            raise ConfigError(f"{where}.{field}", f"is {value!r:.40}; expected one of {', '.join(accepted)}")
    layer = _IncLayer(data_type=data_type, bits=bits, group=group, sym=sym)
    _inc_check(block, where, layer)
    scheme = layer.scheme()
    rules = [_inc_override(name, override, where, layer) for name, override in _inc_extra(block, where)]
    blocks = _get(block, ("block_name_to_quantize", "to_quant_block_names"), where, default=None)
    if isinstance(blocks, str):
        blocks = [b for b in blocks.split(",") if b]
    if blocks is not None and (not isinstance(blocks, list) or not all(isinstance(b, str) for b in blocks)):
        raise ConfigError(
            f"{where}.block_name_to_quantize", f"is {blocks!r:.40}; expected a list of module name prefixes"
        )
    kinds: frozenset[ModuleKind] = _DECODER_LINEAR_AND_EXPERTS
    if blocks:  # only the modules under these prefixes (vLLM: layer_name.startswith(name))
        rules.append(Rule(patterns=tuple(f"re:{re.escape(b)}" for b in blocks), scheme=scheme))
        kinds = frozenset()
    if isinstance(group, tuple):
        compute, label = "fp8", f"AutoRound fp8 {group[0]}x{group[1]} blocks"
    elif "mx_fp" in data_type:
        compute, label = ("fp4" if bits == 4 else "mxfp8"), f"AutoRound MXFP{bits}"
    else:
        packed = "GPTQ" if "gptq" in packing else "AWQ"
        compute = "int4" if bits <= 4 else "int8"
        label = f"AutoRound int{bits} ({packed} packing), {_group_label(group)}"
        label += "" if sym else ", zero points"
    return WeightFormat(
        method="inc",
        label=label,
        weight_block_size=group if isinstance(group, tuple) else None,
        compute_format=compute,
        weight_only=data_type == "int",
        scheme=scheme,
        default_kinds=kinds,
        rules=tuple(rules),
    )


def _inc_extra(block: Mapping[str, Any], where: str) -> list[tuple[str, Mapping[str, Any]]]:
    extra = block.get("extra_config") or {}
    if not isinstance(extra, Mapping) or not all(
        isinstance(k, str) and isinstance(v, Mapping) for k, v in extra.items()
    ):
        raise ConfigError(f"{where}.extra_config", f"is {extra!r:.40}; expected module name -> overrides")
    return list(extra.items())


def _inc_override(name: str, override: Mapping[str, Any], where: str, layer: _IncLayer) -> Rule:
    """One ``extra_config`` entry as a rule: a name (or a name's suffix: plain patterns match at dot
    boundaries anywhere), or a regex searched in the name when the key has regex characters."""
    field = f"{where}.extra_config[{name!r:.40}]"
    o_bits = override.get("bits", layer.bits)
    if isinstance(o_bits, bool) or not isinstance(o_bits, int) or (o_bits < 16 and o_bits not in _INC_BITS):
        raise ConfigError(f"{field}.bits", f"is {o_bits!r:.40}; expected 2 to 8, or 16 and up (unquantized)")
    scheme = None
    if o_bits < 16:
        o_group = _inc_group(override.get("group_size", layer.group), f"{field}.group_size")
        scheme = replace(layer, bits=o_bits, group=o_group, sym=bool(override.get("sym", layer.sym))).scheme()
    pattern = f"re:.*(?:{name})" if any(ch in _REGEX_CHARS for ch in name) else name
    return Rule(patterns=(pattern,), scheme=scheme)


def _inc_check(block: Mapping[str, Any], where: str, layer: _IncLayer) -> None:
    """What ``INCConfig._validate_supported_quantization`` and ``_validate_raw_config`` refuse."""
    data_type, bits, group, sym = layer.data_type, layer.bits, layer.group, layer.sym
    packing = block.get("packing_format")
    if data_type == "int":
        if isinstance(group, tuple):
            raise ConfigError(f"{where}.group_size", f"is {list(group)}; integer AutoRound needs an integer")
        if packing not in (None, "auto_round:auto_gptq", "auto_round:auto_awq"):
            raise ConfigError(
                f"{where}.packing_format", f"is {packing!r}; integer AutoRound reads auto_gptq or auto_awq"
            )
        return
    fp8 = data_type == "fp"
    own = "auto_round:fp8" if fp8 else "auto_round:llm_compressor"
    wanted: dict[str, Any] = {
        "sym": (sym, True),
        "packing_format": (packing or own, own),
        "backend": (block.get("backend", block.get("vllm_backend", "auto")), "auto"),
    }
    if fp8:
        wanted["bits"] = (bits, 8)
        if not isinstance(group, tuple):
            raise ConfigError(f"{where}.group_size", f"is {group!r}; AutoRound block-wise FP8 needs [n, k]")
    else:
        wanted["group_size"] = (group, 32)
        if bits not in (4, 8):
            raise ConfigError(f"{where}.bits", f"is {bits}; AutoRound MXFP needs 4 or 8")
    for field, (value, needed) in wanted.items():
        if value != needed:
            raise ConfigError(f"{where}.{field}", f"is {value!r:.40}; AutoRound {data_type} needs {needed!r}")
    raw = dict(_INC_FP8_FIELDS) if fp8 else dict(_INC_MXFP8_FIELDS) if bits == 8 else {}
    if isinstance(group, tuple):
        raw["act_group_size"] = group[0]
    for field, needed in raw.items():
        if block.get(field, needed) != needed:
            raise ConfigError(
                f"{where}.{field}", f"is {block[field]!r:.40}; AutoRound {data_type} needs {needed!r}"
            )


def _mxfp4(block: dict[str, Any], where: str) -> WeightFormat:
    """``Mxfp4Config`` / ``GptOssMxfp4Config`` (mxfp4.py): the routed experts in uint8-packed FP4 with one
    uint8 (e8m0) scale per 32; every linear layer stays unquantized (the ignore list only repeats that)."""
    _names(block, ("modules_to_not_convert",), where)  # validated; vLLM ignores it (from_config -> cls())
    return WeightFormat(
        method="mxfp4",
        label="MXFP4 experts (4.25 bits), rest in model dtype",
        compute_format="fp4",
        weight_only=True,  # gpt-oss backends run MXFP4 x bf16 (TRTLLM_MXFP4_BF16 first, Triton, Marlin)
        scheme=_MXFP4,
        default_kinds=frozenset({"experts"}),
    )


def _mxfp8(block: dict[str, Any], where: str) -> WeightFormat:
    """``quant_method: mxfp8`` (MiniMax style): ``ModelOptMxFp8Config`` with ``ignored_layers``."""
    ignored = _names(block, ("ignored_layers",), where)
    # vLLM resolves kv_cache_dtype auto from quant_method modelopt* only (get_kv_cache_quant_algo_string)
    return _modelopt_format("MXFP8", ignored, 16, None, "mxfp8")


def _modelopt(block: dict[str, Any], where: str) -> WeightFormat:
    """``ModelOptQuantConfigBase.from_config`` (modelopt.py): hf_quant_config.json's ``quantization``
    (quant_algo, kv_cache_quant_algo, group_size, exclude_modules) or config.json's flat form (quant_algo,
    ignore, group_size, kv_cache_scheme)."""
    inner = block.get("quantization")
    if inner is not None:
        if not isinstance(inner, Mapping):
            raise ConfigError(f"{where}.quantization", f"is {inner!r:.40}; expected an object")
        scope, scope_where, ignore_key = inner, f"{where}.quantization", "exclude_modules"
    else:
        scope, scope_where, ignore_key = block, where, "ignore"
    algo = scope.get("quant_algo")
    if not isinstance(algo, str) or algo.upper() not in _ALGO_FIELDS:
        raise ConfigError(
            f"{scope_where}.quant_algo", f"is {algo!r:.40}; expected one of {', '.join(_ALGO_FIELDS)}"
        )
    algo = algo.upper()
    if inner is not None:  # the legacy block: vLLM's NVFP4 and MXFP8 configs insist on these keys
        required = (
            ("group_size", "kv_cache_quant_algo", "exclude_modules")
            if "NVFP4" in algo
            else ("kv_cache_quant_algo", "exclude_modules")
            if "MXFP8" in algo
            else ()
        )
        missing = [key for key in required if key not in inner]
        if missing:
            raise ConfigError(
                f"{scope_where}.{missing[0]}",
                f"is missing; vLLM 0.32 requires {', '.join(required)} in a ModelOpt {algo} quantization "
                "block (null where there is none)",
            )
    groups = scope.get("config_groups")
    # ModelOptNvFp4Config: config groups that all leave out input_activations make it weight-only (W4A16)
    if (
        algo == "NVFP4"
        and isinstance(groups, Mapping)
        and groups
        and all(isinstance(g, Mapping) and g.get("input_activations") is None for g in groups.values())
    ):
        algo = "W4A16_NVFP4"
    group = _int(scope, ("group_size",), scope_where, default=16)
    if group <= 0:
        raise ConfigError(f"{scope_where}.group_size", f"is {group}; expected a positive integer")
    excluded = _names(scope, (ignore_key,), scope_where)
    return _modelopt_format(algo, excluded, group, _kv_cache_dtype(block, where), None)


def _modelopt_format(
    algo: str, excluded: tuple[str, ...], group: int, kv_cache_dtype: str | None, method: str | None
) -> WeightFormat:
    schemes: dict[str, tuple[str, str, Scheme, str]] = {
        "FP8": ("modelopt_fp8", "ModelOpt fp8 per-tensor", _FP8_PER_TENSOR, "fp8"),
        "FP8_PER_CHANNEL_PER_TOKEN": ("modelopt_fp8", "ModelOpt fp8 per-channel", _FP8_PER_ROW, "fp8"),
        "FP8_PB_WO": (
            "modelopt_fp8",
            "ModelOpt fp8 128x128 blocks",
            _fp8_blocks(128, 128),
            "fp8",
        ),
        "NVFP4": ("modelopt_nvfp4", f"NVFP4 (4 bits + fp8 scale per {group})", _nvfp4(group), "fp4"),
        "W4A16_NVFP4": ("modelopt_nvfp4", f"NVFP4 weight-only (fp8 scale per {group})", _nvfp4(group), "fp4"),
        "MXFP8": ("modelopt_mxfp8", "MXFP8 (8 bits + e8m0 scale per 32)", _MXFP8, "mxfp8"),
    }
    name, label, scheme, compute = schemes[algo]
    # ModelOpt quantizes the lm_head unless excluded, and hard-codes vision_tower / vision_model /
    # vit_large_projector as unquantized (older exports); other vision towers follow exclude_modules.
    rules = [Rule(patterns=excluded)] if excluded else []
    rules.append(Rule(patterns=("vision_tower", "vision_model", "vit_large_projector")))
    return WeightFormat(
        method=method or name,
        label=label,
        weight_block_size=(128, 128) if algo == "FP8_PB_WO" else None,
        compute_format=compute,
        weight_only=algo == "W4A16_NVFP4",
        kv_cache_dtype=kv_cache_dtype,
        scheme=scheme,
        default_kinds=_LINEAR_AND_EXPERTS | {"lm_head"},
        rules=tuple(rules),
    )


#: ModelOpt MIXED_PRECISION: the per-layer algos vLLM 0.32's ``ModelOptMixedPrecisionConfig`` builds a method
#: for (``LINEAR_ALGOS`` and its routed-experts branch; the block-FP8 pair for experts only).
_MIXED_ALGOS = (
    "FP8",
    "FP8_PER_CHANNEL_PER_TOKEN",
    "FP8_PB_WO",
    "FP8_BLOCK_SCALES",
    "NVFP4",
    "W4A16_NVFP4",
    "MXFP8",
)


def _modelopt_mixed(block: dict[str, Any], where: str) -> WeightFormat:
    """``ModelOptMixedPrecisionConfig`` (modelopt.py): ``quantized_layers`` maps checkpoint module names to
    their own ``quant_algo``; a module it does not name (or ``ignore`` / ``exclude_modules`` names) stays in
    the model dtype. One NVFP4 group size serves every NVFP4 entry (the config's, else the first NVFP4
    entry's, else 16), one block size every block-FP8 entry (vLLM refuses two)."""
    inner = block.get("quantization")
    if inner is not None and not isinstance(inner, Mapping):
        raise ConfigError(f"{where}.quantization", f"is {inner!r:.40}; expected an object")
    scope, scope_where, ignore_key = (
        (inner, f"{where}.quantization", "exclude_modules") if inner is not None else (block, where, "ignore")
    )
    layers = scope.get("quantized_layers")
    field = f"{scope_where}.quantized_layers"
    if not isinstance(layers, Mapping) or not layers:
        raise ConfigError(
            field, f"is {layers!r:.40}; MIXED_PRECISION needs a non-empty object of module names"
        )
    algos: dict[str, list[str]] = {}
    for name, info in layers.items():
        algo = info.get("quant_algo") if isinstance(info, Mapping) else None
        if not isinstance(algo, str) or algo.upper() not in _MIXED_ALGOS:
            raise ConfigError(
                f"{field}.{name}",
                f"has quant_algo {algo!r:.40}; kvright reads {', '.join(_MIXED_ALGOS)} in a MIXED_PRECISION "
                "checkpoint",
            )
        algos.setdefault(algo.upper(), []).append(name)
    nvfp4 = [i for i in layers.values() if str(i.get("quant_algo")).upper() in ("NVFP4", "W4A16_NVFP4")]
    group = _positive(
        scope.get("group_size") or (nvfp4[0].get("group_size", 16) if nvfp4 else 16), f"{field} group_size"
    )  # the config's, else the first NVFP4 entry's
    block_fp8 = [layers[n] for a in ("FP8_PB_WO", "FP8_BLOCK_SCALES") for n in algos.get(a, ())]
    blocks = {_positive(info.get("group_size", 128), f"{field} group_size") for info in block_fp8}
    if len(blocks) > 1:
        raise ConfigError(
            field, f"gives block-FP8 layers the block sizes {sorted(blocks)}; vLLM 0.32 takes one"
        )
    side = next(iter(blocks), 128)
    schemes = {
        "FP8": _FP8_PER_TENSOR,
        "FP8_PER_CHANNEL_PER_TOKEN": _FP8_PER_ROW,
        "FP8_PB_WO": _fp8_blocks(side, side),
        "FP8_BLOCK_SCALES": _fp8_blocks(side, side),
        "NVFP4": _nvfp4(group),
        "W4A16_NVFP4": _nvfp4(group),
        "MXFP8": _MXFP8,
    }
    excluded = _names(scope, (ignore_key,), scope_where)
    rules = [Rule(patterns=excluded)] if excluded else []
    rules += [Rule(patterns=tuple(names), scheme=schemes[algo]) for algo, names in algos.items()]
    # The kernels the GPU must run natively: W4A4 NVFP4 anywhere needs FP4, else MXFP8, else FP8; only
    # W4A16 entries compute in bf16 (the Marlin paths vLLM takes for every format below its native GPUs).
    present = set(algos)
    if "NVFP4" in present:
        compute = "fp4"
    elif "MXFP8" in present:
        compute = "mxfp8"
    elif present - {"W4A16_NVFP4"}:
        compute = "fp8"
    else:
        compute = "fp4"
    label = ", ".join(f"{len(names)} modules {algo}" for algo, names in sorted(algos.items()))
    return WeightFormat(
        method="modelopt_mixed",
        label=f"ModelOpt mixed precision ({label})",
        weight_block_size=(side, side) if blocks else None,
        compute_format=compute,
        weight_only=present == {"W4A16_NVFP4"},
        kv_cache_dtype=_kv_cache_dtype(block, where),
        rules=tuple(rules),
    )


def _nvfp4(group: int) -> Scheme:
    # uint8 holding two FP4 values; float8_e4m3fn block scales; one fp32 global scale per tensor (~0)
    return Scheme(weight_bits=4, scale_bytes=1, weights_per_scale=group)


def _kv_cache_dtype(block: Mapping[str, Any], where: str) -> str | None:
    """vLLM's ``get_kv_cache_quant_algo_string`` (utils/torch_utils.py) for ModelOpt-style configs."""
    inner = block.get("quantization")
    scope = inner if isinstance(inner, Mapping) else block
    algo = scope.get("kv_cache_scheme") or block.get("kv_cache_scheme") or scope.get("kv_cache_quant_algo")
    if algo is None:
        algo = block.get("kv_cache_quant_algo")
    if algo is None:
        return None
    if isinstance(algo, Mapping):
        if algo.get("num_bits") == 8 and algo.get("type") == "float" and algo.get("dynamic") is False:
            return "fp8_e4m3"
        if algo.get("num_bits") == 4 and algo.get("type") == "float":
            return "nvfp4"
        return None
    if isinstance(algo, str):
        return {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}.get(algo.lower())
    raise ConfigError(f"{where}.kv_cache_quant_algo", f"is {algo!r:.40}; expected FP8, NVFP4 or null")


# ----- compressed-tensors -----------------------------------------------------------------------------------
_CT_STRATEGIES = ("tensor", "channel", "group", "block", "tensor_group")


def _compressed_tensors(block: dict[str, Any], where: str) -> WeightFormat:
    """``CompressedTensorsConfig`` (compressed_tensors.py): config_groups of targets (layer names, ``re:``
    regexes, or module classes such as ``Linear``) with weight QuantizationArgs; ``ignore`` first, then name
    targets, then class targets; groups that only target ``*Attention`` are KV-cache groups, skipped."""
    groups = block.get("config_groups") or {}
    if not isinstance(groups, Mapping):
        raise ConfigError(f"{where}.config_groups", f"is {groups!r:.40}; expected an object of groups")
    sparsity = block.get("sparsity_config")
    if isinstance(sparsity, Mapping) and sparsity.get("targets"):
        raise ConfigError(
            f"{where}.sparsity_config",
            "targets modules; vLLM 0.32 removed compressed-tensors sparsity support",
        )
    global_format = block.get("format")
    ignored = _names(block, ("ignore",), where)
    named: list[Rule] = []
    by_class: list[Rule] = []
    labels: list[str] = []
    compute: list[tuple[str, bool]] = []
    for name, group in groups.items():
        gw = f"{where}.config_groups.{name}"
        if not isinstance(group, Mapping):
            raise ConfigError(gw, f"is {group!r:.40}; expected an object with targets and weights")
        targets = _names(group, ("targets",), gw)
        if not targets:
            raise ConfigError(
                f"{gw}.targets", "is missing or empty; expected a list of layer names or classes"
            )
        if len(targets) == 1 and targets[0].endswith("Attention"):
            continue  # attention (KV) quantization only: no weights
        weights = group.get("weights")
        if not isinstance(weights, Mapping):
            raise ConfigError(f"{gw}.weights", f"is {weights!r:.40}; expected the weights' quantization args")
        inputs = group.get("input_activations")
        scheme, label, fmt = _ct_scheme(
            weights, inputs, f"{gw}.weights", group.get("format") or global_format
        )
        labels.append(label)
        compute.append((fmt, inputs is None))
        kinds: set[ModuleKind] = set()
        patterns: list[str] = []
        for target in targets:
            if target.startswith("re:") or "." in target or not target[:1].isupper():
                patterns.append(target)
            elif "Linear" in target:
                kinds |= _LINEAR_AND_EXPERTS  # vLLM maps a Linear target onto RoutedExperts too
            elif "Embedding" in target:
                kinds.add("embedding")
            elif "Expert" in target or "MoE" in target:
                kinds.add("experts")
            else:
                patterns.append(target)  # an unknown class name: matches modules of that name, if any
        if patterns:
            named.append(Rule(patterns=tuple(patterns), scheme=scheme))
        if kinds:
            by_class.append(Rule(kinds=frozenset(kinds), scheme=scheme))
    rules = ([Rule(patterns=ignored)] if ignored else []) + named + by_class
    main = compute[0] if compute else (None, False)
    kv = block.get("kv_cache_scheme")
    _check_ct_kv_scheme(kv, f"{where}.kv_cache_scheme")
    return WeightFormat(
        method="compressed-tensors",
        label="compressed-tensors " + (" + ".join(dict.fromkeys(labels)) if labels else "(no weight groups)"),
        compute_format=main[0],
        weight_only=main[1],
        kv_cache_dtype="fp8" if isinstance(kv, Mapping) else None,  # attention.py: a kv_cache_scheme -> fp8
        rules=tuple(rules),
        weight_block_size=_ct_block(groups),
    )


#: The KV-cache scheme strategies vLLM's compressed-tensors reader takes (per tensor, per attention head).
_CT_KV_STRATEGIES = ("tensor", "attn_head")


def _check_ct_kv_scheme(kv: Any, where: str) -> None:
    """vLLM's ``CompressedTensorsConfig.validate_kv_cache_scheme``, which refuses the engine's start:
    8-bit floats, per tensor or per attention head, and symmetric (an llm-compressor file that leaves
    ``symmetric`` out is refused too)."""
    if kv is None:
        return
    if not isinstance(kv, Mapping):
        raise ConfigError(where, f"is {kv!r:.40}; expected an object (num_bits, type, strategy, symmetric)")
    if kv.get("type") != "float" or kv.get("num_bits") != 8:
        raise ConfigError(
            where,
            f"is num_bits {kv.get('num_bits')!r}, type {kv.get('type')!r}; vLLM 0.32 quantizes a KV cache "
            "only to 8-bit floats (num_bits 8, type float)",
        )
    if kv.get("strategy") not in _CT_KV_STRATEGIES:
        raise ConfigError(
            where,
            f"has strategy {kv.get('strategy')!r}; vLLM 0.32 accepts {' or '.join(_CT_KV_STRATEGIES)} for "
            "a KV cache",
        )
    if not kv.get("symmetric"):
        raise ConfigError(
            where,
            f"has symmetric {kv.get('symmetric')!r}; vLLM 0.32 accepts only symmetric KV-cache scales "
            "(symmetric: true)",
        )


def _ct_block(groups: Mapping[str, Any]) -> tuple[int, int] | None:
    for group in groups.values():
        weights = group.get("weights") if isinstance(group, Mapping) else None
        if isinstance(weights, Mapping) and weights.get("strategy") == "block":
            shape = weights.get("block_structure")
            if isinstance(shape, list) and len(shape) == 2:
                return (int(shape[0]), int(shape[1]))
    return None


def _ct_scheme(weights: Mapping[str, Any], inputs: Any, where: str, fmt: Any) -> tuple[Scheme, str, str]:
    """(storage, label, compute format) of one config group's weight QuantizationArgs."""
    bits = _int(weights, ("num_bits",), where, allowed=(2, 3, 4, 5, 6, 7, 8))
    kind = weights.get("type", "int")
    if kind not in ("int", "float"):
        raise ConfigError(f"{where}.type", f"is {kind!r:.40}; expected int or float")
    strategy = weights.get("strategy", "tensor")
    if strategy not in _CT_STRATEGIES:
        raise ConfigError(
            f"{where}.strategy", f"is {strategy!r:.40}; expected one of {', '.join(_CT_STRATEGIES)}"
        )
    if weights.get("actorder") in ("group", "dynamic"):
        raise ConfigError(
            f"{where}.actorder",
            "is group/dynamic; vLLM 0.32 no longer serves compressed-tensors activation ordering",
        )
    symmetric = weights.get("symmetric", True) is not False
    act_bits = inputs.get("num_bits") if isinstance(inputs, Mapping) else None
    if strategy in ("group", "tensor_group"):
        group = _int(weights, ("group_size",), where)
        if group <= 0:
            raise ConfigError(f"{where}.group_size", f"is {group}; expected a positive integer")
        per_scale = group
    elif strategy == "block":
        shape = weights.get("block_structure")
        if (
            not isinstance(shape, list)
            or len(shape) != 2
            or not all(isinstance(v, int) and v > 0 for v in shape)
        ):
            raise ConfigError(
                f"{where}.block_structure", f"is {shape!r:.40}; expected [n, k], e.g. [128, 128]"
            )
        per_scale = shape[0] * shape[1]
    elif strategy == "channel":
        per_scale = PER_ROW
    else:
        per_scale = PER_TENSOR
    a = f"a{act_bits}" if act_bits else "a16"
    if kind == "float" and bits == 4:
        if per_scale == 32:  # MXFP4: e8m0 byte per 32
            return Scheme(weight_bits=4, scale_bytes=1, weights_per_scale=32), f"mxfp4 w4{a}", "fp4"
        # NVFP4 (tensor_group 16): fp8 scale per group + fp32 global
        scheme = Scheme(weight_bits=4, scale_bytes=1, weights_per_scale=per_scale)
        return scheme, f"nvfp4 w4{a} (group {per_scale})", "fp4"
    if kind == "float":
        if per_scale == 32:
            return _MXFP8, f"mxfp8 w8{a}", "mxfp8"
        how = {PER_TENSOR: "per-tensor", PER_ROW: "per-channel"}.get(per_scale, f"{per_scale} per scale")
        block: tuple[int, int] | None = None
        if strategy == "block":
            block = (weights["block_structure"][0], weights["block_structure"][1])
            how = f"{block[0]}x{block[1]} blocks"
        scheme = Scheme(weight_bits=bits, scale_bytes=4, weights_per_scale=per_scale, block=block)
        return scheme, f"fp8 w8{a} {how}", "fp8"
    # integers: weight-only (wNa16, pack-quantized) keeps model-dtype scales; w8a8 int8 keeps fp32 scales
    weight_only = act_bits is None
    scheme = Scheme(
        weight_bits=bits,
        scale_bytes=None if weight_only else 4,
        weights_per_scale=per_scale,
        zero_point_bits=0 if symmetric else bits,
    )
    how = {PER_TENSOR: "per-tensor", PER_ROW: "per-channel"}.get(per_scale, f"group {per_scale}")
    label = f"int{bits} w{bits}{a} {how}" + ("" if symmetric else ", zero points")
    compute = "int4" if weight_only and bits <= 4 else "int8"
    del fmt  # pack-quantized / int-quantized / float-quantized only change the on-disk packing
    return scheme, label, compute


def _quark(block: dict[str, Any], where: str) -> WeightFormat:
    """AMD's Quark (``QuarkConfig``, quantization/quark/quark.py): per module, an ``exclude`` entry (a full
    name or an ``re:`` regex; a glob there matches nothing) leaves it in the model dtype; else the first
    ``layer_quant_config`` key that matches it (a glob over the full name, or the full name itself) gives its
    spec; else ``global_quant_config``. ``layer_type_quant_config`` must be there (vLLM reads it, though its
    string keys never match a module class) and so must ``export``. The embedding and the LM head are never
    quantized. ``--kv-cache-dtype auto`` stays the model dtype: an ``export.kv_cache_group`` (FP8 K and V
    outputs) only says the checkpoint carries scales for ``--kv-cache-dtype fp8``."""
    export = block.get("export")
    if not isinstance(export, Mapping):
        raise ConfigError(
            f"{where}.export", f"is {export!r:.40}; vLLM 0.32's QuarkConfig requires the object"
        )
    if not isinstance(block.get("layer_type_quant_config"), Mapping):
        raise ConfigError(
            f"{where}.layer_type_quant_config",
            f"is {block.get('layer_type_quant_config')!r:.40}; vLLM 0.32's QuarkConfig requires an object "
            "(an empty one is fine)",
        )
    layers = block.get("layer_quant_config") or {}
    if not isinstance(layers, Mapping):
        raise ConfigError(f"{where}.layer_quant_config", f"is {layers!r:.40}; expected an object of specs")
    kv_group = _names(export, ("kv_cache_group",), f"{where}.export")
    for pattern in kv_group:  # vLLM takes the KV scales' spec from these entries' output_tensors
        entry = layers.get(pattern)
        output = entry.get("output_tensors") if isinstance(entry, Mapping) else None
        if not isinstance(output, Mapping) or (output.get("dtype"), output.get("qscheme")) != (
            "fp8_e4m3",
            "per_tensor",
        ):
            raise ConfigError(
                f"{where}.export.kv_cache_group",
                f"names {pattern!r:.40} without a layer_quant_config entry whose output_tensors are fp8_e4m3 "
                "per_tensor; vLLM 0.32 quantizes a Quark KV cache to that alone",
            )
    # vLLM clears output_tensors on the KV entries and the q projections before it refuses quantized outputs.
    outputs_cleared = set(kv_group) | {key for key in layers if key.endswith("q_proj")}
    rules: list[Rule] = []
    # A glob in the list matches nothing (vLLM matches full names and re: there); a name under a layer's
    # routed experts leaves all of that layer's experts unquantized (one FusedMoE module holds them).
    excluded = tuple(
        n if n.startswith("re:") or ".experts." not in n else n[: n.index(".experts.") + len(".experts")]
        for n in _names(block, ("exclude",), where)
        if n.startswith("re:") or "*" not in n
    )
    if excluded:
        rules.append(Rule(patterns=excluded))
    scheme, label, compute = _quark_scheme(
        block.get("global_quant_config"), f"{where}.global_quant_config", False
    )
    labels = [label] if scheme is not None else []
    computes = [compute] if scheme is not None else []
    for key, spec in layers.items():
        named, label, named_compute = _quark_scheme(
            spec, f"{where}.layer_quant_config.{key}", key in outputs_cleared
        )
        pattern = "re:" + fnmatch.translate(key) if "*" in key else key
        rules.append(Rule(patterns=(pattern,), scheme=named))
        if named is not None:
            labels.append(label)
            computes.append(named_compute)
    compute = computes[0] if computes else (None, False)  # the global spec's, else the first entry's
    return WeightFormat(
        method="quark",
        label="Quark " + (" + ".join(dict.fromkeys(labels)) if labels else "(nothing quantized)"),
        compute_format=compute[0],
        weight_only=compute[1],
        scheme=scheme,
        default_kinds=_DECODER_LINEAR_AND_EXPERTS if scheme is not None else frozenset(),
        rules=tuple(rules),
        weight_block_size=scheme.block if scheme is not None else None,
    )


#: Quark's OCP MX weight dtypes (``per_group`` 32 with e8m0 scales): the scheme, its name and what it computes
#: in with MX activations.
_QUARK_MX: dict[str, tuple[Scheme, str, str]] = {
    "fp4": (_MXFP4, "MXFP4", "fp4"),
    "fp8_e4m3": (_MXFP8, "MXFP8", "mxfp8"),
}


def _quark_scheme(
    spec: Any, where: str, outputs_cleared: bool
) -> tuple[Scheme | None, str, tuple[str | None, bool]]:
    """One Quark spec (``weight``, ``input_tensors``, ``output_tensors``, ``bias``) as vLLM 0.32's
    ``QuarkConfig._get_scheme_from_config`` matches it, in its order: FP8 W8A8 (per tensor, per channel, or
    128 x 128 blocks), INT8 W8A8, INT4 W4A16 per group, NVFP4 (a two-entry list), then OCP MX (MXFP4 and
    MXFP8 weights, 32 a scale). Returns (scheme, label, (compute format, weight only)); a null spec: no
    quantization."""
    if spec is None:
        return None, "", (None, False)
    if not isinstance(spec, Mapping):
        raise ConfigError(where, f"is {spec!r:.40}; expected an object with weight and input_tensors")
    weight, inputs = spec.get("weight"), spec.get("input_tensors")
    if spec.get("bias") is not None or (spec.get("output_tensors") is not None and not outputs_cleared):
        raise ConfigError(where, "quantizes output_tensors or bias, which vLLM 0.32 does not load from Quark")
    if weight is None:
        return None, "", (None, False)
    if isinstance(weight, list):
        first = weight[0] if weight and isinstance(weight[0], Mapping) else {}
        if len(weight) == 2 and first.get("dtype") == "fp4" and first.get("group_size") == 16:
            return _nvfp4(16), "NVFP4 (4 bits + fp8 scale per 16)", ("fp4", False)
        raise ConfigError(
            f"{where}.weight",
            "is a list that is not NVFP4's; vLLM 0.32 reads no other (fp8 + int4 W4A8 runs on ROCm alone)",
        )
    if not isinstance(weight, Mapping):
        raise ConfigError(f"{where}.weight", f"is {weight!r:.40}; expected a quantization spec object")
    dtype, qscheme = weight.get("dtype"), weight.get("qscheme")
    in_dtype = inputs.get("dtype") if isinstance(inputs, Mapping) else None
    group = weight.get("group_size")
    if dtype == "fp8_e4m3" and qscheme in ("per_tensor", "per_channel", "per_block"):
        if in_dtype != "fp8_e4m3":
            raise ConfigError(
                f"{where}.input_tensors",
                f"is {inputs!r:.40}; vLLM 0.32 loads Quark FP8 weights only with FP8 activations (W8A8)",
            )
        if qscheme == "per_block":
            if weight.get("block_size") not in ([128, 128], (128, 128)):
                raise ConfigError(
                    f"{where}.weight.block_size", f"is {weight.get('block_size')!r:.40}; expected [128, 128]"
                )
            return _fp8_blocks(128, 128), "fp8 128x128 blocks", ("fp8", False)
        per_channel = qscheme == "per_channel"
        return (
            (_FP8_PER_ROW if per_channel else _FP8_PER_TENSOR),
            f"fp8 {qscheme.replace('_', ' ')}",
            ("fp8", False),
        )
    if dtype == "int8" and qscheme in ("per_tensor", "per_channel") and in_dtype == "int8":
        per = PER_ROW if qscheme == "per_channel" else PER_TENSOR
        return (
            Scheme(weight_bits=8, scale_bytes=4, weights_per_scale=per, zero_point_bits=8),
            "int8 W8A8",
            ("int8", False),
        )
    if dtype in ("int4", "uint4") and qscheme == "per_group" and inputs is None:
        g = _positive(group, f"{where}.weight.group_size")
        # model-dtype scales and int32-packed zero points (even when symmetric), one of each a group
        return (
            Scheme(weight_bits=4, scale_bytes=None, weights_per_scale=g, zero_point_bits=4),
            f"int4 W4A16 group {g}",
            ("int4", True),
        )
    if dtype in _QUARK_MX and qscheme == "per_group" and group == 32:
        scheme, name, native = _QUARK_MX[dtype]
        if inputs is None:
            return scheme, f"{name} weight-only", (native, True)
        if in_dtype == dtype:
            return scheme, name, (native, False)
        if in_dtype == "fp8_e4m3":  # fp8 activations per tensor, or MXFP8 ones
            return scheme, f"{name} with fp8 activations", ("fp8", False)
    raise ConfigError(
        f"{where}.weight",
        f"is {dtype!r:.20} {qscheme!r:.20} with input_tensors {in_dtype!r:.20}; kvright reads Quark's FP8 "
        "(per tensor, per channel, 128x128 blocks), INT8 W8A8, INT4 W4A16 per group, NVFP4, MXFP4 and MXFP8",
    )


_READERS = {
    "quark": _quark,
    "fp8": _fp8,
    "fbgemm_fp8": _fbgemm_fp8,
    # vLLM 0.32 reads every spelling of a method with the one config class (get_quantization_config)
    "awq": _awq,
    "auto_awq": _awq,
    "awq_marlin": _awq,
    "gptq": _gptq,
    "auto_gptq": _gptq,
    "gptq_marlin": _gptq,
    "mxfp4": _mxfp4,
    "mxfp8": _mxfp8,
    "modelopt": _modelopt,
    "modelopt_fp4": _modelopt,
    "modelopt_mixed": _modelopt_mixed,
    "modelopt_mxfp8": _modelopt,
    "compressed-tensors": _compressed_tensors,
    "auto-round": _inc,  # INCConfig.override_quantization_method
    "inc": _inc,
}
