"""Kimi-Linear's KV cache, as vLLM's own code accounts it: MLA layers among Kimi Delta Attention layers.

A Kimi-Linear engine holds a latent per token in its MLA layers and a constant state per sequence in its KDA
layers (a conv over q, k and v in the model dtype, a ``head_dim x head_dim`` recurrent state per head in
float32). vLLM's hybrid allocator raises the attention block until one block's latents are at least one
state (a multiple of 128 tokens for an MLA model) and pads the state to that page; the layers are then
grouped and share one pool of blocks. capacity must say the same block size, page, groups, blocks and
concurrency for the same bytes.

This CPU build cannot start the engine (Kimi's MLA post-processes weights the CPU build has already packed
away, and its KDA kernels are Triton's), so vllm_weights_probe.py runs the accounting the engine core would
run, by vLLM's own code: the engine config (where the platform aligns the block), the model class built on
the meta device, every layer's ``get_kv_cache_spec`` and ``get_kv_cache_configs``. The parameters are held to
the same class in test_parameter_counts.py (parameter_cases.json) and, for the real 48B checkpoint, here.
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity
from tests.builders import cpu_engine_layout

from .harness import VllmEnv, assert_blocks_as_accounted, cpu_mamba_ssm_cache_dtype, kv_case, weights_probe

pytestmark = pytest.mark.conformance

_TINY: dict[str, Any] = {
    "architectures": ["KimiLinearForCausalLM"],
    "model_type": "kimi_linear",
    "dtype": "bfloat16",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
    "first_k_dense_replace": 1,
    "moe_intermediate_size": 128,
    "num_experts": 8,
    "num_experts_per_token": 2,
    "num_shared_experts": 1,
    "kv_lora_rank": 64,
    "q_lora_rank": None,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "mla_use_nope": True,
    "linear_attn_config": {
        "kda_layers": [1, 2, 3],
        "full_attn_layers": [4],
        "num_heads": 4,
        "head_dim": 32,
        "short_conv_kernel_size": 4,
    },
}

#: (config, KV-cache bytes, max_model_len, max_num_batched_tokens). "tiny": a state smaller than a 128-token
#: page of latents (the page is the block's, the state padded to it); "wide-state": KDA heads of 8 x 64, a
#: state of seven such pages, so the block rises to 896 tokens; "kimi-linear-48b-a3b": the real checkpoint.
CASES: dict[str, tuple[dict[str, Any], int, int, int]] = {
    "tiny": (_TINY, 50_000_000, 2048, 2048),
    "tiny-short": (_TINY, 3_000_000, 512, 512),
    "wide-state": (
        _TINY | {"linear_attn_config": _TINY["linear_attn_config"] | {"num_heads": 8, "head_dim": 64}},
        40_000_000,
        4096,
        2048,
    ),
    "kimi-linear-48b-a3b": (
        capacity.catalog_entry("kimi-linear-48b-a3b")["config"],
        4 * 2**30,
        32768,
        8192,
    ),
}


@pytest.fixture(scope="module")
def vllm_accounts(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    return weights_probe(vllm_env, [kv_case(case, *fields) for case, fields in CASES.items()])


def _layout(arch: capacity.Architecture, length: int, mnbt: int) -> Any:
    return cpu_engine_layout(
        arch,
        max_model_len=length,
        max_num_batched_tokens=mnbt,
        mamba_ssm_cache_dtype=cpu_mamba_ssm_cache_dtype(),
    )


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_sizes_the_kv_cache_as_vllms_engine_core_would(
    vllm_accounts: dict[str, dict[str, Any]], case: str
) -> None:
    config, memory, length, mnbt = CASES[case]
    answer = vllm_accounts[case]
    assert answer["error"] is None, answer
    vllm = answer["kv_cache"]
    arch = capacity.architecture_from_config(config)
    layout = _layout(arch, length, mnbt)
    blocks = layout.num_blocks(memory)

    assert vllm["block_size"] == layout.block_size, (vllm, layout)
    # One page for every group: the state padded to the block of latents (or the block raised to hold it).
    assert {g["page_size_bytes"] for g in vllm["groups"]} == {max(g.page_bytes for g in layout.groups)}
    kinds = sorted(g["spec"] for g in vllm["groups"])
    ours = sorted(
        ("MambaSpec" if g.kind == "mamba" else "MLAAttentionSpec")
        for g in layout.groups
        for _ in range(g.count)
    )
    assert kinds == ours, (vllm["groups"], layout.groups)
    assert_blocks_as_accounted(vllm, blocks, layout.blocks_per_sequence(length))


def test_the_real_checkpoint_holds_what_vllms_class_builds(vllm_accounts: dict[str, dict[str, Any]]) -> None:
    """49,122,681,728 parameters (the checkpoint's safetensors total), 98,247,507,968 bytes: vLLM keeps the
    KDA convolutions, gate biases and decays and the experts' score bias in float32."""
    answer = vllm_accounts["kimi-linear-48b-a3b"]
    arch = capacity.catalog_architecture("kimi-linear-48b-a3b")
    assert answer["parameters"] == arch.parameters == 49_122_681_728
    assert answer["bytes"] == capacity.weight_bytes(arch)
    # the state: conv (3 x 32 heads x 128) x 3 in bf16, 32 x 128 x 128 in float32
    assert capacity.memory.state_bytes_per_sequence(arch, 1) == 3 * 4096 * 3 * 2 + 32 * 128 * 128 * 4
    assert answer["kv_cache"]["block_size"] == 1920  # 128 x ceil(2,170,880 / (128 x 1,152))
