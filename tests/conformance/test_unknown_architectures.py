"""Every text-generation class vLLM 0.32 registers that capacity has no family for is refused, or read as a
standard decoder that weighs and caches what vLLM's own class builds.

capacity reads an architecture it does not know from the standard fields alone, with a warning, and refuses
one whose fields say it is something else (experts, MLA, state-space or convolution layers, nested
settings, recurrent stacks) or that lacks the standard names. Whether that line is drawn right is vLLM's to
say: for each class, transformers' own config class writes the config.json a checkpoint of it holds
(``vllm_unknown_configs_probe.py``: every field the class states, a family's own at their defaults), and
``vllm_weights_probe.py`` builds vLLM's class from it. Where capacity reads the file, its parameters must be
within 0.5 % of the class's (the standard reading has no LayerNorm biases or extra norms: StableLM's and
HyperCLOVA X's are a few thousand parameters) and its attention layers the same, layer by layer. A class
transformers has no config for (the repository's own code) or vLLM cannot build here is not compared; the
counts below keep the comparison from going quiet.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import capacity
from capacity.architecture import FAMILIES
from kvright_dev.procs import free_port

from .harness import HERE, VllmEnv

pytestmark = pytest.mark.conformance

FIELDS = {
    "hidden_size": 256,
    "intermediate_size": 512,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "vocab_size": 1024,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


@pytest.fixture(scope="module")
def unknown(vllm_env: VllmEnv) -> list[dict[str, Any]]:
    """Each class capacity does not know, its config.json as transformers writes it, and vLLM's build."""
    request = json.dumps({"skip": sorted(FAMILIES), "fields": FIELDS})
    out = vllm_env.run([str(HERE / "vllm_unknown_configs_probe.py")], stdin=request, timeout=300)
    classes = json.loads(out.strip().splitlines()[-1])
    made = [{"id": c["id"], "config": c["config"]} for c in classes if c["config"] is not None]
    out = vllm_env.run(
        [str(HERE / "vllm_weights_probe.py"), str(free_port())], stdin=json.dumps(made), timeout=900
    )
    built = {answer["id"]: answer for answer in json.loads(out.strip().splitlines()[-1])}
    return [c | {"vllm": built.get(c["id"])} for c in classes]


def test_every_class_capacity_does_not_know_is_refused_or_read_as_vllm_builds_it(
    unknown: list[dict[str, Any]],
) -> None:
    wrong, read, refused = [], [], []
    for case in unknown:
        if case["config"] is None:
            continue
        try:
            arch = capacity.architecture_from_config(case["config"])
        except capacity.ConfigError:
            refused.append(case["id"])
            continue
        answer = case["vllm"]
        if answer is None or answer["error"] is not None:
            continue  # vLLM cannot build it here: nothing to compare with
        read.append(case["id"])
        ours = [
            (
                arch.kv_heads_of(layer),
                arch.head_dim_of(layer),
                arch.sliding_window if layer.mixer == "sliding" else None,
            )
            for layer in arch.layers
            if layer.mixer in ("full", "sliding", "chunked")
        ]
        theirs = [
            (layer["kv_heads"], layer["head_size"], layer["sliding_window"]) for layer in answer["attention"]
        ]
        if abs(arch.parameters - answer["parameters"]) > 0.005 * answer["parameters"] or ours != theirs:
            wrong.append(
                f"{case['id']}: capacity reads {arch.parameters} parameters and attention {ours}; "
                f"vLLM's class builds {answer['parameters']} and {theirs}"
            )
    assert not wrong, "\n".join(wrong)
    # The comparison is real: classes of both kinds were made and judged (31 configs, 7 read, 21 refused
    # with vLLM 0.32 and transformers 5.19).
    assert len(read) >= 5 and len(refused) >= 10, (read, refused)
