"""Which checkpoints vLLM serves as text generation, and which with its pooling runner: capacity's answer is
the engine's.

kvright sizes text generation (TPOT, the KV cache, ``--max-num-seqs``). A checkpoint ``vllm serve`` runs with
``--runner pooling`` (an embedding, classification, reward or scoring model) emits no output tokens, and an
encoder's layers keep no KV cache: planned as a decoder it got a KV budget, an output rate and flags that
mean nothing (a real BGE-M3 file, ``XLMRobertaModel``, came out at 179 sequences of fp8 KV cache).
``capacity.serving_runner`` applies vLLM's rule (``ModelConfig._get_default_runner_type``: a
sentence-transformers pooling module in ``modules.json``, else the registered class, else the name's
suffix) to the engine's vocabulary; here vLLM resolves the same folders (vllm_runner_probe.py: the model
config alone, no weights) and capacity must agree on every one, and refuse every pooling one in words that
say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import capacity

from .harness import HERE, VllmEnv

pytestmark = pytest.mark.conformance

CONFIGS = HERE.parent / "data" / "configs"
QWEN3 = json.loads((CONFIGS / "qwen3-32b" / "config.json").read_text())

#: BAAI/bge-m3's file as transformers 5 writes it (an XLM-RoBERTa encoder), its sizes.
XLM_ROBERTA = {
    "architectures": ["XLMRobertaModel"],
    "model_type": "xlm-roberta",
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "max_position_embeddings": 8194,
    "vocab_size": 250002,
    "type_vocab_size": 1,
    "pad_token_id": 1,
    "position_embedding_type": "absolute",
    "dtype": "float32",
}

#: A Pythia-410M with a classification head (Avent-IQ/pythia-410m's file, its sizes).
GPT_NEOX = {
    "architectures": ["GPTNeoXForSequenceClassification"],
    "model_type": "gpt_neox",
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "max_position_embeddings": 2048,
    "vocab_size": 50304,
    "rotary_pct": 0.25,
    "use_parallel_residual": True,
    "num_labels": 3,
    "dtype": "float16",
}


def _modules(*types: str) -> dict[str, str]:
    """A sentence-transformers modules.json listing these module types."""
    modules = [{"idx": i, "path": f"{i}_module", "type": t} for i, t in enumerate(types)]
    return {"modules.json": json.dumps(modules)}


ST = "sentence_transformers.models."

#: id -> (config.json, files beside it).
CASES: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "qwen3": (QWEN3, {}),
    # Qwen3-Embedding names a CausalLM; its sentence-transformers pooling module makes vLLM pool.
    "qwen3-embedding": (QWEN3, _modules(f"{ST}Transformer", f"{ST}Pooling", f"{ST}Normalize")),
    "qwen3-modules-without-pooling": (QWEN3, _modules(f"{ST}Transformer", f"{ST}Normalize")),
    # registered under a name whose class generates text
    "llama-model": ({**QWEN3, "architectures": ["Qwen2Model"], "model_type": "qwen2"}, {}),
    # registered pooling classes
    "qwen2-reward": ({**QWEN3, "architectures": ["Qwen2ForRewardModel"], "model_type": "qwen2"}, {}),
    "bge-m3": (XLM_ROBERTA, {}),
    # not registered: the suffix decides, and vLLM converts its base class
    "pythia-classifier": (GPT_NEOX, {}),
    "qwen3-classifier": ({**QWEN3, "architectures": ["Qwen3ForSequenceClassification"], "num_labels": 1}, {}),
    "pythia": ({**GPT_NEOX, "architectures": ["GPTNeoXForCausalLM"]}, {}),
}


@pytest.fixture(scope="module")
def vllm_runners(vllm_env: VllmEnv) -> dict[str, dict[str, Any]]:
    payload = json.dumps([{"id": i, "config": c, "files": files} for i, (c, files) in CASES.items()])
    out = vllm_env.run([str(HERE / "vllm_runner_probe.py")], stdin=payload, timeout=600)
    return {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}


def _modules_of(files: dict[str, str]) -> list[dict[str, Any]] | None:
    return json.loads(files["modules.json"]) if "modules.json" in files else None


@pytest.mark.parametrize("case", sorted(CASES))
def test_capacity_picks_the_runner_vllm_picks(vllm_runners: dict[str, dict[str, Any]], case: str) -> None:
    config, files = CASES[case]
    answer = vllm_runners[case]
    assert answer["error"] is None, answer
    assert capacity.serving_runner(config, _modules_of(files)) == answer["runner"]


def test_both_runners_are_reached(vllm_runners: dict[str, dict[str, Any]]) -> None:
    assert {answer["runner"] for answer in vllm_runners.values()} == {"generate", "pooling"}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pooling_checkpoint_is_refused_in_words_that_say_why(
    vllm_runners: dict[str, dict[str, Any]], case: str, tmp_path: Path
) -> None:
    """Through the CLI's reader too: the folder's modules.json is read beside its config.json."""
    config, files = CASES[case]
    (tmp_path / "config.json").write_text(json.dumps(config))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    if vllm_runners[case]["runner"] == "generate":
        assert capacity.load_architecture(str(tmp_path)).parameters > 0
        return
    with pytest.raises(capacity.ConfigError, match=r"pooling runner .* --runner pooling"):
        capacity.load_architecture(str(tmp_path))
