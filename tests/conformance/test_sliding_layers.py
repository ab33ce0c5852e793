"""Which layers slide, and the language model's sizes: capacity reads every config.json it holds as the
config class vLLM loads reads it.

The sliding-window layers bound their KV cache by the window, so a layer read as sliding that vLLM
serves in full under-counts the cache. Real files say which layers slide in several ways: a stated
``layer_types``; nothing, leaving the config class to derive it (Cohere 2: every 4th layer global; Gemma 2:
every other); ``sliding_window`` with ``use_sliding_window: false``, which the Qwen classes null (Qwen2-VL
and Qwen2.5-VL ship so). vLLM builds its layers from the text config that class yields: a layer slides
when its ``layer_types`` entry is ``sliding_attention`` (vLLM's per-layer window), and without
``layer_types`` every attention layer takes the config's ``sliding_window``.

The sizes (hidden width, layers, heads, KV heads, vocabulary) are what the config class yields, which is
more than a file states: transformers saves a wrapper's ``text_config`` as its difference from its class's
defaults (llava-hf's LLaVA files state no width, layers or heads of their Llama or Mistral).

Each case loads the file through vLLM 0.32's own ``get_config`` and ``get_hf_text_config``
(vllm_config_probe.py; no weights, no engine) and compares, layer by layer, with capacity's reading.
The cases: every catalog entry, every real config in ``tests/data/configs`` that capacity reads, and
files as published for families capacity derives from fields (Qwen2-VL, Qwen2.5-VL, Command R7B, OLMo 3,
EXAONE 4, StarCoder2's window on every layer,
Gemma 2 without ``layer_types``, Qwen3 with the window on).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import HERE, VllmEnv

pytestmark = pytest.mark.conformance

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"

_DENSE = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}
_QWEN_VL_VISION = {
    "depth": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 2,
    "hidden_act": "silu",
}


def _file(architecture: str, model_type: str, **fields: Any) -> dict[str, Any]:
    return _DENSE | {"architectures": [architecture], "model_type": model_type, **fields}


#: Files as their publishers write them (no layer_types), shrunk: the fields that decide are the real ones.
AS_PUBLISHED: dict[str, dict[str, Any]] = {
    "qwen2.5-vl-window-off": _file(
        "Qwen2_5_VLForConditionalGeneration",
        "qwen2_5_vl",
        sliding_window=32768,
        use_sliding_window=False,
        max_window_layers=70,
        vision_config=_QWEN_VL_VISION | {"out_hidden_size": 256},
    ),
    "qwen2-vl-window-off": _file(
        "Qwen2VLForConditionalGeneration",
        "qwen2_vl",
        sliding_window=32768,
        use_sliding_window=False,
        max_window_layers=80,
        vision_config={"depth": 2, "embed_dim": 64, "mlp_ratio": 4, "num_heads": 2, "hidden_size": 256},
    ),
    "qwen3-window-on-every-layer": _file(
        "Qwen3ForCausalLM",
        "qwen3",
        sliding_window=512,
        use_sliding_window=True,
        max_window_layers=0,
        head_dim=64,
    ),
    "command-r7b-pattern": _file(
        "Cohere2ForCausalLM", "cohere2", sliding_window=4096, sliding_window_pattern=4
    ),
    "cohere2-default-pattern": _file("Cohere2ForCausalLM", "cohere2", sliding_window=4096),
    "olmo3-default-pattern": _file("Olmo3ForCausalLM", "olmo3", sliding_window=4096),
    "gemma2-without-layer-types": _file("Gemma2ForCausalLM", "gemma2", sliding_window=4096, head_dim=64),
    "mistral-every-layer": _file("MistralForCausalLM", "mistral", sliding_window=4096),
    "starcoder2-every-layer": _file(
        "Starcoder2ForCausalLM", "starcoder2", sliding_window=4096, use_bias=True
    ),
    "exaone4-default-pattern": _file("Exaone4ForCausalLM", "exaone4", sliding_window=4096),
    "a-window-of-0-is-none": _file("MistralForCausalLM", "mistral", sliding_window=0),
    "qwen2-window-without-use-sliding-window": _file("Qwen2ForCausalLM", "qwen2", sliding_window=4096),
}


def _cases() -> dict[str, dict[str, Any]]:
    cases = {f"catalog:{m}": dict(capacity.catalog_entry(m)["config"]) for m in capacity.catalog_ids()}
    for folder in sorted(p for p in CONFIGS.iterdir() if (p / "config.json").is_file()):
        config = json.loads((folder / "config.json").read_text())
        try:
            capacity.architecture_from_config(config, name=folder.name)
        except capacity.ConfigError:
            continue  # an architecture capacity refuses in one line (test_model_zoo.py): nothing to compare
        cases[f"zoo:{folder.name}"] = config
    return cases | {f"published:{k}": v for k, v in AS_PUBLISHED.items()}


CASES = _cases()

@pytest.fixture(scope="module")
def vllm_reads(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    payload = json.dumps([{"id": cid, "config": config} for cid, config in CASES.items()])
    out = vllm_env.run([str(HERE / "vllm_config_probe.py")], stdin=payload, timeout=600)
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


def _sliding_in_vllm(answer: dict[str, Any]) -> list[bool]:
    """vLLM 0.32's rule: the model's window goes to every attention layer when ``layer_types`` is absent or
    all sliding (``EngineArgs.create_engine_config`` sets ``CacheConfig.sliding_window`` only then); otherwise
    a layer slides when its model passes it a window of its own, which the models read from its
    ``layer_types`` entry (llama.py, gemma2.py, gemma3.py, commandr.py, exaone4.py, gpt_oss.py)."""
    window, types = answer["sliding_window"], answer["layer_types"]
    if not window:  # ModelConfig turns a window of 0 into None ("sliding window is disabled")
        return [False] * answer["num_hidden_layers"]
    if types is None or all(t == "sliding_attention" for t in types):
        return [True] * answer["num_hidden_layers"]
    return [t == "sliding_attention" for t in types]


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_slides_the_layers_vllm_slides(vllm_reads: dict[str, dict[str, Any]], case: str) -> None:
    answer = vllm_reads[case]
    arch = capacity.architecture_from_config(CASES[case], name=case)
    if arch.model_type in ("mimo_v2", "mimo_v2_flash"):
        # MiMo-V2's model class takes each layer's kind from hybrid_layer_pattern itself, whatever its config
        # class derives: test_parameter_counts.py holds those layers, windows included, to vLLM's class.
        pattern = CASES[case]["hybrid_layer_pattern"]
        assert [layer.mixer == "sliding" for layer in arch.layers] == [p == 1 for p in pattern]
        return
    if arch.short_conv_kernel:
        # Inkling's model class (vLLM's models/inkling) takes its sliding layers from local_layer_ids and its
        # window from sliding_window_size, not the config's sliding_window: test_inkling.py holds every
        # layer's cache spec, window included, to its modules'.
        assert answer["error"] is None, answer
        local = set(CASES[case]["text_config"].get("local_layer_ids") or [])
        slides = [layer.mixer == "sliding" for layer in arch.layers]
        assert slides == [i in local for i in range(arch.num_layers)]
        return
    if arch.config_reader == "checkpoint":
        # Read only by the checkpoint's own code (test_remote_code.py), whose config class keeps the file's
        # fields: vLLM's rule over the file's own window and layer types (Phi-3-vision's 131,072 on every
        # layer, which test_parameter_counts.py holds to vLLM's class over a plain config of the file).
        assert "custom code" in str(answer["error"]), answer
        config = CASES[case]
        answer = {
            "sliding_window": config.get("sliding_window"),
            "layer_types": config.get("layer_types"),
            "num_hidden_layers": len(arch.layers),
        }
    else:
        assert answer["error"] is None, f"vLLM could not read {case}: {answer['error']}"
    sliding = _sliding_in_vllm(answer)
    assert [arch.slides(layer) for layer in arch.layers] == sliding
    # vLLM's Command R v2 layers take the window + 1 (commandr.py: Cohere's training convention).
    window = answer["sliding_window"] + (arch.model_type == "cohere2") if any(sliding) else None
    assert arch.sliding_window == window


def test_the_published_files_cover_both_answers(vllm_reads: dict[str, dict[str, Any]]) -> None:
    """The as-published cases are not all of one kind: some slide, some are served in full."""
    kinds = {any(_sliding_in_vllm(vllm_reads[f"published:{k}"])) for k in AS_PUBLISHED}
    assert kinds == {True, False}


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_reads_the_sizes_the_config_class_yields(
    vllm_reads: dict[str, dict[str, Any]], case: str
) -> None:
    answer = vllm_reads[case]
    if answer["error"] is not None:  # read only by its own code: test_remote_code.py
        assert "custom code" in str(answer["error"]), answer
        return
    arch = capacity.architecture_from_config(CASES[case], name=case)
    sizes = answer["sizes"]
    # LongcatFlashConfig's num_hidden_layers is twice its num_layers: each layer's two attentions.
    layers = arch.num_attention_layers if arch.model_type == "longcat_flash" else arch.num_decoder_layers
    ours = {
        "hidden_size": arch.hidden_size,
        "num_attention_heads": arch.num_attention_heads,
        "vocab_size": arch.vocab_size,
        "num_hidden_layers": layers,
    }
    theirs = {name: sizes[name] for name in ours if name != "num_hidden_layers"}
    if arch.short_conv_kernel:
        # Inkling's config class keeps the unpadded count in vocab_size; its tables are padded_vocab_size.
        theirs["vocab_size"] = sizes["padded_vocab_size"]
    assert ours == theirs | {"num_hidden_layers": answer["num_hidden_layers"]}
    # MLA caches one latent (its config's KV heads are the query heads'); Gemma 4's class refuses a global
    # read of a per-layer attribute (test_gemma4.py holds its layers).
    if arch.attention != "MLA" and sizes["num_key_value_heads"] is not None:
        assert arch.num_kv_heads == sizes["num_key_value_heads"]
