"""NemotronH-Puzzle as vLLM's own class builds it and its engine core accounts its cache.

vLLM 0.32 builds ``NemotronHPuzzleForCausalLM`` as NemotronH (``nemotron_h.py``), through the checkpoint's own
config class (``configuration_nemotron_h_puzzle.py``, in neither vLLM nor its transformers): the layers are
the pattern that class derives from ``block_configs`` (the file's own replaced), and each attention, MoE and
MLP layer is built from the config that class gives it (``get_nemotron_h_config_for_layer``): its block's
window, experts, widths, shared width and latent, or its MLP's width, over the global fields no block sets (a
field some block sets is deleted from the global config, so a block that leaves it out takes
NemotronHConfig's default). Mamba layers, the KV heads and the hybrid block's alignment read the global
config alone (the block is sized by the Mamba state the config describes even with no Mamba layer). The
probe registers a stand-in for that config class (``"puzzle_config"``, vllm_weights_probe.py's
``_register_puzzle_config``) and lifts the CPU build's platform gate on squared-ReLU experts without a gate
(``"relu2_moe_stand_in"``, ``_relu2_moe_on_cpu``); neither changes a tensor or a cache spec. Per-rank bytes
at TP 2 and 4, and fp8 caches, are held in tests/unit/test_nemotron_h_puzzle.py (a survey of every rank).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pytest

import capacity
from tests.builders import edited, model_shapes

from . import harness

pytestmark = pytest.mark.conformance

PUZZLE = model_shapes("nemotron_h_puzzle")

#: Configs vLLM's class builds, weighed to the byte (tests/data/shapes/nemotron_h_puzzle.json).
BUILT: dict[str, dict[str, Any]] = {
    name: PUZZLE[name]
    for name in (
        "p01_mixed",  # a latent MoE block and a plain one, an MLP block of its own width, a window
        "p02_moe_experts",  # 4, 8 and 16 experts
        "p03_all_latent",  # each MoE block its own latent
        "p05_global_latent_one_block",  # the global latent deleted: the other MoE layer has none
        "p07_two_shared",  # two shared experts per MoE layer
        "p08_mlp_bias",  # MoE-free: MLP blocks of 256 and 768 with biases, a window
        "p09_latent_bias",  # biased latent projections, an unbiased shared expert
        "p10_windows",  # windows 16, 256, none and 1024 over four Mamba layers
        "p12_global_window_overridden",  # the global window deleted: the other layer is full attention
        "p13_mamba_only",
        "p14_router_fields",  # block router settings (no tensors)
        "p15_vocab_tied",  # a head of its own whatever tie_word_embeddings says
        "p16_big",
        "p17_kv1",  # one KV head
        "p18_q_indexer",  # q_indexer_* accepted and not read
        "p19_file_pattern_ignored",
        "p20_no_mamba",
        "p21_attention_only_moe_latent",
        "o01_real_like",  # the released checkpoint's MoE blocks: width and top-k alone
        "o02_real_like_one_block_experts",
        "o03_real_like_no_latent_mlp",
        "r05_moe_missing_field",  # a MoE block without its shared width takes the global one
        "r08_block_topk_group",
    )
} | {
    # MLP and attention layers alone (no MoE, no Mamba layer): the phantom Mamba state sizes the block.
    "mlp-and-attention": edited(
        PUZZLE["p08_mlp_bias"],
        block_configs=[
            {"block_type": "mlp", "intermediate_size": 256},
            {"block_type": "attention", "sliding_window": 32},
            {"block_type": "mlp", "intermediate_size": 768},
            {"block_type": "attention"},
        ],
        num_hidden_layers=4,
    ),
}

#: The engine core's accounting of some of them at 64 MiB and 4,096 tokens (the survey's).
ACCOUNTED = harness.accounted_cases(
    BUILT,
    [
        "p01_mixed",
        "p08_mlp_bias",
        "p10_windows",
        "p12_global_window_overridden",
        "p13_mamba_only",
        "p16_big",
        "p17_kv1",
        "p20_no_mamba",
        "p21_attention_only_moe_latent",
        "o01_real_like",
        "o03_real_like_no_latent_mlp",
        "mlp-and-attention",
    ],
    memory=2**26,
    length=4096,
    max_num_batched_tokens=4096,
)

#: Files vLLM's class refuses, with the field capacity names, what its refusal says, and vLLM's error.
REFUSED_AS: dict[str, tuple[str, str, str]] = {
    "r01_no_block_configs": ("block_configs", "is missing", "IndexError"),
    "r02_unknown_block_type": ("block_configs[1].block_type", "is 'gdn'", "KeyError: 'gdn'"),
    "r03_unknown_field": (
        "block_configs[1].num_key_value_heads",
        "AttentionConfig",
        "TypeError: AttentionConfig.__init__() got an unexpected keyword argument 'num_key_value_heads'",
    ),
    "r06_head_dim_override": (
        "block_configs[1].head_dim",
        "AttentionConfig",
        "TypeError: AttentionConfig.__init__() got an unexpected keyword argument 'head_dim'",
    ),
    "r04_mamba_ssm_state_override": (
        "block_configs",
        "sets ssm_state_size on a block",
        "AttributeError: 'NemotronHPuzzleConfig' object has no attribute 'ssm_state_size'",
    ),
    "r07_block_n_group": (
        "block_configs",
        "sets n_group on a block",
        "AttributeError: 'NemotronHPuzzleConfig' object has no attribute 'n_group'",
    ),
}

REFUSED: dict[str, dict[str, Any]] = {case: PUZZLE[case] for case in REFUSED_AS}


def attention_caches(arch: capacity.Architecture) -> list[tuple[int, int, int | None]]:
    """:func:`harness.attention_caches`, each layer's window its own (``Architecture.window_of``)."""
    return [
        (
            arch.kv_heads_of(layer),
            arch.head_dim_of(layer),
            arch.window_of(layer) if layer.mixer == "sliding" else None,
        )
        for layer in arch.layers
        if layer.mixer in ("full", "sliding")
    ]


class TestNemotronHPuzzle(harness.ModelSuite):
    """Twenty-four builds (mixed blocks, windows by layer, MLP blocks of their own widths, Mamba alone, latent
    and plain MoE blocks, the released checkpoint's block shape), twelve caches and six refusals."""

    BUILT = BUILT
    ACCOUNTED = ACCOUNTED
    REFUSED = REFUSED
    STAND_INS: ClassVar[dict[str, Any]] = {"puzzle_config": True, "relu2_moe_stand_in": True}

    def check_built(self, answer: Mapping[str, Any], config: dict[str, Any]) -> None:
        """Every byte, and every parameter of the file (vLLM's less the rows it pads the vocabulary with: two
        tables, its head never tied), and every attention module caching its layer's KV heads, width and
        window, module by module."""
        assert answer["error"] is None, answer
        assert answer["architecture"] == config["architectures"][0]
        arch = capacity.architecture_from_config(config)
        assert not arch.tie_word_embeddings
        padding = 2 * (arch.vocab_rows - config["vocab_size"]) * config["hidden_size"]
        weighed = (arch.parameters + padding, round(arch.weight_groups.total))
        assert weighed == (answer["parameters"], answer["bytes"]), answer["own_dtypes"]
        assert attention_caches(arch) == harness.attention_caches_built(answer)

    def test_files_vllm_refuses_are_refused_by_the_field_capacity_names(
        self, vllm_answers: dict[str, dict[str, Any]], refused_field: str
    ) -> None:
        """vLLM's config class or nemotron_h.py stops on the file (``refused_field`` is the survey's case),
        and capacity refuses it naming the block field."""
        field, says, error = REFUSED_AS[refused_field]
        answer = vllm_answers[refused_field]
        assert answer["error"] and answer["error"].startswith(error), answer
        with pytest.raises(capacity.ConfigError) as refused:
            capacity.architecture_from_config(REFUSED[refused_field])
        assert (refused.value.field, says in str(refused.value)) == (field, True)
