"""MiniMax-M3 (vLLM's ``models/minimax_m3``) as capacity reads it, from NVIDIA's MiniMax-M3-NVFP4 file.

Every layer is GQA attention; the layers ``sparse_attention_config.sparse_attention_freq`` marks carry an
indexer fused into their qkv projection, which caches a bfloat16 key per token beside the layer's K and V
and picks the 16 blocks of 128 tokens the layer attends to. The numbers held here are vLLM 0.32's own
(its classes built on the meta device, its engine core's KV accounting): tests/conformance/test_minimax_m3.py
asks them again on every run; the arithmetic below is from the file's fields alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity.errors import ConfigError
from capacity.roofline import StepModel
from kvright import cli
from tests.builders import MINIMAX_M3_TEXT, cpu_engine_layout, edited

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "configs" / "minimax-m3-nvfp4"
CONFIG: dict[str, Any] = json.loads((FIXTURE / "config.json").read_text())
TEXT: dict[str, Any] = CONFIG["text_config"]


def _small(**changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(MINIMAX_M3_TEXT, **changes))


def _sparse(**changes: Any) -> dict[str, Any]:
    return MINIMAX_M3_TEXT["sparse_attention_config"] | changes


def test_the_nvidia_checkpoint_is_what_vllms_class_builds():
    """427,040,140,160 parameters unquantized (the text model 426,174,572,928, the vision tower, projector
    and patch merger 865,567,232); 250,088,233,984 bytes with its MIXED_PRECISION block, of which capacity
    leaves out the NVFP4 experts' four fp32 scalars (24 bytes an expert)."""
    arch = c.load_architecture(str(FIXTURE))
    plain = c.architecture_from_config({k: v for k, v in CONFIG.items() if k != "quantization_config"})
    assert plain.parameters == arch.parameters == 427_040_140_160
    assert plain.vision_parameters == 865_567_232
    assert plain.weight_groups.total == 854_169_948_160
    experts = TEXT["num_local_experts"] * TEXT["moe_layer_freq"].count(1)
    assert arch.weight_groups.total == 250_088_233_984 - 24 * experts
    assert arch.weights.method == "modelopt_mixed"
    assert (arch.num_indexer_layers, arch.num_moe_layers, dict(arch.mixer_counts)) == (57, 57, {"full": 60})
    assert not arch.tie_word_embeddings and arch.router_dtype == "float32" and arch.expert_score_bias


def test_each_token_caches_every_layers_kv_and_each_sparse_layers_bfloat16_index_key():
    arch = c.load_architecture(str(FIXTURE))
    kv = 2 * TEXT["num_key_value_heads"] * TEXT["head_dim"]
    index = TEXT["sparse_attention_config"]["sparse_index_dim"]
    assert c.kv_cache_bytes_per_token(arch) == 60 * kv * 2 + 57 * index * 2 == 137_472
    # --kv-cache-dtype fp8 stores K and V in a byte; the indexer's key stays bfloat16
    assert c.kv_cache_bytes_per_token(arch, kv_cache_dtype="fp8") == 60 * kv + 57 * index * 2
    # TP 8: each rank one of the 4 KV heads twice over, and every rank the whole index key
    assert c.kv_cache_bytes_per_token(arch, tensor_parallel_size=8) == 8 * (60 * 128 * 2 * 2 + 57 * index * 2)


def test_the_engine_core_gives_the_nvidia_checkpoint_1952_blocks_of_128_tokens_in_32_gib():
    """vLLM 0.32 on its CPU backend (block 128): one group of the 117 caches, a page of 17,596,416 bytes."""
    arch = c.load_architecture(str(FIXTURE))
    layout = cpu_engine_layout(arch, max_model_len=131072, max_num_batched_tokens=8192)
    assert (layout.block_size, layout.bytes_per_block) == (128, 17_596_416)
    assert layout.num_blocks(32 * 2**30) == 1952
    assert [(g.kind, g.layers, g.count) for g in layout.groups] == [("full", 60, 1)]


def test_a_sparse_layer_raises_the_block_to_the_128_tokens_its_kernels_take():
    assert c.kv_cache_layout(_small()).block_size == 128
    # no sparse layer: the layers attend with the standard backends, at vLLM's default 16
    dense = _small(sparse_attention_config=_sparse(sparse_attention_freq=[0, 0, 0, 0]))
    assert dense.num_indexer_layers == 0 and c.kv_cache_layout(dense).block_size == 16


def test_sparse_attention_freq_chooses_the_layers_with_an_indexer():
    h, kv_heads, di = MINIMAX_M3_TEXT["hidden_size"], MINIMAX_M3_TEXT["num_key_value_heads"], 128
    base = _small()
    dense = _small(sparse_attention_config=_sparse(sparse_attention_freq=[0, 0, 0, 0]))
    # index_q (a head per KV head), index_k (one head) fused into qkv_proj, and their two norms
    assert base.parameters - dense.parameters == 3 * (h * (kv_heads * di + di) + 2 * di)
    assert c.kv_cache_bytes_per_token(base) - c.kv_cache_bytes_per_token(dense) == 3 * di * 2
    # a shorter list leaves the later layers dense; use_sparse_attention is not read
    short = _small(sparse_attention_config=_sparse(sparse_attention_freq=[0, 1]))
    assert [layer.indexer for layer in short.layers] == [False, True, False, False]
    unread = _small(sparse_attention_config=_sparse(use_sparse_attention=False))
    assert unread.num_indexer_layers == 3


def test_a_file_without_the_lists_gets_the_config_classs_three_dense_layers_first():
    cfg = {k: v for k, v in TEXT.items() if k not in ("moe_layer_freq", "sparse_attention_config")}
    arch = c.architecture_from_config(cfg | {"model_type": "minimax_m3_mtp", "num_hidden_layers": 60})
    assert [layer.ffn for layer in arch.layers[:4]] == ["dense", "dense", "dense", "moe"]
    assert [layer.indexer for layer in arch.layers[:4]] == [False, False, False, True]
    assert arch.layers[0].ffn_width == TEXT["dense_intermediate_size"]


def test_the_shared_expert_is_n_shared_experts_routed_experts_wide():
    h, width = MINIMAX_M3_TEXT["hidden_size"], MINIMAX_M3_TEXT["intermediate_size"]
    one, two = _small(), _small(n_shared_experts=2, shared_intermediate_size=999)
    # three MoE layers; shared_intermediate_size is not read
    assert two.parameters - one.parameters == 3 * 3 * h * width
    assert _small(n_shared_experts=0).shared_expert_intermediate_size == 0


def test_the_sparse_layers_read_the_kv_of_the_top_k_tokens_only():
    """Past 16 blocks of 128 tokens a sparse layer reads its index keys and no more K and V: the decode
    step's cache reads grow by the dense layers' K and V and the index keys alone."""
    arch = c.load_architecture(str(FIXTURE))
    step = StepModel(arch, c.gpu_spec("h200"), layout=c.Layout(tensor_parallel_size=4), kv_cache_dtype="auto")
    index = 57 * 128 * 2
    dense = 3 * 2 * 128 * 2  # one KV head per rank at TP 4
    assert step.kv_bytes(1, 100_000) - step.kv_bytes(1, 50_000) == 50_000 * (dense + index)
    sparse_kv = 57 * 2 * 128 * 2
    assert step.kv_bytes(1, 2048) - step.kv_bytes(1, 1024) == 1024 * (dense + index + sparse_kv)


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"hidden_act": "silu"}, "hidden_act", "expected 'swigluoai'"),
        (
            {"sparse_attention_config": _sparse(sparse_num_index_heads=4)},
            "sparse_attention_config.sparse_num_index_heads",
            "expected num_key_value_heads (2)",
        ),
        (
            {"sparse_attention_config": {"sparse_attention_freq": [0, 1, 1, 1], "sparse_num_index_heads": 2}},
            "sparse_attention_config.sparse_topk_blocks",
            "is missing",
        ),
        ({"moe_layer_freq": [0, 1]}, "moe_layer_freq", "has 2 entries for 4 layers"),
        # the config class's default index heads (4) with 2 KV heads: vLLM's fused projection refuses them
        ({"sparse_attention_config": None}, "sparse_attention_config.sparse_num_index_heads", "is 4"),
    ],
)
def test_what_vllm_refuses_to_build_is_refused_naming_the_field(changes, field, words):
    with pytest.raises(ConfigError) as refused:
        _small(**changes)
    assert refused.value.field == field and words in str(refused.value), str(refused.value)


def test_the_planner_holds_the_slo_for_the_nvidia_checkpoint_at_long_context():
    result = c.plan(
        c.load_architecture(str(FIXTURE)),
        c.gpu_spec("b200"),
        c.Workload(prompt_tokens=32_000, output_tokens=1_000, concurrency=64, max_model_len=131_072),
        c.SLO(tpot_seconds=0.040),
        c.Limits(),
    )
    assert result.feasible and result.prediction is not None, result
    assert result.prediction.tpot_seconds <= 0.040


def test_inspect_names_the_sparse_layers(capsys):
    assert cli.main(["inspect", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "sparse layers      57 of 60: an indexer each, its 128-wide bfloat16 key cached a token" in out
    assert cli.main(["inspect", str(FIXTURE), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["indexer_layers"], data["layer_kinds"]) == (57, {"full": 60})


def test_a_text_config_that_leaves_its_type_out_is_read_with_minimax_m3_texts_defaults():
    """MiniMaxM3VLConfig builds its text_config as a ``minimax_m3_text`` (vLLM's vocabulary says so), whose
    class defaults fill what the file leaves out: the NVIDIA file without its ``hidden_act`` (the class's
    swigluoai) and without its head count reads the same."""
    trimmed = {k: v for k, v in TEXT.items() if k not in ("hidden_act", "num_attention_heads", "model_type")}
    ours = c.architecture_from_config(CONFIG | {"text_config": trimmed})
    assert ours.parameters == c.architecture_from_config(CONFIG).parameters
    assert ours.num_attention_heads == TEXT["num_attention_heads"]
