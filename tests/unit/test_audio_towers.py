"""Audio wrappers: the encoder and projector each vLLM class builds, weighed as it builds them (held to the
class itself in tests/conformance/test_parameter_counts.py, ``audio:`` cases), where each GPU holds them, the
TP degrees the split ones take, and what kvright says of a tower it does not weigh."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import capacity as c
from tests.builders import AUDIO_WRAPPERS, edited

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"

#: The language models alone, to see what the towers add.
TEXT_ONLY = {
    name: c.architecture_from_config(config["text_config"] | {"torch_dtype": "bfloat16"}).parameters
    for name, config in AUDIO_WRAPPERS.items()
}


def test_qwen2_audio_is_its_language_model_plus_whisper_large_and_one_linear():
    """Qwen2-Audio-7B's encoder (Qwen2AudioEncoderConfig's defaults: Whisper-large's 32 blocks of 1,280)
    as transformers builds it, vLLM's class counted 636,968,960; and a biased linear into the text width."""
    arch = c.architecture_from_config(AUDIO_WRAPPERS["qwen2_audio-whisper-large"])
    width, text = 1280, 256
    assert arch.vision_parameters == 636_968_960 + width * text + text
    assert arch.parameters == TEXT_ONLY["qwen2_audio-whisper-large"] + arch.vision_parameters
    assert arch.vision_whole_parameters == arch.vision_parameters  # transformers' modules: no TP split
    assert not arch.warnings


def test_audio_flamingo_3s_projector_biases_follow_projector_bias():
    biased = c.architecture_from_config(AUDIO_WRAPPERS["audioflamingo3"]).vision_parameters
    plain = c.architecture_from_config(AUDIO_WRAPPERS["audioflamingo3-unbiased-projector"]).vision_parameters
    assert biased - plain == 2 * 256


def test_glm_asr_splits_its_encoder_by_tp_but_not_its_convolutions_and_norms():
    arch = c.architecture_from_config(AUDIO_WRAPPERS["glmasr-defaults"])
    width, layers, mels, text = 1280, 32, 128, 256
    convolutions = mels * width * 3 + width + width * width * 3 + width
    norms_and_row_biases = layers * 6 * width + 2 * width + text
    assert arch.vision_whole_parameters == convolutions + norms_and_row_biases
    # vLLM's class counted 635,089,920 for the encoder; the projector is 5120 -> 512 -> 256, biased
    assert arch.vision_parameters == 635_089_920 + 5120 * 512 + 512 + 512 * 256 + 256
    split = dataclasses.replace(arch, vision_whole_parameters=0)
    for tp in (2, 4):
        extra = c.weight_bytes_per_gpu(arch, tp) - c.weight_bytes_per_gpu(split, tp)
        assert extra == pytest.approx(arch.vision_whole_parameters * 2 * (1 - 1 / tp), abs=1)


def test_glm_asr_fewer_kv_heads_shrink_the_fused_qkv_projection():
    full = c.architecture_from_config(AUDIO_WRAPPERS["glmasr"]).vision_parameters
    grouped = c.architecture_from_config(AUDIO_WRAPPERS["glmasr-grouped-kv"]).vision_parameters
    head_dim, layers = 128 // 4, 2
    assert full - grouped == layers * 2 * 2 * head_dim * (128 + 1)  # two fewer K and V heads, with biases


def test_a_tp_degree_the_towers_split_layers_do_not_divide_is_refused_naming_them():
    six_heads = AUDIO_WRAPPERS["glmasr"]["audio_config"] | {
        "hidden_size": 192,
        "num_attention_heads": 6,
        "num_key_value_heads": 6,
    }
    glm = c.architecture_from_config(edited(AUDIO_WRAPPERS["glmasr"], audio_config=six_heads))
    assert c.tensor_parallel_error(glm, 2) is None  # the language model takes 1, 2 and 4
    refused = c.tensor_parallel_error(glm, 4)
    assert refused is not None and "6 audio encoder attention heads" in refused
    assert refused.endswith("accepted: 1, 2")
    grouped = c.architecture_from_config(AUDIO_WRAPPERS["glmasr-grouped-kv"])  # 4 heads, 2 KV heads
    assert c.tensor_parallel_error(grouped, 2) is None
    granite = c.architecture_from_config(AUDIO_WRAPPERS["granite_speech"])  # a 42-wide CTC head
    assert c.tensor_parallel_error(granite, 2) is None
    refused = c.tensor_parallel_error(granite, 4)
    assert refused is not None and "42-wide audio CTC head of" in refused


def test_granite_speechs_conformer_and_q_former_are_counted_from_their_configs():
    arch = c.architecture_from_config(AUDIO_WRAPPERS["granite_speech-defaults"])
    # vLLM's class with GraniteSpeechEncoderConfig's and Blip2QFormerConfig's defaults: the conformer
    # 274,808,106, three queries of 768, the Q-Former 105,137,664, and a biased linear into the text width
    assert arch.vision_parameters == 274_808_106 + 3 * 768 + 105_137_664 + 768 * 256 + 256
    plus = c.architecture_from_config(AUDIO_WRAPPERS["granite_speech_plus"])
    granite = c.architecture_from_config(AUDIO_WRAPPERS["granite_speech"])
    assert plus.vision_parameters == granite.vision_parameters


def test_a_conformer_context_beyond_its_position_table_is_refused_as_vllm_refuses_it():
    encoder = AUDIO_WRAPPERS["granite_speech"]["encoder_config"] | {"context_size": 65}
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(edited(AUDIO_WRAPPERS["granite_speech"], encoder_config=encoder))
    assert refused.value.field == "encoder_config.context_size" and "max_pos_emb (64)" in str(refused.value)


def test_a_bad_encoder_field_is_refused_naming_it_under_its_sub_config():
    audio = AUDIO_WRAPPERS["qwen2_audio"]["audio_config"] | {"d_model": "wide"}
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(edited(AUDIO_WRAPPERS["qwen2_audio"], audio_config=audio))
    assert refused.value.field == "audio_config.d_model"


def test_a_wrapper_whose_tower_kvright_does_not_weigh_says_so():
    """A wrapper class kvright has no audio reader for (MiDashengLM's, which vLLM registers): planned as its
    language model, with a warning naming the sub-config left out, never silently."""
    config = edited(
        AUDIO_WRAPPERS["qwen2_audio"],
        architectures=["MiDashengLMModel"],
        model_type="midashenglm",
    )
    arch = c.architecture_from_config(config)
    assert arch.vision_parameters == 0
    assert any("audio_config" in w and "does not weigh" in w for w in arch.warnings), arch.warnings


def test_qwen3_asr_is_its_thinkers_qwen3_plus_the_qwen3_omni_audio_encoder():
    """The real Qwen3-ASR-0.6B file: vLLM builds thinker_config's audio encoder and Qwen3 language model,
    782,426,112 parameters (its class on the meta device; test_parameter_counts.py builds it)."""
    arch = c.load_architecture(str(CONFIGS / "qwen3-asr-0.6b"))
    assert arch.parameters == 782_426_112 and not arch.warnings
    assert (arch.vision_parameters, arch.tower_split_heads) == (186_376_192, 14)
    text_only = dataclasses.replace(
        arch, vision_parameters=0, vision_whole_parameters=0, tower_head_split_parameters=0
    )
    blocks = arch.vision_parameters - arch.vision_whole_parameters

    def tower(tp: int) -> int:
        return c.weight_bytes_per_gpu(arch, tp) - c.weight_bytes_per_gpu(text_only, tp)

    # TP 2 divides the encoder's 14 heads: its blocks split; TP 4 does not: the class runs it whole
    assert tower(2) == pytest.approx(2 * (arch.vision_whole_parameters + blocks / 2), abs=2)
    assert tower(4) == pytest.approx(2 * arch.vision_parameters, abs=2)


def test_voxtral_as_transformers_writes_it_is_refused_as_vllm_refuses_it():
    config = edited(
        AUDIO_WRAPPERS["qwen2_audio"],
        architectures=["VoxtralForConditionalGeneration"],
        model_type="voxtral",
        audio_config={"model_type": "voxtral_encoder"},
    )
    with pytest.raises(c.ConfigError) as refused:
        c.architecture_from_config(config)
    assert refused.value.field == "audio_config.downsample_factor" and "params.json" in str(refused.value)


def test_lora_on_qwen2_audio_is_refused_as_vllm_refuses_it():
    arch = c.architecture_from_config(AUDIO_WRAPPERS["qwen2_audio"])
    with pytest.raises(c.CapacityError) as refused:
        c.lora_bytes_per_gpu(arch, c.Lora(max_loras=1, max_lora_rank=8))
    assert "Qwen2AudioForConditionalGeneration" in str(refused.value)


def test_kvright_inspect_shows_the_towers_and_where_each_gpu_holds_them(capsys, tmp_path):
    from kvright.cli import main

    (tmp_path / "config.json").write_text(json.dumps(AUDIO_WRAPPERS["glmasr-defaults"]))
    assert main(["inspect", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    arch = c.architecture_from_config(AUDIO_WRAPPERS["glmasr-defaults"])
    assert (data["vision_parameters"], data["tower_whole_parameters"]) == (
        arch.vision_parameters,
        arch.vision_whole_parameters,
    )
    assert main(["inspect", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("towers"))
    assert f"{arch.vision_parameters / 1e9:.2f} B parameters" in row
    assert "0.01 B of them whole on every GPU, the rest split by TP" in row
    (tmp_path / "config.json").write_text(json.dumps(AUDIO_WRAPPERS["qwen2_audio-whisper-large"]))
    assert main(["inspect", str(tmp_path)]) == 0
    assert "all whole on every GPU; no KV cache" in capsys.readouterr().out
