"""GPU catalog: memory as the driver reports it, HBM bandwidth, dense peaks, interconnect.

Memory is ``memory.total`` as ``nvidia-smi`` reports it, in MiB, which is also the value GPU Feature
Discovery publishes in the ``nvidia.com/gpu.memory`` node label (for AMD, ``rocm-smi``'s VRAM total).
CUDA's own ``cudaMemGetInfo`` total is a few hundred MiB lower (79.18 GiB measured on an H100 whose
nvidia-smi total is 81,559 MiB = 79.65 GiB); the difference is kept in ``driver_reserved_bytes`` so the
planner multiplies ``gpu_memory_utilization`` by the total vLLM actually sees. Where it was not measured
it is 0, which makes the budget at most about 1% optimistic.

Peaks are dense (no 2:4 sparsity). Bandwidths are decimal (1 TB/s = 1e12 B/s). The entries are data,
``capacity/gpus.json``, each with the datasheet it comes from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from capacity.architecture import Architecture
from capacity.errors import CapacityError
from capacity.quantization import WeightFormat

__all__ = ["GPU", "attention_support", "gpu_ids", "gpu_spec", "native_support"]

#: GPU-to-GPU links inside a node that the catalog knows.
INTERCONNECTS = ("nvlink", "xgmi", "pcie")
MiB = 2**20
TB = 10**12
GB = 10**9


@dataclass(frozen=True, kw_only=True)
class GPU:
    """One accelerator model's capacity facts."""

    id: str
    """Catalog id (``h100-sxm``)."""
    name: str
    """Marketing name."""
    product_labels: tuple[str, ...]
    """GPU Feature Discovery ``nvidia.com/gpu.product`` values (or AMD's product name) that mean this GPU."""
    memory_bytes: int
    """Device memory as the driver reports it (nvidia-smi / GFD ``gpu.memory``)."""
    driver_reserved_bytes: int
    """Part of ``memory_bytes`` CUDA never reports as total (``cudaMemGetInfo``); vLLM's budget excludes
    it."""
    hbm_bytes_per_second: float
    """Peak device-memory bandwidth."""
    bf16_flops_per_second: float
    """Dense bf16/fp16 tensor-core peak."""
    fp8_flops_per_second: float
    """Dense fp8 tensor-core peak (0 where fp8 is not supported)."""
    interconnect_bytes_per_second: float
    """GPU-to-GPU bandwidth per GPU, one direction (NVLink / Infinity Fabric; PCIe where there is none)."""
    supports_fp8: bool
    """fp8 tensor cores: fp8 matmuls run natively (Hopper, Ada, Blackwell, CDNA3)."""
    large_gpu_defaults: bool
    """vLLM's ``vllm serve`` picks the large defaults (max_num_batched_tokens 8192) for this GPU:
    >= 70 GiB and not an A100 (vLLM ``engine/arg_utils.py``)."""
    native_formats: frozenset[str] = frozenset()
    """Quantized weight formats whose fast kernels run natively (``WeightFormat.compute_format``): ``int8``
    and ``int4`` everywhere here, ``fp8`` with fp8 tensor cores (Hopper, Ada, Blackwell, CDNA3), ``fp4`` and
    ``mxfp8`` on Blackwell only. Left empty, it is derived from ``supports_fp8``."""
    vendor: str = "nvidia"
    """``nvidia`` or ``amd``: which kernels vLLM falls back to for a format the GPU lacks."""
    interconnect: str = "nvlink"
    """The GPU-to-GPU link inside a node: ``nvlink`` (NVLink/NVSwitch), ``xgmi`` (AMD Infinity Fabric) or
    ``pcie`` (PCIe only). vLLM 0.32's custom all-reduce is off on more than two PCIe-only GPUs
    (``device_communicators/custom_all_reduce.py``), so their all-reduces go through NCCL over PCIe."""
    price_usd_per_hour: float = 0.0
    """On-demand price per GPU-hour used to rank GPU products by cost (``gpus.json`` says where each comes
    from; the CLI's ``--price`` and the operator's prices override it)."""
    fp8_kv_cache: bool = True
    """vLLM can keep the KV cache in fp8 on this GPU, which halves its bytes. Without fp8 tensor cores too:
    vLLM 0.32 on SM80 (A100) passes over FlashAttention, whose fp8 path needs Hopper (FA3), to FlashInfer or
    Triton attention, which dequantize in the kernel (``platforms/cuda.py``; ``tests/conformance/
    test_attention_backends.py`` asks the backends). ``gpus.json``'s ``fp8_kv_cache: false`` marks a GPU
    where it cannot."""
    compute_capability: str = ""
    """CUDA's ``major.minor`` (``9.0`` for Hopper) or, for AMD, the gfx target (``gfx942``): which attention
    kernels vLLM has for a model (:func:`attention_support`)."""
    network_bytes_per_second: float = 50e9
    """Node-to-node bandwidth per GPU, one direction: 400 Gb/s, one ConnectX-7 / 400G NIC per GPU as
    NVIDIA's HGX reference design has it (``network_gb_per_second`` in ``gpus.json`` overrides it; the
    planner's ``Limits.network_bytes_per_second`` overrides both for a cluster with other NICs)."""

    def __post_init__(self) -> None:
        if self.interconnect not in INTERCONNECTS:
            raise CapacityError(
                f"GPU {self.id}: interconnect {self.interconnect!r} is not one of {', '.join(INTERCONNECTS)}"
            )
        if not self.native_formats:
            derived = {"int8", "int4"} | ({"fp8"} if self.supports_fp8 else set())
            object.__setattr__(self, "native_formats", frozenset(derived))

    @property
    def cuda_total_bytes(self) -> int:
        """Total device memory as vLLM sees it (``torch.cuda.mem_get_info``)."""
        return self.memory_bytes - self.driver_reserved_bytes


def _from_entry(entry: dict[str, Any]) -> GPU:
    """One ``gpus.json`` entry (units as datasheets state them) as a :class:`GPU`."""
    return GPU(
        id=entry["id"],
        name=entry["name"],
        vendor=entry["vendor"],
        product_labels=tuple(entry["product_labels"]),
        memory_bytes=entry["memory_mib"] * MiB,
        driver_reserved_bytes=entry["driver_reserved_mib"] * MiB,
        hbm_bytes_per_second=entry["hbm_tb_per_second"] * TB,
        bf16_flops_per_second=entry["bf16_tflops"] * 1e12,
        fp8_flops_per_second=entry["fp8_tflops"] * 1e12,
        interconnect_bytes_per_second=entry["interconnect_gb_per_second"] * GB,
        supports_fp8=entry["supports_fp8"],
        fp8_kv_cache=entry.get("fp8_kv_cache", True),
        large_gpu_defaults=entry["large_gpu_defaults"],
        native_formats=frozenset(entry["native_formats"]),
        network_bytes_per_second=entry.get("network_gb_per_second", 50.0) * GB,
        compute_capability=entry["compute_capability"],
        interconnect=entry["interconnect"],
        price_usd_per_hour=entry["price_usd_per_hour"],
    )


#: The catalog, from ``capacity/gpus.json`` (each entry names the datasheet its numbers come from).
_GPUS: tuple[GPU, ...] = tuple(
    _from_entry(e)
    for e in json.loads((resources.files("capacity") / "gpus.json").read_text(encoding="utf-8"))["gpus"]
)

_BY_KEY: dict[str, GPU] = {}
for _gpu in _GPUS:
    _BY_KEY[_gpu.id.lower()] = _gpu
    for _label in _gpu.product_labels:
        _BY_KEY[_label.lower()] = _gpu


def gpu_ids() -> list[str]:
    """Catalog ids, in catalog order."""
    return [g.id for g in _GPUS]


def gpu_spec(id_or_label: str) -> GPU:
    """A GPU by catalog id or GPU Feature Discovery product label, case-insensitive; or by the start of
    one catalog id (``mi300`` is ``mi300x``). A start that several ids share (``h100``: the PCIe card has
    two thirds of the SXM's memory bandwidth) is refused, naming them."""
    if not isinstance(id_or_label, str):
        raise CapacityError(f"GPU {id_or_label!r} is not a string; expected one of {', '.join(gpu_ids())}")
    key = id_or_label.strip().lower()
    gpu = _BY_KEY.get(key)
    if gpu is None:
        # GFD appends "-SHARED" for time-sliced GPUs and MIG suffixes; accept a label that starts with ours.
        for known, candidate in _BY_KEY.items():
            if key.startswith(known + "-shared"):
                return candidate
        starts = [g for g in _GPUS if key and g.id.lower().startswith(key)]
        if len(starts) == 1:
            return starts[0]
        if starts:
            raise CapacityError(
                f"GPU {id_or_label!r} could be {' or '.join(g.id for g in starts)}; name one "
                "(their memory or bandwidth differ)"
            )
        raise CapacityError(
            f"unknown GPU {id_or_label!r}; expected one of {', '.join(gpu_ids())} "
            "or a GPU Feature Discovery product label such as NVIDIA-H100-80GB-HBM3"
        )
    return gpu


def native_support(gpu: GPU, fmt: WeightFormat) -> str | None:
    """None when ``gpu`` runs ``fmt``'s fast kernel natively (or nothing is quantized); else one sentence
    saying which slower path vLLM 0.32 takes. From vLLM's kernel tables (``kernels/linear/__init__.py``):
    FP8 without FP8 tensor cores falls to ``MarlinFP8ScaledMMLinearKernel`` (and fbgemm's ``use_marlin``
    below sm89), NVFP4 to ``MarlinNvFp4LinearKernel`` (it logs "Your GPU does not have native support for FP4
    computation"), MXFP8 to ``MarlinMxfp8LinearKernel``; ROCm has only emulation for NVFP4 and MXFP8.
    Weight-only formats (W4A16, W8A16, gpt-oss MXFP4, whose backends run bf16 activations even on
    Blackwell) compute in bf16 on every GPU, so NVIDIA GPUs run them as intended."""
    wanted = fmt.compute_format
    if wanted is None or wanted in gpu.native_formats:
        return None
    amd = gpu.vendor == "amd"
    if fmt.weight_only and not amd:
        return None  # Marlin / Triton W4A16 and W8A16 kernels: sm75 and newer
    if wanted == "fp8":
        return (
            f"{gpu.name} has no FP8 tensor cores: vLLM runs the FP8 weights through the Marlin weight-only "
            "kernel (dequantized to bf16 in the matmul), so they save memory but compute at bf16 speed"
        )
    if wanted == "fp4":
        if amd:
            return (
                f"{gpu.name} has no FP4 support in vLLM's ROCm kernels: it emulates {fmt.method} by "
                "dequantizing the weights to bf16 for every matmul, much slower than bf16 weights"
            )
        return (
            f"{gpu.name} has no FP4 tensor cores: vLLM runs the {fmt.method} weights through the Marlin "
            "weight-only kernel (W4A16, bf16 activations), so they save memory but prefill computes at "
            "bf16 speed"
        )
    if wanted == "mxfp8":
        if amd:
            return (
                f"{gpu.name} runs MXFP8 weights only by emulation in vLLM (dequantized to bf16), much slower"
            )
        return (
            f"{gpu.name} has no MXFP8 tensor cores: vLLM runs the weights through the Marlin MXFP8 "
            "weight-only kernel, so they save memory but compute at bf16 speed"
        )
    return f"{gpu.name} has no native {wanted} kernel in vLLM: expect a slower fallback path"


#: CUDA majors with a DeepSeek-V4 attention kernel in vLLM 0.32: FlashMLA's sparse kernels on Hopper and
#: Blackwell datacenter parts (``DeepseekV4SparseMLABackend.supports_compute_capability``: 9 or 10),
#: FlashInfer's on SM12x.
_COMPRESSED_ATTENTION_MAJORS = ("9", "10", "12")


def _has_sparse_mla(gpu: GPU) -> bool:
    return gpu.vendor != "nvidia" or gpu.compute_capability.split(".")[0] in _COMPRESSED_ATTENTION_MAJORS


#: CUDA majors vLLM 0.32's Inkling attention runs on: its relative-position attention is FlashAttention 4's
#: (CuTe DSL, ``models/inkling/nvidia/ops/fa4_rel_attention.py``: a score-mod path on Hopper, the
#: sheared-bias one on Blackwell datacenter parts), which has no SM8x kernel and no paged-KV forward on SM12x
#: (vLLM issue #51405: it fails there after the weights load). Its AMD build (``models/inkling/amd``) has
#: kernels of its own.
_INKLING_ATTENTION_MAJORS = ("9", "10", "11")


def _has_inkling_attention(gpu: GPU) -> bool:
    return gpu.vendor != "nvidia" or gpu.compute_capability.split(".")[0] in _INKLING_ATTENTION_MAJORS


def _has_hopper_sparse_mla(gpu: GPU) -> bool:
    """FlashAttention's sparse MLA (``FlashAttnMLASparseBackend``: compute capability 9 only, no ROCm build),
    which dots3-note's full layers are pinned to."""
    return gpu.vendor == "nvidia" and gpu.compute_capability.split(".")[0] == "9"


def attention_support(gpu: GPU, arch: Architecture) -> str | None:
    """Why vLLM 0.32 has no attention kernel for ``arch`` on ``gpu``, or None when it has one. DeepSeek-V4's
    sparse attention runs on FlashMLA (compute capability 9.x, 10.x), FlashInfer (12.x) and, on AMD, vLLM's
    ROCm class; an A100 or an Ada GPU (8.x) has none, and vLLM stops at start. So do HY V4's and GLM-5.3's
    sparse layers (their attention asks for a sparse MLA backend and refuses a dense one). Inkling's
    relative-position attention runs on FlashAttention 4 (9.x, 10.x, 11.x) and on AMD."""
    if arch.relative_position_dim and not _has_inkling_attention(gpu):
        fits = ", ".join(g.id for g in _GPUS if _has_inkling_attention(g))
        return (
            f"{arch.name}'s relative-position attention (Inkling) runs on vLLM's FlashAttention 4 kernels "
            f"(compute capability 9.x, 10.x or 11.x) or its AMD build; {gpu.name} is "
            f"{gpu.compute_capability}, and vLLM has no kernel for it there; accepted GPUs: {fits}"
        )
    if arch.mla_cache_row and arch.mixer_counts["mla"] and not _has_hopper_sparse_mla(gpu):
        fits = ", ".join(g.id for g in _GPUS if _has_hopper_sparse_mla(g))
        return (
            f"{arch.name}'s full layers run on the sparse MLA backend vLLM 0.32 pins for dots3-note "
            f"(FlashAttention's, compute capability 9.x only); {gpu.name} is "
            f"{gpu.compute_capability or 'AMD'}, and vLLM has no kernel for it there; accepted GPUs: {fits}"
        )
    if not (arch.compressed_attention or arch.sparse_backend_required) or _has_sparse_mla(gpu):
        return None
    fits = ", ".join(g.id for g in _GPUS if _has_sparse_mla(g))
    which = "DeepSeek-V4" if arch.compressed_attention else "its sparse MLA layers"
    return (
        f"{arch.name}'s sparse attention ({which}) runs on vLLM's FlashMLA kernels (compute capability "
        f"9.x or 10.x) or FlashInfer's (12.x); {gpu.name} is {gpu.compute_capability}, and vLLM has no "
        f"kernel for it there; accepted GPUs: {fits}"
    )
