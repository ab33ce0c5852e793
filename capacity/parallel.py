"""Tensor-parallel rules exactly as vLLM applies them."""

from __future__ import annotations

from typing import Literal

from capacity.architecture import ATTENTION_MIXERS, VOCAB_PADDING_MULTIPLE, Architecture
from capacity.errors import CapacityError
from capacity.quantization import ModuleKind

__all__ = [
    "VOCAB_PADDING_MULTIPLE",
    "EncoderTPMode",
    "encoder_tp_mode",
    "fp8_block_error",
    "kv_heads_per_gpu",
    "padded_vocab_size",
    "tensor_parallel_error",
    "tensor_parallel_reason",
    "valid_tensor_parallel_sizes",
]


def kv_heads_per_gpu(arch: Architecture, tensor_parallel_size: int) -> int:
    """KV heads each TP rank caches: ``max(1, kv_heads // tp)``.

    When ``tp > kv_heads`` every rank still holds one whole head, so each head is replicated on
    ``tp // kv_heads`` ranks and the cluster-wide KV cache grows by that factor. MLA caches one latent
    (``num_kv_heads == 1``) that every rank replicates (vLLM ``get_num_kv_heads`` returns 1 for MLA).
    """
    return max(1, arch.num_kv_heads // tensor_parallel_size)


def padded_vocab_size(arch: Architecture) -> int:
    """The vocabulary rounded up to ``VOCAB_PADDING_MULTIPLE``, as vLLM sizes its embedding and LM head
    (:attr:`Architecture.vocab_rows`); its rows are split evenly across TP ranks, so it must divide by TP."""
    return arch.vocab_rows


EncoderTPMode = Literal["weights", "data"]
"""vLLM's ``--mm-encoder-tp-mode``: ``weights`` (its default) shards a vision tower across the TP ranks as
it does the text model; ``data`` keeps the whole tower on every rank, each encoding its share of the
images."""


def encoder_tp_mode(arch: Architecture, tensor_parallel_size: int) -> EncoderTPMode:
    """``data`` where ``tp`` does not divide a width of a tower vLLM would shard by TP
    (:attr:`Architecture.vision_tp_widths`), else ``weights``.

    Sharded, such a tower stops the engine at load (GLM-4.5V's 12 heads at TP 8: "12 is not divisible by
    8", vllm-project/vllm#24004; Qwen2.5-VL's 3,420-wide MLP at TP 8, an assertion in
    ``MergedColumnParallelLinear``). Under ``data`` its layers run with a TP size of 1
    (``is_vit_use_data_parallel``) and its weights are whole on every GPU. vLLM honours ``data`` only for a
    class with ``supports_encoder_tp_data`` (:data:`~capacity.architecture.ENCODER_TP_DATA`); only such a
    class has ``vision_tp_widths`` (another's are TP rules, ``tower_tp_widths``).
    """
    splits = any(width % tensor_parallel_size for _, width in arch.vision_tp_widths)
    return "data" if splits else "weights"


#: State layers split by channel alone (no heads), and what to call them in a refusal.
_CHANNEL_STATES = {"mamba1": "Mamba layers", "short_conv": "short-convolution layers"}


def tensor_parallel_error(arch: Architecture, tp: int, *, expert_parallel: bool = False) -> str | None:
    """Why vLLM would refuse ``tp`` for ``arch``, or None when it accepts it.

    vLLM checks ``num_attention_heads % tp == 0`` (``verify_with_parallel_config``); while building
    layers, ``QKVParallelLinear`` needs ``kv_heads % tp == 0`` when ``tp <= kv_heads`` else
    ``tp % kv_heads == 0`` (a rank never holds a fraction of a head; MLA has no KV-head split, its latent
    is replicated), the vocab-parallel embedding needs the padded vocabulary to divide by ``tp``, and FP8
    checkpoints with weight blocks need each rank's share of every quantized width to be whole blocks
    (:func:`fp8_block_error`; with ``expert_parallel`` the experts are not split by width). A vision tower
    width ``tp`` does not divide sets no limit in a class that can run the tower whole on every rank
    (:func:`encoder_tp_mode`); in another it is a split width (:func:`_undivided_width`).
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        return f"tensor parallel size {tp!r} is not a positive integer"
    reason = tensor_parallel_reason(arch, tp, expert_parallel=expert_parallel)
    if reason is None:
        return None
    accepted = valid_tensor_parallel_sizes(arch, max(tp, 8), expert_parallel=expert_parallel)
    return f"tensor parallel size {tp} {reason}; accepted: {', '.join(map(str, accepted)) or 'none'}"


def tensor_parallel_reason(arch: Architecture, tp: int, *, expert_parallel: bool = False) -> str | None:
    """The rule of :func:`tensor_parallel_error` that refuses a positive ``tp``, as a clause that follows
    "tensor parallel size N" ("does not divide the 28 attention heads of ..."), or None."""
    split_heads = sorted(h for h in arch.attention_head_counts if h % tp)
    if split_heads:
        # The model's own head count first; else the first layer kind with heads of its own (Step-3.5).
        heads = arch.num_attention_heads if arch.num_attention_heads in split_heads else split_heads[0]
        whose = "the" if heads == arch.num_attention_heads else "some layers'"
        reason = f"does not divide {whose} {heads} attention heads of {arch.name}"
    elif _splits_kv_heads_of(arch, tp):
        reason = f"splits the {arch.num_kv_heads} KV heads of {arch.name} into fractions"
    elif arch.attention_sink_tokens and arch.num_kv_heads < tp:
        # openpangu.py:562-568: sink attention gives every rank whole KV heads of its own, never a copy
        reason = (
            f"exceeds the {arch.num_kv_heads} KV heads of {arch.name}, which its sink attention never "
            f'replicates (vLLM 0.32: "Number of KV heads {arch.num_kv_heads} is less than TP size {tp}, KV '
            'heads replication is not support yet.")'
        )
    elif _short_conv_exceeds(arch, tp):
        reason = (
            f"exceeds the {min(_kv_head_counts(arch))} KV heads of some layers of {arch.name}: vLLM's "
            "Inkling caches each layer's short-convolution inputs by whole KV heads, at most one rank a head"
        )
    elif arch.o_groups % tp:
        # DeepSeek-V4's grouped output projection: each rank runs o_groups // tp groups (no check; 0 crashes)
        reason = f"does not divide the {arch.o_groups} output-projection groups of {arch.name} (o_groups)"
    elif _flash_mla_heads_exceeded(arch, tp):
        reason = (
            f"leaves {arch.num_attention_heads // tp} query heads of {arch.name} per GPU; vLLM's "
            f"DeepSeek-V4.1 FlashMLA decode kernel takes at most {FLASH_MLA_MAX_HEADS}"
        )
    elif _empty_engram_shard(arch, tp):
        reason = (
            f"leaves a GPU without any of the {arch.engram_heads} Engram hash heads of {arch.name} (vLLM "
            f"splits them {-(-arch.engram_heads // tp)} a rank and asserts every rank has some)"
        )
    elif _splits_norm_groups(arch, tp):
        groups = arch.state.norm_groups if arch.state is not None else 0
        reason = (
            f"does not divide the {groups} output-norm groups of {arch.name}'s Lightning attention "
            "(group_norm_size; vLLM asserts a TP degree divides them and is at most them)"
        )
    elif arch.state is not None and arch.state.kind in _CHANNEL_STATES and arch.state.conv_channels % tp:
        channels, kind = arch.state.conv_channels, _CHANNEL_STATES[arch.state.kind]
        reason = f"does not divide the {channels} inner channels of {arch.name}'s {kind}"
    elif (keys := _delta_net_key_width(arch)) % tp:
        reason = (
            f"does not divide the {keys}-wide keys of {arch.name}'s Gated DeltaNet layers (their fused input "
            "projection splits them by TP; vLLM asserts it)"
        )
    elif arch.state is not None and (arch.state.heads % tp or arch.state.conv_channels % tp):
        reason = (
            f"does not divide the {arch.state.heads} {arch.state.kind} state heads of {arch.name} "
            f"({arch.state.conv_channels} conv channels)"
        )
    elif (mamba2 := _mamba2_groups_reason(arch, tp)) is not None:
        reason = mamba2
    elif padded_vocab_size(arch) % tp:
        reason = (
            f"does not divide the {padded_vocab_size(arch)}-row padded vocabulary of {arch.name} "
            f"(vocab {arch.vocab_size} rounded up to a multiple of {VOCAB_PADDING_MULTIPLE})"
        )
    elif (split := _undivided_width(arch, tp)) is not None:
        reason = f"does not divide the {split} (vLLM asserts it does)"
    elif arch.experts_bound_tp and tp > arch.num_experts:
        reason = (
            f"exceeds the {arch.num_experts} routed experts of {arch.name} (vLLM's MoE layer of "
            f"{arch.architecture or 'its class'} refuses a TP degree above them)"
        )
    elif (width := _split_expert_width(arch, tp, expert_parallel=expert_parallel)) is not None:
        reason = (
            f"does not divide the {width}-wide routed experts of {arch.name} (vLLM's "
            "FusedMoEConfig asserts it does; with expert parallelism each expert is whole on one GPU)"
        )
    else:
        return fp8_block_error(arch, tp, expert_parallel=expert_parallel) or group_error(arch, tp)
    return reason


def _split_expert_width(arch: Architecture, tp: int, *, expert_parallel: bool) -> int | None:
    """The routed experts' width ``tp`` splits unevenly, or None: vLLM 0.32's ``FusedMoEConfig`` asserts
    ``intermediate_size % tp == 0`` (its MoE TP degree: 1 with expert parallelism). The width is the one the
    layer is built with (Kimi-Linear's padded to its minimum a rank; a NemotronH-Puzzle layer's own, the
    first such)."""
    if expert_parallel or tp == 1:
        return None
    for layer in arch.layers:
        if layer.ffn != "moe":
            continue
        own = arch.expert_shape(layer).width
        width = round(own * arch.expert_padding(tp)) if layer.experts is None else own
        if width and width % tp:
            return width
    return None


def _delta_net_key_width(arch: Architecture) -> int:
    """The key heads' total width of a Gated DeltaNet layer (0 without one): its conv channels are the keys
    and queries, as wide, and the values."""
    s = arch.state
    if s is None or s.kind != "gated_deltanet" or not arch.mixer_counts["linear"]:
        return 0
    return (s.conv_channels - s.heads * s.head_dim) // 2


def _mamba2_groups_reason(arch: Architecture, tp: int) -> str | None:
    """Why vLLM's ``MambaMixer2`` cannot split a model's Mamba-2 groups ``tp`` ways, or None. It splits
    groups TP divides, replicates a single group to every rank, and asserts otherwise ("If tensor parallel
    world size does not divide num_groups, then num_groups must equal 1"); replicating one group, it then
    strips the weight loader off the conv bias, and a conv without a bias stops the load (``AttributeError``
    on ``None``)."""
    s = arch.state
    if s is None or s.kind != "mamba2" or not arch.mixer_counts["mamba"] or s.groups % tp == 0:
        return None
    if s.groups != 1:
        return (
            f"does not divide the {s.groups} Mamba-2 groups of {arch.name} (vLLM replicates one group to "
            "every rank but asserts a TP degree divides more)"
        )
    if not s.conv_bias:
        return (
            f"replicates the one Mamba-2 group of {arch.name}, whose convolution has no bias: vLLM 0.32's "
            "MambaMixer2 then fails to load it (use_conv_bias false works at TP 1 only)"
        )
    return None


def _splits_norm_groups(arch: Architecture, tp: int) -> bool:
    """Whether ``tp`` splits the Lightning attention layers' output norm groups (Ling 2.5's
    ``group_norm_size``, 1 where the file is silent: such a model runs at TP 1 alone)."""
    s = arch.state
    lightning = s is not None and s.kind == "lightning" and bool(arch.mixer_counts["linear"])
    return lightning and s is not None and s.norm_groups % tp > 0


def group_error(arch: Architecture, tp: int) -> str | None:
    """Why ``tp`` splits a quantization group of a checkpoint with integer weights in groups (GPTQ, AWQ,
    compressed-tensors and AutoRound W4A16 / W8A16: :meth:`WeightFormat.weight_group`) across two GPUs, or
    None. A row-parallel linear's input is split by TP, and each rank's share must be whole groups: vLLM's
    Marlin kernel refuses "in_features per partition N is not divisible by group_size" (a group straddling
    ranks "cannot be fixed by padding", ``MarlinLinearKernel.can_implement``), as AWQ's ``create_weights``
    and the Triton W4A16 kernel do; the kernels that do not ask (Hopper's Machete, Exllama) size each rank's
    scales by ``input_size_per_partition // group_size`` and would load them shifted. The row-parallel
    inputs held to it: each attention layer's output projection (its heads times their value width), and
    the down projection of a dense MLP and of a shared expert. Routed experts are not: vLLM's MoE method
    for them halves the group until it fits (``MoeWNA16Method``)."""
    if tp == 1:
        return None
    checks: dict[tuple[str, int], tuple[ModuleKind, int]] = {}  # (what, width) -> (module kind, first layer)
    for i, layer in enumerate(arch.layers):
        heads = arch.heads_of(layer)
        if heads:
            value = arch.v_head_dim if layer.mixer == "mla" and arch.v_head_dim else arch.v_head_dim_of(layer)
            checks.setdefault(("attention output projection's input", heads * value), ("attention", i))
        if layer.ffn == "dense" and layer.ffn_width:
            checks.setdefault(("dense MLP", layer.ffn_width), ("mlp", i))
        if layer.ffn == "moe" and arch.shared_expert_intermediate_size:
            shared = arch.shared_expert_intermediate_size
            checks.setdefault(("shared expert MLP", shared), ("shared_experts", i))
    for (what, width), (module, i) in checks.items():
        group = arch.weights.weight_group(module, layer=i)
        if group is None or group >= width or width % tp:
            continue
        if (width // tp) % group:
            return (
                f"leaves {width // tp} of the {width}-wide {what} per GPU, not a multiple of the "
                f"checkpoint's {group}-weight quantization groups (a group would straddle two GPUs; vLLM's "
                "Marlin kernel refuses it)"
            )
    return None


def fp8_block_error(arch: Architecture, tp: int, *, expert_parallel: bool = False) -> str | None:
    """Why vLLM's FP8 block-quantization checks refuse ``tp``, or None. Each module is held to the block of
    its own scheme (:meth:`WeightFormat.weight_block`), by the check of the method that loads it:

    - ``Fp8Config`` and compressed-tensors (``fp8_utils.validate_fp8_block_shape`` and ``_moe``), with a
      block ``[n, k]``: a fused-MoE layer's gate/up width per rank a multiple of ``n`` and (tp > 1) of
      ``k`` for the down projection's input; a single column-parallel linear's output per rank (tp > 1) a
      multiple of ``n``; a row-parallel linear's input per rank a multiple of ``k``. A merged linear (gate/up,
      q/k/v) is never refused: ``ColumnParallelLinear._maybe_allow_fp8_block_shape_mismatch`` skips the
      check for one whose parts are not all whole blocks, and the parts of any other are (MiMo-V2's
      192-wide K heads load in 1.5 blocks a head).
    - ModelOpt ``FP8_PB_WO`` linears (``modelopt.py`` ``KFp8Block128``): the input width per rank a multiple
      of 128; a partial output block is padded (``_Fp8PbWoPartialBlock``). Its routed experts are block-
      checked only in a MIXED_PRECISION checkpoint, which loads them with ``Fp8MoEMethod``; plain ModelOpt
      FP8 loads them with ``ModelOptFp8MoEMethod``, which checks no block.

    With expert parallelism the experts keep their whole width."""
    if arch.weights.weight_block_size is None:
        return None
    modelopt = arch.weights.method in ("modelopt_fp8", "modelopt_mixed")
    first_moe = next((i for i, layer in enumerate(arch.layers) if layer.ffn == "moe"), None)
    block = arch.weights.weight_block("experts", layer=first_moe) if first_moe is not None else None
    if block is not None and arch.weights.method != "modelopt_fp8":
        n, k = block
        width = arch.moe_intermediate_size if expert_parallel else arch.moe_intermediate_size // tp
        if width % n or (tp > 1 and not expert_parallel and width % k):
            return (
                f"leaves {width} of each expert's {arch.moe_intermediate_size}-wide MLP per GPU, not a "
                "multiple "
                f"of the checkpoint's {n}x{k} FP8 weight blocks (vLLM refuses to load it; expert parallelism "
                f"keeps experts whole)"
            )
    checks: list[tuple[str, str, int, int]] = []  # (module kind, what, width, layer)
    for i, layer in enumerate(arch.layers):
        if layer.ffn == "dense" and layer.ffn_width:
            checks.append(("mlp", "dense MLP", layer.ffn_width, i))
    if arch.shared_expert_intermediate_size and first_moe is not None:
        checks.append(
            ("shared_experts", "shared expert MLP", arch.shared_expert_intermediate_size, first_moe)
        )
    for module, what, width, i in checks:
        block = arch.weights.weight_block(module, layer=i)  # type: ignore[arg-type]
        if block is None:
            continue
        n, k = block
        per_rank = width // tp  # gate/up's output and down's input per rank
        if (per_rank % k) if modelopt else (tp > 1 and per_rank % k):
            return (
                f"leaves {per_rank} of the {width}-wide {what} per GPU, not a multiple of the checkpoint's "
                f"{n}x{k} FP8 weight blocks (vLLM refuses to load it)"
            )
    # (query heads, head width, value width, shares a cache) -> first layer of that shape
    shapes: dict[tuple[int, int, int, bool], int] = {}
    for i, layer in enumerate(arch.layers):
        if layer.mixer in ("full", "sliding", "chunked"):
            widths = (arch.head_dim_of(layer), arch.v_head_dim_of(layer))
            shapes.setdefault((arch.heads_of(layer), *widths, layer.kv_shared), i)
    for (heads, width, v_width, shared), i in shapes.items():
        block = arch.weights.weight_block("attention", layer=i)
        if block is None:
            continue
        n, k = block
        q = heads * width // tp  # q's output per rank
        o_in = heads * v_width // tp  # o_proj's input per rank
        # A KV-shared layer (Gemma 4) projects q alone, in a single column-parallel linear.
        q_alone = not modelopt and shared and tp > 1 and q % n
        if q_alone or (o_in % k if modelopt else tp > 1 and o_in % k):
            what = f"{q} query channels" if q_alone else f"{o_in} attention output channels"
            return (
                f"leaves {what} of the {width}-wide attention heads per GPU, not a multiple of the "
                f"checkpoint's {n}x{k} FP8 weight blocks (vLLM refuses to load it)"
            )
    return None


def valid_tensor_parallel_sizes(
    arch: Architecture, max_tp: int, *, expert_parallel: bool = False
) -> list[int]:
    """Every TP degree from 1 to ``max_tp`` that vLLM accepts for ``arch``, ascending (pure tensor
    parallelism unless ``expert_parallel``): those :func:`tensor_parallel_reason` finds no rule against, so
    the accepted list and a refusal's reason can never disagree."""
    if isinstance(max_tp, bool) or not isinstance(max_tp, int) or max_tp < 1:
        raise CapacityError(f"maximum tensor parallel size {max_tp!r} is not valid; expected an integer >= 1")
    # A valid TP divides the attention heads, so nothing above the head count needs checking (a model
    # without attention: its state's channels).
    top = arch.num_attention_heads if arch.num_attention_layers or arch.state is None else arch.state.heads
    return [
        tp
        for tp in range(1, min(max_tp, top) + 1)
        if tensor_parallel_reason(arch, tp, expert_parallel=expert_parallel) is None
    ]


def _splits_kv_heads(kv_heads: int, tp: int) -> bool:
    return bool(kv_heads % tp) if tp <= kv_heads else bool(tp % kv_heads)


def _kv_head_counts(arch: Architecture) -> set[int]:
    """The KV head counts of the attention layers (the model's where a layer states none of its own)."""
    census = arch.layer_census
    return {kv_heads or arch.num_kv_heads for mixer, kv_heads, _, _, _ in census if mixer in ATTENTION_MIXERS}


def _short_conv_exceeds(arch: Architecture, tp: int) -> bool:
    """Inkling's short-convolution cache (``InklingConvState``) asserts ``tp <= kv_heads`` in every layer."""
    return bool(arch.short_conv_kernel) and tp > min(_kv_head_counts(arch), default=tp)


def _splits_kv_heads_of(arch: Architecture, tp: int) -> bool:
    """Some attention layer's KV heads would split into fractions (MLA's latent never does)."""
    if arch.attention == "MLA" or not arch.num_attention_layers:
        return False
    return any(_splits_kv_heads(h, tp) for h in _kv_head_counts(arch))


def _undivided_width(arch: Architecture, tp: int) -> str | None:
    """A width vLLM splits by TP that ``tp`` does not divide, described with its model, or None.

    A dense MLP's (or the shared experts') width: vLLM splits its gate/up projection by
    ``MergedColumnParallelLinear``, which asserts ``width % tp == 0``, and its down projection by
    ``RowParallelLinear`` (``divide(input_size, tp)``, the same assertion); routed experts have a rule of
    their own (:func:`_split_expert_width`: none with expert parallelism). A tower's split layers
    (:attr:`Architecture.tower_tp_widths`: an audio tower's, or a vision tower's in a class that cannot run
    it whole per rank; an audio tower's fused QKV projection's K and V heads,
    :attr:`Architecture.tower_kv_heads`, split or replicated whole as the text model's are)."""
    widths = [("dense MLP", layer.ffn_width) for layer in arch.layers if layer.ffn == "dense"]
    # each MoE layer's shared experts (NemotronH-Puzzle's its own width a layer)
    shared = (arch.expert_shape(layer).shared_width for layer in arch.layers if layer.ffn == "moe")
    widths.extend(dict.fromkeys(("shared expert MLP", width) for width in shared if width))
    if arch.per_layer_input_size:  # Gemma 4's per_layer_model_projection, a ColumnParallelLinear
        widths.append(("per-layer input projection", arch.num_layers * arch.per_layer_input_size))
    if arch.block_adapter_rank:  # Zamba2's adapters: ColumnParallelLinear down to the rank
        widths.append(("shared-block adapter rank", arch.block_adapter_rank))
    dense = (f"{width}-wide {what} of {arch.name}" for what, width in widths if width and width % tp)
    split = next(dense, None)
    if split is None:
        towers = (what.format(width) for what, width in arch.tower_tp_widths if width % tp)
        split = next((f"{what} of {arch.name}" for what in towers), None)
    if split is None and arch.tower_kv_heads and _splits_kv_heads(arch.tower_kv_heads, tp):
        split = f"{arch.tower_kv_heads} encoder KV heads of {arch.name}'s audio tower into fractions"
    return split


#: Query heads a rank's DeepSeek-V4.1 FlashMLA kernel takes (it pads a rank's heads to 64 or 128).
FLASH_MLA_MAX_HEADS = 128


def _flash_mla_heads_exceeded(arch: Architecture, tp: int) -> bool:
    return arch.shared_compressed_caches and arch.num_attention_heads // tp > FLASH_MLA_MAX_HEADS


def _empty_engram_shard(arch: Architecture, tp: int) -> bool:
    """DeepSeek-V4.1's Engram splits its hash heads ``cdiv(heads, tp)`` a rank; the last must get some."""
    heads = arch.engram_heads
    return bool(heads) and (tp - 1) * -(-heads // tp) >= heads
