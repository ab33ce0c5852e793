"""HY V4 (vLLM 0.32's models/hy_v4) in capacity: which layers are sparse and hold an indexer, the weights of
its gate, sink and iHC, the GPUs its sparse layers run on, and a step that reads every latent of a dense
layer but only the top-k of a sparse one. tests/conformance/test_hy_v4.py holds the counts to vLLM's class."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from capacity.gpus import attention_support
from kvright import cli
from tests.builders import HY_V4_SMALL, edited


def _arch(**changes: Any) -> c.Architecture:
    return c.architecture_from_config(edited(HY_V4_SMALL, **changes))


def test_a_sparse_layer_holds_an_indexer_only_where_its_indexer_type_is_full() -> None:
    """The class's default schedule puts "full" on layers 0, 1 and 5; layer 0 is dense, so it builds none;
    the "shared" sparse layers reuse the last indexer's picks."""
    arch = _arch()
    assert [layer.dense_attention for layer in arch.layers] == [True] + [False] * 5
    assert [layer.reuses_indices for layer in arch.layers] == [False, False, True, True, True, False]
    assert arch.num_mla_indexers == 2 and arch.sparse_backend_required
    own = _arch(indexer_types=["full", "shared", "full", "full", "shared", "shared"])
    assert own.num_mla_indexers == 2  # layers 2 and 3; layer 0's "full" is on a dense layer


def test_every_sparse_spelling_is_sparse_and_without_layer_types_no_layer_is() -> None:
    aliases = ["sparse", "sparse_attention", "deepseek_sparse_attention", "qwen_sparse_attention"]
    arch = _arch(layer_types=["full_attention", *aliases, "indexed_attention"])
    assert [layer.dense_attention for layer in arch.layers] == [True] + [False] * 5
    dense = _arch(layer_types=None)
    assert all(layer.dense_attention for layer in dense.layers)
    assert dense.num_mla_indexers == 0 and dense.index_topk == 0 and not dense.sparse_backend_required
    # No indexer weighs anything: the dense model is lighter by exactly the two indexers.
    one = c.architecture_from_config(edited(HY_V4_SMALL, indexer_types=["shared"] * 6))
    assert one.num_mla_indexers == 0 and one.parameters < _arch().parameters


def test_the_gate_sink_and_ihc_weigh_what_vllm_builds() -> None:
    """Elementwise gate: heads x v_head_dim x hidden; headwise: heads x hidden; a sink per head per layer;
    iHC per layer two fp32 mixes of (2 hc) x (hc hidden) + 2 hc + 2, and the head's
    hc x hc hidden + hc + 1."""
    base = _arch()
    h, heads, v, hc, n = 512, 4, 256, 4, 6
    assert base.parameters - _arch(gating_type="headwise").parameters == n * heads * (v - 1) * h
    assert base.parameters - _arch(gated_mla=False).parameters == n * heads * v * h
    assert base.parameters - _arch(learnable_sink=False).parameters == n * heads
    ihc = n * 2 * (2 * hc * hc * h + 2 * hc + 2) + hc * hc * h + hc + 1
    assert base.parameters - _arch(enable_ihc=False).parameters == ihc
    assert base.weight_groups.total - _arch(enable_ihc=False).weight_groups.total == 4 * ihc  # fp32


def test_mlp_layer_types_decide_the_routed_layers_and_first_k_dense_replace_does_not() -> None:
    assert [layer.ffn for layer in _arch(first_k_dense_replace=3).layers] == ["dense"] + ["moe"] * 5
    mixed = _arch(mlp_layer_types=["sparse", "dense", "sparse", "dense", "sparse", "sparse"])
    assert [layer.ffn for layer in mixed.layers] == ["moe", "dense", "moe", "dense", "moe", "moe"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"q_lora_rank": None}, "q_lora_rank"),
        ({"gating_type": "rowwise"}, "gating_type"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"layer_types": ["full_attention", "global"] + ["sparse"] * 4}, "layer_types"),
        ({"indexer_types": ["full", "shared"]}, "indexer_types"),
        ({"indexer_types": ["full", "half", "full", "full", "full", "full"]}, "indexer_types"),
        ({"mlp_layer_types": ["dense", "moe", "sparse", "sparse", "sparse", "sparse"]}, "mlp_layer_types"),
    ],
)
def test_what_vllm_refuses_is_refused_by_the_field(changes: dict[str, Any], field: str) -> None:
    config = {**HY_V4_SMALL, **changes}  # a null stays null: the file states it
    with pytest.raises(c.ConfigError, match=field):
        c.architecture_from_config(config)


def test_sparse_layers_run_only_where_vllm_has_a_sparse_mla_kernel() -> None:
    a100, h100 = c.gpu_spec("a100-80gb"), c.gpu_spec("h100-sxm")
    assert "sparse MLA layers" in (attention_support(a100, _arch()) or "")
    assert attention_support(h100, _arch()) is None
    assert attention_support(a100, _arch(layer_types=None)) is None  # dense MLA runs anywhere


def test_a_step_reads_a_dense_layers_whole_cache_and_a_sparse_layers_top_k() -> None:
    """Past the top-k, each further context token costs the dense layer's latent and the indexers' keys;
    before it, every layer's latent."""
    arch = _arch()
    model = c.roofline.StepModel(arch, c.gpu_spec("h100-sxm"), layout=c.Layout(), kv_cache_dtype="auto")
    latent = c.memory.attention_bytes_per_token(arch, 1, "auto", 1)
    key = c.memory.indexer_key_bytes(arch)
    topk = arch.index_topk
    assert model.kv_bytes(1, topk) - model.kv_bytes(1, topk - 1) == 6 * latent + 2 * key
    assert model.kv_bytes(1, topk + 1) - model.kv_bytes(1, topk) == latent + 2 * key


def test_inspect_names_the_layers_that_attend_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "config.json").write_text(json.dumps(HY_V4_SMALL))
    assert cli.main(["inspect", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "6 layers; sparse: indexers in 2 of them pick 64 tokens to attend to (1 layer attends" in out
