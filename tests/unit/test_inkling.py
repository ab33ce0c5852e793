"""Inkling (Thinking Machines; vLLM 0.32's models/inkling): the reading's rules, the short-convolution cache,
the limits vLLM sets (TP, GPUs, KV dtype) and the refusals.

tests/conformance/test_inkling.py holds the released Inkling-Small file, the 975B model's fields and small
files of the same shape to vLLM's own classes (parameters, bytes, every layer's cache specs) and its engine
core's accounting (groups, blocks, concurrency); the rules and the arithmetic are here."""

from __future__ import annotations

import copy
import dataclasses
import json
from typing import Any

import pytest

import capacity as c
from capacity.architecture import _hmlp_scales
from capacity.memory import short_conv_bytes_per_sequence, short_conv_head_size
from kvright import cli
from tests.builders import INKLING, INKLING_TINY, INKLING_TRANSFORMERS


def _text(config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    out = copy.deepcopy(config)
    out["text_config"] |= fields
    return out


def test_the_released_small_model_is_what_vllms_class_builds():
    """263,725,509,674 parameters, as vLLM 0.32's InklingForConditionalGeneration holds on the meta device
    (tests/conformance/test_inkling.py): the checkpoint's 265.96 B less its 8 MTP layers, which vLLM loads
    only as a draft. Layers 0 and 1 dense (dense_mlp_idx 2), 35 sliding of 42."""
    arch = c.catalog_architecture("inkling-small")
    assert arch.parameters == 263_725_509_674
    assert [layer.ffn for layer in arch.layers[:3]] == ["dense", "dense", "moe"]
    assert dict(arch.mixer_counts) == {"full": 7, "sliding": 35}
    assert [i for i, layer in enumerate(arch.layers) if layer.mixer == "full"] == [5, 11, 17, 23, 29, 35, 41]
    assert arch.sliding_window == 512 and arch.short_conv_kernel == 4 and arch.mtp_layers == 8
    assert not arch.tie_word_embeddings and arch.embedding_replicated and not arch.warnings


def test_the_mlp_widths_are_read_in_either_format():
    """The checkpoint's names (dense_intermediate_size, intermediate_size the experts') or transformers'
    (intermediate_size the dense MLP's, moe_intermediate_size the experts'), as InklingModelConfig maps
    them."""
    own = c.architecture_from_config(INKLING_TINY)
    assert (own.intermediate_size, own.moe_intermediate_size) == (512, 128)
    hf = c.architecture_from_config(INKLING_TRANSFORMERS)
    assert (hf.intermediate_size, hf.moe_intermediate_size) == (512, 128)
    # neither dense width stated: the dense MLP is as wide as an expert (768, the class's default, unstated)
    same = c.architecture_from_config(_text(INKLING_TINY, dense_intermediate_size=None))
    assert same.intermediate_size == same.moe_intermediate_size == 128


def test_transformers_format_files_are_planned_as_vllm_builds_them_and_say_so():
    """vLLM 0.32's InklingModelConfig reads local_layer_ids and dense_mlp_idx, not transformers' layer lists,
    and builds a tower only where its config names decoder_dmodel: every layer full and routed, no tower."""
    arch = c.architecture_from_config(INKLING_TRANSFORMERS)
    assert {layer.mixer for layer in arch.layers} == {"full"}
    assert {layer.ffn for layer in arch.layers} == {"moe"}
    assert arch.vision_parameters == 0
    said = " | ".join(arch.warnings)
    for words in ("layer_types", "mlp_layer_types", "vision_config names no decoder_dmodel", "audio_config"):
        assert words in said, said


def test_the_hmlp_encoder_folds_the_patch_as_vllm_plans_it():
    """Inkling's 40-pixel, 2-frame patches over 4 layers: the candidate folds are space x5, x2, x2, x2 (the
    largest factor first), then time x2, channels rounded up to 64: 3, 128, 320, 1216, 4800, 9600. The five
    rungs of a log-even ladder from 0 to ln 9600 take the candidates one each, in order, at least total
    distance: dropping 20 x 20 (1,216 channels) costs 2.55 against 2.93 for the next best."""
    assert _hmlp_scales(2, 40, 4, 3) == [(1, 1, 3), (1, 5, 128), (1, 10, 320), (1, 40, 4800), (2, 40, 9600)]
    # As many layers as candidates or more: each rung its nearest candidate (4-pixel single frames over 3
    # layers: folds 1, 2 x 2, 4 x 4; rungs at 0, 1.29, 2.58 and ln 48 take 1, 2 x 2 and 4 x 4 twice, so the
    # last layer folds nothing and projects).
    assert _hmlp_scales(1, 4, 3, 3) == [(1, 1, 3), (1, 2, 64), (1, 4, 64), (1, 4, 64)]
    with pytest.raises(c.ConfigError, match="patch_size"):
        c.architecture_from_config(
            INKLING_TINY | {"vision_config": INKLING_TINY["vision_config"] | {"patch_size": 1}}
        )


def test_the_towers_are_whole_on_every_gpu():
    """The HMLP encoder: 75 x 128, 512 x 320, 5,120 x 4,800 and 9,600 x 4,096 linears, three norms and a
    final one (64,080,384); the audio embedding: 80 bins x 16 levels of 4,096 and a norm (5,246,976)."""
    arch = c.catalog_architecture("inkling-small")
    assert arch.vision_parameters == 64_080_384 + 5_246_976
    assert arch.vision_whole_parameters == arch.vision_parameters


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"torch_dtype": "float16"}, "torch_dtype", "expected bfloat16"),
        ({"head_dim": 64}, "head_dim", "expected 128"),
        ({"d_rel": 8}, "d_rel", "expected 16"),
        ({"swa_head_dim": 256}, "swa_head_dim", "expected 128"),
        ({"n_shared_experts": 0}, "n_shared_experts", "shared sink experts"),
        ({"shared_expert_sink": False}, "shared_expert_sink", "asserts True"),
        ({"gate_activation": "softmax"}, "gate_activation", "asserts 'sigmoid'"),
        ({"norm_after_topk": False}, "norm_after_topk", "asserts True"),
        ({"swa_num_key_value_heads": 3}, "swa_num_key_value_heads", "divisor of swa_num_attention_heads"),
        ({"hidden_size": 255, "num_key_value_heads": 2, "num_attention_heads": 2}, "num_key_value_heads",
         "divisor of hidden_size"),
    ],
)
def test_what_vllm_stops_on_is_refused_naming_the_field(fields: dict[str, Any], field: str, words: str):
    with pytest.raises(c.ConfigError, match=f"'text_config.{field}'|'{field}'") as caught:
        c.architecture_from_config(_text(INKLING_TINY, **fields))
    assert words in str(caught.value), caught.value


def test_a_swa_head_width_is_not_asked_of_a_model_with_no_sliding_layer():
    arch = c.architecture_from_config(_text(INKLING_TINY, swa_head_dim=256, local_layer_ids=[]))
    assert {layer.mixer for layer in arch.layers} == {"full"}


@pytest.mark.parametrize(
    ("tower", "fields", "field"),
    [
        ("vision_config", {"n_layers": None}, "vision_config.n_layers"),
        ("vision_config", {"vision_encoder_type": "linear"}, "vision_config.vision_encoder_type"),
        ("audio_config", {"audio_mode": "flow"}, "audio_config.audio_mode"),
        ("audio_config", {"dmel_min_value": None}, "audio_config.dmel_min_value"),
    ],
)
def test_a_tower_vllm_cannot_build_is_refused(tower: str, fields: dict[str, Any], field: str):
    config = INKLING_TINY | {tower: INKLING_TINY[tower] | fields}
    with pytest.raises(c.ConfigError, match=f"'{field}'"):
        c.architecture_from_config(config)


def test_tensor_parallelism_keeps_a_whole_kv_head_on_every_rank():
    """InklingConvState asserts tp <= kv heads in every layer: the 975B model's full layers have 8."""
    arch = c.architecture_from_config(INKLING)
    assert c.valid_tensor_parallel_sizes(arch, 64) == [1, 2, 4, 8]
    error = c.tensor_parallel_error(arch, 16)
    assert error is not None and "exceeds the 8 KV heads" in error and "accepted: 1, 2, 4, 8" in error


def test_the_attention_runs_on_hopper_blackwell_and_amd_only():
    """FlashAttention 4 has no SM8x kernel (A100, L40S, L4); vLLM's AMD build has its own."""
    arch = c.catalog_architecture("inkling-small")
    refused = {gpu for gpu in c.gpu_ids() if c.gpus.attention_support(c.gpu_spec(gpu), arch)}
    assert refused == {"a100-80gb", "a100-40gb", "l40s", "l4"}
    reason = c.gpus.attention_support(c.gpu_spec("a100-80gb"), arch)
    assert reason is not None and "9.x, 10.x or 11.x" in reason and "accepted GPUs: h100-sxm" in reason


def test_the_kv_cache_is_bf16_only(capsys: pytest.CaptureFixture[str]):
    """vLLM 0.32 serves Inkling with a bfloat16 KV cache only (RFC #54704: fp8 fails at warm-up): the planner
    never picks fp8, and a pinned fp8 is refused."""
    arch = c.catalog_architecture("inkling-small")
    with pytest.raises(c.CapacityError, match="bfloat16 KV cache only"):
        c.memory.resolve_kv_cache_dtype(arch, "fp8")
    assert c.memory.resolve_kv_cache_dtype(arch, "auto") == "bfloat16"
    code = cli.main(["plan", "inkling-small", "--gpu", "h200", "--tpot-ms", "50", "--max-model-len", "32768"])
    assert code == 0
    assert "KV-cache dtype      auto" in capsys.readouterr().out


def test_the_short_convolution_cache_is_paged_beside_the_attention():
    """Inkling-Small at TP 1 on a GPU (16-token blocks): a convolution entry per KV head packs K and V (128
    each) and 4,096 / 8 of both residual streams: 1,280, rounded to 2,048. Its page (4 tokens x 8 heads x
    2,048 x 2 bytes) is 131,072, twice a 16-token block of either attention's (16 x 8 x 256 x 2): vLLM grows
    the attention blocks to 32 tokens. 7 full and 35 sliding layers, each with a convolution cache: groups of
    7, one full, five sliding windows of 512 and six convolution windows of 4 (the full and the sliding
    layers' convolution caches are one spec here: both kinds have 8 KV heads of 128)."""
    arch = c.catalog_architecture("inkling-small")
    assert short_conv_head_size(arch, 8, 128) == 2048
    assert short_conv_bytes_per_sequence(arch, 1) == 42 * 4 * 8 * 2048 * 2
    layout = c.kv_cache_layout(arch, max_model_len=32768)
    groups = sorted((g.kind, g.bound, g.tokens_per_block(layout.block_size), g.count) for g in layout.groups)
    assert groups == [("full", None, 32, 1), ("sliding", 4, 4, 6), ("sliding", 512, 32, 5)]
    assert layout.bytes_per_block == 7 * 131072
    # A running request of 32,768 tokens holds its 1,024 full-attention blocks, 17 of each sliding window
    # (512 / 32 + 1) and 2 of each convolution window (4 / 4 + 1, its last block shared with the next token).
    assert layout.held_blocks_per_sequence(32768) == 1024 + 5 * 17 + 6 * 2
    # At TP 8 every rank keeps one KV head a layer: the pages shrink 8 times, the blocks keep their tokens.
    eight = c.kv_cache_layout(arch, tensor_parallel_size=8, max_model_len=32768)
    assert eight.bytes_per_block == layout.bytes_per_block // 8


def test_the_embedding_is_whole_on_every_gpu():
    """InklingReplicatedEmbedding: the table is whole on every TP rank (the LM head stays split)."""
    arch = c.catalog_architecture("inkling-small")
    table = arch.weight_groups.embedding
    split = dataclasses.replace(arch, embedding_replicated=False)
    whole_table = c.weight_bytes_per_gpu(arch, 8) - c.weight_bytes_per_gpu(split, 8)
    assert whole_table == pytest.approx(table * 7 / 8, abs=2)


def test_inspect_shows_the_short_convolutions(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["inspect", "inkling-small"]) == 0
    out = capsys.readouterr().out
    assert "short convs" in out and f"{42 * 4 * 8 * 2048 * 2:,} B a sequence" in out
    assert "valid TP           1, 2, 4, 8" in out


def test_a_modelopt_nvfp4_checkpoint_quantizes_the_routed_experts_it_does_not_exclude():
    """Inkling-NVFP4's hf_quant_config.json names the checkpoint's own modules (``model.llm.layers.N.attn``,
    ``mlp.w13_dn``, ``mlp.shared_experts``, the first routed layer's ``mlp.experts``), which vLLM maps to
    its classes' names (``model.layers.N.attn.qkvr``, ``mlp.gate_up_proj``) before it matches them: only the
    routed experts left out of the list are NVFP4 (0.5625 bytes a weight). Here layers 2 to 5 of the small
    file's: 4 x 8 experts x 3 x 256 x 128 weights, 1.4375 bytes fewer each than in bfloat16."""
    layers = range(INKLING_TINY["text_config"]["num_hidden_layers"])
    exclude = ["model.llm.embed", "model.llm.unembed", "model.llm.layers.1.mlp.experts"]
    parts = ("attn", "mlp.gate", "mlp.shared_experts")
    exclude += [f"model.llm.layers.{i}.{part}" for i in layers for part in parts]
    exclude += ["model.llm.layers.0.mlp.w13_dn", "model.llm.layers.0.mlp.w2_md"]
    block = {"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None, "exclude_modules": exclude}
    quant = {"producer": {"name": "modelopt"}, "quantization": block}
    bf16 = c.architecture_from_config(INKLING_TINY)
    nvfp4 = c.architecture_from_config(INKLING_TINY, hf_quant_config=quant)
    assert c.weight_bytes(bf16) - c.weight_bytes(nvfp4) == 4 * 8 * 3 * 256 * 128 * 1.4375
    # the dense MLP named by the checkpoint's w13_dn / w2_md stays bfloat16: listing it changes nothing
    listed_less = quant | {"quantization": block | {"exclude_modules": exclude[:-2]}}
    dense_quantized = c.architecture_from_config(INKLING_TINY, hf_quant_config=listed_less)
    assert c.weight_bytes(dense_quantized) < c.weight_bytes(nvfp4)


def test_the_975b_checkpoints_weigh_what_their_files_hold_beside_the_draft_layers():
    """The official checkpoints' exact tensor bytes, as a public design note lists them (mesh-llm's, in the
    search index as file 56322645045): thinkingmachines/Inkling 1,904,604,285,204 (bfloat16),
    Inkling-NVFP4 591,854,374,368. Both hold the 8 MTP layers in bfloat16, which vLLM builds only as a
    draft and kvright does not count: the two files exceed kvright's weights by the same bytes, to 0.2 MB,
    when the NVFP4 block leaves out what that checkpoint leaves out (embeddings, norms, attention, short
    convolutions, gates, shared experts, the dense MLPs and the first routed layer's experts)."""
    layers = range(INKLING["text_config"]["num_hidden_layers"])
    exclude = ["model.llm.embed", "model.llm.embed_norm", "model.llm.norm", "model.llm.unembed"]
    for i in layers:
        parts = ("attn", "attn_norm", "attn_sconv", "mlp_norm", "mlp_sconv")
        exclude += [f"model.llm.layers.{i}.{part}" for part in parts]
        if i < 2:
            exclude += [f"model.llm.layers.{i}.mlp.{part}" for part in ("w13_dn", "w2_md", "global_scale")]
        else:
            exclude += [f"model.llm.layers.{i}.mlp.gate", f"model.llm.layers.{i}.mlp.shared_experts"]
    exclude += ["model.llm.layers.2.mlp.experts"]
    block = {"quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": None, "exclude_modules": exclude}
    bf16 = c.architecture_from_config(INKLING)
    modelopt = {"producer": {"name": "modelopt"}, "quantization": block}
    nvfp4 = c.architecture_from_config(INKLING, hf_quant_config=modelopt)
    drafts_bf16 = 1_904_604_285_204 - c.weight_bytes(bf16)
    drafts_nvfp4 = 591_854_374_368 - c.weight_bytes(nvfp4)
    assert drafts_bf16 == pytest.approx(drafts_nvfp4, abs=200_000)
    assert 5e9 < drafts_bf16 / 2 < 6e9  # about 5.2 B parameters: 8 layers, each ~650 M


def test_kv_names_the_short_convolution_caches(capsys: pytest.CaptureFixture[str]):
    """`kvright kv` lists the convolution caches apart from the sliding-window attention: their window is
    4 tokens of inputs, and a request reserves it plus the in-flight tokens (2 x 8,192 by default)."""
    assert cli.main(["kv", "inkling-small", "--context", "32768", "--batch", "1", "--json"]) == 0
    kinds = json.loads(capsys.readouterr().out)["by_layer_kind"]
    convs = [k for k in kinds if k["short_conv"]]
    assert [(k["kind"], k["bound_tokens"], k["layers"]) for k in convs] == [("sliding", 4, 42)]
    assert sum(k["layers"] for k in kinds if not k["short_conv"]) == 42
    assert cli.main(["kv", "inkling-small", "--context", "32768", "--batch", "1"]) == 0
    assert "short-conv caches  42:" in capsys.readouterr().out
