"""Vision towers as vLLM's wrapper classes build them (held to those classes, with a torchvision stand-in, in
tests/conformance/test_parameter_counts.py ``WRAPPER_FIXTURES``): what each GPU holds and what the file's
switches change."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import capacity as c
from tests.builders import VISION_WRAPPERS, edited

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"


def _config(slug: str) -> dict:
    return json.loads((CONFIGS / slug / "config.json").read_text())


def test_gemma4s_tower_is_whole_on_every_gpu():
    """gemma4_mm.py builds the tower with transformers' AutoModel and the projection replicated: TP splits
    none of it (572,792,112 parameters for the 26B-A4B, vLLM's class counted)."""
    arch = c.load_architecture(str(CONFIGS / "gemma-4-26b-a4b"))
    assert arch.vision_parameters == arch.vision_whole_parameters == 572_792_112
    split = dataclasses.replace(arch, vision_whole_parameters=0)
    for tp in (2, 4):
        extra = c.weight_bytes_per_gpu(arch, tp) - c.weight_bytes_per_gpu(split, tp)
        assert extra == pytest.approx(arch.vision_parameters * 2 * (1 - 1 / tp), abs=1)


def test_llava_builds_its_tower_only_up_to_the_feature_layer():
    """LLaVA 1.5's vision_feature_layer -2 leaves the last of CLIP's 24 blocks out; -1 builds it too."""
    config = _config("llava-1.5-7b-hf")
    h, inter = 1024, 4096
    block = 4 * h * h + 4 * h + 2 * h * inter + inter + h + 4 * h
    last = c.architecture_from_config(edited(config, vision_feature_layer=-1)).vision_parameters
    assert last - c.architecture_from_config(config).vision_parameters == block
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(edited(config, vision_feature_layer=-30))
    assert refused.value.field == "vision_feature_layer"


def test_llava_projector_biases_follow_multimodal_projector_bias():
    config = _config("llava-v1.6-mistral-7b-hf")
    biased = c.architecture_from_config(config).vision_parameters
    plain = c.architecture_from_config(edited(config, multimodal_projector_bias=False)).vision_parameters
    assert biased - plain == 2 * 4096


def test_llama4s_adapter_and_projector_are_counted():
    """Llama 4 Scout's vision model: 871,932,416 parameters in vLLM's class, the pixel-shuffle adapter
    (5632 -> 4096 -> 4096) and the projection into the 5120-wide text model among them."""
    arch = c.load_architecture(str(CONFIGS / "llama-4-scout-17b-16e-instruct"))
    assert arch.vision_parameters == 871_932_416


def _tower_bytes(arch: c.Architecture, tp: int) -> float:
    """What the towers add to each GPU's weights at ``tp`` (the same model without them, subtracted)."""
    text_only = dataclasses.replace(
        arch,
        vision_parameters=0,
        vision_whole_parameters=0,
        tower_head_split_parameters=0,
        vision_tp_widths=(),
        tower_tp_widths=(),
    )
    return c.weight_bytes_per_gpu(arch, tp) - c.weight_bytes_per_gpu(text_only, tp)


def test_qwen3_omni_is_its_thinker_whose_audio_blocks_go_whole_where_tp_does_not_divide_their_heads():
    """The real Qwen3-Omni-30B-A3B-Instruct file: vLLM builds thinker_config alone (its Qwen3-MoE language
    model, Qwen3-VL-style vision tower and Qwen3-Omni audio encoder), 31,719,205,488 parameters (its class on
    the meta device). The audio encoder's 20 heads split at TP 2 and 4; at TP 8 its class turns its TP off,
    and only its blocks go whole: the vision tower beside them still splits."""
    arch = c.load_architecture(str(CONFIGS / "qwen3-omni-30b-a3b-instruct"))
    assert (arch.parameters, arch.architecture, arch.num_experts) == (
        31_719_205_488,
        "Qwen3OmniMoeForConditionalGeneration",
        128,
    )
    assert not arch.warnings and arch.tower_split_heads == 20
    assert c.valid_tensor_parallel_sizes(arch, 8) == [1, 2, 4, 8]
    assert [c.encoder_tp_mode(arch, tp) for tp in (1, 8)] == ["weights", "weights"]  # no data mode here
    whole, blocks = arch.vision_whole_parameters, arch.tower_head_split_parameters
    split = arch.vision_parameters - whole - blocks  # the vision tower and what splits of the rest
    assert split > 0.5e9 and blocks > 0.6e9
    assert _tower_bytes(arch, 4) == pytest.approx(2 * (whole + (blocks + split) / 4), abs=4)
    assert _tower_bytes(arch, 8) == pytest.approx(2 * (whole + blocks + split / 8), abs=4)


def test_qwen2_5_omni_at_a_tp_its_vision_mlp_does_not_divide_is_refused():
    """The real Qwen2.5-Omni-3B file: 4,703,464,448 parameters (vLLM's thinker class), its audio encoder
    transformers' and whole on every GPU. Its vision tower is Qwen2.5-VL's, whose 3,420-wide MLP vLLM's
    MergedColumnParallelLinear asserts TP divides; the Omni thinker cannot run the tower whole per rank (no
    supports_encoder_tp_data), so TP 8, which the text model's 16 heads and 2 KV heads take, is refused."""
    arch = c.load_architecture(str(CONFIGS / "qwen2.5-omni-3b"))
    assert arch.parameters == 4_703_464_448 and not arch.warnings
    assert arch.architecture not in c.architecture.ENCODER_TP_DATA and not arch.vision_tp_widths
    refused = c.tensor_parallel_error(arch, 8)
    assert refused is not None and "3420-wide vision MLP of" in refused and refused.endswith("1, 2, 4")
    assert c.tensor_parallel_error(arch, 4) is None
    audio = 637_676_544  # transformers' encoder, the projection and the begin/end embedding
    assert arch.vision_whole_parameters == audio
    assert _tower_bytes(arch, 4) == pytest.approx(2 * (audio + (arch.vision_parameters - audio) / 4), abs=4)


def test_qwen2_5_vl_runs_its_tower_whole_per_gpu_where_tp_does_not_divide_its_mlp():
    """Qwen2.5-VL's class can run its tower whole on every rank (supports_encoder_tp_data): at TP 8, which
    its 3,420-wide MLP refuses to split, kvright writes --mm-encoder-tp-mode data and counts it whole."""
    config = _config("qwen2.5-vl-7b-instruct")
    three_b = edited(config, num_attention_heads=16, num_key_value_heads=2, hidden_size=2048)  # 3B's heads
    arch = c.architecture_from_config(three_b)
    assert dict((what.format(w), w) for what, w in arch.vision_tp_widths) == {
        "16 vision attention heads": 16,
        "3420-wide vision MLP": 3420,
        "5120-wide vision patch merger": 5120,
    }
    assert [c.encoder_tp_mode(arch, tp) for tp in (1, 2, 4, 8)] == ["weights"] * 3 + ["data"]
    assert c.tensor_parallel_error(arch, 8) is None
    assert _tower_bytes(arch, 8) == pytest.approx(2 * arch.vision_parameters, abs=4)
    assert _tower_bytes(arch, 4) == pytest.approx(2 * arch.vision_parameters / 4, abs=4)
    workload = c.Workload(max_model_len=8192, prompt_tokens=1024, output_tokens=256)
    slo, tp8 = c.SLO(tpot_seconds=0.1), c.Limits(tensor_parallel_size=8)
    pinned = c.plan(arch, c.gpu_spec("l4"), workload, slo, tp8)
    assert pinned.feasible, pinned.reason
    args = pinned.plan.vllm_args()
    assert args[args.index("--mm-encoder-tp-mode") + 1] == "data"
    qwen3 = c.load_architecture("qwen3-vl-235b-a22b")  # 16 heads, a 4,304-wide MLP: TP 8 splits all
    assert c.encoder_tp_mode(qwen3, 8) == "weights"


def test_a_wrapper_file_without_its_vision_config_weighs_its_config_classs_default_tower():
    """Llama4Config makes a default vision config where a (trimmed) file states none (aiconfigurator's copy
    of Llama-4-Maverick has none), and vLLM's wrapper builds that tower: kvright weighs it from the config
    class's defaults (768 wide, 34 blocks: 455,178,240 parameters into Maverick's 5,120-wide text, what
    vLLM's class registers; conformance holds Scout's to it). The text class builds none."""
    scout = {k: v for k, v in _config("llama-4-scout-17b-16e-instruct").items() if k != "vision_config"}
    arch = c.architecture_from_config(scout)
    stated = c.architecture_from_config({**scout, "vision_config": {"model_type": "llama4_vision_model"}})
    assert arch.vision_parameters == stated.vision_parameters == 455_178_240
    assert not arch.warnings
    text = c.architecture_from_config(edited(scout, architectures=["Llama4ForCausalLM"]))
    assert text.vision_parameters == 0 and not any("vision_config" in w for w in text.warnings)


def test_a_default_tower_kvright_cannot_read_is_left_out_and_said():
    """FastVLM's config class makes a timm tower (``timm_wrapper``), whose widths are the timm model's, not
    the config's: a file without its vision_config is planned as the language model alone, and says so."""
    from tests.builders import _SMALL_TEXT

    fast_vlm = {
        "architectures": ["FastVlmForConditionalGeneration"],
        "model_type": "fast_vlm",
        "text_config": _SMALL_TEXT | {"model_type": "qwen2"},
    }
    arch = c.architecture_from_config(fast_vlm)
    assert arch.vision_parameters == 0
    assert any("states no vision_config" in w and "not counted" in w for w in arch.warnings), arch.warnings


def test_command_a_visions_projector_is_a_swiglu_over_the_shuffled_patches():
    """cohere2_vision.py: a pixel shuffle by downsample_factor (SigLIP's 768 wide x 2^2), a biased gate and
    up projection alignment_intermediate_size wide together, a biased projection into the text width (256)."""
    config = VISION_WRAPPERS["cohere2_vision"]
    base = c.architecture_from_config(config).vision_parameters
    wider = c.architecture_from_config(edited(config, alignment_intermediate_size=2048)).vision_parameters
    assert wider - base == 768 * 4 * 1024 + 1024 + 512 * 256
    coarser = c.architecture_from_config(edited(config, downsample_factor=4)).vision_parameters
    assert coarser - base == 768 * (16 - 4) * 1024


def test_a_vit_that_groups_its_queries_has_narrower_keys_and_values():
    """EXAONE 4.5's Qwen2.5-VL-style ViT states num_key_value_heads 8 for its 32 heads: its k and v
    projections (and their biases) are a quarter as wide, 176 M parameters fewer over 28 blocks than with a
    KV head per query head; its language model is vLLM's Exaone4ForCausalLM (text model_type
    exaone4_5_text)."""
    config = json.loads((CONFIGS / "exaone-4.5-33b" / "config.json").read_text())
    grouped = c.architecture_from_config(config)
    v = config["vision_config"]
    ungrouped_tower = {**v, "num_key_value_heads": v["num_heads"]}
    ungrouped = c.architecture_from_config({**config, "vision_config": ungrouped_tower})
    h, narrow = v["hidden_size"], v["hidden_size"] * v["num_key_value_heads"] // v["num_heads"]
    assert ungrouped.vision_parameters - grouped.vision_parameters == v["depth"] * 2 * (h + 1) * (h - narrow)
    assert not grouped.warnings  # read as EXAONE 4 beside its tower, not as an unknown decoder


def test_lfm2_vl_projects_the_unshuffled_patches_through_its_own_hidden_width():
    """lfm2_vl.py's projector takes downsample_factor^2 patches (1152 x 4 wide) through
    projector_hidden_size into the text width, both linears biased; SigLIP 2 keeps a table of num_patches
    positions. Without them the generic reading was 10.2 M short of vLLM's 426,285,296."""
    config = json.loads((CONFIGS / "lfm2.5-vl-1.6b" / "config.json").read_text())
    arch = c.architecture_from_config(config)
    v, text = config["vision_config"], config["text_config"]["hidden_size"]
    hidden = config["projector_hidden_size"]
    wider = c.architecture_from_config({**config, "projector_hidden_size": hidden + 1})
    shuffled = v["hidden_size"] * config["downsample_factor"] ** 2
    assert wider.vision_parameters - arch.vision_parameters == shuffled + 1 + text  # one more hidden unit
    more = c.architecture_from_config({**config, "vision_config": {**v, "num_patches": v["num_patches"] + 1}})
    assert more.vision_parameters - arch.vision_parameters == v["hidden_size"]  # one more position
    assert not arch.warnings


def test_a_towers_mlp_width_is_its_intermediate_size_and_else_its_ratio_of_any_number():
    """A tower states its MLP width (intermediate_size) or a ratio of its width (Qwen2-VL's mlp_ratio, vLLM's
    ``int(embed_dim * mlp_ratio)``); Step-3.7's states both, the ratio 5.8333 (8,960 / 1,536): a fraction is
    a ratio like any other, not a refusal."""
    from capacity.architecture import _vision_parameters

    def tower(**fields):  # a tower type with no class defaults to fill the width in
        vision = {"model_type": "a_vit", "hidden_size": 64, "num_hidden_layers": 2} | fields
        return _vision_parameters({"model_type": "a_vlm", "vision_config": vision}, 256)

    assert tower(intermediate_size=352, mlp_ratio=5.8333) == tower(intermediate_size=352)
    assert tower(mlp_ratio=5.5) == tower(intermediate_size=352)
    with pytest.raises(c.ConfigError, match="mlp_ratio"):
        tower(mlp_ratio="wide")


def test_paddleocr_vl_ties_its_head_unless_both_levels_of_its_file_say_not_to():
    """PaddleOCR-VL's file says tie_word_embeddings false at its (flat) top level, but transformers'
    PaddleOCRVLConfig turns it back on where its text config's is on (the default), and vLLM keeps the top
    level's: the head is the embedding (799,695,472 parameters, as vLLM's class registers; the checkpoint's
    own lm_head would make the 0.9B of its name). A nested text_config that also says false unties it."""
    import json
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "data" / "configs" / "paddleocr-vl"
    config = json.loads((folder / "config.json").read_text())
    arch = c.architecture_from_config(config)
    assert arch.tie_word_embeddings and arch.parameters == 799_695_472 and not arch.warnings
    untied = c.architecture_from_config({**config, "text_config": {"tie_word_embeddings": False}})
    assert not untied.tie_word_embeddings
    assert untied.parameters - arch.parameters == 1024 * 103424
