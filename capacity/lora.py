"""LoRA adapters: the GPU buffers vLLM 0.32 allocates for them, and their flags.

With ``--enable-lora`` vLLM wraps every supported layer and gives it stacked A and B buffers for
``--max-loras`` adapters at ``--max-lora-rank``, zero-filled at start-up, whatever adapters are loaded later
(``vllm/lora/layers/*.py``, ``create_lora_weights``). They are made inside ``load_model``'s
``DeviceMemoryProfiler`` (``v1/worker/gpu_model_runner.py``, ``load_lora_model``), so vLLM counts them
as weights and the KV cache is sized after them: they come out of the KV budget. Adapters beyond
``--max-loras`` wait in host memory (``--max-cpu-loras``) and cost no GPU memory.

Per layer, on one GPU, with ``r`` the rank, ``h`` the hidden size and ``tp`` the TP size, in elements of
the LoRA dtype (``lora_dtype`` ``auto`` = the model's dtype, ``LoRAConfig.verify_with_model_config``),
times ``max_loras``:

- a column-parallel layer (A whole, B split by its output): ``r x input + output/tp x r`` per slice; the
  merged ``qkv_proj`` has three slices (A three times; B ``heads/tp`` query plus twice ``max(1, kv/tp)``
  KV heads of ``head_dim``) and ``gate_up_proj`` two (``column_parallel_linear.py``); a family whose
  checkpoints store them fused (Phi-3) has one slice, A once;
- a row-parallel layer (A split by its input, B whole): ``r x input/tp + h x r`` (``o_proj``,
  ``down_proj``; ``row_parallel_linear.py``);
- a replicated layer (the MoE router, a shared-expert gate): ``r x h + output x r``;
- the routed experts of a MoE layer, on each GPU's local experts: ``r x (3 h + 3 I)`` per expert, ``I``
  the expert width per GPU (``moe_intermediate_size / tp``, whole with expert parallelism;
  ``layers/fused_moe.py``: w1 and w3 A and B, w2 A and B); ``r x (2 h + 3 I)`` for 3D expert weights
  (gpt-oss: ``FusedMoE3DWithLoRA`` keeps one w13 A);
- the input embedding (first pipeline stage), for architectures that declare it in
  ``embedding_modules``: ``vocab x r + h x r``, not split (``vocab_parallel_embedding.py``);
- the logits (last stage), for architectures that declare ``lm_head``: ``r x h + vocab x r``, not
  split (``logits_processor.py``; vLLM refuses LoRA there above a vocabulary of 258,048).

Not counted: the punica wrapper's index tensors (a few integers per batched token) and the CUDA graphs
captured for LoRA batches (inside the CUDA-graph reserve). MLA, Mamba and linear-attention layers are
refused rather than guessed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from capacity.architecture import DTYPE_BYTES, Architecture
from capacity.errors import CapacityError
from capacity.layout import Layout, Stage

__all__ = [
    "LORA_MAX_VOCAB",
    "MAX_LORA_RANKS",
    "NO_LORA",
    "Lora",
    "lora_bytes_per_gpu",
]

#: The ranks vLLM 0.32 accepts for ``--max-lora-rank`` (``vllm/config/lora.py``, ``MaxLoRARanks``).
MAX_LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)

#: Largest vocabulary ``LogitsProcessorWithLoRA.create_lora_weights`` accepts.
LORA_MAX_VOCAB = 258_048

#: Architectures whose vLLM 0.32 class lists ``embed_tokens`` (input) and ``lm_head`` (output) in
#: ``embedding_modules``, read from the model registry; the default (``SupportsLoRA``) is none, so Qwen2,
#: Gemma, DeepSeek, gpt-oss and MistralForCausalLM get no embedding or logits buffers.
_INPUT_AND_OUTPUT = frozenset(
    {
        "ApertusForCausalLM",
        "DeciLMForCausalLM",
        "Ernie4_5ForCausalLM",
        "Exaone4ForCausalLM",
        "ExaoneForCausalLM",
        "ExaoneMoEForCausalLM",
        "ExaoneMoeForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteForCausalLM",
        "GraniteMoeForCausalLM",
        "GraniteMoeHybridForCausalLM",
        "GraniteMoeSWAForCausalLM",
        "GraniteMoeSharedForCausalLM",
        "GraniteSWAForCausalLM",
        "HyperCLOVAXForCausalLM",
        "IQuestCoderForCausalLM",
        "InternLM3ForCausalLM",
        "JambaForCausalLM",
        "K2HorizonForCausalLM",
        "LLaMAForCausalLM",
        "Lfm2ForCausalLM",
        "Lfm2MoeForCausalLM",
        "Llama4ForCausalLM",
        "LlamaForCausalLM",
        "MiniCPM3ForCausalLM",
        "MiniCPMForCausalLM",
        "MixtralForCausalLM",
        "NemotronForCausalLM",
        "NemotronHForCausalLM",
        "NemotronHPuzzleForCausalLM",
        "Param2MoEForCausalLM",
        "Phi3ForCausalLM",
        "PhiMoEForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3MoeForCausalLM",
        "SolarForCausalLM",
        "TeleChat2ForCausalLM",
        "TeleChat3ForCausalLM",
        "TeleFLMForCausalLM",
    }
)
#: Classes vLLM 0.32 registers whose model has no ``SupportsLoRA`` in its CUDA build: vLLM's model loader
#: refuses ``--enable-lora`` for them ("does not support LoRA yet"), so the pods would never start. Every
#: registered class, not only those kvright reads by name: a wrapper is read through its text config, and
#: an unknown decoder as a standard one. tests/conformance/test_lora_flags.py holds the set to vLLM's
#: registry for every class it can inspect here.
NO_LORA: frozenset[str] = frozenset(
    {
        "AriaForConditionalGeneration",
        "BailingMoeV2_5ForCausalLM",
        "BailingMoeV3ForCausalLM",
        "BailingMoeV3VLForConditionalGeneration",
        "BeeForConditionalGeneration",
        "BloomForCausalLM",
        "Cohere2MoeForCausalLM",
        "Cohere2VisionForConditionalGeneration",
        "Cosmos3EdgeForConditionalGeneration",
        "DbrxForCausalLM",
        "DeepseekVLV2ForCausalLM",
        "DiffusionGemmaForBlockDiffusion",
        "FalconForCausalLM",
        "FalconMambaForCausalLM",
        "FireRedASR2ForConditionalGeneration",
        "FunAudioChatForConditionalGeneration",
        "GPT2LMHeadModel",
        "GPTJForCausalLM",
        "Gemma3nForCausalLM",
        "Gemma3nForConditionalGeneration",
        "HCXVisionV2ForCausalLM",
        "HfMoondream",
        "HrmTextForCausalLM",
        "IQuestLoopCoderForCausalLM",
        "KimiK25ForConditionalGeneration",
        "KimiK3ForConditionalGeneration",
        "KimiLinearForCausalLM",
        "KimiVLForConditionalGeneration",
        "LlavaOnevision2ForConditionalGeneration",
        "LlavaOnevisionForConditionalGeneration",
        "Mamba2ForCausalLM",
        "MambaForCausalLM",
        "MiMoV2FlashForCausalLM",
        "MiMoV2ForCausalLM",
        "MiMoV2OmniForCausalLM",
        "MiniMaxM3SparseForCausalLM",
        "MiniMaxM3SparseForConditionalGeneration",
        "Moondream3ForCausalLM",
        "MoonshotKimiaForCausalLM",
        "MossTranscribeDiarizeForConditionalGeneration",
        "NemotronParseForConditionalGeneration",
        "OpenVLAForActionPrediction",
        "OrionForCausalLM",
        "Ovis",
        "Ovis2_5",
        "Ovis2_6ForCausalLM",
        "Ovis2_6_MoeForCausalLM",
        "PaddleOCRVLForConditionalGeneration",
        "Phi3VForCausalLM",
        "Phi4ForCausalLMV",
        "Qwen2AudioForConditionalGeneration",
        "RForConditionalGeneration",
        "SkyworkR1VChatModel",
        "StableLmForCausalLM",
        "Step1ForCausalLM",
        "Step3TextForCausalLM",
        "Step3VLForConditionalGeneration",
        "Step3p5ForCausalLM",
        "Step3p7ForConditionalGeneration",
        "StepVLForConditionalGeneration",
        "Zamba2ForCausalLM",
    }
)

#: Architectures with ``embed_tokens`` only (Cohere) or ``lm_head`` only (Inkling).
_INPUT_ONLY = frozenset({"CohereForCausalLM", "Cohere2ForCausalLM"})
_OUTPUT_ONLY = frozenset({"InklingForCausalLM", "InklingForConditionalGeneration"})


@dataclass(frozen=True, kw_only=True)
class Lora:
    """vLLM's LoRA settings (``--enable-lora``)."""

    max_loras: int = 1
    """--max-loras: adapters resident on the GPU at once (each gets buffers at the maximum rank)."""
    max_lora_rank: int = 16
    """--max-lora-rank: one of :data:`MAX_LORA_RANKS`; adapters of a lower rank are padded to it."""
    max_cpu_loras: int | None = None
    """--max-cpu-loras: adapters cached in host memory (at least ``max_loras``); None: ``max_loras``."""
    adapters: tuple[tuple[str, str], ...] = ()
    """Adapters served from the start, ``(name, source)`` each (``--lora-modules name=source``); the
    source is a Hugging Face repository id or a path. Their number does not change the GPU buffers. The
    caller keeps them to what vLLM parses as ``name=source`` (the CRD's pattern, ``kvright.api``)."""

    def validate(self) -> None:
        """Refuse what vLLM's ``LoRAConfig`` refuses, naming what it accepts."""
        if isinstance(self.max_loras, bool) or not isinstance(self.max_loras, int) or self.max_loras < 1:
            raise CapacityError(f"max LoRAs {self.max_loras!r} is not valid; expected an integer >= 1")
        if self.max_lora_rank not in MAX_LORA_RANKS or isinstance(self.max_lora_rank, bool):
            raise CapacityError(
                f"max LoRA rank {self.max_lora_rank!r} is not one vLLM 0.32 accepts; expected one of "
                f"{', '.join(map(str, MAX_LORA_RANKS))}"
            )
        cpu = self.max_cpu_loras
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < self.max_loras):
            raise CapacityError(
                f"max CPU LoRAs {cpu!r} is not valid; expected an integer >= max LoRAs ({self.max_loras})"
            )

    def vllm_args(self) -> list[str]:
        """``--enable-lora --max-loras N --max-lora-rank R`` (``--max-cpu-loras`` when set, ``--lora-modules
        name=source ...`` for the adapters)."""
        return [
            "--enable-lora",
            "--max-loras",
            str(self.max_loras),
            "--max-lora-rank",
            str(self.max_lora_rank),
            *(["--max-cpu-loras", str(self.max_cpu_loras)] if self.max_cpu_loras is not None else []),
            *(["--lora-modules", *(f"{n}={s}" for n, s in self.adapters)] if self.adapters else []),
        ]


#: The class a config without ``architectures`` is served as, by ``model_type`` (the class its checkpoints
#: name), for the families whose class decides the embedding buffers.
_CLASS_BY_MODEL_TYPE = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "gpt_oss": "GptOssForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "phi3": "Phi3ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}


#: Classes whose checkpoints store ``qkv_proj`` and ``gate_up_proj`` fused (``packed_modules_mapping``
#: maps each to itself): one LoRA slice, A held once (``QKVParallelLinearWithLoRA``,
#: ``ColumnParallelLinearWithLoRA``), where the others hold A per slice.
_FUSED_SLICES = frozenset({"Phi3ForCausalLM"})

#: Classes with ``is_3d_moe_weight``: ``FusedMoE3DWithLoRA`` keeps one w13 slice, so A once per expert.
_MOE_3D = frozenset({"GptOssForCausalLM"})


def _class_name(arch: Architecture) -> str:
    """The vLLM class that serves ``arch`` (from ``architectures``, else the checkpoints' class for its
    ``model_type``)."""
    return arch.architecture or _CLASS_BY_MODEL_TYPE.get(arch.model_type, "")


def _embedding_buffers(architecture: str) -> tuple[bool, bool]:
    """Whether vLLM gives the input embedding and the logits LoRA buffers for this architecture class."""
    both = architecture in _INPUT_AND_OUTPUT
    return both or architecture in _INPUT_ONLY, both or architecture in _OUTPUT_ONLY


def lora_bytes_per_gpu(
    arch: Architecture,
    lora: Lora,
    *,
    tensor_parallel_size: int = 1,
    layout: Layout | None = None,
    stage: Stage | None = None,
) -> int:
    """Bytes of LoRA buffers on one GPU (of ``stage`` under a pipeline), as vLLM 0.32 allocates them for
    ``lora.max_loras`` adapters at ``lora.max_lora_rank`` (the rule in the module docstring)."""
    lora.validate()
    served_as = _class_name(arch)
    if served_as in NO_LORA:
        raise CapacityError(
            f"vLLM 0.32 refuses LoRA on {arch.name}: its class {served_as} does not support LoRA (no "
            "SupportsLoRA); expected a model whose vLLM class supports LoRA, or no lora settings"
        )
    tp = tensor_parallel_size
    r, h = lora.max_lora_rank, arch.hidden_size
    layers = (stage.arch if stage is not None else arch).layers
    first = stage is None or stage.first
    last = stage is None or stage.last
    ep = layout is not None and layout.expert_parallel and arch.num_experts > 0
    family = _class_name(arch)
    fused = family in _FUSED_SLICES
    w13_a = 1 if family in _MOE_3D else 2  # w1 and w3 A per expert, or one fused w13 A

    def column(inputs: int, *outputs: int) -> int:  # A whole per slice, B by the output shard
        if fused:
            return r * inputs + sum(outputs) * r
        return sum(r * inputs + out * r for out in outputs)

    def row(inputs: int, output: int) -> int:  # A by the input shard, B whole
        return r * inputs + output * r

    def mlp(width: int) -> int:
        up = column(h, width // tp, width // tp) if arch.mlp_gated else column(h, width // tp)
        return up + row(width // tp, h)

    elements = 0
    for layer in layers:
        # MiniCPM3's full-cache layers project through MLA's low-rank matrices, not q, k, v and o
        latent = layer.mixer != "mla" and arch.latent_projections(layer)
        if layer.mixer in ("mla", "mamba", "linear", "projection") or latent:
            kind = "MLA-projection" if latent else layer.mixer
            raise CapacityError(
                f"LoRA buffers of {kind} layers ({arch.name}) are not modelled; expected a model "
                "whose layers are standard attention (full, sliding or chunked) or none"
            )
        if layer.mixer in ("full", "sliding", "chunked"):
            hd = arch.head_dim_of(layer)
            kv = 0 if layer.kv_shared else max(1, (layer.kv_heads or arch.num_kv_heads) // tp) * hd
            heads = arch.heads_of(layer)
            q = heads // tp * hd * (2 if arch.attention_output_gate else 1)
            elements += column(h, q, kv, kv) if kv else column(h, q)  # a KV-shared layer projects q only
            if arch.attention_gate_projection:  # AFMoE's output gate: an adapter of its own
                elements += column(h, heads // tp * hd)
            elements += row(heads * hd // tp, h)
        if layer.ffn == "dense":
            elements += mlp(layer.ffn_width or arch.intermediate_size)
        elif layer.ffn == "moe":
            experts = (
                -(-arch.num_experts // layout.expert_parallel_size) if ep and layout else arch.num_experts
            )
            width = arch.moe_intermediate_size if ep else arch.moe_intermediate_size // tp
            elements += experts * r * (w13_a * h + 2 * width + width + h)  # w13 A, w13 B, w2 A, w2 B
            elements += r * h + arch.num_experts * r  # the router, a replicated linear
            if arch.shared_expert_intermediate_size:
                elements += mlp(arch.shared_expert_intermediate_size)
                if arch.shared_expert_gate:
                    elements += r * h + r
    embed, logits = _embedding_buffers(family)
    if embed and first:
        elements += arch.vocab_size * r + h * r
    if logits and last:
        if arch.vocab_size > LORA_MAX_VOCAB:
            raise CapacityError(
                f"vLLM 0.32 refuses LoRA on {arch.name}: its vocabulary of {arch.vocab_size} exceeds "
                f"{LORA_MAX_VOCAB}; expected a vocabulary of at most {LORA_MAX_VOCAB}"
            )
        elements += r * h + arch.vocab_size * r
    return math.ceil(elements * lora.max_loras * DTYPE_BYTES[arch.dtype])
