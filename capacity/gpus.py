"""GPU catalog: memory as the driver reports it, HBM bandwidth, dense peaks, interconnect.

Memory is ``memory.total`` as ``nvidia-smi`` reports it, in MiB, which is also the value GPU Feature
Discovery publishes in the ``nvidia.com/gpu.memory`` node label (for AMD, ``rocm-smi``'s VRAM total).
CUDA's own ``cudaMemGetInfo`` total is a few hundred MiB lower (79.18 GiB measured on an H100 whose
nvidia-smi total is 81,559 MiB = 79.65 GiB); the difference is kept in ``driver_reserved_bytes`` so the
planner multiplies ``gpu_memory_utilization`` by the total vLLM actually sees. Where it was not measured
it is 0, which makes the budget at most about 1% optimistic.

Peaks are dense (no 2:4 sparsity). Bandwidths are decimal (1 TB/s = 1e12 B/s).
"""

from __future__ import annotations

from dataclasses import dataclass

from capacity.errors import CapacityError
from capacity.quantization import WeightFormat

__all__ = ["GPU", "gpu_ids", "gpu_spec", "native_support"]

MiB = 2**20
TB = 10**12
GB = 10**9

#: Native weight formats by generation (tensor-core data types vLLM's fast kernels use).
AMPERE_FORMATS = frozenset({"int8", "int4"})
HOPPER_ADA_FORMATS = frozenset({"fp8", "int8", "int4"})  # sm89 / sm90: FP8 tensor cores, no FP4
BLACKWELL_FORMATS = frozenset({"fp8", "fp4", "mxfp8", "int8", "int4"})  # sm100: FP4 and MX block scales
CDNA3_FORMATS = frozenset({"fp8", "int8", "int4"})  # MI300X: fp8 (e4m3fnuz), no FP4


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
    """fp8 KV cache and fp8 matmuls are supported in hardware (Hopper, Ada, Blackwell, CDNA3)."""
    large_gpu_defaults: bool
    """vLLM's ``vllm serve`` picks the large defaults (max_num_batched_tokens 8192) for this GPU:
    >= 70 GiB and not an A100 (vLLM ``engine/arg_utils.py``)."""
    native_formats: frozenset[str] = frozenset()
    """Quantized weight formats whose fast kernels run natively (``WeightFormat.compute_format``): ``int8``
    and ``int4`` everywhere here, ``fp8`` with fp8 tensor cores (Hopper, Ada, Blackwell, CDNA3), ``fp4`` and
    ``mxfp8`` on Blackwell only. Left empty, it is derived from ``supports_fp8``."""
    vendor: str = "nvidia"
    """``nvidia`` or ``amd``: which kernels vLLM falls back to for a format the GPU lacks."""

    def __post_init__(self) -> None:
        if not self.native_formats:
            derived = {"int8", "int4"} | ({"fp8"} if self.supports_fp8 else set())
            object.__setattr__(self, "native_formats", frozenset(derived))

    @property
    def cuda_total_bytes(self) -> int:
        """Total device memory as vLLM sees it (``torch.cuda.mem_get_info``)."""
        return self.memory_bytes - self.driver_reserved_bytes


_GPUS: tuple[GPU, ...] = (
    # NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100, "H100 SXM"): 80 GB HBM3, 3.35 TB/s,
    # BF16 1,979 TFLOPS and FP8 3,958 TFLOPS *with sparsity* (dense = half), NVLink 900 GB/s.
    # Memory: nvidia-smi 81559 MiB; CUDA reports 79.18 GiB total on the same card (llm-d measurements).
    GPU(
        id="h100-sxm",
        name="NVIDIA H100 SXM 80GB",
        product_labels=("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-SXM5-80GB"),
        memory_bytes=81559 * MiB,
        driver_reserved_bytes=479
        * MiB,  # llm-d measured 79.18 GiB CUDA total (notes/vllm-memory-accounting.md)
        hbm_bytes_per_second=3.35 * TB,
        bf16_flops_per_second=989.4e12,
        fp8_flops_per_second=1978.9e12,
        interconnect_bytes_per_second=450 * GB,  # 900 GB/s bidirectional NVLink 4
        supports_fp8=True,
        large_gpu_defaults=True,
        native_formats=HOPPER_ADA_FORMATS,
    ),
    # Same datasheet, "H100 PCIe": 80 GB HBM2e, 2.0 TB/s, BF16 1,513 / FP8 3,026 TFLOPS sparse; NVLink
    # bridge 600 GB/s between pairs only, so the node-wide link is PCIe Gen5 x16 (64 GB/s per direction).
    GPU(
        id="h100-pcie",
        name="NVIDIA H100 PCIe 80GB",
        product_labels=("NVIDIA-H100-PCIe",),
        memory_bytes=81559 * MiB,
        driver_reserved_bytes=479 * MiB,  # same memory part as the SXM card
        hbm_bytes_per_second=2.0 * TB,
        bf16_flops_per_second=756.5e12,
        fp8_flops_per_second=1513e12,
        interconnect_bytes_per_second=64 * GB,
        supports_fp8=True,
        large_gpu_defaults=True,
        native_formats=HOPPER_ADA_FORMATS,
    ),
    # NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): 141 GB HBM3e, 4.8 TB/s, same Hopper
    # compute as H100 SXM, NVLink 900 GB/s. nvidia-smi: 143771 MiB.
    GPU(
        id="h200",
        name="NVIDIA H200 141GB",
        product_labels=("NVIDIA-H200", "NVIDIA-H200-141GB-HBM3e"),
        memory_bytes=143771 * MiB,
        driver_reserved_bytes=0,  # not measured here: taken as 0 (budget < 1% optimistic)
        hbm_bytes_per_second=4.8 * TB,
        bf16_flops_per_second=989.4e12,
        fp8_flops_per_second=1978.9e12,
        interconnect_bytes_per_second=450 * GB,
        supports_fp8=True,
        large_gpu_defaults=True,
        native_formats=HOPPER_ADA_FORMATS,
    ),
    # NVIDIA A100 datasheet (nvidia.com/en-us/data-center/a100): 80 GB HBM2e 2,039 GB/s, 40 GB HBM2
    # 1,555 GB/s, BF16 312 TFLOPS dense, no fp8, NVLink 3 600 GB/s. nvidia-smi: 81920 / 40960 MiB.
    GPU(
        id="a100-80gb",
        name="NVIDIA A100 SXM4 80GB",
        product_labels=("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-80GB-PCIe"),
        memory_bytes=81920 * MiB,
        driver_reserved_bytes=0,  # not measured here: taken as 0 (budget < 1% optimistic)
        hbm_bytes_per_second=2.039 * TB,
        bf16_flops_per_second=312e12,
        fp8_flops_per_second=0.0,
        interconnect_bytes_per_second=300 * GB,
        supports_fp8=False,
        large_gpu_defaults=False,  # vLLM keeps A100-80GB in the small tier (mnbt 2048)
        native_formats=AMPERE_FORMATS,
    ),
    GPU(
        id="a100-40gb",
        name="NVIDIA A100 SXM4 40GB",
        product_labels=("NVIDIA-A100-SXM4-40GB", "NVIDIA-A100-PCIE-40GB"),
        memory_bytes=40960 * MiB,
        driver_reserved_bytes=0,  # not measured here: taken as 0 (budget < 1% optimistic)
        hbm_bytes_per_second=1.555 * TB,
        bf16_flops_per_second=312e12,
        fp8_flops_per_second=0.0,
        interconnect_bytes_per_second=300 * GB,
        supports_fp8=False,
        large_gpu_defaults=False,
        native_formats=AMPERE_FORMATS,
    ),
    # NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s): 48 GB GDDR6, 864 GB/s, BF16 733 / FP8
    # 1,466 TFLOPS sparse (362/733 dense), no NVLink: PCIe Gen4 x16 32 GB/s per direction. nvidia-smi 46068
    # MiB.
    GPU(
        id="l40s",
        name="NVIDIA L40S 48GB",
        product_labels=("NVIDIA-L40S",),
        memory_bytes=46068 * MiB,
        driver_reserved_bytes=0,  # not measured here: taken as 0 (budget < 1% optimistic)
        hbm_bytes_per_second=864 * GB,
        bf16_flops_per_second=362.05e12,
        fp8_flops_per_second=733e12,
        interconnect_bytes_per_second=32 * GB,
        supports_fp8=True,
        large_gpu_defaults=False,
        native_formats=HOPPER_ADA_FORMATS,
    ),
    # NVIDIA L4 datasheet (nvidia.com/en-us/data-center/l4): 24 GB GDDR6, 300 GB/s, BF16 242 / FP8 485
    # TFLOPS sparse (121/242.5 dense), PCIe Gen4 x16. nvidia-smi 23034 MiB.
    GPU(
        id="l4",
        name="NVIDIA L4 24GB",
        product_labels=("NVIDIA-L4",),
        memory_bytes=23034 * MiB,
        driver_reserved_bytes=0,  # not measured here: taken as 0 (budget < 1% optimistic)
        hbm_bytes_per_second=300 * GB,
        bf16_flops_per_second=121e12,
        fp8_flops_per_second=242.5e12,
        interconnect_bytes_per_second=32 * GB,
        supports_fp8=True,
        large_gpu_defaults=False,
        native_formats=HOPPER_ADA_FORMATS,
    ),
    # NVIDIA DGX B200 / HGX B200 spec (nvidia.com/en-us/data-center/dgx-b200): 180 GB HBM3e per GPU, 8 TB/s,
    # FP8 9 PFLOPS and BF16 4.5 PFLOPS sparse per GPU (4.5 / 2.25 dense), NVLink 5 1.8 TB/s. nvidia-smi 183359
    # MiB.
    GPU(
        id="b200",
        name="NVIDIA B200 180GB",
        product_labels=("NVIDIA-B200",),
        memory_bytes=183359 * MiB,
        driver_reserved_bytes=0,  # not measured here: taken as 0 (budget < 1% optimistic)
        hbm_bytes_per_second=8.0 * TB,
        bf16_flops_per_second=2250e12,
        fp8_flops_per_second=4500e12,
        interconnect_bytes_per_second=900 * GB,
        supports_fp8=True,
        large_gpu_defaults=True,
        native_formats=BLACKWELL_FORMATS,
    ),
    # AMD Instinct MI300X datasheet (amd.com/en/products/accelerators/instinct/mi300/mi300x.html): 192 GB
    # HBM3,
    # 5.3 TB/s, BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS dense, Infinity Fabric 896 GB/s aggregate
    # (7 links x 64 GB/s per direction). rocm-smi VRAM total 205,822,885,888 B.
    GPU(
        id="mi300x",
        name="AMD Instinct MI300X 192GB",
        product_labels=("AMD-Instinct-MI300X", "AMD-Instinct-MI300X-OAM"),
        memory_bytes=205_822_885_888,
        driver_reserved_bytes=0,
        hbm_bytes_per_second=5.3 * TB,
        bf16_flops_per_second=1307.4e12,
        fp8_flops_per_second=2614.9e12,
        interconnect_bytes_per_second=448 * GB,
        supports_fp8=True,
        large_gpu_defaults=True,
        native_formats=CDNA3_FORMATS,
        vendor="amd",
    ),
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
    """A GPU by catalog id or GPU Feature Discovery product label, case-insensitive."""
    if not isinstance(id_or_label, str):
        raise CapacityError(f"GPU {id_or_label!r} is not a string; expected one of {', '.join(gpu_ids())}")
    key = id_or_label.strip().lower()
    gpu = _BY_KEY.get(key)
    if gpu is None:
        # GFD appends "-SHARED" for time-sliced GPUs and MIG suffixes; accept a label that starts with ours.
        for known, candidate in _BY_KEY.items():
            if key.startswith(known + "-shared"):
                return candidate
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
