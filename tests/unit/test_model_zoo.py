"""The models people deploy today, read from their real config.json files (``tests/data/configs``).

Each fixture is a published config (``sources.json`` names the repository and commit it was copied from
and where its parameter count is stated). Through the real CLI: every one is accepted with its parameter
count within 2% of the published one, or refused in one line naming the field; two contexts show the
growth of the full-attention layers only; quantized checkpoints weigh what their method's arithmetic
says, computed here independently from the module shapes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import capacity as c
from kvright import cli

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
SOURCES: dict[str, Any] = json.loads((CONFIGS / "sources.json").read_text())
FIXTURES = sorted(p.name for p in CONFIGS.iterdir() if (p / "config.json").exists())

#: Real checkpoints refused in one line naming the field and saying why, by (field, words of the reason): a
#: GPTQ checkpoint quantized with group activation ordering, which vLLM 0.32 refuses to load.
NOT_READ = {
    "mythomax-l2-13b-gptq-int8": ("'quantization_config.desc_act'", "group activation ordering"),
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = cli.main([*args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out) if code == 0 else None, err


def test_the_fixtures_are_there():
    assert len(FIXTURES) >= 20, FIXTURES


@pytest.mark.parametrize("slug", FIXTURES)
def test_inspect_accepts_the_real_config_with_the_published_parameter_count(capsys, slug):
    code, data, err = run(capsys, "inspect", str(CONFIGS / slug))
    if slug in NOT_READ:
        field, reason = NOT_READ[slug]
        assert code == 2 and err.count("\n") == 1 and field in err and reason in err, err
        return
    assert code == 0, err
    published = SOURCES[slug].get("published_parameters")
    if published:
        assert data["parameters"] == pytest.approx(published, rel=0.02)
    backbone = SOURCES[slug].get("published_backbone_parameters")
    if backbone:  # a card counting the text decoder alone: no tower, no n-gram tables in host memory
        text = data["parameters"] - data["vision_parameters"] - data["host_table_parameters"]
        assert text == pytest.approx(backbone, rel=0.02)
    without_embeddings = SOURCES[slug].get("published_parameters_without_embeddings")
    if without_embeddings:  # a card counting no embedding table: the input one, and the LM head if untied
        cfg = json.loads((CONFIGS / slug / "config.json").read_text())
        tables = 1 if cfg["tie_word_embeddings"] else 2
        embeddings = tables * cfg["vocab_size"] * cfg["hidden_size"]
        assert data["parameters"] - embeddings == pytest.approx(without_embeddings, rel=0.02)
    assert data["valid_tensor_parallel_sizes"], data
    assert data["warnings"] == WARNED.get(slug, [])  # every other fixture is a class vLLM registers


#: Fixtures read with a warning, and why: Baidu's first ERNIE 4.5 upload names its class Ernie4_5_ForCausalLM,
#: which vLLM does not register (it registers Ernie4_5ForCausalLM, the later name); DeepSeek-V4.1-Flash's
#: Engram tables live in host memory, which its pods must request.
WARNED = {
    "deepseek-v4.1-flash": [
        "vLLM keeps this model's Engram n-gram tables, 202.8 GB, in pinned host memory (EngramConfig's "
        "cpu_offload default): not on the GPUs, but every replica's pods need that much host memory beside "
        "vLLM's own (spec.resources.memory)"
    ],
    "ernie-4.5-0.3b-base-pt": [
        "architectures names Ernie4_5_ForCausalLM, a class vLLM 0.32.0 does not register and its "
        "transformers 5.19.0 does not have: vLLM would load the repository's own model code (auto_map) "
        "through its Transformers backend, only with --trust-remote-code and only if that code supports the "
        "backend; a checkpoint that names the class vLLM registers for its model type loads without it"
    ],
}


def _kv(capsys: pytest.CaptureFixture[str], slug: str, context: int) -> dict[str, Any]:
    code, data, err = run(capsys, "kv", str(CONFIGS / slug), "--context", str(context), "--batch", "1")
    assert code == 0, err
    return data


#: transformers' config classes' defaults for the attention fields the wrappers' text configs leave out
#: (transformers saves a sub-config as its difference from its class's defaults): ``Gemma3TextConfig``'s for
#: google/gemma-3-4b-it (RedHatAI/gemma-3-4b-it-FP8-dynamic's file, saved by transformers, spells out the same
#: values); ``LlamaConfig``'s and ``MistralConfig``'s for the llava-hf files (LLaMA-2-7B's and Mistral-7B's
#: shapes, a Llama's KV heads its query heads when unstated).
_SEVEN_B = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
TEXT_DEFAULTS = {
    "gemma3_text": {
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window_pattern": 6,
    },
    "llama": _SEVEN_B | {"num_key_value_heads": 32},
    "mistral": _SEVEN_B | {"num_key_value_heads": 8},
}


def _full_attention_bytes_per_token(cfg: dict[str, Any], kv_bytes: int) -> int:
    """What one more token costs with ``kv_bytes`` a cached value, from the config's fields alone (not
    through capacity)."""
    if "index_head_dim" in cfg:  # sparse MLA: the latent (fp8: fp8_ds_mla) and, where a layer has an
        # indexer (the file's own indexer_types where it states them), its fp8 key and fp32 scale
        rank, rope, index = cfg["kv_lora_rank"], cfg["qk_rope_head_dim"], cfg["index_head_dim"]
        latent = (rank + rope) * 2 if kv_bytes == 2 else rank + 4 * -(-rank // 128) + 2 * rope
        indexers = cfg.get("indexer_types", ["full"] * cfg["num_hidden_layers"]).count("full")
        return cfg["num_hidden_layers"] * latent + indexers * (index + 4 * (index // 128))
    return _bf16_full_attention_bytes_per_token(cfg) // 2 * kv_bytes


def _bf16_full_attention_bytes_per_token(cfg: dict[str, Any]) -> int:
    """What one more token costs in bf16, from the config's fields alone."""
    cfg = cfg.get("thinker_config") or cfg  # Qwen3-ASR: the model vLLM builds is the thinker
    # (InternVL's is llm_config, DeepSeek-OCR's language_config)
    text = cfg.get("text_config") or cfg.get("llm_config") or cfg.get("language_config") or cfg
    if text is not cfg:
        text = TEXT_DEFAULTS.get(text.get("model_type"), {}) | text
    # Gemma 3n / 4: the last num_kv_shared_layers layers read earlier layers' caches and keep none
    shared = text.get("num_kv_shared_layers")
    owning = text["num_hidden_layers"] - shared if shared is not None else None
    if text.get("model_type") == "gemma4_text":  # global layers: their own head width (and K=V heads)
        kv = text.get("num_global_key_value_heads") if text.get("attention_k_eq_v") else None
        per_layer = 2 * (kv or text["num_key_value_heads"]) * text["global_head_dim"] * 2
        return text["layer_types"][:owning].count("full_attention") * per_layer
    if "sparse_attention_config" in text:  # MiniMax-M3: every layer K and V, a sparse one its indexer's key
        sparse = text["sparse_attention_config"]
        indexers = sum(1 for f in sparse["sparse_attention_freq"][: text["num_hidden_layers"]] if f)
        per_layer = 2 * text["num_key_value_heads"] * text["head_dim"] * 2
        return text["num_hidden_layers"] * per_layer + indexers * sparse["sparse_index_dim"] * 2
    if "hybrid_layer_pattern" in text:  # MiMo-V2: the 0s attend fully, values narrower than keys
        per_layer = text["num_key_value_heads"] * (text["head_dim"] + text["v_head_dim"]) * 2
        return text["hybrid_layer_pattern"].count(0) * per_layer
    if text.get("kv_lora_rank"):  # MLA: the latent and rope key
        per_layer = 2 * (text["kv_lora_rank"] + text["qk_rope_head_dim"])
        # LongCat-Flash states num_layers: each of them attends twice (num_hidden_layers is twice it)
        attending = text["num_hidden_layers"] if "num_hidden_layers" in text else 2 * text["num_layers"]
        if "linear_attn_config" in text:  # Kimi-Linear / K3: the KDA layers keep a constant state instead
            attending -= len(text["linear_attn_config"]["kda_layers"])
        return attending * per_layer
    if "layers_block_type" in text:  # Nemotron-H as transformers 5 saves it: one entry per layer
        layers = text["layers_block_type"].count("attention")
    elif "hybrid_override_pattern" in text:
        layers = text["hybrid_override_pattern"].count("*")
    elif "layer_types" in text:
        layers = text["layer_types"][:owning].count("full_attention")
    elif "sliding_window_pattern" in text:  # older Gemma 3 files: every pattern-th layer is full attention
        layers = text["num_hidden_layers"] // text["sliding_window_pattern"]
    elif "attention_chunk_size" in text:  # Llama 4: the NoPE layers (no_rope_layers[i] == 0) are global; an
        # absent or empty list is transformers' default, every no_rope_layer_interval-th (4th) layer
        flags = text.get("no_rope_layers") or [
            int((i + 1) % text.get("no_rope_layer_interval", 4) != 0)
            for i in range(text["num_hidden_layers"])
        ]
        layers = flags.count(0)
    elif "attn_layer_period" in text:  # Jamba: layers at offset, offset + period, ... attend
        layers = len(range(text["attn_layer_offset"], text["num_hidden_layers"], text["attn_layer_period"]))
    elif "full_attention_interval" in text:  # Qwen3-Next: every interval-th layer is full attention
        layers = text["num_hidden_layers"] // text["full_attention_interval"]
    elif "block_configs" in text:
        heads = text["num_attention_heads"]
        head_dim = text.get("head_dim") or text["hidden_size"] // heads
        return sum(
            2 * (heads // b["attention"]["n_heads_in_group"]) * head_dim * 2
            for b in text["block_configs"]
            if not b["attention"].get("no_op") and not b["attention"].get("replace_with_linear")
        )
    else:
        layers = text["num_hidden_layers"]
    head_dim = text.get("head_dim") or text["hidden_size"] // text["num_attention_heads"]
    return layers * 2 * text["num_key_value_heads"] * head_dim * 2


#: DeepSeek-V4's and V4.1's caches grow by their compressed groups' blocks, each costing the widest group's
#: pages: held to the engine's groups in tests/unit/test_deepseek_v4.py, tests/conformance/test_deepseek_v4.py
#: and tests/conformance/test_deepseek_v41.py.
_COMPRESSED = ("deepseek-v4-flash", "deepseek-v4.1")
GROWTH = [s for s in FIXTURES if s not in NOT_READ and not s.startswith(_COMPRESSED)]


@pytest.mark.parametrize("slug", GROWTH)
def test_two_contexts_grow_by_the_full_attention_layers_only(capsys, slug):
    """Between two contexts a whole number of blocks apart, longer than any window plus the in-flight
    tokens, only the full-attention groups grow, by exactly their bytes per token; sliding, chunked and
    Mamba / linear-attention groups stay at their bound or constant state."""
    cfg = json.loads((CONFIGS / slug / "config.json").read_text())
    positions = c.load_architecture(str(CONFIGS / slug)).max_position_embeddings
    first = _kv(capsys, slug, 16)
    # Mamba hybrids raise the block size to hold a state; Gemma 4's groups hold blocks of their own sizes.
    block = math.lcm(first["block_size"], *(k["tokens_per_block"] for k in first["by_layer_kind"]))
    # Past the largest window or chunk plus the in-flight tokens (2 x the default 8192 batched tokens) a
    # bounded group holds its bound; Gemma 3 1B's 32768 positions put half of them short of 512 + 16384.
    bound = max((k["bound_tokens"] or 0 for k in first["by_layer_kind"]), default=0)
    settled = bound + 2 * 8192 if bound else 0
    long = positions // 2 if positions // 2 >= 2 * block and positions // 2 - block >= settled else positions
    short = long - block * max(1, (long - settled) // 2 // block)  # a whole number of blocks apart
    a, b = _kv(capsys, slug, short), _kv(capsys, slug, long)
    # the checkpoint's KV dtype, which auto means (ModelOpt's, compressed-tensors'), or bf16
    own = c.load_architecture(str(CONFIGS / slug)).weights.kv_cache_dtype
    expected = _full_attention_bytes_per_token(cfg, 2 if own is None else c.KV_CACHE_DTYPES[own])
    assert b["growth_bytes_per_token"] == expected
    assert b["kv_cache_bytes"] - a["kv_cache_bytes"] == expected * (long - short)
    bounded = {k["kind"]: k["bytes_per_sequence"] for k in a["by_layer_kind"] if not k["grows_with_context"]}
    assert bounded == {
        k["kind"]: k["bytes_per_sequence"] for k in b["by_layer_kind"] if not k["grows_with_context"]
    }


def test_modelopt_fp8_kv_cache_is_what_auto_means_for_that_checkpoint(capsys):
    """kv_cache_quant_algo FP8 in hf_quant_config.json: vLLM's --kv-cache-dtype auto stores one byte."""
    data = _kv(capsys, "llama-3.1-70b-instruct-fp8-modelopt", 8192)
    assert data["growth_bytes_per_token"] == 80 * 2 * 8 * 128 * 1


# (fixture, bytes per quantized weight from the method's arithmetic, which module kinds it quantizes)
QUANTIZED = [
    ("qwen3-235b-a22b-fp8", 1 + 4 / (128 * 128), "linear"),  # fp8 e4m3, one fp32 scale per 128x128 block
    ("qwen3-30b-a3b-fp8", 1 + 4 / (128 * 128), "linear"),
    ("qwen3-32b-fp8", 1 + 4 / (128 * 128), "linear"),
    ("glm-5-fp8", 1 + 4 / (128 * 128), "linear"),
    ("deepseek-v3", 1 + 4 / (128 * 128), "linear"),
    ("kimi-k2", 1 + 4 / (128 * 128), "linear"),
    ("gpt-oss-120b", 4.25 / 8, "experts"),  # MXFP4: 4-bit values, one 8-bit scale per 32
    ("gpt-oss-20b", 4.25 / 8, "experts"),
    ("kimi-k2.5", 0.5 + 2 / 32, "experts"),  # compressed-tensors int4, group 32, bf16 scales; ignore the rest
    ("kimi-k2.6-nvfp4", 4.5 / 8, "experts"),  # ModelOpt NVFP4 in config.json; attention, layer 0 ignored
    ("llama-3.1-70b-instruct-fp8-modelopt", 1.0, "linear"),  # ModelOpt FP8 per tensor (hf_quant_config.json)
    ("qwen3-235b-a22b-nvfp4", 4.5 / 8, "linear"),  # NVFP4: 4-bit values, one fp8 scale per 16
    ("deepseek-v3.1-nvfp4", 4.5 / 8, "linear-but-mla-down"),
    ("mythomax-l2-13b-gptq-int4", 0.5 + 2 / 128, "linear"),  # GPTQ 4-bit, fp16 scale per 128 (symmetric)
    ("tinyllama-1.1b-chat-fp8-compressed-tensors", 1.0, "linear"),  # compressed-tensors fp8 per tensor
    ("glm-4.5-fp8", 1.0, "linear"),  # compressed-tensors fp8, one scale per output channel
    ("gemma-3-4b-it-fp8-dynamic", 1.0, "linear"),  # the same, vision tower and lm_head ignored (bf16)
    ("llama-4-scout-17b-16e-instruct-fp8-dynamic", 1.0, "linear-but-attention"),  # attention, routers bf16
]


def _mla_unquantized_share(text: dict[str, Any]) -> float:
    """DeepSeek NVFP4 keeps q_a, q_b, kv_a and kv_b in bf16 and quantizes o_proj: their parameter share."""
    h, heads = text["hidden_size"], text["num_attention_heads"]
    q_a = h * text["q_lora_rank"]
    q_b = text["q_lora_rank"] * heads * (text["qk_nope_head_dim"] + text["qk_rope_head_dim"])
    kv_a = h * (text["kv_lora_rank"] + text["qk_rope_head_dim"])
    kv_b = text["kv_lora_rank"] * heads * (text["qk_nope_head_dim"] + text["v_head_dim"])
    o = heads * text["v_head_dim"] * h
    return (q_a + q_b + kv_a + kv_b) / (q_a + q_b + kv_a + kv_b + o)


@pytest.mark.parametrize(("slug", "per_weight", "scope"), QUANTIZED, ids=[q[0] for q in QUANTIZED])
def test_quantized_weights_are_within_five_percent_of_the_methods_arithmetic(slug, per_weight, scope):
    arch = c.load_architecture(str(CONFIGS / slug))
    g = arch.parameter_groups  # counts, checked against published totals above
    bf16 = 2
    experts = g.routed_experts_total
    linear = g.sharded + g.kv_projection_total + g.replicated - _norms_and_routers(arch)
    if scope == "experts":
        expected = experts * per_weight + (g.total - experts) * bf16
    else:
        quantized = experts + linear
        if scope == "linear-but-attention":  # RedHatAI's Llama 4 recipe ignores re:.*self_attn
            quantized -= _attention_parameters(json.loads((CONFIGS / slug / "config.json").read_text()))
        if scope == "linear-but-mla-down":
            text = json.loads((CONFIGS / slug / "config.json").read_text())
            attention = _mla_attention_parameters(text)
            quantized -= attention * _mla_unquantized_share(text)
        expected = quantized * per_weight + (g.total - quantized) * bf16
    assert c.weight_bytes(arch) == pytest.approx(expected, rel=0.05)
    assert c.weight_bytes(arch) < 0.8 * bf16 * arch.parameters  # and far from the bf16 size


def test_deepseek_v4_nvfp4_experts_weigh_an_fp8_scale_per_16_where_the_original_has_an_e8m0_per_32():
    """nvidia/DeepSeek-V4-Flash-NVFP4 is DeepSeek-V4-Flash with moe_quant_algo NVFP4: vLLM's
    DeepseekV4FP8Config builds its routed experts with ModelOpt's NVFP4 method (4-bit values, an fp8 scale per
    16) instead of MXFP4 (4-bit values, an e8m0 scale per 32), and everything else as the original."""
    nvfp4 = c.load_architecture(str(CONFIGS / "deepseek-v4-flash-nvfp4"))
    mxfp4 = c.load_architecture(str(CONFIGS / "deepseek-v4-flash"))
    assert nvfp4.parameters == mxfp4.parameters
    experts = nvfp4.parameter_groups.routed_experts_total
    assert c.weight_bytes(nvfp4) - c.weight_bytes(mxfp4) == pytest.approx(experts * (4.5 - 4.25) / 8, abs=2)
    assert nvfp4.weights.label.endswith("experts in NVFP4")


def test_compressed_tensors_regexes_in_deepseek_v4s_own_module_names_select_its_modules():
    """RedHatAI/DeepSeek-V4-Flash-NVFP4-FP8 names its groups by regexes over vLLM's DeepSeek-V4 module names
    (``attn.fused_wqa_wkv``, ``attn.wq_b``, ``attn.wo_a``, ``attn.wo_b``; ``ffn.experts``,
    ``ffn.shared_experts``), which no other family spells: read by other families' names they selected
    nothing and the checkpoint weighed as bf16, 3.5 times its size. The attention projections are fp8 blocks
    (and so is the indexer's wq_b, which the attention regex also names), the routed and shared experts NVFP4
    (4 bits and an fp8 scale per 16), the rest bf16."""
    ct = c.load_architecture(str(CONFIGS / "deepseek-v4-flash-nvfp4-fp8"))
    original = c.load_architecture(str(CONFIGS / "deepseek-v4-flash"))
    assert ct.parameters == original.parameters
    per_weight = {
        kind: ct.weights.bytes_per_parameter(kind, layer=2, model_dtype_bytes=2)
        for kind in ("experts", "shared_experts", "attention", "embedding", "lm_head")
    }
    assert per_weight["experts"] == per_weight["shared_experts"] == 4.5 / 8
    assert per_weight["attention"] == pytest.approx(1 + 4 / 128**2)  # a float32 scale per 128x128 block
    assert per_weight["embedding"] == per_weight["lm_head"] == 2
    g = ct.parameter_groups
    assert c.weight_bytes(ct) < 0.6 * g.total * 2
    assert c.weight_bytes(ct) == pytest.approx(g.routed_experts_total * 4.5 / 8, rel=0.25)


def test_gemma_4s_experts_beside_its_mlp_stay_quantized_when_the_mlp_is_excluded():
    """nvidia/Gemma-4-26B-A4B-NVFP4 excludes every layer's ``mlp*``, ``router*`` and ``self_attn*``. Gemma 4
    keeps its routed experts beside the dense MLP (``layers.N.experts``), so vLLM builds them in NVFP4; read
    by the usual ``mlp.experts`` spelling the exclusion took them too, and the checkpoint weighed 51.6 GB
    instead of 18.8 GB."""
    arch = c.load_architecture(str(CONFIGS / "gemma-4-26b-a4b-nvfp4"))
    plain = c.load_architecture(str(CONFIGS / "gemma-4-26b-a4b"))
    assert arch.parameters == plain.parameters
    per_weight = {
        kind: arch.weights.bytes_per_parameter(kind, layer=3, model_dtype_bytes=2)
        for kind in ("experts", "mlp", "attention", "lm_head")
    }
    assert per_weight == {"experts": 4.5 / 8, "mlp": 2, "attention": 2, "lm_head": 2}
    experts = arch.parameter_groups.routed_experts_total
    expected = experts * 4.5 / 8 + (c.weight_bytes(plain) - experts * 2)
    assert c.weight_bytes(arch) == pytest.approx(expected, rel=0.001)


def test_a_mixed_precision_checkpoint_weighs_each_listed_module_by_its_own_algo():
    """nvidia/Qwen3.6-27B-NVFP4 (ModelOpt MIXED_PRECISION): the attention and Gated DeltaNet projections its
    quantized_layers list are FP8 (1 byte), the MLPs and the LM head W4A16 NVFP4 (4 bits + an fp8 scale per
    16), the rest bf16; the bytes from the config's module shapes, by hand."""
    slug = "qwen3.6-27b-nvfp4"
    arch = c.load_architecture(str(CONFIGS / slug))
    t = json.loads((CONFIGS / slug / "config.json").read_text())["text_config"]
    h, full = t["hidden_size"], t["layer_types"].count("full_attention")
    linear = t["layer_types"].count("linear_attention")
    q = t["num_attention_heads"] * t["head_dim"]
    attention = h * 2 * q + 2 * h * t["num_key_value_heads"] * t["head_dim"] + q * h  # gated q, k, v, o
    keys = t["linear_num_key_heads"] * t["linear_key_head_dim"]
    values = t["linear_num_value_heads"] * t["linear_value_head_dim"]
    deltanet = h * (2 * keys + values) + h * values + values * h  # in_proj_qkv, in_proj_z, out_proj
    fp8 = full * attention + linear * deltanet
    nvfp4 = t["num_hidden_layers"] * 3 * h * t["intermediate_size"] + t["vocab_size"] * h  # MLPs, lm_head
    expected = fp8 * 1 + nvfp4 * 4.5 / 8 + (arch.parameters - fp8 - nvfp4) * 2
    assert arch.weights.method == "modelopt_mixed"
    assert c.weight_bytes(arch) == pytest.approx(expected, rel=0.05)


def _norms_and_routers(arch: c.Architecture) -> float:
    """Parameters no method quantizes: norms and MoE routers (the method's arithmetic leaves them bf16)."""
    norms = (arch.norms_per_layer * arch.num_layers + 1) * arch.hidden_size
    routers = arch.hidden_size * arch.num_experts * arch.num_moe_layers
    return norms + routers


def _attention_parameters(cfg: dict[str, Any]) -> float:
    """q, k, v and o projections of every layer (GQA, from the config's fields)."""
    text = cfg.get("text_config", cfg)
    h, heads, kv = text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]
    head_dim = text.get("head_dim") or h // heads
    return text["num_hidden_layers"] * h * head_dim * (2 * heads + 2 * kv)


def _mla_attention_parameters(text: dict[str, Any]) -> float:
    h, heads = text["hidden_size"], text["num_attention_heads"]
    per_layer = (
        h * text["q_lora_rank"]
        + text["q_lora_rank"] * heads * (text["qk_nope_head_dim"] + text["qk_rope_head_dim"])
        + h * (text["kv_lora_rank"] + text["qk_rope_head_dim"])
        + text["kv_lora_rank"] * heads * (text["qk_nope_head_dim"] + text["v_head_dim"])
        + heads * text["v_head_dim"] * h
    )
    return per_layer * text["num_hidden_layers"]


def test_qwen3_235b_fp8_checkpoint_loads_only_at_tp_1_2_4(capsys):
    code, data, err = run(capsys, "inspect", str(CONFIGS / "qwen3-235b-a22b-fp8"))
    assert code == 0, err
    assert data["valid_tensor_parallel_sizes"] == [1, 2, 4]
    fp8 = str(CONFIGS / "qwen3-235b-a22b-fp8")
    code, _, err = run(capsys, "kv", fp8, "--context", "4096", "--batch", "1", "--tensor-parallel-size", "8")
    assert code == 2 and "192" in err and "block" in err


def test_gpt_oss_120b_fits_one_h100(capsys):
    code, data, err = run(capsys, "plan", "gpt-oss-120b", "--gpu", "h100-sxm", "--max-gpus", "1")
    assert code == 0, err
    assert data["feasible"] is True and data["plan"]["tensor_parallel_size"] == 1
    assert data["memory_per_gpu_bytes"]["weights"] < 70 * 10**9  # MXFP4 experts, bf16 attention


def test_an_nvfp4_checkpoint_on_hopper_says_it_falls_back():
    result = c.plan(
        c.catalog_architecture("qwen3-235b-a22b-nvfp4"),
        c.gpu_spec("h200"),
        c.Workload(max_model_len=8192),
        c.SLO(),
        c.Limits(),
    )
    assert result.feasible
    assert any("FP4" in w for w in result.warnings), result.warnings


def test_qwen3_vl_vision_tower_counts_its_mergers_and_deepstack_mergers(capsys):
    """Qwen3-VL-235B's vision tower, summed from the checkpoint's own tensor list (the report that holds the
    fixture lists every `model.visual.*` tensor): 27 blocks, patch and position embeddings, the patch merger
    (LayerNorm, fc1 4608x4608, fc2 4608x4096) and three deepstack mergers of the same shape with a 4608-wide
    norm: 576,388,336. The ViT arithmetic without the Qwen-VL merger missed the deepstack mergers (-21%)."""
    code, data, err = run(capsys, "inspect", str(CONFIGS / "qwen3-vl-235b-a22b"))
    assert code == 0, err
    assert data["vision_parameters"] == pytest.approx(576_388_336, rel=1e-4)
    assert data["parameters"] == pytest.approx(235_670_022_896, rel=1e-6)  # the checkpoint's tensor sum


def _config(slug: str) -> dict[str, Any]:
    return json.loads((CONFIGS / slug / "config.json").read_text())


#: Objects inside a config.json that readers of their own walk (towers, KDA settings): each field of each,
#: in every fixture that has one, replaced by values of the wrong kind.
NESTED = ("vision_config", "audio_config", "linear_attn_config")
WRONG_KINDS = (None, "x", -1, 1.5, [], {}, [1, "a"])


@pytest.mark.parametrize(
    "slug",
    [s for s in FIXTURES if any(isinstance(_config(s).get(k), dict) for k in NESTED)],
)
def test_a_wrong_value_in_a_nested_object_is_refused_naming_it_never_a_traceback(slug):
    """The readers of towers and nested settings (Qwen-VL, Pixtral, InternViT, GLM-V, Gemma 3n's towers,
    Kimi-Linear's linear_attn_config) take any value of any field: a reading, or a ConfigError naming a
    field; a TypeError here would be a traceback from the CLI and the operator."""
    config = _config(slug)
    for key in (k for k in NESTED if isinstance(config.get(k), dict)):
        for field in config[key]:
            for value in WRONG_KINDS:
                changed = json.loads(json.dumps(config))
                changed[key][field] = value
                try:
                    arch = c.architecture_from_config(changed)
                    assert arch.parameters > 0 and c.weight_bytes(arch) > 0
                except c.ConfigError as err:
                    assert err.field and "\n" not in str(err)


def test_index_cache_leaves_glm_5_2_an_indexer_on_the_layers_its_file_names_full():
    """nvidia/GLM-5.2-NVFP4 is GLM-5 with IndexCache: ``index_topk_freq`` 4 from ``index_skip_topk_offset`` 3,
    by which vLLM builds an indexer on 21 of the 78 layers; the others reuse the top-k of the last one. The
    file also lists each layer as ``full`` or ``shared`` (``indexer_types``, which vLLM 0.32's GLM class does
    not read): the rule vLLM reads agrees with it layer by layer. The 57 layers without an indexer hold no
    indexer weights and cache no indexer key: 57 x 132 bytes less a token than GLM-5.1's every-layer cache
    (tests/conformance/test_sparse_attention.py holds both to vLLM's classes)."""
    config = json.loads((CONFIGS / "glm-5.2-nvfp4" / "config.json").read_text())
    arch = c.load_architecture(str(CONFIGS / "glm-5.2-nvfp4"))
    kept = [not layer.reuses_indices for layer in arch.layers]
    assert kept == [t == "full" for t in config["indexer_types"]]
    assert arch.num_mla_indexers == 21
    every_layer = c.architecture_from_config(
        {k: v for k, v in config.items() if k not in ("index_topk_freq", "index_skip_topk_offset")},
        hf_quant_config=json.loads((CONFIGS / "glm-5.2-nvfp4" / "hf_quant_config.json").read_text()),
    )
    assert every_layer.num_mla_indexers == 78
    latent, index_key = 512 + 4 * 4 + 2 * 64, 128 + 4  # fp8_ds_mla; the fp8 key and its fp32 scale
    assert c.kv_cache_bytes_per_token(arch, kv_cache_dtype="fp8") == 78 * latent + 21 * index_key
    assert c.kv_cache_bytes_per_token(every_layer, kv_cache_dtype="fp8") == 78 * (latent + index_key)
    indexer = 2048 * 32 * 128 * 2 + 6144 * (128 + 32) * 2 + 2 * 128 * 4  # bf16 wq_b, wk + weights, k_norm
    assert every_layer.weight_groups.total - arch.weight_groups.total == 57 * indexer


@pytest.mark.parametrize(
    ("fields", "kept"),
    [
        ({}, list(range(8))),
        ({"index_topk_freq": 2}, [0, 1, 3, 5, 7]),
        ({"index_topk_freq": 4, "index_skip_topk_offset": 3}, [0, 1, 2, 6]),
        ({"index_topk_pattern": "FFSSF"}, [0, 1, 4, 5, 6, 7]),  # a layer past its end keeps its indexer
        ({"index_topk_pattern": ["S", "F"] * 4, "index_topk_freq": 4}, [1, 3, 5, 7]),
    ],
)
def test_index_cache_fields_pick_the_layers_that_build_an_indexer_as_vllm_does(fields, kept):
    """vLLM's rule (models/deepseek_v32/attention.py): a pattern's ``S`` layers reuse; without a pattern,
    layer i reuses when ``max(i - offset + 1, 0) % freq`` is not 0 (offset 2 and freq 1 by default)."""
    from tests.builders import GLM5_SMALL

    arch = c.architecture_from_config({**GLM5_SMALL, **fields})
    assert [i for i, layer in enumerate(arch.layers) if not layer.reuses_indices] == kept
    assert arch.num_mla_indexers == len(kept)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"index_topk_freq": 0}, "'index_topk_freq': is 0; expected an integer between 1"),
        ({"index_topk_pattern": 4}, "'index_topk_pattern': is 4; expected a string (or list) of F and S"),
    ],
)
def test_index_cache_fields_vllm_cannot_read_are_refused_naming_the_field(fields, words):
    from tests.builders import GLM5_SMALL

    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config({**GLM5_SMALL, **fields})
    assert words in str(refused.value)


def test_layers_that_reuse_the_top_k_read_no_index_keys_of_the_context():
    """A decode step's reads under IndexCache: every layer the latents of the top-k tokens, only the layers
    with an indexer the indexer keys of the whole context."""
    arch = c.load_architecture(str(CONFIGS / "glm-5.2-nvfp4"))
    step = c.decode_step(
        arch, c.gpu_spec("b200"), tensor_parallel_size=8, batch=4, context_tokens=131072, kv_cache_dtype="fp8"
    )
    assert step.kv_cache_bytes_read == 4 * (21 * 132 * 131072 + 78 * 656 * 2048)


def test_inspect_says_how_many_layers_keep_an_indexer(capsys):
    """``kvright inspect`` of GLM-5.2 names its 21 indexers, in words and in the JSON."""
    code, data, _ = run(capsys, "inspect", str(CONFIGS / "glm-5.2-nvfp4"))
    assert code == 0 and data["indexer_layers"] == 21
    assert cli.main(["inspect", str(CONFIGS / "glm-5.2-nvfp4")]) == 0
    out = capsys.readouterr().out
    assert "78 layers; sparse: indexers in 21 of them pick 2,048 tokens to attend to" in out
