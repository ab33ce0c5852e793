"""DeepSeek-V4: the KV cache real vLLM allocates equals capacity.kv_cache_layout's.

vLLM 0.32's CPU build starts a DeepSeek-V4 engine (``DeepseekV4ForCausalLM``) from a config.json alone, with
dummy weights and no tokenizer. The checkpoints here keep every KV dimension of DeepSeek-V4-Flash (head_dim
512, index_head_dim 128, sliding_window 128, compress ratios 4 and 128) and shrink everything else (hidden
256, 8 heads, 4 experts), so their KV-cache specs are the real model's. Their weights are unquantized (the
real file's are FP8 blocks with MXFP4 experts): the cache is fp8_ds_mla whatever the weights, and the CPU
build's FP8 GEMMs need AMX tiles (Intel Sapphire Rapids or newer), which a test machine need not have.
Each layer registers up to five caches (the sliding latent; on compressed layers the compressed latent, on
ratio-4 layers the indexer's keys, and fp32 compressor states), grouped by vLLM's packed grouping into
groups of blocks of 64, 256, 4 and 8 tokens that all draw from one pool whose block is the largest group's
bytes.

vllm_deepseek_v4_engine.py starts each case's engine (one process, one vLLM import, engines torn down in
turn) and reads back the scheduler's ``kv_cache_config``: ``num_blocks``, every group's spec, block size
and window, the KV-cache tensors' block stride (bytes a block takes on this rank), the resolved cache dtype
and vLLM's own maximum concurrency. Nothing is faked; nothing is generated (a forward pass needs Triton's
CPU backend, which this build lacks). Cases:

- the real 43-layer compress_ratios pattern (0, 0, then 4 and 128 alternating, the MTP entry last);
- a short mixed pattern 0, 4, 128, 4;
- a pattern with no ratio-4 layer (0, 128, 128, 0): no indexer, so not the block-outermost layout the
  indexer asks for; vLLM 0.32 refuses it at KV-cache setup (its page unification cannot pad MLA pages),
  and capacity refuses it naming compress_ratios;
- a pattern with no compressed layer (0, 0, 0): one page size, one group of every window;
- the short pattern with ``--kv-cache-dtype fp8`` (vLLM stores ``fp8_ds_mla`` for auto and fp8 alike) and
  with ``bfloat16`` (refused by vLLM's DeepSeek-V4 attention on its fp8_ds_mla layout, and by capacity).

CPU facts fed to capacity: in-flight tokens = max_num_batched_tokens (the CPU platform turns async
scheduling off).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import capacity

from .harness import VllmEnv, offline_engines

pytestmark = pytest.mark.conformance

# Deliberately not a whole number of blocks for any case; large enough for vLLM's startup check at
# max_model_len 512 (214 blocks of 1,002,240 B for the real pattern).
KV_BYTES = 300 * 2**20 + 12_345
MAX_MODEL_LEN = 512
MAX_NUM_BATCHED_TOKENS = 512
# The real pattern's block, established by an earlier engine run at 4 GiB (4,285 blocks).
REAL_BYTES_PER_BLOCK = 1_002_240

_TINY = {
    "architectures": ["DeepseekV4ForCausalLM"],
    "model_type": "deepseek_v4",
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "expert_dtype": "fp4",
    "hc_eps": 1e-06,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "head_dim": 512,
    "hidden_act": "silu",
    "hidden_size": 256,
    "index_head_dim": 128,
    "index_n_heads": 64,
    "index_topk": 512,
    "initializer_range": 0.02,
    "max_position_embeddings": 65536,
    "moe_intermediate_size": 128,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "norm_topk_prob": True,
    "num_attention_heads": 8,
    "num_experts_per_tok": 2,
    "num_hash_layers": 1,
    "num_key_value_heads": 1,
    "num_nextn_predict_layers": 1,
    "o_groups": 2,
    "o_lora_rank": 128,
    "q_lora_rank": 128,
    "qk_rope_head_dim": 64,
    "rms_norm_eps": 1e-06,
    "rope_scaling": {
        "beta_fast": 32,
        "beta_slow": 1,
        "factor": 16,
        "original_max_position_embeddings": 4096,
        "type": "yarn",
    },
    "rope_theta": 10000,
    "compress_rope_theta": 160000,
    "routed_scaling_factor": 1.5,
    "scoring_func": "sqrtsoftplus",
    "sliding_window": 128,
    "swiglu_limit": 10.0,
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "vocab_size": 1024,
}


def _config(ratios: list[int]) -> dict[str, Any]:
    """A tiny DeepSeek-V4 with one layer per ratio; the file's last entry is the MTP layer's (0)."""
    return _TINY | {"num_hidden_layers": len(ratios), "compress_ratios": [*ratios, 0]}


MODELS: dict[str, dict[str, Any]] = {
    "real43": _config([0, 0, *[4, 128] * 20, 4]),
    "mixed4": _config([0, 4, 128, 4]),
    "no-ratio4": _config([0, 128, 128, 0]),
    "window-only": _config([0, 0, 0]),
}

#: Models vLLM refuses at start, with words of its error: capacity refuses them too, naming the field.
REFUSED = {"no-ratio4": ("cannot be padded", "compress_ratios")}
assert len(MODELS["real43"]["compress_ratios"]) == 44

#: (model, --kv-cache-dtype) of every engine started; the layout tests compare the "auto" ones.
ENGINES = [
    ("real43", "auto"),
    ("mixed4", "auto"),
    ("mixed4", "fp8"),
    ("mixed4", "bfloat16"),
    ("no-ratio4", "auto"),
    ("window-only", "auto"),
]


def _case_id(model: str, dtype: str) -> str:
    return f"{model}-{dtype}"


@pytest.fixture(scope="module")
def engines(vllm_env: VllmEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """vLLM's answer for every engine of ENGINES, by case id (one process for all)."""
    root = tmp_path_factory.mktemp("dsv4-models")
    cases = []
    for model, dtype in ENGINES:
        folder = root / model
        folder.mkdir(exist_ok=True)
        (folder / "config.json").write_text(json.dumps(MODELS[model], indent=1))
        cases.append(
            {
                "id": _case_id(model, dtype),
                "model": str(folder),
                "kv_cache_memory_bytes": KV_BYTES,
                "kv_cache_dtype": dtype,
                "max_model_len": MAX_MODEL_LEN,
                "max_num_batched_tokens": MAX_NUM_BATCHED_TOKENS,
            }
        )
    return offline_engines(vllm_env, "vllm_deepseek_v4_engine.py", root, cases)


def _has_indexer(model: str) -> bool:
    return 4 in MODELS[model]["compress_ratios"]


def _layout(model: str, kv_cache_dtype: str = "auto") -> capacity.KVCacheLayout:
    arch = capacity.architecture_from_config(MODELS[model], name=model)
    return capacity.kv_cache_layout(
        arch,
        tensor_parallel_size=1,
        kv_cache_dtype=kv_cache_dtype,
        max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        max_in_flight_tokens=MAX_NUM_BATCHED_TOKENS,  # CPU: async scheduling off, one batch in flight
        max_model_len=MAX_MODEL_LEN,
    )


def _engine_groups(answer: dict[str, Any]) -> list[tuple[str, int, int | None]]:
    """(kind, block tokens, window) of every KV-cache group vLLM formed, sorted."""
    return sorted(
        ("full" if g["sliding_window"] is None else "sliding", g["block_size"], g["sliding_window"])
        for g in answer["groups"]
    )


def _capacity_groups(layout: capacity.KVCacheLayout) -> list[tuple[str, int, int | None]]:
    return sorted(
        (g.kind, g.tokens_per_block(layout.block_size), g.bound)
        for g in layout.groups
        for _ in range(g.count)
    )


def _facts(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: answer[k] for k in ("cache_dtype", "num_blocks", "groups", "block_strides", "max_concurrency")}


@pytest.mark.parametrize("model", sorted(REFUSED))
def test_what_vllm_refuses_at_start_capacity_refuses_naming_the_field(
    model: str, engines: dict[str, dict[str, Any]]
) -> None:
    engine = engines[_case_id(model, "auto")]
    words, field = REFUSED[model]
    assert not engine["started"] and words in (engine["error"] or ""), engine
    with pytest.raises(capacity.ConfigError) as refused:
        _layout(model)
    assert refused.value.field == field


@pytest.mark.parametrize("model", sorted(set(MODELS) - set(REFUSED)))
def test_kv_cache_matches_capacity_layout(model: str, engines: dict[str, dict[str, Any]]) -> None:
    engine = engines[_case_id(model, "auto")]
    assert engine["started"], f"vLLM did not start {model}: {engine['error']}"
    layout = _layout(model)
    blocks = layout.num_blocks(KV_BYTES)
    engine_facts = {
        "cache_dtype": engine["cache_dtype"],
        "bytes_per_block": engine["block_strides"],
        "num_gpu_blocks": engine["num_blocks"],
        "groups": len(engine["groups"]),
        "group_blocks": _engine_groups(engine),
        "max_concurrency": pytest.approx(engine["max_concurrency"], rel=1e-9),
    }
    predicted = {
        "cache_dtype": "fp8_ds_mla",
        # Block-outermost (an indexer asks for it): every tensor of the pool strides one whole block. Else
        # (one page size, one group) each layer's tensor strides its page, and a block is the group's pages.
        "bytes_per_block": [layout.bytes_per_block]
        if _has_indexer(model)
        else [layout.bytes_per_block // layout.groups[0].layers],
        "num_gpu_blocks": blocks,
        "groups": sum(g.count for g in layout.groups),
        "group_blocks": _capacity_groups(layout),
        "max_concurrency": blocks / layout.blocks_per_sequence(MAX_MODEL_LEN),
    }
    assert engine_facts == predicted, f"vLLM {engine} != capacity {layout}"
    if _has_indexer(model):  # one pool, every block the same stride
        assert engine["num_blocks"] == KV_BYTES // engine["block_strides"][0]
    if model == "real43":
        assert layout.bytes_per_block == REAL_BYTES_PER_BLOCK


def test_fp8_is_auto(engines: dict[str, dict[str, Any]]) -> None:
    """--kv-cache-dtype fp8 and auto both store fp8_ds_mla: the same pool in vLLM and in capacity."""
    auto, fp8 = engines[_case_id("mixed4", "auto")], engines[_case_id("mixed4", "fp8")]
    assert auto["started"] and fp8["started"], (auto["error"], fp8["error"])
    assert _facts(fp8) == _facts(auto)
    ours_auto, ours_fp8 = _layout("mixed4", "auto"), _layout("mixed4", "fp8")
    assert ours_fp8 == ours_auto
    assert ours_fp8.num_blocks(KV_BYTES) == fp8["num_blocks"]


def test_bfloat16_is_refused(engines: dict[str, dict[str, Any]]) -> None:
    """vLLM's DeepSeek-V4 attention keeps its latent as fp8_ds_mla and refuses a bfloat16 KV cache; so does
    capacity."""
    engine = engines[_case_id("mixed4", "bfloat16")]
    assert not engine["started"], f"vLLM started with --kv-cache-dtype bfloat16: {engine}"
    assert "ValueError" in engine["error"] and "bfloat16" in engine["error"], engine["error"]
    with pytest.raises(capacity.CapacityError, match="bfloat16"):
        _layout("mixed4", "bfloat16")
