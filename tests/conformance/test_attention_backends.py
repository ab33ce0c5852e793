"""fp8 KV cache on a GPU without fp8 tensor cores: which attention backend vLLM 0.32 serves it with.

capacity offers an fp8 KV cache on the A100 (SM80, ``GPU.fp8_kv_cache``) because vLLM keeps one there:
its CUDA platform tries FlashAttention first, which refuses fp8 below Hopper (FA3), and then FlashInfer and
Triton attention, which take it. The CPU build cannot import the CUDA platform, so the backends are asked
directly (vllm_attention_probe.py, each backend's own ``validate_configuration`` at capability 8.0), and the
CUDA platform's priority lists are read from its source. FlashInfer is not installed in the CPU build; Triton
attention is, and it decides here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import capacity

from .harness import HERE, VllmEnv

pytestmark = pytest.mark.conformance

SM80 = [8, 0]
CASES: dict[str, dict[str, Any]] = {
    "flash-attn-fp8": {"backend": "FLASH_ATTN", "kv_cache_dtype": "fp8", "use_mla": False, "head_size": 128},
    "flash-attn-auto": {
        "backend": "FLASH_ATTN",
        "kv_cache_dtype": "auto",
        "use_mla": False,
        "head_size": 128,
    },
    "triton-fp8": {"backend": "TRITON_ATTN", "kv_cache_dtype": "fp8", "use_mla": False, "head_size": 128},
    "triton-mla-fp8": {"backend": "TRITON_MLA", "kv_cache_dtype": "fp8", "use_mla": True, "head_size": 576},
}


@pytest.fixture(scope="module")
def answers(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    payload = json.dumps([{"id": cid, "capability": SM80, **case} for cid, case in CASES.items()])
    out = vllm_env.run([str(HERE / "vllm_attention_probe.py")], stdin=payload, timeout=300)
    return {a["id"]: a for a in json.loads(out.strip().splitlines()[-1])}


def test_flash_attention_refuses_fp8_below_hopper_and_takes_the_models_dtype(answers: dict[str, Any]) -> None:
    assert answers["flash-attn-auto"]["reasons"] == []
    refusal = " ".join(answers["flash-attn-fp8"]["reasons"])
    assert "FA3" in refusal and "SM90" in refusal


def test_triton_attention_keeps_an_fp8_kv_cache_on_sm80_dense_and_mla(answers: dict[str, Any]) -> None:
    assert answers["triton-fp8"]["reasons"] == []
    assert answers["triton-mla-fp8"]["reasons"] == []


def test_the_cuda_platform_falls_back_to_them_after_flash_attention(answers: dict[str, Any]) -> None:
    """Every dense list names Triton attention after FlashAttention; the one below SM100 tries FlashAttention,
    then FlashInfer, then Triton; every MLA list names Triton MLA."""
    lists = answers["cuda-priorities"]["lists"]
    dense = [names for names in lists if "FLASH_ATTN" in names]
    assert dense and all(names.index("FLASH_ATTN") < names.index("TRITON_ATTN") for names in dense)
    assert any(
        names.index("FLASH_ATTN") < names.index("FLASHINFER") < names.index("TRITON_ATTN") for names in dense
    )
    mla = [names for names in lists if any(n.endswith("_MLA") for n in names)]
    assert mla and all("TRITON_MLA" in names for names in mla)


def test_capacity_offers_fp8_kv_cache_on_the_a100_and_says_what_serves_it() -> None:
    a100 = capacity.gpu_spec("a100-80gb")
    assert a100.fp8_kv_cache and not a100.supports_fp8
    result = capacity.plan(
        capacity.catalog_architecture("llama-3.1-8b"),
        a100,
        capacity.Workload(max_model_len=8192, concurrency=100),
        capacity.SLO(),
        capacity.Limits(kv_cache_dtype="fp8"),
    )
    assert result.plan is not None and result.plan.kv_cache_dtype == "fp8"
    assert any("Triton" in w for w in result.warnings)
