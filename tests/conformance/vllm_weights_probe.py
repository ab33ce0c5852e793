"""Ask real vLLM how many parameters its own model class holds for a config.json.

Runs in the vLLM venv's python. Reads a JSON list ``[{"id": str, "config": {...}}]`` from stdin, writes
one JSON list to stdout, one answer per case:

    {"id", "architecture": str or null, "parameters": int or null, "bytes": int or null,
     "host_bytes": the part of bytes vLLM keeps in pinned host memory (Qwen3.8's n-gram tables),
     "own_dtypes": {"module.path:dtype": parameters} or null, "error": one line or null,
     "attention": [{"kv_heads", "head_size", "head_size_v", "sliding_window", "kv_shared", "latent"}, ...]
     or null}

Each config is written to a folder of its own and resolved as ``vllm serve`` resolves it
(``EngineArgs.create_engine_config``: the registry's class for its ``architectures``, native or the
Transformers backend), then that class is built on PyTorch's meta device inside vLLM's own config and
parallel-state context (one rank, gloo on loopback) and, as vLLM's loader does (``initialize_model``), with
``prefix=""`` and under the model's dtype as torch's default (``set_default_torch_dtype``), so every tensor
it registers exists with its shape and dtype and none with storage. The prefix matters: a wrapper's own
default (Qwen3.5's and Qwen3-VL's ``"model"``) would rename every layer, and a quantization rule keyed by
module name (compressed-tensors targets and ignores, ModelOpt's quantized_layers) would then miss.
Parameters are counted once each (a tied LM head is the embedding); ``bytes`` weighs each at its own dtype,
and ``own_dtypes`` names those vLLM builds in another dtype than the model's (layer indices dropped: one
entry per kind of tensor). No weights,
tokenizer, engine or server. ``attention`` lists, in model order, every attention layer (its ``Attention``
and ``MLAAttention`` modules, at one rank): the heads and sizes it caches (an MLA layer: one latent head of
``kv_lora_rank + qk_rope_head_dim``, ``latent`` true), its sliding window, and whether it reads another
layer's cache (``kv_sharing_target_layer_name``) and so keeps none of its own.

A case marked ``"plain_config": true`` is a config whose model type has no config class here (the
checkpoint's own code would read it): a plain ``PretrainedConfig`` subclass is registered for that type
first, so vLLM's class reads the file's fields as they stand and its own defaults for the rest.

A case with ``"model_runner_v2": true`` builds its class with ``VLLM_USE_V2_MODEL_RUNNER=1``: the model
runner vLLM selects on a GPU, which this CPU build (no Triton) does not, for a class that refuses the other
(LongCat-Flash-Lite's n-gram embeddings). The tensors a class registers are the same under either runner.

A case with ``"hf_quant_config": {...}`` has that file beside its config.json (a ModelOpt checkpoint's
quantization, which vLLM reads from there).

A case with ``"torchvision_stand_in": true`` is a multimodal wrapper whose vLLM module imports torchvision
(image processors, annotations), which this CPU venv lacks: it is built with a stand-in imported instead
(``_torchvision_stand_in``), which no layer's tensors depend on.

A case with ``"timm": true`` is a class that builds a timm tower (DeepSeek-VL2's SigLIP; Gemma 3n's
MobileNet, through transformers' TimmWrapper): timm is put on the path for that case alone
(``_timm_on_path``), with the torchvision stand-in.

A case with ``"tokens": [...]`` is a class that looks those special tokens' ids up while it is built
(DeepSeek-OCR's ``<image>``): it is resolved with a tokenizer that knows them (``_write_tokenizer``) instead
of none.

Qwen3.8-Flash-Next's classes (``Qwen4Exp...``) are built with what the CPU build lacks for them stood in
(``_qwen4_exp_on_cpu``): FlashAttention's availability for QSA, and its pinned-host n-gram table made on the
meta device, neither of which any tensor's shape or dtype or any cache spec depends on.

Rnj-1's and Step1's classes are built without what their layers pass ``Attention`` for the Triton backend
alone, which the CPU build has not (``TRITON_ONLY_ARGUMENTS``: Rnj-1's ``chunk_lookback``, Step1's
``use_alibi_sqrt``); no tensor and no cache spec depends on either (a chunked layer's window is its
``per_layer_sliding_window``).

OLMo Hybrid's class (``OlmoHybridForCausalLM``) is built with what the CPU build lacks for its Gated DeltaNet
layers stood in (``_olmo_hybrid_on_cpu``): the Triton allocator each layer registers for its kernels, on which
no tensor and no cache spec depends.

A case with ``"sparse_attention_stand_in": true`` is a sparse-attention MLA class (DeepSeek-V3.2's DSA),
which the CPU build refuses to give a backend: it is built with the CPU build's dense MLA backend instead
(``_sparse_attention_on_cpu``), which no tensor and no cache spec depends on; with the torchvision or timm
stand-in too where the case asks for both (GLM-5.3's classes import torchvision and are all sparse MLA).

A case with ``"puzzle_config": true`` is a NemotronH-Puzzle file (``nemotron_h_puzzle``), whose config class
is the checkpoint's own ``configuration_nemotron_h_puzzle.py`` (in neither vLLM nor its transformers): a
stand-in for it is registered first (``_register_puzzle_config``), written from that class's public source's
semantics. The layer pattern is derived from ``block_configs`` (attention ``*``, MoE ``E``, Mamba ``M``, MLP
``-``; the file's own replaced); every field any block sets is deleted from the global config (absent, so
a read of it fails); a layer's config (``get_nemotron_h_config_for_layer``) is the rest with its block's
fields over it, a deleted field its block leaves out at NemotronHConfig's default. An unknown block type is
a KeyError, a field its block type has not a TypeError; every block field is optional (the released
checkpoint's MoE blocks state their width and top-k alone). It reads the file as the checkpoint's class
does, so it changes no tensor and no cache spec vLLM's class builds from it.

A case with ``"relu2_moe_stand_in": true`` is a class with squared-ReLU experts without a gate (NemotronH's
``is_act_and_mul=False``), which the CPU build refuses as a platform gate (``FusedMoEConfig`` "supported only
for CUDA, XPU and ROCm", then its unquantized experts kernel, "No Unquantized MoE backend"): it is built with
both gates lifted (``_relu2_moe_on_cpu``). The experts' tensors are the unquantized method's, sized by
``is_act_and_mul`` whatever kernel would run them; none changes, nor any cache spec.

A case with ``"pangu_sink_stand_in": true`` is an openPangu file with sink attention (Pro MoE V2's
``param_sink_number``; vLLM's ``OpenPanguSinkAttention``), whose class makes its learned ``param_sink_key``
(and ``param_sink_value``) on ``current_platform.current_device()``, the CPU here, not the meta device the
rest is built on, and then runs its meta ``k_layernorm`` over that key while it is built, which torch refuses
("Tensor on device meta is not on the expected device cpu!"): it is built with openpangu.py's
``current_platform`` answering the meta device for ``current_device()`` alone (``_pangu_sink_on_meta``). The
sink tensors keep their shapes and dtypes; no other tensor and no cache spec changes.

A case with ``"tower": NAME`` asks only for the parameters of transformers' class for the (multimodal) config
under its module NAME (``visual``; or under each of a list of names: ``["vision_tower",
"multi_modal_projector"]``), built on the meta device: a vision tower vLLM loads one to one, for a wrapper
vLLM's CPU build cannot import (GLM-V's processor needs torchvision). Its answer's ``parameters`` is that
count and ``architecture`` transformers' class.

A case with ``"sub_config": KEY`` asks for the parameters of the model transformers' ``AutoModel`` builds
for the config's sub-config KEY (``audio_config``), on the meta device: a tower vLLM builds that way (Gemma
3n's ``AutoModel.from_config(config.audio_config)``) in a wrapper this CPU build cannot build whole (its
vision tower is a timm model, and timm is not installed here).

A case with ``"kv_cache": {"memory_bytes", "max_model_len", "max_num_batched_tokens"}`` is resolved with those
engine arguments (prefix caching off, as vLLM's CPU platform has it for MLA models) and its answer adds
``kv_cache``: what vLLM's engine core would make of that many bytes of KV cache, by vLLM's own code from the
config on: the block size its platform aligned (``cache_config.block_size``; a hybrid model's raised to hold a
state, ``mamba_page_size_padded``), every layer's ``get_kv_cache_spec`` (as the model runner asks them) and
``get_kv_cache_configs`` (groups, ``num_blocks``) with the concurrency it logs, and every layer's spec as its
module states it (``layers``, in model order: the module's class, the spec's kind, block, heads, widths and
window, before the engine unifies the pages). No cache is allocated: for a
class whose CPU build cannot start (Kimi-Linear's MLA post-processes weights the CPU build has already packed
away), this is the accounting the engine would run.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import types
from collections.abc import Iterator
from typing import Any

# Kimi-Linear's model asks for a fused GEMM + all-reduce kernel (CUTLASS's CuTe DSL, GPUs only) while it is
# built unless this is off; it changes how the output projections run, not which tensors the model holds.
os.environ.setdefault("VLLM_KIMI_K3_GEMM_AR", "0")

_DIST: dict[str, bool] = {"ready": False}


class _NoEvent:
    """A CUDA event that records and waits on nothing: DeepSeek-V4's attention (vLLM's CPU class too) makes
    ``torch.cuda.Event()``s while it is built, which a CPU-only torch refuses ("Tried to instantiate dummy
    base class Event"). Building on the meta device never runs a stream, so nothing waits on them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record(self, *args: Any, **kwargs: Any) -> None:
        pass

    def wait(self, *args: Any, **kwargs: Any) -> None:
        pass


class _NoStream(_NoEvent):
    """A CUDA stream that orders nothing: Kimi-Linear's model makes a ``torch.cuda.Stream()`` while it is
    built (an auxiliary stream to overlap two GEMMs), which a CPU-only torch refuses ("torch.cuda.Stream
    requires CUDA support"). Nothing runs on the meta device, so nothing is ordered on it."""


def _amx_tiles() -> bool:
    """What this probe tells vLLM's CPU kernels of the CPU: AMX tiles, as on the Intel Sapphire Rapids (and
    newer) CPUs the CPU build serves FP8 and MXFP4 weights on. Its FP8 GEMM and MXFP4 MoE kernels refuse to be
    chosen without them ("requires AMX tile support"), which would stop the build of every such checkpoint on
    an AMD or older Intel CPU; the tensors a layer registers are its quantization method's whatever kernel
    would serve them, and on the meta device no kernel runs. FP8 kernels that also need AMX-FP8 (Granite
    Rapids) still ask the CPU, so the kernel chosen is the one a Sapphire Rapids CPU gets."""
    return True


class _Anything(type):
    """A stand-in class whose every attribute, call and subscript is another stand-in: what a module that
    imports torchvision for annotations, defaults and processors (never for a tensor a layer registers)
    needs of it to be imported."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return _Anything("instance", (), {})

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


class _StandInModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Anything(name, (), {})


class _TorchvisionStandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``torchvision`` and any of its modules as :class:`_StandInModule` s."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname.split(".")[0] != "torchvision":
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: Any) -> Any:
        module = _StandInModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> None:
        pass


@contextlib.contextmanager
def _torchvision_stand_in() -> Iterator[None]:
    """Build a multimodal class this CPU venv cannot import: vLLM's wrapper modules import image
    processors that import torchvision (this venv has none; the registry serves it only with CUDA torch),
    and use it only to process images, never to build a layer. A stand-in is imported instead, which
    transformers still takes for torchvision being absent (``find_spec`` answers None for it, so no
    torchvision code path is chosen), and the class is inspected in this process, where the stand-in is
    (vLLM inspects it in a subprocess to keep CUDA uninitialised in the parent; this CPU-only process has
    none). Undone after the case."""
    from vllm.model_executor.models import registry

    standing_in = any(isinstance(finder, _TorchvisionStandIn) for finder in sys.meta_path)
    if standing_in or importlib.util.find_spec("torchvision") is not None:  # one already, or the real one
        yield
        return
    find_spec = importlib.util.find_spec
    in_subprocess = registry._run_in_subprocess
    finder = _TorchvisionStandIn()
    sys.meta_path.insert(0, finder)

    def absent(name: str, package: str | None = None) -> Any:
        return None if name.split(".")[0] == "torchvision" else find_spec(name, package)

    importlib.util.find_spec = absent
    registry._run_in_subprocess = lambda fn: fn()
    try:
        yield
    finally:
        registry._run_in_subprocess = in_subprocess
        importlib.util.find_spec = find_spec
        sys.meta_path.remove(finder)
        for name in [name for name in sys.modules if name.split(".")[0] == "torchvision"]:
            sys.modules.pop(name)


@contextlib.contextmanager
def _timm_on_path() -> Iterator[None]:
    """timm, for a class that imports it to build its tower (DeepSeek-VL2's SigLIP): from the venv's extras
    folder (deploy/vllm-env.sh), on the path for this case alone and under the torchvision stand-in (timm
    imports torchvision at import, which this venv lacks). Undone after the case."""
    from transformers.utils import import_utils

    extras = os.path.join(sys.prefix, "extras")
    if not os.path.isdir(os.path.join(extras, "timm")):
        raise RuntimeError(f"timm is not in {extras}; deploy/vllm-env.sh installs it there")
    with _torchvision_stand_in():
        sys.path.insert(0, extras)
        import_utils.is_timm_available.cache_clear()  # transformers asks once and keeps the answer
        try:
            yield
        finally:
            sys.path.remove(extras)
            import_utils.is_timm_available.cache_clear()
            for name in [name for name in sys.modules if name.split(".")[0] == "timm"]:
                sys.modules.pop(name)


@contextlib.contextmanager
def _qwen4_exp_on_cpu() -> Iterator[None]:
    """What vLLM's CPU build lacks to build Qwen3.8-Flash-Next's classes (``models/qwen4_exp``), for one
    case's build; none of it changes a tensor's shape or dtype or a cache spec, and all of it is undone after.

    - The package imports Qwen3-VL's processor, which imports torchvision: :func:`_torchvision_stand_in`.
    - QSA's attention refuses to build without FlashAttention's varlen kernel (a CUDA build's).
    - The PLE n-gram table, kept in pinned host memory by default, is allocated with ``pin_memory``, which
      CPU-only torch cannot do, and looked up through a UVA view and a Triton helper the CPU build lacks: the
      table is made on the meta device (its shape and dtype, not its 100 GB), the view is the tensor, and
      ``next_power_of_2`` is Python's."""
    with _torchvision_stand_in():
        import vllm.models.qwen4_exp.nvidia.model  # noqa: F401 - the package's own import order
        from vllm.models.qwen4_exp.common import ngram_embedding
        from vllm.models.qwen4_exp.nvidia import qsa

        table = ngram_embedding.Qwen4ExpPLEPinnedHostEmbedding
        saved = (
            qsa.is_flash_attn_varlen_func_available,
            table.allocate_embedding_weight,
            ngram_embedding.get_accelerator_view_from_cpu_tensor,
            ngram_embedding.triton,
        )

        def on_meta(self: Any, rows: int, width: int, dtype: Any) -> Any:
            import torch

            return torch.empty(rows, width, dtype=dtype, device="meta")

        qsa.is_flash_attn_varlen_func_available = lambda: True
        table.allocate_embedding_weight = on_meta
        ngram_embedding.get_accelerator_view_from_cpu_tensor = lambda tensor: tensor
        power = types.SimpleNamespace(next_power_of_2=lambda n: 1 << (int(n) - 1).bit_length())
        ngram_embedding.triton = power
        try:
            yield
        finally:
            (
                qsa.is_flash_attn_varlen_func_available,
                table.allocate_embedding_weight,
                ngram_embedding.get_accelerator_view_from_cpu_tensor,
                ngram_embedding.triton,
            ) = saved


@contextlib.contextmanager
def _deepseek_v41_on_cpu(config: dict[str, Any]) -> Iterator[None]:
    """What vLLM's CPU build lacks to build DeepSeek-V4.1's class (``models/deepseek_v41``), for one case's
    build; none of it changes a tensor's shape or dtype or a cache spec, and all of it is undone after.

    - Its FlashMLA attention asks a CUDA device for its output projection's fp8 einsum recipe (a kernel
      choice): answered as Hopper's.
    - Each Engram table, kept in pinned host memory by default (``EngramConfig.cpu_offload``), is allocated
      with ``pin_memory`` (which CPU-only torch cannot do), behind a UVA check and a CUDA SM count: made on
      the meta device instead (its shape and dtype, not its 100 GB); the probe reports it as host bytes.
    - Its n-gram hash map is built from the checkpoint's tokenizer (buffers only): an identity map of the
      compressed vocabulary the config states.
    - On CPU vLLM never selects V4.1's own fp8 config class (``deepseek_v4_fp8`` is gated on CUDA and ROCm):
      selected here, with the MXFP8 linear kernel's pick (made after the weights exist) stood in."""
    import torch
    import vllm.model_executor.layers.quantization as quantization
    import vllm.model_executor.layers.quantization.modelopt as modelopt
    import vllm.model_executor.model_loader.weight_utils as weight_utils
    import vllm.models.deepseek_v41.nvidia.flashmla as flashmla
    from vllm.models.deepseek_v41 import DeepseekV4FP8Config
    from vllm.models.deepseek_v41.common import engram

    text = config.get("text_config") or config
    table = engram.ParallelEngramEmbedding
    chosen = quantization.get_quantization_config

    def meta_table(self: Any) -> tuple[Any, Any]:
        scales = self.dim // self.block_size
        return (
            torch.empty(self.part_num_embeddings, self.dim, dtype=torch.float8_e4m3fn, device="meta"),
            torch.empty(self.part_num_embeddings, scales, dtype=torch.uint8, device="meta"),
        )

    def v41_quantization(name: str) -> Any:
        return DeepseekV4FP8Config if name == "deepseek_v4_fp8" else chosen(name)

    vocabulary = int(text.get("engram_compressed_vocab_size") or 1)
    undo = [
        (flashmla, "compute_fp8_einsum_recipe", lambda *a, **k: ((1, 128, 128), False)),
        (table, "_allocate_weights", meta_table),
        (engram, "is_uva_available", lambda: True),
        (engram, "build_compressed_token_map", lambda tokenizer: (list(range(vocabulary)), vocabulary)),
        (
            torch.cuda,
            "get_device_properties",
            lambda *a, **k: types.SimpleNamespace(multi_processor_count=132),
        ),
        (torch.accelerator, "current_device_index", lambda *a, **k: 0),
        (quantization, "get_quantization_config", v41_quantization),
        (weight_utils, "get_quantization_config", v41_quantization),
        (
            modelopt,
            "select_linear_kernel",
            lambda *a, **k: types.SimpleNamespace(supports_pre_processed_weights=False),
        ),
        (modelopt, "expose_input_quant_key", lambda *a, **k: None),
    ]
    import transformers

    undo.append((transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: None))
    saved = [(owner, name, vars(owner)[name]) for owner, name, _ in undo]
    for owner, name, value in undo:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


@contextlib.contextmanager
def _dots3_note_on_cpu() -> Iterator[None]:
    """What vLLM's CPU build lacks to build dots3-note's class (``models/dots3_note``), for one case's build;
    none of it changes a tensor's shape or dtype or a cache spec, and all of it is undone after.

    - The package imports torchvision (its processor) and, at module level, the CUDA build's FlashAttention
      extension (``vllm.vllm_flash_attn``) and DeepGEMM (``vllm.third_party.deep_gemm``): modules that
      answer only to those imports, for this case alone.
    - Its sliding layers' prefill backend checks for FlashAttention's varlen kernel while it is built.
    - Its full layers ask for a sparse MLA backend: :func:`_sparse_attention_on_cpu`, entered beside this."""

    def absent(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a CUDA kernel the CPU build does not have")

    flash = types.ModuleType("vllm.vllm_flash_attn")
    interface = types.ModuleType("vllm.vllm_flash_attn.flash_attn_interface")
    for module in (flash, interface):
        module.flash_attn_varlen_func = absent  # type: ignore[attr-defined]
        module.flash_attn_with_kvcache = absent  # type: ignore[attr-defined]
        module.get_scheduler_metadata = absent  # type: ignore[attr-defined]
        module.is_fa_version_supported = lambda *a, **k: False  # type: ignore[attr-defined]
        module.fa_version_unsupported_reason = lambda *a, **k: "the CPU build"  # type: ignore[attr-defined]
    flash.flash_attn_interface = interface  # type: ignore[attr-defined]
    flash.__path__ = []
    gemm = types.ModuleType("vllm.third_party.deep_gemm")
    gemm.per_block_cast_to_fp8 = absent  # type: ignore[attr-defined]
    stand_ins = {
        "vllm.vllm_flash_attn": flash,
        "vllm.vllm_flash_attn.flash_attn_interface": interface,
        "vllm.third_party.deep_gemm": gemm,
    }
    saved_modules = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    import vllm.v1.attention.backends.fa_utils as fa_utils

    compile_missing = not hasattr(fa_utils, "compile_flash_attn_varlen_func_from_specs")
    if compile_missing:
        fa_utils.compile_flash_attn_varlen_func_from_specs = None  # type: ignore[attr-defined]
    import vllm.v1.attention.backends.mla.prefill.flash_attn as prefill

    varlen = getattr(prefill, "flash_attn_varlen_func", None)
    prefill.flash_attn_varlen_func = varlen or absent  # type: ignore[attr-defined]
    try:
        with _torchvision_stand_in():
            yield
    finally:
        prefill.flash_attn_varlen_func = varlen  # type: ignore[attr-defined]
        if compile_missing:
            del fa_utils.compile_flash_attn_varlen_func_from_specs
        for name, module in saved_modules.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


@contextlib.contextmanager
def _minimax_m3_on_cpu() -> Iterator[None]:
    """What vLLM's CPU build lacks to build MiniMax-M3's classes, for one case's build; none of it changes
    which tensors a layer registers, and all of it is undone after.

    - Their module imports a processor that imports torchvision's ``InterpolationMode`` (an annotation
      only), and this venv has no torchvision: :func:`_torchvision_stand_in`.
    - Their experts run SwiGLU-OAI with the gate and up halves apart (``swigluoai_uninterleave``), which
      the CPU build's unquantized MoE kernel does not list among its activations, so no backend is found
      ("No Unquantized MoE backend supports the deployment configuration"); the experts' tensors are the
      unquantized method's whatever kernel would run them."""
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.experts import cpu_moe

    listed = cpu_moe.CPUUnquantizedExperts.__dict__["_supports_activation"]
    cpu_moe.CPUUnquantizedExperts._supports_activation = staticmethod(  # type: ignore[method-assign]
        lambda activation: activation == MoEActivation.SWIGLUOAI_UNINTERLEAVE or listed.__func__(activation)
    )
    try:
        with _torchvision_stand_in():
            yield
    finally:
        cpu_moe.CPUUnquantizedExperts._supports_activation = listed  # type: ignore[method-assign]


#: What a class's layers pass vLLM's ``Attention`` that only the Triton backend takes (the CPU backend
#: raises), by class: Rnj-1's ``chunk_lookback`` (-1 where a layer is not chunked; a chunked layer's window
#: is its ``per_layer_sliding_window``), Step1's ``use_alibi_sqrt`` (how the kernel applies the ALiBi slopes
#: the layer passes too). No tensor and no cache spec depends on either.
TRITON_ONLY_ARGUMENTS = {"Rnj1ForCausalLM": "chunk_lookback", "Step1ForCausalLM": "use_alibi_sqrt"}


@contextlib.contextmanager
def _triton_argument_dropped(argument: str) -> Iterator[None]:
    """What vLLM's CPU build lacks to build a class of :data:`TRITON_ONLY_ARGUMENTS`, for one case's build:
    ``Attention`` is built without that argument while the class is built. Undone after."""
    from vllm.model_executor.layers.attention import attention

    built = attention.Attention.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.pop(argument, None)
        built(self, *args, **kwargs)

    attention.Attention.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        attention.Attention.__init__ = built  # type: ignore[method-assign]


@contextlib.contextmanager
def _olmo_hybrid_on_cpu() -> Iterator[None]:
    """What vLLM's CPU build lacks to build OLMo Hybrid's GDN layers, for one case's build: each layer calls
    ``set_triton_allocator`` (scratch memory for its Triton kernels), and the CPU build's triton stand-in has
    no ``set_allocator`` ("module 'triton' has no attribute 'set_allocator'"). The layer's module gets a no-op
    in its place while the class is built; no tensor and no cache spec depends on it. Undone after."""
    from vllm.model_executor.layers.mamba.gdn import olmo_gdn_linear_attn

    registered = olmo_gdn_linear_attn.set_triton_allocator
    olmo_gdn_linear_attn.set_triton_allocator = lambda *_: None  # type: ignore[assignment]
    try:
        yield
    finally:
        olmo_gdn_linear_attn.set_triton_allocator = registered


@contextlib.contextmanager
def _sparse_attention_on_cpu() -> Iterator[None]:
    """What vLLM's CPU build lacks to build a sparse-attention MLA class (DeepSeek-V3.2's DSA, GLM-5's), for
    one case's build: its platform refuses to pick a backend for sparse attention ("Sparse Attention is not
    supported on CPU"), so the layers are given the CPU build's dense MLA backend, and that backend's
    implementation is built without the indexer arguments it does not take. No tensor a layer registers,
    and no cache spec it asks for (the latent's, the indexer's own), depends on which backend would run it;
    all of it is undone after."""
    import inspect

    from vllm.model_executor.layers.attention import mla_attention
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.attention import selector

    chosen = CpuPlatform.__dict__["get_attn_backend_cls"]
    built = mla_attention.MLACommonImpl.__init__
    accepted = set(inspect.signature(built).parameters)

    def dense(
        cls: Any, selected_backend: Any, attn_selector_config: Any, num_heads: int | None = None
    ) -> str:
        dense_config = attn_selector_config._replace(use_sparse=False)
        return chosen.__func__(cls, selected_backend, dense_config, num_heads)

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **{k: v for k, v in kwargs.items() if k in accepted})

    CpuPlatform.get_attn_backend_cls = classmethod(dense)  # type: ignore[assignment,method-assign]
    mla_attention.MLACommonImpl.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        CpuPlatform.get_attn_backend_cls = chosen  # type: ignore[method-assign]
        mla_attention.MLACommonImpl.__init__ = built  # type: ignore[method-assign]
        selector._cached_get_attn_backend.cache_clear()  # the choices made with the stand-in are forgotten


#: NemotronH-Puzzle's block types (``configuration_nemotron_h_puzzle.py``): the pattern's character and the
#: fields a block of the type may set.
PUZZLE_BLOCKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "attention": ("*", ("sliding_window", *(f"q_indexer_{f}" for f in (
        "attn_mode", "chunk_size", "chunk_top_k", "chunked_query_chunk_size", "dim", "init_query_heads",
        "logit_scale", "query_chunk_size", "top_k",
    )))),
    "moe": ("E", (
        "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size",
        "moe_shared_expert_intermediate_size", "moe_latent_size", "routed_scaling_factor", "n_group",
        "topk_group", "norm_topk_prob",
    )),
    "mamba": ("M", ("ssm_state_size",)),
    "mlp": ("-", ("intermediate_size",)),
}  # fmt: skip


def _register_puzzle_config() -> None:
    """A config class for ``nemotron_h_puzzle`` that reads a file as the checkpoint's own does (the module
    docstring)."""
    from transformers import AutoConfig
    from transformers.models.nemotron_h.configuration_nemotron_h import NemotronHConfig

    try:
        AutoConfig.for_model("nemotron_h_puzzle")
        return
    except ValueError:
        pass

    def blocks_of(dicts: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
        blocks = []
        for block in dicts or []:
            kind = block.get("block_type")
            unknown = set(block) - {"block_type", *PUZZLE_BLOCKS[kind][1]}  # KeyError: an unknown type
            if unknown:
                name = f"{kind.capitalize()}Config"  # the class's dataclass for the type, as it refuses
                raise TypeError(
                    f"{name}.__init__() got an unexpected keyword argument {sorted(unknown)[0]!r}"
                )
            blocks.append({k: v for k, v in block.items() if v is not None})
        return blocks

    def pattern_of(blocks: list[dict[str, Any]]) -> str:
        return "".join(PUZZLE_BLOCKS[block["block_type"]][0] for block in blocks)

    class NemotronHPuzzleConfig(NemotronHConfig):
        model_type = "nemotron_h_puzzle"
        _deleted: frozenset[str] = frozenset()  # the global fields blocks set: absent

        def __post_init__(self, **kwargs: Any) -> None:
            blocks = blocks_of(kwargs.pop("block_configs", None))
            mtp = blocks_of(kwargs.pop("mtp_block_configs", None))
            if blocks:  # the pattern is the blocks', not the file's
                self.layers_block_type = None
                kwargs["hybrid_override_pattern"] = pattern_of(blocks)
            if mtp:
                self.mtp_layers_block_type = None
                kwargs["mtp_hybrid_override_pattern"] = pattern_of(mtp)
            super().__post_init__(**kwargs)
            self.block_configs = blocks
            self.mtp_block_configs = mtp
            set_by_blocks = {k for b in blocks + mtp for k in b if k != "block_type"}
            object.__setattr__(self, "_deleted", frozenset(set_by_blocks))

        def __getattribute__(self, name: str) -> Any:
            deleted = object.__getattribute__(self, "_deleted")
            if not name.startswith("_") and NemotronHConfig.attribute_map.get(name, name) in deleted:
                raise AttributeError(f"'NemotronHPuzzleConfig' object has no attribute '{name}'")
            return super().__getattribute__(name)

        def to_dict(self) -> dict[str, Any]:
            return {k: v for k, v in super().to_dict().items() if k not in self._deleted and k != "_deleted"}

        def get_nemotron_h_config_for_layer(self, layer: int) -> Any:
            fields = self.to_dict()
            for key in ("block_configs", "mtp_block_configs", "model_type", "hybrid_override_pattern"):
                fields.pop(key, None)
            block = {k: v for k, v in self.block_configs[layer].items() if k != "block_type"}
            return NemotronHConfig.from_dict(fields | block)

    AutoConfig.register("nemotron_h_puzzle", NemotronHPuzzleConfig)


@contextlib.contextmanager
def _relu2_moe_on_cpu() -> Iterator[None]:
    """What vLLM's CPU build refuses in a class with squared-ReLU experts without a gate (NemotronH's), for
    one case's build: ``FusedMoEConfig``'s platform gate (raised last in its ``__post_init__``, so the config
    is whole without it), and its unquantized experts kernel's (no ungated activation, ``relu2_no_mul`` not
    listed). The experts' tensors are the unquantized method's whatever kernel would run them; undone
    after."""
    from vllm.model_executor.layers.fused_moe import config as moe_config
    from vllm.model_executor.layers.fused_moe.activation import MoEActivation
    from vllm.model_executor.layers.fused_moe.experts import cpu_moe

    checked = moe_config.FusedMoEConfig.__post_init__
    kernel = cpu_moe.CPUUnquantizedExperts
    listed = (kernel.__dict__["_supports_no_act_and_mul"], kernel.__dict__["_supports_activation"])

    def post_init(self: Any) -> None:
        try:
            checked(self)
        except NotImplementedError as error:
            if "is_act_and_mul=False" not in str(error):
                raise

    moe_config.FusedMoEConfig.__post_init__ = post_init  # type: ignore[method-assign]
    kernel._supports_no_act_and_mul = staticmethod(lambda: True)  # type: ignore[method-assign]
    kernel._supports_activation = staticmethod(  # type: ignore[method-assign]
        lambda activation: activation == MoEActivation.RELU2_NO_MUL or listed[1].__func__(activation)
    )
    try:
        yield
    finally:
        moe_config.FusedMoEConfig.__post_init__ = checked  # type: ignore[method-assign]
        kernel._supports_no_act_and_mul, kernel._supports_activation = listed  # type: ignore[method-assign]


@contextlib.contextmanager
def _pangu_sink_on_meta() -> Iterator[None]:
    """What openPangu's sink attention needs to be built on the meta device, for one case's build:
    ``OpenPanguSinkAttention`` (openpangu.py:645-697) makes ``param_sink_key`` / ``param_sink_value`` with
    ``device=current_platform.current_device()`` (the CPU), then normalizes the key with its meta
    ``k_layernorm``, which torch refuses. Here openpangu.py's ``current_platform`` is a proxy whose
    ``current_device()`` is the meta device and whose every other attribute is the platform's own; the sink
    tensors' shapes and dtypes are unchanged. Undone after."""
    import torch
    from vllm.model_executor.models import openpangu

    real = openpangu.current_platform

    class _MetaDevice:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def current_device(self) -> Any:
            return torch.device("meta")

    openpangu.current_platform = _MetaDevice()  # type: ignore[assignment]
    try:
        yield
    finally:
        openpangu.current_platform = real


def _count(
    config: dict[str, Any],
    port: int,
    hf_quant_config: dict[str, Any] | None,
    kv_cache: dict[str, int] | None = None,
    model_runner_v2: bool = False,
    tokens: list[str] | None = None,
) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        torch.cuda.Event = _NoEvent  # type: ignore[assignment,misc]  # this probe process only
        torch.cuda.Stream = _NoStream  # type: ignore[assignment,misc]  # this probe process only
        torch.cpu._is_amx_tile_supported = _amx_tiles  # this probe process only
    from vllm.config import set_current_vllm_config
    from vllm.distributed import (
        destroy_model_parallel,
        init_distributed_environment,
        initialize_model_parallel,
    )
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.model_executor.layers.attention.mla_attention import MLAAttention
    from vllm.model_executor.model_loader.utils import configure_quant_config, get_model_architecture
    from vllm.utils.torch_utils import set_default_torch_dtype

    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        if hf_quant_config is not None:
            with open(os.path.join(folder, "hf_quant_config.json"), "w") as f:
                json.dump(hf_quant_config, f)
        if tokens is not None:
            _write_tokenizer(folder, tokens)
        if config.get("architectures") == ["Dots3NoteForCausalLM"]:
            # its class reads the image padding token's id from the checkpoint's added_tokens.json
            with open(os.path.join(folder, "added_tokens.json"), "w") as f:
                json.dump({"<|imgpad|>": int(config.get("vocab_size", 1)) - 1}, f)
        engine: dict[str, Any] = {}
        if config.get("architectures") == ["DeepseekV41ForCausalLM"] and "quantization_config" in config:
            # What vLLM picks on CUDA and ROCm for the file (its CPU build's detection, after another DeepSeek
            # case in the same process, falls back to plain fp8): named, as --quantization names it.
            engine["quantization"] = "deepseek_v4_fp8"
        if kv_cache is not None:
            engine |= {
                "max_model_len": kv_cache["max_model_len"],
                "max_num_batched_tokens": kv_cache["max_num_batched_tokens"],
                "enable_prefix_caching": False,
            }
        args = EngineArgs(
            model=folder,
            skip_tokenizer_init=tokens is None,
            load_format="dummy",
            enforce_eager=True,
            **engine,
        )
        vllm_config = args.create_engine_config()
        cls, architecture = get_model_architecture(vllm_config.model_config)
        if vllm_config.quant_config is not None:
            # As vLLM's loader does (initialize_model): a class that is not SupportsQuant hands its fused
            # modules to the quantization config here, so an ignore list naming q_proj, k_proj and v_proj
            # leaves the fused qkv_proj unquantized.
            configure_quant_config(vllm_config.quant_config, cls)
        with set_current_vllm_config(vllm_config):
            if not _DIST["ready"]:
                init_distributed_environment(
                    world_size=1,
                    rank=0,
                    distributed_init_method=f"tcp://127.0.0.1:{port}",
                    local_rank=0,
                    backend="gloo",
                )
                _DIST["ready"] = True
            # The groups are made for the model at hand (an expert-parallel one only for an MoE model).
            destroy_model_parallel()
            initialize_model_parallel(1, 1)
            if model_runner_v2:
                os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"  # this case's build only (see the docstring)
            try:
                with set_default_torch_dtype(vllm_config.model_config.dtype), torch.device("meta"):
                    model = cls(vllm_config=vllm_config, prefix="")
            except (NotImplementedError, RuntimeError) as error:
                if "meta tensor" not in str(error):
                    raise
                # A module that computes its initial values from a tensor while it is built (Apertus's
                # xIELU takes log(exp(alpha) - 1) of one, Gemma 3n's sparse GELU the .item() of a normal
                # quantile) cannot be built without storage: the small
                # configs here are built on the CPU instead, which counts the same tensors. The layers the
                # failed build registered are forgotten first (vLLM refuses a layer name twice).
                vllm_config.compilation_config.static_forward_context.clear()
                with set_default_torch_dtype(vllm_config.model_config.dtype):
                    model = cls(vllm_config=vllm_config, prefix="")
            finally:
                os.environ.pop("VLLM_USE_V2_MODEL_RUNNER", None)
            cache = None if kv_cache is None else _kv_cache(vllm_config, kv_cache["memory_bytes"])
    seen: set[int] = set()
    total = 0
    nbytes = 0
    own_dtypes: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if id(parameter) not in seen:
            seen.add(id(parameter))
            total += parameter.numel()
            nbytes += parameter.numel() * parameter.element_size()
            if parameter.dtype != vllm_config.model_config.dtype:
                kind = ".".join(part for part in name.split(".") if not part.isdigit())
                key = f"{kind}:{str(parameter.dtype).removeprefix('torch.')}"
                own_dtypes[key] = own_dtypes.get(key, 0) + parameter.numel()
    attention = [
        {
            "kv_heads": module.num_kv_heads,
            "head_size": module.head_size,
            "head_size_v": getattr(module, "head_size_v", module.head_size),
            "sliding_window": module.sliding_window,
            "kv_shared": getattr(module, "kv_sharing_target_layer_name", None) is not None,
            "latent": isinstance(module, MLAAttention),
        }
        for module in model.modules()
        if isinstance(module, (Attention, MLAAttention))
    ]
    # Tensors vLLM keeps in (pinned) host memory, not on a GPU: Qwen3.8's n-gram tables (their class's name),
    # DeepSeek-V4.1's Engram tables (where its EngramConfig offloads them, the default).
    host = sum(
        p.numel() * p.element_size()
        for module in model.modules()
        if "PinnedHost" in type(module).__name__
        or (type(module).__name__ == "ParallelEngramEmbedding" and getattr(module, "cpu_offload", False))
        for p in module.parameters(recurse=False)
    )
    return {
        "architecture": architecture,
        "parameters": total,
        "bytes": nbytes,
        "host_bytes": host,
        "own_dtypes": own_dtypes,
        "attention": attention,
        "error": None,
        **({"kv_cache": cache} if cache is not None else {}),
    }


def _write_tokenizer(folder: str, tokens: list[str]) -> None:
    """A tokenizer that knows ``tokens`` (and an unknown token), for a class that looks its special tokens up
    while it is built (DeepSeek-OCR's ``<image>``); no tensor depends on which id a token has."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    vocab = {"<unk>": 0, **{token: i + 1 for i, token in enumerate(tokens)}}
    Tokenizer(WordLevel(vocab, unk_token="<unk>")).save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "<unk>"}, f)


def _kv_cache(vllm_config: Any, memory_bytes: int) -> dict[str, Any]:
    """The KV-cache config vLLM's engine core would make of ``memory_bytes`` for the model just built (the
    model runner's ``get_kv_cache_spec``, then ``get_kv_cache_configs``)."""
    from vllm.config.vllm import get_layers_from_vllm_config
    from vllm.distributed.kv_transfer.kv_connector.utils import get_current_attn_backends
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.platforms import current_platform
    from vllm.v1.attention.backends.utils import (
        get_supported_kv_cache_layouts,
        record_kv_cache_layout,
        resolve_kv_cache_layout,
    )
    from vllm.v1.core.kv_cache_utils import get_kv_cache_configs, get_max_concurrency_for_kv_cache_config
    from vllm.v1.kv_cache_interface import AttentionSpec
    from vllm.v1.worker.utils import customize_attention_spec

    # What the executor does once the model is loaded: the platform aligns the block to the backends (and, for
    # a hybrid model, raises it to hold a state and pads the state's page to it).
    current_platform.update_block_size_for_backend(vllm_config)
    specs = {}
    modules = {}
    for name, module in get_layers_from_vllm_config(vllm_config, AttentionLayerBase).items():
        spec = module.get_kv_cache_spec(vllm_config)
        if spec is not None:
            if isinstance(spec, AttentionSpec):
                spec = customize_attention_spec(module.get_attn_backend(), spec)
            specs[name] = spec
            modules[name] = type(module).__name__
    # The engine core resolves one cache layout for the model's backends before it sizes the cache.
    supported = get_supported_kv_cache_layouts(get_current_attn_backends(vllm_config))
    backends = [layout.name for layout in supported]
    record_kv_cache_layout(
        vllm_config.cache_config, resolve_kv_cache_layout(vllm_config, [backends], specs.values()).name
    )
    kcc = get_kv_cache_configs(vllm_config, [specs], [memory_bytes])[0]
    return {
        "block_size": vllm_config.cache_config.block_size,
        "mamba_page_size_padded": vllm_config.cache_config.mamba_page_size_padded,
        "num_blocks": kcc.num_blocks,
        "groups": [
            {
                "spec": type(g.kv_cache_spec).__name__,
                "block_size": g.kv_cache_spec.block_size,
                "page_size_bytes": g.kv_cache_spec.page_size_bytes,
                "layers": len(g.layer_names),
            }
            for g in kcc.kv_cache_groups
        ],
        "max_concurrency": get_max_concurrency_for_kv_cache_config(vllm_config, kcc),
        "layers": [
            {
                "module": modules[name],
                "spec": type(spec).__name__,
                "block_size": spec.block_size,
                "kv_heads": getattr(spec, "num_kv_heads", None),
                "head_size": getattr(spec, "head_size", None),
                "head_size_v": getattr(spec, "head_size_v", None),
                "sliding_window": getattr(spec, "sliding_window", None),
            }
            for name, spec in specs.items()
        ],
    }


def _tower_count(config: dict[str, Any], tower: str | list[str]) -> dict[str, Any]:
    """Parameters of transformers' image-text class for ``config`` in its module named ``tower`` (or in
    the modules a list names: a tower and its projector)."""
    import torch
    from transformers import AutoConfig, AutoModelForImageTextToText

    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        with torch.device("meta"):
            model = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(folder))
    module = dict(model.named_modules())
    parameters: dict[int, Any] = {}
    for part in [tower] if isinstance(tower, str) else tower:
        path = next(name for name in module if name.split(".")[-1] == part)
        parameters |= {id(p): p for p in module[path].parameters()}
    count = sum(p.numel() for p in parameters.values())
    return {"architecture": type(model).__name__, "parameters": count, "attention": None, "error": None}


def _sub_config_count(config: dict[str, Any], key: str) -> dict[str, Any]:
    """Parameters of transformers' ``AutoModel`` for the sub-config ``key`` of ``config``."""
    import torch
    from transformers import AutoConfig, AutoModel

    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump(config, f)
        sub = getattr(AutoConfig.from_pretrained(folder), key)
    with torch.device("meta"):
        model = AutoModel.from_config(sub)
    count = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    return {"architecture": type(model).__name__, "parameters": count, "attention": None, "error": None}


def _register_plain(model_type: str) -> None:
    """A config class for ``model_type`` that keeps every field of the file (transformers has none)."""
    from transformers import AutoConfig, PretrainedConfig

    try:
        AutoConfig.for_model(model_type)
    except ValueError:
        plain = type(f"Plain_{model_type}", (PretrainedConfig,), {"model_type": model_type})
        AutoConfig.register(model_type, plain)


def main() -> None:
    cases = json.load(sys.stdin)
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 29500
    answers = []
    for case in cases:
        try:
            with contextlib.redirect_stdout(sys.stderr):  # vLLM's own prints stay off the answer
                if case.get("plain_config"):
                    _register_plain(case["config"]["model_type"])
                if case.get("puzzle_config"):
                    _register_puzzle_config()
                if case.get("tower"):
                    answer = _tower_count(case["config"], case["tower"])
                elif case.get("sub_config"):
                    answer = _sub_config_count(case["config"], case["sub_config"])
                else:
                    named = case["config"].get("architectures") or [""]
                    shims = contextlib.ExitStack()  # GLM-5.3's wrapper needs two stand-ins
                    if str(named[0]).startswith("MiniMaxM3"):
                        shims.enter_context(_minimax_m3_on_cpu())
                    elif named[0] == "DeepseekV41ForCausalLM":
                        shims.enter_context(_deepseek_v41_on_cpu(case["config"]))
                    elif named[0] == "Dots3NoteForCausalLM":
                        shims.enter_context(_dots3_note_on_cpu())
                    elif str(named[0]).startswith("Qwen4Exp"):
                        shims.enter_context(_qwen4_exp_on_cpu())
                    elif named[0] == "OlmoHybridForCausalLM":
                        shims.enter_context(_olmo_hybrid_on_cpu())
                    elif named[0] in TRITON_ONLY_ARGUMENTS:
                        shims.enter_context(_triton_argument_dropped(TRITON_ONLY_ARGUMENTS[named[0]]))
                    elif case.get("timm"):
                        shims.enter_context(_timm_on_path())
                    elif case.get("torchvision_stand_in"):
                        shims.enter_context(_torchvision_stand_in())
                    if case.get("sparse_attention_stand_in"):
                        shims.enter_context(_sparse_attention_on_cpu())
                    if case.get("relu2_moe_stand_in"):
                        shims.enter_context(_relu2_moe_on_cpu())
                    if case.get("pangu_sink_stand_in"):
                        shims.enter_context(_pangu_sink_on_meta())
                    with shims:
                        answer = _count(
                            case["config"],
                            port,
                            case.get("hf_quant_config"),
                            case.get("kv_cache"),
                            bool(case.get("model_runner_v2")),
                            case.get("tokens"),
                        )
        except Exception as exc:  # the answer names the refusal; the test decides what it means
            error = f"{type(exc).__name__}: {exc}"[:300]
            answer = {"architecture": None, "parameters": None, "attention": None, "error": error}
        answers.append({"id": case["id"], **answer})
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
