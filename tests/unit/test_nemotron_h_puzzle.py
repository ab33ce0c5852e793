"""NemotronH-Puzzle (``NemotronHPuzzleForCausalLM``, NVIDIA's Nemotron-Labs-3-Puzzle family) as capacity
reads, weighs and caches it: vLLM 0.32 builds it as NemotronH (``nemotron_h.py``), each attention, MoE and
MLP layer from its own ``block_configs`` entry through the checkpoint's config class.

Every number below was measured with vLLM 0.32's class built on the meta device (its config class, the
checkpoint's code, stood in for by a copy of its public source), at TP 1 and on every rank of TP 2 and TP 4
(gloo on loopback), with the CPU engine core's cache accounting (64 MiB, 4,096 tokens), before this was
written; every rank held the same bytes and blocks. vLLM's CPU build refuses the non-gated (relu2) MoE, so
the survey lifted that platform gate alone (no tensor changes). No public config.json of the released
checkpoint was found: the ``o*`` shapes are written as its published descriptions state its blocks (MoE
blocks with their width and top-k alone), small. The shapes are tests/data/shapes/nemotron_h_puzzle.json
(the survey's cases, each named by its id).
"""

from __future__ import annotations

from typing import Any

import pytest

import capacity as c
from tests.builders import cpu_engine_accounting, model_shapes, weight_bytes_by_tp

PUZZLE = model_shapes("nemotron_h_puzzle")


def test_each_layer_takes_its_block_and_a_deleted_global_falls_back_to_nemotron_hs_default() -> None:
    """The pattern comes from the blocks (the file's own is replaced); a MoE block's experts, widths and
    latent are its layer's; a block field left out is the global one unless another block set it (then
    the global is deleted and NemotronHConfig's default applies: no latent, no window, 8 experts)."""
    mixed = c.architecture_from_config(PUZZLE["p01_mixed"])
    assert [(layer.mixer, layer.ffn) for layer in mixed.layers] == [
        ("mamba", "none"),
        ("none", "moe"),
        ("sliding", "none"),
        ("none", "moe"),
        ("none", "dense"),
        ("full", "none"),
    ]
    moe = [mixed.expert_shape(layer) for layer in mixed.layers if layer.ffn == "moe"]
    assert [(s.experts, s.experts_per_token, s.width, s.shared_width, s.latent) for s in moe] == [
        (8, 2, 96, 128, 128),
        (6, 3, 80, 64, 0),
    ]
    assert [layer.ffn_width for layer in mixed.layers if layer.ffn == "dense"] == [320]
    assert mixed.sliding_window == 64
    assert c.architecture_from_config(PUZZLE["p19_file_pattern_ignored"]).num_layers == 3
    one_latent = c.architecture_from_config(PUZZLE["p05_global_latent_one_block"])
    latents = [one_latent.expert_shape(layer).latent for layer in one_latent.layers if layer.ffn == "moe"]
    assert latents == [0, 128]
    overridden = c.architecture_from_config(PUZZLE["p12_global_window_overridden"])
    assert [overridden.window_of(layer) for layer in overridden.layers if layer.mixer == "sliding"] == [512]
    assert overridden.mixer_counts["full"] == 1
    real = c.architecture_from_config(PUZZLE["o02_real_like_one_block_experts"])
    experts = [real.expert_shape(layer) for layer in real.layers if layer.ffn == "moe"]
    assert [(s.experts, s.width, s.shared_width, s.latent) for s in experts] == [
        (8, 48, 128, 64),
        (8, 96, 128, 64),
    ]


#: Bytes on one rank at TP 1, 2 and 4 as vLLM 0.32's class built them (every rank alike).
MEASURED_BYTES = {
    "p01_mixed": {1: 3_796_088, 2: 1_972_568, 4: 1_093_576},
    "p02_moe_experts": {1: 4_694_192, 2: 2_362_768, 4: 1_197_056},
    "p03_all_latent": {1: 2_883_728, 2: 1_551_728, 4: 902_112},
    "p04_global_latent": {1: 2_515_056, 2: 1_330_512, 4: 754_624},
    "p05_global_latent_one_block": {1: 3_170_416, 2: 1_658_192, 4: 918_464},
    "p06_no_shared": {1: 2_842_736, 2: 1_461_584, 4: 787_392},
    "p07_two_shared": {1: 3_235_952, 2: 1_658_192, 4: 885_696},
    "p08_mlp_bias": {1: 3_292_736, 2: 1_648_416, 4: 859_024},
    "p09_latent_bias": {1: 2_906_208, 2: 1_524_672, 4: 850_288},
    "p10_windows": {1: 4_500_224, 2: 2_252_416, 4: 1_194_048},
    "p12_global_window_overridden": {1: 2_838_624, 2: 1_424_704, 4: 750_512},
    "p13_mamba_only": {1: 2_452_416, 2: 1_327_456, 4: 764_976},
    "p15_vocab_tied": {1: 2_773_088, 2: 1_391_936, 4: 717_744},
    "p16_big": {1: 42_350_496, 2: 21_780_064, 4: 11_494_848},
    "p18_q_indexer": {1: 2_838_624, 2: 1_424_704, 4: 750_512},
    "p20_no_mamba": {1: 2_566_688, 2: 1_288_736, 4: 682_528},
    "p21_attention_only_moe_latent": {1: 2_361_984, 2: 1_264_256, 4: 748_160},
    "o01_real_like": {1: 4_801_920, 2: 2_526_240, 4: 1_421_168},
    "o02_real_like_one_block_experts": {1: 3_152_064, 2: 1_651_328, 4: 917_344},
    "o03_real_like_no_latent_mlp": {1: 4_035_232, 2: 2_031_488, 4: 1_046_000},
}


@pytest.mark.parametrize("case", sorted(MEASURED_BYTES))
def test_each_rank_holds_the_bytes_vllms_class_builds_on_it(case: str) -> None:
    """Each layer's experts split by width, its float32 router and score bias whole; the shared expert split
    and never biased; latent projections whole (biased with mlp_bias); a head of its own whatever
    tie_word_embeddings says."""
    arch = c.architecture_from_config(PUZZLE[case])
    measured = MEASURED_BYTES[case]
    assert [c.tensor_parallel_error(arch, tp) for tp in measured] == [None] * len(measured)
    assert weight_bytes_by_tp(PUZZLE[case], measured) == measured


@pytest.mark.parametrize(
    ("case", "tp", "kv_cache_dtype", "measured"),
    [
        ("p01_mixed", 1, "auto", (256, 1024)),
        ("p01_mixed", 2, "auto", (256, 2048)),
        ("p01_mixed", 1, "fp8", (384, 1365)),
        ("p10_windows", 1, "auto", (256, 1024)),
        ("p10_windows", 2, "fp8", (384, 2730)),
        ("p12_global_window_overridden", 1, "auto", (256, 1024)),
        ("p13_mamba_only", 1, "auto", (128, 329)),
        ("p13_mamba_only", 2, "fp8", (128, 652)),
        ("p16_big", 1, "auto", (1152, 113)),
        ("p16_big", 2, "auto", (1152, 227)),
        ("p16_big", 1, "fp8", (2176, 120)),
        ("p17_kv1", 1, "auto", (384, 1365)),
        ("p17_kv1", 2, "fp8", (384, 2730)),
        ("p02_moe_experts", 2, "auto", (128, 3744)),
        ("p20_no_mamba", 2, "auto", (128, 4096)),
        ("p20_no_mamba", 2, "fp8", (128, 8192)),
        ("p21_attention_only_moe_latent", 2, "auto", (2176, 120)),
        ("p21_attention_only_moe_latent", 2, "fp8", (4352, 120)),
        ("o01_real_like", 1, "auto", (256, 512)),
        ("o01_real_like", 2, "auto", (256, 1024)),
        ("o01_real_like", 4, "auto", (128, 2048)),
        ("o02_real_like_one_block_experts", 4, "auto", (128, 4096)),
        ("o03_real_like_no_latent_mlp", 1, "auto", (256, 1024)),
        ("o03_real_like_no_latent_mlp", 4, "auto", (128, 4096)),
    ],
)
def test_the_engine_core_blocks_windows_by_layer_and_a_state_the_config_describes(
    case: str, tp: int, kv_cache_dtype: str, measured: tuple[int, int]
) -> None:
    """(Block size, blocks of 64 MiB): the block sized by the global Mamba state over the global KV heads
    (even with no Mamba layer: p20, p21), each distinct window its own KV group (p10's four windows: groups
    of one layer), an attention-free model's block unaligned (p13)."""
    block, blocks, _ = cpu_engine_accounting(
        PUZZLE[case], 2**26, 4096, tensor_parallel_size=tp, kv_cache_dtype=kv_cache_dtype
    )
    assert (block, blocks) == measured


@pytest.mark.parametrize(
    ("case", "field", "says"),
    [
        ("r01_no_block_configs", "block_configs", "is missing"),
        ("r02_unknown_block_type", "block_configs[1].block_type", "is 'gdn'"),
        ("r03_unknown_field", "block_configs[1].num_key_value_heads", "AttentionConfig"),
        ("r06_head_dim_override", "block_configs[1].head_dim", "AttentionConfig"),
        ("r04_mamba_ssm_state_override", "block_configs", "sets ssm_state_size on a block"),
        ("r07_block_n_group", "block_configs", "sets n_group on a block"),
    ],
)
def test_a_file_vllm_cannot_build_is_refused_naming_the_block(case: str, field: str, says: str) -> None:
    """vLLM (its config class or nemotron_h.py) stops on each at TP 1: IndexError, KeyError, TypeError,
    AttributeError."""
    with pytest.raises(c.ConfigError) as err:
        c.architecture_from_config(PUZZLE[case])
    assert err.value.field == field
    assert says in str(err.value)
    assert "; accepted: " in str(err.value)


def test_optional_block_fields_and_router_settings_are_read_as_the_class_builds_them() -> None:
    """A block topk_group is built (2,510,432 bytes, the M, E and * layers p19 measured too); a MoE block
    without its shared width (refused by the converter's copy of the config class alone; the released
    checkpoint's blocks leave such fields out) takes the global one: the same layers, the same bytes."""
    assert weight_bytes_by_tp(PUZZLE["r08_block_topk_group"], (1,)) == {1: 2_510_432}
    assert weight_bytes_by_tp(PUZZLE["r05_moe_missing_field"], (1,)) == {1: 2_510_432}
    assert weight_bytes_by_tp(PUZZLE["p19_file_pattern_ignored"], (1,)) == {1: 2_510_432}


def test_tp_4_is_refused_where_the_mamba_groups_split() -> None:
    """p17 (n_groups 2): built at TP 1 and 2 (these bytes), refused at TP 4 on every rank ("If tensor
    parallel world size does not divide num_groups, then num_groups must equal 1.")."""
    config: dict[str, Any] = PUZZLE["p17_kv1"]
    arch = c.architecture_from_config(config)
    assert weight_bytes_by_tp(config, (1, 2)) == {1: 2_706_272, 2: 1_391_296}
    assert "does not divide the 2 Mamba-2 groups" in (c.tensor_parallel_error(arch, 4) or "")
